/**
 * A long mixed load on one node or several, sampled every 10 s, written as CSV and drawn as charts.
 *
 *   node --import tsx bench/soak.ts [minutes=30] [workspaces=300] [out] [--nodes N] [--restart-minutes M]
 *
 * One node (the default; `out` docs/soak): the service on a fresh data directory with its
 * embedded PostgreSQL, as `npm start` runs it (the environment passes through). Several
 * (`--nodes 3`; `out` docs/soak-cluster): nodes with `VFS_CLUSTER=on` on one PostgreSQL and one
 * S3 server (Swift) of the run's own; requests that name a workspace go to the node its name
 * hashes to, as the load balancer of docs/cluster.md sends them, and every `M` minutes (3) one
 * node other than the first is restarted in turn: taken out of the rotation, stopped with
 * SIGTERM, started again on its data directory and put back.
 *
 * It creates `workspaces` workspaces of three small files with a token each, then for `minutes`
 * runs 12 clients that each, in a loop: read (selective and broad grep, cat, ls, find, through
 * the workspace's token; one call in twelve is MCP's grep), upload a new file or upload again
 * over one, delete a file, create a workspace, fill, read and delete it, or mint a token, use
 * it, revoke it and see it refused. Every 10 s it samples each node's process (resident and
 * anonymous memory, each kind of thread's V8 heap in use, all heaps' reserved size, native
 * memory (anonymous less that reservation), the buffers held outside the heaps and open shards
 * from /metrics, descriptors), the extraction processes and PostgreSQL (resident memory,
 * connections), the files in the data directories' temp folders, the files the workspaces hold
 * (at most eight more each than at the start), the nodes serving, and the clients' requests/s,
 * p99 and errors.
 *
 * At the end: every acknowledged upload must be ready and found by grep at its path with its
 * last text, no answer may be a 5xx, and each workspace's audit log must hold exactly one event
 * per read answered (and at most one more per read whose connection failed). It writes
 * `<out>/soak.csv` and three SVG charts, prints the trend over the last 20 minutes (or the last
 * two thirds of a shorter run) of the first node's memory and descriptors (never restarted) and
 * of PostgreSQL's against their noise, and exits 1 when a check fails.
 */
import { createHash } from 'node:crypto';
import { mkdir, readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { buildService } from '../service/script-args.js';
import type { ServiceCluster } from '../test/helpers/cluster.js';
import { Backends, deploy } from './bench-cluster.js';
import { type Line, writeChart } from './charts.js';
import { call, freePort, memoryMB, startBenchService, threadSeries } from './lib.js';

const USAGE = 'usage: node --import tsx bench/soak.ts [minutes=30] [workspaces=300] [out] [--nodes N] [--restart-minutes M]\n';
const parsed = (() => {
  try {
    return parseArgs({ allowPositionals: true, options: { nodes: { type: 'string', default: '1' }, 'restart-minutes': { type: 'string', default: '3' } } });
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}`);
    process.exit(2);
  }
})();
const [minutesArg, workspacesArg, outArg] = parsed.positionals;
const minutes = Number(minutesArg ?? 30);
const workspaceCount = Number(workspacesArg ?? 300);
const nodeCount = Number(parsed.values.nodes);
const restartMinutes = Number(parsed.values['restart-minutes']);
const clustered = nodeCount > 1;
const out = outArg ?? (clustered ? 'docs/soak-cluster' : 'docs/soak');
if (
  !(minutes > 0) ||
  !Number.isInteger(workspaceCount) ||
  workspaceCount < 1 ||
  !Number.isInteger(nodeCount) ||
  nodeCount < 1 ||
  nodeCount > 26 ||
  !(restartMinutes > 0) ||
  parsed.positionals.length > 3
) {
  process.stderr.write(USAGE);
  process.exit(2);
}
const CLIENTS = 12;
const SAMPLE_MS = 10_000;

const log = (message: string): void => void process.stderr.write(`${new Date().toISOString().slice(11, 19)} ${message}\n`);

/** One service process under load. */
interface SoakNode {
  /** Its letter in the CSV's column names (`a`, `b`, ...). */
  letter: string;
  url: () => string;
  pid: () => number;
  metricsPort: number;
  dataDir: string;
  /** In the balancer's rotation: false from just before a restart's SIGTERM until it listens again. */
  serving: boolean;
}

/** What the soak runs against: its nodes, the management key and PostgreSQL's data directory. */
interface Deployment {
  key: string;
  nodes: SoakNode[];
  pgData: string;
  /** Takes a node out of the rotation, stops it with SIGTERM, starts it again and puts it back. */
  restart(node: SoakNode): Promise<void>;
  stop(): Promise<void>;
}

// Revoked tokens are tried on purpose: the failed-authentication lock would shut the clients out.
const SERVICE_ENV = { VFS_AUTH_FAILURES: '1000000' };

async function oneNode(): Promise<Deployment> {
  const metricsPort = await freePort();
  const service = await startBenchService({ ...SERVICE_ENV, VFS_METRICS_PORT: String(metricsPort) });
  const node: SoakNode = { letter: 'a', url: () => service.url, pid: () => service.child.pid!, metricsPort, dataDir: service.dataDir, serving: true };
  return {
    key: service.key,
    nodes: [node],
    pgData: join(service.dataDir, 'pg'),
    restart: () => Promise.reject(new Error('one node is not restarted')),
    stop: () => service.stop(),
  };
}

/** Logs the lines of a node's error-level log (JSON; the rest of its stderr is the runtime's warnings). */
function printed(node: SoakNode, stderr: string): void {
  for (const line of stderr.split('\n')) if (line.startsWith('{')) log(`node ${node.letter}: ${line}`);
}

async function severalNodes(count: number): Promise<Deployment> {
  buildService();
  const backends = await Backends.start();
  let cluster: ServiceCluster | null = null;
  try {
    // A stopping node keeps answering for 2 s, time for what was sent to it before it left the rotation.
    cluster = await deploy(backends, 'soak', { ...SERVICE_ENV, VFS_CLUSTER: 'on', VFS_DRAIN_SECONDS: '2' });
    const deployed = cluster;
    const nodes: SoakNode[] = [];
    for (let i = 0; i < count; i++) {
      const metricsPort = await freePort();
      // The first node alone makes the schema.
      const node = await deployed.add({ VFS_METRICS_PORT: String(metricsPort) });
      nodes.push({
        letter: String.fromCharCode(97 + i),
        url: () => deployed.url(node),
        pid: () => node.process?.child.pid ?? 0,
        metricsPort,
        dataDir: node.dataDir,
        serving: true,
      });
    }
    await deployed.liftLimits();
    return {
      key: deployed.key,
      nodes,
      pgData: join(backends.pgDir, 'pg'),
      async restart(soakNode) {
        const node = deployed.nodes[nodes.indexOf(soakNode)];
        soakNode.serving = false;
        const started = performance.now();
        const stopping = node.process;
        await deployed.signal(node, 'SIGTERM');
        printed(soakNode, stopping?.stderr() ?? '');
        await deployed.startNode(node);
        soakNode.serving = true;
        log(`restarted node ${soakNode.letter} in ${((performance.now() - started) / 1000).toFixed(1)} s`);
      },
      async stop() {
        const running = deployed.nodes.map((node) => node.process);
        await deployed.stop();
        for (const [i, p] of running.entries()) printed(nodes[i], p?.stderr() ?? '');
        await backends.stop();
      },
    };
  } catch (error) {
    await cluster?.stop().catch(() => {});
    await backends.stop().catch(() => {});
    throw error;
  }
}

const deployment = clustered ? await severalNodes(nodeCount) : await oneNode();
const { nodes } = deployment;

/** The node a request about workspace `name` goes to: the one its name hashes to, or the next serving. */
function nodeFor(name: string | undefined): SoakNode {
  const start = name === undefined ? 0 : createHash('sha1').update(name).digest().readUInt32BE(0) % nodes.length;
  for (let i = 0; i < nodes.length; i++) {
    const node = nodes[(start + i) % nodes.length];
    if (node.serving) return node;
  }
  throw new Error('no node is serving');
}

/** What a request carries besides its method and path. */
interface Send {
  key?: string;
  body?: string;
  headers?: Record<string, string>;
  /** The workspace whose node answers, when the path does not name it. */
  route?: string;
}

/** A call that must not fail at the transport; returns status and body text. */
async function request(method: string, path: string, send: Send = {}): Promise<{ status: number; text: string }> {
  const node = nodeFor(send.route ?? /^\/v1\/workspaces\/([^/?]+)/.exec(path)?.[1]);
  const r = await call(node.url(), method, path, send.key ?? deployment.key, send.body, send.headers).catch((error: unknown) => {
    throw new Error(`${method} ${path} on node ${node.letter}: ${(error as Error).message}`);
  });
  return { status: r.status, text: r.body.toString() };
}
async function expectStatus(method: string, path: string, status: number, body?: string): Promise<string> {
  const r = await request(method, path, { body, headers: body?.startsWith('{') === true ? { 'content-type': 'application/json' } : {} });
  if (r.status !== status) throw new Error(`${method} ${path}: ${r.status} ${r.text.slice(0, 200)}`);
  return r.text;
}

/**
 * The stable workspaces: their token, the files each should hold (path → last text's marker), the
 * reads answered, and those whose connection failed first (audited or not, as the service had got).
 */
interface Workspace {
  name: string;
  token: string;
  files: Map<string, string>;
  reads: number;
  unanswered: number;
  /** Paths being uploaded or deleted now: not chosen by another client meanwhile. */
  busy: Set<string>;
}
const workspaces: Workspace[] = [];
let marker = 0;
// Decimal between two letters: no marker is part of another (`mark12x` is not in `mark123x`).
const nextMarker = (): string => `mark${marker++}x`;
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

async function timed(what: string, method: string, path: string, expected: number[], send?: Send): Promise<{ status: number; text: string }> {
  const started = performance.now();
  const r = await request(method, path, send);
  noteOutcome(what, r.status, performance.now() - started, expected);
  return r;
}

const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)];
const JSON_BODY = { 'content-type': 'application/json' };

/** A read of stable workspace `ws`, counted for the audit check. */
async function readOf(ws: Workspace, what: string, method: string, path: string, expected: number[], send: Send): Promise<void> {
  try {
    await timed(what, method, path, expected, send);
  } catch (error) {
    ws.unanswered++;
    throw error;
  }
  ws.reads++;
}

/** A read of a stable workspace through its token. */
async function read(ws: Workspace): Promise<void> {
  const paths = [...ws.files.keys()];
  const path = paths.length === 0 ? '/none.txt' : pick(paths);
  const choice = Math.random();
  const base = `/v1/workspaces/${ws.name}`;
  if (choice < 1 / 12) {
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'tools/call',
      params: { name: 'grep', arguments: { pattern: 'gamma 1', output_mode: 'count' } },
    });
    const headers = { ...JSON_BODY, accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' };
    await readOf(ws, 'mcp grep', 'POST', `${base}/mcp`, [200], { key: ws.token, body, headers });
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
  await readOf(ws, 'read', 'GET', `${base}/${pick(reads)}`, [200, 404], { key: ws.token });
}

/** Files a stable workspace may hold beyond its first three. */
const MAX_ADDED = 8;

async function upload(ws: Workspace): Promise<void> {
  const existing = [...ws.files.keys()].filter((p) => !ws.busy.has(p));
  const added = [...ws.files.keys()].filter((p) => p.startsWith('/up/')).length;
  // At most MAX_ADDED added files: a delete finds nothing where nothing was added, so without
  // the bound the files would drift upwards.
  const fresh = Math.random() < 0.5 && added < MAX_ADDED;
  const path = !fresh && existing.length > 0 ? pick(existing) : `/up/${nextMarker()}.txt`;
  if (ws.busy.has(path)) return;
  ws.busy.add(path);
  try {
    const mark = nextMarker();
    const r = await timed('upload', 'PUT', `/v1/workspaces/${ws.name}/files${path}`, [202], { body: text(ws.name, path, mark) });
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
  await timed('create', 'POST', '/v1/workspaces', [201], { body: JSON.stringify({ name }), headers: JSON_BODY, route: name });
  for (const k of [1, 2]) await timed('upload', 'PUT', `/v1/workspaces/${name}/files/f${k}.txt`, [202], { body: text(name, `/f${k}.txt`, 'temporary') });
  await timed('read', 'GET', `/v1/workspaces/${name}/grep?pattern=temporary&output_mode=count`, [200]);
  await timed('delete workspace', 'DELETE', `/v1/workspaces/${name}`, [204]);
}

async function tokenRoundTrip(ws: Workspace): Promise<void> {
  const started = performance.now();
  const minted = await mintToken(ws.name);
  noteOutcome('mint', 201, performance.now() - started, [201]);
  await readOf(ws, 'read with a new token', 'GET', `/v1/workspaces/${ws.name}/ls`, [200], { key: minted.token });
  await timed('revoke', 'DELETE', `/v1/tokens/${minted.id}`, [204], { route: ws.name });
  // Refused once revoked (not audited: no caller).
  await timed('read with a revoked token', 'GET', `/v1/workspaces/${ws.name}/ls`, [401], { key: minted.token });
}

/** One client: actions by weight until `stop`. */
async function client(stop: () => boolean): Promise<void> {
  while (!stop()) {
    const ws = pick(workspaces);
    const roll = Math.random();
    try {
      // Deletes as often as uploads add a file (half of them, up to MAX_ADDED): the data stays
      // about the same size, so memory that grows is not memory needed for more files.
      if (roll < 0.8) await read(ws);
      else if (roll < 0.9) await upload(ws);
      else if (roll < 0.95) await remove(ws);
      else if (roll < 0.975) await passingWorkspace();
      else await tokenRoundTrip(ws);
    } catch (error) {
      windowErrors++;
      log(`transport error: ${(error as Error).message}`);
      if (unexpected.length < 50) unexpected.push(`transport: ${(error as Error).message}`);
    }
  }
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

/** What is sampled of each node; with several, each column's name ends in `_` and the node's letter. */
const NODE_COLUMNS = [
  'rss_mb',
  'anon_mb',
  'heap_http_mb',
  'heap_read_mb',
  'heap_ingest_mb',
  'heap_total_mb',
  'native_mb',
  'external_mb',
  'open_shards_http',
  'open_shards_read',
  'open_shards_ingest',
  'fds',
] as const;
type NodeColumn = (typeof NODE_COLUMNS)[number];
const column = (name: NodeColumn, node: SoakNode): string => (clustered ? `${name}_${node.letter}` : name);
const COLUMNS = [
  'minute',
  ...nodes.flatMap((node) => NODE_COLUMNS.map((name) => column(name, node))),
  'extract_rss_mb',
  'postgres_rss_mb',
  'postgres_connections',
  'temp_files',
  'files',
  ...(clustered ? ['nodes_serving'] : []),
  'requests_per_second',
  'p99_ms',
  'errors',
  'server_errors',
];
/** One sample; null where a node was not running. */
type Row = Record<string, number | null>;
const rows: Row[] = [];
const started = Date.now();
let lastSample = performance.now();

/** A node's columns, or nulls when it is down (restarting). */
async function sampleNode(node: SoakNode): Promise<Record<NodeColumn, number> | null> {
  const pid = node.pid();
  if (pid === 0) return null;
  try {
    const metrics = await fetch(`http://127.0.0.1:${node.metricsPort}/metrics`, { signal: AbortSignal.timeout(5_000) }).then((r) => r.text());
    const heaps = threadSeries(metrics, 'vfs_thread_heap_used_bytes');
    const heapTotals = threadSeries(metrics, 'vfs_thread_heap_total_bytes');
    const external = threadSeries(metrics, 'vfs_thread_external_bytes');
    const shards = threadSeries(metrics, 'vfs_open_shards');
    const memory = await memoryMB(pid);
    const heapTotalMB = Object.values(heapTotals).reduce((a, b) => a + b, 0) / 1048576;
    return {
      rss_mb: Math.round(memory.rss),
      anon_mb: Math.round(memory.anon),
      heap_http_mb: Math.round((heaps.http ?? 0) / 1048576),
      heap_read_mb: Math.round((heaps.read ?? 0) / 1048576),
      heap_ingest_mb: Math.round((heaps.ingest ?? 0) / 1048576),
      heap_total_mb: Math.round(heapTotalMB),
      // Native memory: anonymous memory outside the V8 heaps (the C++ allocator's, LMDB's, Node's).
      native_mb: Math.round(memory.anon - heapTotalMB),
      external_mb: Math.round(Object.values(external).reduce((a, b) => a + b, 0) / 1048576),
      open_shards_http: shards.http ?? 0,
      open_shards_read: shards.read ?? 0,
      open_shards_ingest: shards.ingest ?? 0,
      fds: (await readdir(`/proc/${pid}/fd`)).length,
    };
  } catch (error) {
    // Stopping or starting (a restarted node's samples resume once it serves again), or too busy
    // to answer its metrics within 5 s: a gap in its lines, not a lost sample of the others.
    if (node.serving) log(`node ${node.letter} not sampled: ${(error as Error).message}`);
    return null;
  }
}

async function sample(): Promise<void> {
  const now = performance.now();
  const seconds = (now - lastSample) / 1000;
  lastSample = now;
  // The window is taken before the first await: requests ending meanwhile belong to the next one.
  const latencies = windowLatencies.sort((a, b) => a - b);
  const errors = windowErrors;
  const serverErrorsNow = windowServerErrors;
  windowLatencies = [];
  windowErrors = 0;
  windowServerErrors = 0;
  const row: Row = { minute: Math.round(((Date.now() - started) / 60_000) * 100) / 100 };
  for (const node of nodes) {
    const values = await sampleNode(node);
    for (const name of NODE_COLUMNS) row[column(name, node)] = values === null ? null : values[name];
  }
  const all = await processes();
  let extract = 0;
  const pids = nodes.map((node) => node.pid()).filter((pid) => pid !== 0);
  for (const [child, command] of descendants(all, pids)) if (command.includes('process-main')) extract += (await memoryMB(child)).rss;
  // PostgreSQL runs detached from the service: found by its data directory.
  const postmasters = [...all].filter(([, [, command]]) => command.includes(`-D ${deployment.pgData} `)).map(([p]) => p);
  let postgres = 0;
  let connections = 0;
  for (const p of postmasters) postgres += (await memoryMB(p)).anon;
  for (const [child, command] of descendants(all, postmasters)) {
    // Shared buffers count in every backend's Rss: the private part (Anonymous) sums honestly.
    postgres += (await memoryMB(child)).anon;
    // A backend's title names its client: "postgres: <user> <database> <host>(<port>) <state>".
    if (/^postgres: \S+ \S+ (?:\[local\]|\d+\.\d+\.\d+\.\d+\(\d+\))/.test(command)) connections++;
  }
  row.extract_rss_mb = Math.round(extract);
  row.postgres_rss_mb = Math.round(postgres);
  row.postgres_connections = connections;
  let temp = 0;
  for (const node of nodes) temp += (await countFiles(join(node.dataDir, 'blobs', 'tmp'))) + (await countFiles(join(node.dataDir, 'snapshots-tmp')));
  row.temp_files = temp;
  row.files = workspaces.reduce((sum, ws) => sum + ws.files.size, 0);
  if (clustered) row.nodes_serving = nodes.filter((node) => node.serving).length;
  row.requests_per_second = Math.round(latencies.length / seconds);
  row.p99_ms = latencies.length === 0 ? 0 : Math.round(latencies[Math.min(latencies.length - 1, Math.floor(latencies.length * 0.99))] * 10) / 10;
  row.errors = errors;
  row.server_errors = serverErrorsNow;
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

/** Restarts the nodes after the first, one every `restartMinutes`, until `stop`; resolves with how many. */
async function restarter(stop: () => boolean): Promise<number> {
  let restarts = 0;
  for (;;) {
    const due = Date.now() + restartMinutes * 60_000;
    while (!stop() && Date.now() < due) await new Promise((resolve) => setTimeout(resolve, 500));
    if (stop()) return restarts;
    await deployment.restart(nodes[1 + (restarts % (nodes.length - 1))]);
    restarts++;
  }
}

let failed = false;
try {
  log(`creating ${workspaceCount} workspaces on ${nodes.length} node${nodes.length === 1 ? '' : 's'}`);
  for (let i = 0; i < workspaceCount; i++) {
    const name = `soak-${i}`;
    await expectStatus('POST', '/v1/workspaces', 201, JSON.stringify({ name }));
    const files = new Map<string, string>();
    for (const path of ['/docs/readme.md', '/src/main.txt', '/notes/todo.txt']) {
      const mark = nextMarker();
      await expectStatus('PUT', `/v1/workspaces/${name}/files${path}`, 202, text(name, path, mark));
      files.set(path, mark);
    }
    workspaces.push({ name, token: (await mintToken(name)).token, files, reads: 0, unanswered: 0, busy: new Set() });
  }
  log(`loading for ${minutes} minutes${clustered ? `, restarting a node every ${restartMinutes}` : ''}`);
  const deadline = Date.now() + minutes * 60_000;
  const over = (): boolean => Date.now() >= deadline;
  const sampler = setInterval(() => void sample().catch((error: unknown) => log(`sample failed: ${(error as Error).message}`)), SAMPLE_MS);
  await sample();
  const [restarts] = await Promise.all([clustered ? restarter(over) : 0, ...Array.from({ length: CLIENTS }, () => client(over))]);
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
    if (events < expected || events > expected + ws.unanswered) {
      wrongAudit++;
      if (wrongAudit <= 10) log(`${ws.name}: ${events} audit events for ${expected} reads answered and ${ws.unanswered} cut off`);
    }
  }

  await mkdir(out, { recursive: true });
  await writeFile(join(out, 'soak.csv'), `${COLUMNS.join(',')}\n${rows.map((r) => COLUMNS.map((c) => r[c] ?? '').join(',')).join('\n')}\n`);
  const x = rows.map((r) => r.minute as number);
  const series = (name: string) => rows.map((r) => r[name] ?? null);
  /** One line per node (named `what` and, with several, the node's letter). */
  const perNode = (name: NodeColumn, what: string): Line[] =>
    nodes.map((node) => ({ name: clustered ? `${what}, node ${node.letter}` : what, values: series(column(name, node)) }));
  const setting = clustered ? `${nodes.length} nodes, one restarted every ${restartMinutes} minutes` : 'one node';
  await writeChart(join(out, 'memory.svg'), {
    title: `Memory over a ${minutes}-minute soak (${setting}, ${workspaceCount} workspaces)`,
    x,
    xName: 'minutes',
    yName: 'MB',
    lines: [
      ...perNode('rss_mb', 'service resident'),
      ...(clustered
        ? perNode('heap_total_mb', 'V8 heaps reserved')
        : [
            ...perNode('anon_mb', 'service anonymous'),
            ...perNode('heap_http_mb', 'V8 heap, HTTP thread'),
            ...perNode('heap_read_mb', 'V8 heap, read threads'),
            ...perNode('heap_ingest_mb', 'V8 heap, ingest thread'),
            ...perNode('heap_total_mb', 'V8 heaps reserved, all threads'),
            ...perNode('native_mb', 'native (anonymous less the V8 heaps)'),
            ...perNode('external_mb', 'buffers outside the heaps, all threads'),
          ]),
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
      ...perNode('fds', 'descriptors'),
      ...(clustered
        ? []
        : [
            ...perNode('open_shards_http', 'open shards, HTTP thread'),
            ...perNode('open_shards_read', 'open shards, read threads'),
            ...perNode('open_shards_ingest', 'open shards, ingest thread'),
          ]),
      { name: 'PostgreSQL connections', values: series('postgres_connections') },
      { name: 'temp files', values: series('temp_files') },
    ],
  });
  await writeChart(join(out, 'requests.svg'), {
    title: `Requests of ${CLIENTS} clients: rate, p99 and errors per 10 s`,
    x,
    xName: 'minutes',
    yName: 'requests/s',
    rightName: clustered ? 'ms / errors / nodes' : 'ms / errors',
    lines: [
      { name: 'requests/s', values: series('requests_per_second') },
      { name: 'p99 (ms)', values: series('p99_ms'), right: true },
      { name: 'errors', values: series('errors'), right: true },
      ...(clustered ? [{ name: 'nodes serving', values: series('nodes_serving'), right: true }] : []),
    ],
  });

  // Trends over the last 20 minutes (or the last two thirds of a shorter run), of the first node
  // (never restarted) and of PostgreSQL.
  const window = rows.filter((r) => (r.minute as number) >= Math.max(minutes - 20, minutes / 3));
  const trends: Record<string, { perTenMinutes: number; noise: number; mean: number; flat: boolean }> = {};
  const trended = [
    ...(['rss_mb', 'anon_mb', 'heap_total_mb', 'native_mb', 'external_mb', 'fds', 'heap_read_mb'] as const).map((name) => column(name, nodes[0])),
    'postgres_rss_mb',
    'temp_files',
  ];
  for (const name of trended) {
    const sampled = window.filter((r) => r[name] !== null);
    const xs = sampled.map((r) => r.minute as number);
    const ys = sampled.map((r) => r[name] as number);
    const { slope, noise } = trend(xs, ys);
    const mean = ys.reduce((a, b) => a + b, 0) / Math.max(1, ys.length);
    const drift = slope * (xs.length > 0 ? xs.at(-1)! - xs[0] : 0);
    // Flat: what the slope adds over the window is within twice the noise, or within 2% of the mean.
    trends[name] = {
      perTenMinutes: Math.round(slope * 10 * 10) / 10,
      noise: Math.round(noise * 10) / 10,
      mean: Math.round(mean),
      flat: Math.abs(drift) <= Math.max(2 * noise, 0.02 * mean),
    };
  }
  const summary = {
    minutes,
    workspaces: workspaceCount,
    nodes: nodes.length,
    restarts,
    clients: CLIENTS,
    samples: rows.length,
    requests: Math.round(rows.reduce((a, r) => a + (r.requests_per_second as number) * (SAMPLE_MS / 1000), 0)),
    serverErrors,
    unexpected,
    lostUploads: lost,
    workspacesWithWrongAudit: wrongAudit,
    trends,
  };
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  failed = serverErrors > 0 || unexpected.length > 0 || lost > 0 || wrongAudit > 0 || Object.values(trends).some((t) => !t.flat);
} finally {
  await deployment.stop();
}
if (failed) process.exitCode = 1;
