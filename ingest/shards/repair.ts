/**
 * Shard repair: a workspace shard is a cache of its files rows and blobs, and
 * is brought back in line with them here. Runs in the ingest thread, between
 * batches (IngestLoop.between), so no shard write is under way meanwhile.
 *
 * For each workspace checked:
 * - every shard is first opened in a child process (probe.ts): one that
 *   cannot be opened or read there is deleted, and so rebuilt, without this
 *   process ever opening it (lmdb-js crashes on a damaged file);
 * - an operator's rebuild request empties the shard in place first;
 * - documents whose path has no file row any more are removed (a deletion
 *   whose shard step was cut short by a crash);
 * - `ready` files the shard lacks, or holds at another version, go back to
 *   `pending` with an ingest job, and the normal ingest path writes them again
 *   from their blobs; `pending` files without a job get one.
 *
 * At start (`dropDamagedShards`, then `checkAll`) every workspace is checked
 * (cost: a child process, and two reads of each shard's paths plus one query
 * per workspace), and shard directories of workspaces that no longer exist
 * are removed; afterwards only the workspaces the operator names are visited.
 */
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Database } from '../../db/database.js';
import { type ShardWorkspace, clearRebuildRequest, requeueFiles, shardFiles, workspaceShards } from '../../db/shard-repair.js';
import { probeShards } from './probe.js';
import type { Shards } from './writers.js';

/** What one check did. */
export interface RepairResult {
  /** Files put back in the ingest queue. */
  requeued: number;
  /** Shard documents removed because no file row has their path. */
  removed: number;
  /** True when the shard was emptied or deleted before being refilled. */
  reset: boolean;
}

/** Checks and repairs workspace shards against PostgreSQL. */
export class ShardRepair {
  constructor(
    private readonly db: Database,
    private readonly shards: Shards,
    private readonly log: (message: string, error: unknown) => void,
  ) {}

  /** Checks every workspace (at start, after `dropDamagedShards`); rebuilds those with a request. */
  async checkAll(): Promise<void> {
    await this.visit(await workspaceShards(this.db, false), new Map());
  }

  /** Rebuilds the workspaces the operator asked for. */
  async rebuildRequested(): Promise<void> {
    const workspaces = await workspaceShards(this.db, true);
    await this.visit(workspaces, await this.dropDamaged(workspaces));
  }

  /** Probes the workspaces' shards and deletes the damaged ones; returns them, each with why. */
  private async dropDamaged(workspaces: ShardWorkspace[]): Promise<Map<string, string>> {
    const damaged = await probeShards(workspaces.map((ws) => this.shards.dir(ws.id)));
    const out = new Map<string, string>();
    for (const ws of workspaces) {
      const why = damaged.get(this.shards.dir(ws.id));
      if (why === undefined) continue;
      this.log(`shard of workspace ${ws.id} cannot be opened; deleting it to rebuild it`, why);
      await this.shards.drop(ws.id);
      out.set(ws.id, why);
    }
    return out;
  }

  private async visit(workspaces: ShardWorkspace[], damaged: Map<string, string>): Promise<void> {
    for (const ws of workspaces) {
      try {
        const r = await this.repair(ws, damaged.has(ws.id));
        if (r.requeued > 0 || r.removed > 0 || r.reset) {
          const what = ws.rebuildRequestedAt !== null ? 'rebuilt on request' : r.reset ? 'rebuilt' : 'repaired';
          this.log(`shard of workspace ${ws.id} ${what}`, `${r.requeued} files re-queued, ${r.removed} stale entries removed`);
        }
      } catch (error) {
        this.log(`shard check of workspace ${ws.id} failed (tried again at the next start or request)`, error);
      }
    }
  }

  /** Brings one workspace's shard in line with its files; `dropped`: its damaged shard was just deleted. */
  async repair(ws: ShardWorkspace, dropped: boolean): Promise<RepairResult> {
    let contents: Map<string, string>;
    let reset = dropped;
    if (dropped) {
      contents = new Map();
    } else if (ws.rebuildRequestedAt !== null) {
      await this.shards.clear(ws.id);
      contents = new Map();
      reset = true;
    } else {
      contents = (await this.shards.contents(ws.id)) ?? new Map();
    }
    const files = await this.db.inAccount(ws.accountId, (tx) => shardFiles(tx, ws.id));
    const rows = new Set(files.map((f) => f.path));
    let removed = 0;
    for (const path of contents.keys()) {
      if (rows.has(path)) continue;
      await this.shards.remove(ws.id, path);
      removed++;
    }
    const lacking = files
      .filter((f) => (f.status === 'ready' && contents.get(f.path) !== f.blobSha256) || (f.status === 'pending' && !f.hasJob))
      .map((f) => f.path);
    const requeued = await this.db.inAccount(ws.accountId, async (tx) => {
      const n = await requeueFiles(tx, ws.id, lacking);
      if (ws.rebuildRequestedAt !== null) await clearRebuildRequest(tx, ws.id, ws.rebuildRequestedAt);
      return n;
    });
    return { requeued, removed, reset };
  }
}

/**
 * Before the service opens any shard (at start, before the ingest thread and
 * the read pool): removes the shard directories of workspaces that no longer
 * exist (a deletion cut short), and deletes every shard that the probe cannot
 * open, so that no thread of this process ever opens it. The ingest thread's
 * `checkAll` then finds those shards missing and re-queues their files.
 */
export async function dropDamagedShards(db: Database, root: string, log: (message: string) => void): Promise<void> {
  // Directories first: one whose workspace is missing from the later listing was deleted (ids
  // are never reused), never one created meanwhile.
  const dirs = await readdir(root).catch(() => [] as string[]);
  const live = new Set((await workspaceShards(db, false)).map((ws) => ws.id));
  const remove = (name: string): Promise<void> => rm(join(root, name), { recursive: true, force: true });
  for (const name of dirs) {
    if (live.has(name)) continue;
    log(`removing the shard of deleted workspace ${name}`);
    await remove(name);
  }
  const present = dirs.filter((name) => live.has(name));
  let damaged: Map<string, string>;
  try {
    damaged = await probeShards(present.map((name) => join(root, name)));
  } catch (error) {
    // The probe itself failed (not a shard): start anyway rather than not at all.
    log(`the shard probe failed, shards were not checked: ${error instanceof Error ? error.message : String(error)}`);
    return;
  }
  for (const name of present) {
    const why = damaged.get(join(root, name));
    if (why === undefined) continue;
    log(`the shard of workspace ${name} cannot be opened (${why}); deleting it: its files are re-ingested from their blobs`);
    await remove(name);
  }
}
