/**
 * The object store on a local directory: `npm start`'s default. An object is the file
 * `<root>/<key>`, written by renaming a file into place (`put`, whose key is new: written in
 * place) and fsyncing its directory, so a key that a committed row names is on disk for good.
 * Storing a key again renames the same bytes over it (keys are content-addressed), which also
 * marks it recently used for a sweep's grace.
 */
import { type FileHandle, mkdir, open, readdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { LocalCopy, ObjectStore, StoredObject } from './object-store.js';

/** Directories a store remembers having made: 16 accounts' worth of blob and text directories. */
const MADE_KEPT = 8192;

/** Objects as files under a directory. */
export class LocalObjectStore implements ObjectStore {
  readonly location: string;
  /** Directories this process made or found lately (at most MADE_KEPT): a put into one skips making it. */
  private readonly made = new Set<string>();

  constructor(private readonly root: string) {
    this.location = pathToFileURL(root).href;
  }

  async init(): Promise<void> {
    await mkdir(this.root, { recursive: true });
  }

  /**
   * Runs `act`, which creates an entry in `dir`, once the directory is there: made unless this
   * process made or found it lately, and made again if it went away since (removed by hand).
   */
  private async inDir<T>(dir: string, act: () => Promise<T>): Promise<T> {
    if (!this.made.has(dir)) {
      await mkdir(dir, { recursive: true });
      // Bounded: with many accounts, forgetting costs one mkdir a directory, remembering all grows.
      if (this.made.size >= MADE_KEPT) this.made.clear();
      this.made.add(dir);
    }
    try {
      return await act();
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      await mkdir(dir, { recursive: true });
      return await act();
    }
  }

  async putFile(key: string, file: string): Promise<void> {
    const target = join(this.root, key);
    const dir = dirname(target);
    await this.inDir(dir, () => rename(file, target));
    await fsyncDir(dir);
  }

  async put(key: string, bytes: Buffer): Promise<void> {
    // A new key, which nothing names before this resolves: written in place (no temp file, no
    // rename), its bytes and its directory's entry synced together. A crash on the way leaves at
    // most a part under a key nothing names, which a sweep removes like any unnamed pack.
    const target = join(this.root, key);
    const dir = dirname(target);
    const file = await this.inDir(dir, () => open(target, 'wx', 0o600));
    try {
      await file.writeFile(bytes);
      await Promise.all([file.sync(), fsyncDir(dir)]);
    } catch (error) {
      await rm(target, { force: true });
      throw error;
    } finally {
      await file.close();
    }
  }

  async read(key: string): Promise<Buffer | null> {
    try {
      return await readFile(join(this.root, key));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
  }

  async readRange(key: string, offset: number, length: number): Promise<Buffer | null> {
    let file: FileHandle;
    try {
      file = await open(join(this.root, key), 'r');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw error;
    }
    try {
      const bytes = Buffer.allocUnsafe(length);
      let at = 0;
      while (at < length) {
        const { bytesRead } = await file.read(bytes, at, length - at, offset + at);
        if (bytesRead === 0) throw new Error(`${key} ends before byte ${offset + length}`);
        at += bytesRead;
      }
      return bytes;
    } finally {
      await file.close();
    }
  }

  async getFile(key: string): Promise<LocalCopy | null> {
    const path = join(this.root, key);
    if ((await stat(path).catch(() => null)) === null) return null;
    return { path, temporary: false, release: async () => {} };
  }

  async delete(key: string): Promise<void> {
    await rm(join(this.root, key), { force: true });
  }

  async deleteMany(keys: readonly string[]): Promise<void> {
    for (const key of keys) await this.delete(key);
  }

  async *list(prefix: string): AsyncIterable<StoredObject> {
    // Keys are `/`-separated paths: walk the directory the prefix names.
    const base = prefix.endsWith('/') ? prefix.slice(0, -1) : dirname(prefix);
    yield* walk(this.root, base === '.' ? '' : base, prefix);
  }

  close(): void {}
}

async function* walk(root: string, dir: string, prefix: string): AsyncIterable<StoredObject> {
  const entries = await readdir(join(root, dir), { withFileTypes: true }).catch(() => []);
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    const key = dir === '' ? entry.name : `${dir}/${entry.name}`;
    if (entry.isDirectory()) {
      if (`${key}/`.startsWith(prefix) || prefix.startsWith(`${key}/`)) yield* walk(root, key, prefix);
    } else if (entry.isFile() && key.startsWith(prefix)) {
      const info = await stat(join(root, key)).catch(() => null);
      if (info !== null) yield { key, lastModified: info.mtime };
    }
  }
}

/** Writes `bytes` to a new file at `path` (private to this user) and fsyncs it, so that it can be renamed into place whole. */
export async function writeSynced(path: string, bytes: Buffer): Promise<void> {
  const file = await open(path, 'wx', 0o600);
  try {
    await file.writeFile(bytes);
    await file.sync();
  } finally {
    await file.close();
  }
}

/** Fsyncs a directory, so that a rename into it survives a crash. */
export async function fsyncDir(path: string): Promise<void> {
  const dir = await open(path, 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
