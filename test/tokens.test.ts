import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from './helpers/service.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
  expect((await t.call('POST', '/v1/workspaces', { body: { name: 'ws' } })).status).toBe(201);
});
afterAll(async () => t?.stop());

describe('POST /v1/workspaces/{ws}/tokens', () => {
  it('mints with defaults: claims ["*"], one hour', async () => {
    const before = Date.now();
    const r = await t.call('POST', '/v1/workspaces/ws/tokens');
    expect(r.status).toBe(201);
    expect(Object.keys(r.json).sort()).toEqual(['claims', 'expiresAt', 'id', 'token']);
    expect(r.json.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(r.json.token).toMatch(/^svc_at_[A-Za-z0-9_-]{49}$/);
    expect(r.json.claims).toEqual(['*']);
    const ttl = Date.parse(r.json.expiresAt) - before;
    expect(ttl).toBeGreaterThan(3595_000);
    expect(ttl).toBeLessThan(3605_000);
  });

  it('mints with claims and a TTL', async () => {
    const r = await t.call('POST', '/v1/workspaces/ws/tokens', { body: { claims: ['user:ann', 'group:eng'], ttlSeconds: 60 } });
    expect(r.status).toBe(201);
    expect(r.json.claims).toEqual(['user:ann', 'group:eng']);
    expect(Date.parse(r.json.expiresAt) - Date.now()).toBeLessThan(61_000);
  });

  it('stores only a hash of the token', async () => {
    const r = await t.call('POST', '/v1/workspaces/ws/tokens', { body: {} });
    const client = await t.superuser();
    try {
      const { rows } = await client.query('SELECT secret_hash FROM tokens WHERE id = $1', [r.json.id]);
      expect(rows[0].secret_hash).toHaveLength(32);
      const dump = await client.query("SELECT count(*)::int AS n FROM tokens WHERE row_to_json(tokens)::text LIKE '%' || $1 || '%'", [
        r.json.token.slice(7, 30),
      ]);
      expect(dump.rows[0].n).toBe(0);
    } finally {
      await client.end();
    }
  });

  const bad: Array<[string, unknown, RegExp]> = [
    ['claims empty', { claims: [] }, /claims/],
    ['claims not an array', { claims: 'user:ann' }, /claims/],
    ['empty claim', { claims: [''] }, /claim/],
    ['claim with bad shape', { claims: ['admin'] }, /claim/],
    ['claim id too long', { claims: ['user:' + 'a'.repeat(129)] }, /claim/],
    ['65 claims', { claims: Array.from({ length: 65 }, (_, i) => `user:u${i}`) }, /claims/],
    ['ttl too small', { ttlSeconds: 59 }, /ttlSeconds/],
    ['ttl too large', { ttlSeconds: 86401 }, /ttlSeconds/],
    ['ttl fractional', { ttlSeconds: 60.5 }, /ttlSeconds/],
    ['ttl string', { ttlSeconds: '600' }, /ttlSeconds/],
    ['unknown property', { claims: ['*'], scope: 'all' }, /unknown property "scope"/],
    ['not an object', [1], /JSON object/],
    ['malformed JSON', '{', /JSON/],
  ];
  it.each(bad)('%s -> 400', async (_label, body, message) => {
    const r = await t.call('POST', '/v1/workspaces/ws/tokens', { body });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: expect.stringMatching(message) });
  });

  it('edges of the ranges are accepted', async () => {
    for (const body of [{ ttlSeconds: 60 }, { ttlSeconds: 86400 }, { claims: Array.from({ length: 64 }, (_, i) => `group:g${i}`) }]) {
      expect((await t.call('POST', '/v1/workspaces/ws/tokens', { body })).status).toBe(201);
    }
  });

  it('404 for a missing workspace', async () => {
    expect((await t.call('POST', '/v1/workspaces/nope/tokens', { body: {} })).status).toBe(404);
  });
});

describe('DELETE /v1/tokens/{id}', () => {
  it('is idempotent', async () => {
    const minted = await t.call('POST', '/v1/workspaces/ws/tokens', { body: {} });
    expect((await t.call('DELETE', `/v1/tokens/${minted.json.id}`)).status).toBe(204);
    const again = await t.call('DELETE', `/v1/tokens/${minted.json.id}`);
    expect(again.status).toBe(204);
    expect(again.text).toBe('');
    expect((await t.call('GET', '/v1/workspaces', { key: minted.json.token })).status).toBe(401);
  });

  it.each([
    ['unknown uuid', '6f1c1d2e-8a4b-4c3d-9e5f-0a1b2c3d4e5f'],
    ['malformed', 'not-a-uuid'],
    ['sql-ish', "1'%20OR%20'1'='1"],
  ])('%s -> 404', async (_label, id) => {
    const r = await t.call('DELETE', `/v1/tokens/${id}`);
    expect(r.status).toBe(404);
    expect(r.json.error).toMatch(/no such token/);
  });
});
