/**
 * The metadata a client states about itself, in a registration (register.ts) or in its Client ID
 * Metadata Document (client-documents.ts), checked the same way: public clients only, redirect
 * URIs by redirect-uris.ts, a name the page can show safely.
 */
import { VfsError } from '../../core/errors.js';
import { MAX_REDIRECT_URIS, redirectUriProblem } from './redirect-uris.js';

/** Longest client_name. */
const MAX_NAME = 200;

const GRANT_TYPES = ['authorization_code', 'refresh_token'];

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

/** invalid_client_metadata (RFC 7591 3.2.2) saying why. */
export function metadataError(reason: string): VfsError {
  return new VfsError('OAUTH_INVALID_CLIENT_METADATA', { reason });
}
