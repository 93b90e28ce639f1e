/**
 * Entry point of the ingest thread: the ingest loop, its extraction pool and
 * every shard writer run here, off the HTTP thread, with their own database
 * pool. The HTTP thread talks to it through IngestThread (ingest-thread.ts).
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import { reportThreadStats } from '../core/thread-stats.js';
import { CHANGES_CHANNEL, workspaceVersions } from '../db/changes.js';
import { Database } from '../db/database.js';
import { followReaderCloses, openReaderCount, setReaderLimits } from '../engine/index.js';
import { clearRebuildRequest, workspaceShards } from '../db/shard-repair.js';
import { openObjectStore } from '../storage/open-store.js';
import { BlobStore, handsOff } from './blob-store.js';
import { ExtractPool } from './extract/pool.js';
import { IngestLoop } from './ingest-loop.js';
import type { IngestThreadData, IngestThreadReply, IngestThreadRequest } from './ingest-thread.js';
import { ShardRepair } from './shards/repair.js';
import { ShardSnapshots } from './shards/snapshots.js';
import { ShardSync } from './shards/sync.js';
import { Shards, shardsRoot } from './shards/writers.js';

const data = workerData as IngestThreadData;
/** How often a node compares the versions of its copies with the committed ones (a NOTIFY may be lost). */
const POLL_MS = 2000;
/** Set once the thread is asked to stop: a cluster node's version poll and copy updates stop with it. */
let stopping = false;
let pollTimer: NodeJS.Timeout | undefined;
/** The copies a cluster node keeps up to date as changes come (null until the node says: all). */
let following: Set<string> | null = null;
const follows = (workspaceId: string): boolean => following === null || following.has(workspaceId);
const port = parentPort!;
const log = (message: string, error: unknown): void =>
  port.postMessage({ type: 'log', message: `${message}: ${error instanceof Error ? error.message : String(error)}` } satisfies IngestThreadReply);

const db = new Database(data.targets, (error) => log('ingest database connection lost', error));
// Writers and the readers this thread opens (to list or back up a shard) each count to the budget.
setReaderLimits({ maxOpen: data.openShards });
followReaderCloses();
const shards = new Shards(shardsRoot(data.dataDir), data.openShards);
reportThreadStats('ingest', () => shards.openWriters + openReaderCount());
const pool = new ExtractPool(data.extract, log);
const reportExtraction = (fileType: string, outcome: 'ok' | 'error' | 'capped', seconds: number): void =>
  port.postMessage({ type: 'extracted', fileType, outcome, seconds } satisfies IngestThreadReply);
const objects = openObjectStore(data.storage);
// Copies in transit when a process stopped: never a snapshot a row names.
await rm(join(data.dataDir, 'snapshots-tmp'), { recursive: true, force: true });
const snapshots = new ShardSnapshots(db, shards, objects, join(data.dataDir, 'snapshots-tmp'), data.snapshot, log);
const blobs = new BlobStore(join(data.dataDir, 'blobs'), objects, handsOff(data.storage, data.cluster), db);
const loop = new IngestLoop(db, blobs, pool, shards, log, data.loop, data.reportExtractions ? reportExtraction : null, snapshots, follows);
const repair = new ShardRepair(db, shards, log);
const sync = data.cluster
  ? new ShardSync(
      db,
      shards,
      blobs,
      objects,
      join(data.dataDir, 'snapshots-tmp'),
      (workspaceId, version) => port.postMessage({ type: 'applied', workspaceId, version } satisfies IngestThreadReply),
      (workspaceId, accountId, count) => snapshots.changed(workspaceId, accountId, count),
      log,
    )
  : null;
if (sync === null) {
  // Before the first claim: every shard is checked against PostgreSQL (missing or out-of-date
  // shards are rebuilt from the blobs; damaged ones were deleted before this thread started).
  loop.between(() => repair.checkAll()).catch((error: unknown) => log('the start-up shard check failed', error));
} else {
  // A node's shards are copies: those on disk are compared with the rows (never re-queued, which
  // would take ready files from every node), the others are filled on their first read.
  await followChanges(sync);
}
loop.start();

/**
 * Keeps this node's followed copies up to date: told by NOTIFY, and by polling in case one was
 * lost. A copy not followed (neither warm here nor read lately) is left behind until its next
 * read, which catches it up first (api/freshness.ts): a change costs the nodes that serve the
 * workspace, not every node that once held a copy.
 */
async function followChanges(sync: ShardSync): Promise<void> {
  const accounts = new Map<string, string>();
  const catchUp = (workspaceId: string, version?: number): void => {
    const accountId = accounts.get(workspaceId);
    if (accountId === undefined || stopping) return;
    sync.catchUp(workspaceId, accountId, version).catch((error: unknown) => log(`bringing the copy of workspace ${workspaceId} up to date failed`, error));
  };
  const dropped = async (workspaceId: string): Promise<void> => {
    sync.forget(workspaceId);
    accounts.delete(workspaceId);
    await shards.drop(workspaceId);
    port.postMessage({ type: 'dropped', workspaceId } satisfies IngestThreadReply);
  };
  // The copies on disk at start, compared one after another (a read of one compares it first).
  const held = async (): Promise<void> => {
    for (const ws of await workspaceShards(db, false)) {
      if (stopping) return;
      accounts.set(ws.id, ws.accountId);
      if (sync.version(ws.id) !== undefined || !(await shards.exists(ws.id))) continue;
      await sync.catchUp(ws.id, ws.accountId).catch((error: unknown) => log(`comparing the copy of workspace ${ws.id} failed`, error));
    }
  };
  const poll = async (): Promise<void> => {
    // Its timer or the listener's reconnection may fire while the thread closes its pool.
    if (stopping) return;
    try {
      const ids = sync.held();
      if (ids.length === 0) return;
      const versions = await workspaceVersions(db, ids);
      for (const id of ids) {
        const version = versions.get(id);
        if (version === undefined) await dropped(id);
        else if ((sync.version(id) ?? -1) < version && follows(id)) catchUp(id, version);
      }
    } catch (error) {
      log('polling workspace versions failed', error);
    }
  };
  await db.listen(
    CHANGES_CHANNEL,
    (payload) => {
      const [workspaceId, version, accountId] = payload.split(' ');
      if (version === 'gone') {
        void dropped(workspaceId).catch((error: unknown) => log(`dropping the copy of deleted workspace ${workspaceId} failed`, error));
        return;
      }
      if (accountId !== undefined) accounts.set(workspaceId, accountId);
      if (sync.version(workspaceId) !== undefined && follows(workspaceId)) catchUp(workspaceId, Number(version));
    },
    () => void poll(),
  );
  pollTimer = setInterval(() => void poll(), POLL_MS);
  pollTimer.unref();
  void held().catch((error: unknown) => log('the start-up comparison of shard copies failed', error));
}

port.on('message', (request: IngestThreadRequest) => {
  void handle(request).then(
    () => port.postMessage({ type: 'done', id: request.id } satisfies IngestThreadReply),
    (error: unknown) => port.postMessage({ type: 'failed', id: request.id, message: String(error) } satisfies IngestThreadReply),
  );
});

async function handle(request: IngestThreadRequest): Promise<void> {
  switch (request.type) {
    case 'poke':
      loop.poke();
      return;
    case 'checkShards':
      if (sync !== null) await rebuildCopies(sync).catch((error: unknown) => log('shard rebuild requests could not be read', error));
      else await loop.between(() => repair.rebuildRequested().catch((error: unknown) => log('shard rebuild requests could not be read', error)));
      return;
    case 'remove':
      await shards.remove(request.workspaceId, request.path);
      return;
    case 'drop':
      sync?.forget(request.workspaceId);
      await shards.drop(request.workspaceId);
      return;
    case 'evict':
      sync?.forget(request.workspaceId);
      await shards.evict(request.workspaceId);
      return;
    case 'follow':
      following = new Set(request.workspaceIds);
      snapshots.own(new Set(request.snapshotted));
      return;
    case 'catchUp':
      await sync?.catchUp(request.workspaceId, request.accountId, request.version, request.lost);
      return;
    case 'stop':
      stopping = true;
      clearInterval(pollTimer);
      await loop.stop();
      await sync?.settle();
      await pool.close();
      await shards.close();
      await db.close();
      return;
  }
}

/** A node's rebuild of the copies the operator asked for: emptied, then filled from the kept texts. */
async function rebuildCopies(sync: ShardSync): Promise<void> {
  for (const ws of await workspaceShards(db, true)) {
    if (!(await shards.exists(ws.id))) continue;
    await shards.clear(ws.id);
    sync.forget(ws.id);
    await sync.catchUp(ws.id, ws.accountId);
    await db.inAccount(ws.accountId, (tx) => clearRebuildRequest(tx, ws.id, ws.rebuildRequestedAt!));
    log(`shard of workspace ${ws.id} rebuilt on request`, 'from the kept texts');
  }
}
