/**
 * Ingest with originals and texts on an S3 store against the local directory, in one run:
 * a single-node Swift cluster with its S3 API on loopback (the tests' server), then the same
 * files uploaded into a fresh service on each store, alternating which goes first.
 *
 *   node --import tsx bench/ingest-storage.ts <dir> [files=all|N|spread:N[:KiB]] [rounds=1] [concurrency=48] [stores=local,s3]
 *
 * `files` takes the first N files (by path) of the tree, or with `spread:N` N files spread
 * evenly through it (every (all ÷ N)-th by path: every part of the tree in its share; with
 * `spread:N:KiB`, spread over the files of at most that size). Reports,
 * per store and round, the seconds from the first upload to the last file ready (and to the last
 * upload answered) and the MB/s of
 * text that makes; the CPU each of the service's threads spent a file (its
 * `vfs_thread_cpu_seconds`; `process`: all its threads; `children`: its extraction processes;
 * `postgres`: its embedded PostgreSQL; `client`: the uploading benchmark itself; `s3Server`: the
 * Swift cluster's processes, idle on a local run; steadier than
 * wall time on a shared machine); the requests the S3 server's proxy logged on the run's bucket
 * by method; and the ratio S3 ÷ local.
 */
import { stat } from 'node:fs/promises';
import { startSwift, swiftStorageEnv } from '../test/helpers/swift.js';
import { cpuSince, descendants, postgresPids } from './cpu.js';
import { call, freePort, startBenchService, threadSeries, uploadAll, waitReady, walk } from './lib.js';

const [dir, filesArg, roundsArg, concurrencyArg, storesArg] = process.argv.slice(2);
if (dir === undefined) {
  process.stderr.write('usage: node --import tsx bench/ingest-storage.ts <dir> [files=all|N|spread:N[:KiB]] [rounds=1] [concurrency=48] [stores=local,s3]\n');
  process.exit(2);
}
const all = await walk(dir);
const files =
  filesArg === undefined || filesArg === 'all'
    ? all
    : filesArg.startsWith('spread:')
      ? spread(await upTo(all, Number(filesArg.split(':')[2] ?? Number.POSITIVE_INFINITY)), Number(filesArg.split(':')[1]))
      : all.slice(0, Number(filesArg));
const rounds = Number(roundsArg ?? 1);
const concurrency = Number(concurrencyArg ?? 48);
/** The stores to run, each round in turn (the order flips every round). */
const stores = (storesArg ?? 'local,s3').split(',').filter((store): store is 'local' | 's3' => store === 'local' || store === 's3');

/** The files of `all` of at most `kib` KiB. */
async function upTo(all: Array<[string, string]>, kib: number): Promise<Array<[string, string]>> {
  if (kib === Number.POSITIVE_INFINITY) return all;
  const sizes = await Promise.all(all.map(async ([full]) => (await stat(full)).size));
  return all.filter((_, i) => sizes[i] <= kib * 1024);
}

/** `n` of `all`, evenly spaced by position. */
function spread<T>(all: T[], n: number): T[] {
  if (n >= all.length) return all;
  return Array.from({ length: n }, (_, i) => all[Math.floor((i * all.length) / n)]);
}

// Started only when a round uses it.
const swift = stores.includes('s3') ? await startSwift() : null;
const bucket = (round: number): string => `vfs-bench-${round}`;
const s3Env = (round: number): Record<string, string> => swiftStorageEnv(swift!, `s3://${bucket(round)}/originals`);

/** Requests the S3 API served on a bucket, by method, from the proxy's own log (the S3 form of each request, as the client sent it). */
async function requestsOn(name: string): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (const [, method] of (await swift!.proxyLog()).matchAll(new RegExp(` (GET|PUT|HEAD|POST|DELETE) /${name}(?:/|\\?| )`, 'g'))) {
    counts[method] = (counts[method] ?? 0) + 1;
  }
  return counts;
}

/** Seconds from the first upload to the last file ready on a fresh service with `env`, and each thread's CPU ms a file meanwhile. */
async function ingest(
  env: Record<string, string>,
): Promise<{ seconds: number; uploadSeconds: number; mbPerSecond: number; cpuMsPerFile: Record<string, number>; errors: number; refused: number }> {
  const metricsPort = await freePort();
  const service = await startBenchService({ ...env, VFS_METRICS_PORT: String(metricsPort) });
  const pid = service.child.pid!;
  // Each thread's CPU (worker threads post theirs every second: a scrape waits that long), the
  // whole process's, and its extraction processes'.
  const threadCpu = async (): Promise<Record<string, number>> => {
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const r = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    const children = await descendants(pid);
    return {
      ...threadSeries(await r.text(), 'vfs_thread_cpu_seconds'),
      process: await cpuSince([pid], new Map()),
      children: await cpuSince(children, new Map()),
      postgres: await cpuSince(await postgresPids(service.dataDir), new Map()),
      // This process: the uploading client.
      client: ((usage) => (usage.user + usage.system) / 1e6)(process.cpuUsage()),
      // The S3 server's processes (whether or not this run uses it; none when no round does).
      s3Server: swift === null ? 0 : await cpuSince([...swift.pids(), ...(await Promise.all(swift.pids().map(descendants))).flat()], new Map()),
    };
  };
  try {
    await call(service.url, 'POST', '/v1/workspaces', service.key, JSON.stringify({ name: 'bench' }));
    const before = await threadCpu();
    const t0 = performance.now();
    const { bytes, refused } = await uploadAll(service, 'bench', files, concurrency);
    const uploadSeconds = (performance.now() - t0) / 1000;
    const errors = await waitReady(service, 'bench', 7_200_000);
    const seconds = (performance.now() - t0) / 1000;
    const after = await threadCpu();
    const cpuMsPerFile = Object.fromEntries(
      Object.entries(after).map(([thread, s]) => [thread, +(((s - (before[thread] ?? 0)) * 1000) / files.length).toFixed(3)]),
    );
    return {
      seconds: +seconds.toFixed(1),
      uploadSeconds: +uploadSeconds.toFixed(1),
      mbPerSecond: +(bytes / 1e6 / seconds).toFixed(2),
      cpuMsPerFile,
      errors,
      refused: refused.length,
    };
  } finally {
    await service.stop();
  }
}

try {
  const runs: Array<{
    round: number;
    store: string;
    seconds: number;
    uploadSeconds: number;
    mbPerSecond: number;
    cpuMsPerFile: Record<string, number>;
    errors: number;
    refused: number;
    requests: Record<string, number>;
  }> = [];
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? stores : [...stores].reverse();
    for (const store of order) {
      const result = await ingest(store === 's3' ? s3Env(round) : {});
      const requests = store === 's3' ? await requestsOn(bucket(round)) : {};
      runs.push({ round, store, ...result, requests });
      process.stderr.write(
        `round ${round} ${store}: ${result.seconds} s (uploads answered in ${result.uploadSeconds}), ${result.mbPerSecond} MB/s, CPU ms a file ${JSON.stringify(result.cpuMsPerFile)} ${JSON.stringify(requests)}\n`,
      );
    }
  }
  const total = (store: string): number => runs.filter((r) => r.store === store).reduce((sum, r) => sum + r.seconds, 0);
  process.stdout.write(
    JSON.stringify(
      { corpus: dir, files: files.length, concurrency, runs, s3OverLocal: stores.length === 2 ? +(total('s3') / total('local')).toFixed(2) : null },
      null,
      2,
    ) + '\n',
  );
} finally {
  await swift?.stop();
}
