import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  evaluateQuery,
  lookupCandidates,
  pathHash,
  scanCandidates,
  selectCandidates,
  union,
  type CandidateOptions,
  type PathShare,
} from '../engine/grep-candidates.js';
import { GrepFilter } from '../engine/grep-filter.js';
import { evalQuery, type Query } from '../engine/regex/query.js';
import { regexQuery } from './helpers/regex.js';
import type { DocMeta } from '../engine/shard-format.js';
import type { ShardSnapshot } from '../engine/shard-snapshot.js';
import { comparePaths } from '../engine/tool-output.js';
import { Visibility } from '../engine/visibility.js';
import { buildShard, type DocSpec, type TestShard } from './helpers/engine-shard.js';
import { textGrams } from './helpers/grams.js';

function tri(s: string): number {
  const b = Buffer.from(s, 'utf8');
  return (b[0] << 16) | (b[1] << 8) | b[2];
}

const and = (trigrams: string[], sub: Query[] = []): Query => ({ op: 'and', trigrams: trigrams.map(tri), sub });
const or = (trigrams: string[], sub: Query[] = []): Query => ({ op: 'or', trigrams: trigrams.map(tri), sub });
const ALL: Query = { op: 'all' };
const NONE: Query = { op: 'none' };

/** A shard whose every id (live or dead) has a known text, for an exact answer to any query. */
class KnownShard {
  readonly texts = new Map<number, string>();
  constructor(readonly s: TestShard) {}

  async write(docs: DocSpec[]): Promise<void> {
    await this.s.write(docs);
    for (const d of docs) this.texts.set(this.s.writer.lookup(d.path)!.id, d.text as string);
  }

  /** Every id ever allocated whose text satisfies `q`, ascending; null when that is every id. */
  exact(q: Query): number[] | null {
    const ids = [...this.texts.keys()].filter((id) => {
      const has = textGrams(this.texts.get(id)!);
      return evalQuery(q, (t) => has.has(t));
    });
    return ids.length === this.texts.size ? null : ids.sort((a, b) => a - b);
  }
}

function evaluate(s: TestShard, q: Query): number[] | null {
  const snap = s.reader.snapshot();
  try {
    const ids = evaluateQuery(snap, q);
    return ids === null ? null : [...ids];
  } finally {
    snap.done();
  }
}

describe('evaluateQuery', () => {
  // 4,500 filler files merged into level 1 (so `fil` has a sealed block and a tail), then
  // replacements and deletions (dead ids), then two batches left in level-0 segments.
  let k: KnownShard;
  beforeAll(async () => {
    k = new KnownShard(await buildShard());
    const first: DocSpec[] = [];
    for (let i = 0; i < 4500; i++) {
      const n = String(i).padStart(4, '0');
      const words = (i % 150 === 0 ? ' alpha' : '') + (i < 40 ? ' omega' : '');
      first.push({ path: `/fill/${n}.txt`, text: `filler line ${n}${words}\n` });
    }
    await k.write(first);
    await k.s.writer.flush();
    await k.write([
      { path: '/fill/0000.txt', text: 'replaced alpha gamma\n' },
      { path: '/fill/0150.txt', text: 'replaced beta\n' },
      { path: '/new/a.txt', text: 'gamma alpha\nomega\n' },
    ]);
    for (const n of ['0001', '0002', '0003']) expect(await k.s.writer.deleteDocument(`/fill/${n}.txt`)).toBe(true);
    await k.write([
      { path: '/new/b.txt', text: 'filler alpha omega gamma\n' },
      { path: '/new/c.txt', text: 'ALPHA Alpha aLpHa\n' },
      { path: '/new/d.txt', text: 'alpine filler\n' },
      // Every trigram of "alpha" and "omega", but neither word: quadgrams tell.
      { path: '/new/e.txt', text: 'xalpy lphaz xomey megz zega\n' },
    ]);
  });
  afterAll(() => k.s.close());

  it('runs on a shard with level-1 blocks, dead ids and level-0 segments', () => {
    const snap = k.s.reader.snapshot();
    try {
      expect(snap.postingBlocks(tri('fil')).blocks.length).toBeGreaterThanOrEqual(3); // sealed, tail, segment
      const state = snap.state();
      expect(state.segNext - state.segFirst).toBe(2);
      expect(state.deadIds).toBe(5);
    } finally {
      snap.done();
    }
  });

  // A query, what it tests, and the query whose exact answer (dead ids included) it must give:
  // the query itself, or a wider one when the evaluation may skip a costly conjunct.
  const cases: [string, () => Query, (() => Query)?][] = [
    ['alpha (level 1, dead ids, both segments)', () => regexQuery('alpha')],
    ['omega (ids 1-40 and segments)', () => regexQuery('omega')],
    ['alpha.*omega', () => regexQuery('alpha.*omega')],
    ['omega with filler (the tail block holds no candidate)', () => regexQuery('filler line 00.. omega')],
    ['filler line 00 (100 of 4,500 in several blocks)', () => regexQuery('filler line 00')],
    ['filler line (every filler file)', () => regexQuery('filler line')],
    ['absent trigram', () => regexQuery('zzqqxx')],
    ['absent trigram after common ones', () => regexQuery('filler zzq')],
    ['alternation', () => regexQuery('alpha|omega|gamma')],
    ['alternation with an absent branch', () => regexQuery('omega|zzqqxx')],
    ['case-insensitive (AND of ORs)', () => regexQuery('alpha', { caseInsensitive: true })],
    ['alp(ha|ine)', () => regexQuery('alp(ha|ine)')],
    ['alpha with quadgrams', () => regexQuery('alpha', { quadgrams: true })],
    ['alternation with quadgrams', () => regexQuery('alpha|omega|gamma', { quadgrams: true })],
    ['filler line 00 with quadgrams', () => regexQuery('filler line 00', { quadgrams: true })],
    ['no trigram: all', () => regexQuery('a.')],
    [
      'AND with an OR sub-query; "fil" is skipped (4 candidates, 4,000-id block)',
      () => and(['alp', 'fil'], [or(['ome', 'gam'])]),
      () => and(['alp'], [or(['ome', 'gam'])]),
    ],
    ['AND with an OR sub-query, many candidates', () => and(['fil', 'lle'], [or(['alp', 'ome'])])],
    [
      'AND whose OR has an AND inside; "fil" is skipped (47 candidates, 4,500 ids)',
      () => and(['fil'], [or(['gam'], [and(['ome', 'meg'])])]),
      () => or(['gam'], [and(['ome', 'meg'])]),
    ],
    ['OR of absent trigrams', () => or(['qqq', 'qqx'])],
    ['AND of all', () => and([], [ALL])],
    ['AND with none', () => and(['alp'], [NONE])],
    ['AND with an OR containing all', () => and(['ome'], [or(['gam'], [ALL])])],
    ['OR with a sub-query that is all', () => or(['ome'], [and([], [ALL])])],
    ['AND whose only rare conjunct is a sub-query; "fil" and "ill" are skipped', () => and(['fil', 'ill'], [or(['alp', 'gam'])]), () => or(['alp', 'gam'])],
  ];
  it.each(cases)('%s', (_, make, wider) => {
    const q = make();
    const got = evaluate(k.s, q);
    expect(got).toEqual(k.exact(wider === undefined ? q : wider()));
    // Always a superset of the exact answer.
    const exact = k.exact(q);
    if (exact !== null) expect(got === null || exact.every((id) => got.includes(id))).toBe(true);
    if (wider !== undefined) expect(got).not.toEqual(exact); // the skip happened
  });

  it('the table is not vacuous', () => {
    // Each of these is non-empty and narrower than "every id".
    for (const pattern of ['alpha', 'omega', 'filler line 00', 'alpha|omega|gamma']) {
      const ids = k.exact(regexQuery(pattern))!;
      expect(ids.length).toBeGreaterThan(0);
      expect(ids.length).toBeLessThan(k.texts.size);
    }
    // Dead ids are among the answers: 1 (replaced /fill/0000.txt) holds alpha.
    expect(evaluate(k.s, regexQuery('alpha'))).toContain(1);
    // Quadgrams leave out the file that has the trigrams of alpha and omega but not the words.
    const e = k.s.writer.lookup('/new/e.txt')!.id;
    for (const word of ['alpha', 'omega']) {
      expect(evaluate(k.s, regexQuery(word))).toContain(e);
      expect(evaluate(k.s, regexQuery(word, { quadgrams: true }))).not.toContain(e);
    }
  });
});

describe('evaluateQuery skips costly conjuncts, keeping a superset', () => {
  // 3,000 files with "common" in one level-1 block; /q.txt (id 1,501, inside that block's id
  // range) and /y.txt (written later, after the block's last id) do not contain it.
  let k: KnownShard;
  beforeAll(async () => {
    k = new KnownShard(await buildShard());
    const docs: DocSpec[] = [];
    for (let i = 0; i < 3000; i++) {
      if (i === 1500) docs.push({ path: '/q.txt', text: 'qqqq\n' });
      docs.push({ path: `/c/${i}.txt`, text: `common ${i}\n` });
    }
    await k.write(docs);
    await k.s.writer.flush();
    await k.write([{ path: '/y.txt', text: 'yyyy\n' }]);
  });
  afterAll(() => k.s.close());

  const q = (): number => k.s.writer.lookup('/q.txt')!.id;
  const y = (): number => k.s.writer.lookup('/y.txt')!.id;

  it('drops a conjunct whose decoding costs more than verifying the candidates it may remove', () => {
    const query = and(['qqq', 'com']);
    expect(k.exact(query)).toEqual([]);
    // One candidate against a 3,000-id block: "com" is not decoded, /q.txt stays.
    expect(evaluate(k.s, query)).toEqual([q()]);
  });

  it('counts only blocks whose id range holds a candidate', () => {
    // /y.txt is past the last id of every "com" block: nothing to decode, the conjunct applies.
    expect(evaluate(k.s, and(['yyy', 'com']))).toEqual([]);
    expect(k.exact(and(['yyy']))).toEqual([y()]);
  });

  it('treats a costly OR inside an AND as all', () => {
    const query = and(['qqq'], [or(['com', 'mmm'])]);
    expect(k.exact(query)).toEqual([]);
    expect(evaluate(k.s, query)).toEqual([q()]);
  });

  it('still applies a conjunct when the candidates are many', () => {
    // The OR leaves /q.txt and the 1,111 files "common 1…"; "com" (3,000 ids) removes /q.txt.
    const query = and(['com'], [or(['qqq', 'n 1'])]);
    expect(evaluate(k.s, query)).toEqual(k.exact(query));
    expect(k.exact(query)!.length).toBe(1111);
    expect(k.exact(query)).not.toContain(q());
  });
});

describe('evaluateQuery samples a costly conjunct before decoding it all', () => {
  // 20,000 files "common filler i"; every 50th also holds "rarely", every 50th (another one)
  // "seldom". Interleaved with those, 400 files hold "seldom" without "common". /early.txt,
  // the first written, and /odd.txt, the last, hold "rarely" without "common".
  let k: KnownShard;
  beforeAll(async () => {
    k = new KnownShard(await buildShard());
    const docs: DocSpec[] = [{ path: '/early.txt', text: 'rarely early\n' }];
    for (let i = 0; i < 20_000; i++) {
      const words = i % 50 === 0 ? ' rarely' : i % 50 === 25 ? ' seldom' : '';
      docs.push({ path: `/c/${i}.txt`, text: `common filler ${i}${words}\n` });
      if (i % 50 === 10) docs.push({ path: `/s/${i}.txt`, text: `seldom alone ${i}\n` });
    }
    docs.push({ path: '/odd.txt', text: 'rarely odd\n' });
    await k.write(docs);
    await k.s.writer.flush();
  }, 60_000);
  afterAll(() => k.s.close());

  // "rar" then "are" (the same files: none removed) leave 402 candidates and little hope, so
  // "com" (20,000 ids) is tried on the first 51 of them: it removes /early.txt there, too few
  // to pay for the rest, where /odd.txt stays.
  it('leaves the rest unfiltered when the sample removes too little', () => {
    const query = and(['rar', 'are', 'com']);
    const exact = k.exact(query)!;
    expect(exact).toHaveLength(400);
    const odd = k.s.writer.lookup('/odd.txt')!.id;
    expect(evaluate(k.s, query)).toEqual([...exact, odd]);
  });

  it('applies the conjunct to the rest when the sample removes candidates', () => {
    // Half of the 800 "seldom" files lack "common", in the sample as in the rest.
    const query = and(['sel', 'eld', 'com']);
    expect(k.exact(query)).toHaveLength(400);
    expect(evaluate(k.s, query)).toEqual(k.exact(query));
  });
});

describe('union', () => {
  const cases: [number[][], number[]][] = [
    [[], []],
    [[[]], []],
    [[[1, 3]], [1, 3]],
    [
      [[1, 3], [2, 3], []],
      [1, 2, 3],
    ],
    [
      [[5], [1], [3], [1, 5, 9]],
      [1, 3, 5, 9],
    ],
  ];
  it.each(cases)('%j', (lists, expected) => {
    expect([...union(lists.map((l) => Uint32Array.from(l)))]).toEqual(expected);
  });
});

describe('selectCandidates', () => {
  // 7,200 files in three directories with three kinds of claims, some replaced (their old ids
  // are dead), and paths whose UTF-16 order differs from their code point order.
  let s: TestShard;
  let allIds: Uint32Array; // every id ever allocated, plus ids never allocated
  beforeAll(async () => {
    s = await buildShard();
    const docs: DocSpec[] = [];
    const dirs = ['/src/a', '/src/b', '/docs'];
    const claims = [null, ['team-a'], ['team-b']];
    for (let i = 0; i < 7200; i++) {
      const ext = i % 2 === 0 ? 'ts' : 'md';
      docs.push({ path: `${dirs[i % 3]}/f${i}.${ext}`, text: `file ${i}\n`, claims: claims[(i >> 2) % 3] });
    }
    docs.push({ path: '/src/a/\u{1F600}.ts', text: 'emoji\n' }, { path: '/src/a/\uFF01.ts', text: 'fullwidth\n' });
    await s.write(docs);
    await s.write(Array.from({ length: 50 }, (_, i) => ({ path: `/src/a/f${i * 3}.${i % 2 === 0 ? 'ts' : 'md'}`, text: `again ${i}\n`, claims: ['team-b'] })));
    const next = s.writer.state().nextDocId;
    allIds = Uint32Array.from({ length: next + 9 }, (_, i) => i + 1);
  });
  afterAll(() => s.close());

  /** The answer computed here from the path order of `paths` and the filters, one by one. */
  function expected(snap: ShardSnapshot, ids: Uint32Array, o: CandidateOptions): string[] {
    const wanted = new Set(ids);
    const out: string[] = [];
    const prefix = o.root === '/' ? '/' : o.root + '/';
    for (const path of snap.pathsInRange('/', '0')) {
      const meta = snap.docByPath(path)!;
      if (!wanted.has(meta.id) || !path.startsWith(prefix) || !o.filter.test(path) || !o.visibility.canSee(meta.claims)) continue;
      if (o.pathShare !== undefined && pathHash(path) % o.pathShare.count !== o.pathShare.index) continue;
      const range = o.pathRange;
      if (range !== undefined && ((range.from !== null && comparePaths(path, range.from) < 0) || (range.to !== null && comparePaths(path, range.to) >= 0)))
        continue;
      out.push(path);
    }
    return out;
  }

  const paths = (docs: DocMeta[]): string[] => docs.map((d) => d.path);

  // With 7,202 live files, selectCandidates scans for every id, looks 2,100 ids up under `/`
  // and /src (4,800 files) but scans /src/a (2,400), and looks a seventh of the ids up anywhere.
  const idSets: [string, () => Uint32Array][] = [
    ['every id, dead and unallocated ones included', () => allIds],
    ['2,100 ids', () => allIds.filter((id) => id % 8 !== 0).slice(0, 2100)],
    ['every 7th id', () => allIds.filter((id) => id % 7 === 3)],
    ['12 ids', () => Uint32Array.from([1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 7201, 7202])],
    ['no id', () => new Uint32Array(0)],
  ];
  const settings: [string, string, string | undefined, readonly string[] | null, CandidateOptions['pathRange'], PathShare?][] = [
    // name, root, glob, token claims, path range, hash class
    ['everything', '/', undefined, null, undefined],
    ['hash class 1 of 3', '/', undefined, null, undefined, { index: 1, count: 3 }],
    ['team-b under /src, hash class 0 of 2', '/src', undefined, ['team-b'], undefined, { index: 0, count: 2 }],
    ['under /src', '/src', undefined, null, undefined],
    ['under /src/a, *.ts', '/src/a', '*.ts', null, undefined],
    ['paths in [/src/a/f3, /src/b)', '/', undefined, null, { from: '/src/a/f3', to: '/src/b' }],
    ['team-a only', '/', undefined, ['team-a'], undefined],
    ['team-b under /src, paths from /src/a/f1 on', '/src', undefined, ['team-b'], { from: '/src/a/f1', to: null }],
  ];
  const cases = settings.flatMap((setting) => idSets.map(([name, ids]) => [setting[0], name, setting, ids] as const));

  it.each(cases)('%s, %s', (_, idName, [, root, glob, claims, pathRange, pathShare], makeIds) => {
    const ids = makeIds();
    const options: CandidateOptions = {
      root,
      rootIsFile: false,
      filter: new GrepFilter(root, glob, undefined),
      visibility: new Visibility(claims),
      pathRange,
      pathShare,
    };
    const snap = s.reader.snapshot();
    try {
      const want = expected(snap, ids, options);
      if (idName !== 'no id') expect(want.length).toBeGreaterThan(0);
      expect(paths(lookupCandidates(snap, ids, options))).toEqual(want);
      expect(paths(scanCandidates(snap, ids, options))).toEqual(want);
      expect(paths(selectCandidates(snap, ids, options))).toEqual(want);
    } finally {
      snap.done();
    }
  });

  it('filters and orders what it finds', () => {
    const snap = s.reader.snapshot();
    try {
      const options = (claims: readonly string[] | null, root = '/'): CandidateOptions => ({
        root,
        rootIsFile: false,
        filter: new GrepFilter(root, undefined, undefined),
        visibility: new Visibility(claims),
        pathRange: undefined,
      });
      // Dead and unallocated ids are dropped; each live file appears once.
      const every = lookupCandidates(snap, allIds, options(null));
      expect(every.length).toBe(snap.state().liveDocs);
      // SECURITY: team-a sees no team-b file, whichever way candidates are found.
      for (const docs of [lookupCandidates(snap, allIds, options(['team-a'])), scanCandidates(snap, allIds, options(['team-a']))]) {
        expect(docs.length).toBeGreaterThan(0);
        expect(docs.some((d) => d.claims?.includes('team-b') === true)).toBe(false);
      }
      // Code point order: U+FF01 before U+1F600 (UTF-16 order would put the emoji first).
      const names = paths(lookupCandidates(snap, allIds, options(null, '/src/a'))).filter((p) => !/\/f\d+\./.test(p));
      expect(names).toEqual(['/src/a/\uFF01.ts', '/src/a/\u{1F600}.ts']);
    } finally {
      snap.done();
    }
  });
});
