/**
 * The authorization page's CSRF protection: a signed token in the form, and a cookie it must
 * match (double submit).
 *
 * When the page is served, a random nonce goes into a cookie (HttpOnly, SameSite=Strict, and on
 * an https service `__Host-` and Secure) and into the form's `csrf` field as
 * `<expiry>.<nonce>.<mac>`, the mac an HMAC-SHA256 over the expiry, the nonce and the
 * authorization request the form carries (client, redirect URI, PKCE challenge, state, resource,
 * scope). A POST is taken only when the mac verifies for the request it carries, the expiry has
 * not passed, and the cookie holds the same nonce. So a form cannot be posted from another site
 * (no cookie: SameSite=Strict), replayed after ten minutes, or altered to approve another
 * request. The key is kept in PostgreSQL (migration 016's oauth_secret), so every node of a
 * cluster checks what any of them signed; nothing is stored per request.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

/** How long a served form may be posted. */
export const FORM_SECONDS = 600;

/** The cookie's name and attributes for a service served over `https` or not. */
export function csrfCookie(https: boolean): { name: string; attributes: string } {
  return https
    ? { name: '__Host-vfs_oauth', attributes: `Path=/; Secure; HttpOnly; SameSite=Strict; Max-Age=${FORM_SECONDS}` }
    : { name: 'vfs_oauth', attributes: `Path=/oauth/authorize; HttpOnly; SameSite=Strict; Max-Age=${FORM_SECONDS}` };
}

/** Signs and checks the tokens of one key. */
export class CsrfTokens {
  constructor(private readonly key: Buffer) {}

  /** A new form token for `request` (the fields the form carries, in a fixed order), and its nonce for the cookie. */
  issue(request: readonly string[], now = Date.now()): { token: string; nonce: string } {
    const expiry = Math.floor(now / 1000) + FORM_SECONDS;
    const nonce = randomBytes(18).toString('base64url');
    return { token: `${expiry}.${nonce}.${this.mac(expiry, nonce, request)}`, nonce };
  }

  /** True when `token` was issued for `request`, has not expired, and its nonce is `cookieNonce`. */
  verify(token: string, request: readonly string[], cookieNonce: string | null, now = Date.now()): boolean {
    const m = /^(\d{1,12})\.([A-Za-z0-9_-]{24})\.([A-Za-z0-9_-]{43})$/.exec(token);
    if (m === null || cookieNonce === null) return false;
    const expiry = Number(m[1]);
    if (expiry * 1000 <= now) return false;
    const expected = Buffer.from(this.mac(expiry, m[2], request));
    const given = Buffer.from(m[3]);
    const nonceGiven = Buffer.from(cookieNonce);
    const nonceExpected = Buffer.from(m[2]);
    const macOk = given.length === expected.length && timingSafeEqual(given, expected);
    const nonceOk = nonceGiven.length === nonceExpected.length && timingSafeEqual(nonceGiven, nonceExpected);
    return macOk && nonceOk;
  }

  private mac(expiry: number, nonce: string, request: readonly string[]): string {
    return createHmac('sha256', this.key)
      .update(JSON.stringify([expiry, nonce, ...request]))
      .digest('base64url');
  }
}

/** The value of cookie `name` in a Cookie header ('' when absent), or null. */
export function cookieValue(header: string, name: string): string | null {
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return null;
}
