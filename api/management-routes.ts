/**
 * The management plane under /v1 (SPEC.md 4.1-4.4): workspaces, the file
 * listing, tokens, the OAuth grants of a workspace (docs/oauth.md) and the audit export. JSON in
 * and out; management key only.
 */
import type { TemplatedApp } from 'uWebSockets.js';
import type { z } from 'zod';
import { CREDENTIAL_ID } from '../core/credentials.js';
import { VfsError, invalidParameter } from '../core/errors.js';
import { exportAudit } from '../db/audit.js';
import type { Database } from '../db/database.js';
import { listFiles } from '../db/files.js';
import { accountLimits } from '../db/limits.js';
import { type GrantPosition, listGrants, revokeGrant } from '../db/oauth.js';
import { mintToken, revokeToken } from '../db/tokens.js';
import { createWorkspace, deleteWorkspace, listWorkspaces, requireWorkspace } from '../db/workspaces.js';
import { type Authenticator, requireManagementKey } from './gate/auth.js';
import type { Guard } from './gate/guard.js';
import { type RequestContext, readBody, sendJson, snapshot } from './http/context.js';
import { decodeURIComponentSafe, workspaceParam } from './contract/params.js';
import { noQuery, queryReader } from './contract/query.js';
import { AUDIT_QUERY, CREATE_WORKSPACE_BODY, FILES_QUERY, GRANTS_QUERY, MINT_TOKEN_BODY } from './contract/schemas.js';
import { type ErrorLog, sendJsonError } from './http/respond.js';

/** What the management routes need. */
export interface ManagementDeps {
  db: Database;
  auth: Authenticator;
  guard: Guard;
  log: ErrorLog;
  /** Largest JSON body accepted. */
  maxJsonBytes: number;
  /** Called after a workspace's rows are gone, with the blobs its files named, to remove what is stored for it outside PostgreSQL. */
  workspaceDeleted: (accountId: string, workspaceId: string, blobs: string[]) => Promise<void>;
}

/** A JSON reply; `body` absent means no body (204). */
export interface JsonReply {
  status: number;
  body?: unknown;
}

/** A management-plane handler: gets the caller's account id and the parsed body. */
type ManagementHandler = (ctx: RequestContext, accountId: string, body: unknown) => Promise<JsonReply>;

const filesQuery = queryReader(FILES_QUERY);
const auditQuery = queryReader(AUDIT_QUERY);
const grantsQuery = queryReader(GRANTS_QUERY);

/** Registers every management route on the app. */
export function registerManagementRoutes(app: TemplatedApp, deps: ManagementDeps): void {
  const { db } = deps;
  const route = (method: 'get' | 'post' | 'del', pattern: string, body: 'none' | 'required' | 'optional', handler: ManagementHandler): void => {
    const paramCount = pattern.split('/').filter((s) => s.startsWith(':')).length;
    app[method](pattern, (res, req) => {
      const ctx = snapshot(res, req, paramCount);
      const raw = body === 'none' ? null : readBody(ctx, deps.maxJsonBytes);
      raw?.catch(() => {}); // read below; avoid an unhandled rejection if auth fails first
      void (async () => {
        try {
          const principal = await deps.guard.principal(ctx);
          await deps.guard.admitManagement(principal);
          const accountId = requireManagementKey(principal);
          const parsed = raw === null ? undefined : parseJson(await raw, body === 'required');
          const reply = await handler(ctx, accountId, parsed);
          sendJson(ctx, reply.status, reply.body ?? null);
        } catch (error) {
          sendJsonError(ctx, error, deps.log);
        }
      })();
    });
  };

  route('post', '/v1/workspaces', 'required', async (_ctx, accountId, body) => {
    const { name } = validate(CREATE_WORKSPACE_BODY, body);
    const ws = await db.inAccount(accountId, async (tx) => createWorkspace(tx, accountId, name, (await accountLimits(tx, accountId)).maxWorkspaces));
    return { status: 201, body: { name: ws.name } };
  });

  route('get', '/v1/workspaces', 'none', async (ctx, accountId) => {
    noQuery.read(ctx.query);
    return { status: 200, body: { workspaces: await db.inAccount(accountId, listWorkspaces) } };
  });

  route('del', '/v1/workspaces/:ws', 'none', async (ctx, accountId) => {
    const name = workspaceParam(ctx.params[0]);
    const deleted = await db.inAccount(accountId, (tx) => deleteWorkspace(tx, accountId, name));
    if (deleted === null) throw new VfsError('NO_SUCH_WORKSPACE', { name });
    await deps.auth.revoked(); // its tokens are gone: none may be served from a cache
    await deps.workspaceDeleted(accountId, deleted.id, deleted.blobs);
    return { status: 204 };
  });

  route('get', '/v1/workspaces/:ws/files', 'none', async (ctx, accountId) => {
    const name = workspaceParam(ctx.params[0]);
    const { status, cursor, limit } = filesQuery.read(ctx.query);
    const after = fileCursor(cursor);
    const page = await db.inAccount(accountId, async (tx) => listFiles(tx, (await requireWorkspace(tx, name)).id, { status, after, limit }));
    const nextCursor = page.lastPath === null ? null : Buffer.from(page.lastPath).toString('base64url');
    return { status: 200, body: { files: page.files, nextCursor } };
  });

  route('post', '/v1/workspaces/:ws/tokens', 'optional', async (ctx, accountId, body) => {
    const name = workspaceParam(ctx.params[0]);
    const input = validate(MINT_TOKEN_BODY, body === undefined ? {} : body);
    const minted = await db.inAccount(accountId, async (tx) =>
      mintToken(tx, accountId, (await requireWorkspace(tx, name)).id, input.claims ?? ['*'], input.ttlSeconds ?? 3600),
    );
    return { status: 201, body: minted };
  });

  route('del', '/v1/tokens/:id', 'none', async (ctx, accountId) => {
    const id = decodeURIComponentSafe(ctx.params[0]);
    // SECURITY: a foreign token id is invisible under row level security, so it answers 404 like an unknown one.
    const found = CREDENTIAL_ID.test(id) && (await db.inAccount(accountId, (tx) => revokeToken(tx, id.toLowerCase())));
    if (!found) throw new VfsError('NO_SUCH_TOKEN', { id: id.slice(0, 100) });
    await deps.auth.revoked();
    return { status: 204 };
  });

  route('get', '/v1/workspaces/:ws/grants', 'none', async (ctx, accountId) => {
    const name = workspaceParam(ctx.params[0]);
    const { cursor, limit } = grantsQuery.read(ctx.query);
    const after = grantCursor(cursor);
    const page = await db.inAccount(accountId, async (tx) => listGrants(tx, (await requireWorkspace(tx, name)).id, { after, limit }));
    const nextCursor = page.last === null ? null : Buffer.from(`${page.last.createdAt.toISOString()} ${page.last.id}`).toString('base64url');
    return { status: 200, body: { grants: page.grants, nextCursor } };
  });

  route('del', '/v1/grants/:id', 'none', async (ctx, accountId) => {
    const id = decodeURIComponentSafe(ctx.params[0]);
    // SECURITY: a foreign grant is invisible under row level security, so it answers 404 like an unknown one.
    const found = CREDENTIAL_ID.test(id) && (await db.inAccount(accountId, (tx) => revokeGrant(tx, id.toLowerCase()))) !== null;
    if (!found) throw new VfsError('NO_SUCH_GRANT', { id: id.slice(0, 100) });
    await deps.auth.revoked();
    return { status: 204 };
  });

  route('get', '/v1/workspaces/:ws/audit', 'none', async (ctx, accountId) => {
    const name = workspaceParam(ctx.params[0]);
    const query = auditQuery.read(ctx.query);
    const after = auditAfter(query.after);
    const { cursor, limit } = query;
    const page = await db.inAccount(accountId, async (tx) => exportAudit(tx, (await requireWorkspace(tx, name)).id, { after, cursor, limit }));
    return { status: 200, body: page };
  });
}

function parseJson(body: Buffer, required: boolean): unknown {
  if (body.length === 0) {
    if (required) throw new VfsError('INVALID_BODY', { reason: 'a JSON object is required' });
    return undefined;
  }
  try {
    return JSON.parse(body.toString('utf8'));
  } catch {
    throw new VfsError('INVALID_BODY', { reason: 'not valid JSON' });
  }
}

function validate<T>(schema: z.ZodType<T>, value: unknown): T {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  let reason = issue.message;
  if (issue.code === 'unrecognized_keys') reason = `unknown property ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`;
  else if (issue.code === 'invalid_type' && issue.path.length === 0) reason = 'expected a JSON object';
  else if (issue.path.length > 0 && !reason.startsWith(String(issue.path[0]))) reason = `${issue.path.join('.')}: ${reason}`;
  throw new VfsError('INVALID_BODY', { reason });
}

function fileCursor(raw: string | undefined): string | undefined {
  if (raw === undefined) return undefined;
  const path = /^[A-Za-z0-9_-]{1,2000}$/.test(raw) ? Buffer.from(raw, 'base64url').toString('utf8') : '';
  if (!path.startsWith('/')) throw invalidParameter('cursor', 'not a cursor returned by this listing');
  return path;
}

/** A grant listing's cursor: its last grant's creation time and id, base64url-encoded. */
function grantCursor(raw: string | undefined): GrantPosition | undefined {
  if (raw === undefined) return undefined;
  const text = /^[A-Za-z0-9_-]{1,200}$/.test(raw) ? Buffer.from(raw, 'base64url').toString('utf8') : '';
  const parts = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z) ([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/.exec(text);
  const createdAt = new Date(parts?.[1] ?? Number.NaN);
  if (parts === null || Number.isNaN(createdAt.getTime())) throw invalidParameter('cursor', 'not a cursor returned by this listing');
  return { createdAt, id: parts[2] };
}

/** The date part names a day that exists (Date would roll 2026-02-30 over to March 2). */
function realCalendarDay(raw: string): boolean {
  const [y, m, d] = raw.slice(0, 10).split('-').map(Number);
  const day = new Date(Date.UTC(y, m - 1, d));
  return day.getUTCFullYear() === y && day.getUTCMonth() === m - 1 && day.getUTCDate() === d;
}

// ISO 8601 date-time with a time zone, e.g. 2026-11-21T22:35:02.787Z or 2026-11-21T23:35:02+01:00.
const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:?\d{2})$/i;

function auditAfter(raw: string | undefined): Date | undefined {
  if (raw === undefined) return undefined;
  const date = new Date(raw);
  if (!ISO_DATE_TIME.test(raw) || Number.isNaN(date.getTime()) || !realCalendarDay(raw)) {
    throw invalidParameter('after', 'expected an ISO 8601 date-time with a time zone, e.g. 2026-11-21T22:35:02.787Z');
  }
  return date;
}
