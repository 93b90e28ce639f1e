/**
 * grep throughput under concurrent load (autocannon), with grep split across the read threads
 * from the default candidate size and never split, in the same run.
 *
 *   node --import tsx bench/grep-load.ts <data-dir> [connections=8] [seconds=10] [rounds=2]
 *
 * <data-dir> is one that bench/grep-http.ts has loaded (workspace `bench`). Each round starts
 * the service once per setting, gives every read thread the shard's catalog (three full scans),
 * then loads it with four literals of 16-104 MB of candidate text, in `content` and in
 * `files_with_matches` mode, and prints requests/s, p50 and p99 per setting and mode.
 */
import autocannon from 'autocannon';
import { existsSync } from 'node:fs';
import { call, startBenchService } from './lib.js';

const [dataDir, connectionsArg, secondsArg, roundsArg] = process.argv.slice(2);
if (dataDir === undefined || !existsSync(dataDir)) {
  process.stderr.write('usage: node --import tsx bench/grep-load.ts <data-dir loaded by bench/grep-http.ts> [connections] [seconds] [rounds]\n');
  process.exit(2);
}
const connections = Number(connectionsArg ?? 8);
const duration = Number(secondsArg ?? 10);
const rounds = Number(roundsArg ?? 2);

const PATTERNS = ['platform_get_resource', 'devm_kzalloc', 'struct file_operations', 'sched_clock_register'];
/** VFS_GREP_SPLIT_MIN_BYTES per setting: the default, and more text than any workspace holds. */
const SETTINGS: Record<string, Record<string, string>> = { default: {}, never: { VFS_GREP_SPLIT_MIN_BYTES: String(2 ** 40) } };

const rows = [];
for (let round = 0; round < rounds; round++) {
  for (const [setting, env] of Object.entries(SETTINGS)) {
    const service = await startBenchService({ DATA_DIR: dataDir, VFS_READ_THREADS: '2', ...env });
    try {
      for (let i = 0; i < 3; i++)
        await call(service.url, 'GET', `/v1/workspaces/bench/grep?pattern=${encodeURIComponent('\\x00')}&output_mode=count`, service.key);
      for (const mode of ['content', 'files_with_matches']) {
        const requests = PATTERNS.map((p) => ({
          method: 'GET' as const,
          path: `/v1/workspaces/bench/grep?pattern=${encodeURIComponent(p)}&output_mode=${mode}`,
        }));
        const r = await autocannon({ url: service.url, headers: { authorization: `Bearer ${service.key}` }, requests, connections, duration });
        if (r.non2xx + r.errors > 0) throw new Error(`${setting} ${mode}: ${r.non2xx} non-2xx answers, ${r.errors} errors`);
        rows.push({ round, setting, mode, rps: Math.round(r.requests.average * 10) / 10, p50ms: r.latency.p50, p99ms: r.latency.p99 });
      }
    } finally {
      await service.stop();
    }
  }
}
process.stdout.write(JSON.stringify({ dataDir, connections, duration, patterns: PATTERNS, rows }, null, 2) + '\n');
