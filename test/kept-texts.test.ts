/**
 * Texts kept in the object store: the same bytes are extracted once per account and extractor
 * version, whichever workspace or path they are uploaded to, and read back the same; a text file
 * is its own text, and nothing is kept for it; a sweep removes a text with its blob and every
 * text of another extractor version. And an upload handed to the ingest of the node that received
 * it, and the object store's own reads and puts. Runs on whichever store the run uses (the local directory, or Swift's S3 API in npm test's
 * third pass).
 */
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash, randomUUID } from 'node:crypto';
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
/** A text whose extraction drops its byte order mark. */
const GONE = '\ufeffa text to lose\n';

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

  it('a text file is its own text: nothing is kept beside it, and the same bytes again are read, not extracted', async () => {
    const body = 'a plain text file is its own text\n';
    const extracted = await extractions('text');
    expect((await put(t, 'one', 'plain.txt', body)).status).toBe(202);
    await settled(t, 'one');
    expect(await extractions('text')).toBe(extracted + 1);
    expect((await put(t, 'two', 'plain-again.txt', body)).status).toBe(202);
    await settled(t, 'two');
    expect(await extractions('text')).toBe(extracted + 1);
    for (const [ws, path] of [
      ['one', '/plain.txt'],
      ['two', '/plain-again.txt'],
    ]) {
      expect((await t.call('GET', `/v1/workspaces/${ws}/grep?pattern=its own&output_mode=content`)).text).toBe(`${path}:1:${body}`);
    }
    const objects = openObjectStore(t.config.storage);
    try {
      for await (const { key } of objects.list('text/')) expect(key.endsWith(sha256(body))).toBe(false);
    } finally {
      objects.close();
    }
    const su = await t.superuser();
    try {
      const { rows } = await su.query('SELECT path, text_is_original FROM files WHERE path = ANY($1) ORDER BY path', [['/plain-again.txt', '/plain.txt']]);
      expect(rows).toEqual([
        { path: '/plain-again.txt', text_is_original: true },
        { path: '/plain.txt', text_is_original: true },
      ]);
    } finally {
      await su.end();
    }
  });

  it('the sweep removes a text whose blob no file references, and texts of another extractor version', async () => {
    const objects = openObjectStore(t.config.storage);
    const texts = async (): Promise<string[]> => {
      const keys: string[] = [];
      for await (const { key } of objects.list('text/')) keys.push(key);
      return keys.sort();
    };
    // With a byte order mark, which the text drops, so it is kept.
    expect((await put(t, 'one', 'gone.txt', GONE)).status).toBe(202);
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
      expect(await texts()).toEqual(withGone.filter((k) => !k.endsWith(sha256(GONE))));
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

describe('an upload handed to the ingest of the node that received it (BlobStore handOff)', () => {
  it('is taken once, from the temp directory, and then read from the store', async () => {
    const objects = openObjectStore(t.config.storage);
    const root = join(t.dataDir, 'hand-off');
    const tmp = join(root, 'tmp');
    const blobs = new BlobStore(root, objects, true);
    await blobs.init();
    const account = randomUUID();
    try {
      const upload = await blobs.begin();
      await upload.write(Buffer.from('handed over\n'));
      const sha = await upload.seal();
      await upload.publish(account);
      expect(await readdir(tmp)).toEqual([`handoff-${account}-${sha}`]);
      const taken = (await blobs.open(account, sha))!;
      expect(await readdir(tmp)).toEqual([basename(taken.path)]);
      const stored = (await blobs.open(account, sha))!;
      expect(stored.path).not.toBe(taken.path);
      for (const copy of [taken, stored]) {
        expect(await readFile(copy.path, 'utf8')).toBe('handed over\n');
        await copy.release();
      }
      expect(await readdir(tmp)).toEqual([]);
    } finally {
      await blobs.remove(account, [sha256('handed over\n')]);
      objects.close();
      await rm(root, { recursive: true, force: true });
    }
  });
});

describe('the object store', () => {
  it('reads an object into memory, null for a key never stored; a key stored twice keeps its bytes; a put into a directory removed since makes it again', async () => {
    const objects = openObjectStore(t.config.storage);
    const scratch = join(t.dataDir, 'object-store-scratch');
    const prefix = `test-objects/${randomUUID()}`;
    const file = async (text: string): Promise<string> => {
      const path = join(scratch, randomUUID());
      await writeFile(path, text);
      return path;
    };
    await mkdir(scratch, { recursive: true });
    try {
      expect(await objects.read(`${prefix}/ab/never`)).toBeNull();
      await objects.putFile(`${prefix}/ab/one`, await file('the bytes\n'));
      await objects.putFile(`${prefix}/ab/one`, await file('the bytes\n'));
      expect((await objects.read(`${prefix}/ab/one`))?.toString()).toBe('the bytes\n');
      expect(await readdir(scratch)).toEqual([]); // each put consumed its file
      // Bytes put from memory, read back whole and by range (a pack's part).
      await objects.put(`${prefix}/ab/packed`, Buffer.from('0123456789'));
      expect((await objects.readRange(`${prefix}/ab/packed`, 3, 4))?.toString()).toBe('3456');
      expect(await objects.readRange(`${prefix}/ab/absent`, 0, 1)).toBeNull();
      // An empty blob's part, in the middle of its pack (no byte range is empty: S3 reads
      // `bytes=5-4` as the whole object).
      expect(await objects.readRange(`${prefix}/ab/packed`, 5, 0)).toEqual(Buffer.alloc(0));
      expect(await objects.readRange(`${prefix}/ab/absent`, 5, 0)).toBeNull();
      await expect(objects.readRange(`${prefix}/ab/packed`, 8, 4)).rejects.toThrow();
      const storage = t.config.storage;
      if (storage.kind === 'local') {
        // The directory goes (as a hand-made cleanup would take it): the store makes it again.
        await rm(join(storage.root, prefix, 'ab'), { recursive: true });
        await objects.putFile(`${prefix}/ab/two`, await file('more bytes\n'));
        expect((await objects.read(`${prefix}/ab/two`))?.toString()).toBe('more bytes\n');
        expect(await objects.read(`${prefix}/ab/one`)).toBeNull();
      }
    } finally {
      await objects.deleteMany([`${prefix}/ab/one`, `${prefix}/ab/two`, `${prefix}/ab/packed`]);
      objects.close();
      await rm(scratch, { recursive: true, force: true });
    }
  });
});
