import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { LineMatcher } from '../engine/line-matcher.js';
import { analyzePattern, compilePattern, type PatternOptions } from '../engine/regex/pattern.js';
import { lineStarts, re2LineMatches } from './helpers/line-starts.js';
import { patterns, texts } from './helpers/regex-arbitraries.js';

type LineMatcherOptions = PatternOptions;

/** A matcher for `pattern`, compiled as a grep compiles it. */
function matcher(pattern: string, options: PatternOptions = {}): LineMatcher {
  return new LineMatcher(compilePattern(pattern, options));
}

describe('the line rule', () => {
  it('lets \\s meet no newline, so the pattern takes the path that needs no second look', () => {
    expect(matcher('\\w{5}\\s+\\w{5}').fast).toBe(true);
    // Across a line end \s matches nothing, as ripgrep reads each line alone.
    const text = Buffer.from('foo\n bar\nfoo \tbar\n');
    const m = matcher('foo\\s+bar');
    m.begin(text, new Uint32Array([0, 4, 9]));
    const found: number[] = [];
    while (m.next()) found.push(m.first);
    expect(found).toEqual([2]);
  });

  it('makes \\A, \\z and (?-m) match at every line, as ripgrep does', () => {
    const text = Buffer.from('int a;\nint b\nx int;\n');
    const lines = (pattern: string) => {
      const m = matcher(pattern);
      m.begin(text, new Uint32Array([0, 7, 13])); // the starts of its three lines
      const out: number[] = [];
      while (m.next()) out.push(m.first);
      return out;
    };
    expect(lines('\\Aint')).toEqual([0, 1]);
    expect(lines(';\\z')).toEqual([0, 2]);
    expect(lines('(?-m)^int')).toEqual([0, 1]);
  });

  it('checks each hit of \\C again on its line (the one node no class can narrow)', () => {
    const m = matcher('a\\Cb');
    expect(m.fast).toBe(false);
    expect(matcherLines(m, 'a\nb\naxb\n')).toEqual([2]);
  });
});

/** The lines a matcher reports; with `rebind`, the scan moves to a fresh copy of the text at every hit. */
function matcherLines(m: LineMatcher, text: string, rebind = false, encoding: BufferEncoding = 'utf8'): number[] {
  let buf = Buffer.from(text, encoding);
  const starts = lineStarts(buf);
  const out: number[] = [];
  m.begin(buf, starts);
  while (m.next()) {
    for (let line = m.first; line <= m.last; line++) out.push(line);
    if (rebind) {
      buf = Buffer.from(buf); // another buffer object with the same bytes
      m.rebind(buf, starts);
    }
  }
  return out;
}

/** The reference: RE2 on each line alone, as ripgrep matches (flags: `mi` for -i). */
function referenceLines(pattern: string, text: string, flags = 'm'): number[] {
  return re2LineMatches(pattern, flags, Buffer.from(text));
}

/** Property: on texts made of random `tokens`, each pattern's matcher reports the reference lines (with `beside`, by path 4 or V8 where they serve). */
function agreesOnRandomTexts(tokens: string[], patterns: string[], maxLength: number, beside = false): void {
  const matchers = patterns.map((p) => matcher(p));
  // `beside`: RE2 may give way to path 4 or V8, as engine/guarded-scan.ts allows.
  for (const m of matchers) m.useV8(beside);
  fc.assert(
    fc.property(fc.array(fc.constantFrom(...tokens), { maxLength }), fc.integer({ min: 0, max: patterns.length - 1 }), fc.boolean(), (toks, k, rebind) => {
      const text = toks.join('');
      expect(matcherLines(matchers[k], text, rebind)).toEqual(referenceLines(patterns[k], text));
    }),
    { numRuns: 1500 },
  );
}

describe('LineMatcher paths', () => {
  // [pattern, options, whether the required-literal prefilter (path 2) is used]
  const rows: [string, LineMatcherOptions, boolean][] = [
    ['static int \\w+_probe\\(struct platform_device', {}, true],
    ['\\w+_probe\\(', {}, true],
    ['(foo|bar)_\\d+', {}, true],
    ['\\bx?abc\\s+\\w+', {}, true],
    ['x?abc\\s+\\w+', {}, false], // cut to abc[^\n\S]+[\w] (edge-trim.ts): RE2 skips to its literal prefix itself
    ['^\\s*foo_\\w+', {}, true],
    ['EXPORT_SYMBOL\\(\\w+\\)', {}, false], // RE2 skips to its literal prefix itself
    ['foo|bar', {}, false], // literal alternatives
    ['\\Afoo_\\w', {}, true], // per line, \A is ^
    ['foo_\\w+\\z', {}, false], // per line foo_\w+$: its string is its literal prefix
    ['a.b', {}, false],
    ['\\w+_probe\\(', { caseInsensitive: true }, true],
    ['sched_clock', { caseInsensitive: true }, true], // RE2 has no fast way to a prefix starting with k or s under -i
    ['clock_set', { caseInsensitive: true }, false], // but it has to this one
    ['r\u00e9sum\u00e9', { caseInsensitive: true }, false], // non-ASCII: Latin-1 cannot fold UTF-8
    ['^foo_\\w+', { caseInsensitive: true, multiline: true }, false],
    ['\\w+_probe\\(', { multiline: true }, false],
  ];
  it.each(rows)('%j %j -> prefiltered %j', (pattern, options, expected) => {
    expect(matcher(pattern, options).prefiltered).toBe(expected);
  });
});

// Texts with lines where a literal occurs without a match, several hits in a line, CRLF, a last
// line without `\n`, empty lines, and a long text whose candidates span several windows.
const LONG = Array.from({ length: 400 }, (_, i) =>
  i % 37 === 0 ? `  foo_${i} = bar_${i};` : i % 11 === 0 ? `abc ${i} foo_ bar_ _probe(` : `filler line ${i} without anything`,
).join('\n');

const TEXTS: string[] = [
  '',
  '\n',
  '\n\n',
  'static int foo_probe(struct platform_device *pdev)\nstatic void bar_probe(struct platform_device *p)\n_probe(struct platform_device x\n',
  'foo_1 bar_2 foo_3\r\nnone\r\nbar_x foo_\r\n  foo_ok\r\n',
  'a\nb foo_bar\nabc1',
  'abc1 abc2 abc3\nxyz abc\n\n\nabc 9',
  'xfoo_bar foo_barx\nfoo_bar\n(foo_bar)\n',
  'x_probe(y_probe( z_probe(\nfoo_end\nbar_9 foo_end',
  '日本は語 日本語\nabc\tdef\n\tfoo_é',
  LONG,
  LONG + '\n',
];

const PATTERNS: string[] = [
  'static int \\w+_probe\\(struct platform_device',
  '\\w+_probe\\(',
  '(foo|bar)_\\d+',
  '^\\s*foo_\\w+',
  '\\w+_end$',
  '\\bfoo_bar\\b',
  '\\bx?abc\\d',
  '\\bx?abc\\s+\\w+',
  '[a-z]+ = bar_\\d+;$',
  '(foo|bar)_\\s*$',
  '\\b[^ ]*日本\\w*語',
  '\\b\\w*_probe\\(\\s*',
];

describe('LineMatcher with required literals reports the lines RE2 matches one by one', () => {
  const cases = PATTERNS.flatMap((p) => TEXTS.map((t, i) => [p, i, t] as const));
  it.each(cases)('%j on text %d', (pattern, _i, text) => {
    const m = matcher(pattern);
    expect(m.prefiltered).toBe(true);
    const want = referenceLines(pattern, text);
    expect(matcherLines(m, text)).toEqual(want);
    expect(matcherLines(m, text, true)).toEqual(want);
  });

  it('holds for random texts', () => {
    agreesOnRandomTexts(['foo_', 'bar_', '_probe(', 'abc', '日本', '語', ' ', '  ', '\t', '1', '23', 'x', 'end', '\r', '\n', '\n', '(', ';'], PATTERNS, 600);
  });
});

// Under -i the required strings are found in any case by a RegExpFinder, including the case
// variants outside ASCII that RE2 accepts for k and s (U+212A KELVIN SIGN, U+017F LONG S).
const KELVIN = '\u212a';
const LONG_S = '\u017f';
const FOLD_TEXTS: string[] = [
  '',
  '\n',
  'static int foo_PROBE(struct platform_device *p)\nSTATIC INT BAR_probe(STRUCT x\nnone _Probe(\n',
  `clock_set CLOCK_SET\nCloc${KELVIN}_Set\ncloc${KELVIN}_${LONG_S}et\nclocks_et\r\nCLOCK_SE`,
  `${LONG_S}ched_clock\nSCHED_CLOCK\r\nsched_cloc\n\u00c0B sched_clock\u00c9\n`,
  `STATIC INT a(\nstatic  int b(\n${LONG_S}tAtIc InT c(\nstatic int\nTATIC INT d(\n`,
  'SCHED_CLOCK y\nx_probe(a)\nPROBE(b) sched_clock\nnone\nSched_Clock\n',
  Array.from({ length: 300 }, (_, i) => (i % 23 === 0 ? `  Sched_Clock_${i} = x;` : i % 7 === 0 ? `SCHED_ ${i} FOO_ bar_Set` : `filler line ${i}`)).join('\n'),
];
const FOLD_PATTERNS: string[] = [
  '\\w+_probe\\(struct',
  '\\bclock_set',
  'sched_clock',
  '^sched_\\w+$',
  'foo|bar_set',
  '\\bsched_clock_\\d+',
  'static int \\w+\\(',
  'sched_clock|probe\\(',
];

describe('LineMatcher under -i reports the lines RE2 matches one by one', () => {
  const cases = FOLD_PATTERNS.flatMap((p) => FOLD_TEXTS.map((t, i) => [p, i, t] as const));
  it.each(cases)('%j on text %d', (pattern, _i, text) => {
    const m = matcher(pattern, { caseInsensitive: true });
    expect(m.prefiltered).toBe(true);
    const want = referenceLines(pattern, text, 'mi');
    expect(matcherLines(m, text)).toEqual(want);
    expect(matcherLines(m, text, true)).toEqual(want);
  });

  it('holds for random texts', () => {
    const tokens = [
      'sched',
      'SCHED',
      'Sch',
      'ed',
      '_',
      'clo',
      'CLO',
      'c',
      'K',
      'k',
      KELVIN,
      's',
      'S',
      LONG_S,
      'et',
      'ET',
      '_set',
      'foo',
      'FoO',
      ' ',
      '\n',
      '\r',
      '1',
      '(',
      'probe',
      'PROBE',
      'struct',
      'tatic',
      'TaTiC',
      ' int',
      ' INT',
      'sched_clock',
      'probe(',
    ];
    const matchers = FOLD_PATTERNS.map((p) => matcher(p, { caseInsensitive: true }));
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...tokens), { maxLength: 300 }), fc.integer({ min: 0, max: FOLD_PATTERNS.length - 1 }), (toks, k) => {
        const text = toks.join('');
        expect(matcherLines(matchers[k], text)).toEqual(referenceLines(FOLD_PATTERNS[k], text, 'mi'));
      }),
      { numRuns: 1500 },
    );
  });
});

// Literal alternatives (path 1): overlapping alternatives, alternatives that are prefixes of
// each other, matches at the text's start and end, CRLF lines, and a text of many lines.
const LITERAL_TEXTS: string[] = [
  '',
  '\n',
  'foobar',
  'foo\nbar\n',
  'xfoo\r\nfoobar\r\nnothing\r\nbarfoo',
  'abcd abc\nbcd\ncd\nab',
  'kmem_cache_create_usercopy(x)\n\tvmalloc_to_page(p);\ncopy_from_kernel_nofault\n',
  'café naïve\n日本語\nrésumé',
  LONG,
];

const LITERAL_PATTERNS: [string, LineMatcherOptions][] = [
  ['foo', {}],
  ['foo|foobar', {}],
  ['foobar|foo', {}],
  ['abcd|bc', {}],
  ['bcd|abc|cd', {}],
  ['a|b', {}],
  ['kmem_cache_create_usercopy|vmalloc_to_page|copy_from_kernel_nofault', {}],
  ['café|naïve|日本語', {}],
  ['bar\\r|foo_1', {}],
  ['_probe\\(|foo_', {}],
  ['FOO|Bar', { caseInsensitive: true }], // RE2 path: folded
  ['RÉSUMÉ|CAFÉ', { caseInsensitive: true }],
];

describe('LineMatcher with literal alternatives reports the lines RE2 matches one by one', () => {
  const cases = LITERAL_PATTERNS.flatMap(([p, o]) => LITERAL_TEXTS.map((t, i) => [p, o, i, t] as const));
  it.each(cases)('%j %j on text %d', (pattern, options, _i, text) => {
    const m = matcher(pattern, options);
    const want = referenceLines(options.caseInsensitive === true ? `(?i)${pattern}` : pattern, text);
    expect(matcherLines(m, text)).toEqual(want);
    expect(matcherLines(m, text, true)).toEqual(want);
  });

  it('holds for random texts', () => {
    agreesOnRandomTexts(
      ['foo', 'bar', 'foobar', 'ab', 'abc', 'bcd', 'é', ' ', '\r', '\n', '\n', 'x'],
      ['foo|foobar', 'abc|bcd|cd', 'bar\\r|é|xx', 'foobarfoo|obarf', 'ab'],
      400,
    );
  });
});

// Path 3 where hits are dense: after two hits on consecutive lines the matcher takes the next
// matching lines as one run (`lineRuns`). Patterns that match most lines, some lines or the
// empty string, on texts of short lines, empty lines, CRLF and a last line without `\n`.
const DENSE_PATTERNS = [
  '^[^\\n]*[ab]$',
  '.',
  '\\S+\\s+\\S+',
  '^$',
  '^',
  '$',
  'a|b',
  '\\w',
  '[^x]',
  '\\b\\w{3}\\b',
  'x*',
  '^\\s*$',
  '[^\\n]{2}',
  '(?s).',
  '\\D',
  'b$',
];

describe('LineMatcher on dense lines reports the lines RE2 matches one by one', () => {
  it('takes runs of matching lines', () => {
    const text = `${'a\n'.repeat(10)}\n${'b\n'.repeat(10)}x`;
    // RE2's path: V8's (byte-regex.ts) and path 4 (a run of one class) need no runs.
    const m = new LineMatcher({ ...compilePattern('.'), byteRegex: () => null, classRun: () => null });
    const buf = Buffer.from(text);
    m.begin(buf, lineStarts(buf));
    const hits: [number, number][] = [];
    while (m.next()) hits.push([m.first, m.last]);
    // Four lines one by one, then the rest of the block as one run; the empty line breaks it, and
    // the hit just after the break goes on with runs at once.
    expect(hits).toEqual([
      [0, 0],
      [1, 1],
      [2, 2],
      [3, 3],
      [4, 9],
      [11, 11],
      [12, 21],
    ]);
  });

  it('holds for random texts', () => {
    agreesOnRandomTexts(['a', 'b', 'x', 'abc', ' ', '\t', '\r', '\n', '\n', '\n', 'é'], DENSE_PATTERNS, 300);
  });
});

describe('a pattern cut at its edges (engine/regex/edge-trim.ts) matches the lines the pattern as written matches', () => {
  it('on generated patterns and texts, with and without -i', () => {
    let cut = 0;
    fc.assert(
      fc.property(patterns, fc.boolean(), fc.array(texts, { minLength: 1, maxLength: 4 }), (pattern, ci, bodies) => {
        let m: LineMatcher;
        try {
          m = matcher(pattern, { caseInsensitive: ci });
        } catch {
          return; // RE2 refuses it, or it names the line break: no search
        }
        if (analyzePattern(pattern, { caseInsensitive: ci }).re2Source.length < pattern.length) cut++;
        for (const text of bodies) expect(matcherLines(m, text.toString('latin1'), false, 'latin1')).toEqual(re2LineMatches(pattern, ci ? 'mi' : 'm', text));
      }),
      { numRuns: 1000 },
    );
    // Many generated patterns have a repetition at an edge: the cut is exercised, not only passed over.
    expect(cut).toBeGreaterThan(100);
  });

  it('cuts only at the edges', () => {
    const cutTo = (pattern: string) => analyzePattern(pattern).re2Source;
    expect(cutTo('\\S+\\s+\\S+')).toBe('[\\S][^\\n\\S]+[\\S]');
    expect(cutTo('(?:ab+)+c{2,4}')).toBe('ab+c{2}');
    expect(cutTo('x(?:a|b*)')).toBe('x');
    expect(cutTo('\\bfoo+\\b')).toBe('\\bfoo+\\b');
    expect(cutTo('a*')).toBe('(?:)');
    // Multiline mode reports every line a match spans: nothing is cut.
    expect(analyzePattern('a\\s+b+', { multiline: true }).re2Source).toBe('a\\s+b+');
  });
});

describe('path 4: a run of one class', () => {
  const CLASS_RUNS = [
    '\\D{3}',
    '[^a-z]{2,}',
    '\\pL{2}',
    '\\p{Greek}+',
    '(?i)[k-s]{2}',
    '(?i)[^K]{3}',
    '(?i)\\pL{1,2}',
    '[^\\x00-\\x7f]',
    '\\W{4}',
    '.{3}',
    '(?s).',
    '[\\s\\S]',
    '\\s{2,}',
    '[[:^ascii:]]{2}',
    '\\PL{2}',
    '[é-ü]{2}',
    '[^\\n]',
    '\\w{2,5}',
    // A run and then one code point of a class (`after`), the classes apart or sharing characters.
    '\\s{2,}\\w',
    '\\d{2}[a-z]',
    '[ak]{2}\\w',
    '\\s\\S',
    '(?i)[k-s]{2}\\pL',
    '\\w{2}[^\\x00-\\x7f]',
    '[^a-z]{2}[é-ü]',
    '[-_]{3}\\W',
    // Whole words of word characters, a count of them or a range.
    '\\b\\w{3}\\b',
    '\\b\\w\\b',
    '\\b\\w{2,}\\b',
    '\\b[0-9A-Za-z_]{2,3}\\b',
  ];

  it('takes the patterns that are one class or `.` repeated, on valid UTF-8 texts only', () => {
    const text = Buffer.from('abc 123\n\n');
    const takes = (pattern: string, bytes: Buffer = text): boolean => {
      const m = matcher(pattern);
      m.useV8(true);
      m.begin(bytes, lineStarts(bytes));
      return m.searchesByRuns;
    };
    for (const pattern of CLASS_RUNS) expect(takes(pattern), pattern).toBe(true);
    for (const pattern of ['\\S+\\s+\\S+', '\\s{2}a', '\\w\\s{2}', 'a{3}', 'x*', '\\d?', '^\\s*$', '\\b[a-z]{3}\\b', '(?i)\\b\\w{3}\\b', '\\B\\w{3}\\b', 'a|b'])
      expect(takes(pattern), pattern).toBe(false);
    expect(takes('\\D{3}', Buffer.from([0x61, 0xff, 0x62, 0x63, 0x64, 0x0a]))).toBe(false);
    // Only where the caller allows a way beside RE2 (engine/guarded-scan.ts, by a timed trial).
    const unasked = matcher('\\D{3}');
    unasked.begin(text, lineStarts(text));
    expect(unasked.searchesByRuns).toBe(false);
    // Not a class that holds `\n` (multiline mode keeps it).
    const multiline = new LineMatcher(compilePattern('[\\s\\S]', { multiline: true }));
    multiline.useV8(true);
    multiline.begin(text, lineStarts(text));
    expect(multiline.searchesByRuns).toBe(false);
  });

  it('reports the lines RE2 matches, with astral, folded and accented characters, CRLF and empty lines', () => {
    agreesOnRandomTexts(
      ['a', 'z', 'K', 'k', '\u212a', 's', '\u017f', 'S', '5', ' ', '\t', '\r', '\n', '\n', 'é', 'Ω', '漢', '\u{1d4b3}', '_', '-'],
      CLASS_RUNS,
      60,
      true,
    );
  });

  it('reports the lines RE2 matches in texts of ASCII alone, where a class holding more is found by probes too', () => {
    agreesOnRandomTexts(['a', 'z', 'K', 'k', 's', 'S', '5', '42', ' ', '  ', '\t', '\r', '\n', '\n', '_', '-', 'ab', '{}'], CLASS_RUNS, 60, true);
  });

  it('leaves a text that is not valid UTF-8 to RE2, with the same answer', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 80 }), fc.constantFrom(...CLASS_RUNS), (bytes, pattern) => {
        const buf = Buffer.from(bytes);
        const m = matcher(pattern);
        m.useV8(true);
        m.begin(buf, lineStarts(buf));
        const found: number[] = [];
        while (m.next()) for (let line = m.first; line <= m.last; line++) found.push(line);
        expect(found).toEqual(re2LineMatches(pattern, 'm', buf));
      }),
      { numRuns: 1500 },
    );
  });
});
