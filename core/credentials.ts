/**
 * Credential formats. A credential is `<prefix><secret><check>`:
 * - prefix `svc_sk_` (management key) or `svc_at_` (scoped token, also the access tokens of
 *   OAuth), or `svc_rt_` (an OAuth refresh token, good only at the token endpoint);
 * - secret: 32 random bytes (256 bits) in base64url, 43 characters;
 * - check: the first 4 bytes of SHA-256(prefix + secret) in base64url, 6 characters.
 *
 * The check lets a mistyped or made-up credential be refused without a
 * database round trip. Only SHA-256 of the whole credential is ever stored.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

export const MANAGEMENT_KEY_PREFIX = 'svc_sk_';
export const TOKEN_PREFIX = 'svc_at_';
export const REFRESH_TOKEN_PREFIX = 'svc_rt_';

/** The form of a credential's id (management keys and tokens alike): a UUID. */
export const CREDENTIAL_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The two kinds of credential. */
export type CredentialKind = 'management_key' | 'token';

const SECRET_CHARS = 43;
const CHECK_CHARS = 6;
const BODY = /^[A-Za-z0-9_-]+$/;

function check(prefix: string, secret: string): string {
  return createHash('sha256')
    .update(prefix + secret)
    .digest()
    .subarray(0, 4)
    .toString('base64url');
}

/** Makes a new credential of the given kind. */
export function newCredential(kind: CredentialKind): string {
  return withPrefix(kind === 'management_key' ? MANAGEMENT_KEY_PREFIX : TOKEN_PREFIX);
}

/** Makes a new OAuth refresh token: the same form under its own prefix, which no bearer route takes. */
export function newRefreshToken(): string {
  return withPrefix(REFRESH_TOKEN_PREFIX);
}

/** True for a well-formed refresh token (prefix, length, alphabet and check). */
export function isRefreshToken(credential: string): boolean {
  return (
    credential.length === REFRESH_TOKEN_PREFIX.length + SECRET_CHARS + CHECK_CHARS &&
    credential.startsWith(REFRESH_TOKEN_PREFIX) &&
    checks(REFRESH_TOKEN_PREFIX, credential)
  );
}

function withPrefix(prefix: string): string {
  const secret = randomBytes(32).toString('base64url');
  return prefix + secret + check(prefix, secret);
}

function checks(prefix: string, credential: string): boolean {
  const secret = credential.slice(prefix.length, prefix.length + SECRET_CHARS);
  const given = credential.slice(prefix.length + SECRET_CHARS);
  if (!BODY.test(secret) || !BODY.test(given)) return false;
  return timingSafeEqual(Buffer.from(given), Buffer.from(check(prefix, secret)));
}

/** The kind of a well-formed credential (prefix, length, alphabet and check all right), or null. */
export function credentialKind(credential: string): CredentialKind | null {
  if (credential.length !== MANAGEMENT_KEY_PREFIX.length + SECRET_CHARS + CHECK_CHARS) return null;
  const prefix = credential.slice(0, MANAGEMENT_KEY_PREFIX.length);
  const kind = prefix === MANAGEMENT_KEY_PREFIX ? 'management_key' : prefix === TOKEN_PREFIX ? 'token' : null;
  if (kind === null) return null;
  return checks(prefix, credential) ? kind : null;
}

/** SHA-256 of a credential: the only form that is stored. */
export function credentialHash(credential: string): Buffer {
  return createHash('sha256').update(credential).digest();
}

/** Constant-time equality of two hashes. */
export function sameHash(a: Buffer, b: Buffer): boolean {
  return a.length === b.length && timingSafeEqual(a, b);
}
