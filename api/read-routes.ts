/**
 * The read tools, GET /v1/workspaces/{ws}/{ls,find,cat,grep} (SPEC.md 4.5):
 * query-string parameters in, plain text out, streamed from the read pool
 * with backpressure. Every call that passes authentication and names an
 * existing workspace is audited, and its response completes only after its
 * audit event is committed.
 */
import type { TemplatedApp } from 'uWebSockets.js';
import { VfsError, invalidParameter } from '../core/errors.js';
import type { AuditLog } from '../db/audit.js';
import type { Database } from '../db/database.js';
import { fileState } from '../db/files.js';
import { checkFilePath } from '../core/paths.js';
import { type CatRequest, type FindRequest, type GrepRequest, type LsRequest, MAX_FIND_LIMIT, Visibility } from '../engine/index.js';
import type { Principal } from './auth.js';
import type { Guard } from './guard.js';
import { type RequestContext, sendText, snapshot, statusLine } from './http.js';
import type { Lookups } from './lookups.js';
import { workspaceParam } from './management-routes.js';
import { boolParam, enumParam, intParam, onlyParams, single } from './params.js';
import type { ReadPool } from '../reads/read-pool.js';
import { type ErrorLog, toVfsError } from './respond.js';

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
}

const MAX = Number.MAX_SAFE_INTEGER;
const MAX_PATTERN_BYTES = 16 * 1024;
/** Globs compile to regular expressions; past this they are refused rather than left to fail. */
const MAX_GLOB_CHARS = 4096;
const MAX_AUDIT_VALUE = 1024;
const TEXT = 'text/plain; charset=utf-8';
/** Output up to this size is sent whole; beyond it, streamed. */
const INLINE_BYTES = 256 * 1024;

type Tool = 'ls' | 'find' | 'cat' | 'grep';

/** Validates a tool's query string into the engine's request; a parameter not given is left undefined, for the engine's default. */
const PARSERS: Record<Tool, (q: URLSearchParams, claims: readonly string[] | null, deps: ReadRouteDeps) => unknown> = {
  ls: (q, claims): LsRequest => {
    onlyParams(q, ['path']);
    return { claims, path: single(q, 'path') };
  },
  find: (q, claims): FindRequest => {
    onlyParams(q, ['pattern', 'path', 'head_limit']);
    return { claims, pattern: glob(q, 'pattern', true)!, path: single(q, 'path'), headLimit: intParam(q, 'head_limit', 1, MAX_FIND_LIMIT) };
  },
  cat: (q, claims): CatRequest => {
    onlyParams(q, ['path', 'offset', 'limit']);
    return { claims, path: required(q, 'path'), offset: intParam(q, 'offset', 1, MAX), limit: intParam(q, 'limit', 1, MAX) };
  },
  grep: (q, claims, deps): GrepRequest => {
    onlyParams(q, ['pattern', 'path', 'glob', 'output_mode', '-i', '-A', '-B', '-C', 'head_limit', 'offset', 'multiline', 'type', '-n']);
    const pattern = required(q, 'pattern');
    if (Buffer.byteLength(pattern) > MAX_PATTERN_BYTES) throw invalidParameter('pattern', `longer than ${MAX_PATTERN_BYTES} bytes`);
    return {
      claims,
      pattern,
      path: single(q, 'path'),
      glob: glob(q, 'glob', false),
      type: nonEmpty(q, 'type'),
      outputMode: enumParam(q, 'output_mode', ['files_with_matches', 'content', 'count'] as const),
      caseInsensitive: boolParam(q, '-i'),
      multiline: boolParam(q, 'multiline'),
      after: intParam(q, '-A', 0, MAX),
      before: intParam(q, '-B', 0, MAX),
      context: intParam(q, '-C', 0, MAX),
      lineNumbers: boolParam(q, '-n'),
      headLimit: intParam(q, 'head_limit', 1, MAX),
      offset: intParam(q, 'offset', 0, MAX),
      deadline: Date.now() + deps.grepTimeoutMs,
    };
  },
};

/** Registers the four read tools. */
export function registerReadRoutes(app: TemplatedApp, deps: ReadRouteDeps): void {
  for (const tool of Object.keys(PARSERS) as Tool[]) {
    app.get(`/v1/workspaces/:ws/${tool}`, (res, req) => {
      const ctx = snapshot(res, req, 1);
      void serve(ctx, tool, deps);
    });
  }
}

async function serve(ctx: RequestContext, tool: Tool, deps: ReadRouteDeps): Promise<void> {
  const started = performance.now();
  let principal: Principal;
  let workspaceId: string;
  try {
    principal = await deps.guard.principal(ctx);
    const name = workspaceParam(ctx.params[0]);
    workspaceId = await deps.lookups.workspaceId(principal.accountId, name);
    // SECURITY: a token is pinned to one workspace; any other answers as if it did not exist.
    if (principal.kind === 'token' && principal.workspaceId !== workspaceId) throw new VfsError('NO_SUCH_WORKSPACE', { name });
    await deps.guard.admitRead(principal);
  } catch (error) {
    // Not audited: no authenticated caller, or no workspace to record against.
    const e = toVfsError(error, deps.log, ctx);
    sendText(ctx, e.status, e.message + '\n', e.headers);
    return;
  }

  const audit = (resultCount: number | null): Promise<void> =>
    deps.audit.append({
      accountId: principal.accountId,
      workspaceId,
      actorType: principal.kind,
      actorId: principal.actorId,
      tool,
      params: auditParams(ctx.query),
      resultCount,
      latencyMs: Math.round(performance.now() - started),
    });

  let request: unknown;
  try {
    request = PARSERS[tool](ctx.query, principal.kind === 'token' ? principal.claims : null, deps);
  } catch (error) {
    await finishWithError(ctx, toVfsError(error, deps.log, ctx), audit, deps);
    return;
  }

  // Output is held until it passes INLINE_BYTES: most answers are sent whole, with a
  // Content-Length, once their audit event is committed; larger ones stream (chunked) with
  // backpressure, and only their end waits for the audit commit.
  let held: Uint8Array[] | null = [];
  let heldBytes = 0;
  let headersSent = false;
  const writeHead = (): void => {
    headersSent = true;
    ctx.res.writeStatus(statusLine(200));
    ctx.res.writeHeader('content-type', TEXT);
  };
  const stream = (data: Uint8Array, release: () => void): void => {
    let ok = true;
    ctx.res.cork(() => {
      if (!headersSent) writeHead();
      ok = ctx.res.write(data);
    });
    if (ok) release();
    // Backpressure: keep the chunk counted until the socket drains.
    else
      ctx.res.onWritable(() => {
        release();
        return true;
      });
  };
  const call = deps.readPool.run(tool, deps.shardDir(workspaceId), request, (data, release) => {
    if (ctx.aborted) {
      release();
      return;
    }
    if (held !== null) {
      held.push(data);
      heldBytes += data.length;
      release();
      if (heldBytes <= INLINE_BYTES) return;
      const flush = held;
      held = null;
      for (const chunk of flush) stream(chunk, () => {});
      return;
    }
    stream(data, release);
  });
  ctx.onAbort.push(() => call.cancel());

  const outcome = await call.outcome;
  if (outcome.kind === 'done') {
    try {
      await audit(outcome.resultCount);
    } catch (error) {
      // The event could not be committed: the response must not complete as if it had been.
      deps.log('audit append failed', error);
      if (held !== null) {
        // Nothing sent yet: say so (503) rather than cut the connection.
        sendError(ctx, new VfsError('UNAVAILABLE', { what: 'the audit log' }, { 'retry-after': '1' }));
        return;
      }
      if (!ctx.aborted) ctx.res.cork(() => ctx.res.close());
      ctx.aborted = true;
      return;
    }
    if (ctx.aborted) return;
    if (held !== null) {
      sendText(ctx, 200, held.length === 1 ? held[0] : Buffer.concat(held));
      return;
    }
    ctx.aborted = true;
    ctx.res.cork(() => ctx.res.end());
    return;
  }
  if (outcome.kind === 'cancelled' && ctx.aborted) {
    // Cancelled because the client went away; still recorded.
    await audit(null).catch((error: unknown) => deps.log('audit append failed', error));
    return;
  }
  // Cancelled while the client waits: the pool is closing, as the service stops.
  let error = outcome.kind === 'cancelled' ? new VfsError('STOPPING', {}, { 'retry-after': '1' }) : outcome.error;
  if (headersSent) {
    // Failed mid-stream: the status is gone; cut the connection so the client sees an incomplete body.
    deps.log(`${tool} failed mid-stream: ${outcome.kind === 'failed' ? (outcome.detail ?? error.message) : error.message}`, null);
    await audit(null).catch(() => {});
    if (!ctx.aborted) ctx.res.cork(() => ctx.res.close());
    ctx.aborted = true;
    return;
  }
  // An INTERNAL error's cause is logged, not shown.
  if (outcome.kind === 'failed' && outcome.detail !== undefined) deps.log(`${ctx.method} ${ctx.url} failed`, outcome.detail);
  if (tool === 'cat' && error.code === 'NO_SUCH_FILE') error = (await notReadyError(deps, principal, workspaceId, (request as CatRequest).path)) ?? error;
  await finishWithError(ctx, error, audit, deps);
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

/** Audits a failed call (resultCount null), then answers its error in plain text. */
async function finishWithError(ctx: RequestContext, error: VfsError, audit: (resultCount: number | null) => Promise<void>, deps: ReadRouteDeps): Promise<void> {
  try {
    await audit(null);
  } catch (auditError) {
    deps.log('audit append failed', auditError);
    sendError(ctx, new VfsError('UNAVAILABLE', { what: 'the audit log' }));
    return;
  }
  sendError(ctx, error);
}

/** Answers a catalog error in plain text. */
function sendError(ctx: RequestContext, error: VfsError): void {
  sendText(ctx, error.status, error.message + '\n', error.headers);
}

function required(q: URLSearchParams, name: string): string {
  const value = single(q, name);
  if (value === undefined || value === '') throw invalidParameter(name, 'required, at least 1 character');
  return value;
}

function glob(q: URLSearchParams, name: string, isRequired: boolean): string | undefined {
  const value = isRequired ? required(q, name) : nonEmpty(q, name);
  if (value !== undefined && value.length > MAX_GLOB_CHARS) throw invalidParameter(name, `longer than ${MAX_GLOB_CHARS} characters`);
  return value;
}

function nonEmpty(q: URLSearchParams, name: string): string | undefined {
  const value = single(q, name);
  if (value === '') throw invalidParameter(name, 'must not be empty');
  return value;
}

/**
 * The query as received, as a JSON object of strings: long values cut, and NUL
 * (which PostgreSQL's jsonb cannot store) shown as U+FFFD. A cut never splits a
 * surrogate pair: jsonb refuses half of one too, and the whole batch of events
 * with it (so every request of every tenant in that batch would answer 503).
 */
function auditParams(q: URLSearchParams): Record<string, string> {
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
