/**
 * One database, one mode (db/serving-lock.ts): a running service without cluster mode holds the
 * serving lock alone, takes it again when its connection is killed, and lets go when it stops;
 * cluster nodes share it. Each refusal names VFS_CLUSTER. (The same with service processes, a
 * node of a cluster among them: test/cluster.test.ts.)
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServingLock } from '../db/serving-lock.js';
import { startTestService, type TestService } from './helpers/service.js';

let t: TestService;
let su: pg.Client;
let stopped = false;
// Only a lost connection logs; the locks taken here keep theirs.
const log = (): void => {};

beforeAll(async () => {
  t = await startTestService();
  su = await t.superuser();
});
afterAll(async () => {
  await su?.end();
  if (!stopped) await t?.stop();
});

/** The backends holding this test's database's serving lock (other files' services hold their own), with the mode of each. */
async function holders(): Promise<Array<{ pid: number; mode: string }>> {
  const { rows } = await su.query(
    `SELECT pid, mode FROM pg_locks
      WHERE locktype = 'advisory' AND granted AND classid = 7261 AND objid = 1 AND objsubid = 2
        AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      ORDER BY pid`,
  );
  return rows;
}

describe('the serving lock', () => {
  it('is held alone by a service without cluster mode, and refuses both modes beside it with a message naming VFS_CLUSTER', async () => {
    expect((await holders()).map((h) => h.mode)).toEqual(['ExclusiveLock']);
    await expect(ServingLock.take(t.targets.app, false, log, 300)).rejects.toThrow(
      /^another process already serves this database; two processes on one database must both run with VFS_CLUSTER=on/,
    );
    await expect(ServingLock.take(t.targets.app, true, log, 300)).rejects.toThrow(
      /^another process serves this database without cluster mode \(VFS_CLUSTER=off\)/,
    );
    expect(await holders()).toHaveLength(1);
  });

  it('is taken again by the service when its connection is killed, and keeps refusing others', async () => {
    const [before] = await holders();
    await su.query('SELECT pg_terminate_backend($1)', [before.pid]);
    const deadline = Date.now() + 10_000;
    let after = await holders();
    while (!(after.length === 1 && after[0].pid !== before.pid) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      after = await holders();
    }
    expect(after).toHaveLength(1);
    expect(after[0].pid).not.toBe(before.pid);
    expect(after[0].mode).toBe('ExclusiveLock');
    await expect(ServingLock.take(t.targets.app, false, log, 300)).rejects.toThrow(/another process already serves this database/);
    expect((await t.call('GET', '/v1/workspaces')).status).toBe(200);
  });

  it('is shared by cluster nodes once the service stops, and then refuses a process without cluster mode', async () => {
    const targets = t.targets;
    stopped = true;
    await t.stop();
    expect(await holders()).toEqual([]);
    const nodes = [await ServingLock.take(targets.app, true, log), await ServingLock.take(targets.app, true, log)];
    try {
      expect((await holders()).map((h) => h.mode)).toEqual(['ShareLock', 'ShareLock']);
      await expect(ServingLock.take(targets.app, false, log, 300)).rejects.toThrow(
        /^cluster nodes \(VFS_CLUSTER=on\) serve this database; start this process with VFS_CLUSTER=on too/,
      );
    } finally {
      await Promise.all(nodes.map((n) => n.release()));
    }
    expect(await holders()).toEqual([]);
    const alone = await ServingLock.take(targets.app, false, log);
    await alone.release();
  });
});
