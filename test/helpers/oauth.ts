/**
 * OAuth from the client's side, for test/oauth.test.ts and test/cluster.test.ts: an in-memory
 * OAuth client (what a desktop MCP client keeps), a browser that opens the authorization page
 * and posts its form as a person would, a loopback redirect URI, and one adapter per official
 * MCP client SDK and protocol era, so one scenario runs against each.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import {
  Client as Client2,
  type OAuthClientMetadata,
  type OAuthDiscoveryState,
  type StoredOAuthClientInformation,
  type StoredOAuthTokens,
  StreamableHTTPClientTransport as Transport2,
  UnauthorizedError as Unauthorized2,
} from '@modelcontextprotocol/client';
import { expect } from 'vitest';
import { UnauthorizedError as Unauthorized1 } from '@modelcontextprotocol/sdk/client/auth.js';
import { Client as Client1 } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport as Transport1 } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

/**
 * An in-memory OAuth client as a desktop MCP client keeps one. Both SDK generations take it:
 * their provider interfaces differ only in names of types of the same shape. With
 * `clientMetadataUrl` it names its Client ID Metadata Document instead of registering.
 */
export class TestProvider {
  info: StoredOAuthClientInformation | undefined;
  saved: StoredOAuthTokens | undefined;
  verifier = '';
  discovery: OAuthDiscoveryState | undefined;
  /** Where the client last sent the person, or null before it did. */
  authorizationUrl: URL | null = null;
  sentState = '';

  constructor(
    readonly redirectUrl: string,
    readonly clientMetadataUrl?: string,
  ) {}

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: 'Test <Agent> & "friends"',
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      token_endpoint_auth_method: 'none',
    };
  }
  state(): string {
    this.sentState = randomBytes(8).toString('hex');
    return this.sentState;
  }
  clientInformation(): StoredOAuthClientInformation | undefined {
    return this.info;
  }
  saveClientInformation(info: StoredOAuthClientInformation): void {
    this.info = info;
  }
  tokens(): StoredOAuthTokens | undefined {
    return this.saved;
  }
  saveTokens(tokens: StoredOAuthTokens): void {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL): void {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier;
  }
  codeVerifier(): string {
    return this.verifier;
  }
  saveDiscoveryState(state: OAuthDiscoveryState): void {
    this.discovery = state;
  }
  discoveryState(): OAuthDiscoveryState | undefined {
    return this.discovery;
  }
  /** Forgets what the server refused (a refresh token of a revoked grant, say), so the client asks the person again. */
  invalidateCredentials(scope: 'all' | 'client' | 'tokens' | 'verifier' | 'discovery'): void {
    if (scope === 'all' || scope === 'client') this.info = undefined;
    if (scope === 'all' || scope === 'tokens') this.saved = undefined;
    if (scope === 'all' || scope === 'verifier') this.verifier = '';
    if (scope === 'all' || scope === 'discovery') this.discovery = undefined;
  }
}

/** A tool call's answer: its first text block and its error flag. */
export interface ToolAnswer {
  text: string;
  isError: boolean;
}

/** One MCP client of one SDK on one endpoint, authorized through a provider. */
export interface SdkConnection {
  /** Connects; rejects with an error `unauthorized` recognizes while the person has not approved. */
  connect(): Promise<void>;
  /** Hands the client what came back to its redirect URI, as its redirect handler would. */
  finishAuth(callback: URLSearchParams): Promise<void>;
  callTool(name: string, args: Record<string, unknown>): Promise<ToolAnswer>;
  /** The protocol version the connection negotiated. */
  protocolVersion(): string | undefined;
  close(): Promise<void>;
}

/** An official MCP client SDK in one protocol era. */
export interface SdkAdapter {
  /** As the suite names it: '2.x client, modern era'. */
  name: string;
  /** The protocol version it must end up speaking. */
  protocolVersion: string;
  /** A client for `url` that authorizes through `provider`. */
  open(url: URL, provider: TestProvider): SdkConnection;
  /** Whether `error` is the SDK's "the person must authorize first". */
  unauthorized(error: unknown): boolean;
}

/** The text of a tool result of either SDK. */
function answer(result: unknown): ToolAnswer {
  const r = result as { content: Array<{ text: string }>; isError?: boolean };
  return { text: r.content[0]?.text ?? '', isError: r.isError === true };
}

/** `@modelcontextprotocol/client` (2.x): 'legacy' negotiates 2025-11-25, 'modern' pins 2026-07-28. */
function sdk2(era: 'legacy' | 'modern'): SdkAdapter {
  return {
    name: `2.x client, ${era} era`,
    protocolVersion: era === 'legacy' ? '2025-11-25' : '2026-07-28',
    unauthorized: (error) => error instanceof Unauthorized2,
    open(url, provider) {
      const transport = new Transport2(url, { authProvider: provider });
      const client = new Client2({ name: 'oauth-test', version: '1.0.0' }, era === 'modern' ? { versionNegotiation: { mode: { pin: '2026-07-28' } } } : {});
      return {
        connect: () => client.connect(transport),
        finishAuth: (callback) => transport.finishAuth(callback),
        callTool: async (name, args) => answer(await client.callTool({ name, arguments: args })),
        protocolVersion: () => client.getNegotiatedProtocolVersion(),
        close: () => client.close(),
      };
    },
  };
}

/** `@modelcontextprotocol/sdk` 1.x: it speaks up to 2025-11-25, so the legacy era only. */
const sdk1: SdkAdapter = {
  name: '1.x sdk, legacy era',
  protocolVersion: '2025-11-25',
  unauthorized: (error) => error instanceof Unauthorized1,
  open(url, provider) {
    const transport = new Transport1(url, { authProvider: provider });
    const client = new Client1({ name: 'oauth-test', version: '1.0.0' });
    return {
      connect: () => client.connect(transport),
      // 1.x takes the code alone (it does not check `iss`).
      finishAuth: (callback) => transport.finishAuth(callback.get('code') ?? ''),
      callTool: async (name, args) => answer(await client.callTool({ name, arguments: args })),
      protocolVersion: () => transport.protocolVersion,
      close: () => client.close(),
    };
  },
};

/** Every SDK and era the OAuth scenario runs with. */
export const SDKS: readonly SdkAdapter[] = [sdk2('legacy'), sdk2('modern'), sdk1];

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

/** A browser posting the authorization form to the service at `base`, with `cookie` ('' sends none). */
export function postForm(base: string, fields: Record<string, string>, cookie: string): Promise<Response> {
  return fetch(`${base}/oauth/authorize`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie === '' ? {} : { cookie }) },
    body: new URLSearchParams(fields).toString(),
    redirect: 'manual',
  });
}

/** A browser's visit: GET the authorization URL, then post its form (to the same service) with `answers`, keeping the cookie. */
export async function approve(
  url: string | URL,
  answers: Record<string, string>,
  cookieOverride?: string,
): Promise<{ page: Response; html: string; post: Response; postHtml: string }> {
  const { page, html, cookie } = await visit(url);
  expect(page.status, html).toBe(200);
  const post = await postForm(new URL(url).origin, { ...formOf(html), ...answers }, cookieOverride ?? cookie);
  return { page, html, post, postHtml: await post.text() };
}

/** A PKCE verifier and its S256 challenge. */
export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** POSTs `fields` as a form to `url` (the token and revocation endpoints): the status and the JSON answer. */
export async function postFields(url: string, fields: Record<string, string>): Promise<{ status: number; json: Record<string, string> }> {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
  const text = await r.text();
  return { status: r.status, json: text === '' ? {} : JSON.parse(text) };
}

/** A loopback HTTP server standing in for a native client's redirect URI: it records each query it receives. */
export class RedirectTarget {
  readonly received: URLSearchParams[] = [];
  private readonly server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    // A browser landing here asks for the site's icon on its own: no redirect brought that.
    if (url.pathname !== '/favicon.ico') this.received.push(url.searchParams);
    res.setHeader('content-type', 'text/html; charset=utf-8');
    res.end('<!doctype html><html lang="en"><title>Signed in</title><p>You can close this window.</p></html>');
  });

  /** Listens on a free loopback port. */
  static async start(): Promise<RedirectTarget> {
    const target = new RedirectTarget();
    await new Promise<void>((resolve) => target.server.listen(0, '127.0.0.1', resolve));
    return target;
  }

  /** `http://127.0.0.1:PORT` */
  get base(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  /** Follows a redirect here, as the browser would, and returns what arrived; throws if it points elsewhere. */
  async follow(location: string | null): Promise<URLSearchParams> {
    if (location === null || !location.startsWith(this.base)) throw new Error(`not a redirect to ${this.base}: ${location}`);
    const before = this.received.length;
    await (await fetch(location)).text();
    if (this.received.length !== before + 1) throw new Error(`${location} did not arrive`);
    return this.received[before];
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** The text of a read tool's call through a connected 2.x client, which must succeed. */
export async function toolText(client: Client2, name: string, args: Record<string, unknown>): Promise<string> {
  const result = (await client.callTool({ name, arguments: args })) as { content: Array<{ text: string }>; isError?: boolean };
  expect(result.isError ?? false).toBe(false);
  return result.content[0].text;
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
