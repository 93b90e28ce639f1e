/**
 * Copies of shards on a node of a cluster (docs/many-nodes.md, "Copies").
 * Each node's shards are caches of PostgreSQL's rows and the object
 * store's kept texts: a node brings its copy of a workspace up to the
 * workspace's committed version from the change log (db/changes.ts), reading
 * each changed path's row as it is now and its text from the store; it never
 * extracts. Runs in the ingest thread, through the same writers as ingest.
 *
 * - Incremental: the paths logged after the version the copy holds. A path
 *   whose row is `ready` gets the row's document (unless the copy already
 *   holds it, metadata included); a path without a row is removed; a path
 *   `pending` or in `error` is left as it is (as on the node that ingests it).
 * - Whole: when the copy's version is unknown (after a start), the log no
 *   longer reaches back to it, or the shard is missing: a missing shard is
 *   first restored from its snapshot, then every row is compared with the
 *   copy (only what differs is fetched), and documents without a row go.
 *
 * Applying is idempotent and goes by rows, not by replaying entries, so a copy
 * converges whatever the order in which ingest's own writes and the log meet.
 */
import pMap from 'p-map';
import { changesSince, workspaceState } from '../../db/changes.js';
import type { Database } from '../../db/database.js';
import type { JobFile } from '../../db/file-rows.js';
import { requeueFiles } from '../../db/shard-repair.js';
import type { DocMeta } from '../../engine/shard-format.js';
import { sameMeta } from '../../engine/shard-writer.js';
import type { ObjectStore } from '../../storage/object-store.js';
import type { BlobStore } from '../blob-store.js';
import { restoreShard } from './snapshots.js';
import { type ShardDoc, type Shards, shardDoc } from './writers.js';

/** Documents written to a shard in one transaction while syncing (bounds the texts held at once). */
const WRITE_BATCH = 256;
/** Texts fetched from the object store at once while syncing: a copy filled from a remote store waits on round trips, not on bandwidth. */
const FETCHES_IN_FLIGHT = 8;

/** What one sync did. */
export interface SyncResult {
  /** The version the copy holds now; null when the workspace is gone. */
  version: number | null;
  /** Documents written, removed. */
  written: number;
  removed: number;
  /** True when the whole workspace was compared (not only the logged paths). */
  whole: boolean;
  /** True when the shard was restored from its snapshot first. */
  restored: boolean;
}

/** Brings this node's copies of shards up to their workspaces' versions. */
export class ShardSync {
  /** Workspace → the version this node's copy holds (known once synced in this process). */
  private readonly applied = new Map<string, number>();
  /** Bumped when a workspace's copy is forgotten: a sync that began before records nothing. */
  private readonly epochs = new Map<string, number>();
  /** The sync in progress per workspace: one at a time. */
  private readonly running = new Map<string, Promise<SyncResult>>();

  constructor(
    private readonly db: Database,
    private readonly shards: Shards,
    private readonly blobs: BlobStore,
    private readonly objects: ObjectStore,
    /** A directory on the shards' file system for snapshots in transit. */
    private readonly scratch: string,
    /** Told of each version a copy reaches. */
    private readonly onApplied: (workspaceId: string, version: number) => void,
    /** Told of the documents each sync wrote to or removed from a copy (they count toward its snapshot). */
    private readonly onChanged: (workspaceId: string, accountId: string, count: number) => void,
    private readonly log: (message: string, error: unknown) => void,
  ) {}

  /** The version this node's copy of a workspace holds, if synced in this process. */
  version(workspaceId: string): number | undefined {
    return this.applied.get(workspaceId);
  }

  /** The workspaces whose copy this process has synced. */
  held(): string[] {
    return [...this.applied.keys()];
  }

  /** Resolves once the syncs in progress have ended (the thread stopping waits for them before closing its pools). */
  async settle(): Promise<void> {
    await Promise.allSettled([...this.running.values()]);
  }

  /** Forgets a workspace (deleted, or its copy dropped). */
  forget(workspaceId: string): void {
    this.applied.delete(workspaceId);
    this.epochs.set(workspaceId, (this.epochs.get(workspaceId) ?? 0) + 1);
  }

  /**
   * Brings the workspace's copy to at least `target` (or to the version committed now when
   * `target` is undefined); `lost`: its directory went missing under the running service.
   */
  async catchUp(workspaceId: string, accountId: string, target?: number, lost = false): Promise<SyncResult> {
    for (;;) {
      const have = this.applied.get(workspaceId);
      if (!lost && have !== undefined && target !== undefined && have >= target) {
        return { version: have, written: 0, removed: 0, whole: false, restored: false };
      }
      const inFlight = this.running.get(workspaceId);
      if (inFlight !== undefined) {
        // Whatever it reaches may be enough; else sync again after it.
        await inFlight.catch(() => {});
        if (!lost) continue;
      }
      const run = this.sync(workspaceId, accountId, lost);
      this.running.set(workspaceId, run);
      try {
        return await run;
      } finally {
        if (this.running.get(workspaceId) === run) this.running.delete(workspaceId);
      }
    }
  }

  private async sync(workspaceId: string, accountId: string, lost: boolean): Promise<SyncResult> {
    const epoch = this.epochs.get(workspaceId) ?? 0;
    let restored = false;
    if (lost) {
      this.applied.delete(workspaceId);
      await this.shards.release(workspaceId);
    }
    const have = this.applied.get(workspaceId);
    if (!(await this.shards.exists(workspaceId))) {
      this.applied.delete(workspaceId);
      try {
        restored = await restoreShard(this.db, this.objects, this.shards.dir(workspaceId), this.scratch, workspaceId, accountId, {
          info: () => {},
          error: (message, error) => this.log(message, error),
        });
      } catch (error) {
        this.log(`restoring the shard of workspace ${workspaceId} from its snapshot failed; it is filled from the kept texts`, error);
      }
    }
    if (have !== undefined && this.applied.has(workspaceId)) {
      const changes = await this.db.inAccount(accountId, (tx) => changesSince(tx, workspaceId, have));
      if (changes.version === null) return this.gone(workspaceId);
      if (changes.paths !== null) {
        const { written, removed } = await this.apply(workspaceId, accountId, changes.paths);
        this.reached(workspaceId, changes.version, epoch);
        return { version: changes.version, written, removed, whole: false, restored };
      }
    }
    const state = await this.db.inAccount(accountId, (tx) => workspaceState(tx, workspaceId));
    if (state.version === null) return this.gone(workspaceId);
    const rows = new Set(state.files.map((f) => f.path));
    const stale = [...((await this.shards.contents(workspaceId)) ?? new Map<string, string>()).keys()].filter((path) => !rows.has(path));
    const paths = [...state.files.map((f) => ({ ...f, exists: true })), ...stale.map((path) => ({ path, file: null, exists: false }))];
    const { written, removed } = await this.apply(workspaceId, accountId, paths);
    this.reached(workspaceId, state.version, epoch);
    return { version: state.version, written, removed, whole: true, restored };
  }

  private gone(workspaceId: string): SyncResult {
    this.applied.delete(workspaceId);
    return { version: null, written: 0, removed: 0, whole: false, restored: false };
  }

  private reached(workspaceId: string, version: number, epoch: number): void {
    // Forgotten meanwhile (dropped or evicted): what was written is compared whole at the next sync.
    if ((this.epochs.get(workspaceId) ?? 0) !== epoch) return;
    const before = this.applied.get(workspaceId);
    if (before !== undefined && before >= version) return;
    this.applied.set(workspaceId, version);
    this.onApplied(workspaceId, version);
  }

  /** Makes the copy hold each path as its row says; returns the documents written and removed. */
  private async apply(
    workspaceId: string,
    accountId: string,
    paths: Array<{ path: string; file: JobFile | null; exists: boolean }>,
  ): Promise<{ written: number; removed: number }> {
    let removed = 0;
    const wanted: JobFile[] = [];
    for (const { path, file, exists } of paths) {
      const held = this.shards.lookup(workspaceId, path);
      if (!exists) {
        if (held === undefined) continue;
        await this.shards.remove(workspaceId, path);
        removed++;
        continue;
      }
      if (file !== null && (held === undefined || !holds(held, file))) wanted.push(file);
    }
    let written = 0;
    const missing: string[] = [];
    for (let i = 0; i < wanted.length; i += WRITE_BATCH) {
      const texts = await pMap(wanted.slice(i, i + WRITE_BATCH), (file) => this.blobs.text(accountId, file.blobSha256, file.textIsOriginal), {
        concurrency: FETCHES_IN_FLIGHT,
      });
      const docs: ShardDoc[] = [];
      texts.forEach((text, j) => {
        const file = wanted[i + j];
        if (text === null) missing.push(file.path);
        else docs.push(shardDoc(file, text));
      });
      if (docs.length === 0) continue;
      await this.shards.write(workspaceId, docs);
      written += docs.length;
    }
    if (missing.length > 0) {
      // No text (keeping it failed after extraction, or the original is gone): ingest tries those files again.
      const n = await this.db.inAccount(accountId, (tx) => requeueFiles(tx, workspaceId, missing));
      this.log(`workspace ${workspaceId}: ${missing.length} ready files have no kept text`, `${n} re-queued for extraction`);
    }
    this.onChanged(workspaceId, accountId, written + removed);
    return { written, removed };
  }
}

/** True when a shard's document is what a ready row describes. */
function holds(held: DocMeta, file: JobFile): boolean {
  return held.version === file.blobSha256 && sameMeta(held, { ...file, claims: file.visibility });
}
