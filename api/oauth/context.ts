/**
 * What the OAuth endpoints share: their dependencies, form bodies, the JSON errors of RFC 6749
 * 5.2, and redirects back to a client with parameters.
 */
import { VfsError } from '../../core/errors.js';
import type { Database } from '../../db/database.js';
import { findClient, type OAuthClient } from '../../db/oauth.js';
import type { Authenticator } from '../gate/auth.js';
import type { Guard } from '../gate/guard.js';
import type { Lookups } from '../gate/lookups.js';
import { type RequestContext, StrictQuery, send, sendJson } from '../http/context.js';
import { type ErrorLog, toVfsError } from '../http/respond.js';
import { type ClientDocuments, isDocumentClientId } from './client-documents.js';
import type { CsrfTokens } from './csrf.js';

/** How the authorization server issues tokens. */
export interface OAuthOptions {
  /** Lifetime of an access token, seconds (never past the approving token's expiry). */
  accessTtlSeconds: number;
  /** Lifetime of a refresh token, seconds; each use rotates it. */
  refreshTtlSeconds: number;
}

/** What the OAuth routes need. */
export interface OAuthDeps {
  db: Database;
  auth: Authenticator;
  guard: Guard;
  lookups: Lookups;
  log: ErrorLog;
  /** The service's public base URL (the issuer), known once the server listens. */
  publicUrl: () => string;
  options: OAuthOptions;
  /** Signs the authorization page's forms (csrf.ts). */
  csrf: CsrfTokens;
  /** Fetches the clients whose client_id is a URL (client-documents.ts). */
  documents: ClientDocuments;
}

/** Longest client_id of a registered client (register.ts makes 43 characters). */
const MAX_REGISTERED_ID = 100;

/**
 * The client `clientId` names: a registered one (null when unknown), or the one a client
 * metadata document describes (an https URL; throws OAUTH_CLIENT_DOCUMENT when it cannot be used).
 */
export async function lookupClient(deps: OAuthDeps, clientId: string): Promise<OAuthClient | null> {
  if (isDocumentClientId(clientId)) return deps.documents.client(clientId);
  return clientId.length <= MAX_REGISTERED_ID ? findClient(deps.db, clientId) : null;
}

/** Largest form or registration body the OAuth endpoints read. */
export const MAX_OAUTH_BODY = 16 * 1024;

/** Headers of every JSON answer of the token, revocation and registration endpoints (RFC 6749 5.1). */
export const NO_STORE: Readonly<Record<string, string>> = Object.freeze({ 'cache-control': 'no-store', pragma: 'no-cache' });

/**
 * The fields of an application/x-www-form-urlencoded body, each at most once (RFC 6749 3.1: a
 * parameter sent twice is an invalid request).
 */
export function formFields(ctx: RequestContext, body: Buffer): Map<string, string> {
  if (!/^application\/x-www-form-urlencoded\s*(?:;|$)/i.test(ctx.contentType)) {
    throw new VfsError('OAUTH_INVALID_REQUEST', { reason: 'the body must be application/x-www-form-urlencoded' });
  }
  return uniqueFields(new StrictQuery(body.toString('utf8')));
}

/** The parameters of a query or form, refusing one given twice or not valid UTF-8. */
export function uniqueFields(query: StrictQuery): Map<string, string> {
  if (query.invalid !== null) throw new VfsError('OAUTH_INVALID_REQUEST', { reason: `${query.invalid.slice(0, 50)} is not valid percent-encoded UTF-8` });
  const fields = new Map<string, string>();
  for (const [name, value] of query) {
    if (fields.has(name)) throw new VfsError('OAUTH_INVALID_REQUEST', { reason: `${name.slice(0, 50)} was given more than once` });
    fields.set(name, value);
  }
  return fields;
}

/** A required field, or invalid_request naming it. */
export function required(fields: Map<string, string>, name: string): string {
  const value = fields.get(name);
  if (value === undefined || value === '') throw new VfsError('OAUTH_INVALID_REQUEST', { reason: `${name} is required` });
  return value;
}

/**
 * Answers an error of a JSON OAuth endpoint: `{ error, error_description }` with the RFC's code,
 * or the catalog's `{ error }` for what is no OAuth error (429, 503, 500).
 */
export function sendOAuthError(ctx: RequestContext, error: unknown, log: ErrorLog): void {
  const e = toVfsError(error, log, ctx);
  if (e.oauth === null) {
    sendJson(ctx, e.status, { error: e.message }, { ...e.headers, ...NO_STORE });
    return;
  }
  sendJson(ctx, e.status, { error: e.oauth, error_description: e.message }, { ...e.headers, ...NO_STORE });
}

/** Redirects (303 after a form, 302 otherwise) to `uri` with `params` added to its query. */
export function redirectTo(ctx: RequestContext, uri: string, params: Record<string, string | null>, status: 302 | 303): void {
  const url = new URL(uri);
  for (const [name, value] of Object.entries(params)) if (value !== null) url.searchParams.append(name, value);
  send(ctx, status, null, '', { location: url.href, 'cache-control': 'no-store', 'referrer-policy': 'no-referrer' });
}
