/**
 * Accepting and deleting files: the blob store and the file rows move
 * together. An upload's blob is durable and its row and ingest job committed
 * (one transaction) before the caller answers 202; a blob no row references
 * any more is removed under the same per-blob lock uploads publish under.
 */
import { VfsError } from '../core/errors.js';
import type { Database } from '../db/database.js';
import { deleteFile, lockBlob, recordUpload, referencedBlobs, type UploadLimits, type UploadRecord, uploadSettings } from '../db/files.js';
import type { BlobStore, BlobUpload } from './blob-store.js';

/** What the upload path tells the rest of ingest. */
export interface UploadEvents {
  /** A job was enqueued (wake the ingest loop). */
  enqueued(): void;
  /** A file was deleted: remove it from its workspace shard. */
  deleted(workspaceId: string, path: string): Promise<void>;
}

/** Uploads and deletions of files. */
export class Uploads {
  constructor(
    private readonly db: Database,
    private readonly blobs: BlobStore,
    private readonly events: UploadEvents,
  ) {}

  /** Starts receiving a blob. A failure here is the blob store's: 503. */
  async begin(): Promise<BlobUpload> {
    try {
      return await this.blobs.begin();
    } catch {
      throw new VfsError('UNAVAILABLE', { what: 'blob storage' });
    }
  }

  /**
   * Seals the received blob and records the upload. On any failure the blob
   * is discarded unless a committed row already references it.
   */
  async accept(upload: BlobUpload, record: Omit<UploadRecord, 'blobSha256' | 'sizeBytes'>, limits: UploadLimits): Promise<void> {
    let sha: string;
    try {
      sha = await upload.seal();
    } catch {
      await upload.discard();
      throw new VfsError('UNAVAILABLE', { what: 'blob storage' });
    }
    let published = false;
    let replacedBlob: string | null;
    try {
      ({ replacedBlob } = await this.db.inAccount(
        record.accountId,
        (tx) =>
          recordUpload(tx, { ...record, sizeBytes: upload.size, blobSha256: sha }, limits, async () => {
            try {
              await upload.publish(record.accountId);
              published = true;
            } catch {
              throw new VfsError('UNAVAILABLE', { what: 'blob storage' });
            }
          }),
        uploadSettings(limits),
      ));
    } catch (error) {
      if (published) await this.collect(record.accountId, sha);
      else await upload.discard();
      throw error;
    }
    this.events.enqueued();
    if (replacedBlob !== null) await this.collect(record.accountId, replacedBlob);
  }

  /** Deletes a file: its row and job, then its shard entry and (if unreferenced) its blob. False when absent. */
  async delete(accountId: string, workspaceId: string, path: string): Promise<boolean> {
    const sha = await this.db.inAccount(accountId, (tx) => deleteFile(tx, workspaceId, path));
    if (sha === null) return false;
    await this.events.deleted(workspaceId, path);
    await this.collect(accountId, sha);
    return true;
  }

  /** Removes an account's blob if no file references it. */
  async collect(accountId: string, sha: string): Promise<void> {
    await this.db.inAccount(accountId, async (tx) => {
      await lockBlob(tx, accountId, sha);
      if (!(await referencedBlobs(tx, [sha])).has(sha)) await this.blobs.remove(accountId, sha);
    });
  }

  /** Removes temp files and unreferenced blobs older than `graceMs`; returns how many. */
  async sweep(graceMs: number): Promise<number> {
    return this.blobs.sweep((accountId, shas) => this.db.inAccount(accountId, (tx) => referencedBlobs(tx, shas)), graceMs);
  }
}
