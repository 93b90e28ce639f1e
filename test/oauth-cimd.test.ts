/**
 * Client ID Metadata Documents (docs/oauth.md#client-id-metadata-documents): the official client
 * SDK names its document's https URL as its client_id instead of registering, the service fetches
 * the document from a real local https server (its certificate signed by a CA made here with
 * openssl and trusted through VFS_OAUTH_CLIENT_FETCH_CA), and the flow runs to a grep. Then the
 * hostile documents and addresses, each refused with invalid_client and nothing issued; and the
 * sweep of OAuth rows past their retention.
 */
import { execFileSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sweepOAuth } from '../db/oauth.js';
import { loadConfig } from '../service/config.js';
import { approve, RedirectTarget, SDKS, TestProvider, toolText } from './helpers/oauth.js';
import { put, settled, startTestService, type TestService } from './helpers/service.js';

/** Fetching private addresses allowed (as an intranet deployment): the documents are on 127.0.0.1. */
let t: TestService;
/** The default: private addresses refused. */
let strict: TestService;
let callback: RedirectTarget;
let dir: string;
let documents: Server;
let docBase: string;
/** Requests each path of the document server received. */
const hits = new Map<string, number>();
/** Bytes the 50 MB document's answer wrote before its connection closed. */
let hugeWritten = -1;

const FIFTY_MB = 50 * 1024 * 1024;

/** A CA and a certificate for 127.0.0.1 and localhost signed by it, made with openssl in `dir`. */
function makeCertificates(dir: string): { ca: string; key: string; cert: string } {
  const run = (...args: string[]): void => void execFileSync('/usr/bin/openssl', args, { cwd: dir, stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  run('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '2', '-subj', '/CN=agent-vfs test CA');
  run('req', ...ec, '-keyout', 'leaf.key', '-out', 'leaf.csr', '-subj', '/CN=127.0.0.1');
  execFileSync('/bin/sh', ['-c', 'printf "subjectAltName=IP:127.0.0.1,DNS:localhost\\nbasicConstraints=CA:FALSE\\n" > leaf.ext'], { cwd: dir });
  run('x509', '-req', '-in', 'leaf.csr', '-CA', 'ca.pem', '-CAkey', 'ca.key', '-CAcreateserial', '-out', 'leaf.pem', '-days', '2', '-extfile', 'leaf.ext');
  return { ca: join(dir, 'ca.pem'), key: join(dir, 'leaf.key'), cert: join(dir, 'leaf.pem') };
}

/** A client document at `path` of the document server, with `changes` applied. */
function document(path: string, changes: Record<string, unknown> = {}): string {
  return JSON.stringify({
    client_id: `${docBase}${path}`,
    client_name: 'CIMD <Agent>',
    client_uri: 'https://agent.example',
    logo_uri: 'https://agent.example/logo.png',
    redirect_uris: [`${callback.base}/callback`],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
    ...changes,
  });
}

/** The document server's answers, by path (a path not here answers 404). */
const ANSWERS: Record<string, (path: string, res: ServerResponse) => void> = {
  '/good.json': (path, res) => json(res, document(path), { 'cache-control': 'max-age=60' }),
  '/mismatch.json': (_, res) => json(res, document('/good.json')),
  '/bad-redirect-uris.json': (path, res) => json(res, document(path, { redirect_uris: ['http://evil.example/callback'] })),
  '/secret.json': (path, res) => json(res, document(path, { token_endpoint_auth_method: 'client_secret_basic' })),
  '/html.json': (path, res) => res.writeHead(200, { 'content-type': 'text/html' }).end(document(path)),
  '/redirect.json': (_, res) => res.writeHead(302, { location: '/redirect-target.json' }).end(),
  '/redirect-target.json': (path, res) => json(res, document(path)),
  '/silent.json': () => {}, // never answers
  '/huge.json': (_, res) => streamHuge(res),
};

function json(res: ServerResponse, body: string, headers: Record<string, string> = {}): void {
  res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(body);
}

function serveDocument(req: IncomingMessage, res: ServerResponse): void {
  const path = new URL(req.url ?? '/', 'https://x').pathname;
  hits.set(path, (hits.get(path) ?? 0) + 1);
  // One good document per SDK and era of the end-to-end run: /sdk/0.json, /sdk/1.json, …
  const answer = path.startsWith('/sdk/') ? ANSWERS['/good.json'] : ANSWERS[path];
  if (answer === undefined) res.writeHead(404).end();
  else answer(path, res);
}

/** Streams 50 MB of a JSON string (no Content-Length), as fast as the reader takes it, and records how much was written. */
function streamHuge(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'application/json' });
  const chunk = Buffer.alloc(64 * 1024, 'a');
  let written = 0;
  res.write('"');
  const pump = (): void => {
    while (written < FIFTY_MB) {
      written += chunk.length;
      if (!res.write(chunk)) {
        res.once('drain', pump);
        return;
      }
    }
    res.end('"');
  };
  res.on('close', () => {
    hugeWritten = written;
  });
  pump();
}

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'vfs-cimd-'));
  const certs = makeCertificates(dir);
  documents = createServer({ key: await readFile(certs.key), cert: await readFile(certs.cert) }, serveDocument);
  await new Promise<void>((resolve) => documents.listen(0, '127.0.0.1', resolve));
  docBase = `https://127.0.0.1:${(documents.address() as AddressInfo).port}`;
  callback = await RedirectTarget.start();
  t = await startTestService({ VFS_OAUTH_CLIENT_FETCH_PRIVATE: 'allow', VFS_OAUTH_CLIENT_FETCH_CA: certs.ca });
  strict = await startTestService({ VFS_OAUTH_CLIENT_FETCH_CA: certs.ca });
  expect((await t.call('POST', '/v1/workspaces', { body: { name: 'docs' } })).status).toBe(201);
  expect((await put(t, 'docs', 'README.md', '# Docs\nhello from a client document\n')).status).toBe(202);
  await settled(t, 'docs');
});
afterAll(async () => {
  documents?.closeAllConnections();
  await new Promise((resolve) => documents?.close(resolve));
  await callback?.close();
  await t?.stop();
  await strict?.stop();
  await rm(dir, { recursive: true, force: true });
});

const mcpUrl = (service: TestService, ws: string): string => `${service.url}/v1/workspaces/${ws}/mcp`;

/** An authorization request by the client whose client_id is `clientId`, made by hand as the SDK would. */
function authorizationUrl(service: TestService, clientId: string): string {
  const verifier = randomBytes(32).toString('base64url');
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: `${callback.base}/callback`,
    code_challenge: createHash('sha256').update(verifier).digest('base64url'),
    code_challenge_method: 'S256',
    state: 'st',
    resource: mcpUrl(service, 'docs'),
    scope: 'vfs:read',
  });
  return `${service.url}/oauth/authorize?${query}`;
}

/** How many grants, codes and refresh tokens the service's database holds. */
async function issued(service: TestService): Promise<number[]> {
  const su = await service.superuser();
  try {
    const counts: number[] = [];
    for (const table of ['oauth_grants', 'oauth_codes', 'oauth_refresh_tokens']) {
      counts.push(Number((await su.query(`SELECT count(*) AS n FROM ${table}`)).rows[0].n));
    }
    return counts;
  } finally {
    await su.end();
  }
}

/**
 * Asserts that `clientId` is refused everywhere, nothing issued: the authorization endpoint shows
 * its error page (400, invalid_client, no redirect) with `reason` in it, and the token and
 * revocation endpoints answer invalid_client (401).
 */
async function expectRefused(service: TestService, clientId: string, reason: RegExp): Promise<void> {
  const before = await issued(service);
  const page = await fetch(authorizationUrl(service, clientId), { redirect: 'manual' });
  const html = await page.text();
  expect(page.status, html).toBe(400);
  expect(page.headers.get('location')).toBeNull();
  expect(html).toContain('<code>invalid_client</code>');
  expect(html).toMatch(reason);
  expect(html).not.toContain('name="key"');
  for (const [path, fields] of [
    ['/oauth/token', { grant_type: 'authorization_code', code: 'x', code_verifier: 'v'.repeat(43), redirect_uri: `${callback.base}/callback` }],
    ['/oauth/revoke', { token: 'svc_rt_x' }],
  ] as const) {
    const r = await fetch(service.url + path, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ ...fields, client_id: clientId }).toString(),
    });
    expect(r.status).toBe(401);
    expect(await r.json()).toMatchObject({ error: 'invalid_client' });
  }
  expect(await issued(service)).toEqual(before);
}

describe('a client known by its metadata document', () => {
  it('the metadata says client_id_metadata_document_supported', async () => {
    const r = await t.call('GET', '/.well-known/oauth-authorization-server', { key: null });
    expect(r.json.client_id_metadata_document_supported).toBe(true);
  });

  it('the official client uses it instead of registering, the page shows its name and host, and it greps', async () => {
    const docUrl = `${docBase}/good.json`;
    const provider = new TestProvider(`${callback.base}/callback`, docUrl);
    const clientsBefore = await t.superuser().then(async (su) => {
      const n = Number((await su.query('SELECT count(*) AS n FROM oauth_clients')).rows[0].n);
      await su.end();
      return n;
    });
    const first = new StreamableHTTPClientTransport(new URL(mcpUrl(t, 'docs')), { authProvider: provider });
    await expect(new Client({ name: 'cimd-test', version: '1.0.0' }).connect(first)).rejects.toBeInstanceOf(UnauthorizedError);
    expect(provider.info?.client_id).toBe(docUrl);
    expect(provider.authorizationUrl!.searchParams.get('client_id')).toBe(docUrl);
    const { html, post, postHtml } = await approve(provider.authorizationUrl!, { key: t.key, decision: 'allow' });
    expect(html).toContain('<bdi>CIMD &#60;Agent&#62;</bdi>');
    expect(html).toContain(`<strong id="client-host">${new URL(docBase).host}</strong>`);
    expect(html).toContain(`<strong id="redirect-host">${new URL(callback.base).host}</strong>`);
    expect(post.status, postHtml).toBe(303);
    const params = await callback.follow(post.headers.get('location')!);
    expect(params.get('state')).toBe(provider.sentState);
    await first.finishAuth(params);
    const client = new Client({ name: 'cimd-test', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl(t, 'docs')), { authProvider: provider }));
    try {
      expect(await toolText(client, 'grep', { pattern: 'hello', output_mode: 'content' })).toContain('/README.md:2:hello from a client document');
    } finally {
      await client.close();
    }
    // Never registered: the one new client row is the document's, made with the grant, which names it.
    const grants = (await t.call('GET', '/v1/workspaces/docs/grants')).json.grants;
    expect(grants).toEqual([expect.objectContaining({ clientId: docUrl, clientName: 'CIMD <Agent>' })]);
    const su = await t.superuser();
    try {
      const rows = (await su.query('SELECT id, redirect_uris FROM oauth_clients')).rows;
      expect(rows.length).toBe(clientsBefore + 1);
      expect(rows).toContainEqual({ id: docUrl, redirect_uris: [`${callback.base}/callback`] });
    } finally {
      await su.end();
    }
    // Fetched once: the page, the form's post and the token requests were served from the cache.
    expect(hits.get('/good.json')).toBe(1);
  });
});

describe('each official SDK and era registers by its document', () => {
  SDKS.forEach((sdk, i) => {
    it(`${sdk.name}: names its document, the person approves, it greps`, async () => {
      const docUrl = `${docBase}/sdk/${i}.json`;
      const provider = new TestProvider(`${callback.base}/callback`, docUrl);
      const first = sdk.open(new URL(mcpUrl(t, 'docs')), provider);
      const refused = await first.connect().then(
        () => null,
        (error: unknown) => error,
      );
      expect(sdk.unauthorized(refused), String(refused)).toBe(true);
      expect(provider.authorizationUrl!.searchParams.get('client_id')).toBe(docUrl);
      const { post, postHtml } = await approve(provider.authorizationUrl!, { key: t.key, decision: 'allow' });
      expect(post.status, postHtml).toBe(303);
      await first.finishAuth(await callback.follow(post.headers.get('location')!));
      const client = sdk.open(new URL(mcpUrl(t, 'docs')), provider);
      await client.connect();
      try {
        expect(client.protocolVersion()).toBe(sdk.protocolVersion);
        const { text, isError } = await client.callTool('grep', { pattern: 'hello', output_mode: 'content' });
        expect([isError, text]).toEqual([false, expect.stringContaining('/README.md:2:hello from a client document')]);
      } finally {
        await client.close();
      }
      expect(hits.get(`/sdk/${i}.json`)).toBe(1);
    });
  });
});

describe('hostile documents and addresses', () => {
  it('a document on a loopback or private address is refused with private fetching off, before any connection', async () => {
    const before = hits.get('/good.json') ?? 0;
    await expectRefused(strict, `${docBase}/good.json`, /resolves to 127\.0\.0\.1, an address this service does not fetch from/);
    // A name resolving to loopback likewise (the DNS path, not only literals).
    const port = new URL(docBase).port;
    await expectRefused(strict, `https://localhost:${port}/good.json`, /resolves to (127\.0\.0\.1|::1)/);
    expect(hits.get('/good.json') ?? 0).toBe(before);
    // 10.0.0.1 would time out if a connection were tried: it answers at once.
    const started = performance.now();
    await expectRefused(strict, 'https://10.0.0.1/client.json', /resolves to 10\.0\.0\.1/);
    expect(performance.now() - started).toBeLessThan(2000);
    // The cloud metadata address stays refused even where private addresses are allowed.
    await expectRefused(t, 'https://169.254.169.254/latest.json', /resolves to 169\.254\.169\.254/);
    await expectRefused(t, 'https://[::ffff:a9fe:a9fe]/latest.json', /resolves to ::ffff:a9fe:a9fe/);
  });

  it('a client_id URL that is not https, has no path, a fragment, credentials or dot segments is refused without a fetch', async () => {
    const port = new URL(docBase).port;
    const cases: Array<[string, RegExp]> = [
      [`http://127.0.0.1:${port}/good.json`, /must be https/],
      [`${docBase}/`, /must have a path/],
      [`${docBase}/good.json#x`, /must not have a fragment/],
      [`https://user:pw@127.0.0.1:${port}/good.json`, /must not carry user information/],
      [`${docBase}/x/../good.json`, /must be written as/],
    ];
    const before = hits.get('/good.json') ?? 0;
    for (const [clientId, reason] of cases) await expectRefused(t, clientId, reason);
    expect(hits.get('/good.json') ?? 0).toBe(before);
  });

  it('a 50 MB document is refused, and the service stops reading at the limit', async () => {
    await expectRefused(t, `${docBase}/huge.json`, /larger than 65536 bytes/);
    await expect.poll(() => hugeWritten).toBeGreaterThan(0);
    expect(hugeWritten).toBeLessThan(FIFTY_MB / 4);
  });

  it('a document whose client_id is not its URL, with invalid redirect URIs, a secret method or not JSON is refused', async () => {
    await expectRefused(t, `${docBase}/mismatch.json`, /its client_id is not its own URL/);
    await expectRefused(t, `${docBase}/bad-redirect-uris.json`, /a redirect URI must be https, or http on a loopback host/);
    await expectRefused(t, `${docBase}/secret.json`, /token_endpoint_auth_method must be &#34;none&#34;/);
    await expectRefused(t, `${docBase}/html.json`, /its content type is not application\/json/);
    await expectRefused(t, `${docBase}/missing.json`, /it answered 404, not 200/);
  });

  it('a redirect is not followed', async () => {
    await expectRefused(t, `${docBase}/redirect.json`, /answered a redirect \(302\), which is not followed/);
    expect(hits.get('/redirect-target.json') ?? 0).toBe(0);
  });

  it('a failure is cached: refusing the same URL again fetches nothing', async () => {
    const before = hits.get('/mismatch.json')!;
    expect(before).toBeGreaterThanOrEqual(1);
    await expectRefused(t, `${docBase}/mismatch.json`, /its client_id is not its own URL/);
    expect(hits.get('/mismatch.json')).toBe(before);
  });

  it('a server that never answers is refused at the time limit', async () => {
    const started = performance.now();
    await expectRefused(t, `${docBase}/silent.json`, /no answer within 5 s/);
    const elapsed = performance.now() - started;
    expect(elapsed).toBeGreaterThan(4500);
    expect(elapsed).toBeLessThan(15_000);
  });
});

describe('the settings', () => {
  const config = (env: Record<string, string>) => loadConfig({ HOST: '127.0.0.1', DATA_DIR: '/tmp/vfs-config-check', ...env });

  it('private fetching is refused by default; a CA file must hold a certificate; the retention has bounds', async () => {
    expect(config({}).oauth).toMatchObject({ clientFetchPrivate: false, clientFetchCa: undefined, retentionSeconds: 604_800 });
    expect(config({ VFS_OAUTH_CLIENT_FETCH_PRIVATE: 'allow' }).oauth?.clientFetchPrivate).toBe(true);
    expect(() => config({ VFS_OAUTH_CLIENT_FETCH_PRIVATE: 'yes' })).toThrow(/VFS_OAUTH_CLIENT_FETCH_PRIVATE/);
    expect(config({ VFS_OAUTH_CLIENT_FETCH_CA: join(dir, 'ca.pem') }).oauth?.clientFetchCa).toBe(await readFile(join(dir, 'ca.pem'), 'utf8'));
    for (const path of [join(dir, 'missing.pem'), join(dir, 'leaf.key')]) {
      expect(() => config({ VFS_OAUTH_CLIENT_FETCH_CA: path })).toThrow(/VFS_OAUTH_CLIENT_FETCH_CA: .* is not a readable PEM file holding a CERTIFICATE/);
    }
    expect(() => config({ VFS_OAUTH_RETENTION_SECONDS: '10' })).toThrow(/VFS_OAUTH_RETENTION_SECONDS/);
  });
});

describe('the sweep of OAuth rows', () => {
  it('deletes clients never used, old codes and refresh tokens used, expired or of a revoked grant; keeps live ones', async () => {
    // A registered client never used, one just registered, and the live grant of the first flow above.
    const register = (name: string) =>
      t
        .call('POST', '/oauth/register', {
          key: null,
          headers: { 'content-type': 'application/json' },
          body: { client_name: name, redirect_uris: [`${callback.base}/cb`] },
        })
        .then((r) => {
          expect(r.status, r.text).toBe(201);
          return r.json.client_id as string;
        });
    const unused = await register('never used');
    const fresh = await register('just registered');
    const su = await t.superuser();
    try {
      const [grant] = (await su.query('SELECT id, account_id, client_id FROM oauth_grants WHERE client_id = $1', [`${docBase}/good.json`])).rows;
      const row = async (sql: string, values: unknown[]) => su.query(sql, values);
      await row("UPDATE oauth_clients SET created_at = now() - interval '8 days' WHERE id = $1", [unused]);
      // The document client's row is as old, but has a grant: kept.
      await row("UPDATE oauth_clients SET created_at = now() - interval '8 days' WHERE id = $1", [grant.client_id]);
      const insertRefresh = async (label: string, expires: string, used: string | null) => {
        await row(
          `INSERT INTO oauth_refresh_tokens (account_id, grant_id, secret_hash, expires_at, used_at)
           VALUES ($1, $2, $3, now() + $4::interval, now() + $5::interval)`,
          [grant.account_id, grant.id, createHash('sha256').update(label).digest(), expires, used],
        );
      };
      await insertRefresh('expired long ago', '-8 days', null);
      await insertRefresh('rotated long ago', '20 days', '-8 days');
      await insertRefresh('rotated just now', '20 days', '-1 minute');
      await insertRefresh('live', '20 days', null);
      const insertCode = async (label: string, expires: string) => {
        await row(
          `INSERT INTO oauth_codes (code_hash, account_id, grant_id, client_id, redirect_uri, code_challenge, resource, expires_at)
           VALUES ($1, $2, $3, $4, 'r', 'c', 'r', now() + $5::interval)`,
          [createHash('sha256').update(label).digest(), grant.account_id, grant.id, grant.client_id, expires],
        );
      };
      await insertCode('code expired long ago', '-8 days');
      await insertCode('code expired just now', '-1 minute');
      // The day before: every refresh token of the live grant but two kept; after: the same rows, minus the old ones.
      const hashes = async (table: string, column: string) =>
        (await su.query(`SELECT encode(${column}, 'hex') AS h FROM ${table}`)).rows.map((r: { h: string }) => r.h);
      const hex = (label: string) => createHash('sha256').update(label).digest('hex');
      const refreshBefore = await hashes('oauth_refresh_tokens', 'secret_hash');

      const deleted = await sweepOAuth(t.service.db, 7 * 86_400);

      const clientIds = (await su.query('SELECT id FROM oauth_clients')).rows.map((r: { id: string }) => r.id);
      expect(clientIds).not.toContain(unused);
      expect(clientIds).toContain(fresh);
      expect(clientIds).toContain(grant.client_id);
      const refreshAfter = await hashes('oauth_refresh_tokens', 'secret_hash');
      expect(refreshAfter).not.toContain(hex('expired long ago'));
      expect(refreshAfter).not.toContain(hex('rotated long ago'));
      expect(refreshAfter).toEqual(refreshBefore.filter((h) => h !== hex('expired long ago') && h !== hex('rotated long ago')));
      const codes = await hashes('oauth_codes', 'code_hash');
      expect(codes).not.toContain(hex('code expired long ago'));
      expect(codes).toContain(hex('code expired just now'));
      // The client never used, two refresh tokens and a code.
      expect(deleted).toBe(4);

      // A revoked grant's refresh tokens go once the revocation is older than the retention.
      await row("UPDATE oauth_grants SET revoked_at = now() - interval '8 days' WHERE id = $1", [grant.id]);
      await sweepOAuth(t.service.db, 7 * 86_400);
      expect((await su.query('SELECT id FROM oauth_refresh_tokens WHERE grant_id = $1', [grant.id])).rows).toEqual([]);
      expect((await su.query('SELECT id FROM oauth_grants WHERE id = $1', [grant.id])).rows).toHaveLength(1);
      // Nothing left to delete: a second sweep deletes nothing.
      expect(await sweepOAuth(t.service.db, 7 * 86_400)).toBe(0);
    } finally {
      await su.end();
    }
  });
});
