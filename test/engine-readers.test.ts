import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { cat, openShardReader, openShardWriter, setReaderLimits } from '../engine/index.js';
import { openReaderCount } from '../engine/reader-cache.js';
import { output, toInput } from './helpers/engine-shard.js';

const openFds = (): number => readdirSync('/proc/self/fd').length;

describe('the readers a thread keeps open', () => {
  const root = mkdtempSync(join(tmpdir(), 'engine-readers-'));
  const dirs = Array.from({ length: 8 }, (_, i) => join(root, `ws${i}`));

  beforeAll(async () => {
    for (const [i, dir] of dirs.entries()) {
      const writer = openShardWriter(dir);
      await writer.writeBatch([toInput({ path: '/f.txt', text: `shard ${i}\n` })]);
      await writer.close();
    }
  });
  afterEach(() => {
    setReaderLimits({});
  });
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  const read = (i: number): string => output(cat(openShardReader(dirs[i]), { claims: null, path: '/f.txt' }));

  it('are at most maxOpen: the least recently read closes first, and reopens when read again', async () => {
    setReaderLimits({ maxOpen: 3 });
    const before = openReaderCount();
    for (let i = 0; i < 3; i++) expect(read(i)).toBe(`     1\tshard ${i}\n`);
    const fds = openFds();
    for (let i = 3; i < 8; i++) expect(read(i)).toBe(`     1\tshard ${i}\n`);
    // Reading five more shards closed as many readers: the count and the descriptors stay put.
    await new Promise((r) => setTimeout(r, 50));
    expect(openReaderCount()).toBeLessThanOrEqual(Math.max(3, before));
    expect(openFds()).toBeLessThanOrEqual(fds);
    // The first shards were closed; they answer the same once opened again.
    for (let i = 0; i < 8; i++) expect(read(i)).toBe(`     1\tshard ${i}\n`);
  });

  it('never closes a reader whose snapshot is in use', async () => {
    setReaderLimits({ maxOpen: 2 });
    const held = openShardReader(dirs[0]);
    const snapshot = held.snapshot();
    try {
      for (let i = 1; i < 8; i++) read(i);
      await new Promise((r) => setTimeout(r, 50));
      // Still open, and its snapshot still reads.
      expect(openShardReader(dirs[0])).toBe(held);
      expect(snapshot.docByPath('/f.txt')?.textBytes).toBe(8);
    } finally {
      snapshot.done();
    }
    // Idle again and the least recently used, it is the one closed for the next shard opened.
    read(1);
    expect(openShardReader(dirs[0])).not.toBe(held);
    expect(read(0)).toBe('     1\tshard 0\n');
  });
});
