/**
 * The company's own OpenID provider (VFS_OAUTH_ISSUER, docs/oauth.md): a real one (the npm
 * oidc-provider) on loopback issues JWT access tokens for a workspace's MCP endpoint (a resource
 * indicator, client credentials), with groups and workspaces claims. The official MCP client
 * reads with them, seeing what the groups allow; the same tokens are refused everywhere else,
 * and expired, wrong-audience, wrong-issuer, `alg: none` and HS256-with-the-public-key tokens
 * are refused on the endpoint; a rotated key is taken without a restart; a provider down at
 * start does not stop the service; configuration mistakes are named.
 */
import type { webcrypto } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { exportJWK, exportSPKI, generateKeyPair, type JWK, SignJWT } from 'jose';
import Provider from 'oidc-provider';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../service/config.js';
import { put, settled, startTestService, type TestService } from './helpers/service.js';
import { toolText } from './helpers/oauth.js';

/** The agents the provider knows (client credentials: `sub` is the client's id), and the claims it puts in their tokens. */
const AGENTS: Record<string, Record<string, unknown>> = {
  'eng-agent': { groups: ['eng', 'has space', '*'], workspaces: ['docs'] },
  'plain-agent': { workspaces: 'docs' },
  'other-agent': { groups: ['eng'], workspaces: ['other', 'secret'] },
};

/** A signing key of the provider, with its private half for the tests' forgeries. */
interface SigningKey {
  alg: 'ES256' | 'EdDSA' | 'RS256';
  kid: string;
  jwk: JWK;
  privateKey: webcrypto.CryptoKey;
  publicKey: webcrypto.CryptoKey;
}

async function signingKey(alg: SigningKey['alg'], kid: string): Promise<SigningKey> {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true });
  return { alg, kid, jwk: { ...(await exportJWK(privateKey)), kid, alg, use: 'sig' }, privateKey, publicKey };
}

/** The company's OpenID provider, on 127.0.0.1 at `port` (0: a free one), signing with `key`. */
async function startProvider(port: number, key: SigningKey): Promise<{ issuer: string; port: number; close: () => Promise<void> }> {
  const listener: Server = createServer();
  await new Promise<void>((resolve) => listener.listen(port, '127.0.0.1', resolve));
  const bound = (listener.address() as AddressInfo).port;
  const issuer = `http://127.0.0.1:${bound}`;
  const provider = new Provider(issuer, {
    jwks: { keys: [key.jwk] },
    clients: Object.keys(AGENTS).map((id) => ({
      client_id: id,
      client_secret: `${id}-secret`,
      grant_types: ['client_credentials'],
      redirect_uris: [],
      response_types: [],
      scope: 'vfs:read',
      id_token_signed_response_alg: key.alg,
    })),
    scopes: ['vfs:read'],
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        // Any resource asked for: the audience is what the client names, as a provider serving
        // every workspace's endpoint would be configured.
        getResourceServerInfo: (_ctx, resource) => ({
          scope: 'vfs:read',
          audience: resource,
          accessTokenFormat: 'jwt',
          accessTokenTTL: 300,
          jwt: { sign: { alg: key.alg } },
        }),
      },
    },
    extraTokenClaims: (_ctx, token) => AGENTS[token.clientId ?? ''] ?? {},
  });
  listener.on('request', provider.callback());
  return {
    issuer,
    port: bound,
    close: () =>
      new Promise<void>((resolve) => {
        listener.closeAllConnections();
        listener.close(() => resolve());
      }),
  };
}

/** A token from the provider at `issuer` for `agent`, for the resource `resource`. */
async function issue(issuer: string, agent: string, resource: string): Promise<string> {
  const res = await fetch(`${issuer}/token`, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      authorization: `Basic ${Buffer.from(`${agent}:${agent}-secret`).toString('base64')}`,
    },
    body: new URLSearchParams({ grant_type: 'client_credentials', resource, scope: 'vfs:read' }),
  });
  const body = (await res.json()) as { access_token?: string };
  expect(res.status, JSON.stringify(body)).toBe(200);
  return body.access_token!;
}

/** A raw MCP request (ping) with `credential`, and its JSON-RPC error message if any. */
async function mcpPing(url: string, credential: string): Promise<{ status: number; challenge: string | null; message: string }> {
  const res = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${credential}` },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
  });
  const body = (await res.json()) as { error?: { message: string } };
  return { status: res.status, challenge: res.headers.get('www-authenticate'), message: body.error?.message ?? '' };
}

/** A connected official MCP client sending `token` as its bearer credential. */
async function connect(url: string, token: string): Promise<Client> {
  const client = new Client({ name: 'issuer-test', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { authorization: `Bearer ${token}` } } }));
  return client;
}

/** The compact form of a JWS with `header` and `payload` and the given signature part. */
function handMade(header: Record<string, unknown>, payload: Record<string, unknown>, signature: string): string {
  const part = (value: unknown): string => Buffer.from(JSON.stringify(value)).toString('base64url');
  return `${part(header)}.${part(payload)}.${signature}`;
}

describe('the company issuer beside the built-in server', () => {
  let t: TestService;
  let idp: Awaited<ReturnType<typeof startProvider>>;
  let first: SigningKey;
  const mcpUrl = (ws: string): string => `${t.url}/v1/workspaces/${ws}/mcp`;

  beforeAll(async () => {
    first = await signingKey('ES256', 'k1');
    idp = await startProvider(0, first);
    t = await startTestService({ VFS_OAUTH_ISSUER: idp.issuer, VFS_OAUTH_ISSUER_ACCOUNT: 'default' });
    for (const name of ['docs', 'other']) expect((await t.call('POST', '/v1/workspaces', { body: { name } })).status).toBe(201);
    expect((await put(t, 'docs', 'README.md', 'hello everyone\n')).status).toBe(202);
    expect((await put(t, 'docs', 'eng/plan.md', 'hello engineering\n', {}, '?visibility=group:eng')).status).toBe(202);
    expect((await put(t, 'docs', 'notes/plain.md', 'hello plain agent\n', {}, '?visibility=user:plain-agent')).status).toBe(202);
    await settled(t, 'docs');
    // Another account with a workspace the issuer's tokens name: the issuer is bound to `default`.
    const otherKey = await t.newAccount('elsewhere');
    expect((await t.call('POST', '/v1/workspaces', { key: otherKey, body: { name: 'secret' } })).status).toBe(201);
  });
  afterAll(async () => {
    await t?.stop();
    await idp?.close();
  });

  it('names the issuer first in the protected-resource metadata, then the built-in server', async () => {
    const r = await t.call('GET', '/.well-known/oauth-protected-resource/v1/workspaces/docs/mcp', { key: null });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ resource: mcpUrl('docs'), authorization_servers: [idp.issuer, t.url] });
  });

  it('reads with the official MCP client, seeing what its groups and subject allow; audited with the subject', async () => {
    const eng = await connect(mcpUrl('docs'), await issue(idp.issuer, 'eng-agent', mcpUrl('docs')));
    const plain = await connect(mcpUrl('docs'), await issue(idp.issuer, 'plain-agent', mcpUrl('docs')));
    try {
      // group:eng sees eng/plan.md; "has space" and "*" give no claim (never every file).
      expect((await toolText(eng, 'grep', { pattern: 'hello' })).trim().split('\n').sort()).toEqual(['/README.md', '/eng/plan.md']);
      expect(await toolText(eng, 'cat', { path: '/eng/plan.md' })).toBe('     1\thello engineering\n');
      // No groups claim: user:plain-agent only.
      expect((await toolText(plain, 'grep', { pattern: 'hello' })).trim().split('\n').sort()).toEqual(['/README.md', '/notes/plain.md']);
      const hidden = (await plain.callTool({ name: 'cat', arguments: { path: '/eng/plan.md' } })) as { isError?: boolean; content: Array<{ text: string }> };
      expect(hidden.isError).toBe(true);
      expect(hidden.content[0].text).toMatch(/no such file/);
    } finally {
      await eng.close();
      await plain.close();
    }
    const audit = await t.call('GET', '/v1/workspaces/docs/audit?limit=1000');
    const mine = audit.json.events.filter((e: { actorType: string }) => e.actorType === 'oidc_subject');
    expect(new Set(mine.map((e: { actorId: string }) => e.actorId))).toEqual(new Set(['eng-agent', 'plain-agent']));
    expect(mine.length).toBeGreaterThanOrEqual(4);
  });

  it('refuses the same token on the HTTP read tools, the management plane and whoami (401)', async () => {
    const token = await issue(idp.issuer, 'eng-agent', mcpUrl('docs'));
    expect((await mcpPing(mcpUrl('docs'), token)).status).toBe(200);
    for (const [method, path] of [
      ['GET', '/v1/workspaces/docs/grep?pattern=hello'],
      ['GET', '/v1/workspaces/docs/cat?path=/README.md'],
      ['GET', '/v1/workspaces'],
      ['GET', '/v1/workspaces/docs/files'],
      ['POST', '/v1/workspaces/docs/tokens'],
      ['GET', '/v1/whoami'],
    ]) {
      const r = await t.call(method, path, { key: token });
      expect([path, r.status, r.text]).toEqual([path, 401, expect.stringMatching(/accepted only on its workspace's MCP endpoint/)]);
    }
  });

  it('refuses forged and misdirected tokens on the MCP endpoint with 401 invalid_token, naming why', async () => {
    const now = Math.floor(Date.now() / 1000);
    const claims = { sub: 'eng-agent', workspaces: ['docs'], groups: ['eng'] };
    const signed = (payload: Record<string, unknown>, key: webcrypto.CryptoKey | Uint8Array = first.privateKey, alg: string = first.alg) =>
      new SignJWT(payload).setProtectedHeader({ alg, kid: first.kid, typ: 'at+jwt' }).sign(key);
    const publicPem = await exportSPKI(first.publicKey);
    const cases: Array<[string, string, RegExp]> = [
      ['expired', await signed({ ...claims, iss: idp.issuer, aud: mcpUrl('docs'), iat: now - 600, exp: now - 300 }), /token expired/],
      ['not yet valid', await signed({ ...claims, iss: idp.issuer, aud: mcpUrl('docs'), nbf: now + 600, exp: now + 900 }), /not valid yet/],
      ['another workspace as audience', await issue(idp.issuer, 'eng-agent', mcpUrl('other')), /issued for another resource/],
      ['another issuer', await signed({ ...claims, iss: 'http://127.0.0.1:1/evil', aud: mcpUrl('docs'), exp: now + 300 }), /another issuer/],
      ['alg none', handMade({ alg: 'none', typ: 'at+jwt' }, { ...claims, iss: idp.issuer, aud: mcpUrl('docs'), exp: now + 300 }, ''), /algorithm not accepted/],
      [
        'HS256 with the public key as the secret',
        await signed({ ...claims, iss: idp.issuer, aud: mcpUrl('docs'), exp: now + 300 }, new TextEncoder().encode(publicPem), 'HS256'),
        /algorithm not accepted/,
      ],
      [
        'a signature of another key',
        await signed({ ...claims, iss: idp.issuer, aud: mcpUrl('docs'), exp: now + 300 }, (await signingKey('ES256', 'x')).privateKey),
        /signature does not verify/,
      ],
      ['no workspace named by its claim', await issue(idp.issuer, 'other-agent', mcpUrl('docs')), /workspaces claim does not name workspace docs/],
    ];
    for (const [what, token, reason] of cases) {
      const r = await mcpPing(mcpUrl('docs'), token);
      expect([what, r.status, r.message]).toEqual([what, 401, expect.stringMatching(reason)]);
      expect(r.challenge).toContain('error="invalid_token"');
      expect(r.challenge).toContain(`resource_metadata="${t.url}/.well-known/oauth-protected-resource/v1/workspaces/docs/mcp"`);
    }
  });

  it("refuses a workspace of another account, and a token for one workspace on another's endpoint", async () => {
    const secret = await mcpPing(`${t.url}/v1/workspaces/secret/mcp`, await issue(idp.issuer, 'other-agent', `${t.url}/v1/workspaces/secret/mcp`));
    expect([secret.status, secret.message]).toEqual([401, 'account default has no workspace secret']);
    const other = await issue(idp.issuer, 'other-agent', mcpUrl('other'));
    expect((await mcpPing(mcpUrl('other'), other)).status).toBe(200);
    expect((await mcpPing(mcpUrl('docs'), other)).status).toBe(401);
  });

  it('takes a rotated key without a restart', async () => {
    // The service has fetched the key set (the tests above); the provider now signs with a new key only.
    await idp.close();
    const rotated = await signingKey('EdDSA', 'k2');
    idp = await startProvider(idp.port, rotated);
    const token = await issue(idp.issuer, 'eng-agent', mcpUrl('docs'));
    // A kid the cached key set lacks fetches it again, at most every 5 s.
    const deadline = Date.now() + 15_000;
    let answer = await mcpPing(mcpUrl('docs'), token);
    while (answer.status !== 200 && Date.now() < deadline) {
      expect(answer.message).toMatch(/no key of the issuer's key set matches/);
      await new Promise((resolve) => setTimeout(resolve, 500));
      answer = await mcpPing(mcpUrl('docs'), token);
    }
    expect(answer).toMatchObject({ status: 200 });
  });
});

describe('the company issuer alone (VFS_OAUTH=off), down at start', () => {
  let t: TestService;
  let idp: Awaited<ReturnType<typeof startProvider>> | undefined;
  let port: number;

  beforeAll(async () => {
    // A port nothing listens on yet: the provider starts there later.
    const probe = createServer();
    await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
    port = (probe.address() as AddressInfo).port;
    await new Promise((resolve) => probe.close(resolve));
    t = await startTestService({ VFS_OAUTH: 'off', VFS_OAUTH_ISSUER: `http://127.0.0.1:${port}`, VFS_OAUTH_ISSUER_ACCOUNT: 'default' });
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'docs' } })).status).toBe(201);
  });
  afterAll(async () => {
    await t?.stop();
    await idp?.close();
  });

  it('starts; answers 503 while the provider is down, and takes its tokens once it is up', async () => {
    const url = `${t.url}/v1/workspaces/docs/mcp`;
    const key = await signingKey('RS256', 'r1');
    const now = Math.floor(Date.now() / 1000);
    const early = await new SignJWT({ sub: 'eng-agent', workspaces: ['docs'], iss: `http://127.0.0.1:${port}`, aud: url, exp: now + 300 })
      .setProtectedHeader({ alg: 'RS256', kid: 'r1' })
      .sign(key.privateKey);
    const down = await mcpPing(url, early);
    expect([down.status, down.message]).toEqual([503, expect.stringMatching(/OpenID provider .* is unavailable; retry/)]);
    idp = await startProvider(port, key);
    const token = await issue(idp.issuer, 'eng-agent', url);
    // Discovery is tried again at a request, at most every 5 s.
    const deadline = Date.now() + 15_000;
    let answer = await mcpPing(url, token);
    while (answer.status === 503 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      answer = await mcpPing(url, token);
    }
    expect(answer.status).toBe(200);
  });

  it('serves the metadata naming the issuer only, and no built-in server', async () => {
    const r = await t.call('GET', '/.well-known/oauth-protected-resource/v1/workspaces/docs/mcp', { key: null });
    expect(r.json.authorization_servers).toEqual([`http://127.0.0.1:${port}`]);
    for (const path of ['/.well-known/oauth-authorization-server', '/oauth/authorize']) expect((await t.call('GET', path, { key: null })).status).toBe(404);
    const challenge = await t.call('POST', '/v1/workspaces/docs/mcp', { key: null, body: { jsonrpc: '2.0', id: 1, method: 'ping' } });
    expect(challenge.headers.get('www-authenticate')).toContain('resource_metadata=');
  });
});

describe('VFS_OAUTH_ISSUER settings', () => {
  const config = (env: Record<string, string>) => loadConfig({ DATA_DIR: '/tmp/vfs-config-check', HOST: '127.0.0.1', ...env });

  it('takes an https issuer, or http on loopback, with its account; names the variable otherwise', () => {
    const ok = config({ VFS_OAUTH_ISSUER: 'https://login.example.com/realms/acme', VFS_OAUTH_ISSUER_ACCOUNT: 'acme' });
    expect(ok.issuer).toEqual({ url: 'https://login.example.com/realms/acme', account: 'acme', workspacesClaim: 'workspaces', groupsClaim: 'groups' });
    expect(config({ VFS_OAUTH_ISSUER: 'http://localhost:9000', VFS_OAUTH_ISSUER_ACCOUNT: 'a' }).issuer?.url).toBe('http://localhost:9000');
    expect(config({}).issuer).toBeNull();
    const bad: Array<[Record<string, string>, RegExp]> = [
      [{ VFS_OAUTH_ISSUER: 'http://login.example.com', VFS_OAUTH_ISSUER_ACCOUNT: 'a' }, /VFS_OAUTH_ISSUER: must be https/],
      [{ VFS_OAUTH_ISSUER: 'https://login.example.com' }, /VFS_OAUTH_ISSUER_ACCOUNT: VFS_OAUTH_ISSUER needs VFS_OAUTH_ISSUER_ACCOUNT/],
      [{ VFS_OAUTH_ISSUER: 'https://login.example.com?x=1', VFS_OAUTH_ISSUER_ACCOUNT: 'a' }, /VFS_OAUTH_ISSUER: an http:\/\/ or https:\/\/ URL without query/],
      [
        { VFS_OAUTH_ISSUER: 'https://login.example.com', VFS_OAUTH_ISSUER_ACCOUNT: 'a', VFS_OAUTH_ISSUER_GROUPS_CLAIM: 'my groups' },
        /VFS_OAUTH_ISSUER_GROUPS_CLAIM/,
      ],
      [
        { HOST: '0.0.0.0', VFS_OAUTH_ISSUER: 'https://login.example.com', VFS_OAUTH_ISSUER_ACCOUNT: 'a' },
        /VFS_PUBLIC_URL: VFS_OAUTH_ISSUER needs VFS_PUBLIC_URL/,
      ],
    ];
    for (const [env, message] of bad) expect(() => config(env)).toThrow(message);
  });

  it('refuses to start with an account that does not exist, naming it', async () => {
    await expect(startTestService({ VFS_OAUTH_ISSUER: 'https://login.example.com', VFS_OAUTH_ISSUER_ACCOUNT: 'nobody' })).rejects.toThrow(
      /VFS_OAUTH_ISSUER_ACCOUNT: no account is named "nobody"/,
    );
  });
});
