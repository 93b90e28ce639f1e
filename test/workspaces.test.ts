import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setAccountLimits } from '../db/accounts.js';
import { startTestService, type TestService } from './helpers/service.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => t?.stop());

describe('POST /v1/workspaces name rules', () => {
  const cases: Array<[string, number]> = [
    ['a', 201],
    ['7', 201],
    ['a'.repeat(64), 201],
    ['a'.repeat(65), 400],
    ['ab-cd_ef', 201],
    ['x-', 400],
    ['-x', 400],
    ['_x', 400],
    ['x_', 400],
    ['Docs', 400],
    ['DOCS', 400],
    ['has space', 400],
    ['dot.name', 400],
    ['', 400],
    ['über', 400],
    ['a/b', 400],
  ];
  it.each(cases)('%j -> %i', async (name, status) => {
    const r = await t.call('POST', '/v1/workspaces', { body: { name } });
    expect(r.status).toBe(status);
    if (status === 201) expect(r.json).toEqual({ name });
    else expect(Object.keys(r.json)).toEqual(['error']);
    if (status === 400) expect(r.json.error).toMatch(/name/);
  });
});

describe('POST /v1/workspaces bodies', () => {
  const cases: Array<[string, string | object | undefined, RegExp]> = [
    ['missing body', undefined, /JSON object is required/],
    ['malformed JSON', '{"name": ', /not valid JSON/],
    ['array', [], /expected a JSON object/],
    ['number name', { name: 5 }, /name/],
    ['missing name', {}, /name/],
    ['unknown property', { name: 'ok-name', extra: true }, /unknown property "extra"/],
    ['null', 'null', /expected a JSON object/],
  ];
  it.each(cases)('%s -> 400 naming the problem', async (_label, body, message) => {
    const r = await t.call('POST', '/v1/workspaces', { body });
    expect(r.status).toBe(400);
    expect(r.json).toEqual({ error: expect.stringMatching(message) });
  });

  it('refuses an oversized body with 413 and creates nothing', async () => {
    const r = await t.call('POST', '/v1/workspaces', { body: { name: 'big', pad: 'x'.repeat(70_000) } });
    expect(r.status).toBe(413);
    const list = await t.call('GET', '/v1/workspaces');
    expect(list.json.workspaces.map((w: { name: string }) => w.name)).not.toContain('big');
  });
});

describe('workspace lifecycle', () => {
  it('creates, lists, refuses a duplicate, deletes', async () => {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'life' } })).status).toBe(201);
    const dup = await t.call('POST', '/v1/workspaces', { body: { name: 'life' } });
    expect(dup.status).toBe(409);
    expect(dup.json).toEqual({ error: 'workspace already exists: life' });

    const list = await t.call('GET', '/v1/workspaces');
    expect(list.status).toBe(200);
    const entry = list.json.workspaces.find((w: { name: string }) => w.name === 'life');
    expect(entry).toEqual({ name: 'life', version: 0, createdAt: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/) });
    expect(Math.abs(Date.parse(entry.createdAt) - Date.now())).toBeLessThan(60_000);

    const del = await t.call('DELETE', '/v1/workspaces/life');
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expect((await t.call('DELETE', '/v1/workspaces/life')).status).toBe(404);
    expect((await t.call('GET', '/v1/workspaces/life/files')).status).toBe(404);
    // The name is free again.
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'life' } })).status).toBe(201);
  });

  it('answers 404 for a name that cannot exist', async () => {
    const r = await t.call('DELETE', '/v1/workspaces/NOPE');
    expect(r.status).toBe(404);
    expect(r.json.error).toMatch(/no such workspace/);
  });

  it('refuses a workspace past the plan quota with 403', async () => {
    const key = await t.newAccount('quota-test');
    await setAccountLimits(t.service.db, 'quota-test', { limits: { maxWorkspaces: 2 } });
    for (const name of ['q1', 'q2']) expect((await t.call('POST', '/v1/workspaces', { key, body: { name } })).status).toBe(201);
    const r = await t.call('POST', '/v1/workspaces', { key, body: { name: 'q3' } });
    expect(r.status).toBe(403);
    expect(r.json.error).toMatch(/quota/);
    const list = await t.call('GET', '/v1/workspaces', { key });
    expect(list.json.workspaces.map((w: { name: string }) => w.name)).toEqual(['q1', 'q2']);
  });

  it('keeps the quota under concurrent creation', async () => {
    const key = await t.newAccount('quota-race');
    await setAccountLimits(t.service.db, 'quota-race', { limits: { maxWorkspaces: 3 } });
    const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => t.call('POST', '/v1/workspaces', { key, body: { name: `r${i}` } })));
    expect(replies.filter((r) => r.status === 201)).toHaveLength(3);
    expect(replies.filter((r) => r.status === 403)).toHaveLength(7);
  });
});

describe('unknown routes', () => {
  it('answers a JSON 404', async () => {
    const r = await t.call('GET', '/v1/nothing-here');
    expect(r.status).toBe(404);
    expect(Object.keys(r.json)).toEqual(['error']);
  });
});
