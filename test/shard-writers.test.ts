/**
 * The ingest thread's shard writers (ingest/shards/writers.ts): at most `maxOpen` open, closed
 * after being idle, and each close asks every thread to close its readers of the shard, so that
 * the environment (and the pages its writes kept) is released.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { openLmdbReader, openReaderCount } from '../engine/reader-cache.js';
import { Shards } from '../ingest/shards/writers.js';

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), 'vfs-writers-'));
});
afterAll(async () => rm(root, { recursive: true, force: true }));

const doc = (path: string, text: string) => ({
  path,
  text: Buffer.from(text),
  sizeBytes: text.length,
  contentType: 'text/plain',
  updatedAt: Date.now(),
  visibility: null,
  version: text,
});

test('keeps at most maxOpen writers, closes idle ones, and has the readers of a closed one closed', async () => {
  const shards = new Shards(root, 2, 300);
  try {
    for (const ws of ['a', 'b', 'c']) await shards.write(ws, [doc('/f.txt', `text of ${ws}\n`)]);
    expect(shards.openWriters).toBe(2);
    const readersBefore = openReaderCount();
    const reader = openLmdbReader(shards.dir('c'));
    const snapshot = reader.snapshot();
    expect(snapshot.state().liveDocs).toBe(1);
    snapshot.done();
    expect(openReaderCount()).toBe(readersBefore + 1);
    // Idle for longer than idleMs: both writers close, and c's reader with its writer.
    await new Promise((resolve) => setTimeout(resolve, 900));
    expect(shards.openWriters).toBe(0);
    expect(openReaderCount()).toBe(readersBefore);
    // A closed writer reopens on the next write, and the shards hold every write.
    await shards.write('a', [doc('/g.txt', 'more\n')]);
    expect(shards.openWriters).toBe(1);
    expect([...((await shards.contents('a')) ?? new Map()).keys()].sort()).toEqual(['/f.txt', '/g.txt']);
    expect([...((await shards.contents('b')) ?? new Map()).keys()]).toEqual(['/f.txt']);
  } finally {
    await shards.close();
  }
});
