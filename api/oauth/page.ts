/**
 * The authorization page and its error page: plain HTML, no script, every string a client or
 * tenant chose escaped. They are served under a CSP as strict as the console's: nothing loads,
 * nothing frames them, and the form may post only here and be redirected only to the client's
 * redirect URI (`form-action`: browsers check the redirect that answers a form too).
 *
 * They look like the console (its palette, type and spacing, from console/src/style.css) through
 * one inline stylesheet, PAGE_STYLE, allowed by its SHA-256 in the CSP (`style-src 'sha256-…'`):
 * no `unsafe-inline`, so an injected style attribute or element is still refused; no request
 * beyond the page (it renders with the console unbuilt, and without JavaScript); and the hash is
 * computed from the very text sent, so the two cannot drift apart.
 */

import { createHash } from 'node:crypto';
import { PAGE_HEADERS } from '../console-routes.js';

/**
 * The pages' stylesheet: the console's colours (the same custom properties and values, checked by
 * test/oauth-page.test.ts), system fonts, its card and top bar, and one column on a phone.
 */
export const PAGE_STYLE = `
:root {
  --fg: #1a1a1a;
  --muted: #555;
  --bg: #fff;
  --panel: #f5f6f8;
  --line: #d0d4da;
  --accent: #0b5cad;
  --bad: #b3261e;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  font-size: 15px;
  line-height: 1.45;
  color: var(--fg);
  background: var(--bg);
}
* { box-sizing: border-box; }
body { margin: 0; }
code { font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; font-size: 13px; }
.top { padding: 0.6rem 1.5rem; background: #16324f; color: #fff; font-weight: 700; font-size: 1.1rem; }
main { display: flex; justify-content: center; padding: 8vh 1rem 3rem; }
.card { width: min(34rem, 100%); background: var(--panel); border: 1px solid var(--line); border-radius: 8px; padding: 1rem 1.25rem; }
h1 { font-size: 1.4rem; margin: 0.2rem 0 0.8rem; overflow-wrap: anywhere; }
p { margin: 0.5rem 0; overflow-wrap: anywhere; }
.muted { color: var(--muted); }
.small { font-size: 0.85rem; }
#redirect-host { display: inline-block; font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace; background: #fff; border: 1px solid var(--line); border-radius: 4px; padding: 0.1rem 0.4rem; }
.error { color: var(--bad); }
form { display: flex; flex-direction: column; gap: 0.4rem; margin-top: 0.8rem; }
label { font-weight: 600; }
input { font: inherit; padding: 0.35rem 0.5rem; border: 1px solid #767676; border-radius: 4px; background: #fff; color: var(--fg); width: 100%; }
.actions { display: flex; gap: 0.5rem; flex-wrap: wrap; margin-top: 0.4rem; }
button { font: inherit; font-weight: 600; padding: 0.4rem 1.1rem; border-radius: 4px; border: 1px solid var(--accent); background: var(--accent); color: #fff; cursor: pointer; }
button.secondary { background: #fff; color: var(--accent); }
button:focus-visible, input:focus-visible { outline: 3px solid #e8a000; outline-offset: 2px; }
@media (max-width: 700px) { .top { padding: 0.5rem 0.8rem; } main { padding-top: 1rem; } }
`;

/** The CSP source that allows PAGE_STYLE, and only it. */
const STYLE_SOURCE = `'sha256-${createHash('sha256').update(PAGE_STYLE).digest('base64')}'`;

/** Escapes text for HTML element content and double-quoted attribute values. */
export function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/** The headers of every page, with `formTarget` the origin the form's answer may redirect to (a CSP source), or null. */
export function pageHeaders(formTarget: string | null): Record<string, string> {
  return {
    'content-security-policy': `default-src 'none'; style-src ${STYLE_SOURCE}; base-uri 'none'; form-action 'self'${formTarget === null ? '' : ` ${formTarget}`}; frame-ancestors 'none'`,
    ...PAGE_HEADERS,
    'cache-control': 'no-store',
  };
}

/** A whole page: the console's top bar, and `body` on a card. */
function page(title: string, body: string): string {
  return `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8">
    <meta name="viewport" content="width=device-width, initial-scale=1">
    <title>${title}</title>
    <style>${PAGE_STYLE}</style>
  </head>
  <body>
    <header class="top">agent-vfs</header>
    <main>
    <div class="card">
    ${body}
    </div>
    </main>
  </body>
</html>
`;
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
  const error = view.error === null ? '' : `\n    <p role="alert" class="error"><strong>${escapeHtml(view.error)}</strong></p>`;
  return page(
    `Give read access to workspace ${escapeHtml(view.workspace)} · agent-vfs`,
    `<h1>Give read access to workspace ${escapeHtml(view.workspace)}?</h1>
    <p>${client} asks to read the files of workspace <strong>${escapeHtml(view.workspace)}</strong> through MCP (ls, find, cat, grep). It cannot change anything.</p>
    <p>Once you decide, you are sent back to:</p>
    <p><strong id="redirect-host">${escapeHtml(view.redirectHost)}</strong></p>${error}
    <form method="post" action="/oauth/authorize">
      ${hidden}
      <label for="key">Access key</label>
      <input id="key" name="key" type="password" autocomplete="off" required aria-describedby="key-help">
      <p id="key-help" class="muted small">Paste a management key (svc_sk_…) of the workspace's account, or a scoped token (svc_at_…) of this workspace. The application never sees it: it gets tokens of its own, which read what this key may read and end when it does. You can revoke them under the workspace's grants.</p>
      <label for="claims">Visibility claims (with a management key only)</label>
      <input id="claims" name="claims" type="text" value="${escapeHtml(view.claims)}" placeholder="* (every file), or group:eng,user:ana">
      <div class="actions">
      <button type="submit" name="decision" value="allow">Allow</button>
      <button type="submit" name="decision" value="deny" class="secondary" formnovalidate>Deny</button>
      </div>
    </form>`,
  );
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
  return page(
    `${escapeHtml(title)} · agent-vfs`,
    `<h1>${escapeHtml(title)}</h1>
    <p>${escapeHtml(message)}</p>${codeLine}${hostLine}`,
  );
}
