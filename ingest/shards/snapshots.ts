/**
 * Shard snapshots in the object store, so that a shard lost with its machine is restored rather
 * than rebuilt file by file. Runs in the ingest thread, which writes every shard.
 *
 * A snapshot is LMDB's own consistent copy of the workspace's environment (`env.backup`, one
 * `data.mdb`), put under `shard-snapshots/<workspace id>/<made at>-<random>.mdb` (not `shards/`: the
 * default local store's root is the data directory, whose `shards/` holds the live shards); the
 * workspace row then
 * names it (the previous one is deleted once the row no longer names it). A workspace is
 * snapshotted once its changes settle (none for SETTLED_MS, ingest idle) after `everyChanges`
 * documents written or removed, or, while changes keep coming, once its first unsnapshotted
 * change is `everyMs` old: a copy costs the whole shard, so none is made between the batches of
 * a bulk upload (one every `everyChanges` files made 6 copies of a 716 MB shard while 20,000
 * files were ingested). A workspace whose changes have settled after SETTLED_CHANGES or more is
 * snapshotted too, at most once every `everyMs`: a bulk upload's shard is saved whole soon after
 * it ends, so that a copy filled on another node (a node killed, its workspaces read elsewhere)
 * takes one object request instead of one a file. In a cluster only the first warm node of a
 * workspace snapshots it, counting the changes it ingested and those its copy took from the
 * change log.
 *
 * At start, before any thread opens a shard, a missing shard is restored from its latest snapshot
 * (restoreMissingShards); shard repair then compares it with the file rows as for any shard and
 * re-queues what changed since, whose texts the object store keeps, so nothing is extracted again.
 */
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, readdir, rename, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Database } from '../../db/database.js';
import { workspaceShards } from '../../db/shard-repair.js';
import { namedSnapshots, setShardSnapshot, shardSnapshot } from '../../db/shard-snapshots.js';
import type { ObjectStore } from '../../storage/object-store.js';
import type { Shards } from './writers.js';

/** The key prefix of shard snapshots in the object store. */
export const SNAPSHOTS = 'shard-snapshots';

/** Changes (at most `everyChanges`) after which a workspace whose changes stopped is snapshotted: fewer fill from their texts in a round or two of requests. */
const SETTLED_CHANGES = 16;
/** How long a workspace's changes must have stopped for it to count as settled. */
const SETTLED_MS = 10_000;

/** When to snapshot (Config.snapshot). */
export interface SnapshotOptions {
  /** Changes (documents written or removed) after which an idle workspace is snapshotted; 0: never. */
  everyChanges: number;
  /** Age of the oldest unsnapshotted change after which a workspace is snapshotted even while ingest runs; 0: never. */
  everyMs: number;
}

/** Changes to a workspace's shard since its last snapshot. */
interface Pending {
  accountId: string;
  count: number;
  since: number;
  /** When the last of them was made. */
  last: number;
}

/** Makes and restores shard snapshots. */
export class ShardSnapshots {
  private readonly pending = new Map<string, Pending>();
  /** The workspaces this node snapshots (cluster mode: those it is the first warm node of); null: every one. */
  private owned: ReadonlySet<string> | null = null;
  /** When this process last snapshotted a settled workspace, for those within `everyMs`. */
  private readonly settledAt = new Map<string, number>();

  constructor(
    private readonly db: Database,
    private readonly shards: Shards,
    private readonly objects: ObjectStore,
    /** A directory on the shards' file system for copies in transit. */
    private readonly scratch: string,
    private readonly options: SnapshotOptions,
    private readonly log: (message: string, error: unknown) => void,
  ) {}

  /**
   * Makes this node snapshot only these workspaces (cluster mode). Changes to the others are still
   * counted (the list comes with the warm set's pass, after a new workspace's first changes).
   */
  own(workspaceIds: ReadonlySet<string>): void {
    this.owned = workspaceIds;
  }

  /** Notes `count` documents written to or removed from a workspace's shard. */
  changed(workspaceId: string, accountId: string, count: number, now = Date.now()): void {
    if (count === 0) return;
    const p = this.pending.get(workspaceId);
    if (p === undefined) {
      this.pending.set(workspaceId, { accountId, count, since: now, last: now });
    } else {
      p.count += count;
      p.last = now;
    }
  }

  /** Snapshots the workspaces that are due; `idle`: ingest has nothing queued. */
  async makeDue(idle: boolean, now = Date.now()): Promise<void> {
    if (idle) for (const [workspaceId, at] of this.settledAt) if (now - at >= this.options.everyMs) this.settledAt.delete(workspaceId);
    for (const [workspaceId, p] of [...this.pending]) {
      const byAge = this.options.everyMs > 0 && now - p.since >= this.options.everyMs;
      if (this.owned !== null && !this.owned.has(workspaceId)) {
        // Another node's to snapshot: the count is dropped once it would have been due by age.
        if (byAge) this.pending.delete(workspaceId);
        continue;
      }
      // Both wait for the workspace's changes to stop: ingest idle between two batches of a bulk
      // upload would copy the whole shard again every `everyChanges` files.
      const quiet = idle && this.options.everyChanges > 0 && now - p.last >= SETTLED_MS;
      const byCount = quiet && p.count >= this.options.everyChanges;
      const settled =
        quiet &&
        p.count >= Math.min(SETTLED_CHANGES, this.options.everyChanges) &&
        now - (this.settledAt.get(workspaceId) ?? Number.NEGATIVE_INFINITY) >= this.options.everyMs;
      if (!byCount && !byAge && !settled) continue;
      if (settled && !byCount && !byAge) this.settledAt.set(workspaceId, now);
      this.pending.delete(workspaceId);
      try {
        await this.snapshot(workspaceId, p.accountId);
      } catch (error) {
        // Counted again from now: the next try comes after as many changes or as long.
        this.pending.set(workspaceId, { ...p, since: now });
        this.log(`snapshot of the shard of workspace ${workspaceId} failed (tried again later)`, error);
      }
    }
  }

  /** Copies a workspace's shard into the object store and makes the workspace row name it. */
  async snapshot(workspaceId: string, accountId: string): Promise<string | null> {
    await mkdir(this.scratch, { recursive: true });
    const dir = await mkdtemp(join(this.scratch, 'snapshot-'));
    try {
      if (!(await this.shards.backup(workspaceId, dir))) return null;
      const key = `${SNAPSHOTS}/${workspaceId}/${Date.now().toString(36)}-${randomBytes(4).toString('hex')}.mdb`;
      await this.objects.putFile(key, join(dir, 'data.mdb'));
      const previous = await this.db.inAccount(accountId, (tx) => setShardSnapshot(tx, workspaceId, key));
      // The workspace was deleted meanwhile (undefined): its snapshot goes too.
      if (previous === undefined) await this.objects.delete(key);
      else if (previous !== null) await this.objects.delete(previous);
      return previous === undefined ? null : key;
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  }
}

/** What restoring reports. */
export interface RestoreLog {
  info(message: string): void;
  error(message: string, error: unknown): void;
}

/**
 * At start, before any thread opens a shard (after dropDamagedShards): installs the latest
 * snapshot of every workspace whose shard directory is missing (a new machine, a lost disk, a
 * shard deleted as damaged). Shard repair then brings each up to date with the file rows. A
 * read would otherwise create the missing shard empty first. Returns how many were restored.
 */
export async function restoreMissingShards(db: Database, objects: ObjectStore, root: string, scratch: string, log: RestoreLog): Promise<number> {
  const present = new Set(await readdir(root).catch(() => [] as string[]));
  let restored = 0;
  for (const ws of await workspaceShards(db, false)) {
    if (present.has(ws.id)) continue;
    const started = performance.now();
    try {
      if (!(await restoreShard(db, objects, join(root, ws.id), scratch, ws.id, ws.accountId, log))) continue;
      restored++;
      log.info(`shard of workspace ${ws.id} restored from its snapshot in ${Math.round(performance.now() - started)} ms`);
    } catch (error) {
      log.error(`restoring the shard of workspace ${ws.id} from its snapshot failed; it is rebuilt from its files`, error);
    }
  }
  return restored;
}

/** Installs the workspace's latest snapshot as its (missing) shard in `dir`; false when it has none or the object is gone. */
export async function restoreShard(
  db: Database,
  objects: ObjectStore,
  dir: string,
  scratch: string,
  workspaceId: string,
  accountId: string,
  log: RestoreLog,
): Promise<boolean> {
  const key = await db.inAccount(accountId, (tx) => shardSnapshot(tx, workspaceId));
  if (key === null) return false;
  await mkdir(scratch, { recursive: true });
  const copy = await objects.getFile(key, scratch);
  if (copy === null) {
    log.error(`the snapshot of the shard of workspace ${workspaceId} is missing from the object store; it is rebuilt from its files`, key);
    return false;
  }
  const partial = `${dir}.restoring`;
  try {
    await rm(partial, { recursive: true, force: true });
    await mkdir(partial, { recursive: true });
    // A download is ours to move; the local store's own file is copied.
    if (copy.temporary) await rename(copy.path, join(partial, 'data.mdb'));
    else await copyFile(copy.path, join(partial, 'data.mdb'));
    await rename(partial, dir);
  } finally {
    await copy.release();
    await rm(partial, { recursive: true, force: true });
  }
  return true;
}

/**
 * Removes snapshot objects no workspace row names (a snapshot whose row update never came, a
 * workspace deleted while its snapshots were being removed) once older than `graceMs`, so that a
 * snapshot being recorded right now is spared. Returns how many it removed.
 */
export async function sweepSnapshots(db: Database, objects: ObjectStore, graceMs: number, signal?: AbortSignal): Promise<number> {
  const cutoff = Date.now() - graceMs;
  const byWorkspace = new Map<string, string[]>();
  for await (const { key, lastModified } of objects.list(`${SNAPSHOTS}/`)) {
    if (signal?.aborted === true) return 0;
    if (lastModified.getTime() > cutoff) continue;
    const workspaceId = key.split('/')[1];
    byWorkspace.set(workspaceId, [...(byWorkspace.get(workspaceId) ?? []), key]);
  }
  if (byWorkspace.size === 0) return 0;
  const named = await db.asOwner((tx) => namedSnapshots(tx, [...byWorkspace.keys()]));
  let removed = 0;
  for (const keys of byWorkspace.values()) {
    for (const key of keys) {
      if (named.has(key)) continue;
      await objects.delete(key);
      removed++;
    }
  }
  return removed;
}
