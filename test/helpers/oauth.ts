/**
 * What the OAuth tests share: an MCP client's in-memory OAuth state, a browser visiting the
 * authorization page and posting its form (cookie kept), and the loopback HTTP server standing in
 * for a native client's redirect URI.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type {
  Client,
  OAuthClientMetadata,
  OAuthClientProvider,
  OAuthDiscoveryState,
  StoredOAuthClientInformation,
  StoredOAuthTokens,
} from '@modelcontextprotocol/client';
import { expect } from 'vitest';

/** An in-memory OAuth client as a desktop MCP client keeps one; with `clientMetadataUrl` it names its metadata document instead of registering. */
export class TestProvider implements OAuthClientProvider {
  info: StoredOAuthClientInformation | undefined;
  saved: StoredOAuthTokens | undefined;
  verifier = '';
  discovery: OAuthDiscoveryState | undefined;
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
export function postForm(fields: Record<string, string>, cookie: string, base: string): Promise<Response> {
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
  const post = await postForm({ ...formOf(html), ...answers }, cookieOverride ?? cookie, new URL(url).origin);
  return { page, html, post, postHtml: await post.text() };
}

/** A loopback HTTP server standing in for a native client's redirect URI: it records each query it receives. */
export class Callback {
  private constructor(
    private readonly server: Server,
    /** http://127.0.0.1:PORT */
    readonly base: string,
    /** The queries received, in order. */
    readonly received: URLSearchParams[],
  ) {}

  static async start(): Promise<Callback> {
    const received: URLSearchParams[] = [];
    const server = createServer((req, res) => {
      received.push(new URL(req.url ?? '/', 'http://x').searchParams);
      res.end('You can close this window.');
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return new Callback(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`, received);
  }

  /** Follows a redirect to this redirect URI, as the browser would, and returns what it received. */
  async follow(location: string): Promise<URLSearchParams> {
    expect(location.startsWith(this.base)).toBe(true);
    const before = this.received.length;
    await (await fetch(location)).text();
    expect(this.received.length).toBe(before + 1);
    return this.received[before];
  }

  close(): Promise<void> {
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

/** The text of a tool's result, which must not be an error. */
export async function toolText(client: Client, name: string, args: Record<string, unknown>): Promise<string> {
  const result = (await client.callTool({ name, arguments: args })) as { content: Array<{ text: string }>; isError?: boolean };
  expect(result.isError ?? false).toBe(false);
  return result.content[0].text;
}
