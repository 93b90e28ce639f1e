/**
 * GET and POST /oauth/authorize: the authorization endpoint (OAuth 2.1 4.1), where a person
 * approves a client's access to one workspace by pasting an access key of it.
 *
 * Every error of a request is shown on this service's own page (with its RFC 6749 code and, once
 * the redirect URI checks out, the host it names), never redirected: anyone may register any https
 * redirect URI, so an error sent there without a person's action would make this an open
 * redirector (RFC 9700 4.11). The browser goes back to the client only after the person acts on
 * the form: `deny` (access_denied) or `allow`. PKCE with S256 is required (missing or `plain`:
 * invalid_request), and so is a `resource` naming one workspace's MCP endpoint (RFC 8707;
 * otherwise invalid_target).
 *
 * The page's form posts the request back with a CSRF token (csrf.ts), the key, optional
 * visibility claims and the decision. `allow` authenticates the key under the gate's
 * failed-authentication lock; it must be a management key of the workspace's account or a
 * scoped token of the workspace (a wrong one shows the page again, 401, and nothing is issued).
 * Then a grant is made (db/oauth.ts) with a one-use code valid 60 s, bound to the client, the
 * redirect URI, the PKCE challenge and the resource, and the browser is sent back with it (303,
 * as RFC 9700 4.12 asks after a form that carried a credential).
 */
import { VfsError } from '../../core/errors.js';
import { type Approver, createGrant, type OAuthClient, saveDocumentClient } from '../../db/oauth.js';
import { CLAIM } from '../contract/params.js';
import type { Principal } from '../gate/auth.js';
import { type RequestContext, readBody, send } from '../http/context.js';
import { toVfsError } from '../http/respond.js';
import { isDocumentClientId } from './client-documents.js';
import { formFields, lookupClient, MAX_OAUTH_BODY, type OAuthDeps, redirectTo, uniqueFields } from './context.js';
import { cookieValue, csrfCookie } from './csrf.js';
import { resourceWorkspace, SCOPE } from './metadata.js';
import { consentPage, errorPage, pageHeaders } from './page.js';
import { isLoopback, matchRedirectUri } from './redirect-uris.js';

/** How long an authorization code may be redeemed. */
export const CODE_SECONDS = 60;

/** Longest `state` carried through (it goes into a form and a URL). */
const MAX_STATE = 2048;
/** A PKCE S256 challenge: BASE64URL(SHA-256(verifier)) without padding (RFC 7636 4.2). */
const S256_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;
const HTML = 'text/html; charset=utf-8';

/** An authorization request that passed every check. */
interface AuthorizationRequest {
  client: OAuthClient;
  /** As the request gave it: where the code goes. */
  redirectUri: string;
  codeChallenge: string;
  state: string | null;
  resource: string;
  workspace: string;
  scope: string;
}

/** A request's check: passed, or failed, with the host of its redirect URI once that checked out (named on the error page). */
type Checked = { ok: true; request: AuthorizationRequest } | { ok: false; error: VfsError; redirectHost: string | null };

/** Serves GET /oauth/authorize: the page, or the request's error. */
export async function serveAuthorizePage(ctx: RequestContext, deps: OAuthDeps): Promise<void> {
  try {
    const checked = await checkRequest(uniqueFields(ctx.query), deps);
    if (!checked.ok) {
      sendCheckError(ctx, checked);
      return;
    }
    sendConsent(ctx, deps, checked.request, null, '', 200);
  } catch (error) {
    sendErrorPage(ctx, error, deps);
  }
}

/** What a POST needs from the synchronous part of its handler. */
export interface AuthorizePost {
  /** The client's address, for the failed-authentication lock. */
  address: string;
  /** The request's Cookie header ('' when absent). */
  cookie: string;
  body: Promise<Buffer>;
}

/** Reads what a POST needs before its handler's first await. */
export function authorizePost(ctx: RequestContext, cookie: string, address: string): AuthorizePost {
  const body = readBody(ctx, MAX_OAUTH_BODY);
  body.catch(() => {});
  return { address, cookie, body };
}

/** Serves POST /oauth/authorize: the person's decision. */
export async function serveAuthorizeDecision(ctx: RequestContext, post: AuthorizePost, deps: OAuthDeps): Promise<void> {
  try {
    const fields = formFields(ctx, await post.body);
    const checked = await checkRequest(fields, deps);
    // The form carried a request the page checked: one that fails now was altered, and is only shown.
    if (!checked.ok) {
      sendCheckError(ctx, checked);
      return;
    }
    const request = checked.request;
    const { name } = csrfCookie(deps.publicUrl().startsWith('https:'));
    // SECURITY: CSRF. The form must be the one this service served this browser for this very request.
    if (!deps.csrf.verify(fields.get('csrf') ?? '', csrfFields(request), cookieValue(post.cookie, name))) {
      sendPage(ctx, new VfsError('OAUTH_CSRF'), 'This form cannot be used');
      return;
    }
    const decision = fields.get('decision');
    if (decision === 'deny') {
      redirectTo(ctx, request.redirectUri, redirectError(new VfsError('OAUTH_ACCESS_DENIED'), request.state, deps), 303);
      return;
    }
    if (decision !== 'allow') throw new VfsError('OAUTH_INVALID_REQUEST', { reason: 'decision must be allow or deny' });
    const claimsText = fields.get('claims') ?? '';
    const approver = await authenticateApprover(ctx, post.address, fields.get('key') ?? '', request, deps);
    if (approver === null) {
      sendConsent(ctx, deps, request, new VfsError('OAUTH_WRONG_KEY', { name: request.workspace }).message, claimsText, 401);
      return;
    }
    let claims: string[];
    if (approver.principal.kind === 'token') claims = approver.principal.claims;
    else {
      const parsed = parseClaims(claimsText);
      if (typeof parsed === 'string') {
        sendConsent(ctx, deps, request, parsed, claimsText, 400);
        return;
      }
      claims = parsed;
    }
    const principal = approver.principal;
    const approvedBy: Approver = { kind: principal.kind, id: principal.actorId };
    const made = await deps.db.inAccount(principal.accountId, async (tx) => {
      // A client known by its document gets a row too, the grant's to name, with the name and redirect URIs approved.
      if (isDocumentClientId(request.client.id)) await saveDocumentClient(tx, request.client);
      return createGrant(
        tx,
        {
          accountId: principal.accountId,
          workspaceId: approver.workspaceId,
          clientId: request.client.id,
          claims,
          approvedBy,
          redirectUri: request.redirectUri,
          scope: request.scope,
          resource: request.resource,
          // SECURITY: a grant approved by a scoped token ends when that token does.
          expiresAt: principal.kind === 'token' ? new Date(principal.expiresAt) : null,
        },
        request.codeChallenge,
        CODE_SECONDS,
      );
    });
    // SECURITY: the key was revoked (or the token expired) since it was authenticated, maybe from the cache.
    if (made === null) {
      sendConsent(ctx, deps, request, new VfsError('OAUTH_WRONG_KEY', { name: request.workspace }).message, claimsText, 401);
      return;
    }
    redirectTo(ctx, request.redirectUri, { code: made.code, state: request.state, iss: deps.publicUrl() }, 303);
  } catch (error) {
    sendErrorPage(ctx, error, deps);
  }
}

/**
 * The approver behind `key` if it may give access to the request's workspace, else null (the
 * failed-authentication lock counts a key that is no credential at all; its 429 is thrown).
 */
async function authenticateApprover(
  ctx: RequestContext,
  address: string,
  key: string,
  request: AuthorizationRequest,
  deps: OAuthDeps,
): Promise<{ principal: Principal; workspaceId: string } | null> {
  let principal: Principal;
  try {
    principal = await deps.guard.authenticateAt(address, `Bearer ${key.trim()}`);
  } catch (error) {
    if (error instanceof VfsError && error.code === 'UNAUTHENTICATED') return null;
    throw toVfsError(error, deps.log, ctx);
  }
  // SECURITY: an OAuth access token never approves a grant: it is good on its MCP endpoint only.
  if (principal.kind === 'token' && principal.mcpOnly) return null;
  const workspaceId = await deps.lookups.workspaceId(principal.accountId, request.workspace).catch((error: unknown) => {
    if (error instanceof VfsError && error.code === 'NO_SUCH_WORKSPACE') return null;
    throw error;
  });
  // SECURITY: a management key of the workspace's account, or a scoped token pinned to the workspace.
  if (workspaceId === null) return null;
  if (principal.kind === 'token' && principal.workspaceId !== workspaceId) return null;
  return { principal, workspaceId };
}

/** Claims typed on the page ('' or `*`: every file), or a sentence saying what is wrong. */
function parseClaims(text: string): string[] | string {
  const trimmed = text.trim();
  if (trimmed === '' || trimmed === '*') return ['*'];
  const claims = trimmed.split(',').map((c) => c.trim());
  if (claims.length > 64 || claims.some((c) => !CLAIM.test(c))) {
    return 'Visibility claims are up to 64, separated by commas, each "*", "user:<id>" or "group:<id>" (id: 1-128 of A-Z a-z 0-9 . _ @ -).';
  }
  return claims;
}

/** Checks an authorization request (the module comment says in which order, and where errors go). */
async function checkRequest(fields: Map<string, string>, deps: OAuthDeps): Promise<Checked> {
  const page = (reason: string): Checked => ({ ok: false, error: new VfsError('OAUTH_INVALID_REQUEST', { reason }), redirectHost: null });
  const clientId = fields.get('client_id') ?? '';
  if (clientId === '') return page('the request names no client (client_id)');
  let client: OAuthClient | null;
  try {
    client = await lookupClient(deps, clientId);
  } catch (error) {
    // A client document that cannot be fetched or is invalid: invalid_client, shown, never redirected.
    if (error instanceof VfsError && error.code === 'OAUTH_CLIENT_DOCUMENT') return { ok: false, error, redirectHost: null };
    throw error;
  }
  if (client === null) return page('the client is not registered here (unknown client_id)');
  const requested = fields.get('redirect_uri') ?? '';
  if (requested === '') return page('the request has no redirect_uri');
  if (matchRedirectUri(client.redirectUris, requested) === null) return page('the redirect_uri is not one the client registered');
  // From here on, the error page names where the client asked to be sent back (as text only).
  const state = fields.get('state') ?? null;
  const back = (error: VfsError): Checked => ({ ok: false, error, redirectHost: new URL(requested).host });
  if (state !== null && state.length > MAX_STATE)
    return back(new VfsError('OAUTH_INVALID_REQUEST', { reason: `state is longer than ${MAX_STATE} characters` }));
  if (fields.get('response_type') !== 'code') return back(new VfsError('OAUTH_UNSUPPORTED_RESPONSE_TYPE'));
  const challenge = fields.get('code_challenge');
  if (challenge === undefined)
    return back(new VfsError('OAUTH_INVALID_REQUEST', { reason: 'PKCE is required: send code_challenge and code_challenge_method=S256' }));
  if (fields.get('code_challenge_method') !== 'S256') return back(new VfsError('OAUTH_INVALID_REQUEST', { reason: 'code_challenge_method must be S256' }));
  if (!S256_CHALLENGE.test(challenge))
    return back(new VfsError('OAUTH_INVALID_REQUEST', { reason: 'code_challenge must be 43 characters of base64url (S256)' }));
  const scope = checkScope(fields.get('scope'));
  if (scope instanceof VfsError) return back(scope);
  const resource = fields.get('resource');
  if (resource === undefined) return back(new VfsError('OAUTH_INVALID_TARGET', { reason: "resource is required: the workspace's MCP endpoint URL" }));
  const workspace = resourceWorkspace(deps.publicUrl(), resource);
  if (workspace === null) return back(new VfsError('OAUTH_INVALID_TARGET', { reason: "resource must be a workspace's MCP endpoint of this service" }));
  return { ok: true, request: { client, redirectUri: requested, codeChallenge: challenge, state, resource, workspace, scope } };
}

/** A requested scope: absent means vfs:read, the only one there is. */
export function checkScope(raw: string | undefined): string | VfsError {
  if (raw === undefined || raw.trim() === '') return SCOPE;
  const scopes = raw.split(' ').filter((s) => s !== '');
  return scopes.every((s) => s === SCOPE) ? SCOPE : new VfsError('OAUTH_INVALID_SCOPE', { scope: JSON.stringify(raw.slice(0, 100)) });
}

/** The fields the CSRF token signs: the request the form carries. */
function csrfFields(request: AuthorizationRequest): string[] {
  return [request.client.id, request.redirectUri, request.codeChallenge, request.state ?? '', request.resource, request.scope];
}

/** The parameters of an error sent back to the client. */
function redirectError(error: VfsError, state: string | null, deps: OAuthDeps): Record<string, string | null> {
  return { error: error.oauth ?? 'server_error', error_description: error.message, state, iss: deps.publicUrl() };
}

/** SECURITY: a request's error is only shown, never redirected (see the module comment). */
function sendCheckError(ctx: RequestContext, checked: Extract<Checked, { ok: false }>): void {
  sendPage(ctx, checked.error, 'This request cannot be authorized', checked.redirectHost);
}

/** Serves the consent page for `request`, with a fresh CSRF token and its cookie. */
function sendConsent(ctx: RequestContext, deps: OAuthDeps, request: AuthorizationRequest, error: string | null, claims: string, status: number): void {
  const { token, nonce } = deps.csrf.issue(csrfFields(request));
  const cookie = csrfCookie(deps.publicUrl().startsWith('https:'));
  const hidden: Record<string, string> = {
    response_type: 'code',
    client_id: request.client.id,
    redirect_uri: request.redirectUri,
    code_challenge: request.codeChallenge,
    code_challenge_method: 'S256',
    ...(request.state === null ? {} : { state: request.state }),
    resource: request.resource,
    scope: request.scope,
    csrf: token,
  };
  const url = new URL(request.redirectUri);
  const documentHost = isDocumentClientId(request.client.id) ? new URL(request.client.id).host : null;
  const html = consentPage({ clientName: request.client.name, documentHost, redirectHost: url.host, workspace: request.workspace, hidden, error, claims });
  send(ctx, status, HTML, html, { ...pageHeaders(formTarget(url)), 'set-cookie': `${cookie.name}=${nonce}; ${cookie.attributes}` });
}

/** The CSP source the form's answer may redirect to: the redirect URI's origin, any port on a loopback one. */
function formTarget(url: URL): string {
  return isLoopback(url) ? `http://${url.hostname}:*` : url.origin;
}

/** An error page with the error's status (and headers, such as Retry-After), its RFC 6749 code and the client's redirect host if known. */
function sendPage(ctx: RequestContext, error: VfsError, title: string, redirectHost: string | null = null): void {
  const html = errorPage(title, error.message, error.oauth ?? null, redirectHost);
  send(ctx, error.status, HTML, html, { ...error.headers, ...pageHeaders(null) });
}

function sendErrorPage(ctx: RequestContext, error: unknown, deps: OAuthDeps): void {
  const e = toVfsError(error, deps.log, ctx);
  sendPage(ctx, e, e.status >= 500 ? 'Something went wrong' : 'This request cannot be authorized');
}
