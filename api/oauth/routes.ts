/**
 * Registers the OAuth routes: the protected-resource metadata of every workspace's MCP endpoint
 * (RFC 9728; with VFS_OAUTH=on or VFS_OAUTH_ISSUER set), and with VFS_OAUTH=on the built-in
 * authorization server's metadata (RFC 8414) and its endpoints: registration, authorization,
 * token and revocation. Another method on one of their paths answers 405. A route not registered
 * answers the JSON 404 of any unknown route.
 */
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { VfsError } from '../../core/errors.js';
import { WORKSPACE_NAME, decodeURIComponentSafe } from '../contract/params.js';
import { sendJson, snapshot } from '../http/context.js';
import { type ErrorLog, sendJsonError } from '../http/respond.js';
import { authorizePost, serveAuthorizeDecision, serveAuthorizePage } from './authorize.js';
import type { OAuthDeps } from './context.js';
import { authorizationServerMetadata, PATHS, protectedResourceMetadata } from './metadata.js';
import { registrationBody, serveRegistration } from './register.js';
import { serveRevocation, serveToken, tokenBody } from './token.js';

export type { OAuthDeps, OAuthOptions } from './context.js';

/** Metadata changes only with the service's settings: clients may keep it a little while. */
const METADATA_CACHE = 'public, max-age=300';

/** What the protected-resource metadata needs. */
export interface ProtectedResourceDeps {
  log: ErrorLog;
  /** The service's public base URL, known once the server listens. */
  publicUrl: () => string;
  /** The authorization servers it names: the company's issuer, the built-in server (this base URL). */
  authorizationServers: () => readonly string[];
}

/** Registers the protected-resource metadata of every workspace's MCP endpoint (RFC 9728). */
export function registerProtectedResource(app: TemplatedApp, deps: ProtectedResourceDeps): void {
  app.get(`${PATHS.protectedResource}/v1/workspaces/:ws/mcp`, (res, req) => {
    const ctx = snapshot(res, req, 1);
    const workspace = decodeURIComponentSafe(ctx.params[0]);
    // Any valid name is described, whether or not such a workspace exists: the answer tells nothing.
    if (!WORKSPACE_NAME.test(workspace)) {
      sendJsonError(ctx, new VfsError('NO_SUCH_ROUTE', { method: ctx.method, url: ctx.url.slice(0, 200) }), deps.log);
      return;
    }
    const metadata = protectedResourceMetadata(deps.publicUrl(), workspace, deps.authorizationServers());
    sendJson(ctx, 200, metadata, { 'cache-control': 'public, max-age=60' });
  });
}

/** Registers the built-in authorization server's routes. */
export function registerOAuthRoutes(app: TemplatedApp, deps: OAuthDeps): void {
  app.get(PATHS.authorizationServer, (res, req) => {
    sendJson(snapshot(res, req, 0), 200, authorizationServerMetadata(deps.publicUrl()), { 'cache-control': METADATA_CACHE });
  });

  app.post(PATHS.register, (res, req) => {
    const ctx = snapshot(res, req, 0);
    const address = deps.guard.address(ctx);
    void serveRegistration(ctx, address, registrationBody(ctx), deps);
  });

  app.get(PATHS.authorize, (res, req) => {
    void serveAuthorizePage(snapshot(res, req, 0), deps);
  });
  app.post(PATHS.authorize, (res, req) => {
    const cookie = cookieHeader(req);
    const ctx = snapshot(res, req, 0);
    void serveAuthorizeDecision(ctx, authorizePost(ctx, cookie, deps.guard.address(ctx)), deps);
  });

  app.post(PATHS.token, (res, req) => {
    const ctx = snapshot(res, req, 0);
    const address = deps.guard.address(ctx);
    void serveToken(ctx, address, tokenBody(ctx), deps);
  });
  app.post(PATHS.revoke, (res, req) => {
    const ctx = snapshot(res, req, 0);
    const address = deps.guard.address(ctx);
    void serveRevocation(ctx, address, tokenBody(ctx), deps);
  });

  const allows: Array<[string, string]> = [
    [PATHS.authorizationServer, 'GET'],
    [PATHS.register, 'POST'],
    [PATHS.authorize, 'GET, POST'],
    [PATHS.token, 'POST'],
    [PATHS.revoke, 'POST'],
  ];
  for (const [path, allow] of allows) {
    app.any(path, (res: HttpResponse, req: HttpRequest) => {
      const ctx = snapshot(res, req, 0);
      sendJsonError(ctx, new VfsError('METHOD_NOT_ALLOWED', { method: ctx.method, allow }, { allow }), deps.log);
    });
  }
}

/** The request's Cookie header lines, joined ('' when none). */
function cookieHeader(req: HttpRequest): string {
  let cookie = '';
  req.forEach((name, value) => {
    if (name === 'cookie') cookie = cookie === '' ? value : `${cookie}; ${value}`;
  });
  return cookie;
}
