/**
 * Originals on a real S3 server (a Swift cluster of this file's own, since it stops and freezes
 * the proxy): uploads land in the bucket, content-addressed; with the store stopped or hung an
 * upload answers 503 with Retry-After and commits nothing, while reads of ready files go on; once
 * the store is back, uploads resume without a restart.
 */
import { createHash } from 'node:crypto';
import { ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { BlobStore } from '../ingest/blob-store.js';
import { sweepBlobs } from '../ingest/uploads.js';
import { openObjectStore } from '../storage/open-store.js';
import { storedOriginals } from './helpers/originals.js';
import { listAll, put, settled, startTestService, type TestService } from './helpers/service.js';
import { startSwift, type SwiftCluster, swiftStorageEnv } from './helpers/swift.js';

let swift: SwiftCluster;
let t: TestService;
let s3: S3Client;
const BUCKET = 'vfs-fault-store';

beforeAll(async () => {
  swift = await startSwift();
  t = await startTestService({
    ...swiftStorageEnv(swift, `s3://${BUCKET}/svc`),
    VFS_S3_TIMEOUT_SECONDS: '1',
  });
  s3 = new S3Client({
    endpoint: swift.endpoint,
    region: swift.region,
    forcePathStyle: true,
    credentials: { accessKeyId: swift.accessKeyId, secretAccessKey: swift.secretAccessKey },
    requestChecksumCalculation: 'WHEN_REQUIRED',
    responseChecksumValidation: 'WHEN_REQUIRED',
  });
  expect((await t.call('POST', '/v1/workspaces', { body: { name: 'ws' } })).status).toBe(201);
  expect((await t.call('POST', '/v1/workspaces', { body: { name: 'other' } })).status).toBe(201);
  expect((await put(t, 'ws', 'ready.txt', 'the needle is here\n')).status).toBe(202);
  await settled(t, 'ws');
});
afterAll(async () => {
  s3?.destroy();
  await t?.stop();
  await swift?.stop();
});

async function keys(): Promise<string[]> {
  const page = await s3.send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: 'svc/' }));
  return (page.Contents ?? []).map((o) => o.Key!).sort();
}

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** Where the bucket holds the original of `body` (its own object or a place in a pack; helpers/originals.ts). */
async function originalsOf(body: string): Promise<string[]> {
  const objects = openObjectStore(t.config.storage);
  const db = await t.superuser();
  try {
    return (await storedOriginals(objects, db)).filter((o) => o.sha === sha256(body)).map((o) => o.where);
  } finally {
    await db.end();
    objects.close();
  }
}

/** What a reader sees of the ready file. */
async function reads(): Promise<string[]> {
  const cat = await t.call('GET', '/v1/workspaces/ws/cat?path=/ready.txt');
  const grep = await t.call('GET', '/v1/workspaces/ws/grep?pattern=needle&output_mode=content');
  return [`${cat.status} ${cat.text}`, `${grep.status} ${grep.text}`];
}

describe('originals in an S3 bucket', () => {
  it('are packed under the prefix, each stored once per account for the same bytes', async () => {
    expect((await put(t, 'ws', 'copy-a.txt', 'same bytes\n')).status).toBe(202);
    expect((await put(t, 'other', 'copy-b.txt', 'same bytes\n')).status).toBe(202);
    await settled(t, 'ws');
    await settled(t, 'other');
    const stored = await keys();
    // Small originals go in packs (blob-store.ts): one place each, in a pack under the prefix.
    const same = await originalsOf('same bytes\n');
    expect(same).toHaveLength(1);
    expect(same[0]).toMatch(/^packs\/[0-9a-f-]{36}\/[0-9a-z]+-[0-9a-f]{16}#[0-9a-f]{64}$/);
    expect(stored).toContain(`svc/${same[0].split('#')[0]}`);
    // The second upload's pack held only bytes stored before: it was removed at once.
    expect(stored.filter((k) => k.startsWith('svc/packs/'))).toHaveLength(2); // ready.txt's and copy-a's
    // A text file is its own text: nothing is kept beside it (a PDF's text is: kept-texts.test.ts).
    expect(stored.filter((k) => k.startsWith('svc/text/'))).toEqual([]);
    expect(await originalsOf('the needle is here\n')).toHaveLength(1);
    expect(await reads()).toEqual(['200      1\tthe needle is here\n', '200 /ready.txt:1:the needle is here\n']);
  });

  it('a deleted workspace takes the originals and texts only its files named, in one multi-object deletion', async () => {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'doomed' } })).status).toBe(201);
    const bom = '\ufeffa kept text, only here\n'; // its text drops the byte order mark, so it is kept
    for (const [path, body] of [
      ['mine.txt', 'only in the doomed workspace\n'],
      ['kept.txt', bom],
      ['shared.txt', 'same bytes\n'],
    ]) {
      expect((await put(t, 'doomed', path, body)).status).toBe(202);
    }
    expect((await settled(t, 'doomed')).map((f) => f.status)).toEqual(['ready', 'ready', 'ready']);
    expect(await originalsOf(bom)).toHaveLength(1);
    const texts = async (body: string): Promise<string[]> => (await keys()).filter((k) => k.startsWith('svc/text/') && k.endsWith(`/${sha256(body)}`));
    expect(await texts(bom)).toHaveLength(1);
    const packsBefore = (await keys()).filter((k) => k.startsWith('svc/packs/'));
    // The proxy logs a multi-object deletion as a POST with the query in its path, once answered.
    const multiDeletes = async (): Promise<number> => (await swift.proxyLog()).split(`POST /${BUCKET}/%3Fdelete`).length - 1;
    const deletions = await multiDeletes();

    expect((await t.call('DELETE', '/v1/workspaces/doomed')).status).toBe(204);
    expect(await originalsOf('only in the doomed workspace\n')).toEqual([]);
    expect(await originalsOf(bom)).toEqual([]);
    expect(await texts(bom)).toEqual([]);
    expect(await originalsOf('same bytes\n')).toHaveLength(1); // 'ws' and 'other' still name it
    // Its two packs went with their only blobs; the others stay.
    expect((await keys()).filter((k) => k.startsWith('svc/packs/'))).toHaveLength(packsBefore.length - 2);
    // One deletion of the blobs' own keys and texts (under their locks), one of the emptied packs (after the commit).
    await expect.poll(multiDeletes, { timeout: 5_000 }).toBe(deletions + 2);
  });

  it('a deleted file takes its original and its pack with it when nothing else references them', async () => {
    expect((await put(t, 'ws', 'doomed.txt', 'only here\n')).status).toBe(202);
    await settled(t, 'ws');
    const [where] = await originalsOf('only here\n');
    expect(where).toBeDefined();
    expect((await t.call('DELETE', '/v1/workspaces/ws/files/doomed.txt')).status).toBe(204);
    expect(await originalsOf('only here\n')).toEqual([]);
    expect(await keys()).not.toContain(`svc/${where.split('#')[0]}`);
  });
});

describe('the sweep on packs', () => {
  it('removes the places of blobs no file names, a pack once none is left, and a pack no place ever named once past the grace period', async () => {
    expect((await put(t, 'ws', 'swept.txt', 'only in a pack the sweep empties\n')).status).toBe(202);
    await settled(t, 'ws');
    const [where] = await originalsOf('only in a pack the sweep empties\n');
    const pack = where.split('#')[0];
    const account = pack.split('/')[1];
    // A file row gone without its blob's cleanup (as a crash between the two leaves it), and a
    // pack put by a batch whose transaction never committed.
    const su = await t.superuser();
    await su.query("DELETE FROM files WHERE path = '/swept.txt'");
    await su.end();
    const objects = openObjectStore(t.config.storage);
    try {
      await objects.put(`packs/${account}/0-0000000000000000`, Buffer.from('an orphaned pack'));
      const blobs = new BlobStore(join(t.dataDir, 'blobs'), objects);
      // Within the grace period only the blob no file names goes, and with it its pack.
      expect(await sweepBlobs(t.service.db, blobs, 3600_000)).toBe(1);
      expect(await originalsOf('only in a pack the sweep empties\n')).toEqual([]);
      expect(await keys()).not.toContain(`svc/${pack}`);
      expect(await keys()).toContain(`svc/packs/${account}/0-0000000000000000`);
      // Swift's S3 API gives times rounded up to the second: past it, the grace of 0 has passed for sure.
      await new Promise((resolve) => setTimeout(resolve, 1100));
      expect(await sweepBlobs(t.service.db, blobs, 0)).toBe(1);
      expect(await keys()).not.toContain(`svc/packs/${account}/0-0000000000000000`);
      // Every other file still reads.
      expect(await reads()).toEqual(['200      1\tthe needle is here\n', '200 /ready.txt:1:the needle is here\n']);
    } finally {
      objects.close();
    }
  });
});

describe('the object store stopped or hung', () => {
  const snapshot = async (): Promise<string> => JSON.stringify((await listAll(t, 'ws')).map((f) => [f.path, f.status, f.sha256]));

  it('stopped: an upload is 503 with Retry-After and commits nothing; reads of ready files are unaffected', async () => {
    const expectedReads = await reads();
    const listing = await snapshot();
    await swift.stopProxy();
    try {
      const r = await put(t, 'ws', 'while-down.txt', 'not stored\n');
      expect(r.status).toBe(503);
      expect(r.headers.get('retry-after')).toBe('1');
      expect(r.json.error).toMatch(/blob storage is unavailable/);
      expect(await snapshot()).toBe(listing);
      expect(await reads()).toEqual(expectedReads);
      expect((await t.call('GET', '/v1/workspaces/ws/find?pattern=**/*.txt')).text).not.toContain('while-down');
    } finally {
      await swift.startProxy();
    }
  });

  it('hung (connection accepted, nothing answered): an upload is 503 within a few timeouts', async () => {
    const listing = await snapshot();
    swift.pauseProxy();
    try {
      const started = performance.now();
      const r = await put(t, 'ws', 'while-hung.txt', 'not stored either\n');
      expect(r.status).toBe(503);
      // Two attempts of a 1 s timeout, with room for a loaded machine.
      expect(performance.now() - started).toBeLessThan(20_000);
      expect(await snapshot()).toBe(listing);
    } finally {
      swift.resumeProxy();
    }
  });

  it('back: uploads resume without a restart, and become ready', async () => {
    const r = await put(t, 'ws', 'after.txt', 'stored after the outage\n');
    expect(r.status).toBe(202);
    const files = await settled(t, 'ws');
    expect(files.find((f) => f.path === '/after.txt')).toMatchObject({ status: 'ready', sha256: sha256('stored after the outage\n') });
    expect(files.some((f) => f.path === '/while-down.txt' || f.path === '/while-hung.txt')).toBe(false);
    expect((await keys()).some((k) => k.endsWith(sha256('not stored\n')))).toBe(false);
  });
});

describe('a node of a cluster with its object store stopped', () => {
  it('says 503 on /readyz until the store answers again, then 200', { timeout: 60_000 }, async () => {
    const node = await startTestService({
      ...swiftStorageEnv(swift, `s3://${BUCKET}/cluster`),
      VFS_S3_TIMEOUT_SECONDS: '1',
      VFS_CLUSTER: 'on',
      VFS_NODE_HEARTBEAT_SECONDS: '0.2',
    });
    const readyz = async (): Promise<number> => (await fetch(`${node.url}/readyz`)).status;
    /** Polls /readyz until it answers `status` (a heartbeat probes the store), for at most 10 s. */
    const until = async (status: number): Promise<number> => {
      const deadline = Date.now() + 10_000;
      let seen = await readyz();
      while (seen !== status && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        seen = await readyz();
      }
      return seen;
    };
    try {
      expect(await until(200)).toBe(200);
      await swift.stopProxy();
      try {
        expect(await until(503)).toBe(503);
        // The node itself still answers, and says why only in its log: /healthz is 200.
        expect((await fetch(`${node.url}/healthz`)).status).toBe(200);
      } finally {
        await swift.startProxy();
      }
      expect(await until(200)).toBe(200);
    } finally {
      await node.stop();
    }
  });
});
