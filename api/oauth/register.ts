/**
 * POST /oauth/register: dynamic client registration (RFC 7591) of public clients. A client says
 * where it may be sent back (redirect_uris, redirect-uris.ts) and what it is called; it gets a
 * random client_id and no secret (token_endpoint_auth_method "none": PKCE proves the caller).
 * Registration is anonymous, so it is bounded per client address (the gate's rate limiter, shared
 * by the nodes of a cluster) and by body size.
 */
import { VfsError } from '../../core/errors.js';
import { registerClient } from '../../db/oauth.js';
import { type RequestContext, readBody, sendJson } from '../http/context.js';
import { MAX_OAUTH_BODY, NO_STORE, type OAuthDeps, sendOAuthError } from './context.js';
import { SCOPE } from './metadata.js';
import { MAX_REDIRECT_URIS, redirectUriProblem } from './redirect-uris.js';

/** Registrations one address may make in a minute (all at once, then one every 60/N s). */
export const REGISTRATIONS_PER_MINUTE = 30;

/** Longest client_name. */
const MAX_NAME = 200;

const GRANT_TYPES = ['authorization_code', 'refresh_token'];

/** Serves one registration; `address` was read before the first await. */
export async function serveRegistration(ctx: RequestContext, address: string, body: Promise<Buffer>, deps: OAuthDeps): Promise<void> {
  try {
    await deps.guard.admitRegistration(address, REGISTRATIONS_PER_MINUTE);
    // As the management routes, a body without a Content-Type is read as JSON too.
    if (ctx.contentType !== '' && !/^application\/json\s*(?:;|$)/i.test(ctx.contentType)) throw metadataError('the body must be application/json');
    let input: unknown;
    try {
      input = JSON.parse((await body).toString('utf8'));
    } catch (error) {
      if (error instanceof VfsError) throw error;
      throw metadataError('the body is not JSON');
    }
    const metadata = clientMetadata(input);
    const client = await registerClient(deps.db, metadata.clientName, metadata.redirectUris);
    sendJson(
      ctx,
      201,
      {
        client_id: client.id,
        client_id_issued_at: Math.floor(client.createdAt.getTime() / 1000),
        ...(client.name === null ? {} : { client_name: client.name }),
        redirect_uris: client.redirectUris,
        grant_types: metadata.grantTypes,
        response_types: ['code'],
        token_endpoint_auth_method: 'none',
        scope: SCOPE,
      },
      NO_STORE,
    );
  } catch (error) {
    sendOAuthError(ctx, error, deps.log);
  }
}

/** What is kept of a registration request: the rest of its metadata is ignored (RFC 7591 2). */
export interface ClientMetadata {
  clientName: string | null;
  redirectUris: string[];
  grantTypes: string[];
}

/** Checks a registration request's or a client document's metadata (RFC 7591 2 and 3.2.2's errors). */
export function clientMetadata(input: unknown): ClientMetadata {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw metadataError('the body must be a JSON object');
  const m = input as Record<string, unknown>;
  const uris = m.redirect_uris;
  if (!Array.isArray(uris) || uris.length === 0 || uris.length > MAX_REDIRECT_URIS) {
    throw new VfsError('OAUTH_INVALID_REDIRECT_URI', { reason: `redirect_uris must be an array of 1 to ${MAX_REDIRECT_URIS} URIs` });
  }
  for (const uri of uris) {
    if (typeof uri !== 'string') throw new VfsError('OAUTH_INVALID_REDIRECT_URI', { reason: 'each redirect URI must be a string' });
    const problem = redirectUriProblem(uri);
    if (problem !== null) throw new VfsError('OAUTH_INVALID_REDIRECT_URI', { reason: problem });
  }
  const method = m.token_endpoint_auth_method;
  if (method !== undefined && method !== 'none') {
    throw metadataError('token_endpoint_auth_method must be "none": only public clients are registered (PKCE proves the caller)');
  }
  const grantTypes = m.grant_types === undefined ? GRANT_TYPES : m.grant_types;
  if (!Array.isArray(grantTypes) || !grantTypes.includes('authorization_code') || grantTypes.some((g) => !GRANT_TYPES.includes(g as string))) {
    throw metadataError('grant_types must hold authorization_code, and refresh_token at most besides');
  }
  const responseTypes = m.response_types;
  if (responseTypes !== undefined && (!Array.isArray(responseTypes) || responseTypes.length !== 1 || responseTypes[0] !== 'code')) {
    throw metadataError('response_types must be ["code"]');
  }
  const name = m.client_name;
  // SECURITY: no format characters either (\p{Cf}: bidi overrides such as U+202E, zero-width ones), which could make the page misread.
  if (name !== undefined && (typeof name !== 'string' || name.length > MAX_NAME || /[\p{Cc}\p{Cf}]/u.test(name))) {
    throw metadataError(`client_name must be a string of at most ${MAX_NAME} characters, without control or format characters`);
  }
  return { clientName: name === undefined || name === '' ? null : name, redirectUris: uris as string[], grantTypes: [...new Set(grantTypes as string[])] };
}

function metadataError(reason: string): VfsError {
  return new VfsError('OAUTH_INVALID_CLIENT_METADATA', { reason });
}

/** Reads a registration body, at most MAX_OAUTH_BODY bytes; must be called before the handler's first await. */
export function registrationBody(ctx: RequestContext): Promise<Buffer> {
  const body = readBody(ctx, MAX_OAUTH_BODY);
  body.catch(() => {});
  return body;
}
