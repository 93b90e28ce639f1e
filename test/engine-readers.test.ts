import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  cat,
  closeShardReader,
  find,
  grep,
  ls,
  openLmdbReader,
  openShardReader,
  openShardWriter,
  setReaderLimits,
  ShardReader,
  type ShardSource,
} from '../engine/index.js';
import { openReaderCount } from '../engine/reader-cache.js';
import { decodeShardImage, IMAGE_FILE, IMAGE_MAX_DOCS } from '../engine/shard-image.js';
import { output, toInput } from './helpers/engine-shard.js';

const openFds = (): number => readdirSync('/proc/self/fd').length;
const readlinkOf = (fd: string): string => {
  try {
    return readlinkSync(`/proc/self/fd/${fd}`);
  } catch {
    return '';
  }
};

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

  const read = (i: number): string => output(cat(openLmdbReader(dirs[i]), { claims: null, path: '/f.txt' }));

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
    const held = openLmdbReader(dirs[0]);
    const snapshot = held.snapshot();
    try {
      for (let i = 1; i < 8; i++) read(i);
      await new Promise((r) => setTimeout(r, 50));
      // Still open, and its snapshot still reads.
      expect(openLmdbReader(dirs[0])).toBe(held);
      expect(snapshot.docByPath('/f.txt')?.textBytes).toBe(8);
    } finally {
      snapshot.done();
    }
    // Idle again and the least recently used, it is the one closed for the next shard opened.
    read(1);
    expect(openLmdbReader(dirs[0])).not.toBe(held);
    expect(read(0)).toBe('     1\tshard 0\n');
  });
});

describe("a small shard's image", () => {
  const root = mkdtempSync(join(tmpdir(), 'engine-images-'));
  afterAll(() => rmSync(root, { recursive: true, force: true }));
  const files = [
    { path: '/docs/readme.md', text: 'Alpha beta\nGamma delta\n\nÉté naïve café\n' },
    { path: '/src/main.c', text: 'int main(void) {\r\n  return helper(1);\r\n}\r\n' },
    { path: '/src/helper.c', text: 'int helper(int x) {\n  return x + 1;\n}', claims: ['team:a'] },
    { path: '/notes/𝒳 astral.txt', text: 'an astral 𝒳 path\nbeta\n' },
  ];
  /** Every tool's answer over `source`, with and without claims. */
  const answers = (source: ShardSource): string[] =>
    [null, ['team:a']].flatMap((claims) => [
      output(ls(source, { claims, path: '/' })),
      output(ls(source, { claims, path: '/src' })),
      output(find(source, { claims, pattern: '**/*.c' })),
      output(cat(source, { claims, path: '/docs/readme.md', offset: 2, limit: 2 })),
      ...['beta', 'return', '(?i)été', '^$', '\\w+\\(', 'x'].flatMap((pattern) =>
        (['files_with_matches', 'count', 'content'] as const).map((outputMode) => output(grep(source, { claims, pattern, outputMode, context: 1 }))),
      ),
      output(grep(source, { claims, pattern: 'BETA', caseInsensitive: true, outputMode: 'content', path: '/docs' })),
      output(grep(source, { claims, pattern: 'return', glob: '*.c', outputMode: 'count' })),
    ]);

  it('answers every tool as the shard itself does, opening only the image', async () => {
    const dir = join(root, 'equal');
    const writer = openShardWriter(dir);
    await writer.writeBatch(files.map(toInput));
    await writer.close();
    const readers = openReaderCount();
    const fds = openFds();
    const source = openShardReader(dir);
    expect(source).not.toBeInstanceOf(ShardReader);
    const fromImage = answers(source);
    expect(openReaderCount()).toBe(readers);
    // The image's file, held while this thread keeps the image.
    expect(openFds()).toBe(fds + 1);
    expect(fromImage).toEqual(answers(openLmdbReader(dir)));
    expect(fromImage.join('')).toContain('/src/helper.c');
  });

  it('follows every write, while a snapshot begun before keeps its version', async () => {
    const dir = join(root, 'writes');
    const writer = openShardWriter(dir);
    try {
      await writer.writeBatch([toInput({ path: '/a.txt', text: 'one\n' }), toInput({ path: '/b.txt', text: 'two\n' })]);
      const before = openShardReader(dir).snapshot();
      await writer.writeBatch([toInput({ path: '/a.txt', text: 'ONE, again\n' })]);
      expect(output(cat(openShardReader(dir), { claims: null, path: '/a.txt' }))).toBe('     1\tONE, again\n');
      await writer.deleteDocument('/b.txt');
      expect(output(ls(openShardReader(dir), { claims: null, path: '/' }))).toBe('a.txt\t11\n');
      expect(before.docByPath('/b.txt')?.textBytes).toBe(4);
      expect(before.docValue(before.docByPath('/a.txt')!).subarray(0, 4).toString()).toBe('one\n');
      before.done();
      // The thread holds the current image's file, and lets it go when the shard is dropped.
      const imagesHeld = (): number => readdirSync('/proc/self/fd').filter((fd) => readlinkOf(fd).startsWith(join(dir, IMAGE_FILE))).length;
      expect(imagesHeld()).toBe(1);
      closeShardReader(dir);
      expect(imagesHeld()).toBe(0);
    } finally {
      await writer.close();
    }
  });

  it('is not kept for a shard past its bounds, nor read when torn', async () => {
    const large = join(root, 'large');
    const writer = openShardWriter(large);
    await writer.writeBatch(Array.from({ length: IMAGE_MAX_DOCS + 1 }, (_, i) => toInput({ path: `/f${i}.txt`, text: `file ${i}\n` })));
    await writer.close();
    expect(existsSync(join(large, IMAGE_FILE))).toBe(false);
    expect(openShardReader(large)).toBeInstanceOf(ShardReader);

    const torn = join(root, 'torn');
    const second = openShardWriter(torn);
    await second.writeBatch([toInput({ path: '/t.txt', text: 'whole\n' })]);
    await second.close();
    const image = join(torn, IMAGE_FILE);
    const bytes = readFileSync(image);
    expect(decodeShardImage(bytes)?.catalog.docs.map((d) => d.path)).toEqual(['/t.txt']);
    for (const broken of [bytes.subarray(0, bytes.length - 7), Buffer.concat([bytes.subarray(0, 20), Buffer.from('x'), bytes.subarray(21)])]) {
      writeFileSync(image, broken);
      expect(decodeShardImage(readFileSync(image))).toBeNull();
      expect(output(cat(openShardReader(torn), { claims: null, path: '/t.txt' }))).toBe('     1\twhole\n');
    }
  });
});
