/**
 * Many small workspaces on one node: what each costs, and whether reads spread over all of them
 * are as quick as reads of one.
 *
 *   node --import tsx bench/many-workspaces.ts [workspaces=10000] [seconds=30] [connections=16]
 *
 * Starts the service on a fresh data directory (the environment passes through: set
 * VFS_OPEN_SHARDS to try another budget), creates the workspaces with three small text files
 * each, waits until every file is ready, then loads it with a mix of reads (grep count, grep for
 * a literal, cat, ls, find) for `seconds` at a time: on one workspace, spread at random over all
 * of them, and on one workspace again. Last, every workspace is read once and its answer checked.
 * Samples the service's resident and anonymous memory, descriptors and threads after each phase,
 * and prints them with requests/s and latencies as JSON. Exits 1 on any error or wrong answer.
 */
import autocannon from 'autocannon';
import { readdir } from 'node:fs/promises';
import { call, memoryMB, startBenchService } from './lib.js';

const [workspacesArg, secondsArg, connectionsArg] = process.argv.slice(2);
const workspaces = Number(workspacesArg ?? 10_000);
const seconds = Number(secondsArg ?? 30);
const connections = Number(connectionsArg ?? 16);
if (![workspaces, seconds, connections].every((n) => Number.isInteger(n) && n > 0)) {
  process.stderr.write('usage: node --import tsx bench/many-workspaces.ts [workspaces=10000] [seconds=30] [connections=16]\n');
  process.exit(2);
}

const names = Array.from({ length: workspaces }, (_, i) => `ws-${i}`);
/** The files of workspace `name`: about 1.5 KB of text each, naming the workspace on every line. */
function files(name: string): Array<[string, string]> {
  return ['docs/readme.md', 'src/main.txt', 'notes/todo.txt'].map((path, k) => [
    path,
    Array.from({ length: 30 }, (_, line) => `${name} line ${line + 1} of ${path}: alpha beta gamma ${line * (k + 1)}\n`).join(''),
  ]);
}

const service = await startBenchService();
const pid = service.child.pid!;
const log = (message: string): void => void process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);

interface Sample {
  phase: string;
  rssMB: number;
  anonMB: number;
  fds: number;
  threads: number;
}
const samples: Sample[] = [];
async function sample(phase: string): Promise<void> {
  const memory = await memoryMB(pid);
  const entry = {
    phase,
    rssMB: Math.round(memory.rss),
    anonMB: Math.round(memory.anon),
    fds: (await readdir(`/proc/${pid}/fd`)).length,
    threads: (await readdir(`/proc/${pid}/task`)).length,
  };
  samples.push(entry);
  log(JSON.stringify(entry));
}

/** Runs `work` on every item, `concurrency` at a time, logging progress every tenth. */
async function each<T>(what: string, items: readonly T[], concurrency: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  let done = 0;
  const step = Math.max(1, Math.ceil(items.length / 10));
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < items.length) {
        await work(items[next++]);
        if (++done % step === 0) log(`${what}: ${done} of ${items.length}`);
      }
    }),
  );
}

async function expectStatus(method: string, path: string, status: number, body?: string): Promise<Buffer> {
  const r = await call(service.url, method, path, service.key, body, body === undefined ? {} : { 'content-type': 'application/json' });
  if (r.status !== status) throw new Error(`${method} ${path}: ${r.status} ${r.body.toString().slice(0, 200)}`);
  return r.body;
}

/** The read mix of one workspace, as autocannon requests. */
const reads = (pick: () => string): autocannon.Request[] =>
  [
    (ws: string) => `/v1/workspaces/${ws}/grep?pattern=gamma&output_mode=count`,
    (ws: string) => `/v1/workspaces/${ws}/grep?pattern=${encodeURIComponent('beta gamma 12')}`,
    (ws: string) => `/v1/workspaces/${ws}/cat?path=/docs/readme.md&offset=5&limit=10`,
    (ws: string) => `/v1/workspaces/${ws}/ls?path=/`,
    (ws: string) => `/v1/workspaces/${ws}/find?pattern=${encodeURIComponent('**/*.txt')}`,
  ].map((path) => ({ method: 'GET', setupRequest: (request) => ({ ...request, path: path(pick()) }) }));

interface Load {
  phase: string;
  requestsPerSecond: number;
  p50ms: number;
  p99ms: number;
  errors: number;
}
const loads: Load[] = [];
async function load(phase: string, pick: () => string): Promise<void> {
  const result = await autocannon({
    url: service.url,
    headers: { authorization: `Bearer ${service.key}` },
    requests: reads(pick),
    connections,
    duration: seconds,
  });
  const entry = {
    phase,
    requestsPerSecond: Math.round(result.requests.average),
    p50ms: result.latency.p50,
    p99ms: result.latency.p99,
    errors: result.errors + result.timeouts + result.non2xx,
  };
  loads.push(entry);
  log(JSON.stringify(entry));
  await sample(phase);
}

let failures = 0;
try {
  await new Promise((resolve) => setTimeout(resolve, 3000));
  await sample('empty');
  await each('created', names, 16, async (name) => void (await expectStatus('POST', '/v1/workspaces', 201, JSON.stringify({ name }))));
  await sample('created');
  const started = performance.now();
  await each('uploaded', names, 16, async (name) => {
    for (const [path, text] of files(name)) await expectStatus('PUT', `/v1/workspaces/${name}/files/${path}`, 202, text);
  });
  await each('ready', names, 16, async (name) => {
    for (;;) {
      const listing = JSON.parse((await expectStatus('GET', `/v1/workspaces/${name}/files?limit=10`, 200)).toString()) as { files: Array<{ status: string }> };
      if (listing.files.some((f) => f.status === 'error')) throw new Error(`${name}: a file in error`);
      if (listing.files.every((f) => f.status === 'ready')) return;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  });
  const ingestSeconds = (performance.now() - started) / 1000;
  log(`${workspaces * 3} files ingested in ${ingestSeconds.toFixed(0)} s`);
  await sample('ingested');
  await load('one workspace', () => names[0]);
  await load('spread over all', () => names[Math.floor(Math.random() * names.length)]);
  await load('one workspace again', () => names[0]);
  // Every workspace answers with its own text.
  await each('checked', names, 16, async (name) => {
    const text = (await expectStatus('GET', `/v1/workspaces/${name}/cat?path=/src/main.txt&offset=7&limit=1`, 200)).toString();
    const grep = (await expectStatus('GET', `/v1/workspaces/${name}/grep?pattern=${encodeURIComponent(`^${name} line`)}&output_mode=count`, 200)).toString();
    if (!text.includes(`${name} line 7 of src/main.txt`) || !grep.includes('/notes/todo.txt:30')) {
      failures++;
      log(`${name}: wrong answer: ${JSON.stringify(text)} ${JSON.stringify(grep)}`);
    }
  });
  await sample('checked');
  await new Promise((resolve) => setTimeout(resolve, 15_000));
  await sample('idle 15 s');
  const empty = samples[0];
  const after = samples.at(-1)!;
  const one = Math.max(loads[0].p99ms, loads[2].p99ms);
  const summary = {
    workspaces,
    files: workspaces * 3,
    openShards: process.env.VFS_OPEN_SHARDS ?? 'default',
    ingestSeconds: Math.round(ingestSeconds),
    rssAboveEmptyMB: after.rssMB - empty.rssMB,
    peakRssAboveEmptyMB: Math.max(...samples.map((s) => s.rssMB)) - empty.rssMB,
    kbPerWorkspace: Math.round(((after.rssMB - empty.rssMB) * 1024) / workspaces),
    maxFds: Math.max(...samples.map((s) => s.fds)),
    p99SpreadOverOne: Math.round((loads[1].p99ms / one) * 100) / 100,
    requestsSpreadOverOne: Math.round((loads[1].requestsPerSecond / Math.max(loads[0].requestsPerSecond, loads[2].requestsPerSecond)) * 100) / 100,
    errors: loads.reduce((n, l) => n + l.errors, 0),
    wrongAnswers: failures,
  };
  process.stdout.write(`${JSON.stringify({ summary, loads, samples }, null, 2)}\n`);
  if (summary.errors + failures > 0) process.exitCode = 1;
} finally {
  await service.stop();
}
