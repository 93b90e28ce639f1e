/**
 * PUT and DELETE /v1/workspaces/{ws}/files/{path}: the upload streams to the
 * blob store (never whole in memory), the per-file limit is enforced while
 * streaming, and the answer is 202 as soon as the file is durably accepted.
 */
import type { TemplatedApp } from 'uWebSockets.js';
import { VfsError, invalidParameter } from '../core/errors.js';
import { checkFilePath } from '../core/paths.js';
import type { Database } from '../db/database.js';
import type { BlobUpload } from '../ingest/blob-store.js';
import type { Uploads } from '../ingest/uploads.js';
import { type Principal, requireManagementKey } from './gate/auth.js';
import type { Guard } from './gate/guard.js';
import { BodyStream } from './http/body-stream.js';
import type { Lookups } from './gate/lookups.js';
import { type RequestContext, send, sendJson, snapshot } from './http/context.js';
import { CLAIM, workspaceParam } from './contract/params.js';
import { noQuery, queryReader } from './contract/query.js';
import { UPLOAD_QUERY } from './contract/schemas.js';
import { type ErrorLog, toVfsError } from './http/respond.js';

/** What the file routes need. */
export interface FileRouteDeps {
  db: Database;
  guard: Guard;
  uploads: Uploads;
  lookups: Lookups;
  log: ErrorLog;
}

const MAX_VISIBILITY_CLAIMS = 64;
const uploadQuery = queryReader(UPLOAD_QUERY);

/** Registers PUT and DELETE of files. */
export function registerFileRoutes(app: TemplatedApp, deps: FileRouteDeps): void {
  app.put('/v1/workspaces/:ws/files/*', (res, req) => {
    const ctx = snapshot(res, req, 1);
    const body = new BodyStream(ctx);
    void upload(ctx, body, deps);
  });

  app.del('/v1/workspaces/:ws/files/*', (res, req) => {
    const ctx = snapshot(res, req, 1);
    void (async () => {
      try {
        const accountId = requireManagementKey(await admitted(ctx, deps));
        const name = workspaceParam(ctx.params[0]);
        const path = filePathFromUrl(ctx.url);
        noQuery.read(ctx.query);
        const workspaceId = await deps.lookups.workspaceId(accountId, name);
        if (!(await deps.uploads.delete(accountId, workspaceId, path))) throw new VfsError('NO_SUCH_FILE', { path });
        sendJson(ctx, 204, null);
      } catch (error) {
        fail(ctx, error, deps.log, false);
      }
    })();
  });
}

async function upload(ctx: RequestContext, body: BodyStream, deps: FileRouteDeps): Promise<void> {
  let blob: BlobUpload | null = null;
  try {
    const accountId = requireManagementKey(await admitted(ctx, deps));
    const name = workspaceParam(ctx.params[0]);
    const path = filePathFromUrl(ctx.url);
    const visibility = parseVisibility(uploadQuery.read(ctx.query).visibility);
    const [workspaceId, limits] = await Promise.all([deps.lookups.workspaceId(accountId, name), deps.lookups.accountLimits(accountId)]);
    const declared = ctx.contentLength === '' ? 0 : Number(ctx.contentLength);
    if (declared > limits.maxFileBytes) throw new VfsError('FILE_TOO_LARGE', { limit: limits.maxFileBytes });
    blob = await deps.uploads.begin();
    for await (const chunk of body) {
      if (blob.size + chunk.length > limits.maxFileBytes) throw new VfsError('FILE_TOO_LARGE', { limit: limits.maxFileBytes });
      try {
        await blob.write(chunk);
      } catch {
        throw new VfsError('UNAVAILABLE', { what: 'blob storage' }, { 'retry-after': '1' });
      }
    }
    const accepted = blob;
    blob = null; // from here `accept` owns the temp file
    await deps.uploads.accept(accepted, { accountId, workspaceId, path, contentType: ctx.contentType || 'application/octet-stream', visibility }, limits);
    sendJson(ctx, 202, { path, status: 'pending' });
  } catch (error) {
    await blob?.discard();
    // A refused upload may still be sending: answer, then close, rather than read what we will not keep.
    fail(ctx, error, deps.log, !body.complete);
  }
}

async function admitted(ctx: RequestContext, deps: FileRouteDeps): Promise<Principal> {
  const principal = await deps.guard.principal(ctx);
  await deps.guard.admitManagement(principal);
  return principal;
}

function fail(ctx: RequestContext, error: unknown, log: ErrorLog, closeConnection: boolean): void {
  const e = toVfsError(error, log, ctx);
  send(ctx, e.status, 'application/json', JSON.stringify({ error: e.message }), e.headers, closeConnection);
}

/**
 * The file path of a files route: everything after `/files/`, percent-decoded
 * once, then checked and canonicalized (NFC, leading `/`).
 */
export function filePathFromUrl(url: string): string {
  const marker = url.indexOf('/files/');
  const raw = url.slice(marker + '/files/'.length);
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    throw new VfsError('INVALID_PATH', { reason: 'the path is not valid percent-encoding of UTF-8' });
  }
  const checked = checkFilePath(decoded);
  if (!checked.ok) throw new VfsError('INVALID_PATH', { reason: checked.reason });
  return checked.path;
}

/** Parses `visibility=user:a,group:b`; absent or `*` means visible to every token (null). */
export function parseVisibility(raw: string | undefined): string[] | null {
  if (raw === undefined || raw === '*') return null;
  const claims = raw.split(',');
  if (claims.length > MAX_VISIBILITY_CLAIMS) throw invalidParameter('visibility', `at most ${MAX_VISIBILITY_CLAIMS} claims`);
  for (const claim of claims) {
    if (claim === '*' || !CLAIM.test(claim)) {
      throw invalidParameter(
        'visibility',
        `each claim must be "user:<id>" or "group:<id>" (id: 1-128 of A-Z a-z 0-9 . _ @ -), got ${JSON.stringify(claim.slice(0, 140))}`,
      );
    }
  }
  return [...new Set(claims)].sort();
}
