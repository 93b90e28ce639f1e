/**
 * The authorization page and its error page: plain HTML, no script and no style, every string a
 * client or tenant chose escaped. They are served under a CSP as strict as the console's: nothing
 * loads, nothing frames them, and the form may post only here and be redirected only to the
 * client's redirect URI (`form-action`: browsers check the redirect that answers a form too).
 */

import { PAGE_HEADERS } from '../console-routes.js';

/** Escapes text for HTML element content and double-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The headers of every page, with `formTarget` the origin the form's answer may redirect to (a CSP source), or null. */
export function pageHeaders(formTarget: string | null): Record<string, string> {
  return {
    'content-security-policy': `default-src 'none'; base-uri 'none'; form-action 'self'${formTarget === null ? '' : ` ${formTarget}`}; frame-ancestors 'none'`,
    ...PAGE_HEADERS,
    'cache-control': 'no-store',
  };
}

/** What the authorization page shows and carries. */
export interface ConsentView {
  /** The client's registered name, or null. */
  clientName: string | null;
  /** The host of the client's metadata document (its client_id is that URL), or null for a registered client. */
  documentHost: string | null;
  /** The host the person will be sent back to. */
  redirectHost: string;
  workspace: string;
  /** The request's fields, posted back as hidden inputs. */
  hidden: Record<string, string>;
  /** What went wrong with the last post (a wrong key), or null. */
  error: string | null;
  /** The claims the person typed, kept across a wrong key. */
  claims: string;
}

/** The page a person approves or denies on. */
export function consentPage(view: ConsentView): string {
  // The name is isolated (<bdi>), so no text of it can reorder what follows; the host stands alone.
  const named = view.clientName === null ? 'An application' : `The application “<bdi>${escapeHtml(view.clientName)}</bdi>”`;
  // A document's name is whatever its author wrote: the host that published it is the part a person can check.
  const client = view.documentHost === null ? named : `${named}, described by <strong id="client-host">${escapeHtml(view.documentHost)}</strong>,`;
  const hidden = Object.entries(view.hidden)
    .map(([name, value]) => `<input type="hidden" name="${escapeHtml(name)}" value="${escapeHtml(value)}">`)
    .join('\n      ');
  const error = view.error === null ? '' : `\n    <p role="alert"><strong>${escapeHtml(view.error)}</strong></p>`;
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>Give read access to workspace ${escapeHtml(view.workspace)} · agent-vfs</title>
  </head>
  <body>
    <main>
    <h1>Give read access to workspace ${escapeHtml(view.workspace)}?</h1>
    <p>${client} asks to read the files of workspace <strong>${escapeHtml(view.workspace)}</strong> through MCP (ls, find, cat, grep). It cannot change anything.</p>
    <p>Once you decide, you are sent back to:</p>
    <p><strong id="redirect-host">${escapeHtml(view.redirectHost)}</strong></p>${error}
    <form method="post" action="/oauth/authorize">
      ${hidden}
      <p><label for="key">Access key</label><br>
      <input id="key" name="key" type="password" autocomplete="off" required></p>
      <p>Paste a management key (svc_sk_…) of the workspace's account, or a scoped token (svc_at_…) of this workspace. The application never sees it: it gets tokens of its own, which read what this key may read and end when it does. You can revoke them under the workspace's grants.</p>
      <p><label for="claims">Visibility claims (with a management key only)</label><br>
      <input id="claims" name="claims" type="text" value="${escapeHtml(view.claims)}" placeholder="* (every file), or group:eng,user:ana"></p>
      <p><button type="submit" name="decision" value="allow">Allow</button>
      <button type="submit" name="decision" value="deny" formnovalidate>Deny</button></p>
    </form>
    </main>
  </body>
</html>
`;
}

/**
 * The page of a request that is refused (every error of an authorization request is shown here,
 * none redirected) or of a refused post: the message, the RFC 6749 error code if any, and the host
 * the client asked to be sent back to, as text.
 */
export function errorPage(title: string, message: string, code: string | null = null, redirectHost: string | null = null): string {
  const codeLine = code === null ? '' : `\n    <p>Error: <code>${escapeHtml(code)}</code></p>`;
  const hostLine =
    redirectHost === null
      ? ''
      : `\n    <p>The application asked to be sent back to <strong>${escapeHtml(redirectHost)}</strong>. You were not sent there: go back to the application and start again.</p>`;
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>${escapeHtml(title)} · agent-vfs</title>
  </head>
  <body>
    <main>
    <h1>${escapeHtml(title)}</h1>
    <p>${escapeHtml(message)}</p>${codeLine}${hostLine}
    </main>
  </body>
</html>
`;
}
