/**
 * Redirect URIs: which a client may register, and which registered one a request's names.
 *
 * A registered URI is https (any host), or http on a loopback host for a native client (RFC 8252
 * 7.3: 127.0.0.1, localhost), without a fragment or user info. Not [::1]: the page's CSP must
 * let the form's answer redirect there (form-action), and a CSP source cannot hold an IPv6
 * literal, so a browser would block the redirect. A request's redirect_uri
 * must equal a registered one character for character (OAuth 2.1 2.3.1; RFC 9700 4.1.3), except
 * that on a loopback http URI the port may differ (RFC 8252 7.3: a native client gets a port
 * from the system when it listens). Nothing is normalized, so nothing a browser would read
 * differently can slip through.
 */

/** Most redirect URIs one client may register, and the longest one. */
export const MAX_REDIRECT_URIS = 10;
export const MAX_REDIRECT_URI_CHARS = 2000;

const LOOPBACK_HOSTS = new Set(['127.0.0.1', 'localhost']);

/** Why `raw` cannot be registered, or null when it can. */
export function redirectUriProblem(raw: string): string | null {
  if (raw.length === 0 || raw.length > MAX_REDIRECT_URI_CHARS) return `a redirect URI must have 1 to ${MAX_REDIRECT_URI_CHARS} characters`;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `not an absolute URL: ${raw.slice(0, 200)}`;
  }
  if (raw.includes('#')) return `a redirect URI must not have a fragment: ${raw.slice(0, 200)}`;
  if (url.username !== '' || url.password !== '') return `a redirect URI must not carry user information: ${raw.slice(0, 200)}`;
  if (/[\s<>"\\^`{|}]/.test(raw)) return `a redirect URI must not hold spaces or characters URLs escape: ${raw.slice(0, 200)}`;
  if (url.protocol === 'https:' && url.hostname !== '') return null;
  if (url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname)) return null;
  return `a redirect URI must be https, or http on a loopback host (127.0.0.1 or localhost; not [::1], which a CSP cannot name): ${raw.slice(0, 200)}`;
}

/** True when `url` is a loopback http URI (its port may vary). */
export function isLoopback(url: URL): boolean {
  return url.protocol === 'http:' && LOOPBACK_HOSTS.has(url.hostname);
}

/** The registered URI that `requested` names (see the module comment), or null. */
export function matchRedirectUri(registered: readonly string[], requested: string): string | null {
  if (registered.includes(requested)) return requested;
  const port = withoutPort(requested);
  if (port === null) return null;
  for (const uri of registered) if (withoutPort(uri) === port) return uri;
  return null;
}

/**
 * A loopback http URI with its port cut out of the text (`http://127.0.0.1:51234/cb` gives
 * `http://127.0.0.1/cb`), or null for any other URI or a port above 65535. Only the port's digits
 * go, and the scheme and host are lowercased (as registration reads them, so `http://LOCALHOST/cb`
 * matches `http://localhost:5000/cb`): the rest of the string stays as written.
 */
function withoutPort(raw: string): string | null {
  const m = /^http:\/\/(127\.0\.0\.1|localhost)(?::(\d{1,5}))?([/?].*)?$/i.exec(raw);
  if (m === null || (m[2] !== undefined && Number(m[2]) > 65535)) return null;
  return `http://${m[1].toLowerCase()}${m[3] ?? ''}`;
}
