/**
 * Ingest with originals and texts on an S3 store against the local directory, in one run:
 * a single-node Swift cluster with its S3 API on loopback (the tests' server), then the same
 * files uploaded into a fresh service on each store, alternating which goes first.
 *
 *   node --import tsx bench/ingest-storage.ts <dir> [files=all] [rounds=1] [concurrency=48]
 *
 * `files` takes the first N files (by path) of the tree. Reports, per store and round, the
 * seconds from the first upload to the last file ready, and the ratio S3 ÷ local.
 */
import { startSwift, swiftStorageEnv } from '../test/helpers/swift.js';
import { call, startBenchService, uploadAll, waitReady, walk } from './lib.js';

const [dir, filesArg, roundsArg, concurrencyArg] = process.argv.slice(2);
if (dir === undefined) {
  process.stderr.write('usage: node --import tsx bench/ingest-storage.ts <dir> [files=all] [rounds=1] [concurrency=48]\n');
  process.exit(2);
}
const all = await walk(dir);
const files = filesArg === undefined || filesArg === 'all' ? all : all.slice(0, Number(filesArg));
const rounds = Number(roundsArg ?? 1);
const concurrency = Number(concurrencyArg ?? 48);

const swift = await startSwift();
const s3Env = (round: number): Record<string, string> => swiftStorageEnv(swift, `s3://vfs-bench-${round}/originals`);

/** Seconds from the first upload to the last file ready, on a fresh service with `env`. */
async function ingest(env: Record<string, string>): Promise<{ seconds: number; errors: number; refused: number }> {
  const service = await startBenchService(env);
  try {
    await call(service.url, 'POST', '/v1/workspaces', service.key, JSON.stringify({ name: 'bench' }));
    const t0 = performance.now();
    const { refused } = await uploadAll(service, 'bench', files, concurrency);
    const errors = await waitReady(service, 'bench', 7_200_000);
    return { seconds: +((performance.now() - t0) / 1000).toFixed(1), errors, refused: refused.length };
  } finally {
    await service.stop();
  }
}

try {
  const runs: Array<{ round: number; store: string; seconds: number; errors: number; refused: number }> = [];
  for (let round = 0; round < rounds; round++) {
    const order = round % 2 === 0 ? (['local', 's3'] as const) : (['s3', 'local'] as const);
    for (const store of order) {
      const result = await ingest(store === 's3' ? s3Env(round) : {});
      runs.push({ round, store, ...result });
      process.stderr.write(`round ${round} ${store}: ${result.seconds} s\n`);
    }
  }
  const total = (store: string): number => runs.filter((r) => r.store === store).reduce((sum, r) => sum + r.seconds, 0);
  process.stdout.write(
    JSON.stringify({ corpus: dir, files: files.length, concurrency, runs, s3OverLocal: +(total('s3') / total('local')).toFixed(2) }, null, 2) + '\n',
  );
} finally {
  await swift.stop();
}
