/**
 * The blob store: uploaded originals, kept so that any shard can be rebuilt.
 *
 * Layout under the root (`<DATA_DIR>/blobs`):
 *   tmp/<random>                      an upload being received
 *   <account id>/<sha256[0:2]>/<sha256>  a stored original, content-addressed per account
 *
 * An upload streams into a temp file while it is hashed; `seal` fsyncs it;
 * `publish` renames it into place and fsyncs the directory, so a blob that a
 * committed file row names is on disk for good. Blobs are per account, so
 * deciding that a blob is unreferenced needs only that account's rows.
 */
import { createHash, randomBytes, type Hash } from 'node:crypto';
import { mkdir, open, readdir, rename, rm, stat, unlink, utimes, type FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/** A blob being received. */
export class BlobUpload {
  private readonly hash: Hash = createHash('sha256');
  /** Bytes received so far. */
  size = 0;
  private sha: string | null = null;

  constructor(
    private readonly store: BlobStore,
    private readonly file: FileHandle,
    /** Path of the temp file. */
    readonly tempPath: string,
  ) {}

  /** Appends a chunk (the caller serializes writes). */
  async write(chunk: Buffer): Promise<void> {
    this.hash.update(chunk);
    this.size += chunk.length;
    let offset = 0;
    while (offset < chunk.length) offset += (await this.file.write(chunk, offset, chunk.length - offset)).bytesWritten;
  }

  /** Flushes the bytes to disk and closes the file; returns the SHA-256 (hex). */
  async seal(): Promise<string> {
    await this.file.sync();
    await this.file.close();
    this.sha = this.hash.digest('hex');
    return this.sha;
  }

  /** Moves the sealed blob into the account's store (durably); an identical blob already there is kept. */
  async publish(accountId: string): Promise<string> {
    if (this.sha === null) throw new Error('publish before seal');
    const target = this.store.path(accountId, this.sha);
    await mkdir(dirname(target), { recursive: true });
    try {
      await stat(target);
      // Same content already stored: keep it, and mark it recently used so a sweep spares it.
      const now = new Date();
      await utimes(target, now, now);
      await unlink(this.tempPath);
    } catch {
      await rename(this.tempPath, target);
      await fsyncDir(dirname(target));
    }
    return this.sha;
  }

  /** Drops the temp file (refused or abandoned upload). */
  async discard(): Promise<void> {
    await this.file.close().catch(() => {});
    await rm(this.tempPath, { force: true });
  }
}

/** Originals on local disk. */
export class BlobStore {
  constructor(private readonly root: string) {}

  /** Creates the store's directories. */
  async init(): Promise<void> {
    await mkdir(join(this.root, 'tmp'), { recursive: true });
  }

  /** Starts receiving a blob. */
  async begin(): Promise<BlobUpload> {
    const tempPath = join(this.root, 'tmp', randomBytes(12).toString('hex'));
    return new BlobUpload(this, await open(tempPath, 'wx', 0o600), tempPath);
  }

  /** Where an account's blob lives. */
  path(accountId: string, sha: string): string {
    return join(this.root, accountId, sha.slice(0, 2), sha);
  }

  /** Removes every temp file: at start, when no upload of this process can own one. */
  async removeTemp(): Promise<number> {
    const names = await readdir(join(this.root, 'tmp')).catch(() => [] as string[]);
    for (const name of names) await rm(join(this.root, 'tmp', name), { force: true });
    return names.length;
  }

  /** Removes one blob (no error if absent). */
  async remove(accountId: string, sha: string): Promise<void> {
    await rm(this.path(accountId, sha), { force: true });
  }

  /**
   * Removes temp files untouched for `tempGraceMs` (an upload still receiving
   * touches its file with every chunk), and hands every stored blob, a chunk of
   * one account's at a time, to `collect`, which removes those no file
   * references (under the lock uploads publish under) and returns how many.
   * Returns how many files were removed; stops early once `signal` aborts.
   */
  async sweep(collect: (accountId: string, shas: string[]) => Promise<number>, tempGraceMs: number, signal?: AbortSignal): Promise<number> {
    const cutoff = Date.now() - tempGraceMs;
    let removed = 0;
    for (const name of await readdir(join(this.root, 'tmp')).catch(() => [] as string[])) {
      const path = join(this.root, 'tmp', name);
      const mtime = (await stat(path).catch(() => null))?.mtimeMs;
      if (mtime !== undefined && mtime <= cutoff) {
        await rm(path, { force: true });
        removed++;
      }
    }
    for (const accountId of await readdir(this.root)) {
      if (accountId === 'tmp') continue;
      let chunk: string[] = [];
      for (const prefix of await readdir(join(this.root, accountId)).catch(() => [] as string[])) {
        for (const sha of await readdir(join(this.root, accountId, prefix)).catch(() => [] as string[])) {
          if (signal?.aborted === true) return removed;
          chunk.push(sha);
          if (chunk.length === SWEEP_CHUNK) {
            removed += await collect(accountId, chunk);
            chunk = [];
          }
        }
      }
      if (chunk.length > 0) removed += await collect(accountId, chunk);
    }
    return removed;
  }
}

/** Blobs checked in one transaction by a sweep (one advisory lock each). */
const SWEEP_CHUNK = 100;

async function fsyncDir(path: string): Promise<void> {
  const dir = await open(path, 'r');
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
