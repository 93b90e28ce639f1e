import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issueManagementKey, listManagementKeys, revokeManagementKey } from '../db/accounts.js';
import { newCredential } from '../core/credentials.js';
import { startTestService, type TestService } from './helpers/service.js';

let t: TestService;
let token: string;
let tokenId: string;
beforeAll(async () => {
  // A failure window of one second: the expiry test below then sees none of the earlier tests'
  // failures, so its cached token takes the path that skips the failure lock (Guard.principal).
  t = await startTestService({ VFS_AUTH_FAILURE_WINDOW_SECONDS: '1' });
  expect((await t.call('POST', '/v1/workspaces', { body: { name: 'main' } })).status).toBe(201);
  const minted = await t.call('POST', '/v1/workspaces/main/tokens', { body: {} });
  token = minted.json.token;
  tokenId = minted.json.id;
});
afterAll(async () => t?.stop());

/** Every management route, with a body where it takes one. */
const MANAGEMENT_ROUTES: Array<[string, string, unknown?]> = [
  ['POST', '/v1/workspaces', { name: 'by-token' }],
  ['GET', '/v1/workspaces'],
  ['DELETE', '/v1/workspaces/main'],
  ['GET', '/v1/workspaces/main/files'],
  ['POST', '/v1/workspaces/main/tokens', {}],
  ['DELETE', '/v1/tokens/00000000-0000-4000-8000-000000000000'],
  ['GET', '/v1/workspaces/main/audit'],
];

describe('401 for bad credentials', () => {
  const valid = newCredential('management_key');
  const cases: Array<[string, Record<string, string>]> = [
    ['no header', {}],
    ['empty bearer', { authorization: 'Bearer ' }],
    ['basic scheme', { authorization: 'Basic dXNlcjpwYXNz' }],
    ['no scheme', { authorization: valid }],
    ['wrong prefix', { authorization: 'Bearer svc_xx_' + valid.slice(7) }],
    ['bad checksum', { authorization: 'Bearer ' + valid.slice(0, -1) + (valid.endsWith('A') ? 'B' : 'A') }],
    ['truncated', { authorization: 'Bearer ' + valid.slice(0, -3) }],
    ['well-formed but unknown key', { authorization: 'Bearer ' + valid }],
    ['well-formed but unknown token', { authorization: 'Bearer ' + newCredential('token') }],
  ];
  for (const [method, path, body] of MANAGEMENT_ROUTES) {
    it.each(cases)(`${method} ${path}: %s`, async (_label, headers) => {
      const r = await t.call(method, path, { key: null, headers, body });
      expect(r.status).toBe(401);
      expect(r.json).toEqual({ error: expect.any(String) });
      expect(r.headers.get('www-authenticate')).toBe('Bearer');
    });
  }
});

describe('scoped tokens on management routes', () => {
  it.each(MANAGEMENT_ROUTES)('%s %s -> 403', async (method, path, body) => {
    const r = await t.call(method, path, { key: token, body });
    expect(r.status).toBe(403);
    expect(r.json).toEqual({ error: expect.stringMatching(/scoped token/) });
  });

  it('changed nothing', async () => {
    const list = await t.call('GET', '/v1/workspaces');
    expect(list.json.workspaces.map((w: { name: string }) => w.name)).toEqual(['main']);
  });
});

describe('revocation and expiry', () => {
  it('refuses a revoked token on the next request, even after it was just used', async () => {
    const minted = await t.call('POST', '/v1/workspaces/main/tokens', { body: {} });
    const other = minted.json.token;
    // Used (and cached) a moment before: a management route answers 403, so the credential was accepted.
    expect((await t.call('GET', '/v1/workspaces', { key: other })).status).toBe(403);
    expect((await t.call('DELETE', `/v1/tokens/${minted.json.id}`)).status).toBe(204);
    expect((await t.call('GET', '/v1/workspaces', { key: other })).status).toBe(401);
  });

  it('refuses an expired token', async () => {
    const minted = await t.call('POST', '/v1/workspaces/main/tokens', { body: { ttlSeconds: 60 } });
    const client = await t.superuser();
    try {
      await client.query("UPDATE tokens SET expires_at = now() - interval '1 second' WHERE id = $1", [minted.json.id]);
    } finally {
      await client.end();
    }
    const r = await t.call('GET', '/v1/workspaces', { key: minted.json.token });
    expect(r.status).toBe(401);
  });

  it('accepts a token one second before its expiry and refuses it one second after, cached or not', async () => {
    const minted = await t.call('POST', '/v1/workspaces/main/tokens', { body: { ttlSeconds: 60 } });
    const client = await t.superuser();
    let expiresAt: number;
    try {
      const { rows } = await client.query("UPDATE tokens SET expires_at = now() + interval '2 seconds' WHERE id = $1 RETURNING expires_at", [minted.json.id]);
      expiresAt = (rows[0].expires_at as Date).getTime();
    } finally {
      await client.end();
    }
    // Read tools accept a token: a 200 proves the credential was accepted (and caches it).
    const untilOneSecondBefore = expiresAt - 1000 - Date.now();
    if (untilOneSecondBefore > 0) await new Promise((r) => setTimeout(r, untilOneSecondBefore));
    expect((await t.call('GET', '/v1/workspaces/main/ls', { key: minted.json.token })).status).toBe(200);
    await new Promise((r) => setTimeout(r, expiresAt + 1000 - Date.now()));
    const after = await t.call('GET', '/v1/workspaces/main/ls', { key: minted.json.token });
    expect(after.status).toBe(401);
    expect(after.text).toMatch(/expired/);
  });

  it('refuses a management key revoked by the operator command, across the auth cache', async () => {
    const { key, id } = await issueManagementKey(t.service.db, 'default');
    expect((await t.call('GET', '/v1/workspaces', { key })).status).toBe(200);
    expect(await revokeManagementKey(t.service.db, id)).toBe(true);
    // The revocation reaches the service by NOTIFY; allow the notification a moment to arrive.
    let status = 0;
    for (let i = 0; i < 50 && status !== 401; i++) {
      status = (await t.call('GET', '/v1/workspaces', { key })).status;
      if (status !== 401) await new Promise((r) => setTimeout(r, 20));
    }
    expect(status).toBe(401);
    const keys = await listManagementKeys(t.service.db, 'default');
    expect(keys.find((k) => k.id === id)?.revokedAt).not.toBeNull();
  });

  it('tokens of a deleted workspace answer 401', async () => {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'doomed' } })).status).toBe(201);
    const minted = await t.call('POST', '/v1/workspaces/doomed/tokens', { body: {} });
    expect((await t.call('GET', '/v1/workspaces', { key: minted.json.token })).status).toBe(403);
    expect((await t.call('DELETE', '/v1/workspaces/doomed')).status).toBe(204);
    expect((await t.call('GET', '/v1/workspaces', { key: minted.json.token })).status).toBe(401);
    expect((await t.call('DELETE', `/v1/tokens/${minted.json.id}`)).status).toBe(404);
  });
});

describe('cross-account isolation', () => {
  let otherKey: string;
  beforeAll(async () => {
    otherKey = await t.newAccount('other');
    expect((await t.call('POST', '/v1/workspaces', { key: otherKey, body: { name: 'theirs' } })).status).toBe(201);
  });

  const foreign: Array<[string, string, unknown?]> = [
    ['DELETE', '/v1/workspaces/theirs'],
    ['GET', '/v1/workspaces/theirs/files'],
    ['POST', '/v1/workspaces/theirs/tokens', {}],
    ['GET', '/v1/workspaces/theirs/audit'],
  ];
  it.each(foreign)('%s %s of another account -> 404', async (method, path, body) => {
    const r = await t.call(method, path, { body });
    expect(r.status).toBe(404);
    expect(r.json.error).toMatch(/no such workspace/);
  });

  it('lists only its own workspaces', async () => {
    const mine = await t.call('GET', '/v1/workspaces');
    expect(mine.json.workspaces.map((w: { name: string }) => w.name)).not.toContain('theirs');
    const theirs = await t.call('GET', '/v1/workspaces', { key: otherKey });
    expect(theirs.json.workspaces.map((w: { name: string }) => w.name)).toEqual(['theirs']);
  });

  it('cannot revoke another account token (404), which keeps working', async () => {
    const r = await t.call('DELETE', `/v1/tokens/${tokenId}`, { key: otherKey });
    expect(r.status).toBe(404);
    expect((await t.call('GET', '/v1/workspaces', { key: token })).status).toBe(403);
  });

  it('the same workspace name may exist in two accounts', async () => {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'theirs' } })).status).toBe(201);
    expect((await t.call('DELETE', '/v1/workspaces/theirs')).status).toBe(204);
    const theirs = await t.call('GET', '/v1/workspaces', { key: otherKey });
    expect(theirs.json.workspaces.map((w: { name: string }) => w.name)).toEqual(['theirs']);
  });
});
