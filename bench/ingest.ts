/**
 * Ingest benchmark: uploads a directory over HTTP into one workspace and waits
 * until every file is ready.
 *
 *   node --import tsx bench/ingest.ts <dir> [concurrency=16]
 *
 * Reports MB/s of source text end to end (first upload to last file ready),
 * files/s, shard bytes ÷ text bytes, and the service process's peak RSS.
 * The reference corpus is the Linux kernel tree from Debian's
 * `linux-source-6.1` (see bench/corpus.sh).
 */
import { join } from 'node:path';
import { call, duBytes, startBenchService, uploadAll, waitReady, walk } from './lib.js';

const [dir, concurrencyArg] = process.argv.slice(2);
if (dir === undefined) {
  process.stderr.write('usage: node --import tsx bench/ingest.ts <dir> [concurrency]\n');
  process.exit(2);
}
const concurrency = Number(concurrencyArg ?? 16);
const files = await walk(dir);
const service = await startBenchService();
try {
  await call(service.url, 'POST', '/v1/workspaces', service.key, JSON.stringify({ name: 'bench' }));
  const t0 = performance.now();
  const { bytes, refused } = await uploadAll(service, 'bench', files, concurrency);
  const uploaded = performance.now();
  const errors = await waitReady(service, 'bench', 3_600_000);
  const ready = performance.now();
  const shardBytes = await duBytes(join(service.dataDir, 'shards'));
  const seconds = (ready - t0) / 1000;
  const result = {
    corpus: dir,
    files: files.length,
    refused: refused.length,
    errors,
    sourceMB: +(bytes / 1e6).toFixed(1),
    uploadSeconds: +((uploaded - t0) / 1000).toFixed(1),
    endToEndSeconds: +seconds.toFixed(1),
    mbPerSecond: +(bytes / 1e6 / seconds).toFixed(2),
    filesPerSecond: Math.round(files.length / seconds),
    shardBytes,
    shardToText: +(shardBytes / bytes).toFixed(2),
    peakRssMB: Math.round(service.peakRss() / 1e6),
    concurrency,
  };
  process.stdout.write(JSON.stringify(result, null, 2) + '\n');
  for (const [path, status, body] of refused.slice(0, 5)) process.stderr.write(`refused ${path}: ${status} ${body}\n`);
} finally {
  await service.stop();
}
