/**
 * The blob store: uploaded originals, kept so that any shard can be rebuilt.
 *
 * An upload streams into a temp file under `<DATA_DIR>/blobs/tmp` while it is hashed; `seal`
 * fsyncs it; `publish` hands it to the object store (storage/), local directory or S3 bucket,
 * under the key `blobs/<account id>/<sha256[0:2]>/<sha256>`, and resolves once it is durable
 * there, so a blob that a committed file row names is stored for good. Blobs are per account
 * (an account's upload never reveals whether another holds the same bytes), so deciding that a
 * blob is unreferenced needs only that account's rows.
 */
import { createHash, randomBytes, type Hash } from 'node:crypto';
import { mkdir, open, readdir, rm, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import type { LocalCopy, ObjectStore } from '../storage/object-store.js';

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

  /** Stores the sealed blob in the account's part of the object store (durably); an identical blob already there is kept. */
  async publish(accountId: string): Promise<string> {
    if (this.sha === null) throw new Error('publish before seal');
    await this.store.objects.putFile(blobKey(accountId, this.sha), this.tempPath);
    return this.sha;
  }

  /** Drops the temp file (refused or abandoned upload). */
  async discard(): Promise<void> {
    await this.file.close().catch(() => {});
    await rm(this.tempPath, { force: true });
  }
}

/** The object key of an account's blob. */
export function blobKey(accountId: string, sha: string): string {
  return `blobs/${accountId}/${sha.slice(0, 2)}/${sha}`;
}

/** Originals: received on local disk, kept in the object store. */
export class BlobStore {
  private readonly tmp: string;

  constructor(
    /** Where uploads are received and fetched blobs are read (`<DATA_DIR>/blobs`). */
    root: string,
    /** Where blobs are kept. */
    readonly objects: ObjectStore,
  ) {
    this.tmp = join(root, 'tmp');
  }

  /** Creates the temp directory and the store's directory or bucket. */
  async init(): Promise<void> {
    await mkdir(this.tmp, { recursive: true });
    await this.objects.init();
  }

  /** Starts receiving a blob. */
  async begin(): Promise<BlobUpload> {
    const tempPath = join(this.tmp, randomBytes(12).toString('hex'));
    return new BlobUpload(this, await open(tempPath, 'wx', 0o600), tempPath);
  }

  /** A local file holding an account's blob, to read until released; null when it is not stored. */
  open(accountId: string, sha: string): Promise<LocalCopy | null> {
    return this.objects.getFile(blobKey(accountId, sha), this.tmp);
  }

  /** Removes every temp file: at start, when no upload of this process can own one. */
  async removeTemp(): Promise<number> {
    const names = await readdir(this.tmp).catch(() => [] as string[]);
    for (const name of names) await rm(join(this.tmp, name), { force: true });
    return names.length;
  }

  /** Removes one blob (no error if absent). */
  async remove(accountId: string, sha: string): Promise<void> {
    await this.objects.delete(blobKey(accountId, sha));
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
    for (const name of await readdir(this.tmp).catch(() => [] as string[])) {
      const path = join(this.tmp, name);
      const mtime = (await stat(path).catch(() => null))?.mtimeMs;
      if (mtime !== undefined && mtime <= cutoff) {
        await rm(path, { force: true });
        removed++;
      }
    }
    const chunks = new Map<string, string[]>();
    for await (const { key } of this.objects.list('blobs/')) {
      if (signal?.aborted === true) return removed;
      const parts = /^blobs\/([^/]+)\/[0-9a-f]{2}\/([0-9a-f]{64})$/.exec(key);
      if (parts === null) continue; // the local store's temp directory, or not a blob
      const [, accountId, sha] = parts;
      const chunk = chunks.get(accountId) ?? [];
      chunk.push(sha);
      chunks.set(accountId, chunk);
      if (chunk.length === SWEEP_CHUNK) {
        removed += await collect(accountId, chunk);
        chunks.delete(accountId);
      }
    }
    for (const [accountId, chunk] of chunks) removed += await collect(accountId, chunk);
    return removed;
  }
}

/** Blobs checked in one transaction by a sweep (one advisory lock each). */
const SWEEP_CHUNK = 100;
