/**
 * A workspace's shard lost with its machine: restored from its snapshot in the object store,
 * against rebuilt from the texts kept there (no snapshot), in one run on the same data.
 *
 *   node --import tsx bench/restore.ts <dir> [files=all] [store=local|s3]
 *
 * Ingests the tree (the first `files` files by path) with one snapshot made once ingest is idle,
 * stops the service, deletes the shards, and times a start until every file is readable again:
 * first with the snapshot, then with the snapshot deleted too. `s3` keeps everything on a
 * single-node Swift cluster with its S3 API on loopback (the tests' server).
 */
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../service/config.js';
import { openObjectStore } from '../storage/open-store.js';
import { startSwift, type SwiftCluster, swiftStorageEnv } from '../test/helpers/swift.js';
import { call, duBytes, startBenchService, uploadAll, waitReady, walk } from './lib.js';

const [dir, filesArg, storeArg] = process.argv.slice(2);
if (dir === undefined) {
  process.stderr.write('usage: node --import tsx bench/restore.ts <dir> [files=all] [store=local|s3]\n');
  process.exit(2);
}
const all = await walk(dir);
const files = filesArg === undefined || filesArg === 'all' ? all : all.slice(0, Number(filesArg));
const swift: SwiftCluster | null = storeArg === 's3' ? await startSwift() : null;
const dataDir = await mkdtemp(join(tmpdir(), 'vfs-bench-restore-'));
const env: Record<string, string> = {
  DATA_DIR: dataDir,
  // A snapshot whenever ingest goes idle (files in error are no change, so no count would be
  // exact); the last one, after the whole tree, is the one restored.
  VFS_SNAPSHOT_CHANGES: '1',
  VFS_SNAPSHOT_SECONDS: '0',
  ...(swift === null ? {} : swiftStorageEnv(swift, 's3://vfs-bench-restore/store')),
};
const objects = openObjectStore(loadConfig(env).storage);

async function snapshots(): Promise<string[]> {
  const keys: string[] = [];
  for await (const { key } of objects.list('shard-snapshots/')) keys.push(key);
  return keys;
}

/** Starts the service on the data directory and times it until every file is readable again. */
async function timedStart(): Promise<number> {
  const t0 = performance.now();
  const service = await startBenchService(env);
  try {
    for (;;) {
      await waitReady(service, 'bench', 7_200_000);
      // Ready rows and a shard that holds them: a restored shard appears whole; a rebuilt one
      // first makes its files pending.
      const found = await call(service.url, 'GET', '/v1/workspaces/bench/find?pattern=**&head_limit=1', service.key);
      if (found.status === 200 && found.body.length > 0) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    return +((performance.now() - t0) / 1000).toFixed(1);
  } finally {
    await service.stop();
  }
}

try {
  const first = await startBenchService(env);
  try {
    await call(first.url, 'POST', '/v1/workspaces', first.key, JSON.stringify({ name: 'bench' }));
    await uploadAll(first, 'bench', files, 48);
    await waitReady(first, 'bench', 7_200_000);
    // The snapshot of the whole tree: one made after the last file was written (or, after two
    // minutes, the latest there is: the restore then applies what came after it).
    const done = Date.now();
    const deadline = done + 120_000;
    const latest = async (): Promise<number> => {
      let newest = 0;
      for await (const { lastModified } of objects.list('shard-snapshots/')) newest = Math.max(newest, lastModified.getTime());
      return newest;
    };
    while ((await latest()) < done - 1000 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 500));
  } finally {
    await first.stop();
  }
  const shards = join(dataDir, 'shards');
  const shardBytes = await duBytes(shards);
  const dropShards = async (): Promise<void> => {
    for (const name of await readdir(shards)) await rm(join(shards, name), { recursive: true, force: true });
  };
  await dropShards();
  const fromSnapshot = await timedStart();
  await dropShards();
  for (const key of await snapshots()) await objects.delete(key);
  const fromTexts = await timedStart();
  process.stdout.write(
    JSON.stringify(
      {
        corpus: dir,
        files: files.length,
        store: swift === null ? 'local' : 's3',
        shardBytes,
        fromSnapshot,
        fromTexts,
        ratio: +(fromSnapshot / fromTexts).toFixed(3),
      },
      null,
      2,
    ) + '\n',
  );
} finally {
  objects.close();
  await rm(dataDir, { recursive: true, force: true });
  await swift?.stop();
}
