/**
 * OAuth as a test plays it by hand (docs/oauth.md): a loopback redirect URI that records what it
 * receives, a client registered and an authorization request with PKCE, the authorization page
 * fetched and its form posted as a browser would (cookie kept), and a code redeemed.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A loopback HTTP server standing in for a native client's redirect URI. */
export interface Callback {
  /** `http://127.0.0.1:<port>`. */
  base: string;
  /** The query of each request it received, in order. */
  received: URLSearchParams[];
  close(): Promise<void>;
}

/** Starts a loopback redirect URI on port 0. */
export async function startCallback(): Promise<Callback> {
  const received: URLSearchParams[] = [];
  const server = createServer((req, res) => {
    received.push(new URL(req.url ?? '/', 'http://x').searchParams);
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end('<!doctype html><html lang="en"><title>Signed in</title><p>You can close this window.</p></html>');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The fields of a page's form, as a browser would post them. */
export function formOf(html: string): Record<string, string> {
  const fields: Record<string, string> = {};
  const unescapeHtml = (s: string): string => s.replace(/&#(\d+);/g, (_, n: string) => String.fromCharCode(Number(n)));
  for (const m of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) fields[unescapeHtml(m[1])] = unescapeHtml(m[2]);
  return fields;
}

/** A browser opening the authorization URL: the page, its HTML, and the cookie it set (`name=value`). */
export async function visit(url: string | URL): Promise<{ page: Response; html: string; cookie: string }> {
  const page = await fetch(url, { redirect: 'manual' });
  return { page, html: await page.text(), cookie: (page.headers.get('set-cookie') ?? '').split(';')[0] };
}

/** A browser posting the authorization form of the service at `base`, with `cookie` ('' sends none). */
export function postForm(base: string, fields: Record<string, string>, cookie: string): Promise<Response> {
  return fetch(`${base}/oauth/authorize`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie === '' ? {} : { cookie }) },
    body: new URLSearchParams(fields).toString(),
    redirect: 'manual',
  });
}

/** An authorization request of a freshly registered client for workspace `ws` of the service at `base`. */
export interface AuthorizationRequest {
  /** The authorization page's URL. */
  url: string;
  clientId: string;
  redirectUri: string;
  /** The PKCE verifier the code is redeemed with. */
  verifier: string;
  /** The workspace's MCP endpoint, the token's audience. */
  resource: string;
}

/** Registers a client named `clientName` (RFC 7591) and builds its authorization request (PKCE S256) for `ws`. */
export async function newAuthorizationRequest(base: string, ws: string, redirectUri: string, clientName: string): Promise<AuthorizationRequest> {
  const registered = await fetch(`${base}/oauth/register`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ client_name: clientName, redirect_uris: [redirectUri] }),
  });
  const body = (await registered.json()) as { client_id?: string };
  if (registered.status !== 201 || body.client_id === undefined) throw new Error(`registration failed: ${registered.status} ${JSON.stringify(body)}`);
  const verifier = randomBytes(32).toString('base64url');
  const resource = `${base}/v1/workspaces/${ws}/mcp`;
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: body.client_id,
    redirect_uri: redirectUri,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    state: randomBytes(8).toString('hex'),
    resource,
    scope: 'vfs:read',
  });
  return { url: `${base}/oauth/authorize?${query}`, clientId: body.client_id, redirectUri, verifier, resource };
}

/** Redeems `code` at the token endpoint; the access token, or an error naming what came back. */
export async function redeemCode(base: string, request: AuthorizationRequest, code: string): Promise<string> {
  const reply = await fetch(`${base}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({
      grant_type: 'authorization_code',
      code,
      client_id: request.clientId,
      code_verifier: request.verifier,
      redirect_uri: request.redirectUri,
      resource: request.resource,
    }).toString(),
  });
  const body = (await reply.json()) as { access_token?: string };
  if (reply.status !== 200 || body.access_token === undefined) throw new Error(`token request failed: ${reply.status} ${JSON.stringify(body)}`);
  return body.access_token;
}

/** A raw MCP ping to the endpoint `resource` with a bearer credential: its status says whether the credential is accepted. */
export async function mcpPingStatus(resource: string, credential: string): Promise<number> {
  const reply = await fetch(resource, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${credential}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
  });
  await reply.arrayBuffer();
  return reply.status;
}
