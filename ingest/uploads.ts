/**
 * Accepting and deleting files: the blob store and the file rows move
 * together. An upload's blob is durable and its row and ingest job committed
 * before the caller answers 202; a blob no row references any more is removed
 * under the same per-blob lock uploads publish under.
 */
import { VfsError } from '../core/errors.js';
import type { Database } from '../db/database.js';
import {
  deleteFile,
  emptyPacks,
  lockBlobs,
  type PackedAt,
  packContents,
  recordUploads,
  referencedBlobs,
  unreferencedBlobs,
  unpackBlobs,
  type UploadLimits,
  type UploadOutcome,
  type UploadRecord,
} from '../db/files.js';
import { type BlobStore, type BlobUpload, SWEEP_BATCH, SWEEP_CHUNK } from './blob-store.js';
import { sweepSnapshots } from './shards/snapshots.js';

/** What the upload path tells the rest of ingest. */
export interface UploadEvents {
  /** A job was enqueued (wake the ingest loop). */
  enqueued(): void;
  /** A file was deleted: remove it from its workspace shard. */
  deleted(workspaceId: string, path: string): Promise<void>;
}

/** One account's uploads of a batch, their originals packed. */
interface PackedBatch {
  accountId: string;
  items: PendingUpload[];
  /** Each upload's place in a pack (none where the store does not pack). */
  places: Array<PackedAt | null>;
  packs: string[];
}

/** An upload waiting for its batch. */
interface PendingUpload {
  upload: BlobUpload;
  record: UploadRecord;
  limits: UploadLimits;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** Most uploads committed in one transaction. */
const MAX_BATCH = 256;

/** Uploads and deletions of files. */
export class Uploads {
  private readonly queue: PendingUpload[] = [];
  private flushing = false;

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
      throw new VfsError('UNAVAILABLE', { what: 'blob storage' }, { 'retry-after': '1' });
    }
  }

  /**
   * Seals the received blob and records the upload; resolves once its row and
   * job are committed. Uploads that arrive while a batch is being committed
   * form the next batch (group commit), so concurrent uploads of an account
   * share one lock on its usage and one WAL flush. On any failure the blob is
   * discarded unless a committed row already references it.
   */
  async accept(upload: BlobUpload, record: Omit<UploadRecord, 'blobSha256' | 'sizeBytes'>, limits: UploadLimits): Promise<void> {
    let sha: string;
    try {
      sha = await upload.seal();
    } catch {
      await upload.discard();
      throw new VfsError('UNAVAILABLE', { what: 'blob storage' }, { 'retry-after': '1' });
    }
    await new Promise<void>((resolve, reject) => {
      this.queue.push({ upload, record: { ...record, sizeBytes: upload.size, blobSha256: sha }, limits, resolve, reject });
      if (!this.flushing) void this.flush();
    });
  }

  /**
   * Commits the queue batch by batch. A batch's packs are put while the batch before it is being
   * recorded, and batches are recorded one after another, so that a path's uploads commit in the
   * order they came.
   */
  private async flush(): Promise<void> {
    this.flushing = true;
    // Neither step throws: each settles the uploads it fails.
    let recording: Promise<void> = Promise.resolve();
    try {
      for (;;) {
        if (this.queue.length === 0) {
          await recording;
          if (this.queue.length === 0) break;
        }
        const byAccount = new Map<string, PendingUpload[]>();
        for (const p of this.takeBatch()) byAccount.set(p.record.accountId, [...(byAccount.get(p.record.accountId) ?? []), p]);
        const packing = Promise.all([...byAccount].map(([accountId, items]) => this.pack(accountId, items)));
        const before = recording;
        recording = packing.then(async (batches) => {
          await before;
          await Promise.all(batches.map((batch) => (batch === null ? undefined : this.record(batch))));
        });
        // The next batch gathers while this one is packed and the one before recorded.
        await Promise.all([packing, before]);
      }
    } finally {
      this.flushing = false;
    }
  }

  /** The next batch: at most MAX_BATCH uploads, naming each path once (a second upload of a path waits for the next batch). */
  private takeBatch(): PendingUpload[] {
    const batch: PendingUpload[] = [];
    const paths = new Set<string>();
    while (this.queue.length > 0 && batch.length < MAX_BATCH) {
      const key = `${this.queue[0].record.workspaceId}/${this.queue[0].record.path}`;
      if (paths.has(key)) break;
      paths.add(key);
      batch.push(this.queue.shift()!);
    }
    return batch;
  }

  /** Puts the small originals of one account's uploads in packs (blob-store.ts), before their transaction opens; null when that failed (the uploads are then settled). */
  private async pack(accountId: string, items: PendingUpload[]): Promise<PackedBatch | null> {
    if (!this.blobs.packs) return { accountId, items, places: [], packs: [] };
    try {
      const packed = await this.blobs.pack(
        accountId,
        items.map((p) => p.upload),
      );
      return { accountId, items, ...packed };
    } catch {
      const error = new VfsError('UNAVAILABLE', { what: 'blob storage' }, { 'retry-after': '1' });
      for (const p of items) p.reject(error);
      await Promise.all(items.map((p) => p.upload.discard()));
      return null;
    }
  }

  /** Records one account's packed uploads in one transaction, and settles each. */
  private async record({ accountId, items, ...packed }: PackedBatch): Promise<void> {
    const published = new Set<number>();
    let outcomes: UploadOutcome[];
    let placedIn: Set<string>;
    try {
      ({ outcomes, packs: placedIn } = await this.db.inAccount(accountId, (tx) =>
        recordUploads(
          tx,
          accountId,
          items.map((p) => p.record),
          items[items.length - 1].limits,
          async (i) => {
            try {
              await items[i].upload.publish(accountId);
              published.add(i);
            } catch {
              throw new VfsError('UNAVAILABLE', { what: 'blob storage' }, { 'retry-after': '1' });
            }
          },
          packed.places,
        ),
      ));
    } catch (error) {
      // The commit may have failed with the database out of reach: then the published blobs and
      // the packs stay until a sweep removes them, and the callers hear of the failure at once.
      for (const p of items) p.reject(error);
      await Promise.all(items.map((p, i) => (published.has(i) ? this.collectLater(accountId, p.record.blobSha256) : p.upload.discard())));
      await this.collectPacksLater(accountId, packed.packs);
      return;
    }
    // A pack whose uploads were all refused, or whose blobs were all stored before, holds nothing anyone will read.
    const unused = packed.packs.filter((key) => !placedIn.has(key));
    if (unused.length > 0) await this.blobs.objects.deleteMany(unused).catch(() => {});
    this.events.enqueued();
    await Promise.all(
      items.map(async (p, i) => {
        const outcome = outcomes[i];
        if (outcome.ok) {
          p.resolve();
          if (outcome.replacedBlob !== null) await this.collectLater(accountId, outcome.replacedBlob);
        } else {
          await p.upload.discard();
          p.reject(outcome.error);
        }
      }),
    );
  }

  /** Deletes a file: its row and job, then its shard entry and (if unreferenced) its blob. False when absent. */
  async delete(accountId: string, workspaceId: string, path: string): Promise<boolean> {
    const sha = await this.db.inAccount(accountId, (tx) => deleteFile(tx, accountId, workspaceId, path));
    if (sha === null) return false;
    await this.events.deleted(workspaceId, path);
    await this.collect(accountId, sha);
    return true;
  }

  /** Removes an account's blob if no file references it. */
  async collect(accountId: string, sha: string): Promise<void> {
    await collectBlobs(this.db, this.blobs, accountId, [sha]);
  }

  /** Removes those of an account's blobs no file references (a deleted workspace's), SWEEP_BATCH at a time; returns how many. */
  async collectMany(accountId: string, shas: readonly string[]): Promise<number> {
    let removed = 0;
    for (let at = 0; at < shas.length; at += SWEEP_BATCH)
      removed += await collectUnreferenced(this.db, this.blobs, accountId, shas.slice(at, at + SWEEP_BATCH));
    return removed;
  }

  /**
   * Removes those of a failed batch's packs that no place names (the commit may have gone through
   * unseen: then its places name them), leaving them to the next sweep when the database is out of reach.
   */
  private async collectPacksLater(accountId: string, packs: readonly string[]): Promise<void> {
    if (packs.length === 0) return;
    await this.db.inAccount(accountId, async (tx) => this.blobs.objects.deleteMany(await emptyPacks(tx, accountId, packs))).catch(() => {});
  }

  /** `collect`, leaving a blob it cannot remove now (database out of reach) to the next sweep. */
  private async collectLater(accountId: string, sha: string): Promise<void> {
    await this.collect(accountId, sha).catch(() => {});
  }

  /** Removes upload temp files untouched for `tempGraceMs` and every blob no file references; returns how many. */
  async sweep(tempGraceMs: number, signal?: AbortSignal): Promise<number> {
    return sweepBlobs(this.db, this.blobs, tempGraceMs, signal);
  }
}

/**
 * Removes upload temp files untouched for `tempGraceMs`, every blob (with its
 * kept text) no file references, and shard snapshots no workspace names once
 * older than `tempGraceMs` (shards/snapshots.ts). Each blob is checked and removed under its blob lock, the
 * one an upload holds from publishing the blob until its row commits, so a
 * blob is never removed between the two: no grace period is needed for
 * blobs, and the sweep is safe from another process (the operator command).
 */
export async function sweepBlobs(db: Database, blobs: BlobStore, tempGraceMs: number, signal?: AbortSignal): Promise<number> {
  const snapshots = await sweepSnapshots(db, blobs.objects, tempGraceMs, signal);
  const collect = (accountId: string, shas: string[]): Promise<number> => collectUnreferenced(db, blobs, accountId, shas);
  return snapshots + (await blobs.sweep(collect, tempGraceMs, signal)) + (await sweepPacks(db, blobs, tempGraceMs, signal));
}

/**
 * Every pack's blobs that no file references (and with the last of them, the pack), and packs
 * no blob was ever placed in (a batch whose transaction failed) once older than `tempGraceMs`
 * (a pack is put before its transaction records its blobs). Packs are looked at SWEEP_PACKS of
 * one account at a time, in one statement for their places.
 */
async function sweepPacks(db: Database, blobs: BlobStore, tempGraceMs: number, signal?: AbortSignal): Promise<number> {
  const cutoff = Date.now() - tempGraceMs;
  let removed = 0;
  let accountId = '';
  let packs: { key: string; lastModified: Date }[] = [];
  const sweep = async (): Promise<void> => {
    if (packs.length === 0) return;
    const keys = packs.map((p) => p.key);
    const found = await db.inAccount(accountId, (tx) => packContents(tx, accountId, keys));
    removed += await collectInChunks(db, blobs, accountId, found.unreferenced);
    const unplaced = packs.filter((p) => !found.placed.has(p.key) && p.lastModified.getTime() <= cutoff).map((p) => p.key);
    if (unplaced.length > 0) {
      removed += await db.inAccount(accountId, async (tx) => {
        const empty = await emptyPacks(tx, accountId, unplaced);
        await blobs.objects.deleteMany(empty);
        return empty.length;
      });
    }
    packs = [];
  };
  for await (const { key, lastModified } of blobs.objects.list('packs/')) {
    if (signal?.aborted === true) return removed;
    const account = /^packs\/([^/]+)\/[^/]+$/.exec(key)?.[1];
    if (account === undefined) continue;
    if (account !== accountId || packs.length === SWEEP_PACKS) {
      await sweep();
      accountId = account;
    }
    packs.push({ key, lastModified });
  }
  await sweep();
  return removed;
}

/** Packs of one account a sweep looks at in one statement. */
const SWEEP_PACKS = 500;

/**
 * `collectBlobs` for many blobs (a sweep's, a deleted workspace's): those a file references are
 * passed over in one statement without their locks, and the others checked again and removed a
 * chunk at a time. A blob referenced at that first look and not since is left to the next sweep.
 */
async function collectUnreferenced(db: Database, blobs: BlobStore, accountId: string, shas: readonly string[]): Promise<number> {
  const unreferenced = await db.inAccount(accountId, (tx) => unreferencedBlobs(tx, accountId, shas));
  return collectInChunks(db, blobs, accountId, unreferenced);
}

/** `collectBlobs` over `shas` (found unreferenced without their locks), SWEEP_CHUNK at a time; returns how many went. */
async function collectInChunks(db: Database, blobs: BlobStore, accountId: string, shas: readonly string[]): Promise<number> {
  let removed = 0;
  for (let at = 0; at < shas.length; at += SWEEP_CHUNK) removed += await collectBlobs(db, blobs, accountId, shas.slice(at, at + SWEEP_CHUNK));
  return removed;
}

/**
 * Removes those of an account's blobs (and their kept texts) no file references, under their
 * blob locks (the ones an upload holds from publishing a blob until its row commits), in one
 * deletion; returns how many.
 */
async function collectBlobs(db: Database, blobs: BlobStore, accountId: string, shas: readonly string[]): Promise<number> {
  const { gone, emptied } = await db.inAccount(accountId, async (tx) => {
    await lockBlobs(tx, accountId, [...shas]);
    const keep = await referencedBlobs(tx, [...shas]);
    const gone = shas.filter((sha) => !keep.has(sha));
    const emptied = await unpackBlobs(tx, accountId, gone);
    await blobs.remove(accountId, gone);
    return { gone, emptied };
  });
  // Once the places are gone for good (a pack removed before that commit could be named by a
  // place that a failed commit kept); a failure here leaves the pack to the sweep.
  await blobs.objects.deleteMany(emptied);
  return gone.length;
}
