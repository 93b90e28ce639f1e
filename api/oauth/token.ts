/**
 * POST /oauth/token (OAuth 2.1 3.2) and POST /oauth/revoke (RFC 7009), for public clients: a
 * client proves itself by its client_id and, for a code, the PKCE verifier.
 *
 * - `authorization_code`: the code is taken once (db/oauth.ts marks it used as it reads it). A
 *   code that was used before is a replay: the grant and every token issued from it are revoked
 *   (RFC 9700 4.2.4), and the answer is invalid_grant. The code must be live and bound to this
 *   client, this redirect_uri and, by S256, this code_verifier; a `resource` must be the code's.
 * - `refresh_token`: rotation. Each use answers a new refresh token and retires the old one; a
 *   retired one used again revokes the grant (RFC 9700 4.14.2). Bound to the grant's client.
 *
 * Both answer an access token (a scoped token of the grant's workspace carrying the grant's id:
 * accepted on that workspace's MCP endpoint only) and a refresh token, neither outliving the
 * credential that approved the grant. Errors are RFC 6749 5.2's JSON; nothing is cached.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { credentialHash, credentialKind, isRefreshToken } from '../../core/credentials.js';
import { VfsError } from '../../core/errors.js';
import {
  findAccessToken,
  grantClient,
  type IssuedTokens,
  issueTokens,
  type LiveGrant,
  liveGrant,
  type OAuthClient,
  revokeAccessToken,
  revokeGrant,
  takeCode,
  type Taken,
  takeRefreshToken,
} from '../../db/oauth.js';
import { type RequestContext, readBody, send, sendJson } from '../http/context.js';
import { checkScope } from './authorize.js';
import { formFields, lookupClient, MAX_OAUTH_BODY, NO_STORE, type OAuthDeps, required, sendOAuthError } from './context.js';

/** A PKCE code verifier (RFC 7636 4.1). */
const VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

/** Reads a token or revocation body; must be called before the handler's first await. */
export function tokenBody(ctx: RequestContext): Promise<Buffer> {
  const body = readBody(ctx, MAX_OAUTH_BODY);
  body.catch(() => {});
  return body;
}

/** Requests to /oauth/token and /oauth/revoke one address may make in a minute (together; all at once, then one every 60/N s). */
export const TOKEN_REQUESTS_PER_MINUTE = 120;

/** Serves one token request; `address` was read before the first await. */
export async function serveToken(ctx: RequestContext, address: string, body: Promise<Buffer>, deps: OAuthDeps): Promise<void> {
  try {
    await deps.guard.admitTokenEndpoint(address, TOKEN_REQUESTS_PER_MINUTE);
    const fields = formFields(ctx, await body);
    const grantType = required(fields, 'grant_type');
    const client = await requireClient(fields, deps);
    let issued: IssuedTokens;
    if (grantType === 'authorization_code') issued = await redeemCode(fields, client, deps);
    else if (grantType === 'refresh_token') issued = await refresh(fields, client, deps);
    else throw new VfsError('OAUTH_UNSUPPORTED_GRANT_TYPE');
    sendJson(
      ctx,
      200,
      { access_token: issued.accessToken, token_type: 'Bearer', expires_in: issued.expiresIn, refresh_token: issued.refreshToken, scope: issued.scope },
      NO_STORE,
    );
  } catch (error) {
    sendOAuthError(ctx, error, deps.log);
  }
}

/**
 * Serves one revocation request (RFC 7009 2): 200 whether or not the token was known. SECURITY:
 * the credential caches are cleared (here, and by NOTIFY on every node) only when a row was
 * revoked, so an anonymous caller cannot empty them by sending unknown tokens.
 */
export async function serveRevocation(ctx: RequestContext, address: string, body: Promise<Buffer>, deps: OAuthDeps): Promise<void> {
  try {
    await deps.guard.admitTokenEndpoint(address, TOKEN_REQUESTS_PER_MINUTE);
    const fields = formFields(ctx, await body);
    const token = required(fields, 'token');
    const client = await requireClient(fields, deps);
    let revoked = false;
    if (isRefreshToken(token)) {
      // The client is done with the grant: it goes, with every token issued from it.
      // SECURITY: a client revokes only what was issued to it; another's token is not even used up.
      const taken = await takeRefreshToken(deps.db, credentialHash(token), client.id);
      if (taken !== null) {
        await deps.db.inAccount(taken.accountId, async (tx) => {
          // SECURITY: a client revokes only what was issued to it.
          if ((await grantClient(tx, taken.grantId)) === client.id) revoked = (await revokeGrant(tx, taken.grantId)) === 'revoked';
        });
      }
    } else if (credentialKind(token) === 'token') {
      const access = await findAccessToken(deps.db, credentialHash(token));
      if (access !== null) {
        await deps.db.inAccount(access.accountId, async (tx) => {
          if ((await grantClient(tx, access.grantId)) === client.id) revoked = await revokeAccessToken(tx, access.tokenId);
        });
      }
    }
    if (revoked) await deps.auth.revoked();
    send(ctx, 200, null, '', NO_STORE);
  } catch (error) {
    sendOAuthError(ctx, error, deps.log);
  }
}

/**
 * The client the request names, registered or by its metadata document (public clients:
 * client_id is their only credential); invalid_client (401) for an unknown one or a document
 * that cannot be used.
 */
async function requireClient(fields: Map<string, string>, deps: OAuthDeps): Promise<OAuthClient> {
  const id = required(fields, 'client_id');
  let client: OAuthClient | null;
  try {
    client = await lookupClient(deps, id);
  } catch (error) {
    if (error instanceof VfsError && error.code === 'OAUTH_CLIENT_DOCUMENT') throw new VfsError('OAUTH_INVALID_CLIENT', { reason: error.message });
    throw error;
  }
  if (client === null) throw new VfsError('OAUTH_INVALID_CLIENT', { reason: 'unknown client_id' });
  return client;
}

/** The authorization_code grant. */
async function redeemCode(fields: Map<string, string>, client: OAuthClient, deps: OAuthDeps): Promise<IssuedTokens> {
  const code = required(fields, 'code');
  const redirectUri = required(fields, 'redirect_uri');
  const verifier = required(fields, 'code_verifier');
  if (!VERIFIER.test(verifier)) throw new VfsError('OAUTH_INVALID_REQUEST', { reason: 'code_verifier must be 43 to 128 of A-Z a-z 0-9 - . _ ~' });
  // SECURITY: a code sent with another client's client_id is unknown here, and stays unused for its own client.
  const taken = await takeCode(deps.db, credentialHash(code), client.id);
  if (taken === null) throw invalidGrant('unknown authorization code, or one issued to another client');
  if (taken.reused) {
    // SECURITY: a code is good once. A second use means it leaked: what it gave is taken back.
    await revokeAll(deps, taken.accountId, taken.grantId);
    throw invalidGrant('the authorization code was already used; the access it gave is revoked');
  }
  if (taken.expired) throw invalidGrant('the authorization code expired');
  // SECURITY: the code is bound to its client, its redirect URI and its PKCE challenge.
  if (taken.clientId !== client.id) throw invalidGrant('the authorization code was issued to another client');
  if (taken.redirectUri !== redirectUri) throw invalidGrant('redirect_uri differs from the authorization request');
  if (!sameText(s256(verifier), taken.codeChallenge)) throw invalidGrant('code_verifier does not match the code_challenge');
  const resource = fields.get('resource');
  if (resource !== undefined && resource !== taken.resource)
    throw new VfsError('OAUTH_INVALID_TARGET', { reason: 'resource differs from the authorization request' });
  return issueForGrant(deps, taken, () => null);
}

/** The refresh_token grant, with rotation. */
async function refresh(fields: Map<string, string>, client: OAuthClient, deps: OAuthDeps): Promise<IssuedTokens> {
  const token = required(fields, 'refresh_token');
  const scope = checkScope(fields.get('scope'));
  if (scope instanceof VfsError) throw scope;
  // SECURITY: likewise a refresh token: another client's is refused without being used up.
  const taken = isRefreshToken(token) ? await takeRefreshToken(deps.db, credentialHash(token), client.id) : null;
  if (taken === null) throw invalidGrant('unknown refresh token, or one issued to another client');
  if (taken.reused) {
    // SECURITY: a rotated refresh token used again means two parties hold it: the grant ends.
    await revokeAll(deps, taken.accountId, taken.grantId);
    throw invalidGrant('the refresh token was already used; the access it gave is revoked');
  }
  if (taken.expired) throw invalidGrant('the refresh token expired');
  return issueForGrant(deps, taken, (grant) => {
    // SECURITY: a refresh token is good only for the client it was issued to.
    if (grant.clientId !== client.id) return invalidGrant('the refresh token was issued to another client');
    const resource = fields.get('resource');
    return resource !== undefined && resource !== grant.resource ? new VfsError('OAUTH_INVALID_TARGET', { reason: 'resource differs from the grant' }) : null;
  });
}

/**
 * Issues tokens for the taken code's or refresh token's grant if it lives and `refuse` finds
 * nothing wrong with it. A grant whose approver is gone is revoked on the way (liveGrant): that
 * is committed before the refusal is thrown.
 */
async function issueForGrant(deps: OAuthDeps, taken: Taken, refuse: (grant: LiveGrant) => VfsError | null): Promise<IssuedTokens> {
  let revokedNow = false;
  const outcome = await deps.db.inAccount(taken.accountId, async (tx): Promise<IssuedTokens | VfsError> => {
    const grant = await liveGrant(tx, taken.grantId);
    revokedNow = grant === 'revoked';
    if (grant === null || grant === 'revoked') return invalidGrant('the access was revoked');
    return refuse(grant) ?? issueTokens(tx, taken.accountId, grant, deps.options.accessTtlSeconds, deps.options.refreshTtlSeconds);
  });
  if (revokedNow) await deps.auth.revoked();
  if (outcome instanceof VfsError) throw outcome;
  return outcome;
}

/** Revokes a grant and its tokens, effective from the next request on every node. */
async function revokeAll(deps: OAuthDeps, accountId: string, grantId: string): Promise<void> {
  if ((await deps.db.inAccount(accountId, (tx) => revokeGrant(tx, grantId))) === 'revoked') await deps.auth.revoked();
}

function invalidGrant(reason: string): VfsError {
  return new VfsError('OAUTH_INVALID_GRANT', { reason });
}

function s256(verifier: string): string {
  return createHash('sha256').update(verifier).digest('base64url');
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}
