import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import * as lmdb from 'lmdb';
import { afterEach, describe, expect, it } from 'vitest';
import { countLines, encodeDocValue, lineEndOf, lineIndexAt, lineIndexFrom, lineStartsOf } from '../engine/doc-text.js';
import {
  appendToBlock,
  blockFirstId,
  blockLastId,
  decodeBlock,
  decodePostings,
  encodeBlock,
  encodeGroup,
  findInGroup,
  intersectBlock,
} from '../engine/posting-block.js';
import { distinctQuadBuckets, distinctTrigrams, foldQuad, QUAD_BUCKET_BITS, QUAD_KEY_BASE, quadBucket } from '../engine/trigram-extract.js';
import { cat, openShardWriter } from '../engine/index.js';
import { SEALED_BLOCK_BYTES, TAIL_BLOCK_BYTES } from '../engine/shard-writer.js';
import { acquireShardEnv, type KeptCursor, releaseShardEnv } from '../engine/shard-env.js';
import { dirRange, postingKeyFirstId, TAIL_BLOCK_ID, trigramRange } from '../engine/shard-format.js';
import { buildShard, output, toInput, type TestShard } from './helpers/engine-shard.js';

const open: TestShard[] = [];
async function shard(...args: Parameters<typeof buildShard>): Promise<TestShard> {
  const s = await buildShard(...args);
  open.push(s);
  return s;
}
afterEach(async () => {
  while (open.length > 0) await open.pop()!.close();
});

function tri(s: string): number {
  const b = Buffer.from(s, 'utf8');
  return (b[0] << 16) | (b[1] << 8) | b[2];
}

/** A quadgram as a query key. */
function quad(s: string): number {
  return QUAD_KEY_BASE + Buffer.from(s, 'utf8').readUInt32BE(0);
}

describe('shard environments', () => {
  it("leave nothing in lmdb-js's map of open databases once closed", async () => {
    const stores = (lmdb as unknown as { allDbs: Map<string, unknown> }).allDbs;
    const base = await mkdtemp(join(tmpdir(), 'vfs-env-'));
    try {
      const dirs = ['a', 'b.c', 'd'].map((name) => join(base, name));
      const before = new Set(stores.keys());
      const envs = dirs.map((dir) => acquireShardEnv(dir));
      // A second reference shares the environment; only the last release closes it.
      const again = acquireShardEnv(dirs[0]);
      expect(again).toBe(envs[0]);
      const added = [...stores.keys()].filter((key) => !before.has(key));
      // Each environment's root and its eight named databases.
      expect(added).toHaveLength(3 * 9);
      for (const env of envs) await releaseShardEnv(env);
      expect([...stores.keys()].filter((key) => !before.has(key)).sort()).toEqual(added.filter((key) => key.startsWith('a')).sort());
      await releaseShardEnv(again);
      expect([...stores.keys()].filter((key) => !before.has(key))).toEqual([]);
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });

  it('close the cursors that range reads leave for reuse before the environment closes', async () => {
    const base = await mkdtemp(join(tmpdir(), 'vfs-env-'));
    try {
      const shard = acquireShardEnv(join(base, 'a'));
      await shard.paths.put('/x.txt', { id: 1 } as never);
      await shard.info.put('k', 1);
      // Ranges on the thread's shared read transaction, read to the end: lmdb-js keeps each cursor.
      expect([...shard.paths.getKeys()]).toEqual(['/x.txt']);
      expect([...shard.info.getKeys()]).toEqual(['k']);
      const kept = (db: object) => (db as KeptCursor).db?.availableCursor;
      for (const db of [shard.paths, shard.info]) expect(kept(db)).toBeTruthy();
      await releaseShardEnv(shard);
      for (const db of [shard.paths, shard.info]) expect(kept(db)).toBeNull();
    } finally {
      await rm(base, { recursive: true, force: true });
    }
  });
});

describe('line splitting', () => {
  // text → the lines ripgrep would report (without their `\n`)
  const cases: [string, string[]][] = [
    ['', []],
    ['a', ['a']],
    ['a\n', ['a']],
    ['a\nb', ['a', 'b']],
    ['a\nb\n', ['a', 'b']],
    ['\n', ['']],
    ['\n\n', ['', '']],
    ['a\r\nb\r\n', ['a\r', 'b\r']],
    ['x\n\ny', ['x', '', 'y']],
    ['日本\n語', ['日本', '語']],
  ];
  it.each(cases)('%j', (text, lines) => {
    const bytes = Buffer.from(text, 'utf8');
    const n = countLines(bytes);
    expect(n).toBe(lines.length);
    const value = encodeDocValue(bytes, n);
    const starts = lineStartsOf(value, bytes.length, n);
    const got = Array.from({ length: n }, (_, i) => bytes.toString('utf8', starts[i], lineEndOf(bytes, starts, i)));
    expect(got).toEqual(lines);
  });

  it('uses u32 starts from 64 KiB on', () => {
    const text = Buffer.from('x'.repeat(70_000) + '\nyy\n');
    const value = encodeDocValue(text, 2);
    const starts = lineStartsOf(value, text.length, 2);
    expect(starts).toBeInstanceOf(Uint32Array);
    expect([...starts]).toEqual([0, 70_001]);
  });

  it('finds the line of a byte from any known line as the whole search does', () => {
    const lengths = fc.array(fc.integer({ min: 0, max: 40 }), { minLength: 1, maxLength: 300 });
    fc.assert(
      fc.property(lengths, fc.nat(), fc.integer({ min: -2, max: 310 }), (lineLengths, at, from) => {
        const starts = new Uint32Array(lineLengths.length);
        for (let i = 1; i < starts.length; i++) starts[i] = starts[i - 1] + lineLengths[i - 1] + 1;
        const pos = at % (starts[starts.length - 1] + lineLengths[lineLengths.length - 1] + 1);
        const line = lineIndexAt(starts, pos);
        expect(starts[line]).toBeLessThanOrEqual(pos);
        expect(line === starts.length - 1 || starts[line + 1] > pos).toBe(true);
        expect(lineIndexFrom(starts, pos, from)).toBe(line);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('trigrams', () => {
  it('are distinct and never contain a newline', () => {
    const got = [...distinctTrigrams(Buffer.from('abcabc\nabd\nab'))].sort((a, b) => a - b);
    expect(got).toEqual([tri('abc'), tri('bca'), tri('cab'), tri('abd')].sort((a, b) => a - b));
  });
});

describe('quadgram buckets', () => {
  it('are distinct, never span a newline, and spread similar quadgrams', () => {
    const bucket = (s: string): number => quadBucket(quad(s) - QUAD_KEY_BASE);
    const got = [...distinctQuadBuckets(Buffer.from('abcdabcd\nabce\nabc'))].sort((a, b) => a - b);
    expect(got).toEqual([bucket('abcd'), bucket('bcda'), bucket('cdab'), bucket('dabc'), bucket('abce')].sort((a, b) => a - b));
    // Multi-byte text.
    const text = Buffer.from('日本語のテキスト');
    const expected = new Set<number>();
    for (let i = 0; i + 4 <= text.length; i++) expected.add(quadBucket(text.readUInt32BE(i)));
    expect(new Set(distinctQuadBuckets(text))).toEqual(expected);
    // Quadgrams that differ in one byte land in different buckets.
    const buckets = new Set(Array.from({ length: 256 }, (_, b) => quadBucket(0x61626300 | b)));
    expect(buckets.size).toBe(256);
    for (const b of buckets) expect(b).toBeLessThan(1 << QUAD_BUCKET_BITS);
  });

  it('are taken of the quadgram with its ASCII letters lowercased, every other byte kept', () => {
    const fold = (b: number): number => (b >= 0x41 && b <= 0x5a ? b + 0x20 : b);
    for (let b = 0; b < 256; b++) {
      for (const shift of [0, 8, 16, 24]) {
        const other = 0x5a415b40 & ~(0xff << shift); // Z A [ @ around it, edges of A-Z
        const q = (other | (b << shift)) >>> 0;
        const want = ((fold(q >>> 24) << 24) | (fold((q >>> 16) & 0xff) << 16) | (fold((q >>> 8) & 0xff) << 8) | fold(q & 0xff)) >>> 0;
        expect(foldQuad(q)).toBe(want);
      }
    }
    const buckets = (s: string): number[] => [...distinctQuadBuckets(Buffer.from(s))].sort((a, b) => a - b);
    expect(buckets('Sched_CLOCK')).toEqual(buckets('sched_clock'));
    expect(buckets('ÄÖÜ€')).not.toEqual(buckets('äöü€'));
  });
});

describe('postings blocks', () => {
  it('group values find each trigram of a prefix', () => {
    // trigrams 0x616201, 0x616205, 0x6162ff with ids [1,2], [3], [4,5,6]
    const trigrams = Uint32Array.from([0x616201, 0x616205, 0x6162ff]);
    const ends = Uint32Array.from([2, 3, 6]);
    const ids = Uint32Array.from([1, 2, 3, 4, 5, 6]);
    const group = encodeGroup(trigrams, ends, ids, 0, 3);
    const decode = (block: Buffer | undefined): number[] => {
      if (block === undefined) return [];
      const out = new Uint32Array(8);
      return [...out.subarray(0, decodeBlock(block, out, 0))];
    };
    expect(decode(findInGroup(group, 0x01))).toEqual([1, 2]);
    expect(decode(findInGroup(group, 0x05))).toEqual([3]);
    expect(decode(findInGroup(group, 0xff))).toEqual([4, 5, 6]);
    expect(findInGroup(group, 0x02)).toBeUndefined();
    expect(findInGroup(group, 0x00)).toBeUndefined();
  });

  it('round-trip and append without decoding', () => {
    const ids = Uint32Array.from([1, 2, 300, 70_000, 4_000_000_000]);
    const block = encodeBlock(ids, 0, 3);
    const grown = appendToBlock(block, ids, 3, 5);
    const out = new Uint32Array(5);
    expect(decodeBlock(grown, out, 0)).toBe(5);
    expect([...out]).toEqual([...ids]);
  });

  // block ids, sorted ids, first index of them to consider, the ids in both
  const intersections: [number[], number[], number, number[]][] = [
    [[1, 2, 300, 70_000, 4_000_000_000], [2, 300, 4_000_000_000], 0, [2, 300, 4_000_000_000]],
    [[1, 2, 300], [0, 3, 299, 301], 0, []],
    [[5], [5], 0, [5]],
    [[1, 2, 3, 4], [1, 3, 4], 1, [3, 4]],
    [[10, 20, 30], [20, 40], 0, [20]],
    [[10, 20, 30], [5, 10, 15, 30], 0, [10, 30]],
    [[10, 20, 30], [10], 1, []],
  ];
  it.each(intersections)('intersect block %j with %j from %i', (ids, sorted, from, expected) => {
    const block = encodeBlock(Uint32Array.from(ids), 0, ids.length);
    expect(blockFirstId(block)).toBe(ids[0]);
    expect(blockLastId(block)).toBe(ids[ids.length - 1]);
    const out = new Uint32Array(8);
    const end = intersectBlock(block, Uint32Array.from(sorted), from, out, 1);
    expect([...out.subarray(1, end)]).toEqual(expected);
  });
});

describe('shard writer and reader', () => {
  it('stores text, metadata and postings', async () => {
    const s = await shard([
      { path: '/a.txt', text: 'hello world\n', claims: ['user:1'], contentType: 'text/markdown', sizeBytes: 99 },
      { path: '/dir/b.txt', text: 'another hello\nline two' },
    ]);
    const snap = s.reader.snapshot();
    try {
      const a = snap.docByPath('/a.txt')!;
      expect(a).toMatchObject({ path: '/a.txt', textBytes: 12, sizeBytes: 99, lines: 1, contentType: 'text/markdown', claims: ['user:1'] });
      expect(snap.docById(a.id)).toEqual(a);
      const b = snap.docByPath('/dir/b.txt')!;
      expect(b.lines).toBe(2);
      expect([...snap.postings(tri('hel'))]).toEqual([a.id, b.id]);
      expect([...snap.postings(tri('wor'))]).toEqual([a.id]);
      expect([...snap.postings(tri('zzz'))]).toEqual([]);
      expect([...snap.postings(quad('hell'))]).toEqual([a.id, b.id]);
      expect([...snap.postings(quad('o wo'))]).toEqual([a.id]);
      expect([...snap.postings(quad('two\n'))]).toEqual([]);
      expect([...snap.pathsInRange('/', '0')]).toEqual(['/a.txt', '/dir/b.txt']);
      expect(snap.state()).toMatchObject({ liveDocs: 2, deadIds: 0, nextDocId: 3 });
    } finally {
      snap.done();
    }
  });

  it('replaces a re-uploaded path atomically: an older snapshot keeps the old text', async () => {
    const s = await shard([{ path: '/f.txt', text: 'old text\n' }]);
    const before = s.reader.snapshot();
    await s.write([{ path: '/f.txt', text: 'new text\n' }]);
    const after = s.reader.snapshot();
    try {
      const oldMeta = before.docByPath('/f.txt')!;
      const newMeta = after.docByPath('/f.txt')!;
      expect(newMeta.id).not.toBe(oldMeta.id);
      expect(before.docValue(oldMeta).subarray(0, oldMeta.textBytes).toString()).toBe('old text\n');
      expect(after.docValue(newMeta).subarray(0, newMeta.textBytes).toString()).toBe('new text\n');
      expect(after.docById(oldMeta.id)).toBeUndefined();
      // The old id stays in postings but is dead.
      expect([...after.postings(tri('old'))]).toEqual([oldMeta.id]);
      expect(after.state()).toMatchObject({ liveDocs: 1, deadIds: 1 });
    } finally {
      before.done();
      after.done();
    }
    expect(output(cat(s.reader, { claims: null, path: '/f.txt' }))).toBe('     1\tnew text\n');
  });

  it('is idempotent: the same path and version again changes nothing', async () => {
    const s = await shard([{ path: '/same.txt', text: 'same\n', updatedAt: 5 }]);
    const first = s.writer.lookup('/same.txt')!;
    const result = await s.writer.writeBatch([toInput({ path: '/same.txt', text: 'same\n', updatedAt: 5 })]);
    expect(result).toEqual({ indexed: 0, unchanged: 1 });
    expect(s.writer.lookup('/same.txt')).toEqual(first);
    expect(s.writer.state()).toMatchObject({ liveDocs: 1, deadIds: 0, nextDocId: 2 });
  });

  it('counts postings from block headers on both levels, and paths under a directory', async () => {
    const s = await shard([
      { path: '/a/1.txt', text: 'count me\n' },
      { path: '/a/2.txt', text: 'count me too\n' },
      { path: '/b.txt', text: 'count\n' },
    ]);
    await s.writer.flush();
    await s.write([{ path: '/a/3.txt', text: 'count again\n' }]);
    await s.write([{ path: '/a0.txt', text: 'count on\n' }]);
    const snap = s.reader.snapshot();
    try {
      const list = snap.postingBlocks(tri('cou'));
      expect(list.count).toBe(5);
      expect(list.blocks.length).toBe(3); // level 1, then one block per segment
      expect([...decodePostings(list)]).toEqual([1, 2, 3, 4, 5]);
      expect([...snap.postings(tri('cou'))]).toEqual([1, 2, 3, 4, 5]);
      expect(snap.postingBlocks(tri('zzz'))).toEqual({ count: 0, blocks: [] });
      const a = dirRange('/a');
      expect(snap.countPathsInRange(a.start, a.end)).toBe(3);
      expect(snap.countPathsInRange('/', '0')).toBe(5);
    } finally {
      snap.done();
    }
  });

  it('rewrites only metadata when the version is unchanged but visibility changes', async () => {
    const s = await shard([{ path: '/v.txt', text: 'secret\n', claims: ['user:1'] }]);
    const first = s.writer.lookup('/v.txt')!;
    await s.write([{ path: '/v.txt', text: 'secret\n', claims: ['user:2'] }]);
    const second = s.writer.lookup('/v.txt')!;
    expect(second.id).toBe(first.id);
    expect(second.claims).toEqual(['user:2']);
    const snap = s.reader.snapshot();
    expect(snap.docById(first.id)!.claims).toEqual(['user:2']);
    snap.done();
  });

  it('keeps the last of repeated paths in one batch', async () => {
    const s = await shard([
      { path: '/r.txt', text: 'first\n' },
      { path: '/r.txt', text: 'second\n' },
    ]);
    expect(output(cat(s.reader, { claims: null, path: '/r.txt' }))).toBe('     1\tsecond\n');
    expect(s.writer.state().liveDocs).toBe(1);
  });

  it('deletes a document', async () => {
    const s = await shard([
      { path: '/gone.txt', text: 'bye\n' },
      { path: '/stay.txt', text: 'hi\n' },
    ]);
    expect(await s.writer.deleteDocument('/gone.txt')).toBe(true);
    expect(await s.writer.deleteDocument('/gone.txt')).toBe(false);
    expect(s.writer.lookup('/gone.txt')).toBeUndefined();
    expect(s.writer.state()).toMatchObject({ liveDocs: 1, deadIds: 1 });
  });

  it('rejects non-canonical paths and empty claim lists', async () => {
    const s = await shard();
    await expect(s.writer.writeBatch([toInput({ path: 'no-slash.txt', text: 'x' })])).rejects.toThrow(/canonical/);
    await expect(s.writer.writeBatch([toInput({ path: '/a/../b', text: 'x' })])).rejects.toThrow(/segment/);
    await expect(s.writer.writeBatch([toInput({ path: '/e.txt', text: 'x', claims: [] })])).rejects.toThrow(/empty list/);
    expect(s.writer.state().liveDocs).toBe(0);
  });

  it('rolls a failed batch back entirely (a second writer on the same shard is refused)', async () => {
    const s = await shard([{ path: '/base.txt', text: 'base\n' }]);
    const other = openShardWriter(s.dir);
    try {
      // Both prepare against nextDocId 2; whichever commits second must fail without a trace.
      const results = await Promise.allSettled([
        s.writer.writeBatch([toInput({ path: '/one.txt', text: 'one\n' }), toInput({ path: '/base.txt', text: 'changed\n' })]),
        other.writeBatch([toInput({ path: '/two.txt', text: 'two\n' })]),
      ]);
      expect(results.map((r) => r.status).sort()).toEqual(['fulfilled', 'rejected']);
      const failed = results.find((r) => r.status === 'rejected') as PromiseRejectedResult;
      expect(String(failed.reason)).toMatch(/another writer/);
      const snap = s.reader.snapshot();
      const paths = [...snap.pathsInRange('/', '0')];
      const state = snap.state();
      snap.done();
      if (results[0].status === 'fulfilled') {
        expect(paths).toEqual(['/base.txt', '/one.txt']);
        expect(state).toMatchObject({ liveDocs: 2, deadIds: 1, nextDocId: 4 });
      } else {
        expect(paths).toEqual(['/base.txt', '/two.txt']);
        expect(state).toMatchObject({ liveDocs: 2, deadIds: 0, nextDocId: 3 });
      }
    } finally {
      await other.close();
    }
  });

  it('seals tail blocks across many batches and keeps postings sorted; compaction drops dead ids', async () => {
    const s = await shard();
    const ids: number[] = [];
    // 150 single-document batches sharing the trigram "com": the tail seals several times.
    for (let i = 0; i < 150; i++) {
      await s.write([{ path: `/f${String(i).padStart(3, '0')}.txt`, text: `common text ${i} ${'x'.repeat(i % 7)}\n` }]);
      ids.push(s.writer.lookup(`/f${String(i).padStart(3, '0')}.txt`)!.id);
    }
    // Replace a third of them: their old ids die.
    await s.write(Array.from({ length: 50 }, (_, i) => ({ path: `/f${String(i * 3).padStart(3, '0')}.txt`, text: `common again ${i}\n` })));
    let snap = s.reader.snapshot();
    const list = [...snap.postings(tri('com'))];
    expect([...snap.postings(quad('comm'))]).toEqual(list);
    snap.done();
    expect(list.length).toBe(200);
    expect(list).toEqual([...list].sort((a, b) => a - b));
    expect(list.slice(0, 150)).toEqual(ids);
    const result = await s.writer.compact();
    expect(result.deadIdsDropped).toBeGreaterThanOrEqual(100); // from both indexes
    snap = s.reader.snapshot();
    const compacted = [...snap.postings(tri('com'))];
    const live = [...snap.pathsInRange('/', '0')].map((p) => snap.docByPath(p)!.id).sort((a, b) => a - b);
    expect([...snap.postings(quad('comm'))]).toEqual(live);
    snap.done();
    expect(compacted).toEqual(live);
    expect(s.writer.state().deadIds).toBe(0);
  });

  it('keeps postings exact across a merge of level 0, for old and new snapshots', async () => {
    const s = await shard([{ path: '/1.txt', text: 'merge me\n' }]);
    await s.write([{ path: '/2.txt', text: 'merge you\n' }]);
    const before = s.reader.snapshot();
    await s.writer.flush();
    await s.write([{ path: '/3.txt', text: 'merge all\n' }]);
    const after = s.reader.snapshot();
    try {
      expect([...before.postings(tri('mer'))]).toEqual([1, 2]);
      expect([...after.postings(tri('mer'))]).toEqual([1, 2, 3]);
      expect([...before.postings(quad('merg'))]).toEqual([1, 2]);
      expect([...after.postings(quad('merg'))]).toEqual([1, 2, 3]);
      expect([...after.postings(quad('ge y'))]).toEqual([2]);
      expect(after.state()).toMatchObject({ segFirst: 2, segNext: 3 });
    } finally {
      before.done();
      after.done();
    }
  });

  it('writes a large batch as page-sized sealed blocks plus a tail', async () => {
    const docs = Array.from({ length: 12_000 }, (_, i) => ({ path: `/many/${i}.txt`, text: `shared words ${i}\n` }));
    const s = await shard(docs);
    const snap = s.reader.snapshot();
    const list = snap.postings(tri('sha'));
    snap.done();
    expect(list.length).toBe(12_000);
    for (let i = 1; i < list.length; i++) expect(list[i]).toBeGreaterThan(list[i - 1]);
    // The batch is one level-0 segment until merged into level 1.
    expect(s.writer.state()).toMatchObject({ segFirst: 0, segNext: 1 });
    await s.writer.flush();
    expect(s.writer.state()).toMatchObject({ segFirst: 1, segNext: 1, recentBytes: 0 });
    const after = s.reader.snapshot();
    expect([...after.postings(tri('sha'))]).toEqual([...list]);
    after.done();
    const env = acquireShardEnv(s.dir);
    try {
      const blocks = [...env.postings.getRange(trigramRange(tri('sha')))].map(({ key, value }) => ({ first: postingKeyFirstId(key), bytes: value.length }));
      const sealed = blocks.filter((b) => b.first !== TAIL_BLOCK_ID);
      expect(sealed.length).toBeGreaterThan(0);
      for (const b of sealed) {
        // Whole overflow pages (16-byte page header), filled up to less than one varint.
        expect(b.bytes).toBeLessThanOrEqual(SEALED_BLOCK_BYTES);
        expect((4096 - ((b.bytes + 16) % 4096)) % 4096).toBeLessThan(5);
      }
      expect(blocks.at(-1)!.first).toBe(TAIL_BLOCK_ID);
      expect(blocks.at(-1)!.bytes).toBeLessThanOrEqual(TAIL_BLOCK_BYTES);
      expect([...env.recent.getKeys()]).toEqual([]);
    } finally {
      await releaseShardEnv(env);
    }
  });
});

describe('line starts in a misaligned buffer', () => {
  it.each([1, 2, 3])('are copied when the value starts at byte offset %i', (shift) => {
    for (const text of [Buffer.from('ab\ncd\n'), Buffer.from('x'.repeat(70_000) + '\nyy')]) {
      const lines = countLines(text);
      const value = encodeDocValue(text, lines);
      const host = Buffer.alloc(value.length + 8);
      value.copy(host, shift);
      const starts = lineStartsOf(host.subarray(shift, shift + value.length), text.length, lines);
      expect([...starts]).toEqual([...lineStartsOf(value, text.length, lines)]);
    }
  });
});
