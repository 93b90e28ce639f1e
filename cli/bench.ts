/**
 * `bench`: load-tests a running service with autocannon, the way the people who benchmark it
 * do, and reports what each scenario got. With `--corpus` it first makes the workspace hold a
 * directory (the push command's code); given only `--workspace`, it takes the files and patterns
 * each scenario needs from what the workspace holds. The read scenarios run with a scoped token
 * it mints (what an agent gets), the upload scenario with the management key.
 *
 * Scenarios: `cat` (100 lines of a text file), `ls` (that file's directory), `find` (a glob of
 * the most common extension), `grep-selective` (an identifier of that file, few matches),
 * `grep-broad` (its most common word, densest files first, head_limit 20), `agent-mix` (find,
 * grep, then cat at offsets, as a coding agent reads), `mcp-grep` (grep as an MCP tool call),
 * and `upload` (re-uploads of 64 small files, deleted at the end; only when named, since it
 * writes into the workspace).
 */
import autocannon from 'autocannon';
import type { ApiClient } from './client.js';
import { CliError, httpError } from './errors.js';
import { listAll } from './files.js';
import type { Output } from './output.js';
import type { StartBar } from './progress.js';
import { formatSummary, push, pushFailed } from './push.js';
import type { MintedToken } from './tokens.js';

/** The scenarios, in the order they run. */
export const SCENARIOS = ['cat', 'ls', 'find', 'grep-selective', 'grep-broad', 'agent-mix', 'mcp-grep', 'upload'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];
/** What runs when no `--scenario` is given: every scenario that only reads. */
export const DEFAULT_SCENARIOS: readonly ScenarioName[] = SCENARIOS.filter((s) => s !== 'upload');

/** Options of a run. */
export interface BenchOptions {
  /** The workspace to read (and, with `corpus`, to fill); default `bench` with a corpus. */
  workspace?: string;
  /** A directory pushed into the workspace first. */
  corpus?: string;
  scenarios: readonly ScenarioName[];
  connections: number;
  pipelining: number;
  durationSeconds: number;
  /** Progress bars of the push and of each scenario (on a terminal). */
  bars: StartBar;
  /** Whether autocannon may draw its own progress bar on stderr (a terminal). */
  progress: boolean;
  /** Writes a line on stderr: a warning, the push's summary. */
  note: (text: string) => void;
}

/** What one scenario got. */
export interface ScenarioResult {
  name: ScenarioName;
  /** The first request of the scenario, as `METHOD /path?query`. */
  request: string;
  requestsPerSecond: number;
  latencyMs: { p50: number; p90: number; p99: number; max: number };
  /** Responses with a status outside 2xx, and how many of each status. */
  non2xx: number;
  statuses: Record<string, number>;
  /** Connection errors and timeouts (autocannon's counts). */
  errors: number;
  timeouts: number;
  bytesPerSecond: number;
  requests: number;
}

/** The whole run, as `--json` writes it. */
export interface BenchReport {
  url: string;
  workspace: string;
  connections: number;
  pipelining: number;
  durationSeconds: number;
  scenarios: ScenarioResult[];
  warnings: string[];
}

/** Uploads the `upload` scenario cycles through (so re-uploads, not thousands of new files). */
const UPLOAD_SLOTS = 64;
const UPLOAD_DIR = '/agent-vfs-bench';
/** Lines a `cat` reads. */
const CAT_LINES = 100;

/** Files and patterns the scenarios use, taken from the workspace. */
export interface Inputs {
  catPath: string;
  catLines: number;
  lsPath: string;
  findGlob: string;
  selective: string;
  broad: string;
}

/** Runs the benchmark and returns its report; throws CliError when the target cannot be measured. */
export async function bench(client: ApiClient, out: Output, key: string, options: BenchOptions): Promise<BenchReport> {
  if (!key.startsWith('svc_sk_')) throw new CliError('bench needs a management key (svc_sk_…): it mints a scoped token for the read scenarios');
  const workspace = options.workspace ?? 'bench';
  if (options.corpus !== undefined) await fill(client, workspace, options);
  else if (options.workspace === undefined) throw new CliError('give --workspace (an existing workspace to read), or --corpus (a directory to push first)');

  const inputs = await scenarioInputs(client, workspace);
  const ttlSeconds = Math.min(86_400, Math.max(600, options.durationSeconds * (options.scenarios.length + 2) + 300));
  const minted = await client.postJson<MintedToken>(`/v1/workspaces/${encodeURIComponent(workspace)}/tokens`, `mint a token for ${workspace}`, {
    ttlSeconds,
  });
  const warnings: string[] = [];
  const base = client.baseUrl;
  const ws = `/v1/workspaces/${encodeURIComponent(workspace)}`;
  try {
    const limited = await rateProbe(base, `${ws}/ls?path=${encodeURIComponent(inputs.lsPath)}`, minted.token, options.connections);
    if (limited > 0) {
      warnings.push(
        `the target's rate limits refused ${limited} requests of a one-second burst with 429: the run would measure 429s; ` +
          'lift the read limits for this account (npm run admin -- set-limits) or lower --connections',
      );
      options.note(`agent-vfs: warning: ${warnings.at(-1)}`);
    }
    const scenarios: ScenarioResult[] = [];
    for (const name of options.scenarios) {
      const requests = scenarioRequests(name, ws, inputs);
      const auth = name === 'upload' ? key : minted.token;
      const result = await run(base, name, requests, auth, options);
      scenarios.push(result);
      const refused = result.statuses['429'] ?? 0;
      if (refused > 0) {
        warnings.push(`${name}: ${refused} of ${result.requests} requests were refused with 429 by the target's rate limits`);
        options.note(`agent-vfs: warning: ${warnings.at(-1)}`);
      }
      if (!out.json) out.line(formatScenario(result, options));
    }
    return {
      url: base,
      workspace,
      connections: options.connections,
      pipelining: options.pipelining,
      durationSeconds: options.durationSeconds,
      scenarios,
      warnings,
    };
  } finally {
    if (options.scenarios.includes('upload')) await removeUploads(client, workspace);
    await client.json({ method: 'DELETE', path: `/v1/tokens/${encodeURIComponent(minted.id)}`, what: 'revoke the benchmark token' }).catch(() => undefined);
  }
}

/** The scenarios that lost a request: a status outside 2xx, an error or a timeout. */
export function failedScenarios(report: BenchReport): ScenarioResult[] {
  return report.scenarios.filter((s) => s.non2xx + s.errors + s.timeouts > 0);
}

/** Creates the workspace if missing and pushes the corpus into it, waiting for ingest. */
async function fill(client: ApiClient, workspace: string, options: BenchOptions): Promise<void> {
  const created = await client.send({
    method: 'POST',
    path: '/v1/workspaces',
    what: `create workspace ${workspace}`,
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: workspace }),
  });
  if (created.status !== 201 && created.status !== 409) throw httpError(created.status, `create workspace ${workspace}`, await created.text());
  await created.discard();
  const summary = await push(client, { dir: options.corpus!, workspace, visibility: null, delete: false, retryErrors: false, wait: true, bars: options.bars });
  options.note(formatSummary(summary));
  if (pushFailed(summary) && summary.ready === 0) throw new CliError(`nothing of ${options.corpus} became readable in ${workspace}`);
}

/** Picks the files and patterns of the scenarios from what the workspace holds. */
export async function scenarioInputs(client: ApiClient, workspace: string): Promise<Inputs> {
  const ready = (await listAll(client, workspace, 'ready')).filter((f) => f.path !== '' && !f.path.startsWith(`${UPLOAD_DIR}/`));
  if (ready.length === 0) throw new CliError(`workspace ${workspace} holds no ready file to read: push one first (--corpus DIR)`);
  // A text file near the middle by size: what an agent reads most.
  const texts = ready.filter((f) => f.contentType.startsWith('text/') && f.sizeBytes > 0);
  const pool = (texts.length > 0 ? texts : ready).sort((a, b) => a.sizeBytes - b.sizeBytes);
  const cat = pool[Math.floor(pool.length / 2)];
  const ws = `/v1/workspaces/${encodeURIComponent(workspace)}`;
  const sample = await readText(client, `${ws}/cat?path=${encodeURIComponent(cat.path)}&limit=2000`, 'read a sample file');
  const lines = sample.split('\n').filter((line) => /^\s*\d+\t/.test(line));
  const words = new Map<string, number>();
  let identifier = '';
  for (const line of lines) {
    for (const word of line.slice(line.indexOf('\t') + 1).match(/[A-Za-z_][A-Za-z0-9_]*/g) ?? []) {
      if (word.length >= 4) words.set(word, (words.get(word) ?? 0) + 1);
      if (word.length > identifier.length && word.length <= 40) identifier = word;
    }
  }
  const common = [...words.entries()].sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))[0]?.[0] ?? 'the';
  const extensions = new Map<string, number>();
  for (const f of ready) {
    const ext = /\.([A-Za-z0-9]{1,10})$/.exec(f.path)?.[1];
    if (ext !== undefined) extensions.set(ext, (extensions.get(ext) ?? 0) + 1);
  }
  const ext = [...extensions.entries()].sort((a, b) => b[1] - a[1])[0]?.[0];
  return {
    catPath: cat.path,
    catLines: Math.max(1, lines.length),
    lsPath: cat.path.slice(0, cat.path.lastIndexOf('/')) || '/',
    findGlob: ext === undefined ? '**/*' : `**/*.${ext}`,
    selective: identifier === '' ? common : identifier,
    broad: `\\b${common}\\b`,
  };
}

/** A read's whole text; a status other than 200 throws. */
async function readText(client: ApiClient, path: string, what: string): Promise<string> {
  const reply = await client.send({ method: 'GET', path, what });
  if (reply.status !== 200) throw httpError(reply.status, what, await reply.text());
  return reply.text();
}

/** An RE2 pattern that matches `text` literally. */
function literal(text: string): string {
  return text.replace(/[\\^$.|?*+()[\]{}]/g, '\\$&');
}

/** One request of a scenario, as autocannon takes it. */
export type Request = autocannon.Request & { path: string };

/** The requests of a scenario, cycled by each connection. */
export function scenarioRequests(name: ScenarioName, ws: string, inputs: Inputs): Request[] {
  const q = (params: Record<string, string | number>): string =>
    new URLSearchParams(Object.entries(params).map(([k, v]): [string, string] => [k, String(v)])).toString();
  const cat = (offset: number) => ({ method: 'GET' as const, path: `${ws}/cat?${q({ path: inputs.catPath, offset, limit: CAT_LINES })}` });
  const selective = { method: 'GET' as const, path: `${ws}/grep?${q({ pattern: literal(inputs.selective) })}` };
  switch (name) {
    case 'cat':
      return [cat(1)];
    case 'ls':
      return [{ method: 'GET', path: `${ws}/ls?${q({ path: inputs.lsPath })}` }];
    case 'find':
      return [{ method: 'GET', path: `${ws}/find?${q({ pattern: inputs.findGlob })}` }];
    case 'grep-selective':
      return [selective];
    case 'grep-broad':
      return [{ method: 'GET', path: `${ws}/grep?${q({ pattern: inputs.broad, head_limit: 20 })}` }];
    case 'agent-mix': {
      // A coding agent's reading: find the files, grep for a name with context, then read around the hits.
      const last = Math.max(1, inputs.catLines - 50);
      return [
        { method: 'GET', path: `${ws}/find?${q({ pattern: inputs.findGlob, head_limit: 50 })}` },
        { method: 'GET', path: `${ws}/grep?${q({ pattern: literal(inputs.selective), output_mode: 'content', '-C': 2, head_limit: 40 })}` },
        { method: 'GET', path: `${ws}/cat?${q({ path: inputs.catPath, offset: 1, limit: 50 })}` },
        { method: 'GET', path: `${ws}/cat?${q({ path: inputs.catPath, offset: Math.ceil(last / 2), limit: 50 })}` },
        { method: 'GET', path: `${ws}/cat?${q({ path: inputs.catPath, offset: last, limit: 50 })}` },
      ];
    }
    case 'mcp-grep':
      return [
        {
          method: 'POST',
          path: `${ws}/mcp`,
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'grep', arguments: { pattern: literal(inputs.selective) } } }),
        },
      ];
    case 'upload':
      return Array.from({ length: UPLOAD_SLOTS }, (_, i) => ({
        method: 'PUT' as const,
        path: `${ws}/files${UPLOAD_DIR}/upload-${i}.txt`,
        headers: { 'content-type': 'text/plain' },
        body: `upload ${i} of the benchmark\n`.repeat(32),
      }));
  }
}

/** Starts autocannon: its instance (for its events) and its result. */
export function start(options: autocannon.Options): { instance: autocannon.Instance; done: Promise<autocannon.Result> } {
  let instance!: autocannon.Instance;
  const done = new Promise<autocannon.Result>((resolve, reject) => {
    instance = autocannon(options, (error, result) => (error ? reject(error) : resolve(result)));
  });
  return { instance, done };
}

/** Sends a one-second burst of `path` and returns how many answers were 429. */
async function rateProbe(base: string, path: string, token: string, connections: number): Promise<number> {
  let refused = 0;
  const { instance, done } = start({ url: base + path, headers: { authorization: `Bearer ${token}` }, connections, duration: 1 });
  instance.on('response', (_client, status) => {
    if (status === 429) refused++;
  });
  await done;
  return refused;
}

/** Runs one scenario under autocannon. */
async function run(base: string, name: ScenarioName, requests: Request[], credential: string, options: BenchOptions): Promise<ScenarioResult> {
  const statuses: Record<string, number> = {};
  const { instance, done } = start({
    url: base,
    connections: options.connections,
    pipelining: options.pipelining,
    duration: options.durationSeconds,
    headers: { authorization: `Bearer ${credential}` },
    requests,
  });
  instance.on('response', (_client, status) => {
    statuses[status] = (statuses[status] ?? 0) + 1;
  });
  if (options.progress) autocannon.track(instance, { renderResultsTable: false, renderLatencyTable: false, outputStream: process.stderr });
  const result = await done;
  const first = requests[0];
  return {
    name,
    request: `${first.method} ${first.path}`,
    requestsPerSecond: Math.round(result.requests.average),
    latencyMs: { p50: result.latency.p50, p90: result.latency.p90, p99: result.latency.p99, max: result.latency.max },
    non2xx: result.non2xx,
    statuses,
    errors: result.errors,
    timeouts: result.timeouts,
    bytesPerSecond: Math.round(result.throughput.average),
    requests: result.requests.total,
  };
}

/** Deletes the files the upload scenario wrote. */
async function removeUploads(client: ApiClient, workspace: string): Promise<void> {
  for (let i = 0; i < UPLOAD_SLOTS; i++) {
    const reply = await client.send({
      method: 'DELETE',
      path: `/v1/workspaces/${encodeURIComponent(workspace)}/files${UPLOAD_DIR}/upload-${i}.txt`,
      what: 'delete a benchmark upload',
    });
    await reply.discard();
  }
}

/** One scenario as a small table. */
export function formatScenario(r: ScenarioResult, options: Pick<BenchOptions, 'connections' | 'pipelining' | 'durationSeconds'>): string {
  const header = ['requests/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'non-2xx', 'errors', 'timeouts', 'bytes/s'];
  const row = [
    r.requestsPerSecond.toLocaleString('en-US'),
    String(r.latencyMs.p50),
    String(r.latencyMs.p90),
    String(r.latencyMs.p99),
    String(r.latencyMs.max),
    String(r.non2xx),
    String(r.errors),
    String(r.timeouts),
    bytes(r.bytesPerSecond),
  ];
  const widths = header.map((h, i) => Math.max(h.length, row[i].length));
  const line = (cells: string[]): string => `  ${cells.map((c, i) => c.padStart(widths[i])).join('  ')}`;
  const title = `${r.name}: ${r.request} (${options.connections} connections, pipelining ${options.pipelining}, ${options.durationSeconds} s)`;
  return [title, line(header), line(row), ''].join('\n');
}

function bytes(n: number): string {
  if (n >= 1024 * 1024) return `${(n / 1024 / 1024).toFixed(1)} MiB`;
  if (n >= 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${n} B`;
}
