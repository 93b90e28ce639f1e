import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GuardedScan, runWithin, scanCounts, setV8Scans } from '../engine/guarded-scan.js';
import { LineMatcher } from '../engine/line-matcher.js';
import { compilePattern } from '../engine/regex/pattern.js';
import { lineStarts, re2LineMatches } from './helpers/line-starts.js';
import { patterns, texts } from './helpers/regex-arbitraries.js';

/** The reference: RE2 on each line alone, as ripgrep matches. */
function re2Lines(pattern: string, caseInsensitive: boolean, text: Buffer): number[] {
  return re2LineMatches(pattern, caseInsensitive ? 'mi' : 'm', text);
}

/** The lines a matcher reports over a whole text, and whether V8 searched it (`allowV8` false: as the caller left it). */
function matcherLines(m: LineMatcher, text: Buffer, allowV8 = true): { lines: number[]; v8: boolean } {
  if (allowV8) m.useV8(true);
  m.begin(text, lineStarts(text));
  const v8 = m.searchesWithV8;
  const lines: number[] = [];
  while (m.next()) for (let line = m.first; line <= m.last; line++) lines.push(line);
  return { lines, v8 };
}

describe("V8's form of a pattern (engine/regex/byte-regex.ts) matches the lines RE2 matches", () => {
  // Four blocks of 500 rather than one of 2,000: a test worker must not be busy for a minute
  // without a turn of its event loop on a loaded machine (vitest's calls time out).
  it.each([1, 2, 3, 4])('on generated patterns and texts, with and without -i (block %i of 4)', () => {
    let printed = 0;
    let runs = 0;
    let searchedByV8 = 0;
    let stopped = 0;
    fc.assert(
      fc.property(patterns, fc.boolean(), fc.boolean(), fc.array(texts, { minLength: 1, maxLength: 4 }), (pattern, folded, ci, bodies) => {
        const source = folded ? `(?i)${pattern}` : pattern;
        let compiled: ReturnType<typeof compilePattern>;
        try {
          compiled = compilePattern(source, { caseInsensitive: ci });
        } catch {
          return; // RE2 refuses it, or it names the line break: no search
        }
        runs++;
        if (compiled.byteRegex() === null) return;
        printed++;
        // V8's form itself: a run of one class would take path 4 (test/line-matcher.test.ts).
        const m = new LineMatcher({ ...compiled, classRun: () => null });
        m.useV8(true);
        for (const text of bodies) {
          // V8 backtracks: a generated pattern may blow up on a generated text, and only a time
          // limit stops a regex search (as in GuardedScan). Such a case is left out.
          let found: { lines: number[]; v8: boolean } | null = null;
          if (!runWithin(() => (found = matcherLines(m, text)), 500)) {
            stopped++;
            continue;
          }
          const { lines, v8 } = found!;
          expect(lines).toEqual(re2Lines(source, ci, text));
          if (v8) searchedByV8++;
        }
      }),
      { numRuns: 500 },
    );
    // Most generated patterns get a V8 form (not those with `\A`, `\z`, or `(?-m)^` that reads the text's edges).
    expect(printed).toBeGreaterThan(runs * 0.6);
    expect(searchedByV8).toBeGreaterThan(printed * 0.5);
    expect(stopped).toBeLessThan(printed * 0.05);
  });

  it('searches a text with V8 unless it is not UTF-8, or the pattern has ^ or $ and the text holds \\r', () => {
    const plain = new LineMatcher(compilePattern('\\S+\\s+\\S+'));
    expect(matcherLines(plain, Buffer.from('a b\r\nc d\n')).v8).toBe(true);
    // Not UTF-8 (an overlong sequence): RE2 searches it.
    expect(matcherLines(plain, Buffer.from([0xe0, 0x80, 0x80, 0x20, 0x61]))).toEqual({ lines: [0], v8: false });
    const anchored = new LineMatcher(compilePattern(';$'));
    expect(matcherLines(anchored, Buffer.from('a;\nb; \n'))).toEqual({ lines: [0], v8: true });
    // Under V8's `m` flag `$` would match before the `\r`; RE2's does not.
    expect(matcherLines(anchored, Buffer.from('a;\r\nb;\n'))).toEqual({ lines: [1], v8: false });
  });

  it('matches an invalid UTF-8 line as RE2 does where a cut branch could have joined its siblings', () => {
    // F4 90 80 80 encodes no code point. RE2 alone matches it with neither branch; the two joined
    // into one class spanning U+0080-U+10FFFF would (engine/regex/edge-trim.ts).
    const text = Buffer.from([0x61, 0x0a, 0xf4, 0x90, 0x80, 0x80, 0x0a, 0x21, 0x0a]);
    for (const ci of [false, true]) {
      const pattern = '(?:[^\\x{7ff}]+|\\W)';
      const m = new LineMatcher(compilePattern(pattern, { caseInsensitive: ci }));
      expect(matcherLines(m, text).lines).toEqual(re2Lines(pattern, ci, text));
    }
    expect(re2Lines('(?:[^\\x{7ff}]+|\\W)', true, Buffer.from([0xf4, 0x90, 0x80, 0x80]))).toEqual([]);
  });

  it('reads a long text in pieces of whole lines, and a hit at the edge of a piece counts on its own line', () => {
    // Lines of words, spaces and nothing, 400 KB in all with a line of 100 KB among them: pieces
    // of 64 KB end before empty and non-empty lines alike, and one piece is that long line.
    const words = ['int', 'x;', '\tfoo(bar);', '', '', '  ', 'a b', 'é σ', '}'];
    const lines: string[] = [];
    let seed = 7;
    for (let size = 0; size < 400_000; ) {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31;
      const line = lines.length === 2000 ? 'w '.repeat(50_000) : words[seed % words.length];
      lines.push(line);
      size += line.length + 1;
    }
    const text = Buffer.from(lines.join('\n'));
    for (const pattern of ['^$', '^', '$', '\\b', '\\B', '^\\s*$', '\\S+\\s+\\S+', 'x*', '\\w$', '^\\W']) {
      const found = matcherLines(new LineMatcher(compilePattern(pattern)), text);
      expect(found.v8).toBe(true);
      expect(found.lines, pattern).toEqual(re2Lines(pattern, false, text));
    }
  });

  it('reads a class holding every code point from 80 on byte by byte only where its ends fall at whole characters', () => {
    // Read by byte: repeated without a most between ASCII neighbours or the sequence's ends, or
    // once at an end. Not: beside a character that may be longer than a byte, counted, or once
    // between two neighbours (`a.b` must match `aéb`, three characters and four bytes).
    const byByte = ['\\([^)]*\\)', '\\S+\\s+\\S+', '<[^>]+>', 'a[^b]*c', '[^a]+b', '^.*$', 'x.+?y', '\\w+\\W+\\w+', '(?s).', '[^ -~\\t]'];
    const bySequences = ['[^a]+[^b]+', 'é[^a]+', 'x[^a]*é', '(?:ab|cd)[^a]*e', 'a.b', '\\D{2}', '[^a]{2,}', '(?i)k[^k]*x', 'a.?b', '\\b[^a]+\\b', 'x\\s*[^a]+'];
    const sequenceFree = (pattern: string): boolean => compilePattern(pattern).byteRegex()!.regex.source.includes('\\xff]');
    for (const pattern of byByte) expect(sequenceFree(pattern), pattern).toBe(true);
    for (const pattern of bySequences) expect(sequenceFree(pattern), pattern).toBe(false);
    // Texts of ASCII neighbours and characters of two to four bytes side by side.
    const parts = ['(', ')', '<', '>', 'a', 'b', 'c', 'd', 'x', 'y', 'k', ' ', '\t', 'é', 'σ', '€', '😀', '\u212a', '\n'];
    const text = fc.array(fc.constantFrom(...parts), { maxLength: 40 }).map((p) => Buffer.from(p.join('')));
    for (const pattern of [...byByte, ...bySequences]) {
      const m = new LineMatcher({ ...compilePattern(pattern), classRun: () => null });
      fc.assert(
        fc.property(text, (body) => {
          expect(matcherLines(m, body).lines, pattern).toEqual(re2Lines(pattern, false, body));
        }),
        { numRuns: 300 },
      );
    }
  });

  it("leaves to RE2 what V8's form does not express", () => {
    expect(compilePattern('a\\Cb').byteRegex()).toBeNull(); // any byte
    expect(compilePattern('(?s)a.b', { multiline: true }).byteRegex()).toBeNull(); // matches may span lines
  });
});

describe('GuardedScan (engine/guarded-scan.ts): V8 under a time limit, the faster engine by trial', () => {
  beforeAll(() => setV8Scans('on'));
  afterAll(() => setV8Scans('off'));

  /** Scans `texts` as grep's count mode does: matching lines of each, and the engine after each step. */
  function scanAll(pattern: string, texts: Buffer[], shard: object = {}): { counts: number[]; engines: string[] } {
    const matcher = new LineMatcher(compilePattern(pattern));
    const scan = new GuardedScan(
      matcher,
      texts.map((t) => ({ textBytes: t.byteLength })),
      shard,
    );
    const counts = texts.map(() => -1);
    const engines: string[] = [];
    for (let i = 0; i < texts.length; ) {
      i = scan.run(
        i,
        (k) => matcherLines(matcher, texts[k], false).lines.length, // V8 as the scan set it
        (k, n) => {
          counts[k] = n;
        },
      );
      engines.push(scan.engine);
    }
    return { counts, engines };
  }

  const MB = 1 << 20;

  it('stops V8 at its limit on a pattern it would backtrack on without end, and RE2 finishes the search', () => {
    // `^(a|aa)+$` on a line of a's that ends in `!`: V8 tries every way to split the a's. (The
    // anchor keeps the repetition whole: at an open edge it would be cut to one repeat, edge-trim.ts.)
    const line = `${'a'.repeat(4000)}!\n`;
    const texts = Array.from({ length: 5 }, () => Buffer.from(line.repeat(Math.ceil(MB / line.length))));
    const stoppedBefore = scanCounts.stopped;
    const { counts, engines } = scanAll('^(a|aa)+$|b', texts);
    // RE2's trial batch, then V8's, stopped at its limit: RE2 until the next round.
    expect(engines.slice(0, 2)).toEqual(['try-v8', 'wait']);
    expect(scanCounts.stopped).toBe(stoppedBefore + 1);
    expect(counts).toEqual(texts.map((t) => re2Lines('^(a|aa)+$|b', false, t).length));
  });

  it('tries again after RE2 has searched 8 MiB, and 16 MiB after a second loss', () => {
    const line = `${'a'.repeat(4000)}!\n`;
    const texts = Array.from({ length: 27 }, () => Buffer.from(line.repeat(Math.ceil(MB / line.length))));
    const stoppedBefore = scanCounts.stopped;
    const { counts, engines } = scanAll('^(a|aa)+$|c', texts);
    // Each step a document of 1 MiB: RE2's batch, V8's stopped (the document is left to RE2), RE2
    // alone for 8 documents (after the last, the next round), RE2's batch, V8's stopped; then 16,
    // and the third round's RE2 batch.
    expect(engines.slice(0, 12)).toEqual(['try-v8', 'wait', ...Array(7).fill('wait'), 'try-re2', 'try-v8', 'wait']);
    expect(engines.slice(12)).toEqual([...Array(15).fill('wait'), 'try-re2', 'try-v8']);
    expect(scanCounts.stopped).toBe(stoppedBefore + 2);
    expect(counts).toEqual(texts.map((t) => re2Lines('^(a|aa)+$|c', false, t).length));
    // The next scan of the same search in this thread (a range of the same grep) goes on from
    // those rounds: RE2 for 32 MiB before a trial. Another search has its trial at once.
    expect(scanAll('^(a|aa)+$|c', texts.slice(0, 4)).engines).toEqual(['wait', 'wait', 'wait', 'wait']);
    // A caller that searches the documents itself while the scan does not batch (content mode
    // prints as it finds) counts them toward the next round: 16 MiB after two lost rounds.
    const live = new GuardedScan(
      new LineMatcher(compilePattern('^(a|aa)+$|c')),
      texts.map((t) => ({ textBytes: t.byteLength })),
      {},
    );
    const modes: string[] = [];
    for (let i = 0; i < 16; i++) {
      expect(live.batches).toBe(false);
      live.searchedAlone(i);
      modes.push(live.engine);
    }
    expect(modes).toEqual([...Array(15).fill('wait'), 'try-re2']);
    expect(live.batches).toBe(true);
    expect(scanAll('^(a|aa)+$|d', texts.slice(0, 5)).engines[0]).toBe('try-v8');
  });

  it('times a batch of RE2, then one of V8, then keeps one, with the same answers', () => {
    const text = Buffer.from('static int foo(struct bar *b)\n{\n\treturn b->x;\n}\n\n'.repeat(50_000));
    const { counts, engines } = scanAll('\\S+\\s+\\S+', [text, text, text, text]);
    expect(engines[0]).toBe('try-v8');
    expect(['v8', 'wait']).toContain(engines[1]);
    expect(counts).toEqual([text, text, text, text].map((t) => re2Lines('\\S+\\s+\\S+', false, t).length));
  });

  it('carries the way a scan chose to the next scan of the same search over the same shard, and only there', () => {
    const text = Buffer.from('static int foo(struct bar *b)\n{\n\treturn b->x;\n}\n\n'.repeat(50_000));
    const texts = [text, text, text, text];
    const expected = texts.map((t) => re2Lines('\\S+\\s+\\S+', false, t).length);
    // V8 wins this trial by far (above); a machine busy enough to lose it gets two more tries.
    let shard = {};
    for (let attempt = 0; attempt < 3 && scanAll('\\S+\\s+\\S+', texts, shard).engines.at(-1) !== 'v8'; attempt++) shard = {};
    // The next range of the same grep: V8 from its first document, no trial, the same answers.
    // (A batch slowed by a busy machine may still hand the rest to RE2.)
    const next = scanAll('\\S+\\s+\\S+', texts, shard);
    expect(['v8', 'wait']).toContain(next.engines[0]);
    expect(next.counts).toEqual(expected);
    // Another shard, or another search, has its trial.
    expect(scanAll('\\S+\\s+\\S+', texts, {}).engines[0]).toBe('try-v8');
    expect(scanAll('\\S+\\s+\\w+', texts, shard).engines[0]).toBe('try-v8');
  });

  it('times RE2 again after 64 MiB of V8, and leaves V8 when RE2 has become the faster', () => {
    // A tag every other line, where V8 wins its trial (RE2 takes a call a hit); then 72 MiB of
    // lines without `<`, which RE2 passes over at memory speed and V8 reads byte by byte. The
    // trial's RE2 speed, taken on the tags, would have kept V8 on to the end.
    const tags = Buffer.from('<a>\nb\n'.repeat(500_000));
    const plain = Buffer.from(`${'word '.repeat(30)}\n`.repeat(15_000));
    const texts = [tags, tags, tags, ...Array.from({ length: Math.ceil((72 * MB) / plain.length) }, () => plain)];
    // A batch timed on a busy machine can mislead one scan: three tries.
    const left = (scan: { engines: string[] }): boolean => scan.engines[scan.engines.indexOf('check-re2') + 1] === 'wait';
    let scan = scanAll('<[^>]+>', texts);
    for (let attempt = 1; attempt < 3 && !left(scan); attempt++) scan = scanAll('<[^>]+>', texts);
    expect(scan.engines[0]).toBe('try-v8');
    expect(scan.engines.indexOf('check-re2')).toBeGreaterThan(0);
    expect(left(scan)).toBe(true);
    expect(scan.counts).toEqual(texts.map((t) => re2Lines('<[^>]+>', false, t).length));
  });

  it('tries path 4 (a run of one class) in turn with RE2, document by document, and again after a loss', () => {
    const doc = Buffer.from('\tint x = 123456;\n        return y;\nplain text\n'.repeat(4096));
    const texts = Array.from({ length: 80 }, () => doc);
    const { counts, engines } = scanAll('\\s{4,}\\w', texts);
    // RE2 takes the first document, path 4 the next, and so on until each has searched 2 MiB, or
    // 512 KiB when one is 1.5 times faster (which RE2's last document may show: an odd count).
    const trial = engines.findIndex((e) => e !== 'try-runs') + 1;
    expect(trial).toBeGreaterThanOrEqual(2 * Math.ceil(MB / 2 / doc.length));
    expect(trial).toBeLessThanOrEqual(2 * Math.ceil((2 * MB) / doc.length));
    // Path 4 goes on alone, or V8 has its trial.
    expect(['runs', 'try-v8']).toContain(engines[trial - 1]);
    expect(counts).toEqual(texts.map((t) => re2Lines('\\s{4,}\\w', false, t).length));
  });

  it('takes RE2 alone for a search smaller than two batches, or a pattern without a V8 form', () => {
    const small = Buffer.from('a b\n'.repeat(1000));
    expect(scanAll('\\S+\\s+\\S+', [small, small]).engines).toEqual(['re2', 're2']);
    const big = Buffer.alloc(3 * MB, 'x y\n');
    expect(scanAll('a\\Cb', [big, big]).engines).toEqual(['re2', 're2']);
    // VFS_GREP_V8=off.
    setV8Scans('off');
    try {
      expect(scanAll('\\S+\\s+\\S+', [big, big]).engines).toEqual(['re2', 're2']);
    } finally {
      setV8Scans('on');
    }
  });
});
