/**
 * A long mixed load on one node, sampled every 10 s, written as CSV and drawn as charts.
 *
 *   node --import tsx bench/soak.ts [minutes=30] [workspaces=300] [out=docs/soak]
 *
 * Starts the service on a fresh data directory (the environment passes through), creates
 * `workspaces` workspaces of three small files with a token each, then for `minutes` runs 12
 * clients that each, in a loop: read (selective and broad grep, cat, ls, find, through the
 * workspace's token; one call in twelve is MCP's grep), upload a new file or upload again over
 * one, delete a file, create a workspace, fill, read and delete it, or mint a token, use it,
 * revoke it and see it refused. Every 10 s it samples the service process (resident and
 * anonymous memory, each kind of thread's V8 heap in use, all heaps' reserved size and open
 * shards from /metrics, descriptors), the extraction processes and PostgreSQL (resident memory,
 * connections), the files in the data directory's temp folders, and the clients' requests/s,
 * p99 and errors.
 *
 * At the end: every acknowledged upload must be ready and found by grep at its path with its
 * last text, no answer may be a 5xx, and each workspace's audit log must hold exactly one event
 * per read made of it. It writes `<out>/soak.csv` and three SVG charts, prints each series'
 * trend over the last 20 minutes (or the last two thirds of a shorter run) against its noise,
 * and exits 1 when a check fails.
 */
import { createServer } from 'node:net';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeChart } from './charts.js';
import { call, memoryMB, startBenchService } from './lib.js';

const [minutesArg, workspacesArg, outArg] = process.argv.slice(2);
const minutes = Number(minutesArg ?? 30);
const workspaceCount = Number(workspacesArg ?? 300);
const out = outArg ?? 'docs/soak';
if (!(minutes > 0) || !Number.isInteger(workspaceCount) || workspaceCount < 1) {
  process.stderr.write('usage: node --import tsx bench/soak.ts [minutes=30] [workspaces=300] [out=docs/soak]\n');
  process.exit(2);
}
const CLIENTS = 12;
const SAMPLE_MS = 10_000;

const log = (message: string): void => void process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);

/** A free TCP port for the metrics server. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

const metricsPort = await freePort();
// Revoked tokens are tried on purpose: the failed-authentication lock would shut the clients out.
const service = await startBenchService({ VFS_METRICS_PORT: String(metricsPort), VFS_AUTH_FAILURES: '1000000' });
const pid = service.child.pid!;

/** A call that must not fail at the transport; returns status and body text. */
async function request(
  method: string,
  path: string,
  key = service.key,
  body?: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; text: string }> {
  const r = await call(service.url, method, path, key, body, headers);
  return { status: r.status, text: r.body.toString() };
}
async function expectStatus(method: string, path: string, status: number, body?: string, key = service.key): Promise<string> {
  const r = await request(method, path, key, body, body?.startsWith('{') === true ? { 'content-type': 'application/json' } : {});
  if (r.status !== status) throw new Error(`${method} ${path}: ${r.status} ${r.text.slice(0, 200)}`);
  return r.text;
}

/** The stable workspaces: their token, the files each should hold (path → last text's marker) and the reads made. */
interface Workspace {
  name: string;
  token: string;
  files: Map<string, string>;
  reads: number;
  /** Paths being uploaded or deleted now: not chosen by another client meanwhile. */
  busy: Set<string>;
}
const workspaces: Workspace[] = [];
let marker = 0;
const nextMarker = (): string => `mark${(marker++).toString(36)}x`;
const text = (name: string, path: string, mark: string): string =>
  Array.from({ length: 24 }, (_, line) => `${name} ${path} line ${line + 1} alpha beta gamma ${line % 5 === 0 ? mark : ''}\n`).join('');

async function mintToken(name: string): Promise<{ id: string; token: string }> {
  return JSON.parse(await expectStatus('POST', `/v1/workspaces/${name}/tokens`, 201, JSON.stringify({ ttlSeconds: 86_400 }))) as { id: string; token: string };
}

// The clients' window: latencies and outcomes since the last sample.
let windowLatencies: number[] = [];
let windowErrors = 0;
let windowServerErrors = 0;
let serverErrors = 0;
const unexpected: string[] = [];

function noteOutcome(what: string, status: number, ms: number, expected: number[]): void {
  windowLatencies.push(ms);
  if (status >= 500) {
    windowServerErrors++;
    serverErrors++;
  }
  if (!expected.includes(status)) {
    windowErrors++;
    if (unexpected.length < 50) unexpected.push(`${what}: ${status}`);
  }
}

async function timed(
  what: string,
  method: string,
  path: string,
  expected: number[],
  key?: string,
  body?: string,
  headers?: Record<string, string>,
): Promise<{ status: number; text: string }> {
  const started = performance.now();
  const r = await request(method, path, key, body, headers);
  noteOutcome(what, r.status, performance.now() - started, expected);
  return r;
}

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)];

/** A read of a stable workspace through its token; counted for the audit check. */
async function read(ws: Workspace): Promise<void> {
  const paths = [...ws.files.keys()];
  const path = paths.length === 0 ? '/none.txt' : pick(paths);
  const choice = Math.random();
  const base = `/v1/workspaces/${ws.name}`;
  ws.reads++;
  if (choice < 1 / 12) {
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'grep', arguments: { pattern: 'gamma 1', output_mode: 'count' } },
    });
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
    await timed('mcp grep', 'POST', `${base}/mcp`, [200], ws.token, body, headers);
    return;
  }
  const reads = [
    `grep?pattern=${encodeURIComponent(pick([...ws.files.values(), 'gamma 12']))}&output_mode=count`,
    'grep?pattern=alpha&head_limit=20',
    `cat?path=${encodeURIComponent(path)}&offset=3&limit=10`,
    'ls?path=/',
    `find?pattern=${encodeURIComponent('**/*.txt')}`,
  ];
  // A file deleted meanwhile answers 404 (and is audited like any read).
  await timed('read', 'GET', `${base}/${pick(reads)}`, [200, 404], ws.token);
}

async function upload(ws: Workspace): Promise<void> {
  const existing = [...ws.files.keys()].filter((p) => !ws.busy.has(p));
  const path = Math.random() < 0.5 && existing.length > 0 ? pick(existing) : `/up/${nextMarker()}.txt`;
  if (ws.busy.has(path)) return;
  ws.busy.add(path);
  try {
    const mark = nextMarker();
    const r = await timed('upload', 'PUT', `/v1/workspaces/${ws.name}/files${path}`, [202], undefined, text(ws.name, path, mark));
    if (r.status === 202) ws.files.set(path, mark);
  } finally {
    ws.busy.delete(path);
  }
}

async function remove(ws: Workspace): Promise<void> {
  const candidates = [...ws.files.keys()].filter((p) => p.startsWith('/up/') && !ws.busy.has(p));
  if (candidates.length === 0) return;
  const path = pick(candidates);
  ws.busy.add(path);
  try {
    const r = await timed('delete', 'DELETE', `/v1/workspaces/${ws.name}/files${path}`, [204]);
    if (r.status === 204) ws.files.delete(path);
  } finally {
    ws.busy.delete(path);
  }
}

let temporary = 0;
async function passingWorkspace(): Promise<void> {
  const name = `temp-${temporary++}`;
  await timed('create', 'POST', '/v1/workspaces', [201], undefined, JSON.stringify({ name }), { 'content-type': 'application/json' });
  for (const k of [1, 2]) await timed('upload', 'PUT', `/v1/workspaces/${name}/files/f${k}.txt`, [202], undefined, text(name, `/f${k}.txt`, 'temporary'));
  await timed('read', 'GET', `/v1/workspaces/${name}/grep?pattern=temporary&output_mode=count`, [200]);
  await timed('delete workspace', 'DELETE', `/v1/workspaces/${name}`, [204]);
}

async function tokenRoundTrip(ws: Workspace): Promise<void> {
  const started = performance.now();
  const minted = await mintToken(ws.name);
  noteOutcome('mint', 201, performance.now() - started, [201]);
  ws.reads++;
  await timed('read with a new token', 'GET', `/v1/workspaces/${ws.name}/ls`, [200], minted.token);
  await timed('revoke', 'DELETE', `/v1/tokens/${minted.id}`, [204]);
  // Refused once revoked (not audited: no caller).
  await timed('read with a revoked token', 'GET', `/v1/workspaces/${ws.name}/ls`, [401], minted.token);
}

/** One client: actions by weight until `stop`. */
async function client(stop: () => boolean): Promise<void> {
  while (!stop()) {
    const ws = pick(workspaces);
    const roll = Math.random();
    try {
      if (roll < 0.8) await read(ws);
      else if (roll < 0.92) await upload(ws);
      else if (roll < 0.96) await remove(ws);
      else if (roll < 0.98) await passingWorkspace();
      else await tokenRoundTrip(ws);
    } catch (error) {
      windowErrors++;
      if (unexpected.length < 50) unexpected.push(`transport: ${(error as Error).message}`);
    }
  }
}

/** Values of a metric series by label value, from the Prometheus text. */
function byLabel(metrics: string, name: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of metrics.matchAll(new RegExp(`^${name}\\{thread="([^"]+)"\\} (\\S+)$`, 'gm'))) out[m[1]] = Number(m[2]);
  return out;
}

/** Every process: pid → [parent pid, command line]. */
async function processes(): Promise<Map<number, [number, string]>> {
  const out = new Map<number, [number, string]>();
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = await readFile(`/proc/${entry}/stat`, 'utf8');
      const parent = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      out.set(Number(entry), [parent, (await readFile(`/proc/${entry}/cmdline`, 'utf8')).replaceAll('\0', ' ')]);
    } catch {
      // Ended meanwhile.
    }
  }
  return out;
}

/** The descendants of `roots` among `all`: pid → command line. */
function descendants(all: Map<number, [number, string]>, roots: number[]): Map<number, string> {
  const out = new Map<number, string>();
  const visit = (pid: number): void => {
    for (const [child, [parent, command]] of all) {
      if (parent === pid && !out.has(child)) {
        out.set(child, command);
        visit(child);
      }
    }
  };
  for (const root of roots) visit(root);
  return out;
}

async function countFiles(dir: string): Promise<number> {
  return (await readdir(dir).catch(() => [] as string[])).length;
}

const COLUMNS = [
  'minute',
  'rss_mb',
  'anon_mb',
  'heap_http_mb',
  'heap_read_mb',
  'heap_ingest_mb',
  'heap_total_mb',
  'open_shards_http',
  'open_shards_read',
  'open_shards_ingest',
  'fds',
  'extract_rss_mb',
  'postgres_rss_mb',
  'postgres_connections',
  'temp_files',
  'requests_per_second',
  'p99_ms',
  'errors',
  'server_errors',
] as const;
type Row = Record<(typeof COLUMNS)[number], number>;
const rows: Row[] = [];
const started = Date.now();
let lastSample = performance.now();

async function sample(): Promise<void> {
  const now = performance.now();
  const seconds = (now - lastSample) / 1000;
  lastSample = now;
  const latencies = windowLatencies.sort((a, b) => a - b);
  const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`).then((r) => r.text());
  const heaps = byLabel(metrics, 'vfs_thread_heap_used_bytes');
  const heapTotals = byLabel(metrics, 'vfs_thread_heap_total_bytes');
  const shards = byLabel(metrics, 'vfs_open_shards');
  const all = await processes();
  let extract = 0;
  for (const [child, command] of descendants(all, [pid])) if (command.includes('process-main')) extract += (await memoryMB(child)).rss;
  // The embedded PostgreSQL runs detached from the service: found by its data directory.
  const postmasters = [...all].filter(([, [, command]]) => command.includes(`-D ${join(service.dataDir, 'pg')} `)).map(([p]) => p);
  let postgres = 0;
  let connections = 0;
  for (const p of postmasters) postgres += (await memoryMB(p)).anon;
  for (const [child, command] of descendants(all, postmasters)) {
    // Shared buffers count in every backend's Rss: the private part (Anonymous) sums honestly.
    postgres += (await memoryMB(child)).anon;
    // A backend's title names its client: "postgres: <user> <database> <host>(<port>) <state>".
    if (/^postgres: \S+ \S+ (?:\[local\]|\d+\.\d+\.\d+\.\d+\(\d+\))/.test(command)) connections++;
  }
  const serviceMemory = await memoryMB(pid);
  const row: Row = {
    minute: Math.round(((Date.now() - started) / 60_000) * 100) / 100,
    rss_mb: Math.round(serviceMemory.rss),
    anon_mb: Math.round(serviceMemory.anon),
    heap_http_mb: Math.round((heaps.http ?? 0) / 1048576),
    heap_read_mb: Math.round((heaps.read ?? 0) / 1048576),
    heap_ingest_mb: Math.round((heaps.ingest ?? 0) / 1048576),
    heap_total_mb: Math.round(Object.values(heapTotals).reduce((a, b) => a + b, 0) / 1048576),
    open_shards_http: shards.http ?? 0,
    open_shards_read: shards.read ?? 0,
    open_shards_ingest: shards.ingest ?? 0,
    fds: (await readdir(`/proc/${pid}/fd`)).length,
    extract_rss_mb: Math.round(extract),
    postgres_rss_mb: Math.round(postgres),
    postgres_connections: connections,
    temp_files: (await countFiles(join(service.dataDir, 'blobs', 'tmp'))) + (await countFiles(join(service.dataDir, 'snapshots-tmp'))),
    requests_per_second: Math.round(latencies.length / seconds),
    p99_ms: latencies.length === 0 ? 0 : Math.round(latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * 0.99))] * 10) / 10,
    errors: windowErrors,
    server_errors: windowServerErrors,
  };
  windowLatencies = [];
  windowErrors = 0;
  windowServerErrors = 0;
  rows.push(row);
  log(COLUMNS.map((c) => `${c}=${row[c]}`).join(' '));
}

/** Least-squares slope of `ys` over `xs`, and the standard deviation of what it leaves. */
function trend(xs: number[], ys: number[]): { slope: number; noise: number } {
  const n = xs.length;
  const mx = xs.reduce((a, b) => a + b, 0) / n;
  const my = ys.reduce((a, b) => a + b, 0) / n;
  let sxy = 0;
  let sxx = 0;
  for (let i = 0; i < n; i++) {
    sxy += (xs[i] - mx) * (ys[i] - my);
    sxx += (xs[i] - mx) ** 2;
  }
  const slope = sxx === 0 ? 0 : sxy / sxx;
  const residuals = ys.map((y, i) => y - (my + slope * (xs[i] - mx)));
  return { slope, noise: Math.sqrt(residuals.reduce((a, r) => a + r * r, 0) / n) };
}

let failed = false;
try {
  log(`creating ${workspaceCount} workspaces`);
  for (let i = 0; i < workspaceCount; i++) {
    const name = `soak-${i}`;
    await expectStatus('POST', '/v1/workspaces', 201, JSON.stringify({ name }));
    const files = new Map<string, string>();
    for (const path of ['/docs/readme.md', '/src/main.txt', '/notes/todo.txt']) {
      const mark = nextMarker();
      await expectStatus('PUT', `/v1/workspaces/${name}/files${path}`, 202, text(name, path, mark));
      files.set(path, mark);
    }
    workspaces.push({ name, token: (await mintToken(name)).token, files, reads: 0, busy: new Set() });
  }
  log(`loading for ${minutes} minutes`);
  const deadline = Date.now() + minutes * 60_000;
  const sampler = setInterval(() => void sample().catch((error: unknown) => log(`sample failed: ${(error as Error).message}`)), SAMPLE_MS);
  await sample();
  await Promise.all(Array.from({ length: CLIENTS }, () => client(() => Date.now() >= deadline)));
  clearInterval(sampler);

  log('checking every upload, the answers and the audit logs');
  let lost = 0;
  let wrongAudit = 0;
  for (const ws of workspaces) {
    for (;;) {
      const listing = JSON.parse(await expectStatus('GET', `/v1/workspaces/${ws.name}/files?status=pending&limit=1`, 200)) as { files: unknown[] };
      if (listing.files.length === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    for (const [path, mark] of ws.files) {
      const found = await expectStatus('GET', `/v1/workspaces/${ws.name}/grep?pattern=${mark}`, 200);
      if (found !== `${path}\n`) {
        lost++;
        if (lost <= 10) log(`${ws.name}${path}: grep for its last text ${mark} answered ${JSON.stringify(found)}`);
      }
    }
    let events = 0;
    let cursor: string | null = null;
    do {
      const page = JSON.parse(await expectStatus('GET', `/v1/workspaces/${ws.name}/audit?limit=1000${cursor === null ? '' : `&cursor=${cursor}`}`, 200)) as {
        events: Array<{ tool: string }>;
        nextCursor: string | null;
      };
      events += page.events.length;
      cursor = page.nextCursor;
    } while (cursor !== null);
    // The checks above are reads with the management key: ws.files.size greps.
    const expected = ws.reads + ws.files.size;
    if (events !== expected) {
      wrongAudit++;
      if (wrongAudit <= 10) log(`${ws.name}: ${events} audit events for ${expected} reads`);
    }
  }

  await mkdir(out, { recursive: true });
  await writeFile(join(out, 'soak.csv'), `${COLUMNS.join(',')}\n${rows.map((r) => COLUMNS.map((c) => r[c]).join(',')).join('\n')}\n`);
  const x = rows.map((r) => r.minute);
  const series = (column: (typeof COLUMNS)[number]) => rows.map((r) => r[column]);
  await writeChart(join(out, 'memory.svg'), {
    title: `Memory over a ${minutes}-minute soak (one node, ${workspaceCount} workspaces)`,
    x,
    xName: 'minutes',
    yName: 'MB',
    lines: [
      { name: 'service resident', values: series('rss_mb') },
      { name: 'service anonymous', values: series('anon_mb') },
      { name: 'V8 heap, HTTP thread', values: series('heap_http_mb') },
      { name: 'V8 heap, read threads', values: series('heap_read_mb') },
      { name: 'V8 heap, ingest thread', values: series('heap_ingest_mb') },
      { name: 'V8 heaps reserved, all threads', values: series('heap_total_mb') },
      { name: 'extraction processes', values: series('extract_rss_mb') },
      { name: 'PostgreSQL (private)', values: series('postgres_rss_mb') },
    ],
  });
  await writeChart(join(out, 'handles.svg'), {
    title: 'Descriptors, open shards, database connections and temp files',
    x,
    xName: 'minutes',
    yName: 'count',
    lines: [
      { name: 'descriptors', values: series('fds') },
      { name: 'open shards, HTTP thread', values: series('open_shards_http') },
      { name: 'open shards, read threads', values: series('open_shards_read') },
      { name: 'open shards, ingest thread', values: series('open_shards_ingest') },
      { name: 'PostgreSQL connections', values: series('postgres_connections') },
      { name: 'temp files', values: series('temp_files') },
    ],
  });
  await writeChart(join(out, 'requests.svg'), {
    title: `Requests of ${CLIENTS} clients: rate, p99 and errors per 10 s`,
    x,
    xName: 'minutes',
    yName: 'requests/s',
    rightName: 'ms / errors',
    lines: [
      { name: 'requests/s', values: series('requests_per_second') },
      { name: 'p99 (ms)', values: series('p99_ms'), right: true },
      { name: 'errors', values: series('errors'), right: true },
    ],
  });

  // Trends over the last 20 minutes (or the last two thirds of a shorter run).
  const window = rows.filter((r) => r.minute >= Math.max(minutes - 20, minutes / 3));
  const trends: Record<string, { perTenMinutes: number; noise: number; mean: number; flat: boolean }> = {};
  for (const column of ['rss_mb', 'anon_mb', 'heap_total_mb', 'fds', 'heap_read_mb', 'postgres_rss_mb', 'temp_files'] as const) {
    const ys = window.map((r) => r[column]);
    const { slope, noise } = trend(
      window.map((r) => r.minute),
      ys,
    );
    const mean = ys.reduce((a, b) => a + b, 0) / Math.max(1, ys.length);
    const drift = slope * (window.length > 0 ? window.at(-1)!.minute - window[0].minute : 0);
    // Flat: what the slope adds over the window is within twice the noise, or within 2% of the mean.
    trends[column] = {
      perTenMinutes: Math.round(slope * 10 * 10) / 10,
      noise: Math.round(noise * 10) / 10,
      mean: Math.round(mean),
      flat: Math.abs(drift) <= Math.max(2 * noise, 0.02 * mean),
    };
  }
  const summary = {
    minutes,
    workspaces: workspaceCount,
    clients: CLIENTS,
    samples: rows.length,
    requests: Math.round(rows.reduce((a, r) => a + r.requests_per_second * (SAMPLE_MS / 1000), 0)),
    serverErrors,
    unexpected,
    lostUploads: lost,
    workspacesWithWrongAudit: wrongAudit,
    trends,
  };
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  failed = serverErrors > 0 || unexpected.length > 0 || lost > 0 || wrongAudit > 0 || Object.values(trends).some((t) => !t.flat);
} finally {
  await service.stop();
}
if (failed) process.exitCode = 1;
