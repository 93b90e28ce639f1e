/**
 * Micro benchmark of the engine against ripgrep on the same files.
 *
 *   node --import tsx bench/engine-grep.ts <dir> [shard-dir] [--parallel N] [--batch-mb M] [--pattern P ...]
 *
 * Loads every regular file under <dir> (UTF-8 text; files with a NUL byte in their first
 * 8 KiB are skipped, as ripgrep skips binary files) into a fresh shard (in a temp dir unless
 * shard-dir is given and already holds one), reporting ingest speed and shard size. Then, for
 * each pattern, times `grep` (count mode, the sorted-mode path, and content mode) over the
 * shard and `rg --count` over the same files, and prints the ratio (median of three runs each).
 * Documents are written in batches of M MiB of text (default 32). With `--parallel N` the
 * count search also runs split into N shares in N worker threads, as the service's read pool
 * splits it.
 */

import { spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Worker } from 'node:worker_threads';
import {
  cat,
  emitGrepCounts,
  find,
  grep,
  ls,
  openLmdbReader,
  openShardWriter,
  type DocInput,
  type GrepCollection,
  type GrepRequest,
  type GrepShare,
  type GrepSplit,
} from '../engine/index.js';

const DEFAULT_PATTERNS = ['PTHREAD_MUTEX_INITIALIZER', 'struct \\w+_operations', 'EXPORT_SYMBOL\\(\\w+\\)', '(?i)copyright', '[0-9]{5}', 'x.y.z'];

interface Args {
  source: string;
  shardDir: string | undefined;
  parallel: number;
  batchBytes: number;
  patterns: string[];
}

function parseArgs(argv: string[]): Args {
  const positional: string[] = [];
  const patterns: string[] = [];
  let parallel = 0;
  let batchBytes = 32 << 20;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--parallel') parallel = Number(argv[++i]);
    else if (argv[i] === '--batch-mb') batchBytes = Number(argv[++i]) * (1 << 20);
    else if (argv[i] === '--pattern') patterns.push(argv[++i]);
    else positional.push(argv[i]);
  }
  if (positional.length < 1) {
    console.error('usage: node --import tsx bench/engine-grep.ts <dir> [shard-dir] [--parallel N] [--batch-mb M] [--pattern P ...]');
    process.exit(2);
  }
  return { source: positional[0], shardDir: positional[1], parallel, batchBytes, patterns: patterns.length > 0 ? patterns : DEFAULT_PATTERNS };
}

function* walk(dir: string): Generator<string> {
  for (const name of readdirSync(dir)) {
    const full = join(dir, name);
    const st = lstatSync(full);
    if (st.isDirectory()) yield* walk(full);
    else if (st.isFile()) yield full;
  }
}

function isBinary(data: Buffer): boolean {
  return data.subarray(0, 8192).includes(0);
}

async function load(source: string, shardDir: string, batchLimit: number): Promise<{ files: number; bytes: number; ms: number }> {
  const writer = openShardWriter(shardDir);
  const started = performance.now();
  let batch: DocInput[] = [];
  let batchBytes = 0;
  let files = 0;
  let bytes = 0;
  for (const file of walk(source)) {
    let data: Buffer;
    try {
      data = readFileSync(file);
    } catch {
      continue;
    }
    if (isBinary(data)) continue;
    const rel = relative(source, file).normalize('NFC');
    batch.push({
      path: '/' + rel,
      text: data,
      sizeBytes: data.length,
      contentType: 'text/plain',
      updatedAt: statSync(file).mtimeMs,
      visibility: null,
      version: String(data.length),
    });
    batchBytes += data.length;
    files++;
    bytes += data.length;
    if (batchBytes >= batchLimit) {
      await writer.writeBatch(batch);
      batch = [];
      batchBytes = 0;
    }
  }
  if (batch.length > 0) await writer.writeBatch(batch);
  await writer.flush();
  const ms = performance.now() - started;
  await writer.close();
  return { files, bytes, ms };
}

function drain(gen: Generator<Buffer, unknown>): { bytes: number; value: unknown } {
  let bytes = 0;
  for (;;) {
    const r = gen.next();
    if (r.done === true) return { bytes, value: r.value };
    bytes += r.value.length;
  }
}

const RUNS = 3;

/** Median wall time of RUNS runs of `fn`. */
function time<T>(fn: () => T): { ms: number; value: T } {
  const times: number[] = [];
  let value!: T;
  for (let i = 0; i < RUNS; i++) {
    const t = performance.now();
    value = fn();
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return { ms: times[RUNS >> 1], value };
}

function rgCount(source: string, pattern: string): { ms: number; files: number } {
  const run = time(() =>
    spawnSync('rg', ['--no-config', '--hidden', '--no-ignore', '--count', '--no-messages', '-e', pattern, '.'], { cwd: source, maxBuffer: 1 << 30 }),
  );
  return {
    ms: run.ms,
    files: run.value.stdout
      .toString()
      .split('\n')
      .filter((l) => l.length > 0).length,
  };
}

const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
import('tsx/esm/api').then(({ tsImport }) => tsImport(workerData.engine, workerData.base)).then((engine) => {
  parentPort.on('message', ({ request, share }) => {
    const reader = engine.openLmdbReader(workerData.shardDir);
    reader.renew();
    if (share.lead) share = { ...share, lead: { ...share.lead, onSplit: (split) => parentPort.postMessage({ split }) } };
    const gen = engine.collectGrepCounts(reader, request, share);
    let r = gen.next();
    while (!r.done) r = gen.next();
    parentPort.postMessage({ collection: r.value });
  });
  parentPort.postMessage('ready');
});
`;

/** Sends a count-search share to a worker (a lead without its onSplit): its split (if it leads), then its collection. */
function share(worker: Worker, request: GrepRequest, spec: GrepShare, onSplit?: (split: GrepSplit) => void): Promise<GrepCollection> {
  return new Promise((resolve) => {
    const onMessage = (message: { split?: GrepSplit; collection?: GrepCollection }): void => {
      if (message.split !== undefined) onSplit?.(message.split);
      if (message.collection === undefined) return;
      worker.off('message', onMessage);
      resolve(message.collection);
    };
    worker.on('message', onMessage);
    worker.postMessage({ request, share: spec });
  });
}

/**
 * Median wall time of a count search split into shares as the service's read pool splits it
 * (a lead on the first worker hands each other worker its candidates), merged here.
 */
async function timeParallel(workers: Worker[], request: GrepRequest): Promise<number> {
  const times: number[] = [];
  for (let run = 0; run < RUNS; run++) {
    const t = performance.now();
    const shares: Promise<GrepCollection>[] = [];
    const lead = share(workers[0], request, { lead: { count: workers.length, minBytes: 0 } as GrepShare['lead'] }, (split) => {
      for (const [k, spec] of split.shares.entries()) shares.push(share(workers[k + 1], request, spec));
    });
    const first = await lead;
    drain(emitGrepCounts(request, [first, ...(await Promise.all(shares))]));
    times.push(performance.now() - t);
  }
  return times.sort((a, b) => a - b)[RUNS >> 1];
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const temp = args.shardDir === undefined;
  const shardDir = args.shardDir ?? mkdtempSync(join(tmpdir(), 'engine-bench-'));
  if (!existsSync(join(shardDir, 'data.mdb'))) {
    const l = await load(args.source, shardDir, args.batchBytes);
    const size = statSync(join(shardDir, 'data.mdb')).size;
    console.log(
      `ingest (${args.batchBytes >> 20} MiB batches): ${l.files} files, ${(l.bytes / 1e6).toFixed(1)} MB in ${(l.ms / 1000).toFixed(1)} s = ${(l.bytes / 1e6 / (l.ms / 1000)).toFixed(1)} MB/s; ` +
        `shard ${(size / 1e6).toFixed(1)} MB = ${(size / l.bytes).toFixed(2)}x text`,
    );
  }
  const reader = openLmdbReader(shardDir);
  const workers: Worker[] = [];
  for (let i = 0; i < args.parallel; i++) {
    const w = new Worker(WORKER_SOURCE, { eval: true, workerData: { engine: '../engine/index.ts', base: import.meta.url, shardDir } });
    await new Promise((resolve) => w.once('message', resolve));
    workers.push(w);
  }
  // Warm the page cache for both sides.
  rgCount(args.source, 'zzzzqqqq');
  drain(grep(reader, { claims: null, pattern: 'zzzzqqqq[0-9]?', outputMode: 'count' }));
  console.log(
    'pattern | engine count ms | engine content (head_limit 1000) ms | rg --count ms | ratio (count/rg) | files engine/rg' +
      (args.parallel > 0 ? ` | parallel(${args.parallel}) ms | ratio` : ''),
  );
  for (const pattern of args.patterns) {
    const request: GrepRequest = { claims: null, pattern, outputMode: 'count' };
    const count = time(() => drain(grep(reader, request)));
    const content = time(() => drain(grep(reader, { ...request, outputMode: 'content', headLimit: 1000 })));
    const rg = rgCount(args.source, pattern);
    const files = (count.value.value as { resultCount: number }).resultCount;
    let parallel = '';
    if (workers.length > 0) {
      const ms = await timeParallel(workers, request);
      parallel = ` | ${ms.toFixed(0)} | ${(ms / rg.ms).toFixed(2)}`;
    }
    console.log(
      `${pattern} | ${count.ms.toFixed(0)} | ${content.ms.toFixed(0)} | ${rg.ms.toFixed(0)} | ${(count.ms / rg.ms).toFixed(2)} | ${files}/${rg.files}${parallel}`,
    );
  }
  // The other tools, on the largest directory listing and file.
  const snapshot = reader.snapshot();
  let biggest = { path: '/', bytes: -1 };
  for (const meta of snapshot.docsInRange('/', '0')) if (meta.textBytes > biggest.bytes) biggest = { path: meta.path, bytes: meta.textBytes };
  snapshot.done();
  const others: [string, () => unknown][] = [
    ['ls /', () => drain(ls(reader, { claims: null }))],
    ['find **/*.c (head_limit 100)', () => drain(find(reader, { claims: null, pattern: '**/*.c' }))],
    ['find **/Makefile (token claims)', () => drain(find(reader, { claims: ['group:x'], pattern: '**/Makefile' }))],
    [`cat ${biggest.path} (2000 lines)`, () => drain(cat(reader, { claims: null, path: biggest.path }))],
    [`cat ${biggest.path} offset=10000`, () => drain(cat(reader, { claims: null, path: biggest.path, offset: 10_000, limit: 100 }))],
  ];
  for (const [name, fn] of others) console.log(`${name}: ${time(fn).ms.toFixed(1)} ms`);
  for (const w of workers) await w.terminate();
  await reader.close();
  if (temp) rmSync(shardDir, { recursive: true, force: true });
}

await main();
