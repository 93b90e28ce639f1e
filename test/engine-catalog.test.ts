import { afterEach, describe, expect, it } from 'vitest';
import { find, grep, ls, setReaderLimits, type ShardReader } from '../engine/index.js';
import { ShardCatalog } from '../engine/shard-catalog.js';
import type { DocMeta } from '../engine/shard-format.js';
import { buildShard, output, readerOf, toolError, type DocSpec, type TestShard } from './helpers/engine-shard.js';
import { seededRandom } from './helpers/random.js';

let shard: TestShard | undefined;
afterEach(async () => {
  await shard?.close();
  shard = undefined;
});

const DIRS = ['/a', '/a/b', '/a/b-c', '/z', '/é', '/𝔘'];
const NAMES = ['x.md', 'y.ts', '.hidden', 'z-1.ts', 'ü.txt'];
const CLAIMS: (string[] | null)[] = [null, ['red'], ['blue'], ['red', 'blue']];

/** Every read the catalog serves, as (label, output or error code) pairs. */
function readAll(reader: ShardReader): [string, string][] {
  const out: [string, string][] = [];
  const attempt = (label: string, gen: () => Generator<Buffer, { resultCount: number }>): void => {
    const error = toolError(gen());
    out.push([label, error === undefined ? output(gen()) : `error ${error.code}`]);
  };
  for (const claims of [null, ['red'], []]) {
    for (const path of ['/', ...DIRS, '/a/b/x.md', '/nope']) attempt(`ls ${path} ${claims}`, () => ls(reader, { claims, path }));
    for (const pattern of ['**/*.ts', '*', '**/.hidden', '/a/**', 'b*/**']) {
      attempt(`find ${pattern} ${claims}`, () => find(reader, { claims, pattern }));
      attempt(`find ${pattern} /a ${claims}`, () => find(reader, { claims, pattern, path: '/a' }));
    }
    for (const pattern of ['line', 'doc \\d+', 'zzz']) {
      for (const outputMode of ['files_with_matches', 'content', 'count'] as const) {
        attempt(`grep ${pattern} ${outputMode} ${claims}`, () => grep(reader, { claims, pattern, outputMode }));
        attempt(`grep ${pattern} ${outputMode} /a ${claims}`, () => grep(reader, { claims, pattern, outputMode, path: '/a', glob: '*.ts' }));
        attempt(`grep ${pattern} ${outputMode} /a/b/x.md ${claims}`, () => grep(reader, { claims, pattern, outputMode, path: '/a/b/x.md' }));
      }
    }
  }
  return out;
}

/**
 * The reads through `cached` (which builds a catalog at once and keeps it while the version
 * holds) and through `plain` (which never builds one), checking that each took its way.
 */
function bothWays(cached: ShardReader, plain: ShardReader): { fromLmdb: [string, string][]; fromCatalog: [string, string][] } {
  const check = (reader: ShardReader, cataloged: boolean): void => {
    const snapshot = reader.snapshot();
    expect(snapshot.cataloged).toBe(cataloged);
    snapshot.done();
  };
  check(plain, false);
  check(cached, true);
  return { fromLmdb: readAll(plain), fromCatalog: readAll(cached) };
}

describe('shard catalog', () => {
  it('answers every tool exactly as LMDB does, across writes, replacements, metadata changes and deletions', async () => {
    shard = await buildShard();
    shard.reader.catalogAfter = 0;
    // A second reader of the same environment that never builds a catalog.
    const plain = readerOf(shard.dir, false);
    const random = seededRandom(7);
    const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)];
    const live = new Set<string>();
    for (let step = 0; step < 12; step++) {
      const batch: DocSpec[] = [];
      for (let i = 0; i < 6; i++) {
        const path = `${pick(DIRS)}/${pick(NAMES)}`;
        // Same text as before (a metadata-only change when the claims differ) or new text.
        const text = random() < 0.4 ? `line of ${path}\n` : `line ${step}\ndoc ${i}\n`;
        batch.push({ path, text, claims: pick(CLAIMS) });
        live.add(path);
      }
      await shard.write(batch);
      if (step % 3 === 2) {
        const gone = pick([...live]);
        await shard.writer.deleteDocument(gone);
        live.delete(gone);
      }
      if (step === 7) await shard.writer.compact();
      const { fromLmdb, fromCatalog } = bothWays(shard.reader, plain);
      expect(fromCatalog).toEqual(fromLmdb);
      // Reads between commits must not change what the kept catalog answers.
      expect(readAll(shard.reader)).toEqual(fromLmdb);
    }
    // The reads were not all empty or all errors: the comparison covered real listings.
    const { fromLmdb } = bothWays(shard.reader, plain);
    await plain.close();
    expect(fromLmdb.filter(([, text]) => text !== '' && !text.startsWith('error')).length).toBeGreaterThan(fromLmdb.length / 2);
  });

  it('stops applying at the next commit; an older snapshot keeps its own version', async () => {
    shard = await buildShard([{ path: '/d/one.txt', text: 'one\n' }]);
    shard.reader.catalogAfter = 0;
    const before = shard.reader.snapshot();
    expect(before.cataloged).toBe(true);
    await shard.write([{ path: '/d/two.txt', text: 'two\n' }]);
    const after = shard.reader.snapshot();
    expect(after.docsVersion).toBe(before.docsVersion + 1);
    expect(after.cataloged).toBe(true);
    expect([...after.pathsInRange('/d/', '/d0')]).toEqual(['/d/one.txt', '/d/two.txt']);
    expect([...before.pathsInRange('/d/', '/d0')]).toEqual(['/d/one.txt']);
    before.done();
    after.done();
    await shard.writer.deleteDocument('/d/one.txt');
    expect(output(ls(shard.reader, { claims: null, path: '/d' }))).toBe('two.txt\t4\n');
  });

  it('keeps the catalogs of one thread within the budget, dropping the least recently used', async () => {
    const docs = (dir: string): DocSpec[] => Array.from({ length: 10 }, (_, i) => ({ path: `/${dir}/${i}.txt`, text: `${i}\n` }));
    const [a, b, c] = await Promise.all([buildShard(docs('a')), buildShard(docs('b')), buildShard(docs('c'))]);
    try {
      setReaderLimits({ catalogBudget: 25 });
      for (const t of [a, b, c]) t.reader.catalogAfter = 0;
      const use = (t: TestShard): void => t.reader.snapshot().done();
      use(a);
      use(b);
      expect([a.reader.catalogedDocs, b.reader.catalogedDocs]).toEqual([10, 10]);
      use(a); // a is now the more recently used
      use(c); // 30 > 25: b goes
      expect([a.reader.catalogedDocs, b.reader.catalogedDocs, c.reader.catalogedDocs]).toEqual([10, null, 10]);
      // A shard larger than the whole budget never gets one.
      await a.write(docs('more').concat(docs('most')));
      use(a);
      expect(a.reader.catalogedDocs).toBe(null);
      expect(output(ls(a.reader, { claims: null, path: '/most' }))).toContain('9.txt\t2\n');
    } finally {
      setReaderLimits({});
      await Promise.all([a.close(), b.close(), c.close()]);
    }
  });

  it('is not built for a shard larger than the largest the thread catalogs', async () => {
    shard = await buildShard(Array.from({ length: 10 }, (_, i) => ({ path: `/f/${i}.txt`, text: `${i}\n` })));
    try {
      const cataloged = (reader: ShardReader): boolean => {
        const snapshot = reader.snapshot();
        snapshot.done();
        return snapshot.cataloged;
      };
      setReaderLimits({ largestCatalog: 9 });
      shard.reader.catalogAfter = 0;
      expect(cataloged(shard.reader)).toBe(false);
      setReaderLimits({ largestCatalog: 10 });
      expect(cataloged(shard.reader)).toBe(true);
    } finally {
      setReaderLimits({});
    }
  });

  it('is built only after snapshots of one version have read as many records as the shard holds', async () => {
    const docs = Array.from({ length: 10 }, (_, i) => ({ path: `/f/${i}.txt`, text: `${i}\n` }));
    shard = await buildShard(docs);
    const { reader } = shard;
    const cataloged = (): boolean => {
      const snapshot = reader.snapshot();
      snapshot.done();
      return snapshot.cataloged;
    };
    // The first snapshot of a version only starts the count; reading one record is not enough.
    expect(cataloged()).toBe(false);
    output(ls(reader, { claims: null, path: '/f/3.txt' }));
    expect(cataloged()).toBe(false);
    // An ls of /f reads its 10 records: together with the one before, the shard's worth.
    output(ls(reader, { claims: null, path: '/f' }));
    expect(cataloged()).toBe(true);
    // A commit starts over: the next version must earn its own catalog.
    await shard.write([{ path: '/f/new.txt', text: 'new\n' }]);
    expect(cataloged()).toBe(false);
    output(ls(reader, { claims: null, path: '/f' }));
    expect(cataloged()).toBe(true);
  });
  it('remembers at most 64 find answers, holding at most its document count plus 4,096 records, dropping the least recently used', () => {
    const docs: DocMeta[] = Array.from({ length: 100 }, (_, i) => ({
      id: i,
      path: `/f${String(i).padStart(3, '0')}`,
      textBytes: 1,
      sizeBytes: 1,
      lines: 1,
      updatedAt: i,
      contentType: 'text/plain',
      claims: null,
      version: `v${i}`,
    }));
    const catalog = new ShardCatalog(1, docs);
    for (let i = 0; i < 64; i++) catalog.remember(`q${i}`, [docs[i]]);
    expect(catalog.recall('q0')).toEqual([docs[0]]); // q0 is now the most recently used
    catalog.remember('q64', [docs[64]]);
    expect(catalog.recall('q1')).toBeUndefined();
    expect(catalog.recall('q0')).toEqual([docs[0]]);
    expect(catalog.recall('q64')).toEqual([docs[64]]);

    // 4,196 records fill the budget: every other answer goes.
    const full = new Array<DocMeta>(4196).fill(docs[5]);
    catalog.remember('full', full);
    expect(catalog.recall('full')).toBe(full);
    expect(catalog.recall('q0')).toBeUndefined();
    catalog.remember('one more', [docs[1]]);
    expect(catalog.recall('full')).toBeUndefined();
    expect(catalog.recall('one more')).toEqual([docs[1]]);
    // An answer larger than the budget is not kept, and drops nothing.
    catalog.remember('too large', new Array<DocMeta>(4197).fill(docs[5]));
    expect(catalog.recall('too large')).toBeUndefined();
    expect(catalog.recall('one more')).toEqual([docs[1]]);
  });
});
