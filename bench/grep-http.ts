/**
 * grep over HTTP against ripgrep over the same files on disk, in the same run.
 *
 *   node --import tsx bench/grep-http.ts <corpus-dir> <data-dir> [runs=5]
 *
 * <data-dir> keeps the service's data between runs: on the first run the
 * corpus is uploaded into workspace `bench` (as bench/ingest.ts does); later
 * runs reuse it. After three full scans (so that every read thread holds the
 * shard's catalog), for each pattern and output mode, reports the median latency
 * of the service's answer (whole body received) and the median wall time of
 * `rg` over the corpus (output drained through a pipe), their ratio, and how many files match
 * (by rg) with how many MB of text between them: a search must read at least those bytes.
 *
 * The `_probe` rows are one regex with a required literal at five matching volumes, from 19
 * files (0.4 MB) to 4,305 (86 MB): the struct named in the literal sets the volume.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { call, startBenchService, uploadCorpus } from './lib.js';

const [corpus, dataDir, runsArg] = process.argv.slice(2);
if (corpus === undefined || dataDir === undefined) {
  process.stderr.write('usage: node --import tsx bench/grep-http.ts <corpus-dir> <data-dir> [runs]\n');
  process.exit(2);
}
const runs = Number(runsArg ?? 5);

const SELECTIVE = ['sched_clock_register', 'EXPORT_SYMBOL_GPL\\(kmem_cache_alloc', 'kmem_cache_create_usercopy|vmalloc_to_page|copy_from_kernel_nofault'];
/** A regex with a required literal, by rising matching volume (rg: 19, 92, 377, 1,205 and 4,305 files). */
const PROBE = ['sdio_func', 'hid_device', 'spi_device', 'i2c_client', 'platform_device'].map((type) => `static int \\w+_probe\\(struct ${type}`);
const FULL_SCAN = ['\\w{5}\\s+\\w{5}\\s+\\w{5}', '[0-9]{5}'];
/** Selective patterns searched with `-i` (agents' Grep tool sends it often). */
const SELECTIVE_IGNORE_CASE = ['sched_clock_register', 'Linus Torvalds'];
const GROUPS = [
  { kind: 'selective', patterns: SELECTIVE, ignoreCase: false },
  { kind: 'regex by volume', patterns: PROBE, ignoreCase: false },
  { kind: 'selective -i', patterns: SELECTIVE_IGNORE_CASE, ignoreCase: true },
  { kind: 'full scan', patterns: FULL_SCAN, ignoreCase: false },
] as const;

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const rgArgs = (pattern: string, mode: string, ignoreCase: boolean): string[] => [
  '--no-config',
  '--no-ignore',
  '--hidden',
  '--no-messages',
  mode === 'content' ? '-n' : '-l',
  ...(ignoreCase ? ['-i'] : []),
  '-e',
  pattern,
  corpus,
];

function rg(pattern: string, mode: 'files_with_matches' | 'content', ignoreCase: boolean): number {
  const args = rgArgs(pattern, mode, ignoreCase);
  const times: number[] = [];
  for (let i = 0; i < Math.max(3, Math.ceil(runs / 2)); i++) {
    const t0 = performance.now();
    spawnSync('rg', args, { stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 1 << 30 });
    times.push(performance.now() - t0);
  }
  return median(times);
}

/** The files rg finds the pattern in, and the MB of text they hold. */
function matched(pattern: string, ignoreCase: boolean): { files: number; matchedMB: number } {
  const out = spawnSync('rg', rgArgs(pattern, 'files_with_matches', ignoreCase), { stdio: ['ignore', 'pipe', 'ignore'], maxBuffer: 1 << 30 });
  const paths = out.stdout
    .toString()
    .split('\n')
    .filter((p) => p !== '');
  const bytes = paths.reduce((sum, p) => sum + statSync(p).size, 0);
  return { files: paths.length, matchedMB: +(bytes / 1e6).toFixed(1) };
}

const fresh = !existsSync(dataDir);
const service = await startBenchService({ DATA_DIR: dataDir, VFS_READ_THREADS: '2' });
try {
  if (fresh) await uploadCorpus(service, corpus);
  // Steady state: each read thread holds the shard's catalog of file records (a thread builds
  // it once it has read the shard's worth of records, as a full scan does), as it would after
  // a few agent calls.
  for (let i = 0; i < 3; i++) await call(service.url, 'GET', `/v1/workspaces/bench/grep?pattern=${encodeURIComponent('\\x00')}&output_mode=count`, service.key);
  const rows = [];
  for (const { kind, patterns, ignoreCase } of GROUPS) {
    for (const pattern of patterns) {
      const volume = matched(pattern, ignoreCase);
      for (const mode of ['files_with_matches', 'content'] as const) {
        const path = `/v1/workspaces/bench/grep?pattern=${encodeURIComponent(pattern)}&output_mode=${mode}${ignoreCase ? '&-i=true' : ''}`;
        await call(service.url, 'GET', path, service.key); // warm the page cache and the threads
        const times: number[] = [];
        let lines = 0;
        for (let i = 0; i < runs; i++) {
          const t0 = performance.now();
          const r = await call(service.url, 'GET', path, service.key);
          times.push(performance.now() - t0);
          lines = r.body.toString().split('\n').length - 1;
        }
        const serviceMs = median(times);
        const rgMs = rg(pattern, mode, ignoreCase);
        rows.push({ kind, pattern, mode, lines, ...volume, serviceMs: +serviceMs.toFixed(1), rgMs: +rgMs.toFixed(1), ratio: +(serviceMs / rgMs).toFixed(3) });
        process.stderr.write(`${kind}\t${mode}\t${pattern}\t${serviceMs.toFixed(1)} ms\trg ${rgMs.toFixed(1)} ms\n`);
      }
    }
  }
  process.stdout.write(JSON.stringify({ corpus, runs, rows }, null, 2) + '\n');
} finally {
  await service.stop();
}
