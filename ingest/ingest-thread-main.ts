/**
 * Entry point of the ingest thread: the ingest loop, its extraction pool and
 * every shard writer run here, off the HTTP thread, with their own database
 * pool. The HTTP thread talks to it through IngestThread (ingest-thread.ts).
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { parentPort, workerData } from 'node:worker_threads';
import { Database } from '../db/database.js';
import { openObjectStore } from '../storage/open-store.js';
import { BlobStore } from './blob-store.js';
import { ExtractPool } from './extract-pool.js';
import { IngestLoop } from './ingest-loop.js';
import type { IngestThreadData, IngestThreadReply, IngestThreadRequest } from './ingest-thread.js';
import { ShardRepair } from './shard-repair.js';
import { ShardSnapshots } from './shard-snapshots.js';
import { Shards, shardsRoot } from './shards.js';

const data = workerData as IngestThreadData;
const port = parentPort!;
const log = (message: string, error: unknown): void =>
  port.postMessage({ type: 'log', message: `${message}: ${error instanceof Error ? error.message : String(error)}` } satisfies IngestThreadReply);

const db = new Database(data.targets, (error) => log('ingest database connection lost', error));
const shards = new Shards(shardsRoot(data.dataDir));
const pool = new ExtractPool(data.extract);
const reportExtraction = (fileType: string, outcome: 'ok' | 'error' | 'capped', seconds: number): void =>
  port.postMessage({ type: 'extracted', fileType, outcome, seconds } satisfies IngestThreadReply);
const objects = openObjectStore(data.storage);
// Copies in transit when a process stopped: never a snapshot a row names.
await rm(join(data.dataDir, 'snapshots-tmp'), { recursive: true, force: true });
const snapshots = new ShardSnapshots(db, shards, objects, join(data.dataDir, 'snapshots-tmp'), data.snapshot, log);
const loop = new IngestLoop(
  db,
  new BlobStore(join(data.dataDir, 'blobs'), objects),
  pool,
  shards,
  log,
  data.loop,
  data.reportExtractions ? reportExtraction : null,
  snapshots,
);
const repair = new ShardRepair(db, shards, log);
// Before the first claim: every shard is checked against PostgreSQL (missing or out-of-date
// shards are rebuilt from the blobs; damaged ones were deleted before this thread started).
loop.between(() => repair.checkAll()).catch((error: unknown) => log('the start-up shard check failed', error));
loop.start();

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
      await loop.between(() => repair.rebuildRequested().catch((error: unknown) => log('shard rebuild requests could not be read', error)));
      return;
    case 'remove':
      await shards.remove(request.workspaceId, request.path);
      return;
    case 'drop':
      await shards.drop(request.workspaceId);
      return;
    case 'stop':
      await loop.stop();
      await pool.close();
      await shards.close();
      await db.close();
      return;
  }
}
