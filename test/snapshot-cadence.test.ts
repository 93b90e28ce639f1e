/**
 * When a shard is snapshotted: a copy costs the whole shard, so a bulk upload, which ingest
 * takes in batches with idle moments between them, is copied once its changes stop, not every
 * VFS_SNAPSHOT_CHANGES files. Runs on whichever store the run uses.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openObjectStore } from '../storage/open-store.js';
import { put, settled, startTestService, type TestService } from './helpers/service.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService({ VFS_SNAPSHOT_CHANGES: '5' });
  expect((await t.call('POST', '/v1/workspaces', { body: { name: 'bulk' } })).status).toBe(201);
});
afterAll(async () => t?.stop());

describe('shard snapshots', () => {
  it('a bulk upload in bursts, each ingested before the next, is snapshotted once its changes stop for 10 s', { timeout: 90_000 }, async () => {
    const su = await t.superuser();
    const workspaceId = (await su.query("SELECT id FROM workspaces WHERE name = 'bulk'")).rows[0].id as string;
    await su.end();
    const objects = openObjectStore(t.config.storage);
    const snapshots = async (): Promise<string[]> => {
      const keys: string[] = [];
      for await (const { key } of objects.list(`shard-snapshots/${workspaceId}/`)) keys.push(key);
      return keys;
    };
    try {
      // Four bursts of 6 files (over the threshold of 5 each), ingest idle after each, the
      // changes never stopped for 10 s: no copy yet.
      for (let burst = 0; burst < 4; burst++) {
        for (let i = 0; i < 6; i++) expect((await put(t, 'bulk', `b${burst}/f${i}.txt`, `burst ${burst} file ${i}\n`)).status).toBe(202);
        expect((await settled(t, 'bulk')).every((f) => f.status === 'ready')).toBe(true);
        await new Promise((resolve) => setTimeout(resolve, 1000));
        expect(await snapshots()).toEqual([]);
      }
      const lastChange = Date.now();
      const deadline = lastChange + 40_000;
      while ((await snapshots()).length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await snapshots()).toHaveLength(1);
      expect(Date.now() - lastChange).toBeGreaterThanOrEqual(8_000);
    } finally {
      objects.close();
    }
  });
});
