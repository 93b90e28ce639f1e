/**
 * OAuth for MCP clients (docs/oauth.md): each official client SDK, in each protocol era it
 * speaks, knowing only the endpoint's URL, discovers the metadata, registers, sends "the person"
 * to the authorization page (fetched and posted here as a browser would, cookie kept), comes back
 * to its loopback redirect URI, and calls the tools; then refresh, denial, a wrong key and
 * revocation mid-session. Then the hostile cases, each refused with the RFCs' error code, and
 * VFS_OAUTH=off.
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueManagementKey, revokeManagementKey } from '../db/accounts.js';
import { loadConfig } from '../service/config.js';
import { approve, formOf, postForm as postFormTo, RedirectTarget, SDKS, type SdkAdapter, type SdkConnection, TestProvider, visit } from './helpers/oauth.js';
import { put, type Reply, settled, startTestService, type TestService } from './helpers/service.js';

let t: TestService;
/** The native clients' loopback redirect URI. */
let callback: RedirectTarget;
let callbackBase: string;

beforeAll(async () => {
  // No credential cache: a token aged in the database below is seen as expired at its next use.
  t = await startTestService({ VFS_AUTH_CACHE_SECONDS: '0' });
  for (const name of ['docs', 'other']) expect((await t.call('POST', '/v1/workspaces', { body: { name } })).status).toBe(201);
  expect((await put(t, 'docs', 'README.md', '# Docs\nhello from oauth\n')).status).toBe(202);
  expect((await put(t, 'docs', 'eng/plan.md', 'hello engineering\n', {}, '?visibility=group:eng')).status).toBe(202);
  expect((await put(t, 'other', 'x.md', 'hello other\n')).status).toBe(202);
  await settled(t, 'docs');
  await settled(t, 'other');
  callback = await RedirectTarget.start();
  callbackBase = callback.base;
});
afterAll(async () => {
  await callback?.close();
  await t?.stop();
});

const mcpUrl = (ws: string): string => `${t.url}/v1/workspaces/${ws}/mcp`;

/** A browser posting the authorization form of this file's service. */
const postForm = (fields: Record<string, string>, cookie: string): Promise<Response> => postFormTo(t.url, fields, cookie);

/** Follows a redirect to the loopback redirect URI, as the browser would, and returns what it received. */
function followToCallback(location: string | null): Promise<URLSearchParams> {
  return callback.follow(location);
}

/** A client of `sdk` that has tried to connect to `ws` and been sent to the authorization page. */
async function sentToPage(ws: string, sdk: SdkAdapter): Promise<{ provider: TestProvider; first: SdkConnection }> {
  const provider = new TestProvider(`${callbackBase}/callback`);
  const first = sdk.open(new URL(mcpUrl(ws)), provider);
  const refused = await first.connect().then(
    () => null,
    (error: unknown) => error,
  );
  expect(sdk.unauthorized(refused), String(refused)).toBe(true);
  expect(provider.authorizationUrl).not.toBeNull();
  return { provider, first };
}

/** The person's approval came back to `first`: it finishes, and a new connection of the same client connects. */
async function comeBack(ws: string, sdk: SdkAdapter, provider: TestProvider, first: SdkConnection, post: Response): Promise<SdkConnection> {
  expect(post.status).toBe(303);
  const params = await followToCallback(post.headers.get('location'));
  expect(params.get('state')).toBe(provider.sentState);
  expect(params.get('iss')).toBe(t.url);
  await first.finishAuth(params);
  const client = sdk.open(new URL(mcpUrl(ws)), provider);
  await client.connect();
  return client;
}

/** A client of `sdk` (by default the 2.x client in the legacy era) through the whole flow with `key`. */
async function connectByOAuth(
  ws: string,
  key: string,
  extra: Record<string, string> = {},
  sdk: SdkAdapter = SDKS[0],
): Promise<{ provider: TestProvider; client: SdkConnection }> {
  const { provider, first } = await sentToPage(ws, sdk);
  const { post } = await approve(provider.authorizationUrl!, { key, decision: 'allow', ...extra });
  return { provider, client: await comeBack(ws, sdk, provider, first, post) };
}

/** The text of a successful tool call. */
async function toolText(client: SdkConnection, name: string, args: Record<string, unknown>): Promise<string> {
  const { text, isError } = await client.callTool(name, args);
  expect(isError, text).toBe(false);
  return text;
}

/** A raw MCP call with a bearer credential. */
function mcpPing(ws: string, credential: string | null): Promise<Response> {
  return fetch(mcpUrl(ws), {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      ...(credential === null ? {} : { authorization: `Bearer ${credential}` }),
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
  });
}

async function grantsOf(ws: string, query = ''): Promise<Reply> {
  const r = await t.call('GET', `/v1/workspaces/${ws}/grants${query}`);
  expect(r.status).toBe(200);
  return r;
}

/** A grant as the management plane lists it. */
interface ListedGrant {
  id: string;
  clientId: string;
  clientName: string | null;
  claims: string[];
  approvedBy: { kind: string; id: string };
  redirectUri: string;
  createdAt: string;
  expiresAt: string | null;
  lastIssuedAt: string;
}

/** The live grant of a registered client, if any. */
async function grantOfClient(ws: string, clientId: string): Promise<ListedGrant | undefined> {
  return (await grantsOf(ws)).json.grants.find((g: ListedGrant) => g.clientId === clientId);
}

/** Ages every access token of a grant past its expiry, as time would. */
async function expireAccessTokens(grantId: string): Promise<void> {
  const su = await t.superuser();
  try {
    await su.query("UPDATE tokens SET expires_at = now() - interval '1 second' WHERE grant_id = $1", [grantId]);
  } finally {
    await su.end();
  }
}

describe('discovery', () => {
  it('a 401 from the endpoint names the resource metadata and the scope, with invalid_token once a credential was sent', async () => {
    const bare = await mcpPing('docs', null);
    expect(bare.status).toBe(401);
    expect(bare.headers.get('www-authenticate')).toBe(
      `Bearer resource_metadata="${t.url}/.well-known/oauth-protected-resource/v1/workspaces/docs/mcp", scope="vfs:read"`,
    );
    const wrong = await mcpPing('docs', 'svc_at_nonsense');
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toMatch(/^Bearer resource_metadata="[^"]+", scope="vfs:read", error="invalid_token"$/);
    // Static credentials work as before.
    expect((await mcpPing('docs', t.key)).status).toBe(200);
  });

  it('describes any valid workspace name (existing or not) as a protected resource, and 404s an invalid one', async () => {
    for (const ws of ['docs', 'no-such-workspace']) {
      const r = await t.call('GET', `/.well-known/oauth-protected-resource/v1/workspaces/${ws}/mcp`, { key: null });
      expect(r.status).toBe(200);
      expect(r.headers.get('cache-control')).toMatch(/max-age=\d+/);
      expect(r.json).toEqual({
        resource: `${t.url}/v1/workspaces/${ws}/mcp`,
        authorization_servers: [t.url],
        scopes_supported: ['vfs:read'],
        bearer_methods_supported: ['header'],
        resource_name: `agent-vfs workspace ${ws}`,
      });
    }
    expect((await t.call('GET', '/.well-known/oauth-protected-resource/v1/workspaces/Bad_Name/mcp', { key: null })).status).toBe(404);
  });

  it('serves the authorization server metadata (RFC 8414), and no OpenID configuration', async () => {
    const r = await t.call('GET', '/.well-known/oauth-authorization-server', { key: null });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({
      issuer: t.url,
      authorization_endpoint: `${t.url}/oauth/authorize`,
      token_endpoint: `${t.url}/oauth/token`,
      registration_endpoint: `${t.url}/oauth/register`,
      revocation_endpoint: `${t.url}/oauth/revoke`,
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none'],
      scopes_supported: ['vfs:read'],
    });
    expect((await t.call('GET', '/.well-known/openid-configuration', { key: null })).status).toBe(404);
  });
});

for (const sdk of SDKS) {
  describe(`end to end: ${sdk.name}`, () => {
    let provider: TestProvider;
    let client: SdkConnection;
    let grantId: string;
    beforeAll(async () => {
      ({ provider, client } = await connectByOAuth('docs', t.key, {}, sdk));
      grantId = (await grantOfClient('docs', provider.info!.client_id))!.id;
    });
    afterAll(async () => client?.close());

    it('knowing only the URL it got a 401, found the metadata, registered and came back with a token for this endpoint', () => {
      expect(client.protocolVersion()).toBe(sdk.protocolVersion);
      expect(provider.discovery).toMatchObject({
        resourceMetadataUrl: `${t.url}/.well-known/oauth-protected-resource/v1/workspaces/docs/mcp`,
        authorizationServerUrl: t.url,
      });
      expect(provider.info!.client_id).toMatch(/^vfs_client_/); // registered dynamically
      const asked = provider.authorizationUrl!.searchParams;
      expect(Object.fromEntries(['resource', 'code_challenge_method', 'scope'].map((n) => [n, asked.get(n)]))).toEqual({
        resource: mcpUrl('docs'),
        code_challenge_method: 'S256',
        scope: 'vfs:read',
      });
      expect(provider.saved!.access_token).toMatch(/^svc_at_/);
      expect(provider.saved!.refresh_token).toMatch(/^svc_rt_/);
    });

    it('reads through grep and cat with the token it got, audited with the grant as the actor', async () => {
      expect(await toolText(client, 'grep', { pattern: 'hello', output_mode: 'content' })).toContain('/README.md:2:hello from oauth');
      // Approved by a management key with no claims chosen: every file.
      expect(await toolText(client, 'grep', { pattern: 'engineering' })).toContain('/eng/plan.md');
      expect(await toolText(client, 'cat', { path: '/README.md' })).toBe('     1\t# Docs\n     2\thello from oauth\n');
      const audit = await t.call('GET', '/v1/workspaces/docs/audit?limit=1000');
      const mine = audit.json.events.filter((e: { actorId: string }) => e.actorId === grantId);
      expect(mine.map((e: { actorType: string; tool: string }) => [e.actorType, e.tool])).toEqual(
        expect.arrayContaining([
          ['oauth_grant', 'grep'],
          ['oauth_grant', 'cat'],
        ]),
      );
    });

    it('a denial goes back to the client as access_denied: it gets no token and still cannot connect', async () => {
      const { provider: denied } = await sentToPage('docs', sdk);
      const { post } = await approve(denied.authorizationUrl!, { key: '', decision: 'deny' });
      expect(post.status).toBe(303);
      const params = await followToCallback(post.headers.get('location'));
      expect([params.get('error'), params.get('state'), params.get('code')]).toEqual(['access_denied', denied.sentState, null]);
      expect(denied.saved).toBeUndefined();
      await expect(sdk.open(new URL(mcpUrl('docs')), denied).connect()).rejects.toSatisfy(sdk.unauthorized);
      expect(await grantOfClient('docs', denied.info!.client_id)).toBeUndefined();
    });

    it('a wrong key shows the page again and issues nothing; the right key on that page lets the client in; revoking its grant mid-session fails its next call', async () => {
      const { provider: other, first } = await sentToPage('docs', sdk);
      const { post: wrong, postHtml } = await approve(other.authorizationUrl!, { key: `svc_sk_${'A'.repeat(49)}`, decision: 'allow' });
      expect([wrong.status, wrong.headers.get('location')]).toEqual([401, null]);
      expect(postHtml).toContain('cannot give access to workspace docs');
      expect(await grantOfClient('docs', other.info!.client_id)).toBeUndefined();
      // The person pastes the right key into the page they were shown again.
      const cookie = (wrong.headers.get('set-cookie') ?? '').split(';')[0];
      const right = await postForm({ ...formOf(postHtml), key: t.key, decision: 'allow', claims: 'group:eng' }, cookie);
      const second = await comeBack('docs', sdk, other, first, right);
      try {
        expect(await toolText(second, 'grep', { pattern: 'engineering' })).toBe('/eng/plan.md\n');
        const grant = (await grantOfClient('docs', other.info!.client_id))!;
        expect(grant.claims).toEqual(['group:eng']);
        expect((await t.call('DELETE', `/v1/grants/${grant.id}`)).status).toBe(204);
        expect((await t.call('DELETE', `/v1/grants/${grant.id}`)).status).toBe(204); // idempotent
        expect((await mcpPing('docs', other.saved!.access_token)).status).toBe(401);
        // Its refresh is refused too, so it sends the person to the page again: the call fails.
        const asked = other.authorizationUrl;
        await expect(second.callTool('ls', {})).rejects.toSatisfy(sdk.unauthorized);
        expect(other.authorizationUrl).not.toBe(asked);
      } finally {
        await second.close().catch(() => {});
      }
    });

    it('refreshes once the access token expires, rotating the refresh token; the old one used again ends the grant', async () => {
      const before = provider.saved!;
      await expireAccessTokens(grantId);
      expect((await mcpPing('docs', before.access_token)).status).toBe(401);
      expect(await toolText(client, 'ls', {})).toContain('README.md');
      const after = provider.saved!;
      expect(after.access_token).not.toBe(before.access_token);
      expect(after.refresh_token).toMatch(/^svc_rt_/);
      expect(after.refresh_token).not.toBe(before.refresh_token);
      // A stolen copy of the old refresh token, used now: refused, and the grant is gone.
      const replay = await tokenRequest({ grant_type: 'refresh_token', refresh_token: before.refresh_token!, client_id: provider.info!.client_id });
      expect(replay.status).toBe(400);
      expect(replay.json).toMatchObject({ error: 'invalid_grant' });
      expect((await mcpPing('docs', after.access_token)).status).toBe(401);
      expect(await grantOfClient('docs', provider.info!.client_id)).toBeUndefined();
    });
  });
}

describe('the grant and the page', () => {
  let provider: TestProvider;
  let client: SdkConnection;
  beforeAll(async () => {
    ({ provider, client } = await connectByOAuth('docs', t.key));
  });
  afterAll(async () => client?.close());

  it('lists the grant with its client, claims and approver; the page showed the client name escaped', async () => {
    const grant = await grantOfClient('docs', provider.info!.client_id);
    const keys = await t.service.db.owner.query('SELECT id FROM management_keys');
    expect(grant).toMatchObject({
      clientId: provider.info!.client_id,
      clientName: 'Test <Agent> & "friends"',
      claims: ['*'],
      redirectUri: provider.redirectUrl,
    });
    expect([grant!.expiresAt, Date.parse(grant!.lastIssuedAt) >= Date.parse(grant!.createdAt)]).toEqual([null, true]);
    expect(grant!.approvedBy.kind).toBe('management_key');
    expect(keys.rows.map((r) => r.id)).toContain(grant!.approvedBy.id);
    const page = await fetch(provider.authorizationUrl!, { redirect: 'manual' });
    const html = await page.text();
    expect(html).toContain('<bdi>Test &#60;Agent&#62; &#38; &#34;friends&#34;</bdi>');
    expect(html).toContain(`<strong id="redirect-host">${new URL(callbackBase).host}</strong>`);
    expect(html).not.toContain('<Agent>');
    expect(html).not.toMatch(/<script|style=/);
    expect(page.headers.get('content-security-policy')).toMatch(/default-src 'none'.*form-action 'self' http:\/\/127\.0\.0\.1:\*.*frame-ancestors 'none'/);
    expect(page.headers.get('referrer-policy')).toBe('no-referrer');
    expect(page.headers.get('set-cookie')).toMatch(/^vfs_oauth=[\w-]+; Path=\/oauth\/authorize; HttpOnly; SameSite=Strict/);
    expect(html).toMatch(/<input id="key" name="key" type="password"/);
    expect(html).toMatch(/name="decision" value="allow"[\s\S]*name="decision" value="deny"/);
  });
});

describe('the person decides', () => {
  it('a denial goes back to the client as access_denied with the state and the issuer', async () => {
    const { url } = await authorizationRequest('docs');
    const { post } = await approve(url, { key: '', decision: 'deny' });
    expect(post.status).toBe(303);
    const params = await followToCallback(post.headers.get('location')!);
    expect(params.get('error')).toBe('access_denied');
    expect(params.get('state')).toBe('st-1');
    expect(params.get('iss')).toBe(t.url);
    expect(params.get('code')).toBeNull();
  });

  it('a wrong key shows the page again (401) and issues nothing: unknown, another account, a token of another workspace', async () => {
    const otherAccount = await t.newAccount('oauth-other');
    const otherToken = (await t.call('POST', '/v1/workspaces/other/tokens', { body: {} })).json.token;
    const grantsBefore = (await grantsOf('docs')).json.grants.length;
    for (const key of [`svc_sk_${'A'.repeat(49)}`, otherAccount, otherToken]) {
      const { url } = await authorizationRequest('docs');
      const { post, postHtml } = await approve(url, { key, decision: 'allow' });
      expect(post.status).toBe(401);
      expect(post.headers.get('location')).toBeNull();
      expect(postHtml).toContain('cannot give access to workspace docs');
      expect(postHtml).toMatch(/name="csrf" value="[^"]+"/);
    }
    expect((await grantsOf('docs')).json.grants.length).toBe(grantsBefore);
  });

  it('a scoped token approves with its own claims, and revoking it revokes the grant', async () => {
    const minted = (await t.call('POST', '/v1/workspaces/docs/tokens', { body: { claims: ['group:ops'] } })).json;
    const { provider, client } = await connectByOAuth('docs', minted.token, { claims: '*' });
    try {
      // The token's claims, not what was typed: group:ops does not see the engineering file.
      expect(await toolText(client, 'grep', { pattern: 'hello' })).toBe('/README.md\n');
      const grant = (await grantsOf('docs')).json.grants.find((g: { approvedBy: { id: string } }) => g.approvedBy.id === minted.id);
      expect(grant).toMatchObject({ claims: ['group:ops'], approvedBy: { kind: 'token', id: minted.id } });
      expect((await t.call('DELETE', `/v1/tokens/${minted.id}`)).status).toBe(204);
      expect((await mcpPing('docs', provider.saved!.access_token)).status).toBe(401);
      expect((await grantsOf('docs')).json.grants.find((g: { id: string }) => g.id === grant.id)).toBeUndefined();
    } finally {
      await client.close();
    }
  });

  it('revoking a grant that does not exist, or by a malformed id, is 404', async () => {
    expect((await t.call('DELETE', '/v1/grants/00000000-0000-4000-8000-000000000000')).status).toBe(404);
    expect((await t.call('DELETE', '/v1/grants/not-a-uuid')).status).toBe(404);
  });
});

/** A registered client and PKCE pair, with a request URL for `ws` (fields overridable; null drops one). */
async function authorizationRequest(
  ws: string,
  overrides: Record<string, string | null> = {},
  redirectUri = `${callbackBase}/callback`,
): Promise<{ url: string; clientId: string; verifier: string; redirectUri: string }> {
  const clientId = await clientFor(redirectUri);
  const verifier = randomBytes(32).toString('base64url');
  const params: Record<string, string | null> = {
    response_type: 'code',
    client_id: clientId,
    redirect_uri: redirectUri,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    state: 'st-1',
    resource: mcpUrl(ws),
    scope: 'vfs:read',
    ...overrides,
  };
  const query = new URLSearchParams(Object.entries(params).filter((e): e is [string, string] => e[1] !== null));
  return { url: `${t.url}/oauth/authorize?${query}`, clientId, verifier, redirectUri };
}

/** One registered client per redirect URI, as a real client keeps its registration. */
const clients = new Map<string, string>();
async function clientFor(redirectUri: string): Promise<string> {
  let id = clients.get(redirectUri);
  if (id === undefined) {
    const registered = await register({ client_name: 'manual', redirect_uris: [redirectUri] });
    expect(registered.status, registered.text).toBe(201);
    id = registered.json.client_id as string;
    clients.set(redirectUri, id);
  }
  return id;
}

/** POST /oauth/register with a JSON body. */
function register(body: unknown, service: TestService = t): Promise<Reply> {
  return service.call('POST', '/oauth/register', { key: null, body, headers: { 'content-type': 'application/json' } });
}

function tokenRequest(fields: Record<string, string>): Promise<Reply> {
  return t.call('POST', '/oauth/token', {
    key: null,
    body: new URLSearchParams(fields).toString(),
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
  });
}

/** A code for `ws` approved with the management key, by hand. */
async function codeFor(ws: string): Promise<{ code: string; clientId: string; verifier: string; redirectUri: string }> {
  const request = await authorizationRequest(ws);
  const { post } = await approve(request.url, { key: t.key, decision: 'allow' });
  expect(post.status).toBe(303);
  const params = await followToCallback(post.headers.get('location')!);
  return { ...request, code: params.get('code')! };
}

describe('a grant never outlives its approver', () => {
  /** Runs `sql` as the superuser: a state no route leaves behind, such as a revocation that missed a grant. */
  async function asSuperuser(sql: string, values: unknown[]): Promise<Array<Record<string, unknown>>> {
    const su = await t.superuser();
    try {
      return (await su.query(sql, values)).rows;
    } finally {
      await su.end();
    }
  }
  const revokedAt = async (key: string): Promise<unknown[]> =>
    (await asSuperuser('SELECT revoked_at FROM oauth_grants WHERE approved_by_key = $1', [key])).map((r) => r.revoked_at);

  it("a key revoked behind the grant's back: its code is refused at redemption, its refresh token at refresh, and the grant is revoked", async () => {
    for (const use of ['code', 'refresh'] as const) {
      const second = await issueManagementKey(t.service.db, 'default');
      const request = await authorizationRequest('docs');
      const { post } = await approve(request.url, { key: second.key, decision: 'allow' });
      expect(post.status).toBe(303);
      const code = (await followToCallback(post.headers.get('location')!)).get('code')!;
      const exchange = {
        grant_type: 'authorization_code',
        code,
        client_id: request.clientId,
        code_verifier: request.verifier,
        redirect_uri: request.redirectUri,
      };
      let refreshToken = '';
      if (use === 'refresh') {
        const first = await tokenRequest(exchange);
        expect(first.status).toBe(200);
        refreshToken = first.json.refresh_token;
      }
      // The key goes as a revocation racing with the grant's making would leave it: the grant untouched.
      await asSuperuser('UPDATE management_keys SET revoked_at = now() WHERE id = $1', [second.id]);
      expect(await revokedAt(second.id)).toEqual([null]);
      const r =
        use === 'code'
          ? await tokenRequest(exchange)
          : await tokenRequest({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: request.clientId });
      expect([use, r.status, r.json.error]).toEqual([use, 400, 'invalid_grant']);
      expect((await revokedAt(second.id))[0]).not.toBeNull();
    }
  });

  it('approving while the key is being revoked leaves no live grant of it', async () => {
    for (let i = 0; i < 8; i++) {
      const key = await issueManagementKey(t.service.db, 'default');
      const { url } = await authorizationRequest('docs');
      const { html, cookie } = await visit(url);
      const posting = postForm({ ...formOf(html), key: key.key, decision: 'allow' }, cookie);
      await new Promise((resolve) => setTimeout(resolve, i));
      const [post] = await Promise.all([posting, revokeManagementKey(t.service.db, key.id)]);
      expect([303, 401]).toContain(post.status);
      expect(await asSuperuser('SELECT id FROM oauth_grants WHERE approved_by_key = $1 AND revoked_at IS NULL', [key.id])).toEqual([]);
    }
  });
});

/** The grant of an access token, read as the superuser. */
async function grantOf(accessToken: string): Promise<string> {
  const su = await t.superuser();
  try {
    const { rows } = await su.query('SELECT grant_id FROM tokens WHERE secret_hash = $1', [createHash('sha256').update(accessToken).digest()]);
    return rows[0].grant_id;
  } finally {
    await su.end();
  }
}

describe('a token lives only while its grant does', () => {
  it("a token whose grant is revoked is refused, whatever the token's own row says", async () => {
    const { code, clientId, verifier, redirectUri } = await codeFor('docs');
    const tokens = (await tokenRequest({ grant_type: 'authorization_code', code, client_id: clientId, code_verifier: verifier, redirect_uri: redirectUri }))
      .json;
    expect((await mcpPing('docs', tokens.access_token)).status).toBe(200);
    const su = await t.superuser();
    try {
      // As a refresh that overlapped the revocation would leave it: the grant revoked, the token's row not.
      await su.query('UPDATE oauth_grants SET revoked_at = now() WHERE id = $1', [await grantOf(tokens.access_token)]);
    } finally {
      await su.end();
    }
    expect((await mcpPing('docs', tokens.access_token)).status).toBe(401);
  });

  it('refreshing while the grant is revoked leaves no token that works', async () => {
    for (let i = 0; i < 6; i++) {
      const { code, clientId, verifier, redirectUri } = await codeFor('docs');
      const first = (await tokenRequest({ grant_type: 'authorization_code', code, client_id: clientId, code_verifier: verifier, redirect_uri: redirectUri }))
        .json;
      const grantId = await grantOf(first.access_token);
      const [refreshed] = await Promise.all([
        tokenRequest({ grant_type: 'refresh_token', refresh_token: first.refresh_token, client_id: clientId }),
        t.call('DELETE', `/v1/grants/${grantId}`),
      ]);
      if (refreshed.status === 200) expect((await mcpPing('docs', refreshed.json.access_token)).status).toBe(401);
      expect((await mcpPing('docs', first.access_token)).status).toBe(401);
    }
  });
});

describe('hostile', () => {
  it('an unregistered redirect_uri, one character off or another site, is shown on a page and never redirected to', async () => {
    const registered = `${callbackBase}/callback`;
    for (const redirect of [`${callbackBase}/callbacK`, `${registered}/`, 'https://evil.example/callback', `${registered}#x`]) {
      const { url } = await authorizationRequest('docs', { redirect_uri: redirect }, registered);
      const r = await fetch(url, { redirect: 'manual' });
      expect(r.status).toBe(400);
      expect(r.headers.get('location')).toBeNull();
      expect(r.headers.get('content-type')).toMatch(/^text\/html/);
      expect(await r.text()).toContain('not one the client registered');
    }
    // An unknown client with an attacker's redirect URI: no redirect either.
    const r = await fetch(`${t.url}/oauth/authorize?response_type=code&client_id=vfs_client_nope&redirect_uri=${encodeURIComponent('https://evil.example/')}`, {
      redirect: 'manual',
    });
    expect(r.status).toBe(400);
    expect(r.headers.get('location')).toBeNull();
  });

  it('a loopback redirect URI may come back on another port (RFC 8252 7.3), nothing else may differ', async () => {
    const { url } = await authorizationRequest('docs', { redirect_uri: 'http://127.0.0.1:1/callback' }, 'http://127.0.0.1/callback');
    expect((await fetch(url, { redirect: 'manual' })).status).toBe(200);
    const { url: wrongHost } = await authorizationRequest('docs', { redirect_uri: 'http://localhost:1/callback' }, 'http://127.0.0.1/callback');
    expect((await fetch(wrongHost, { redirect: 'manual' })).status).toBe(400);
    // A port out of range is no match (a page, not a 500); the loopback host matches whatever its case.
    const { url: badPort } = await authorizationRequest('docs', { redirect_uri: 'http://127.0.0.1:99999/callback' }, 'http://127.0.0.1/callback');
    const outOfRange = await fetch(badPort, { redirect: 'manual' });
    expect(outOfRange.status).toBe(400);
    expect(await outOfRange.text()).toContain('not one the client registered');
    const { url: upper } = await authorizationRequest('docs', { redirect_uri: 'http://localhost:4321/cb' }, 'http://LocalHost/cb');
    expect((await fetch(upper, { redirect: 'manual' })).status).toBe(200);
  });

  it('errors after the redirect URI checks out are shown, never redirected: PKCE missing or plain, a wrong resource, a wrong scope', async () => {
    const cases: Array<[Record<string, string | null>, string]> = [
      [{ code_challenge: null, code_challenge_method: null }, 'invalid_request'],
      [{ code_challenge_method: 'plain' }, 'invalid_request'],
      [{ code_challenge_method: null }, 'invalid_request'],
      [{ resource: null }, 'invalid_target'],
      [{ resource: 'https://elsewhere.example/v1/workspaces/docs/mcp' }, 'invalid_target'],
      [{ resource: `${t.url}/v1/workspaces/docs/grep` }, 'invalid_target'],
      [{ scope: 'vfs:write' }, 'invalid_scope'],
      [{ response_type: 'token' }, 'unsupported_response_type'],
    ];
    for (const [overrides, error] of cases) {
      const { url } = await authorizationRequest('docs', overrides);
      const r = await fetch(url, { redirect: 'manual' });
      const html = await r.text();
      expect([JSON.stringify(overrides), r.status]).toEqual([JSON.stringify(overrides), 400]);
      expect(r.headers.get('location')).toBeNull();
      expect(r.headers.get('content-type')).toMatch(/^text\/html/);
      expect([JSON.stringify(overrides), html.includes(`<code>${error}</code>`)]).toEqual([JSON.stringify(overrides), true]);
      // The client's redirect host is named as text, not linked.
      expect(html).toContain(`<strong>${new URL(callbackBase).host}</strong>`);
      expect(html).not.toContain('href=');
    }
    // Nor with a client that registered another site's URI: the error stays here.
    const evil = await authorizationRequest('docs', { code_challenge: null }, 'https://evil.example/');
    const r = await fetch(evil.url, { redirect: 'manual' });
    expect([r.status, r.headers.get('location')]).toEqual([400, null]);
    expect(await r.text()).toContain('<strong>evil.example</strong>');
  });

  it('a post without the CSRF token or its cookie, or with an altered request, is refused (403) and issues nothing', async () => {
    const before = (await grantsOf('docs')).json.grants.length;
    const { url } = await authorizationRequest('docs');
    const { html, cookie } = await visit(url);
    const form = formOf(html);
    const { csrf: _, ...withoutCsrf } = form;
    for (const [fields, cookieHeader] of [
      [withoutCsrf, cookie],
      [form, ''],
      [form, 'vfs_oauth=AAAAAAAAAAAAAAAAAAAAAAAA'],
      [{ ...form, resource: mcpUrl('other') }, cookie],
      [{ ...form, code_challenge: 'B'.repeat(43) }, cookie],
    ] as Array<[Record<string, string>, string]>) {
      const r = await postForm({ ...fields, key: t.key, decision: 'allow' }, cookieHeader);
      expect(r.status).toBe(403);
      expect(r.headers.get('location')).toBeNull();
      expect(await r.text()).toContain('This form cannot be used');
    }
    expect((await grantsOf('docs')).json.grants.length).toBe(before);
    // The same form with its cookie still works.
    expect((await postForm({ ...form, key: t.key, decision: 'allow' }, cookie)).status).toBe(303);
  });

  it('a code used twice fails the second time and takes back what the first gave', async () => {
    const { code, clientId, verifier, redirectUri } = await codeFor('docs');
    const exchange = {
      grant_type: 'authorization_code',
      code,
      client_id: clientId,
      code_verifier: verifier,
      redirect_uri: redirectUri,
      resource: mcpUrl('docs'),
    };
    const first = await tokenRequest(exchange);
    expect(first.status, first.text).toBe(200);
    expect(first.headers.get('cache-control')).toBe('no-store');
    expect(first.json).toMatchObject({ token_type: 'Bearer', scope: 'vfs:read', expires_in: expect.any(Number) });
    expect(first.json.expires_in).toBeGreaterThan(3500);
    expect((await mcpPing('docs', first.json.access_token)).status).toBe(200);
    const second = await tokenRequest(exchange);
    expect(second.status).toBe(400);
    expect(second.json).toMatchObject({ error: 'invalid_grant' });
    expect((await mcpPing('docs', first.json.access_token)).status).toBe(401);
    const refreshed = await tokenRequest({ grant_type: 'refresh_token', refresh_token: first.json.refresh_token, client_id: clientId });
    expect(refreshed.json).toMatchObject({ error: 'invalid_grant' });
  });

  it('the token endpoint binds a code to its client, redirect URI, verifier and resource', async () => {
    const other = await register({ redirect_uris: [`${callbackBase}/callback`] });
    const cases: Array<[(c: Awaited<ReturnType<typeof codeFor>>) => Record<string, string>, number, string]> = [
      [(c) => ({ code_verifier: `${c.verifier.slice(0, -1)}x` }), 400, 'invalid_grant'],
      [() => ({ client_id: other.json.client_id }), 400, 'invalid_grant'],
      [() => ({ redirect_uri: `${callbackBase}/callback2` }), 400, 'invalid_grant'],
      [() => ({ resource: mcpUrl('other') }), 400, 'invalid_target'],
      [() => ({ client_id: 'vfs_client_unknown' }), 401, 'invalid_client'],
      [() => ({ grant_type: 'password' }), 400, 'unsupported_grant_type'],
      [() => ({ code_verifier: 'short' }), 400, 'invalid_request'],
    ];
    for (const [change, status, error] of cases) {
      const c = await codeFor('docs');
      const r = await tokenRequest({
        grant_type: 'authorization_code',
        code: c.code,
        client_id: c.clientId,
        code_verifier: c.verifier,
        redirect_uri: c.redirectUri,
        ...change(c),
      });
      expect([r.status, r.json?.error]).toEqual([status, error]);
      expect(r.headers.get('cache-control')).toBe('no-store');
    }
    const json = await t.call('POST', '/oauth/token', { key: null, body: { grant_type: 'authorization_code' } });
    expect([json.status, json.json.error]).toEqual([400, 'invalid_request']);
  });

  it("another client's client_id uses up nothing: a code, a refresh token or a revocation sent with it leaves the real client's intact", async () => {
    const other = (await register({ redirect_uris: [`${callbackBase}/callback`] })).json.client_id;
    const c = await codeFor('docs');
    const exchange = { grant_type: 'authorization_code', code: c.code, client_id: c.clientId, code_verifier: c.verifier, redirect_uri: c.redirectUri };
    const stolen = await tokenRequest({ ...exchange, client_id: other });
    expect([stolen.status, stolen.json.error]).toEqual([400, 'invalid_grant']);
    const first = await tokenRequest(exchange);
    expect(first.status, first.text).toBe(200);
    const refreshAs = (clientId: string, token: string) => tokenRequest({ grant_type: 'refresh_token', refresh_token: token, client_id: clientId });
    const wrong = await refreshAs(other, first.json.refresh_token);
    expect([wrong.status, wrong.json.error]).toEqual([400, 'invalid_grant']);
    const revoked = await t.call('POST', '/oauth/revoke', {
      key: null,
      body: new URLSearchParams({ token: first.json.refresh_token, client_id: other }).toString(),
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
    });
    expect(revoked.status).toBe(200);
    // The real client's refresh is its first use: no replay, and the grant lives.
    const second = await refreshAs(c.clientId, first.json.refresh_token);
    expect(second.status, second.text).toBe(200);
    expect((await mcpPing('docs', second.json.access_token)).status).toBe(200);
  });

  it("a token issued for workspace A is refused on B's endpoint, on A's HTTP tools and on the management plane", async () => {
    const { code, clientId, verifier, redirectUri } = await codeFor('docs');
    const tokens = (await tokenRequest({ grant_type: 'authorization_code', code, client_id: clientId, code_verifier: verifier, redirect_uri: redirectUri }))
      .json;
    const access = tokens.access_token;
    expect((await mcpPing('docs', access)).status).toBe(200);
    const onOther = await mcpPing('other', access);
    expect(onOther.status).toBe(401);
    expect(onOther.headers.get('www-authenticate')).toContain('error="invalid_token"');
    expect((await mcpPing('nowhere', access)).status).toBe(401);
    const grep = await t.call('GET', '/v1/workspaces/docs/grep?pattern=hello', { key: access });
    expect(grep.status).toBe(401);
    expect(grep.text).toContain("accepted only on its workspace's MCP endpoint");
    expect((await t.call('GET', '/v1/whoami', { key: access })).status).toBe(401);
    expect((await t.call('GET', '/v1/workspaces', { key: access })).status).toBe(401);
    // Nor may it approve another grant.
    const { url } = await authorizationRequest('docs');
    expect((await approve(url, { key: access, decision: 'allow' })).post.status).toBe(401);
    // Revocation (RFC 7009): the access token alone, then the refresh token, which ends the grant.
    const revoke = (token: string) =>
      t.call('POST', '/oauth/revoke', {
        key: null,
        body: new URLSearchParams({ token, client_id: clientId }).toString(),
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
      });
    expect((await revoke(access)).status).toBe(200);
    expect((await mcpPing('docs', access)).status).toBe(401);
    expect((await revoke(tokens.refresh_token)).status).toBe(200);
    const refreshed = await tokenRequest({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: clientId });
    expect(refreshed.json.error).toBe('invalid_grant');
  });

  it("another account can neither see nor revoke the account's grants", async () => {
    const { code, clientId, verifier, redirectUri } = await codeFor('docs');
    const access = (await tokenRequest({ grant_type: 'authorization_code', code, client_id: clientId, code_verifier: verifier, redirect_uri: redirectUri }))
      .json.access_token;
    const grantId = await grantOf(access);
    expect((await grantsOf('docs')).json.grants.map((g: { id: string }) => g.id)).toContain(grantId);
    const other = await t.newAccount('oauth-isolation');
    expect((await t.call('POST', '/v1/workspaces', { key: other, body: { name: 'docs' } })).status).toBe(201);
    const listed = await t.call('GET', '/v1/workspaces/docs/grants', { key: other });
    expect([listed.status, listed.json.grants]).toEqual([200, []]);
    expect((await t.call('DELETE', `/v1/grants/${grantId}`, { key: other })).status).toBe(404);
    // Untouched: still listed, and its token still reads.
    expect((await grantsOf('docs')).json.grants.map((g: { id: string }) => g.id)).toContain(grantId);
    expect((await mcpPing('docs', access)).status).toBe(200);
  });
});

// On a service of their own: the end-to-end cases above register clients from this same
// address, and on a fast machine reach the per-address limit within the minute.
describe('registration', () => {
  let fresh: TestService;
  beforeAll(async () => {
    fresh = await startTestService({});
  });
  afterAll(async () => fresh?.stop());

  it('pages the grants like the file listing: limit, nextCursor, and a bad cursor or limit refused with 400', async () => {
    for (let i = 0; i < 3; i++) await codeFor('other');
    const all = (await grantsOf('other', '?limit=1000')).json;
    expect(all.grants.length).toBeGreaterThanOrEqual(3);
    expect(all.nextCursor).toBeNull();
    const paged: Array<{ id: string }> = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor === null ? 'limit=2' : `limit=2&cursor=${encodeURIComponent(cursor)}`;
      const page: Reply = await grantsOf('other', `?${query}`);
      expect(page.json.grants.length).toBeLessThanOrEqual(2);
      paged.push(...page.json.grants);
      cursor = page.json.nextCursor;
    } while (cursor !== null);
    expect(paged.map((g) => g.id)).toEqual(all.grants.map((g: { id: string }) => g.id));
    expect(all.grants[0]).toMatchObject({ redirectUri: `${callbackBase}/callback`, expiresAt: null });
    const bad = ['cursor=not-a-cursor', `cursor=${Buffer.from('/README.md').toString('base64url')}`, 'cursor=', 'limit=0', 'limit=1001', 'limit=x', 'after=1'];
    for (const query of bad) {
      const r = await t.call('GET', `/v1/workspaces/other/grants?${query}`);
      expect([query, r.status, r.json.error]).toEqual([query, 400, expect.stringMatching(/cursor|limit|after/)]);
    }
  });

  it('registration takes public clients with https or loopback redirect URIs only', async () => {
    const cases: Array<[unknown, string]> = [
      [{ redirect_uris: ['http://example.com/cb'] }, 'invalid_redirect_uri'],
      [{ redirect_uris: ['https://example.com/cb#frag'] }, 'invalid_redirect_uri'],
      [{ redirect_uris: ['javascript:alert(1)'] }, 'invalid_redirect_uri'],
      // A CSP form-action cannot name an IPv6 literal: a browser would block the redirect.
      [{ redirect_uris: ['http://[::1]/cb'] }, 'invalid_redirect_uri'],
      [{ redirect_uris: [] }, 'invalid_redirect_uri'],
      [{}, 'invalid_redirect_uri'],
      [{ redirect_uris: ['https://example.com/cb'], token_endpoint_auth_method: 'client_secret_basic' }, 'invalid_client_metadata'],
      [{ redirect_uris: ['https://example.com/cb'], grant_types: ['client_credentials'] }, 'invalid_client_metadata'],
      [{ redirect_uris: ['https://example.com/cb'], response_types: ['token'] }, 'invalid_client_metadata'],
      [{ redirect_uris: ['https://example.com/cb'], client_name: 'x'.repeat(201) }, 'invalid_client_metadata'],
      // Bidi and zero-width format characters could make the page misread.
      [{ redirect_uris: ['https://example.com/cb'], client_name: 'Safe\u202Eelpmaxe.live' }, 'invalid_client_metadata'],
      [{ redirect_uris: ['https://example.com/cb'], client_name: 'Sa\u200Bfe' }, 'invalid_client_metadata'],
      ['not an object', 'invalid_client_metadata'],
    ];
    for (const [body, error] of cases) {
      const r = await register(body, fresh);
      expect([JSON.stringify(body).slice(0, 80), r.status, r.json?.error]).toEqual([JSON.stringify(body).slice(0, 80), 400, error]);
    }
    const ok = await register({ redirect_uris: ['https://app.example.com/cb', 'http://localhost/cb'] }, fresh);
    expect(ok.status).toBe(201);
    expect(ok.json).toMatchObject({ token_endpoint_auth_method: 'none', redirect_uris: ['https://app.example.com/cb', 'http://localhost/cb'] });
    expect(ok.json.client_id).toMatch(/^vfs_client_/);
    const big = await register({ redirect_uris: ['https://a.example/'], pad: 'x'.repeat(20_000) }, fresh);
    expect(big.status).toBe(413);
  });

  it('registrations are bounded per address (429 with Retry-After)', async () => {
    let last: Reply | null = null;
    for (let i = 0; i < 40; i++) {
      last = await register({ redirect_uris: ['https://app.example.com/cb'] }, fresh);
      if (last.status !== 201) break;
    }
    expect(last!.status).toBe(429);
    expect(Number(last!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });
});

describe('with the credential cache on (the default)', () => {
  let cached: TestService;
  beforeAll(async () => {
    cached = await startTestService({});
    expect((await cached.call('POST', '/v1/workspaces', { body: { name: 'docs' } })).status).toBe(201);
  });
  afterAll(async () => cached?.stop());

  const form = (path: string, fields: Record<string, string>): Promise<Reply> =>
    cached.call('POST', path, { key: null, body: new URLSearchParams(fields).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });

  it('revoking an unknown token clears no credential cache', async () => {
    const clientId = (
      await cached.call('POST', '/oauth/register', {
        key: null,
        body: { redirect_uris: ['https://app.example.com/cb'] },
        headers: { 'content-type': 'application/json' },
      })
    ).json.client_id;
    const minted = (await cached.call('POST', '/v1/workspaces/docs/tokens', { body: {} })).json;
    expect((await cached.call('GET', '/v1/whoami', { key: minted.token })).status).toBe(200);
    // Revoked behind the service's back (no NOTIFY): only the cache still holds it.
    const su = await cached.superuser();
    try {
      await su.query('UPDATE tokens SET revoked_at = now() WHERE id = $1', [minted.id]);
    } finally {
      await su.end();
    }
    expect((await cached.call('GET', '/v1/whoami', { key: minted.token })).status).toBe(200);
    for (const token of [`svc_rt_${'A'.repeat(49)}`, 'svc_at_nonsense', 'anything']) {
      expect((await form('/oauth/revoke', { token, client_id: clientId })).status).toBe(200);
    }
    // Had the cache been emptied, the revoked token would now be refused.
    expect((await cached.call('GET', '/v1/whoami', { key: minted.token })).status).toBe(200);
  });

  it("an OAuth token is refused on the HTTP routes even when cached, and its grant's revocation holds on the next request", async () => {
    const clientId = (
      await cached.call('POST', '/oauth/register', {
        key: null,
        body: { redirect_uris: [`${callbackBase}/callback`] },
        headers: { 'content-type': 'application/json' },
      })
    ).json.client_id;
    const verifier = randomBytes(32).toString('base64url');
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: `${callbackBase}/callback`,
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
      resource: `${cached.url}/v1/workspaces/docs/mcp`,
    });
    const { html, cookie } = await visit(`${cached.url}/oauth/authorize?${query}`);
    const post = await postFormTo(cached.url, { ...formOf(html), key: cached.key, decision: 'allow' }, cookie);
    expect(post.status).toBe(303);
    const code = new URL(post.headers.get('location')!).searchParams.get('code')!;
    const tokens = (
      await form('/oauth/token', {
        grant_type: 'authorization_code',
        code,
        client_id: clientId,
        code_verifier: verifier,
        redirect_uri: `${callbackBase}/callback`,
      })
    ).json;
    const ping = () =>
      fetch(`${cached.url}/v1/workspaces/docs/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${tokens.access_token}` },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      });
    expect((await ping()).status).toBe(200); // now cached
    for (let i = 0; i < 2; i++) expect((await cached.call('GET', '/v1/workspaces/docs/grep?pattern=x', { key: tokens.access_token })).status).toBe(401);
    expect((await ping()).status).toBe(200);
    const [grant] = (await cached.call('GET', '/v1/workspaces/docs/grants')).json.grants;
    expect((await cached.call('DELETE', `/v1/grants/${grant.id}`)).status).toBe(204);
    expect((await ping()).status).toBe(401);
  });

  it('the token and revocation endpoints are bounded per address (429 with Retry-After)', async () => {
    let last: Reply | null = null;
    for (let i = 0; i < 200; i++) {
      last = await form(i % 2 === 0 ? '/oauth/token' : '/oauth/revoke', { token: 'x', grant_type: 'refresh_token', client_id: 'vfs_client_none' });
      if (last.status === 429) break;
    }
    expect(last!.status).toBe(429);
    expect(Number(last!.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  });
});

describe('VFS_PUBLIC_URL', () => {
  const config = (env: Record<string, string>) => loadConfig({ DATA_DIR: '/tmp/vfs-config-check', ...env });

  it('unset on a host other than loopback, OAuth is off with one line saying to set it; on loopback it is on', () => {
    const wide = config({ HOST: '0.0.0.0' });
    expect(wide.oauth).toBeNull();
    expect(wide.oauthNotice).toMatch(/set VFS_PUBLIC_URL/);
    for (const host of ['127.0.0.1', 'localhost', '::1']) expect([host, config({ HOST: host }).oauth !== null]).toEqual([host, true]);
    expect(config({ HOST: '0.0.0.0', VFS_PUBLIC_URL: 'https://vfs.example.com' }).oauth).not.toBeNull();
    expect(config({ HOST: '0.0.0.0', VFS_OAUTH: 'off' }).oauthNotice).toBeNull();
  });

  it('unset on a cluster node, OAuth is off even on loopback: each node would be an issuer of its own', () => {
    const node = { VFS_CLUSTER: 'on', VFS_STORAGE_URL: 's3://bucket/prefix', HOST: '127.0.0.1' };
    expect(config(node).oauth).toBeNull();
    expect(config(node).oauthNotice).toMatch(/set VFS_PUBLIC_URL .* the same on every node/);
    expect(config({ ...node, VFS_PUBLIC_URL: 'https://vfs.example.com' }).oauth).not.toBeNull();
  });

  it('must be https unless its host is loopback', () => {
    expect(() => config({ VFS_PUBLIC_URL: 'http://vfs.example.com' })).toThrow(/VFS_PUBLIC_URL: must be https/);
    for (const url of ['http://127.0.0.1:8080', 'http://localhost:8080', 'https://vfs.example.com']) {
      expect(config({ VFS_PUBLIC_URL: url }).publicUrl).toBe(new URL(url).origin);
    }
  });
});

describe('VFS_OAUTH=off', () => {
  let off: TestService;
  beforeAll(async () => {
    off = await startTestService({ VFS_OAUTH: 'off' });
    expect((await off.call('POST', '/v1/workspaces', { body: { name: 'docs' } })).status).toBe(201);
  });
  afterAll(async () => off?.stop());

  it('serves no discovery document and answers 401 with the bare challenge', async () => {
    for (const path of ['/.well-known/oauth-protected-resource/v1/workspaces/docs/mcp', '/.well-known/oauth-authorization-server', '/oauth/authorize']) {
      expect((await off.call('GET', path, { key: null })).status).toBe(404);
    }
    expect((await off.call('POST', '/oauth/register', { key: null, body: { redirect_uris: ['https://a.example/'] } })).status).toBe(404);
    const r = await off.call('POST', '/v1/workspaces/docs/mcp', { key: null, body: { jsonrpc: '2.0', id: 1, method: 'ping' } });
    expect(r.status).toBe(401);
    expect(r.headers.get('www-authenticate')).toBe('Bearer');
  });
});
