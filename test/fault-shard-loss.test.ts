/**
 * Shard loss: a workspace shard is a cache of PostgreSQL's file rows and the
 * stored originals, and is rebuilt from them. A shard directory deleted while
 * the service was stopped, a shard whose data file is garbage (lmdb-js would
 * crash the process opening it: it is found by a probe in a child process), a
 * shard of an older format, a shard entry whose file row is gone (a deletion
 * cut short), and a rebuild asked for with the operator command while the
 * service runs: after each, the read tools answer exactly as before, and nothing was extracted
 * again (the texts kept in the object store are read instead).
 */
import { readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { EmbeddedCluster } from '../db/embedded-postgres.js';
import { acquireShardEnv, releaseShardEnv } from '../engine/shard-env.js';
import { EMBEDDED_NAMES } from '../service/service.js';
import { FaultService, liftReadLimits, listFiles, settled } from './helpers/faults.js';
import { makePdf } from './helpers/make-pdf.js';
import { loadConfig } from '../service/config.js';
import { openObjectStore } from '../storage/open-store.js';

let svc: FaultService | null = null;
afterAll(async () => svc?.dispose());

/** The calls whose answers must survive a rebuild, each with the management key and a scoped token. */
const QUERIES = [
  'grep?pattern=needle',
  'grep?pattern=needle&output_mode=count',
  'grep?pattern=needle%20[0-9]%2B&output_mode=content&-C=1',
  'grep?pattern=pdf&-i=true&output_mode=content',
  'find?pattern=**/*',
  'ls?path=/',
  'ls?path=/d1',
  'cat?path=/doc.pdf',
  'cat?path=/d0/f0.txt',
];

async function answers(token: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const q of QUERIES) {
    for (const [who, key] of [
      ['key', svc!.key],
      ['token', token],
    ] as const) {
      const r = await svc!.api('GET', `/v1/workspaces/ws/${q}`, undefined, key);
      out[`${who} ${q}`] = `${r.status}\n${await r.text()}`;
    }
  }
  return out;
}

/** Extractions the running service has made since it started (its metrics; kept texts are not extractions). */
async function extractions(): Promise<number> {
  const url = [...svc!.current!.stderr().matchAll(/metrics on (http:\/\/\S+\/metrics)/g)].at(-1)![1];
  const text = await (await fetch(url)).text();
  let count = 0;
  for (const [, n] of text.matchAll(/^vfs_extraction_seconds_count\{[^}]*\} (\d+)$/gm)) count += Number(n);
  return count;
}

/** Waits until the running service has logged a line matching `pattern`. */
async function logged(pattern: RegExp): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!pattern.test(svc!.current!.stderr())) {
    if (Date.now() > deadline) throw new Error(`not logged: ${pattern}\n${svc!.current!.stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe('shard loss', () => {
  it('rebuilds a missing, damaged or stale shard from the kept texts and PostgreSQL, extracting nothing', { timeout: 120_000 }, async () => {
    svc = await FaultService.create({ VFS_METRICS_PORT: '0' });
    await svc.start();
    expect((await svc.api('POST', '/v1/workspaces', JSON.stringify({ name: 'ws' }))).status).toBe(201);
    for (let i = 0; i < 30; i++) {
      const visibility = i % 3 === 0 ? '?visibility=group:eng' : i % 3 === 1 ? '?visibility=group:ops' : '';
      const body = `needle ${i}\n` + `line ${i}\n`.repeat(i % 7) + `needle ${i + 100}\n`;
      expect((await svc.api('PUT', `/v1/workspaces/ws/files/d${i % 4}/f${i}.txt${visibility}`, body)).status).toBe(202);
    }
    expect((await svc.api('PUT', '/v1/workspaces/ws/files/doc.pdf', await makePdf([['A PDF page with a needle'], ['Page two']]))).status).toBe(202);
    expect((await settled(svc, 'ws')).every((f) => f.status === 'ready')).toBe(true);
    expect(await extractions()).toBe(31);
    await liftReadLimits(svc);
    const minted = await svc.api('POST', '/v1/workspaces/ws/tokens', JSON.stringify({ claims: ['group:eng'] }));
    const token = ((await minted.json()) as { token: string }).token;
    const before = await answers(token);
    expect(before['key grep?pattern=needle&output_mode=count'].split('\n').filter((l) => l !== '')).toHaveLength(32);
    const shards = join(svc.dataDir, 'shards');
    const [workspaceId] = await readdir(shards);

    // 1. The shard directory is deleted while the service is stopped.
    expect(await svc.stop()).toBe(0);
    await rm(join(shards, workspaceId), { recursive: true });
    await svc.start();
    await logged(/repaired: 31 files re-queued/);
    expect((await settled(svc, 'ws')).every((f) => f.status === 'ready')).toBe(true);
    expect(await answers(token)).toEqual(before);
    // Rebuilt from the texts kept in the object store: nothing was extracted again.
    expect(await extractions()).toBe(0);

    // 2. Its data file is garbage.
    expect(await svc.stop()).toBe(0);
    await writeFile(join(shards, workspaceId, 'data.mdb'), Buffer.alloc(1 << 16, 0x5a));
    // lmdb-js on garbage pages crashes with SIGSEGV or stops at one of LMDB's assertions (SIGABRT).
    expect((await svc.start()).stderr()).toMatch(/cannot be opened \(the process that opened it died \(SIG(?:SEGV|ABRT|BUS)\)\)/);
    await logged(/repaired: 31 files re-queued/);
    expect((await settled(svc, 'ws')).every((f) => f.status === 'ready')).toBe(true);
    expect(await answers(token)).toEqual(before);
    // Rebuilt from the texts kept in the object store: nothing was extracted again.
    expect(await extractions()).toBe(0);

    // 2b. It was written in an older format (version 2 listed quadgrams without folding their case).
    expect(await svc.stop()).toBe(0);
    const old = acquireShardEnv(join(shards, workspaceId));
    await old.info.put('format', 2);
    await releaseShardEnv(old);
    expect((await svc.start()).stderr()).toMatch(/cannot be opened \(shard .* has format 2, this build reads 3: rebuild it\)/);
    await logged(/repaired: 31 files re-queued/);
    expect((await settled(svc, 'ws')).every((f) => f.status === 'ready')).toBe(true);
    expect(await answers(token)).toEqual(before);
    // Rebuilt from the texts kept in the object store: nothing was extracted again.
    expect(await extractions()).toBe(0);

    // 3. A file row deleted without its shard entry (a crash between the two steps of a DELETE).
    expect(await svc.stop()).toBe(0);
    const cluster = await EmbeddedCluster.start(svc.dataDir);
    const su = new pg.Client({ ...cluster.address, database: EMBEDDED_NAMES.database });
    await su.connect();
    await su.query("DELETE FROM files WHERE path = '/d3/f3.txt'");
    await su.end();
    await cluster.stop();
    await svc.start();
    await logged(/0 files re-queued, 1 stale entries removed/);
    await settled(svc, 'ws');
    const pruned = await answers(token);
    for (const [call, answer] of Object.entries(before)) {
      if (!answer.includes('/d3/f3.txt')) expect([call, pruned[call]]).toEqual([call, answer]);
      else expect([call, pruned[call]]).not.toEqual([call, answer]);
    }
    expect(pruned['key find?pattern=**/*']).not.toContain('/d3/f3.txt');
    expect(pruned['key grep?pattern=needle']).not.toContain('/d3/f3.txt');

    // 4. The operator asks for a rebuild while the service runs.
    const admin = await svc.admin(['rebuild-shard', 'default', 'ws']);
    expect(admin.stderr).toMatch(/rebuild of default\/ws requested/);
    await logged(/rebuilt on request: 30 files re-queued/);
    expect((await settled(svc, 'ws')).every((f) => f.status === 'ready')).toBe(true);
    expect((await listFiles(svc, 'ws')).length).toBe(30);
    expect(await answers(token)).toEqual(pruned);
    expect(await extractions()).toBe(0);
    expect(await svc.stop()).toBe(0);
  });

  it('restores a lost shard from its snapshot in the object store plus the changes since, extracting nothing', { timeout: 120_000 }, async () => {
    await svc?.dispose();
    // A snapshot once ingest goes idle after 31 changes: the first 31 files make one (in whatever
    // batches ingest takes them; idle after 30 would leave one out), the next 3 changes do not.
    svc = await FaultService.create({ VFS_METRICS_PORT: '0', VFS_SNAPSHOT_CHANGES: '31' });
    await svc.start();
    expect((await svc.api('POST', '/v1/workspaces', JSON.stringify({ name: 'ws' }))).status).toBe(201);
    for (let i = 0; i < 30; i++) {
      const body = `needle ${i}\n` + `line ${i}\n`.repeat(i % 7);
      expect((await svc.api('PUT', `/v1/workspaces/ws/files/d${i % 4}/f${i}.txt`, body)).status).toBe(202);
    }
    expect((await svc.api('PUT', '/v1/workspaces/ws/files/doc.pdf', await makePdf([['A PDF page with a needle'], ['Page two']]))).status).toBe(202);
    expect((await settled(svc, 'ws')).every((f) => f.status === 'ready')).toBe(true);
    await liftReadLimits(svc);
    const minted = await svc.api('POST', '/v1/workspaces/ws/tokens', JSON.stringify({ claims: ['*'] }));
    const token = ((await minted.json()) as { token: string }).token;
    const snapshotKey = async (): Promise<string | null> => {
      const objects = openObjectStore(loadConfig(svc!.environment).storage);
      try {
        const keys: string[] = [];
        for await (const { key } of objects.list('shard-snapshots/')) keys.push(key);
        expect(keys.length).toBeLessThanOrEqual(1); // a newer snapshot replaces the older one
        return keys[0] ?? null;
      } finally {
        objects.close();
      }
    };
    const deadline = Date.now() + 30_000;
    while ((await snapshotKey()) === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    const snapshot = await snapshotKey();
    expect(snapshot).toMatch(/^shard-snapshots\/[0-9a-f-]{36}\/[0-9a-z]+-[0-9a-f]{8}\.mdb$/);

    // Changes after the snapshot: one file replaced, one added, one deleted.
    expect((await svc.api('PUT', '/v1/workspaces/ws/files/d1/f1.txt', 'needle replaced\n')).status).toBe(202);
    expect((await svc.api('PUT', '/v1/workspaces/ws/files/new.txt', 'a needle added later\n')).status).toBe(202);
    expect((await svc.api('DELETE', '/v1/workspaces/ws/files/d2/f2.txt')).status).toBe(204);
    expect((await settled(svc, 'ws')).every((f) => f.status === 'ready')).toBe(true);
    const before = await answers(token);
    expect(before['key find?pattern=**/*']).toContain('/new.txt');
    expect(await snapshotKey()).toBe(snapshot);

    expect(await svc.stop()).toBe(0);
    const shards = join(svc.dataDir, 'shards');
    for (const name of await readdir(shards)) await rm(join(shards, name), { recursive: true });
    await svc.start();
    await logged(/restored from its snapshot in \d+ ms/);
    await logged(/repaired: 2 files re-queued, 1 stale entries removed/);
    expect((await settled(svc, 'ws')).every((f) => f.status === 'ready')).toBe(true);
    expect(await answers(token)).toEqual(before);
    expect(await extractions()).toBe(0);
    expect(await svc.stop()).toBe(0);
  });
});
