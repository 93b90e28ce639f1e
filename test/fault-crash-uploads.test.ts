/**
 * Crash during uploads: the service (a child process, as `npm start` runs it)
 * is SIGKILLed at random moments under a stream of concurrent uploads, about
 * one kill in five while it is still starting, and restarted on the same data
 * directory each time, adopting its embedded PostgreSQL. Afterwards every
 * upload answered 202 is there and `ready`, each file is in its shard once
 * with the right text, and once the blob sweep has run every blob on disk
 * belongs to a file (and every file's blob is on disk).
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../service/config.js';
import { openObjectStore } from '../storage/open-store.js';
import { FaultService, checkUploads, uploadsUnderKills } from './helpers/faults.js';

const KILLS = 20;
const SEED = Number(process.env.FAULT_SEED ?? Date.now() % 1_000_000);

let svc: FaultService | null = null;
afterAll(async () => svc?.dispose());

describe('SIGKILL during uploads', () => {
  it(`survives ${KILLS} kills without losing an acknowledged upload (seed ${SEED})`, { timeout: 240_000 }, async () => {
    // A short lease, so that jobs claimed by a killed process are claimed again soon; attempts are
    // not the subject here (a kill mid-file counts as one, and this test kills every second).
    svc = await FaultService.create({ VFS_INGEST_LEASE_SECONDS: '2', VFS_INGEST_MAX_ATTEMPTS: '100' });
    const run = await uploadsUnderKills(svc, 'ws', { kills: KILLS, clients: 6, roundMs: 900, seed: SEED });
    expect(run.kills).toBe(KILLS);
    // Every round that took uploads was killed after at least one got through, however slow the
    // machine (originals on Swift share its two cores), so the kills land among uploads.
    expect(run.uploadRounds).toBeGreaterThanOrEqual(KILLS / 4);
    expect(run.roundsWithoutUploads).toBe(0);
    expect(run.acknowledged.size).toBeGreaterThanOrEqual(run.uploadRounds);

    // Plus a blob no file will ever reference and a stale temp file, as a kill between publishing
    // a blob and committing its row, or in the middle of a body, leaves them.
    const objects = openObjectStore(loadConfig(svc.environment).storage);
    let account: string | undefined;
    // The account of any stored original: an object of its own, or a pack (an S3 store's).
    for (const prefix of ['blobs/', 'packs/']) {
      for await (const { key } of objects.list(prefix)) {
        account ??= /^(?:blobs\/([^/]+)\/[0-9a-f]{2}|packs\/([^/]+))\//
          .exec(key)
          ?.slice(1)
          .find((a) => a !== undefined);
        if (account !== undefined) break;
      }
    }
    const orphan = join(svc.dataDir, 'orphan');
    await writeFile(orphan, 'orphan');
    await objects.putFile(`blobs/${account}/ff/${'f'.repeat(64)}`, orphan);
    objects.close();
    await writeFile(join(svc.dataDir, 'blobs', 'tmp', 'stale'), 'half an upload');

    const check = await checkUploads(svc, 'ws', run);
    expect(check.tempFiles).toBe(0);
    expect(check.lost).toEqual([]);
    expect(check.found).toBe(run.acknowledged.size);
    expect(check.phantoms).toEqual([]);
    expect(check.findProblems).toEqual([]);
    expect(check.grepProblems).toEqual([]);
    expect({ orphanBlobs: check.orphanBlobs, missingBlobs: check.missingBlobs }).toEqual({ orphanBlobs: 0, missingBlobs: 0 });
    expect(await svc.stop()).toBe(0);
  });
});
