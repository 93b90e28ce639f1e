import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from './helpers/service.js';

let t: TestService;
let workspaceId: string;
let accountId: string;
beforeAll(async () => {
  t = await startTestService();
  expect((await t.call('POST', '/v1/workspaces', { body: { name: 'ws' } })).status).toBe(201);
  const client = await t.superuser();
  try {
    const { rows } = await client.query("SELECT id, account_id FROM workspaces WHERE name = 'ws'");
    workspaceId = rows[0].id;
    accountId = rows[0].account_id;
  } finally {
    await client.end();
  }
});
afterAll(async () => t?.stop());

describe('GET /v1/workspaces/{ws}/files', () => {
  it('an empty workspace lists nothing', async () => {
    const r = await t.call('GET', '/v1/workspaces/ws/files');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ files: [], nextCursor: null });
  });

  it.each([
    ['status=done', /status/],
    ['status=', /status/],
    ['status=ready&status=error', /status.*more than once/],
    ['limit=0', /limit/],
    ['limit=1001', /limit/],
    ['limit=-1', /limit/],
    ['limit=1.5', /limit/],
    ['limit=1e2', /limit/],
    ['limit=abc', /limit/],
    ['cursor=%%%', /cursor/],
    ['cursor=bm90LWEtcGF0aA', /cursor/],
    ['colour=red', /colour/],
  ])('%s -> 400', async (query, message) => {
    const r = await t.call('GET', `/v1/workspaces/ws/files?${query}`);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: expect.stringMatching(message) });
  });

  it.each(['status=pending', 'status=ready', 'status=error', 'limit=1', 'limit=1000'])('%s is accepted', async (query) => {
    expect((await t.call('GET', `/v1/workspaces/ws/files?${query}`)).status).toBe(200);
  });

  it('404 for a missing workspace', async () => {
    expect((await t.call('GET', '/v1/workspaces/none/files')).status).toBe(404);
  });
});

describe('GET /v1/workspaces/{ws}/audit', () => {
  const times: string[] = [];
  beforeAll(async () => {
    // Events are written as the read tools write them: by the application role, inside the account.
    for (let i = 0; i < 5; i++) {
      const ts = await t.service.db.inAccount(accountId, async (tx) => {
        const { rows } = await tx.query(
          `INSERT INTO audit_events (account_id, workspace_id, actor_type, actor_id, tool, params, result_count, latency_ms, ts)
           VALUES ($1, $2, 'management_key', 'k', 'grep', $3, $4, 3, now() + make_interval(secs => $5)) RETURNING ts`,
          [accountId, workspaceId, JSON.stringify({ pattern: `p${i}` }), i === 4 ? null : i, i],
        );
        return rows[0].ts as Date;
      });
      times.push(ts.toISOString());
    }
  });

  it('pages through the events in id order', async () => {
    const seen: Array<{ id: number; params: unknown }> = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const r = await t.call('GET', `/v1/workspaces/ws/audit?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`);
      expect(r.status).toBe(200);
      seen.push(...r.json.events);
      cursor = r.json.nextCursor;
      pages++;
    } while (cursor !== null);
    expect(pages).toBe(3);
    expect(seen.map((e) => e.params)).toEqual([0, 1, 2, 3, 4].map((i) => ({ pattern: `p${i}` })));
    expect(seen.map((e) => e.id)).toEqual([...seen.map((e) => e.id)].sort((a, b) => a - b));
    const last = seen[4] as Record<string, unknown>;
    expect(Object.keys(last).sort()).toEqual(['actorId', 'actorType', 'id', 'latencyMs', 'params', 'resultCount', 'tool', 'ts']);
    expect(last.resultCount).toBeNull();
  });

  it('filters strictly after a time', async () => {
    const r = await t.call('GET', `/v1/workspaces/ws/audit?after=${encodeURIComponent(times[2])}`);
    expect(r.json.events.map((e: { params: { pattern: string } }) => e.params.pattern)).toEqual(['p3', 'p4']);
    expect(r.json.events[0].ts > times[2]).toBe(true);
  });

  it.each([
    ['after=yesterday', /after/],
    ['after=2026-11-21', /after/],
    ['after=2026-13-01T00:00:00Z', /after/],
    ['after=2026-11-21T10:00:00', /after/],
    ['cursor=abc', /cursor/],
    ['cursor=-5', /cursor/],
    ['cursor=1.5', /cursor/],
    ['cursor=99999999999999999999', /cursor/],
    ['limit=0', /limit/],
    ['limit=1001', /limit/],
  ])('%s -> 400', async (query, message) => {
    const r = await t.call('GET', `/v1/workspaces/ws/audit?${query}`);
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: expect.stringMatching(message) });
  });

  it.each(['after=2026-11-21T22:35:02.787Z', 'after=2026-11-21T23:35:02%2B01:00', 'cursor=0', 'limit=1000'])('%s is accepted', async (query) => {
    expect((await t.call('GET', `/v1/workspaces/ws/audit?${query}`)).status).toBe(200);
  });

  it('404 for a missing workspace', async () => {
    expect((await t.call('GET', '/v1/workspaces/none/audit')).status).toBe(404);
  });
});
