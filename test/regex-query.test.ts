// Table tests for the trigram plan and required literals of engine/regex/ (pattern in, formatted query out, as codesearch's
// index/regexp_test.go), plus property tests of the one guarantee that matters: whenever RE2
// finds a match in a text, the query evaluated on the text's trigram set is true.
import { describe, it, expect } from 'vitest';
import fc from 'fast-check';
import RE2 from 're2';
import { evalQuery, formatQuery, type Query, type Trigram } from '../engine/regex/query.js';
import { foldedRequired, regexQuery, requiredLiterals, type RegexQueryOptions } from './helpers/regex.js';
import { seededRandom } from './helpers/random.js';
import { textGrams } from './helpers/grams.js';

const KELVIN = '\u212a';

/** Whether RE2 finds a match: line by line (grep default) or across lines with `.` matching \n. */
function re2Finds(pattern: string, text: string, opts: RegexQueryOptions): boolean | null {
  let re: RE2;
  try {
    re = new RE2(pattern, (opts.caseInsensitive ? 'i' : '') + (opts.multiline ? 's' : '') + 'u');
  } catch {
    return null; // not a valid RE2 pattern: the caller rejects it before asking for a query
  }
  if (opts.multiline) return re.test(text);
  return text.split('\n').some((line) => re.test(line));
}

/** requiredLiterals as UTF-8 strings, for tables and messages. */
function required(pattern: string, opts?: RegexQueryOptions): string[] | null {
  return requiredLiterals(pattern, opts)?.map((b) => b.toString('utf8')) ?? null;
}

/** Counts the pairs where checkRequired had a set to check (the property must not be vacuous). */
let requiredChecked = 0;

/** Asserts that every line RE2 matches (case-sensitively) holds one of the pattern's required literals. */
function checkRequired(pattern: string, text: string, opts: RegexQueryOptions): void {
  const set = requiredLiterals(pattern, opts);
  if (set === null) return;
  for (const b of set) if (b.byteLength < 3 || b.includes(0x0a)) throw new Error(`bad string ${JSON.stringify(b.toString())}`);
  let re: RE2;
  try {
    re = new RE2(pattern, 'mu');
  } catch {
    return; // not a valid RE2 pattern: LineMatcher rejects it before asking
  }
  for (const line of text.split('\n')) {
    if (!re.test(line)) continue;
    requiredChecked++;
    const bytes = Buffer.from(line);
    if (!set.some((b) => bytes.includes(b))) {
      throw new Error(`required ${JSON.stringify(required(pattern, opts))} missing from ${JSON.stringify(line)} matched by ${JSON.stringify(pattern)}`);
    }
  }
}

/**
 * Asserts the superset guarantee for one pair, and checkRequired (whose set needs no options:
 * it is null under them); returns whether RE2 matched at all.
 */
function checkSuperset(pattern: string, text: string, opts: RegexQueryOptions = {}): boolean {
  checkRequired(pattern, text, {});
  const found = re2Finds(pattern, text, opts);
  if (found !== true) return false;
  const set = textGrams(text);
  for (const quadgrams of [false, true]) {
    const q = regexQuery(pattern, { ...opts, quadgrams });
    if (!evalQuery(q, (t) => set.has(t))) {
      throw new Error(
        `query ${formatQuery(q)} rejects ${JSON.stringify(text)} matched by ${JSON.stringify(pattern)} ${JSON.stringify({ ...opts, quadgrams })}`,
      );
    }
  }
  return true;
}

describe('regexQuery table', () => {
  // [pattern, expected formatQuery output, options]
  const rows: [string, string, RegexQueryOptions?][] = [
    // Literals and concatenation.
    ['abc', '"abc"'],
    ['Abcdef', '"Abc" "bcd" "cde" "def"'],
    ['(abc)(def)', '"abc" "bcd" "cde" "def"'],
    ['ab', '+'],
    ['a\\.b\\.c', '".b." "a.b" "b.c"'],
    ['a/b/c', '"/b/" "a/b" "b/c"'],
    // Alternation.
    ['abc|xyz', '("abc"|"xyz")'],
    ['abc.*(def|ghi)', '"abc" ("def"|"ghi")'],
    ['abc(def|ghi)', '"abc" ("bcd" "cde" "def"|"bcg" "cgh" "ghi")'],
    ['(abc|bac)de', '"cde" ("abc" "bcd"|"acd" "bac")'],
    ['(a+hello|b+world)', '("ahe" "ell" "hel" "llo"|"bwo" "orl" "rld" "wor")'],
    ['(a|ab)cde', '"cde" ("abc" "bcd"|"acd")'],
    ['(a|b|c|d)(ef|g|hi|j)', '+'],
    // Empty alternatives make the whole pattern able to match anywhere.
    ['abc|', '+'],
    ['|abc', '+'],
    ['abc|def|', '+'],
    ['(|abc)def', '"def"'],
    ['(?:abc|)def', '"def"'],
    // Factoring and duplicate removal.
    ['(abc|abc)', '"abc"'],
    ['(ab|ab)c', '"abc"'],
    ['ab(cab|cat)', '"abc" "bca" ("cab"|"cat")'],
    ['(z*(abc|def)z*)(z*(abc|def)z*)', '("abc"|"def")'],
    ['(z*abcz*defz*)(z*(ghi|jkl)z*)', '"abc" "def" ("bcd" "cde"|"zde") ("ghi"|"jkl")'],
    // Character classes.
    ['ab[cde]f', '("abc" "bcf"|"abd" "bdf"|"abe" "bef")'],
    ['[ab]cd', '("acd"|"bcd")'],
    ['ab[cd]e', '("abc" "bce"|"abd" "bde")'],
    ['[ab][cd][ef]', '("ace"|"acf"|"ade"|"adf"|"bce"|"bcf"|"bde"|"bdf")'],
    ['ab[^cde]f', '+'],
    ['ab.f', '+'],
    ['[^\\s\\S]', '-'],
    ['[^\\x00-\\x{10FFFF}]', '-'],
    ['[[:alpha:]]+123', '"123"'],
    ['[\\n]bcd', '"bcd"'],
    ['\\pLabc', '"abc"'],
    ['\\p{Greek}+xyz', '"xyz"'],
    ['\\w{5}\\s+\\w{5}', '+'],
    ['foo\\s+bar', '"bar" "foo"'],
    // Repetition.
    ['a+hello', '"ahe" "ell" "hel" "llo"'],
    ['a+bcd', '"abc" "bcd"'],
    ['a*bbb', '"bbb"'],
    ['a?bbb', '"bbb"'],
    ['(bbb)a?', '"bbb"'],
    ['(bbb)a*', '"bbb"'],
    ['(abc)*', '+'],
    ['(abc)?', '+'],
    ['(abc)+', '"abc"'],
    ['x{3}abc', '"abc" "xab" "xxa" "xxx"'],
    ['(ab){3}', '"aba" "bab"'],
    ['(ab){2,}', '"aba" "bab"'],
    ['(ab){0,2}cde', '"cde"'],
    ['a{2,4}?bcd', '"aab" "abc" "bcd"'],
    ['(abcd+)?xyz', '"xyz"'],
    ['(a+b)?c+', '+'],
    ['a{,3}bc', '",3}" "3}b" "a{," "{,3" "}bc"'],
    ['ab{cd', '"ab{" "b{c" "{cd"'],
    // Anchors and empty-width assertions.
    ['^abc', '"abc"'],
    ['abc$', '"abc"'],
    ['\\Aabc\\z', '"abc"'],
    ['(?m)^abc$', '"abc"'],
    ['\\b', '+'],
    ['\\babc', '"abc"'],
    ['abc\\b', '"abc"'],
    ['ab\\Bc', '"abc"'],
    ['.', '+'],
    ['(?s).', '+'],
    ['()', '+'],
    ['', '+'],
    // Escapes, \Q...\E and node-re2's rewriting of JavaScript escapes.
    ['\\x41\\x{42}C', '"ABC"'],
    ['\\101\\102C', '"ABC"'],
    ['\\u00e9t\\u00e9', '"té" "\\xa9t\\xc3" "ét"'],
    ['\\cIab', '"\\x09ab"'],
    ['tab\\tx', '"ab\\x09" "b\\x09x" "tab"'],
    ['\\Qa.b\\E', '"a.b"'],
    ['\\Qa.b', '"a.b"'],
    ['\\Qa|b\\E*', '+'],
    ['\\Qa/b\\E', '"\\\\/b" "a\\\\/"'], // node-re2 turns / into \/ even inside \Q…\E
    // Unicode literals are byte trigrams of their UTF-8.
    ['naïve', '"aï" "na\\xc3" "\\xafve" "ïv"'],
    ['日本語', '"\\x97\\xa5\\xe6" "\\x9c\\xac\\xe8" "\\xa5\\xe6\\x9c" "\\xac\\xe8\\xaa" "日" "本" "語"'],
    // Newlines are never required.
    ['abc\\ndef', '"abc" "def"'],
    ['abc\\ndef', '"abc" "def"', { multiline: true }],
    ['a\\nbc', '+'],
    // Case-insensitive.
    ['(?i)a~~', '("A~~"|"a~~")'],
    ['(?i)ab~', '("AB~"|"Ab~"|"aB~"|"ab~")'],
    ['(?i)abc', '("ABC"|"ABc"|"AbC"|"Abc"|"aBC"|"aBc"|"abC"|"abc")'],
    ['abc', '("ABC"|"ABc"|"AbC"|"Abc"|"aBC"|"aBc"|"abC"|"abc")', { caseInsensitive: true }],
    ['(?i)abc|def', '("ABC"|"ABc"|"AbC"|"Abc"|"DEF"|"DEf"|"DeF"|"Def"|"aBC"|"aBc"|"abC"|"abc"|"dEF"|"dEf"|"deF"|"def")'],
    ['(?i)abcd', '("ABC"|"ABc"|"AbC"|"Abc"|"aBC"|"aBc"|"abC"|"abc") ("BCD"|"BCd"|"BcD"|"Bcd"|"bCD"|"bCd"|"bcD"|"bcd")'],
    ['(?i:ab)c', '("ABc"|"Abc"|"aBc"|"abc")'],
    ['(?i)ab(?-i)c', '("ABc"|"Abc"|"aBc"|"abc")'],
    ['(?i)[a-c]~~', '("A~~"|"B~~"|"C~~"|"a~~"|"b~~"|"c~~")'],
    ['(?i)k~~', `("K~~"|"k~~"|"\\x84\\xaa~" "\\xaa~~" "${KELVIN}")`],
    ['(?i)s~~', '("S~~"|"s~~"|"\\xbf~~" "ſ~")'],
    ['(?i)é~~', '("\\x89~~" "É~"|"\\xa9~~" "é~")'],
    ['ǅ~~', '("\\x84~~" "Ǆ~"|"\\x85~~" "ǅ~"|"\\x86~~" "ǆ~")', { caseInsensitive: true }],
    ['(?i)ı~~', '"\\xb1~~" "ı~"'], // dotless i does not fold with I/i in RE2
    // Invalid patterns (RE2 rejects them first) never throw and never narrow.
    ['(a|b', '+'],
    ['a)', '+'],
    ['*a', '+'],
    ['a**', '+'],
    ['\\8', '+'],
    ['[z-a]', '+'],
    ['\\1', '+'],
    ['(?P=x)', '+'],
    ['(?=abc)', '+'],
    ['\\Z', '+'],
    // Quadgrams beside the trigrams of every string long enough, none across a newline.
    ['Abcdef', '"Abc" "bcd" "cde" "def" "abcd" "bcde" "cdef"', { quadgrams: true }],
    ['abc', '"abc"', { quadgrams: true }],
    ['abcd|wxyz', '("abc" "bcd" "abcd"|"wxy" "xyz" "wxyz")', { quadgrams: true }],
    ['abc\\ndef', '"abc" "def"', { quadgrams: true, multiline: true }],
    ['(?i)a123', '"123" "a123" ("A12"|"a12")', { quadgrams: true }],
    ['日本', '"\\x97\\xa5\\xe6" "\\xa5\\xe6\\x9c" "日" "本" "\\x97\\xa5\\xe6\\x9c" "\\xa5本" "日\\xe6"', { quadgrams: true }],
  ];

  it.each(rows)('%j → %s %j', (pattern, want, opts) => {
    expect(formatQuery(regexQuery(pattern, opts))).toBe(want);
  });

  it('has at least 50 rows', () => {
    expect(rows.length).toBeGreaterThanOrEqual(50);
  });
});

describe('requiredLiterals table', () => {
  // [pattern, expected strings (any order) or null, options]
  const rows: [string, string[] | null, RegexQueryOptions?][] = [
    // Concatenation: literal runs, the best child (longest shortest string, then fewest strings).
    ['static int \\w+_probe\\(struct platform_device', ['_probe(struct platform_device']],
    ['EXPORT_SYMBOL\\(\\w+\\)', ['EXPORT_SYMBOL(']],
    ['abc\\d+defgh', ['defgh']],
    ['abc\\d+xyz', ['abc']],
    ['foo.bar', ['foo']],
    ['(abcd|efgh)\\s+ijkl', ['ijkl']],
    ['(abcde|fghij)\\s+klm', ['abcde', 'fghij']],
    ['(?:ab)(?:cd)\\w', ['abcd']],
    ['(?P<name>abc)def', ['abcdef']],
    ['x{2}abc', ['abc']],
    // Classes, dots and assertions in the middle give nothing but do not block the rest.
    ['[a-z]+_probe\\(', ['_probe(']],
    ['foo[0-9]barbaz', ['barbaz']],
    ['a[bc]de', null],
    ['\\pLabc', ['abc']],
    ['[[:alpha:]]+_ops = \\{', ['_ops = {']],
    ['[a]bc', ['abc']],
    ['\\bstatic\\b', ['static']],
    ['^#include <linux/', ['#include <linux/']],
    ['foo$', ['foo']],
    // Alternation: the union of the branches, none if a branch has none.
    ['(foo|bar)_\\d+', ['bar', 'foo']],
    ['foo|bar', ['bar', 'foo']],
    ['((abcd|efgh)ij|klmno)\\d', ['abcd', 'efgh', 'klmno']],
    ['((abc|def)ghi|jkl)mno', ['mno']],
    ['(?:foo|foobar)\\d', ['foo']],
    ['(abc|de)\\d', null],
    ['(abc|de)fgh', ['fgh']],
    ['abc|', null],
    ['(aaa|bbb|ccc|ddd|eee|fff|ggg|hhh)\\d', ['aaa', 'bbb', 'ccc', 'ddd', 'eee', 'fff', 'ggg', 'hhh']],
    ['(aaa|bbb|ccc|ddd|eee|fff|ggg|hhh|iii)\\d', null],
    ['(aaa|bbb|ccc|ddd|eee|fff|ggg|hhh|iii)\\dxyz', ['xyz']],
    // Repetition: at least one copy passes through, an optional one gives nothing.
    ['(?:abc)+\\d', ['abc']],
    ['(?:abc){2,5}\\d', ['abc']],
    ['(?:abc)*\\d', null],
    ['(?:abc)?xy', null],
    ['(?:abc){0,3}\\w', null],
    ['(?:abc)*?defg', ['defg']],
    // Escapes and Unicode (UTF-8 bytes), including node-re2's rewriting.
    ['a\\.b\\(c', ['a.b(c']],
    ['\\Qa.b*c\\E\\d', ['a.b*c']],
    ['\\x41BC', ['ABC']],
    ['a/b/c', ['a/b/c']],
    ['日本\\w語', ['日本']],
    ['\\x{65e5}\\x{672c}', ['日本']],
    ['\\u65e5\\u672c', ['日本']],
    ['naïve\\s', ['naïve']],
    // Case folding: nothing read under (?i) is required.
    ['(?i)foobar', null],
    ['(?i)foo_123', null],
    ['(?i:foo)barbaz', ['barbaz']],
    ['foo(?i)barbaz', ['foo']],
    ['foobar', null, { caseInsensitive: true }],
    // Multiline, too short, newlines, nothing to parse.
    ['foo\\w+bar', null, { multiline: true }],
    ['ab\\d', null],
    ['ab', null],
    ['foo\\nbarbaz', ['barbaz']],
    ['ab\\ncd', null],
    ['abc\\n\\w+defgh', ['defgh']],
    ['', null],
    ['(abc', null],
    ['abc\\1', null],
    ['(?=abc)', null],
  ];

  it.each(rows)('%j → %j %j', (pattern, want, opts) => {
    const got = required(pattern, opts);
    expect(got === null ? null : [...got].sort()).toEqual(want === null ? null : [...want].sort());
  });

  it('has at least 25 rows', () => {
    expect(rows.length).toBeGreaterThanOrEqual(25);
  });
});

describe('regexQuery bounds on hostile patterns', () => {
  const cases: [string, string, string, RegexQueryOptions?][] = [
    ['nested plus', '(((a|b|c|d)+)+){50}', '+'],
    ['nested counted repeats', '((((((a{1000}){1000}){1000}){1000}){1000}){1000})', '"aaa"'],
    ['1 MB literal', 'a'.repeat(1 << 20), '+'],
    ['1 MB of groups', '(a)'.repeat(350_000), '+'],
    ['nesting deeper than RE2 allows', '('.repeat(5000) + 'abc' + ')'.repeat(5000), '+'],
    ['long literal', 'x'.repeat(60_000), '"xxx"'],
    ['long case-insensitive literal', 'abcdefghij'.repeat(6000), '+', { caseInsensitive: true }],
    ['many small classes', '[a-t]'.repeat(12_000), '+'],
    ['many alternations', '(ab|cd)'.repeat(8000), '+'],
    ['many ORs of ANDs', Array.from({ length: 3000 }, (_, i) => `x${i}.*y${i}z`).join('|'), '+'],
  ];
  it.each(cases)('requiredLiterals on %s is bounded', (_name, pattern, _want, opts) => {
    requiredLiterals(pattern, opts); // warm up
    const start = performance.now();
    requiredLiterals(pattern, opts);
    expect(performance.now() - start).toBeLessThan(1000);
  });

  it.each(cases)('%s', (_name, pattern, want, opts) => {
    regexQuery(pattern, opts); // warm up
    const start = performance.now();
    const q = regexQuery(pattern, opts);
    const ms = performance.now() - start;
    expect(formatQuery(q)).toBe(want);
    expect(ms).toBeLessThan(1000);
  });

  it('is well under a millisecond for typical patterns', () => {
    const typical = ['func\\s+\\w+\\(ctx context\\.Context', 'TODO|FIXME|XXX', 'import .* from "react"'];
    for (const p of typical) regexQuery(p, { caseInsensitive: true });
    const start = performance.now();
    for (let i = 0; i < 100; i++) for (const p of typical) regexQuery(p, { caseInsensitive: i % 2 === 0 });
    expect((performance.now() - start) / 300).toBeLessThan(1);
  });

  it('never throws, whatever the input', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), fc.boolean(), (p, i) => {
        const q = regexQuery(p, { caseInsensitive: i });
        expect(typeof formatQuery(q)).toBe('string');
        expect(() => requiredLiterals(p, { caseInsensitive: i })).not.toThrow();
      }),
      { numRuns: 3000 },
    );
  });
});

describe('evalQuery', () => {
  const t = (s: string): Trigram => (s.charCodeAt(0) << 16) | (s.charCodeAt(1) << 8) | s.charCodeAt(2);
  const q: Query = { op: 'and', trigrams: [t('abc')], sub: [{ op: 'or', trigrams: [t('def'), t('ghi')], sub: [] }] };
  const rows: [Query, string[], boolean][] = [
    [{ op: 'all' }, [], true],
    [{ op: 'none' }, ['abc'], false],
    [q, ['abc', 'ghi'], true],
    [q, ['abc'], false],
    [q, ['def', 'ghi'], false],
  ];
  it.each(rows)('%j on %j → %s', (query, present, want) => {
    const set = new Set(present.map(t));
    expect(evalQuery(query, (x) => set.has(x))).toBe(want);
  });
});

describe('caseInsensitiveRequired', () => {
  // The runs FoldedRunFinder looks for: the longest stretch of each required string without
  // k or s (they also fold outside ASCII), at least 4 characters, for at most two strings.
  it.each([
    ['sched_clock_register', ['ched_cloc']],
    ['static int \\w+_probe\\(struct platform_device', ['truct platform_device']],
    ['static int', ['tatic int']],
    ['\\bsysfs_create_group', ['_create_group']],
    ['kmalloc\\(', ['malloc(']],
    ['sk_buff', ['_buff']],
    ['sched_clock|tx_queue', ['ched_cloc', 'tx_queue']],
    ['skbs', null],
    ['ks_ab', null],
    ['sched_clock|tx_', null],
    ['todo|fixme|later', null],
  ] as const)('%s: %j', (pattern, runs) => {
    expect(foldedRequired(pattern)?.runs ?? null).toEqual(runs);
  });

  it('finds the variants outside ASCII only in the full RegExp', () => {
    const required = foldedRequired('sched_clock')!;
    const text = Buffer.from(`\u017fched_cloc\u212a`).toString('latin1');
    expect(required.ascii.test(text)).toBe(false);
    required.full.lastIndex = 0;
    expect(required.full.test(text)).toBe(true);
    expect(required.beyond.map((b) => b.toString('hex')).sort()).toEqual(['c5bf', 'e284aa']);
  });
});

describe('case-insensitive quadgrams', () => {
  // Every trigram of `hello_world` in some case, but no quadgram of it in any case.
  const scattered = 'HEL ell llo LO_ o_w _WO Wor orl rLd';
  const opts = { caseInsensitive: true, quadgrams: true };

  it('narrow -i past what trigram variants allow, through folded quadgrams of the required literal', () => {
    const has = (text: string) => (t: number) => textGrams(text).has(t);
    expect(evalQuery(regexQuery('hello_world', { caseInsensitive: true }), has(scattered))).toBe(true);
    expect(evalQuery(regexQuery('hello_world', opts), has(scattered))).toBe(false);
    expect(evalQuery(regexQuery('hello_world', opts), has('x HeLLo_WoRLD y'))).toBe(true);
    // A regex: the literal every match requires; an alternation: one branch's literal suffices.
    expect(evalQuery(regexQuery('\\bhello_world\\w*', opts), has(scattered))).toBe(false);
    expect(evalQuery(regexQuery('hello_world|tx_queue', opts), has(`${scattered} TX_QUEUE`))).toBe(true);
    expect(evalQuery(regexQuery('hello_world|tx_queue', opts), has(`${scattered} TX_QUE`))).toBe(false);
  });

  it('skip quadgrams holding k or s, which also fold to U+212A and U+017F', () => {
    // `kelvin_set` has no quadgram free of them but `elvi`, `lvin`, `vin_`, `in_s`... up to the s.
    const q = formatQuery(regexQuery('kelvin_set', opts));
    expect(q).toContain('"elvi"');
    expect(q).toContain('"vin_"');
    expect(q).not.toContain('"kelv"');
    expect(q).not.toContain('"n_se"');
  });
});

describe('superset guarantee, hand-picked', () => {
  // [pattern, text, options]: RE2 must find a match, and then the query must accept the text.
  const pairs: [string, string, RegexQueryOptions?][] = [
    ['abc', 'xxabcxx'],
    ['Abcdef', 'say Abcdef'],
    ['abc.*(def|ghi)', 'abc then ghi'],
    ['abc(def|ghi)', 'abcghi'],
    ['a+hello', 'aaahello'],
    ['(a+hello|b+world)', 'bbworld'],
    ['a*bbb', 'bbb'],
    ['a?bbb', 'abbb'],
    ['(bbb)a?', 'bbb'],
    ['^abc', 'first line\nabc at start'],
    ['abc$', 'ends abc\nnext'],
    ['ab[cde]f', 'abdf'],
    ['(abc|bac)de', 'bacde'],
    ['ab[^cde]f', 'abxf'],
    ['ab(cab|cat)', 'abcat'],
    ['(z*(abc|def)z*)(z*(abc|def)z*)', 'zzdefzabc'],
    ['(z*abcz*defz*)|(z*abcz*defz*)', 'abczzdef'],
    ['(z*abcz*defz*(ghi|jkl)z*)|(z*abcz*defz*(mno|prs)z*)', 'abcdefzzprs'],
    ['[ab][cd][ef]', 'bde'],
    ['(a|ab)cde', 'abcde'],
    ['(a|ab)cde', 'acde'],
    ['(a|b|c|d)(ef|g|hi|j)', 'ahi'],
    ['(abcd+)?xyz', 'xyz'],
    ['(a+b)?c+', 'c'],
    ['(?i)abc', 'xAbC'],
    ['abc', 'ABC', { caseInsensitive: true }],
    ['(?i)kelvin', `${KELVIN}elvin`],
    ['kelvin', `${KELVIN}ELVIN`, { caseInsensitive: true }],
    ['(?i)[k]elvin', `${KELVIN}elvin`],
    ['(?i)\\x4belvin', `${KELVIN}ELVIN`],
    ['(?i)\\Qkelvin\\E', `${KELVIN}elvin`],
    ['(?i)class', 'claſſ'],
    ['clock_setup', `CLOC${KELVIN}_SETUP`, { caseInsensitive: true }],
    ['ssid_list|tx_queue', 'ſSID_LIST', { caseInsensitive: true }],
    ['static int \\w+_probe\\(', 'STATIC INT FOO_PROBE(', { caseInsensitive: true }],
    ['get_(?-i)Value', 'GET_Value', { caseInsensitive: true }],
    ['(?i)straße', 'STRAẞE'],
    ['(?i)λόγος', 'ΛΌΓΟΣ'],
    ['(?i)λόγοσ', 'λόγος'],
    ['(?i)µmol', 'Μmol'],
    ['(?i)ǆemal', 'ǅemal'],
    ['(?i)résumé', 'RÉSUMÉ'],
    ['(?i)ΣΊΣΥΦΟΣ', 'σίσυφος'],
    ['(?i)\ufb05ab', '\ufb06ab'], // ligatures ſt / st: a fold JavaScript's case mappings lack
    ['(?i)\u0390ab', '\u1fd3ab'],
    ['(?i)x\u03b0y', 'x\u1fe3y'],
    ['(?i:HeLLo) world', 'hello world'],
    ['(?i)hello(?-i) World', 'HELLO World'],
    ['(?i)[a-c]xy', 'Bxy'],
    ['naïve', 'a naïve idea'],
    ['日本語', 'これは日本語です'],
    ['\\x{65e5}\\x{672c}', '日本'],
    ['\\u00e9t\\u00e9', 'en été'],
    ['\\u{1F600}abc', '😀abc'],
    ['\\x{10FFFF}ab', '\u{10FFFF}ab'],
    ['[\\x{1F600}-\\x{1F602}]xy', '😁xy'],
    ['\\Qa.b\\E', 'xa.bx'],
    ['\\Qa.b', 'a.b'],
    ['\\Qa/b\\E', 'a\\/b'],
    ['\\x41\\x{42}C', 'ABC'],
    ['\\101\\102C', 'ABC'],
    ['a\\.b\\.c', 'a.b.c'],
    ['tab\\there', 'tab\there'],
    ['\\cIabc', '\tabc'],
    ['a/b/c', 'a/b/c'],
    ['[[:alpha:]]+123', 'abc123'],
    ['[[:digit:]]{3}-[[:digit:]]{4}', 'call 555-1234'],
    ['\\d{3}-\\d{4}', '555-1234'],
    ['[[:^alpha:]]abc', '1abc'],
    ['[^\\D]{2}abc', '12abc'],
    ['\\bfoo\\b', 'a foo b'],
    ['foo\\Bbar', 'foobar'],
    ['\\Afoo', 'foo'],
    ['bar\\z', 'bar'],
    ['(?m)^abc$', 'x\nabc\ny'],
    ['(?P<word>hello) world', 'hello world'],
    ['(?<word>hello) world', 'hello world'],
    ['x{3}abc', 'xxxxabc'],
    ['(ab){3}', 'abababab'],
    ['(ab){2,}c', 'abababc'],
    ['(ab){0,2}cde', 'cde'],
    ['a{2,4}?bcd', 'aaabcd'],
    ['(abc)+?x', 'abcabcx'],
    ['(?U)a+bcd', 'aabcd'],
    ['[^\\n]bcd', 'xbcd'],
    ['[\\d\\s]abc', ' abc'],
    ['[a-c]{2}def', 'bcdef'],
    ['[-a]bcd', '-bcd'],
    ['[]a]bcd', ']bcd'],
    ['[^]a]bcd', 'xbcd'],
    ['\\pLabc', 'xabc'],
    ['\\p{Greek}abc', 'αabc'],
    ['\\PLabc', '1abc'],
    ['\\p{Han}+語', '日本語'],
    ['a{,3}bc', 'a{,3}bc'],
    ['ab{cd', 'ab{cd'],
    ['(foo|bar|baz)+qux', 'barfooqux'],
    ['(?:abc|)def', 'def'],
    ['abc|', 'anything'],
    ['^$', 'a\n\nb'],
    ['.*', 'x'],
    ['[ab]+c[de]+', 'abbcdd'],
    ['\\w+@\\w+\\.com', 'me@example.com'],
    ['\\C\\Cabc', 'éabc'],
    ['foo\\s+bar', 'foo \t bar'],
    ['(?s)a.b', 'a\nb', { multiline: true }],
    ['abc\\ndef', 'abc\ndef', { multiline: true }],
    ['foo\\s+bar', 'foo\n bar', { multiline: true }],
    ['a\\x{0A}bcd', 'a\nbcd', { multiline: true }],
    ['ab[^x]cd', 'ab\ncd', { multiline: true }],
    ['(?i)KELVIN\\nSCALE', `${KELVIN}elvin\nſcale`, { multiline: true }],
    ['x'.repeat(200), 'y' + 'x'.repeat(250)],
  ];

  it('has at least 80 pairs', () => {
    expect(pairs.length).toBeGreaterThanOrEqual(80);
  });

  it.each(pairs)('%j in %j %j', (pattern, text, opts) => {
    expect(re2Finds(pattern, text, opts ?? {})).toBe(true); // the pair must be a real match
    expect(checkSuperset(pattern, text, opts)).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------------
// Randomised patterns from a small grammar, each with a sampler that produces a matching string.
// ---------------------------------------------------------------------------------------------

type Rng = () => number;
interface Piece {
  pattern: string;
  sample: (rng: Rng, multiline: boolean) => string;
}

const pick = <T>(rng: Rng, xs: readonly T[]): T => xs[Math.floor(rng() * xs.length)];

/** Characters the random texts and patterns are made of: case pairs, folds, multi-byte. */
const ALPHABET = ['a', 'b', 'c', 'A', 'B', 'k', 'K', KELVIN, 's', 'S', 'ſ', 'é', 'É', '日', '本', ' ', '-', '.', '0', '1', '\n'];

/** A random case variant of a string, using the fold orbits RE2 knows. */
function caseVariant(rng: Rng, s: string): string {
  const orbits: Record<string, string[]> = { k: ['k', 'K', KELVIN], s: ['s', 'S', 'ſ'] };
  let out = '';
  for (const ch of s) {
    const lower = ch.toLowerCase();
    const orbit = orbits[lower] ?? orbits[ch === KELVIN ? 'k' : ch === 'ſ' ? 's' : ''] ?? [lower, ch.toUpperCase()];
    const v = pick(rng, orbit);
    out += [...v].length === 1 ? v : ch;
  }
  return out;
}

const lit = (pattern: string, text: string): Piece => ({ pattern, sample: () => text });
const oneOf = (pattern: string, chars: string[]): Piece => ({ pattern, sample: (rng) => pick(rng, chars) });

const LEAVES: Piece[] = [
  lit('a', 'a'),
  lit('b', 'b'),
  lit('ab', 'ab'),
  lit('abc', 'abc'),
  lit('bca', 'bca'),
  lit('k', 'k'),
  lit('K', 'K'),
  lit('s', 's'),
  lit('é', 'é'),
  lit('日本', '日本'),
  lit('ſ', 'ſ'),
  lit(KELVIN, KELVIN),
  lit('\\.', '.'),
  lit('\\x61', 'a'),
  lit('\\x{65e5}', '日'),
  lit('\\Qa.b\\E', 'a.b'),
  lit('-', '-'),
  lit('^', ''),
  lit('$', ''),
  lit('\\b', ''),
  lit('\\B', ''),
  oneOf('[abc]', ['a', 'b', 'c']),
  oneOf('[a-c]', ['a', 'b', 'c']),
  oneOf('[kK]', ['k', 'K']),
  oneOf('[éè]', ['é', 'è']),
  oneOf('[^a]', ['b', 'c', 'k', 'é', '日', ' ']),
  oneOf('[^\\n]', ['a', 'b', 'é']),
  oneOf('\\d', ['0', '1']),
  oneOf('[[:digit:]]', ['0', '1']),
  oneOf('\\w', ['a', 'K', '0', '_']),
  oneOf('\\s', [' ', '\t']),
  oneOf('\\pL', ['a', 'é', '日']),
  { pattern: '.', sample: (rng, ml) => pick(rng, ml ? ['a', 'é', '\n'] : ['a', 'é', '日']) },
  { pattern: '\\n', sample: () => '\n' },
];

const leafArb = fc.constantFrom(...LEAVES);

const { piece } = fc.letrec<{ piece: Piece }>((tie) => ({
  piece: fc.oneof(
    { depthSize: 'small', maxDepth: 5 },
    leafArb,
    fc.array(tie('piece'), { minLength: 2, maxLength: 4 }).map(
      (ps): Piece => ({
        pattern: ps.map((p) => p.pattern).join(''),
        sample: (rng, ml) => ps.map((p) => p.sample(rng, ml)).join(''),
      }),
    ),
    fc.array(tie('piece'), { minLength: 2, maxLength: 3 }).map(
      (ps): Piece => ({
        pattern: '(?:' + ps.map((p) => p.pattern).join('|') + ')',
        sample: (rng, ml) => pick(rng, ps).sample(rng, ml),
      }),
    ),
    fc
      .tuple(
        tie('piece'),
        fc.constantFrom<[string, number, number]>(
          ['*', 0, 3],
          ['+', 1, 3],
          ['?', 0, 1],
          ['{2}', 2, 2],
          ['{1,3}', 1, 3],
          ['{0,2}', 0, 2],
          ['{2,}', 2, 4],
          ['*?', 0, 2],
          ['+?', 1, 2],
          ['{3}', 3, 3],
        ),
      )
      .map(
        ([p, [op, min, max]]): Piece => ({
          pattern: '(?:' + p.pattern + ')' + op,
          sample: (rng, ml) => {
            const n = min + Math.floor(rng() * (max - min + 1));
            let s = '';
            for (let i = 0; i < n; i++) s += p.sample(rng, ml);
            return s;
          },
        }),
      ),
    tie('piece').map((p): Piece => ({ pattern: '(' + p.pattern + ')', sample: p.sample })),
    tie('piece').map(
      (p): Piece => ({
        pattern: '(?i:' + p.pattern + ')',
        sample: (rng, ml) => caseVariant(rng, p.sample(rng, ml)),
      }),
    ),
  ),
}));

const noise = fc.array(fc.constantFrom(...ALPHABET), { maxLength: 6 }).map((a) => a.join(''));

describe('superset guarantee, randomised', () => {
  it('holds for generated patterns and texts that contain a sample of their language', () => {
    let matched = 0;
    let runs = 0;
    const checkedBefore = requiredChecked;
    fc.assert(
      fc.property(piece, fc.integer(), noise, noise, fc.boolean(), fc.boolean(), (p, seed, pre, post, ci, ml) => {
        runs++;
        const rng = seededRandom(seed);
        let sample = p.sample(rng, ml);
        if (ci) sample = caseVariant(rng, sample);
        const text = pre + sample + post;
        if (checkSuperset(p.pattern, text, { caseInsensitive: ci, multiline: ml })) matched++;
      }),
      { numRuns: 4000 },
    );
    // The property must not be vacuous: most generated texts do match.
    expect(matched / runs).toBeGreaterThan(0.5);
    expect(requiredChecked - checkedBefore).toBeGreaterThan(100);
  });

  it('every line a generated pattern matches holds one of its required literals', () => {
    const checkedBefore = requiredChecked;
    fc.assert(
      fc.property(piece, fc.integer(), noise, noise, (p, seed, pre, post) => {
        checkRequired(p.pattern, pre + p.sample(seededRandom(seed), false) + post, {});
      }),
      { numRuns: 4000 },
    );
    expect(requiredChecked - checkedBefore).toBeGreaterThan(200);
  });

  it('holds for token soup patterns against random texts', () => {
    const tokens = [
      '(',
      ')',
      '(?:',
      '(?i)',
      '(?i:',
      '(?-i)',
      '|',
      '*',
      '+',
      '?',
      '{2}',
      '{1,2}',
      '{',
      '}',
      '[',
      ']',
      '[^',
      '^',
      '$',
      '-',
      '\\',
      'a',
      'b',
      'k',
      's',
      'é',
      '日',
      '.',
      '\\d',
      '\\w',
      '\\s',
      '\\b',
      '\\Q',
      '\\E',
      '\\x61',
      '\\n',
      ':',
      'ab',
      'abc',
      'bca',
      '[[:alpha:]]',
      '\\pL',
      '\\x{65e5}',
      '\\u0061',
    ];
    let matched = 0;
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(...tokens), { minLength: 1, maxLength: 10 }),
        fc.array(fc.constantFrom(...ALPHABET, 'ab', 'abc', 'bca', 'ABC', KELVIN + 'ab'), { maxLength: 12 }),
        fc.boolean(),
        fc.boolean(),
        (toks, words, ci, ml) => {
          if (checkSuperset(toks.join(''), words.join(''), { caseInsensitive: ci, multiline: ml })) matched++;
        },
      ),
      { numRuns: 4000 },
    );
    expect(matched).toBeGreaterThan(100);
  });
});
