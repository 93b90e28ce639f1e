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
import { clientMetadata, metadataError } from './client-metadata.js';
import { SCOPE } from './metadata.js';

/** Registrations one address may make in a minute (all at once, then one every 60/N s). */
export const REGISTRATIONS_PER_MINUTE = 30;

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

/** Reads a registration body, at most MAX_OAUTH_BODY bytes; must be called before the handler's first await. */
export function registrationBody(ctx: RequestContext): Promise<Buffer> {
  const body = readBody(ctx, MAX_OAUTH_BODY);
  body.catch(() => {});
  return body;
}
