/**
 * The read tools, GET /v1/workspaces/{ws}/{ls,find,cat,grep} (SPEC.md 4.5):
 * query-string parameters in, plain text out, streamed from the read pool
 * with backpressure. Every call that passes authentication and names an
 * existing workspace is audited, and its response completes only after its
 * audit event is committed.
 */
import type { TemplatedApp } from 'uWebSockets.js';
import { VfsError, invalidParameter } from '../core/errors.js';
import type { AuditLog, AuditRecord } from '../db/audit.js';
import type { Database } from '../db/database.js';
import { fileState } from '../db/files.js';
import { checkFilePath } from '../core/paths.js';
import { type CatRequest, type FindRequest, type GrepRequest, type GrepStats, type LsRequest, Visibility } from '../engine/index.js';
import { type Principal, unauthenticated } from './gate/auth.js';
import type { Freshness } from './freshness.js';
import type { Guard } from './gate/guard.js';
import { type RequestContext, snapshot } from './http/context.js';
import type { Lookups } from './gate/lookups.js';
import type { Metrics } from './metrics.js';
import type { RecentReads } from './recent-reads.js';
import { decodeURIComponentSafe, workspaceParam } from './contract/params.js';
import { queryReader } from './contract/query.js';
import { READ_PARAMS, type Tool } from './contract/read-params.js';
import type { ReadPool } from '../reads/read-pool.js';
import type { Cancelled, Failure } from '../reads/read-protocol.js';
import { type ErrorLog, sendTextError, toVfsError } from './http/respond.js';
import { answerAfter, TextStream } from './http/stream-text.js';

/** What the read routes need. */
export interface ReadRouteDeps {
  db: Database;
  guard: Guard;
  readPool: ReadPool;
  audit: AuditLog;
  log: ErrorLog;
  /** The shard directory of a workspace. */
  shardDir: (workspaceId: string) => string;
  /** Cached workspace and limit lookups. */
  lookups: Lookups;
  /** Longest a grep may search before it answers with what it found so far. */
  grepTimeoutMs: number;
  /** Where read latencies are observed; null when metrics are off. */
  metrics: Metrics | null;
  /** The last five minutes of read-tool calls per account, for GET /v1/status; recorded whether or not metrics are on. */
  recentReads: RecentReads;
  /** On a node of a cluster, what brings the node's copy of a workspace up to date before a read; else null. */
  freshness: Freshness | null;
}

const MAX_PATTERN_BYTES = 16 * 1024;
const MAX_AUDIT_VALUE = 1024;

export type { Tool } from './contract/read-params.js';

const READERS = {
  ls: queryReader(READ_PARAMS.ls),
  find: queryReader(READ_PARAMS.find),
  cat: queryReader(READ_PARAMS.cat),
  grep: queryReader(READ_PARAMS.grep),
};

/** Validates a tool's query string (READ_PARAMS) into the engine's request. */
const PARSERS: Record<Tool, (q: URLSearchParams, claims: readonly string[] | null, deps: ReadRouteDeps) => unknown> = {
  ls: (q, claims): LsRequest => ({ claims, ...READERS.ls.read(q) }),
  find: (q, claims): FindRequest => {
    const p = READERS.find.read(q);
    return { claims, pattern: p.pattern, path: p.path, headLimit: p.head_limit };
  },
  cat: (q, claims): CatRequest => ({ claims, ...READERS.cat.read(q) }),
  grep: (q, claims, deps): GrepRequest => {
    const p = READERS.grep.read(q);
    if (Buffer.byteLength(p.pattern) > MAX_PATTERN_BYTES) throw invalidParameter('pattern', `longer than ${MAX_PATTERN_BYTES} bytes`);
    return {
      claims,
      pattern: p.pattern,
      path: p.path,
      glob: p.glob,
      type: p.type,
      outputMode: p.output_mode,
      caseInsensitive: p['-i'],
      multiline: p.multiline,
      after: p['-A'],
      before: p['-B'],
      context: p['-C'],
      lineNumbers: p['-n'],
      headLimit: p.head_limit,
      offset: p.offset,
      deadline: Date.now() + deps.grepTimeoutMs,
    };
  },
};

/**
 * A tool's parameters, validated into the engine's request for `principal` (INVALID_PARAMETER
 * naming the first bad one). The HTTP routes and the MCP tools both read parameters here.
 */
export function parseReadRequest(tool: Tool, query: URLSearchParams, principal: Principal, deps: ReadRouteDeps): unknown {
  return PARSERS[tool](query, principal.kind === 'token' ? principal.claims : null, deps);
}

/** Registers the four read tools. */
export function registerReadRoutes(app: TemplatedApp, deps: ReadRouteDeps): void {
  for (const tool of Object.keys(PARSERS) as Tool[]) {
    app.get(`/v1/workspaces/:ws/${tool}`, (res, req) => {
      const ctx = snapshot(res, req, 1);
      void serve(ctx, tool, deps);
    });
  }
}

/** An authenticated caller admitted to read a workspace: what its audit event records. */
export interface Caller {
  principal: Principal;
  workspaceId: string;
  /** The workspace's name, as the route gave it. */
  workspace: string;
}

/** Serves one read tool call: admit, parse, run, stream, and audit before the answer completes. */
async function serve(ctx: RequestContext, tool: Tool, deps: ReadRouteDeps): Promise<void> {
  const started = performance.now();
  let caller: Caller;
  try {
    caller = await admitCaller(ctx, deps, 'http');
  } catch (error) {
    // Not audited: no authenticated caller, or no workspace to record against.
    sendTextError(ctx, error, deps.log);
    return;
  }
  const principal = caller.principal;
  const audit = auditCall(deps, caller, tool, ctx.query, started);

  let request: unknown;
  try {
    request = parseReadRequest(tool, ctx.query, principal, deps);
  } catch (error) {
    await answerAfter(ctx, toVfsError(error, deps.log, ctx), () => audit(null), deps.log);
    return;
  }

  try {
    await deps.freshness?.ensure(caller.workspaceId, principal.accountId, caller.workspace);
  } catch (error) {
    await answerAfter(ctx, toVfsError(error, deps.log, ctx), () => audit(null), deps.log);
    return;
  }

  const stream = new TextStream(ctx);
  const call = deps.readPool.run(tool, deps.shardDir(caller.workspaceId), request, stream.write);
  ctx.onAbort.push(() => call.cancel());
  const outcome = await call.outcome;

  if (outcome.kind === 'done') {
    countGrep(deps, outcome.grep);
    await stream.endAfter(() => audit(outcome.resultCount), deps.log);
  } else if (outcome.kind === 'cancelled' && ctx.aborted) {
    // Cancelled because the client went away; still recorded.
    await audit(null).catch((error: unknown) => deps.log('audit append failed', error));
  } else {
    const error = await readCallError(`${ctx.method} ${ctx.url}`, tool, outcome, stream.started, caller, request, deps);
    await stream.failAfter(error, () => audit(null), deps.log);
  }
}

/** Adds what a grep read to the metrics. */
export function countGrep(deps: ReadRouteDeps, grep: GrepStats | undefined): void {
  if (deps.metrics === null || grep === undefined) return;
  deps.metrics.grepCandidates.inc(grep.candidates);
  deps.metrics.grepVerifiedBytes.inc(grep.verifiedBytes);
}

/**
 * What records one call of `tool` by `caller` with parameters `query`: it appends the audit
 * event with the call's result count (null when it failed) and its latency since `started`,
 * and observes that latency in the metrics and the account's recent reads.
 */
export function auditCall(
  deps: ReadRouteDeps,
  caller: Caller,
  tool: Tool,
  query: URLSearchParams,
  started: number,
): (resultCount: number | null) => Promise<void> {
  return (resultCount) => {
    const seconds = (performance.now() - started) / 1000;
    deps.recentReads.record(caller.principal.accountId, tool, seconds);
    if (deps.metrics !== null) {
      const mode = tool === 'grep' ? (query.get('output_mode') ?? 'files_with_matches') : '';
      // Only the modes there are: a label per wrong value would grow the metrics without end.
      deps.metrics.reads.observe({ tool, output_mode: mode === '' || mode === 'content' || mode === 'count' ? mode : 'files_with_matches' }, seconds);
    }
    return deps.audit.append({
      accountId: caller.principal.accountId,
      workspaceId: caller.workspaceId,
      ...auditActor(caller.principal),
      tool,
      params: auditParams(query),
      resultCount,
      latencyMs: Math.round(seconds * 1000),
    });
  };
}

/** Who an audit event names: the management key or token, or for an OAuth access token its grant (its tokens come and go with refreshes). */
function auditActor(principal: Principal): { actorType: AuditRecord['actorType']; actorId: string } {
  if (principal.kind === 'token' && principal.grantId !== null) return { actorType: 'oauth_grant', actorId: principal.grantId };
  if (principal.kind === 'token' && principal.subject !== null) return { actorType: 'oidc_subject', actorId: principal.subject };
  return { actorType: principal.kind, actorId: principal.actorId };
}

/**
 * The error a call that did not end answers: its failure, or STOPPING when it was cancelled
 * while the client waits (the pool is closing, as the service stops). The cause of an INTERNAL
 * error (with `where`, the request), and any failure once the output has `started`, is logged.
 */
export async function readCallError(
  where: string,
  tool: Tool,
  outcome: Failure | Cancelled,
  started: boolean,
  caller: Caller,
  request: unknown,
  deps: ReadRouteDeps,
): Promise<VfsError> {
  const error = outcome.kind === 'cancelled' ? new VfsError('STOPPING', {}, { 'retry-after': '1' }) : outcome.error;
  const detail = outcome.kind === 'failed' ? outcome.detail : undefined;
  if (started) {
    deps.log(`${tool} failed mid-stream: ${detail ?? error.message}`, null);
    return error;
  }
  if (detail !== undefined) deps.log(`${where} failed`, detail);
  if (tool === 'cat' && error.code === 'NO_SUCH_FILE')
    return (await notReadyError(deps, caller.principal, caller.workspaceId, (request as CatRequest).path)) ?? error;
  return error;
}

/**
 * The caller, once authenticated and its workspace (route parameter 0) found; throws the error to
 * answer otherwise. `via` says which surface asks: an HTTP read tool, whose read is admitted under
 * the rate limits here, or the MCP endpoint, which admits reads per message and is the only place
 * an OAuth access token is accepted.
 */
export async function admitCaller(ctx: RequestContext, deps: ReadRouteDeps, via: 'http' | 'mcp'): Promise<Caller> {
  const principal = await deps.guard.principal(ctx, via === 'mcp' ? decodeURIComponentSafe(ctx.params[0]) : null);
  const name = workspaceParam(ctx.params[0]);
  if (principal.kind === 'token' && principal.mcpOnly) {
    // SECURITY: an OAuth access token's audience is its workspace's endpoint (RFC 8707): on any
    // other it is an invalid token (401, so the client can ask for one), whether or not that
    // workspace exists.
    const workspaceId = await deps.lookups.workspaceId(principal.accountId, name).catch((error: unknown) => {
      if (error instanceof VfsError && error.code === 'NO_SUCH_WORKSPACE') return null;
      throw error;
    });
    if (workspaceId !== principal.workspaceId) throw unauthenticated('this access token was issued for another workspace');
    return { principal, workspaceId: principal.workspaceId, workspace: name };
  }
  const workspaceId = await deps.lookups.workspaceId(principal.accountId, name);
  // SECURITY: a token is pinned to one workspace; any other answers as if it did not exist.
  if (principal.kind === 'token' && principal.workspaceId !== workspaceId) throw new VfsError('NO_SUCH_WORKSPACE', { name });
  if (via === 'http') await deps.guard.admitRead(principal);
  return { principal, workspaceId, workspace: name };
}

/**
 * For a `cat` of a file the shard does not have: if the file exists but never
 * became ready, a 404 that names its status. A file the caller may not see
 * stays "no such file".
 */
async function notReadyError(deps: ReadRouteDeps, principal: Principal, workspaceId: string, rawPath: string): Promise<VfsError | null> {
  const checked = checkFilePath(rawPath);
  if (!checked.ok) return null;
  const state = await deps.db.inAccount(principal.accountId, (tx) => fileState(tx, workspaceId, checked.path));
  if (state === null || state.status === 'ready') return null;
  // SECURITY: the same visibility rule as the engine, so an invisible file's existence does not leak.
  if (!new Visibility(principal.kind === 'token' ? principal.claims : null).canSee(state.visibility)) return null;
  return new VfsError('FILE_NOT_READY', { path: checked.path, status: state.status });
}

/**
 * The query as received, as a JSON object of strings: long values cut, and NUL
 * (which PostgreSQL's jsonb cannot store) shown as U+FFFD. A cut never splits a
 * surrogate pair: jsonb refuses half of one too, and the whole batch of events
 * with it (so every request of every tenant in that batch would answer 503).
 */
export function auditParams(q: URLSearchParams): Record<string, string> {
  const clean = (text: string): string => {
    let end = Math.min(text.length, MAX_AUDIT_VALUE);
    if (end < text.length && isHighSurrogate(text.charCodeAt(end - 1))) end--;
    return text.slice(0, end).replaceAll('\u0000', '\uFFFD');
  };
  const out: Record<string, string> = {};
  for (const [key, value] of q) {
    const name = clean(key);
    if (!Object.hasOwn(out, name)) out[name] = clean(value);
  }
  return out;
}

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
