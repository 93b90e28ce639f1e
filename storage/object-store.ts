/**
 * Where the bytes that must outlive a machine are kept: a local directory (the default) or an
 * S3-compatible bucket (s3-store.ts), chosen by `VFS_STORAGE_URL`. Keys are immutable once
 * written and, for originals, content-addressed, so no store needs conditional writes:
 * PostgreSQL decides what is referenced, and whoever removes an object decides it there.
 */

/** One stored object, as a listing gives it. */
export interface StoredObject {
  key: string;
  lastModified: Date;
}

/** A local file holding an object's bytes, to read while it is held. */
export interface LocalCopy {
  path: string;
  /** True for a downloaded copy, which the holder may move; false for the local store's own file. */
  temporary: boolean;
  /** Drops the copy (a downloaded one is deleted; the local store's own file is kept). */
  release(): Promise<void>;
}

/** A store of immutable objects by key (`/`-separated, no leading `/`). */
export interface ObjectStore {
  /** Where it is, for logs: `file:///…` or `s3://bucket/prefix`. */
  readonly location: string;
  /** Makes the directory or the bucket when missing. */
  init(): Promise<void>;
  /**
   * Stores the file at `file` under `key` and consumes it (moved or deleted); resolves once the
   * object is durable. An object already under `key` holds the same bytes (keys are
   * content-addressed) and is kept.
   */
  putFile(key: string, file: string): Promise<void>;
  /** Stores `bytes` under a new key; resolves once the object is durable. */
  put(key: string, bytes: Buffer): Promise<void>;
  /** The object's bytes in memory (for objects small enough to hold); null when there is no such object. */
  read(key: string): Promise<Buffer | null>;
  /** `length` bytes of the object from `offset` (for a part of a pack); null when there is no such object. */
  readRange(key: string, offset: number, length: number): Promise<Buffer | null>;
  /** A local file with the object's bytes, under `scratchDir` when it has to be fetched; null when there is no such object. */
  getFile(key: string, scratchDir: string): Promise<LocalCopy | null>;
  /** Removes an object; no error when there is none. */
  delete(key: string): Promise<void>;
  /** Removes objects, in as few requests as the store takes (S3: 1,000 a request); no error for absent ones. */
  deleteMany(keys: readonly string[]): Promise<void>;
  /** Every object whose key starts with `prefix` (in no promised order). */
  list(prefix: string): AsyncIterable<StoredObject>;
  /** Releases connections. */
  close(): void;
}
