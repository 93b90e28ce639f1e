/**
 * Texts kept in the object store: the same bytes are extracted once per account and extractor
 * version, whichever workspace or path they are uploaded to, and read back the same; a sweep
 * removes a text with its blob and every text of another extractor version. Runs on whichever
 * store the run uses (the local directory, or Swift's S3 API in npm test's third pass).
 */
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { BlobStore } from '../ingest/blob-store.js';
import { sweepBlobs } from '../ingest/uploads.js';
import { openObjectStore } from '../storage/open-store.js';
import { makePdf } from './helpers/make-pdf.js';
import { put, settled, startTestService, type TestService } from './helpers/service.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService({ VFS_METRICS_PORT: '0' });
  for (const name of ['one', 'two']) expect((await t.call('POST', '/v1/workspaces', { body: { name } })).status).toBe(201);
});
afterAll(async () => t?.stop());

const sha256 = (text: string): string => createHash('sha256').update(text).digest('hex');

/** Extractions by file type since the service started. */
async function extractions(type: string): Promise<number> {
  const text = await (await fetch(t.service.metricsUrl!)).text();
  let count = 0;
  for (const [, n] of text.matchAll(new RegExp(`^vfs_extraction_seconds_count\\{[^}]*type="${type}"[^}]*\\} (\\d+)$`, 'gm'))) count += Number(n);
  return count;
}

describe('kept texts', () => {
  it('the same PDF in two workspaces, and under a second path, is extracted once and reads the same everywhere', async () => {
    const pdf = await makePdf([['A report that appears twice'], ['Its second page']]);
    expect((await put(t, 'one', 'report.pdf', pdf)).status).toBe(202);
    await settled(t, 'one');
    expect(await extractions('pdf')).toBe(1);
    expect((await put(t, 'two', 'copy.pdf', pdf)).status).toBe(202);
    expect((await put(t, 'two', 'again/report.pdf', pdf)).status).toBe(202);
    await settled(t, 'two');
    expect(await extractions('pdf')).toBe(1);
    const cat = async (ws: string, path: string): Promise<string> => (await t.call('GET', `/v1/workspaces/${ws}/cat?path=${path}`)).text;
    const first = await cat('one', '/report.pdf');
    expect(first).toContain('A report that appears twice');
    expect(await cat('two', '/copy.pdf')).toBe(first);
    expect(await cat('two', '/again/report.pdf')).toBe(first);
    // Different bytes are extracted.
    expect((await put(t, 'two', 'other.pdf', await makePdf([['Another report']]))).status).toBe(202);
    await settled(t, 'two');
    expect(await extractions('pdf')).toBe(2);
  });

  it('the sweep removes a text whose blob no file references, and texts of another extractor version', async () => {
    const objects = openObjectStore(t.config.storage);
    const texts = async (): Promise<string[]> => {
      const keys: string[] = [];
      for await (const { key } of objects.list('text/')) keys.push(key);
      return keys.sort();
    };
    expect((await put(t, 'one', 'gone.txt', 'a text to lose\n')).status).toBe(202);
    await settled(t, 'one');
    const withGone = await texts();
    try {
      // A text left behind by a crash between the removal of a blob and of its text, and one of an older extractor.
      const account = /^text\/1\/([^/]+)\//.exec(withGone[0])![1];
      for (const key of [`text/1/${account}/ee/${'e'.repeat(64)}`, `text/0/${account}/dd/${'d'.repeat(64)}`]) {
        const file = join(t.dataDir, 'planted');
        await writeFile(file, 'stale');
        await objects.putFile(key, file);
      }
      expect(await texts()).toHaveLength(withGone.length + 2);
      expect((await t.call('DELETE', '/v1/workspaces/one/files/gone.txt')).status).toBe(204);
      expect(await texts()).toHaveLength(withGone.length + 1); // the deleted file's text went with its blob
      expect(await sweepBlobs(t.service.db, new BlobStore(join(t.dataDir, 'blobs'), objects), 3600_000)).toBe(2);
      expect(await texts()).toEqual(withGone.filter((k) => !k.endsWith(sha256('a text to lose\n'))));
      expect(await t.call('GET', '/v1/workspaces/one/cat?path=/report.pdf').then((r) => r.status)).toBe(200);
    } finally {
      objects.close();
    }
  });

  it('the sweep removes shard snapshots no workspace names, once past the grace period', async () => {
    const objects = openObjectStore(t.config.storage);
    try {
      const su = await t.superuser();
      const workspaceId = (await su.query("SELECT id FROM workspaces WHERE name = 'two'")).rows[0].id as string;
      await su.end();
      const planted = [`shard-snapshots/${workspaceId}/0-00000000.mdb`, 'shard-snapshots/00000000-0000-4000-8000-000000000000/0-00000000.mdb'];
      for (const key of planted) {
        const file = join(t.dataDir, 'planted');
        await writeFile(file, 'not a shard');
        await objects.putFile(key, file);
      }
      const snapshots = async (): Promise<string[]> => {
        const keys: string[] = [];
        for await (const { key } of objects.list('shard-snapshots/')) keys.push(key);
        return keys.sort();
      };
      expect(await snapshots()).toEqual([...planted].sort());
      // Within the grace period they stay: a snapshot is put before its row names it.
      expect(await sweepBlobs(t.service.db, new BlobStore(join(t.dataDir, 'blobs'), objects), 3600_000)).toBe(0);
      expect(await snapshots()).toHaveLength(2);
      // Swift's S3 API gives times rounded up to the second: past it, the grace of 0 has passed for sure.
      await new Promise((resolve) => setTimeout(resolve, 1100));
      expect(await sweepBlobs(t.service.db, new BlobStore(join(t.dataDir, 'blobs'), objects), 0)).toBe(2);
      expect(await snapshots()).toEqual([]);
    } finally {
      objects.close();
    }
  });
});
