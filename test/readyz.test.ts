import { type AddressInfo, createServer } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestService, type TestService } from './helpers/service.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService();
});
afterAll(async () => t?.stop());

async function cutRole(role: string, login: boolean): Promise<void> {
  const su = await t.superuser();
  try {
    await su.query(`ALTER ROLE ${su.escapeIdentifier(role)} ${login ? 'LOGIN' : 'NOLOGIN'}`);
    if (!login) await su.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1', [role]);
  } finally {
    await su.end();
  }
}

describe('probes', () => {
  it('healthz needs no credential', async () => {
    const r = await t.call('GET', '/healthz', { key: null });
    expect([r.status, r.text]).toEqual([200, 'ok']);
  });

  it('a second service on the same port does not start, and the first keeps serving', async () => {
    // Named explicitly: this uWS build binds with SO_REUSEPORT unless told not to, and Linux
    // would then let a second socket share a named port (not one that port 0 picked).
    const free = createServer();
    await new Promise<void>((resolve) => free.listen(0, '127.0.0.1', resolve));
    const port = String((free.address() as AddressInfo).port);
    await new Promise((resolve) => free.close(resolve));
    const first = await startTestService({ PORT: port });
    try {
      await expect(startTestService({ PORT: port })).rejects.toThrow(`cannot listen on 127.0.0.1:${port}`);
      for (let i = 0; i < 5; i++) expect((await fetch(first.url + '/readyz', { headers: { connection: 'close' } })).status).toBe(200);
    } finally {
      await first.stop();
    }
  });

  it.each(['appRole', 'ownerRole'] as const)('readyz is 503 while the %s connection is down, 200 again after', async (which) => {
    expect((await t.call('GET', '/readyz', { key: null })).json).toEqual({ ok: true });
    await cutRole(t.names[which], false);
    try {
      const down = await t.call('GET', '/readyz', { key: null });
      expect(down.status).toBe(503);
      expect(down.json).toEqual({ ok: false });
    } finally {
      await cutRole(t.names[which], true);
    }
    const up = await t.call('GET', '/readyz', { key: null });
    expect(up.status).toBe(200);
    expect(up.json).toEqual({ ok: true });
  });

  it('a management request while the application role is down answers 503, not 500', async () => {
    await cutRole(t.names.appRole, false);
    try {
      const r = await t.call('GET', '/v1/workspaces');
      expect(r.status).toBe(503);
      expect(r.json).toEqual({ error: expect.stringMatching(/database/) });
    } finally {
      await cutRole(t.names.appRole, true);
    }
    expect((await t.call('GET', '/v1/workspaces')).status).toBe(200);
  });
});
