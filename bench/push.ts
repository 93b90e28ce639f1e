/**
 * Push benchmark: the command line's `push` against bench/ingest.ts's
 * uploader (bench/lib.ts `uploadAll` + `waitReady`) on the same tree and the
 * same service, reporting the ratio of their end-to-end times.
 *
 *   node --import tsx bench/push.ts <dir> [--files N] [--concurrency C] [--rounds R]
 *
 * `dir` may be a subtree of the corpus (e.g. linux-source-6.1/drivers/net);
 * `--files N` pushes only the first N files (in path order), copied into a
 * temporary tree. Both sides upload with C requests in flight (default: the
 * command's own default). Each round runs both, in alternating order, into
 * fresh workspaces, after one read of the whole tree and one unmeasured
 * ingest of it, so that neither side pays for a cold page cache or a cold
 * service; each run starts once the service is idle again. The command runs compiled (dist/cli/main.js, as
 * `npx agent-vfs` does), its time measured from spawn to exit: process start,
 * hashing and the listing are part of what it costs.
 */
import { spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { DEFAULT_CONCURRENCY } from '../cli/push.js';
import { ROOT } from '../service/script-args.js';
import { type BenchService, call, startBenchService, uploadAll, waitReady, walk } from './lib.js';

const args = process.argv.slice(2);
const option = (name: string): number | undefined => {
  const i = args.indexOf(name);
  if (i === -1) return undefined;
  const value = Number(args.splice(i, 2)[1]);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} takes a whole number above 0`);
  return value;
};
const fileLimit = option('--files');
const concurrency = option('--concurrency') ?? DEFAULT_CONCURRENCY;
const rounds = option('--rounds') ?? 2;
const [source] = args;
if (source === undefined) {
  process.stderr.write('usage: node --import tsx bench/push.ts <dir> [--files N] [--concurrency C] [--rounds R]\n');
  process.exit(2);
}

let dir = source;
let temporary: string | null = null;
if (fileLimit !== undefined) {
  temporary = await mkdtemp(join(tmpdir(), 'vfs-bench-push-'));
  for (const [full, rel] of (await walk(source)).slice(0, fileLimit)) {
    await mkdir(dirname(join(temporary, rel)), { recursive: true });
    await copyFile(full, join(temporary, rel));
  }
  dir = temporary;
}
const files = await walk(dir);
let bytes = 0;
for (const [full] of files) bytes += (await readFile(full)).length; // warms the page cache for both sides

/** CPU seconds the service process has used (utime + stime from /proc, in clock ticks of 1/100 s). */
async function serviceCpu(service: BenchService): Promise<number> {
  const fields = (await readFile(`/proc/${service.child.pid}/stat`, 'utf8')).split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * Waits until the service is idle (under 5% of a core over half a second, at most 60 s): after
 * an ingest it merges the new segments in the background, which would slow whichever run came
 * next and favour the one that came first.
 */
async function idle(service: BenchService): Promise<void> {
  const deadline = Date.now() + 60_000;
  let before = await serviceCpu(service);
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 500));
    const now = await serviceCpu(service);
    if (now - before < 0.025) return;
    before = now;
  }
}

/** bench/ingest.ts's path: upload every file, then poll until none is pending. */
async function ingestPath(service: BenchService, workspace: string): Promise<number> {
  await call(service.url, 'POST', '/v1/workspaces', service.key, JSON.stringify({ name: workspace }));
  const t0 = performance.now();
  const { refused } = await uploadAll(service, workspace, files, concurrency);
  await waitReady(service, workspace, 3_600_000);
  if (refused.length > 0) throw new Error(`the service refused ${refused.length} uploads, e.g. ${refused[0].join(' ')}`);
  return (performance.now() - t0) / 1000;
}

/** The command line's path: `agent-vfs push dir workspace`, from spawn to exit. */
async function pushPath(service: BenchService, workspace: string): Promise<{ seconds: number; uploaded: number }> {
  await call(service.url, 'POST', '/v1/workspaces', service.key, JSON.stringify({ name: workspace }));
  const t0 = performance.now();
  const child = spawn(process.execPath, ['dist/cli/main.js', 'push', dir, workspace, '--json', '--concurrency', String(concurrency)], {
    cwd: ROOT,
    env: { ...process.env, AGENT_VFS_URL: service.url, AGENT_VFS_KEY: service.key },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  const seconds = (performance.now() - t0) / 1000;
  const summary = JSON.parse(out) as { uploaded: number; refused: unknown[] };
  // Exit 1 with files in error is fine (the ingest path counts them too); a refusal is not.
  if (code === null || code > 1 || summary.refused.length > 0) throw new Error(`push exited with ${code}: ${out}`);
  return { seconds, uploaded: summary.uploaded };
}

const service = await startBenchService();
try {
  // The first ingest of a fresh service runs seconds slower (compilation, thread pools, database
  // caches warming): an unmeasured round takes that cost, so that neither side's first run pays it.
  await ingestPath(service, 'warm-up');
  const runs: Array<{ round: number; first: string; ingestSeconds: number; pushSeconds: number; ratio: number }> = [];
  for (let round = 0; round < rounds; round++) {
    const pushFirst = round % 2 === 1;
    let ingestSeconds = 0;
    let pushed = { seconds: 0, uploaded: 0 };
    await idle(service);
    if (pushFirst) pushed = await pushPath(service, `push-${round}`);
    else ingestSeconds = await ingestPath(service, `ingest-${round}`);
    await idle(service);
    if (pushFirst) ingestSeconds = await ingestPath(service, `ingest-${round}`);
    else pushed = await pushPath(service, `push-${round}`);
    // push also sends symbolic links to files inside the tree, which the uploader's walk skips (45 in the Linux tree).
    if (pushed.uploaded < files.length) throw new Error(`push uploaded ${pushed.uploaded} of ${files.length} files`);
    runs.push({
      round,
      first: pushFirst ? 'push' : 'ingest',
      ingestSeconds: +ingestSeconds.toFixed(2),
      pushSeconds: +pushed.seconds.toFixed(2),
      ratio: +(pushed.seconds / ingestSeconds).toFixed(3),
    });
  }
  const total = (key: 'ingestSeconds' | 'pushSeconds') => runs.reduce((sum, r) => sum + r[key], 0);
  const result = {
    corpus: source,
    files: files.length,
    sourceMB: +(bytes / 1e6).toFixed(1),
    concurrency,
    runs,
    ratio: +(total('pushSeconds') / total('ingestSeconds')).toFixed(3),
  };
  process.stdout.write(JSON.stringify(result, null, 2) + '\n');
} finally {
  await service.stop();
  if (temporary !== null) await rm(temporary, { recursive: true, force: true });
}
