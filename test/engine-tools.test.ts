import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CHUNK_BYTES,
  cat,
  find,
  grep,
  ls,
  collectGrepCounts,
  type ShardReader,
  emitGrepCounts,
  type Claims,
  type GrepCollection,
  type GrepRequest,
  type GrepSplit,
  setV8Scans,
} from '../engine/index.js';
import { pathHash } from '../engine/grep-candidates.js';
import { comparePaths } from '../engine/tool-output.js';
import picomatch from 'picomatch';
import { buildShard, output, readerOf, run, toolError, type DocSpec, type TestShard } from './helpers/engine-shard.js';
import { seededRandom } from './helpers/random.js';

const MGMT: Claims = null;

describe('tools on a small workspace', () => {
  let s: TestShard;
  beforeAll(async () => {
    s = await buildShard([
      { path: '/README.md', text: '# Title\nhello world\n', updatedAt: 30 },
      { path: '/src/main.c', text: 'int main() {\n  return helper(1);\n}\n', updatedAt: 50 },
      { path: '/src/helper.c', text: 'int helper(int x) {\n  return x + 1;\n}\n', updatedAt: 40 },
      { path: '/src/a-b/x.h', text: '#define X 1\n', updatedAt: 20 },
      { path: '/src/a/deep/y.h', text: '#define Y 2\n', updatedAt: 10 },
      { path: '/docs/guide.md', text: 'See main.c\r\nand helper.c\r\n', updatedAt: 60 },
      { path: '/.hidden/conf', text: 'key=value', updatedAt: 5 },
      { path: '/empty.txt', text: '', updatedAt: 1 },
      { path: '/x[1].c', text: 'odd name\n', updatedAt: 2 },
    ]);
  });
  afterAll(() => s.close());

  describe('ls', () => {
    const cases: [string | undefined, string][] = [
      [undefined, '.hidden/\ndocs/\nsrc/\nREADME.md\t20\nempty.txt\t0\nx[1].c\t9\n'],
      ['/', '.hidden/\ndocs/\nsrc/\nREADME.md\t20\nempty.txt\t0\nx[1].c\t9\n'],
      ['src', 'a/\na-b/\nhelper.c\t38\nmain.c\t35\n'],
      ['/src/', 'a/\na-b/\nhelper.c\t38\nmain.c\t35\n'],
      ['/src/a', 'deep/\n'],
      ['/src/main.c', 'main.c\t35\n'],
    ];
    it.each(cases)('ls %s', (path, expected) => {
      expect(output(ls(s.reader, { claims: MGMT, path }))).toBe(expected);
    });

    it.each(['/nope', '/src/mai', '/src/main.c/x'])('ls %s is NO_SUCH_FILE', (path) => {
      expect(toolError(ls(s.reader, { claims: MGMT, path }))?.code).toBe('NO_SUCH_FILE');
    });

    it('rejects an invalid path', () => {
      expect(toolError(ls(s.reader, { claims: MGMT, path: '/a/../b' }))?.code).toBe('INVALID_PARAMETER');
    });
  });

  describe('find', () => {
    const cases: [string, string | undefined, string][] = [
      ['**/*.c', undefined, '/src/main.c\n/src/helper.c\n/x[1].c\n'],
      ['**/*.md', undefined, '/docs/guide.md\n/README.md\n'],
      ['*.md', undefined, '/README.md\n'],
      ['README.md', undefined, '/README.md\n'],
      ['main.c', undefined, ''],
      ['main.c', '/src', '/src/main.c\n'],
      ['**/*.h', '/src', '/src/a-b/x.h\n/src/a/deep/y.h\n'],
      ['**/conf', undefined, '/.hidden/conf\n'],
      ['**/*main*', undefined, '/src/main.c\n'],
      ['x[1].c', undefined, '/x[1].c\n'],
      ['/src/*.c', undefined, '/src/main.c\n/src/helper.c\n'],
      ['*.{c,md}', undefined, '/README.md\n/x[1].c\n'],
    ];
    it.each(cases)('find %s under %s', (pattern, path, expected) => {
      expect(output(find(s.reader, { claims: MGMT, pattern, path }))).toBe(expected);
    });

    it('cuts at head_limit with a footer', () => {
      const r = run(find(s.reader, { claims: MGMT, pattern: '**', headLimit: 2 }));
      expect(r.text).toBe(
        '/docs/guide.md\n/src/main.c\n[7 more matching files not shown (9 in total); raise head_limit (at most 1000) or narrow the pattern or path]\n',
      );
      expect(r.resultCount).toBe(2);
    });

    it('missing directory is NO_SUCH_FILE', () => {
      expect(toolError(find(s.reader, { claims: MGMT, pattern: '*', path: '/nope' }))?.code).toBe('NO_SUCH_FILE');
    });

    // Plain globs are first narrowed by their longest literal run; the others are not.
    it.each([
      'src/a-b/*',
      '**/a-b/**',
      '**/main.?',
      '**/ma*n.c',
      '**/*elper*',
      '*/*',
      '.hidden/conf',
      '**/deep/**',
      's?c/**',
      '**/READ*',
      '**/*.[ch]',
      '**/{main,helper}.c',
      '!**/*.c',
    ])('find %s lists what picomatch matches, with and without a catalog', (pattern) => findsAsPicomatch(s.dir, pattern));
  });

  describe('cat', () => {
    const cases: [string, number | undefined, number | undefined, string][] = [
      ['/src/main.c', undefined, undefined, '     1\tint main() {\n     2\t  return helper(1);\n     3\t}\n'],
      ['src/main.c', 2, 1, '     2\t  return helper(1);\n[... 1 more lines (the file has 3); continue with offset=3]\n'],
      ['/src/main.c', 3, 10, '     3\t}\n'],
      ['/src/main.c', 4, undefined, '[offset 4 is past the end of the file: it has 3 lines]\n'],
      ['/docs/guide.md', undefined, undefined, '     1\tSee main.c\r\n     2\tand helper.c\r\n'],
      ['/.hidden/conf', undefined, undefined, '     1\tkey=value\n'],
      ['/empty.txt', undefined, undefined, '[the file is empty: 0 lines]\n'],
    ];
    it.each(cases)('cat %s offset=%s limit=%s', (path, offset, limit, expected) => {
      expect(output(cat(s.reader, { claims: MGMT, path, offset, limit }))).toBe(expected);
    });

    it.each(['/nope.c', '/src'])('cat %s is NO_SUCH_FILE', (path) => {
      const error = toolError(cat(s.reader, { claims: MGMT, path }));
      expect(error?.code).toBe('NO_SUCH_FILE');
      expect(error?.message).toContain(path);
    });
  });

  describe('grep', () => {
    const cases: [string, Partial<GrepRequest>, string][] = [
      ['files, densest first', { pattern: 'helper' }, '/docs/guide.md\n/src/helper.c\n/src/main.c\n'],
      ['count', { pattern: 'return', outputMode: 'count' }, '/src/helper.c:1\n/src/main.c:1\n'],
      ['content', { pattern: 'return', outputMode: 'content' }, '/src/helper.c:2:  return x + 1;\n/src/main.c:2:  return helper(1);\n'],
      [
        'content without -n',
        { pattern: 'return', outputMode: 'content', lineNumbers: false },
        '/src/helper.c:  return x + 1;\n/src/main.c:  return helper(1);\n',
      ],
      [
        'context -C1 with separators between files',
        { pattern: 'return', outputMode: 'content', context: 1 },
        '/src/helper.c-1-int helper(int x) {\n/src/helper.c:2:  return x + 1;\n/src/helper.c-3-}\n--\n/src/main.c-1-int main() {\n/src/main.c:2:  return helper(1);\n/src/main.c-3-}\n',
      ],
      [
        '-A1',
        { pattern: '^int', outputMode: 'content', after: 1, path: '/src' },
        '/src/helper.c:1:int helper(int x) {\n/src/helper.c-2-  return x + 1;\n--\n/src/main.c:1:int main() {\n/src/main.c-2-  return helper(1);\n',
      ],
      [
        '-C sets both unless -B is given',
        { pattern: 'return', outputMode: 'content', context: 1, before: 0, path: '/src/main.c' },
        '/src/main.c:2:  return helper(1);\n/src/main.c-3-}\n',
      ],
      ['-i', { pattern: 'TITLE', caseInsensitive: true }, '/README.md\n'],
      ['path is a directory', { pattern: 'int', path: '/src' }, '/src/helper.c\n/src/main.c\n'],
      ['path is a file', { pattern: 'int', path: '/src/main.c' }, '/src/main.c\n'],
      ['glob by name', { pattern: 'e', glob: '*.md' }, '/README.md\n/docs/guide.md\n'],
      ['negated glob excludes a directory', { pattern: 'define', glob: '!a-b' }, '/src/a/deep/y.h\n'],
      ['glob with a slash is relative to the root', { pattern: 'define', glob: 'a/**', path: '/src' }, '/src/a/deep/y.h\n'],
      ['type', { pattern: 'e', type: 'c', outputMode: 'count' }, '/src/a-b/x.h:1\n/src/a/deep/y.h:1\n/x[1].c:1\n/src/helper.c:2\n/src/main.c:1\n'],
      ['type md', { pattern: 'e', type: 'md' }, '/README.md\n/docs/guide.md\n'],
      ['no trigram pattern', { pattern: '[XY] [12]', outputMode: 'content' }, '/src/a-b/x.h:1:#define X 1\n/src/a/deep/y.h:1:#define Y 2\n'],
      ['anchors', { pattern: '^}$', outputMode: 'count' }, '/src/helper.c:1\n/src/main.c:1\n'],
      ['CR stays in the line', { pattern: 'c\\r$', outputMode: 'content' }, '/docs/guide.md:1:See main.c\r\n/docs/guide.md:2:and helper.c\r\n'],
      ['last line without newline', { pattern: 'value$', outputMode: 'content' }, '/.hidden/conf:1:key=value\n'],
      [
        'multiline',
        { pattern: '\\{\\n\\s+return', multiline: true, outputMode: 'content' },
        '/src/helper.c:1:int helper(int x) {\n/src/helper.c:2:  return x + 1;\n/src/main.c:1:int main() {\n/src/main.c:2:  return helper(1);\n',
      ],
      ['no match', { pattern: 'zzzqqq' }, ''],
    ];
    it.each(cases)('%s', (_, request, expected) => {
      expect(output(grep(s.reader, { claims: MGMT, pattern: '', ...request }))).toBe(expected);
    });

    it('head_limit and offset in content mode', () => {
      const base: GrepRequest = { claims: MGMT, pattern: '.', outputMode: 'content' };
      const all = output(grep(s.reader, base))
        .split('\n')
        .filter((l) => l !== '');
      const page = run(grep(s.reader, { ...base, offset: 2, headLimit: 3 }));
      const lines = page.text.split('\n').filter((l) => l !== '');
      expect(lines.slice(0, 3)).toEqual(all.slice(2, 5));
      expect(lines[3]).toBe('[output cut at head_limit=3; more lines follow: raise head_limit or continue with offset=5]');
      expect(lines).toHaveLength(4);
      expect(page.resultCount).toBe(3);
      // Exactly at the end: no footer.
      expect(output(grep(s.reader, { ...base, offset: all.length - 2, headLimit: 2 }))).toBe(all.slice(-2).join('\n') + '\n');
    });

    it('head_limit and offset in the sorted modes', () => {
      const r = run(grep(s.reader, { claims: MGMT, pattern: 'e', outputMode: 'count', headLimit: 2, offset: 1 }));
      const all = output(grep(s.reader, { claims: MGMT, pattern: 'e', outputMode: 'count' }))
        .split('\n')
        .filter((l) => l);
      expect(r.text.split('\n').slice(0, 2)).toEqual(all.slice(1, 3));
      expect(r.text.split('\n')[2]).toBe(`[${all.length - 3} more files not shown (${all.length} in total); raise head_limit or continue with offset=3]`);
      expect(r.resultCount).toBe(2);
    });

    it.each([
      ['(unclosed', 'pattern'],
      ['a)', 'pattern'],
      ['x{2,1}', 'pattern'],
      ['(?<=a)b', 'pattern'],
    ])('invalid regex %s is INVALID_PARAMETER naming pattern', (pattern, name) => {
      const error = toolError(grep(s.reader, { claims: MGMT, pattern }));
      expect(error?.code).toBe('INVALID_PARAMETER');
      expect(error?.message).toMatch(new RegExp(`^invalid ${name}: `));
    });

    it('an invalid regex after (?i), which is read as -i, is quoted as the caller wrote it', () => {
      const error = toolError(grep(s.reader, { claims: MGMT, pattern: '(?i)ab(' }));
      expect(error?.code).toBe('INVALID_PARAMETER');
      expect(error?.message).toBe('invalid pattern: missing ): (?i)ab(');
    });

    it('unknown type is INVALID_PARAMETER naming type', () => {
      const error = toolError(grep(s.reader, { claims: MGMT, pattern: 'x', type: 'nosuchtype' }));
      expect(error?.code).toBe('INVALID_PARAMETER');
      expect(error?.message).toMatch(/^invalid type: /);
    });

    it('missing path is NO_SUCH_FILE', () => {
      expect(toolError(grep(s.reader, { claims: MGMT, pattern: 'x', path: '/nope' }))?.code).toBe('NO_SUCH_FILE');
    });

    /** The collection a sorted-mode share returns. */
    const collect = (gen: Generator<Buffer, GrepCollection>): GrepCollection => {
      let r = gen.next();
      while (r.done !== true) r = gen.next();
      return r.value;
    };

    /**
     * Runs a content grep as the read pool does: a lead share, then one per further range, with
     * the lead's candidates (or, with `ownQuery`, evaluating the query again as after a write).
     */
    const splitGrep = (
      reader: TestShard['reader'],
      request: GrepRequest,
      count: number,
      minBytes = 0,
      ownQuery = false,
    ): { bounds: string[]; shares: string[] } => {
      let split: GrepSplit | undefined;
      const lead = output(grep(reader, request, { lead: { count, minBytes, onSplit: (x) => (split = x) } }));
      expect(split).toBeDefined();
      const bounds = split!.shares.map((share) => share.pathRange!.from!);
      const rest = split!.shares.map((share) => output(grep(reader, request, { ...share, candidateIds: ownQuery ? undefined : share.candidateIds })));
      return { bounds, shares: [lead, ...rest] };
    };

    it.each([
      [2, false],
      [3, false],
      [5, false],
      [50, false],
      [3, true],
    ])('content mode split into %i path ranges (own query: %s) concatenates to the whole output', (count, ownQuery) => {
      for (const request of [
        { claims: MGMT, pattern: 'e', outputMode: 'content' },
        { claims: MGMT, pattern: '[a-z]', outputMode: 'content', lineNumbers: false },
        { claims: MGMT, pattern: 'helper|define', outputMode: 'content', context: 1 },
      ] as const) {
        const { bounds, shares } = splitGrep(s.reader, request, count, 0, ownQuery);
        expect(bounds.length).toBeGreaterThan(0);
        expect(bounds.length).toBeLessThan(count);
        expect([...new Set(bounds)].sort(comparePaths)).toEqual(bounds);
        // As the read pool joins them: `--` between two shares' output when context is on.
        const printed = shares.filter((x) => x !== '');
        expect(printed.join('context' in request ? '--\n' : '')).toBe(output(grep(s.reader, request)));
        expect(printed.length).toBeGreaterThan(1);
      }
    });

    it.each([
      [2, false],
      [3, false],
      [3, true],
    ])('sorted modes split into %i hash classes of paths (own query: %s) merge to the whole output', (count, ownQuery) => {
      for (const outputMode of ['files_with_matches', 'count'] as const) {
        const request: GrepRequest = { claims: MGMT, pattern: 'e|x', outputMode };
        let split: GrepSplit | undefined;
        const lead = collect(collectGrepCounts(s.reader, request, { lead: { count, minBytes: 0, onSplit: (x) => (split = x) } }));
        expect(split!.shares.map((share) => share.pathShare)).toEqual(Array.from({ length: count - 1 }, (_, k) => ({ index: k + 1, count })));
        const rest = split!.shares.map((share) =>
          collect(collectGrepCounts(s.reader, request, { ...share, candidateIds: ownQuery ? undefined : share.candidateIds })),
        );
        // The files are spread over the classes, and no class holds another's.
        const classes = [lead, ...rest].map((c) => c.files.map((f) => f.path));
        expect(classes.filter((paths) => paths.length > 0).length).toBeGreaterThan(1);
        expect(new Set(classes.flat()).size).toBe(classes.flat().length);
        expect(output(emitGrepCounts(request, [lead, ...rest]))).toBe(output(grep(s.reader, request)));
      }
    });

    it("a share whose snapshot is newer than the lead's evaluates the query itself", async () => {
      const t = await buildShard([
        { path: '/a.txt', text: 'match\n'.repeat(200) },
        { path: '/m.txt', text: 'match\n'.repeat(100) },
        { path: '/z.txt', text: 'match\n'.repeat(100) },
      ]);
      try {
        const request: GrepRequest = { claims: MGMT, pattern: 'match', outputMode: 'files_with_matches' };
        let split: GrepSplit | undefined;
        output(grep(t.reader, { ...request, outputMode: 'content' }, { lead: { count: 2, minBytes: 0, onSplit: (x) => (split = x) } }));
        const [share] = split!.shares;
        expect(share.pathRange).toEqual({ from: '/m.txt', to: null });
        // A write between the lead and the share: the lead's ids do not list the new file.
        await t.write([{ path: '/n.txt', text: 'match\n' }]);
        const text = output(grep(t.reader, { ...request, outputMode: 'content', lineNumbers: false }, share));
        expect([
          ...new Set(
            text
              .split('\n')
              .filter((l) => l !== '')
              .map((l) => l.split(':')[0]),
          ),
        ]).toEqual(['/m.txt', '/n.txt', '/z.txt']);
      } finally {
        await t.close();
      }
    });

    it("a sorted-mode share whose snapshot is newer than the lead's evaluates the query over its hash class", async () => {
      const paths = Array.from({ length: 12 }, (_, i) => `/f${i}.txt`);
      const t = await buildShard(paths.map((path) => ({ path, text: 'match\n' })));
      try {
        const request: GrepRequest = { claims: MGMT, pattern: 'match', outputMode: 'files_with_matches' };
        let split: GrepSplit | undefined;
        collect(collectGrepCounts(t.reader, request, { lead: { count: 2, minBytes: 0, onSplit: (x) => (split = x) } }));
        const [share] = split!.shares;
        // A new file of the share's class, written between the lead and the share.
        const added = Array.from({ length: 50 }, (_, i) => `/new${i}.txt`).find((path) => pathHash(path) % 2 === 1)!;
        await t.write([{ path: added, text: 'match\n' }]);
        const found = collect(collectGrepCounts(t.reader, request, share)).files.map((f) => f.path);
        expect(found.sort()).toEqual([...paths.filter((path) => pathHash(path) % 2 === 1), added].sort());
      } finally {
        await t.close();
      }
    });

    it('a lead whose candidates hold fewer than minBytes searches everything itself', () => {
      const request = { claims: MGMT, pattern: 'e', outputMode: 'content' } as const;
      const { bounds, shares } = splitGrep(s.reader, request, 3, 1_000_000);
      expect(bounds).toEqual([]);
      expect(shares).toEqual([output(grep(s.reader, request))]);
    });

    it('splits by candidate bytes, not by file count', async () => {
      const t = await buildShard([
        { path: '/a/big.txt', text: 'x match\n'.repeat(1000) },
        { path: '/b/s1.txt', text: 'match\n' },
        { path: '/b/s2.txt', text: 'match\n' },
        { path: '/c/big.txt', text: 'y match\n'.repeat(1000) },
        { path: '/d/other.txt', text: 'nothing here\n'.repeat(5000) },
      ]);
      try {
        expect(splitGrep(t.reader, { claims: MGMT, pattern: 'match', outputMode: 'content' }, 2).bounds).toEqual(['/b/s2.txt']);
      } finally {
        await t.close();
      }
    });

    it('a path range holds at least minBytes of candidate text', async () => {
      const t = await buildShard(Array.from({ length: 10 }, (_, i) => ({ path: `/f${i}.txt`, text: 'match\n'.repeat(20_000) })));
      try {
        const request = { claims: MGMT, pattern: 'match', outputMode: 'content' } as const;
        // 1.2 MB: three ranges of at least 400 KB, though eight were asked for.
        expect(splitGrep(t.reader, request, 8, 400_000).bounds).toEqual(['/f4.txt', '/f7.txt']);
        expect(splitGrep(t.reader, request, 8, 100_000).bounds).toHaveLength(7);
      } finally {
        await t.close();
      }
    });

    it('a path range keeps only the files in [from, to)', () => {
      const text = output(grep(s.reader, { claims: MGMT, pattern: 'e', outputMode: 'content' }, { pathRange: { from: '/docs', to: '/src/main.c' } }));
      expect(text.split('\n').map((l) => l.split(':')[0])).toEqual([
        '/docs/guide.md',
        '/docs/guide.md',
        '/src/a-b/x.h',
        '/src/a/deep/y.h',
        '/src/helper.c',
        '/src/helper.c',
        '',
      ]);
    });
  });
});

describe('ls answers remembered per version and claims', () => {
  it('answers a repeated listing alike, each set of claims its own, and follows every commit', async () => {
    const t = await buildShard([
      { path: '/d/a.txt', text: 'a\n' },
      { path: '/d/b.txt', text: 'bb\n', claims: ['team'] },
    ]);
    try {
      const listing = (claims: Claims): string => output(ls(t.reader, { claims, path: '/d' }));
      for (let round = 0; round < 2; round++) {
        expect(listing(MGMT)).toBe('a.txt\t2\nb.txt\t3\n');
        expect(listing(['other'])).toBe('a.txt\t2\n');
        expect(listing(['team', 'other'])).toBe('a.txt\t2\nb.txt\t3\n');
        expect(listing(['other', 'team', 'other'])).toBe('a.txt\t2\nb.txt\t3\n');
        expect(listing([])).toBe('a.txt\t2\n');
      }
      await t.write([{ path: '/d/c.txt', text: 'c\n' }]);
      expect(listing(MGMT)).toBe('a.txt\t2\nb.txt\t3\nc.txt\t2\n');
      // Same text, other claims: a change of the records alone.
      await t.write([{ path: '/d/b.txt', text: 'bb\n', claims: ['other'] }]);
      expect(listing(['other'])).toBe('a.txt\t2\nb.txt\t3\nc.txt\t2\n');
      expect(listing(['team'])).toBe('a.txt\t2\nc.txt\t2\n');
      await t.writer.deleteDocument('/d/a.txt');
      expect(listing(['team'])).toBe('c.txt\t2\n');
      await t.writer.deleteDocument('/d/c.txt');
      expect(toolError(ls(t.reader, { claims: ['team'], path: '/d' }))?.code).toBe('NO_SUCH_FILE');
      expect(listing(['other'])).toBe('b.txt\t3\n');
    } finally {
      await t.close();
    }
  });
});

describe('cat answers remembered per version and request', () => {
  it('answers a repeated read alike, each range its own, checks who sees the file each time, and follows every commit', async () => {
    const t = await buildShard([
      { path: '/d/a.txt', text: 'one\ntwo\nthree\n' },
      { path: '/d/b.txt', text: 'team only\n', claims: ['team'] },
    ]);
    try {
      const page = (claims: Claims, path: string, offset?: number, limit?: number, lineNumbers?: boolean): string =>
        output(cat(t.reader, { claims, path, offset, limit, lineNumbers }));
      for (let round = 0; round < 2; round++) {
        expect(page(MGMT, '/d/a.txt')).toBe('     1\tone\n     2\ttwo\n     3\tthree\n');
        expect(page(MGMT, '/d/a.txt', 2, 1)).toBe('     2\ttwo\n[... 1 more lines (the file has 3); continue with offset=3]\n');
        expect(page(MGMT, '/d/a.txt', 2, 1, false)).toBe('two\n[... 1 more lines (the file has 3); continue with offset=3]\n');
        expect(page(MGMT, '/d/a.txt', 9)).toBe('[offset 9 is past the end of the file: it has 3 lines]\n');
        expect(page(['team'], '/d/b.txt')).toBe('     1\tteam only\n');
        // SECURITY: a kept answer is never given to a caller who does not see the file.
        expect(toolError(cat(t.reader, { claims: ['other'], path: '/d/b.txt' }))?.code).toBe('NO_SUCH_FILE');
      }
      await t.write([{ path: '/d/a.txt', text: 'uno\n' }]);
      expect(page(MGMT, '/d/a.txt')).toBe('     1\tuno\n');
      expect(page(MGMT, '/d/a.txt', 9)).toBe('[offset 9 is past the end of the file: it has 1 lines]\n');
      // Same text, other claims: a change of the records alone.
      await t.write([{ path: '/d/b.txt', text: 'team only\n', claims: ['other'] }]);
      expect(toolError(cat(t.reader, { claims: ['team'], path: '/d/b.txt' }))?.code).toBe('NO_SUCH_FILE');
      expect(page(['other'], '/d/b.txt')).toBe('     1\tteam only\n');
      await t.writer.deleteDocument('/d/b.txt');
      expect(toolError(cat(t.reader, { claims: MGMT, path: '/d/b.txt' }))?.code).toBe('NO_SUCH_FILE');
    } finally {
      await t.close();
    }
  });
});

describe('visibility', () => {
  let s: TestShard;
  // file → claims
  const files: [string, string[] | null][] = [
    ['/pub/open.txt', null],
    ['/team/a.txt', ['group:a']],
    ['/team/ab.txt', ['group:a', 'group:b']],
    ['/private/u1.txt', ['user:1']],
  ];
  // token claims → the files it sees
  const tokens: [string, Claims, string[]][] = [
    ['management key', null, ['/pub/open.txt', '/team/a.txt', '/team/ab.txt', '/private/u1.txt']],
    ['star', ['*'], ['/pub/open.txt', '/team/a.txt', '/team/ab.txt', '/private/u1.txt']],
    ['group:a', ['group:a'], ['/pub/open.txt', '/team/a.txt', '/team/ab.txt']],
    ['group:b', ['group:b'], ['/pub/open.txt', '/team/ab.txt']],
    ['user:1 + group:b', ['user:1', 'group:b'], ['/pub/open.txt', '/team/ab.txt', '/private/u1.txt']],
    ['unrelated', ['user:9'], ['/pub/open.txt']],
  ];
  beforeAll(async () => {
    s = await buildShard(files.map(([path, claims]): DocSpec => ({ path, text: `marker in ${path}\n`, claims })));
  });
  afterAll(() => s.close());

  describe.each(tokens)('%s', (_, claims, visible) => {
    const sorted = [...visible].sort();
    it('grep sees exactly its files', () => {
      const got = output(grep(s.reader, { claims, pattern: 'marker' }))
        .split('\n')
        .filter((l) => l);
      expect(got.sort()).toEqual(sorted);
      const scan = output(grep(s.reader, { claims, pattern: 'ma.ker', outputMode: 'count' }))
        .split('\n')
        .filter((l) => l);
      expect(scan.map((l) => l.split(':')[0]).sort()).toEqual(sorted);
    });
    it('find sees exactly its files', () => {
      expect(
        output(find(s.reader, { claims, pattern: '**' }))
          .split('\n')
          .filter((l) => l)
          .sort(),
      ).toEqual(sorted);
    });
    it('ls shows only directories with a visible file', () => {
      const dirs = [...new Set(visible.map((p) => p.split('/')[1] + '/'))].sort();
      expect(
        output(ls(s.reader, { claims, path: '/' }))
          .split('\n')
          .filter((l) => l),
      ).toEqual(dirs);
    });
    it.each(files.map(([p]) => p))('cat, ls, grep path of %s', (path) => {
      const dir = path.slice(0, path.lastIndexOf('/'));
      if (visible.includes(path)) {
        expect(output(cat(s.reader, { claims, path }))).toBe(`     1\tmarker in ${path}\n`);
        expect(output(ls(s.reader, { claims, path }))).toContain('\t');
        expect(output(grep(s.reader, { claims, pattern: 'marker', path }))).toBe(path + '\n');
      } else {
        // Indistinguishable from a missing file: same code, same message shape.
        const missing = toolError(cat(s.reader, { claims, path: path + '.missing' }));
        const hidden = toolError(cat(s.reader, { claims, path }));
        expect(hidden?.code).toBe('NO_SUCH_FILE');
        expect(hidden?.message).toBe(missing?.message.replace('.missing', ''));
        expect(toolError(ls(s.reader, { claims, path }))?.code).toBe('NO_SUCH_FILE');
        expect(toolError(grep(s.reader, { claims, pattern: 'marker', path }))?.code).toBe('NO_SUCH_FILE');
        if (!visible.some((p) => p.startsWith(dir + '/'))) {
          expect(toolError(ls(s.reader, { claims, path: dir }))?.code).toBe('NO_SUCH_FILE');
          expect(toolError(find(s.reader, { claims, pattern: '*', path: dir }))?.code).toBe('NO_SUCH_FILE');
        }
      }
    });
    // A glob with a required text looks, through a catalog, only at the paths that hold it; a
    // directory still exists for the caller through a visible file that does not.
    it.each(['/team', '/private', '/pub'])('find of a required text under %s, with and without a catalog', (dir) =>
      withBothReaders(s.dir, (cataloged, plain) => {
        const seesDir = visible.some((p) => p.startsWith(dir + '/'));
        for (const reader of [cataloged, plain]) {
          for (const pattern of ['**/*ab*', '**/*u1*', '**/*open*', '**/*absent*']) {
            const text = pattern.slice(4, -1);
            const expected = visible.filter((p) => p.startsWith(dir + '/') && p.slice(p.lastIndexOf('/')).includes(text));
            if (seesDir)
              expect(
                output(find(reader, { claims, pattern, path: dir }))
                  .split('\n')
                  .filter((l) => l !== ''),
              ).toEqual(expected);
            else expect(toolError(find(reader, { claims, pattern, path: dir }))?.code).toBe('NO_SUCH_FILE');
          }
        }
        expect(cataloged.catalogedDocs).toBe(files.length);
      }),
    );
  });
});

describe('footers on truncation', () => {
  let s: TestShard;
  beforeAll(async () => {
    const docs: DocSpec[] = Array.from({ length: 1203 }, (_, i) => ({ path: `/big/f${String(i).padStart(4, '0')}.txt`, text: `n ${i}\n` }));
    docs.push({ path: '/big/sub/x.txt', text: 'x\n' });
    docs.push({ path: '/long.txt', text: Array.from({ length: 5000 }, (_, i) => `line ${i + 1}`).join('\n') + '\n' });
    docs.push({ path: '/wide.txt', text: 'é'.repeat(2500) + '\nshort\n' + 'x'.repeat(300) + '\n' });
    docs.push({ path: '/heavy.txt', text: Array.from({ length: 300 }, () => 'y'.repeat(1990)).join('\n') + '\n' });
    s = await buildShard(docs);
  });
  afterAll(() => s.close());

  it('content output of one file over many chunks equals the line-by-line expectation', () => {
    // /long.txt gives ~100 KiB of grep output; /heavy.txt ~600 KiB with lines cut or not.
    const lines = Array.from({ length: 5000 }, (_, i) => `line ${i + 1}`);
    const matching = (l: string) => /[1-7]$/.test(l);
    const expected: string[] = [];
    let last = -2;
    lines.forEach((l, i) => {
      const near = [i - 1, i, i + 1].some((j) => j >= 0 && j < lines.length && matching(lines[j]));
      if (!near) return;
      if (last !== -2 && last !== i - 1) expected.push('--');
      expected.push(`/long.txt${matching(l) ? ':' : '-'}${i + 1}${matching(l) ? ':' : '-'}${l}`);
      last = i;
    });
    const r = run(grep(s.reader, { claims: MGMT, pattern: '[1-7]$', path: '/long.txt', outputMode: 'content', context: 1 }));
    expect(r.chunks).toBeGreaterThan(1);
    expect(r.text).toBe(expected.join('\n') + '\n');
    const heavy = run(grep(s.reader, { claims: MGMT, pattern: 'y', path: '/heavy.txt', outputMode: 'content', lineNumbers: false }));
    expect(heavy.chunks).toBeGreaterThan(8);
    expect(heavy.text).toBe(`/heavy.txt:${'y'.repeat(1990)}\n`.repeat(300));
  });

  // With V8 the scan finds a document's hits first and prints each run of lines at once; with
  // RE2 alone it prints hit by hit.
  it.each(['always', 'off'] as const)(
    'a run of matching lines is cut by offset and head_limit at any line, and a cut line may sit inside it (V8 %s)',
    (scans) => {
      setV8Scans(scans);
      try {
        const lines = Array.from({ length: 5000 }, (_, i) => `/long.txt:${i + 1}:line ${i + 1}`);
        for (const [offset, headLimit] of [
          [0, 1],
          [1, 4999],
          [2345, 1000],
          [4999, 10],
        ]) {
          const r = run(grep(s.reader, { claims: MGMT, pattern: 'line \\d+', path: '/long.txt', outputMode: 'content', offset, headLimit }));
          const more =
            offset + headLimit < lines.length
              ? `[output cut at head_limit=${headLimit}; more lines follow: raise head_limit or continue with offset=${offset + headLimit}]\n`
              : '';
          expect(r.text).toBe(lines.slice(offset, offset + headLimit).join('\n') + '\n' + more);
        }
        const wide = run(grep(s.reader, { claims: MGMT, pattern: '.', path: '/wide.txt', outputMode: 'content' }));
        expect(wide.text).toBe(`/wide.txt:1:${'é'.repeat(2000)}… [line truncated: 2500 characters]\n/wide.txt:2:short\n/wide.txt:3:${'x'.repeat(300)}\n`);
      } finally {
        setV8Scans('off');
      }
    },
  );

  it('ls shows 1000 entries, directories first, then one footer', () => {
    const r = run(ls(s.reader, { claims: MGMT, path: '/big' }));
    const lines = r.text.split('\n').filter((l) => l);
    expect(lines).toHaveLength(1001);
    expect(lines[0]).toBe('sub/');
    expect(lines[1]).toBe('f0000.txt\t4');
    expect(lines[1000]).toBe('[204 more entries not shown (1204 in total); narrow with find]');
    expect(lines.filter((l) => l.startsWith('['))).toHaveLength(1);
    expect(r.resultCount).toBe(1000);
    expect(r.chunks).toBe(1);
    // Asked again, the remembered answer: the same bytes, count and chunks.
    expect(run(ls(s.reader, { claims: MGMT, path: '/big' }))).toEqual(r);
  });

  it.each([1000, 250, 101, 7])('find lists %s paths newest first, then one footer', (headLimit) => {
    // The /big files were written in path order, each a tick after the one before.
    const newestFirst = ['/big/sub/x.txt', ...Array.from({ length: 1203 }, (_, i) => `/big/f${String(1202 - i).padStart(4, '0')}.txt`)];
    const r = run(find(s.reader, { claims: MGMT, pattern: '**/*.txt', path: '/big', headLimit }));
    const lines = r.text.split('\n');
    expect(lines.pop()).toBe('');
    expect(lines.pop()).toBe(
      `[${1204 - headLimit} more matching files not shown (1204 in total); ${headLimit < 1000 ? 'raise head_limit (at most 1000) or narrow' : 'narrow'} the pattern or path]`,
    );
    expect(lines).toEqual(newestFirst.slice(0, headLimit));
    expect(r.resultCount).toBe(headLimit);
  });

  it('cat stops at the default limit and tells where to continue', () => {
    const r = run(cat(s.reader, { claims: MGMT, path: '/long.txt' }));
    const lines = r.text.split('\n').filter((l) => l);
    expect(lines).toHaveLength(2001);
    expect(lines[1999]).toBe('  2000\tline 2000');
    expect(lines[2000]).toBe('[... 3000 more lines (the file has 5000); continue with offset=2001]');
    expect(output(cat(s.reader, { claims: MGMT, path: '/long.txt', offset: 4999 }))).toBe('  4999\tline 4999\n  5000\tline 5000\n');
  });

  it('cat cuts long lines with a marker', () => {
    const text = output(cat(s.reader, { claims: MGMT, path: '/wide.txt' }));
    expect(text).toBe(`     1\t${'é'.repeat(2000)}… [line truncated: 2500 characters]\n     2\tshort\n     3\t${'x'.repeat(300)}\n`);
  });

  it('cat cuts output over 256 KiB at a line boundary', () => {
    const r = run(cat(s.reader, { claims: MGMT, path: '/heavy.txt' }));
    const lines = r.text.split('\n').filter((l) => l);
    const footer = lines.pop()!;
    expect(Buffer.byteLength(r.text)).toBeLessThan(256 * 1024 + 200);
    expect(lines.length).toBeGreaterThan(100);
    expect(footer).toBe(`[... ${300 - lines.length} more lines (the file has 300); continue with offset=${lines.length + 1}]`);
    expect(r.chunks).toBeGreaterThan(1);
    for (const l of lines) expect(l).toMatch(/^ +\d+\ty{1990}$/);
  });

  it('grep content streams in chunks without a limit', () => {
    const r = run(grep(s.reader, { claims: MGMT, pattern: 'line \\d+', outputMode: 'content' }));
    expect(r.resultCount).toBe(5000);
    expect(r.chunks).toBeGreaterThan(1);
    expect(r.text.endsWith('/long.txt:5000:line 5000\n')).toBe(true);
  });

  it('grep reports the time limit', () => {
    const text = output(grep(s.reader, { claims: MGMT, pattern: 'n \\d', deadline: Date.now() - 1 }));
    expect(text).toMatch(/^\[search stopped at the time limit after 0 of \d+ files/);
  });
});

describe('grep content of a document printed across yields', () => {
  let s: TestShard;
  const lines = Array.from({ length: 20_000 }, (_, i) => `alpha ${i} ${'z'.repeat(i % 50)}`);
  beforeAll(async () => {
    s = await buildShard([
      { path: '/a.txt', text: `${lines.join('\n')}\n` },
      { path: '/b.txt', text: 'beta\n'.repeat(30_000) },
    ]);
  });
  afterAll(() => s.close());

  // The document's text views the shard's read buffer, which the reads between the pulls overwrite.
  it.each(['always', 'off'] as const)('holds its text while other reads run between the chunks (V8 %s)', (scans) => {
    setV8Scans(scans);
    try {
      const chunks: string[] = [];
      const tool = grep(s.reader, { claims: MGMT, pattern: 'alpha', outputMode: 'content' });
      for (let r = tool.next(); r.done !== true; r = tool.next()) {
        chunks.push(Buffer.from(r.value).toString());
        expect(output(cat(s.reader, { claims: MGMT, path: '/b.txt', limit: 5000 }))).toContain('beta');
      }
      expect(chunks.length).toBeGreaterThan(8);
      expect(chunks.join('')).toBe(lines.map((l, i) => `/a.txt:${i + 1}:${l}\n`).join(''));
    } finally {
      setV8Scans('off');
    }
  });
});

describe('cat against a line-by-line reference', () => {
  /** cat as SPEC.md words it, one line at a time: the reference the engine's run copies must equal. */
  function referenceCat(text: string, offset = 1, limit = 2000): string {
    const lines = text === '' ? [] : text.split('\n');
    if (text.endsWith('\n')) lines.pop();
    const total = lines.length;
    if (total === 0) return '[the file is empty: 0 lines]\n';
    if (offset > total) return `[offset ${offset} is past the end of the file: it has ${total} lines]\n`;
    const last = Math.min(total, offset - 1 + limit);
    let out = '';
    let bytes = 0;
    let line = offset;
    for (; line <= last; line++) {
      const chars = [...lines[line - 1]];
      const shown = chars.length > 2000 ? `${chars.slice(0, 2000).join('')}… [line truncated: ${chars.length} characters]` : lines[line - 1];
      const entry = `${String(line).padStart(6)}\t${shown}\n`;
      const size = Buffer.byteLength(entry);
      if (bytes > 0 && bytes + size > 256 * 1024) break;
      out += entry;
      bytes += size;
    }
    if (line <= total) out += `[... ${total - line + 1} more lines (the file has ${total}); continue with offset=${line}]\n`;
    return out;
  }

  const random = seededRandom(11);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)];
  const LINE_LENGTHS = [0, 1, 5, 60, 255, 256, 257, 1999, 2000, 2001, 2600, 9000];
  const PIECES = ['a', 'é', '€', '😀', '\r', '\t', ' '];
  const docs: DocSpec[] = Array.from({ length: 40 }, (_, i) => {
    const lines = Array.from({ length: 1 + Math.floor(random() * (i % 4 === 0 ? 400 : 40)) }, () => {
      const chars = pick(LINE_LENGTHS);
      let line = '';
      for (let c = 0; c < chars; c++) line += pick(PIECES);
      return line;
    });
    return { path: `/r/${i}.txt`, text: lines.join('\n') + (random() < 0.5 ? '\n' : '') };
  });
  // Long lines that need no cut, so that runs of copied lines reach a chunk's size.
  docs.push({ path: '/r/wide.txt', text: Array.from({ length: 300 }, (_, i) => 'w'.repeat(1000 + ((i * 37) % 1000))).join('\n') });
  // Past line 999,999 the numbers outgrow their six columns.
  docs.push({ path: '/r/million.txt', text: 'x\n'.repeat(1_000_002) + 'end' });

  let s: TestShard;
  beforeAll(async () => {
    s = await buildShard(docs);
  });
  afterAll(() => s.close());

  it('matches on random lines, offsets and limits, cuts included, in chunks of at most CHUNK_BYTES', () => {
    for (const doc of docs.slice(0, -1)) {
      const text = doc.text as string;
      const total = text.split('\n').length;
      for (const [offset, limit] of [
        [undefined, undefined],
        [1, 1],
        [1 + Math.floor(random() * total), 1 + Math.floor(random() * 50)],
        [2, 3000],
      ] as const) {
        const chunks: Buffer[] = [];
        const gen = cat(s.reader, { claims: MGMT, path: doc.path, offset, limit });
        for (let r = gen.next(); r.done !== true; r = gen.next()) chunks.push(r.value);
        expect(Buffer.concat(chunks).toString(), `${doc.path} ${offset} ${limit}`).toBe(referenceCat(text, offset, limit));
        expect(Math.max(...chunks.map((c) => c.length))).toBeLessThanOrEqual(CHUNK_BYTES);
      }
    }
  });

  it('widens the number column past 999,999 lines', () => {
    const text = docs[docs.length - 1].text as string;
    for (const offset of [999_998, 1_000_001, 1_000_003]) {
      expect(output(cat(s.reader, { claims: MGMT, path: '/r/million.txt', offset, limit: 4 }))).toBe(referenceCat(text, offset, 4));
    }
    expect(output(cat(s.reader, { claims: MGMT, path: '/r/million.txt', offset: 999_999, limit: 2 }))).toBe(
      '999999\tx\n1000000\tx\n[... 3 more lines (the file has 1000003); continue with offset=1000001]\n',
    );
  });
});

describe('find orders ties by path', () => {
  // Equal times, written out of order, with names that sort differently by UTF-16 unit and by code point.
  const names = ['b.txt', '\u{1F600}.txt', 'Z.txt', '\uFFFD.txt', 'a.txt'];
  let s: TestShard;
  beforeAll(async () => {
    const others = Array.from({ length: 40 }, (_, i) => ({ path: `/other/f${i}.md`, text: 'z\n', updatedAt: 1 + (i % 3) }));
    s = await buildShard([
      ...names.map((name) => ({ path: `/t/${name}`, text: 'x\n', updatedAt: 5 })),
      { path: '/t/new.txt', text: 'y\n', updatedAt: 6 },
      ...others,
    ]);
  });
  afterAll(() => s.close());

  it('from LMDB and from the catalog alike, whether the catalog sorts a few matches or many', () => {
    const expected = ['/t/new.txt', '/t/Z.txt', '/t/a.txt', '/t/b.txt', '/t/\uFFFD.txt', '/t/\u{1F600}.txt'].join('\n') + '\n';
    const few = '/t/a.txt\n/t/\uFFFD.txt\n';
    expect(s.reader.catalogedDocs).toBeNull();
    for (let i = 0; i < 8; i++) expect(output(find(s.reader, { claims: MGMT, pattern: 'a.txt', path: '/t' }))).toBe('/t/a.txt\n');
    // The reads above paid for a catalog; the answers below come from it: two matches of 46
    // are sorted by comparing them, six by the ranks that sorting them works out.
    expect(s.reader.catalogedDocs).toBe(46);
    expect(output(find(s.reader, { claims: MGMT, pattern: '{\uFFFD,a}.txt', path: '/t' }))).toBe(few);
    expect(output(find(s.reader, { claims: MGMT, pattern: '**/*.txt' }))).toBe(expected);
    expect(output(find(s.reader, { claims: MGMT, pattern: '{\uFFFD,a}.txt', path: '/t' }))).toBe(few);
    const plain = readerOf(s.dir, false);
    expect(output(find(plain, { claims: MGMT, pattern: '**/*.txt' }))).toBe(expected);
    expect(output(find(plain, { claims: MGMT, pattern: '{\uFFFD,a}.txt', path: '/t' }))).toBe(few);
    expect(plain.catalogedDocs).toBeNull();
    return plain.close();
  });
});

/** Runs `check` with a reader of the shard at `dir` that catalogs at once and one that never does, then closes both. */
async function withBothReaders(dir: string, check: (cataloged: ShardReader, plain: ShardReader) => void): Promise<void> {
  const cataloged = readerOf(dir, true);
  const plain = readerOf(dir, false);
  try {
    check(cataloged, plain);
  } finally {
    await cataloged.close();
    await plain.close();
  }
}

/**
 * Checks that `find` lists the shard's paths that picomatch matches (as a set), through a
 * reader with a catalog and one without.
 */
function findsAsPicomatch(dir: string, pattern: string, path?: string): Promise<void> {
  return withBothReaders(dir, (cataloged, plain) => {
    const all = output(find(plain, { claims: MGMT, pattern: '**' }))
      .split('\n')
      .filter((l) => l !== '');
    const base = path === undefined ? '/' : path + '/';
    const re = picomatch.makeRe(pattern, { dot: true });
    const expected = all.filter((p) => p.startsWith(base) && re.test(p.slice(base.length))).sort();
    expect(expected.length).toBeGreaterThan(0);
    for (const reader of [cataloged, plain]) {
      expect(
        output(find(reader, { claims: MGMT, pattern, path }))
          .split('\n')
          .filter((l) => l !== '')
          .sort(),
      ).toEqual(expected);
    }
    expect([cataloged.catalogedDocs, plain.catalogedDocs]).toEqual([all.length, null]);
  });
}

describe('find with globs and paths beyond ASCII', () => {
  let s: TestShard;
  beforeAll(async () => {
    const paths = ['/données/été/a.c', '/données/b.c', '/résumé.md', '/x/données-1.c', '/x/y/été.txt', '/𝔘/𝔘𝔘.md', '/ascii.c'];
    s = await buildShard(paths.map((path, i) => ({ path, text: 'x\n', updatedAt: i })));
  });
  afterAll(() => s.close());

  it.each([
    ['données/**/*.c', undefined],
    ['**/*données*', undefined],
    ['**/résumé.*', undefined],
    ['**/été*', undefined],
    ['𝔘/𝔘*.md', undefined],
    ['**/*.c', '/données'],
    ['y/été.txt', '/x'],
    ['données*', '/x'],
  ] as const)('find %s under %s lists what picomatch matches', (pattern, path) => findsAsPicomatch(s.dir, pattern, path));
});
