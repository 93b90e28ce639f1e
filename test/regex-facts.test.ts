// The facts of a pattern, read once from its tree (engine/regex/pattern.ts): a table from pattern
// to query, required literals, can-match-newline and the line rule's rewrite (as codesearch's
// regexp_test.go tables patterns to queries), the patterns the line rule refuses, and property
// tests that the printed tree means what the pattern means.
import fc from 'fast-check';
import RE2 from 're2';
import { describe, expect, it } from 'vitest';
import { VfsError } from '../core/errors.js';
import { analyzePattern, type CompiledPattern, compilePattern, patternQuery, type PatternOptions } from '../engine/regex/pattern.js';
import { printRegex } from '../engine/regex/print.js';
import { formatQuery } from '../engine/regex/query.js';
import { parseRegex } from '../engine/regex/syntax.js';

interface Facts {
  query: string;
  required: string[] | null;
  canMatchNewline: boolean;
  /** What RE2 compiles: the pattern itself when the line rule changed nothing. */
  re2: string;
  literalAlternatives?: string[] | null;
  literalPrefix?: string;
  caseInsensitive?: boolean;
}

const TABLE: [string, PatternOptions, Facts][] = [
  // literals: the query, the strings, the alternatives and the prefix
  [
    'foo|bar\\(',
    {},
    {
      query: '("foo"|"ar(" "bar")',
      required: ['bar(', 'foo'],
      canMatchNewline: false,
      re2: 'foo|bar\\(',
      literalAlternatives: ['foo', 'bar('],
      literalPrefix: '',
    },
  ],
  ['(foo|bar)', {}, { query: '("bar"|"foo")', required: ['bar', 'foo'], canMatchNewline: false, re2: '(foo|bar)', literalAlternatives: ['foo', 'bar'] }],
  [
    '\\x41bc|\\Qa.b\\E',
    {},
    { query: '("Abc"|"a.b")', required: ['Abc', 'a.b'], canMatchNewline: false, re2: '\\x41bc|\\Qa.b\\E', literalAlternatives: ['Abc', 'a.b'] },
  ],
  // An alternative that may be empty matches every line: the pattern is cut to nothing (edge-trim.ts).
  ['a|', {}, { query: '+', required: null, canMatchNewline: false, re2: '(?:)', literalAlternatives: null }],
  ['(abc)d+', {}, { query: '"abc" "bcd"', required: ['abc'], canMatchNewline: false, re2: 'abcd', literalAlternatives: null, literalPrefix: 'abc' }],
  [
    'EXPORT_SYMBOL\\(\\w+\\)',
    {},
    {
      query: '"BOL" "EXP" "MBO" "OL(" "ORT" "POR" "RT_" "SYM" "T_S" "XPO" "YMB" "_SY"',
      required: ['EXPORT_SYMBOL('],
      canMatchNewline: false,
      re2: 'EXPORT_SYMBOL\\(\\w+\\)',
      literalPrefix: 'EXPORT_SYMBOL(',
    },
  ],
  [
    'static int \\w+_probe\\(struct',
    {},
    {
      query: '" in" "(st" "_pr" "ati" "be(" "c i" "e(s" "ic " "int" "nt " "obe" "pro" "rob" "ruc" "sta" "str" "tat" "tic" "tru" "uct"',
      required: ['_probe(struct'],
      canMatchNewline: false,
      re2: 'static int \\w+_probe\\(struct',
      literalPrefix: 'static int ',
    },
  ],
  ['^foo', {}, { query: '"foo"', required: ['foo'], canMatchNewline: false, re2: '^foo', literalAlternatives: null, literalPrefix: '' }],
  // the line rule: \n leaves every class, and the rewrite is what RE2 runs
  ['[^a-z]', {}, { query: '+', required: null, canMatchNewline: false, re2: '[^\\na-z]' }],
  ['[^ -~\\t]', {}, { query: '+', required: null, canMatchNewline: false, re2: '[^\\t-\\n -\\~]' }],
  ['"[^"]*"', {}, { query: '+', required: null, canMatchNewline: false, re2: '\\"[^\\n\\"]*\\"', literalPrefix: '"' }],
  ['\\([^)]*\\)', {}, { query: '+', required: null, canMatchNewline: false, re2: '\\([^\\n\\)]*\\)' }],
  // Repetitions at the pattern's edges keep their fewest repeats: the same lines match (edge-trim.ts).
  ['\\s+', {}, { query: '+', required: null, canMatchNewline: false, re2: '[^\\n\\S]' }],
  ['\\S+\\s+\\S+', {}, { query: '+', required: null, canMatchNewline: false, re2: '[\\S][^\\n\\S]+[\\S]' }],
  ['\\w{20,}', {}, { query: '+', required: null, canMatchNewline: false, re2: '[\\w]{20}' }],
  // A repetition of two or more: its fewest repeats, and the repeat at each edge cut as any node.
  ['(\\w+,\\s*){6}', {}, { query: '+', required: null, canMatchNewline: false, re2: '[\\w]\\,[^\\n\\S]*(?:(?:[\\w]+\\,[^\\n\\S]*)){4}[\\w]+\\,' }],
  ['(\\s*x){3,}', {}, { query: '+', required: null, canMatchNewline: false, re2: 'x(?:(?:[^\\n\\S]*x)){2}' }],
  ['\\s*foo+', {}, { query: '"foo"', required: null, canMatchNewline: false, re2: 'foo', literalAlternatives: ['foo'] }],
  ['(a+|b)c*', {}, { query: '+', required: null, canMatchNewline: false, re2: 'a|b' }],
  // … but a branch left one character wide (not ASCII) keeps it: RE2 would join the branches into one class.
  [
    '(?:[^\\x{7ff}]+|\\W)',
    { caseInsensitive: true },
    { query: '+', required: null, canMatchNewline: false, re2: '[^\\n\\x{7ff}]+|[^\\n\\w]', caseInsensitive: true },
  ],
  ['^\\s*$', {}, { query: '+', required: null, canMatchNewline: false, re2: '^[^\\n\\S]*$' }],
  ['\\b\\w+\\b', {}, { query: '+', required: null, canMatchNewline: false, re2: '\\b\\w+\\b' }],
  ['(?s).', {}, { query: '+', required: null, canMatchNewline: false, re2: '.' }],
  ['[\\s\\S]', {}, { query: '+', required: null, canMatchNewline: false, re2: '[\\S]|[^\\n\\S]' }],
  ['\\D', {}, { query: '+', required: null, canMatchNewline: false, re2: '[^\\n\\d]' }],
  ['\\W', { caseInsensitive: true }, { query: '+', required: null, canMatchNewline: false, re2: '[^\\n\\w]', caseInsensitive: true }],
  ['\\P{L}', {}, { query: '+', required: null, canMatchNewline: false, re2: '[^\\n\\p{L}]' }],
  ['\\pC', {}, { query: '+', required: null, canMatchNewline: false, re2: '[^\\n\\P{C}]' }],
  ['[\\pL\\pC_]', {}, { query: '+', required: null, canMatchNewline: false, re2: '[_\\p{L}]|[^\\n\\P{C}]' }],
  ['[[:cntrl:]]', {}, { query: '+', required: null, canMatchNewline: false, re2: '[^\\n[:^cntrl:]]' }],
  ['[\\n\\r]x', {}, { query: '+', required: null, canMatchNewline: false, re2: '[\\r]x' }],
  ['a\\s+b\\.c', {}, { query: '"b.c"', required: ['b.c'], canMatchNewline: false, re2: 'a[^\\n\\S]+b\\.c' }],
  // the text's edges are the line's
  ['\\Aint', {}, { query: '"int"', required: ['int'], canMatchNewline: false, re2: '^int', literalPrefix: '' }],
  ['foo\\z', {}, { query: '"foo"', required: ['foo'], canMatchNewline: false, re2: 'foo$', literalPrefix: 'foo' }],
  ['(?-m)^a$', {}, { query: '+', required: null, canMatchNewline: false, re2: '^a$' }],
  // case: a pattern that folds throughout is searched as -i
  [
    '(?i)Hello',
    {},
    {
      query:
        '("HEL"|"HEl"|"HeL"|"Hel"|"hEL"|"hEl"|"heL"|"hel") ("ELL"|"ELl"|"ElL"|"Ell"|"eLL"|"eLl"|"elL"|"ell") ("LLO"|"LLo"|"LlO"|"Llo"|"lLO"|"lLo"|"llO"|"llo")',
      required: null,
      canMatchNewline: false,
      re2: '(?i)Hello',
      caseInsensitive: true,
    },
  ],
  [
    '(?i)abc(?-i)DEF',
    {},
    {
      query: '"DEF" ("BCD" "CDE"|"BcD" "cDE"|"CDE" "bCD"|"bcD" "cDE") ("ABC"|"ABc"|"AbC"|"Abc"|"aBC"|"aBc"|"abC"|"abc")',
      required: ['DEF'],
      canMatchNewline: false,
      re2: '(?i)abc(?-i)DEF',
      caseInsensitive: true,
    },
  ],
  [
    '(?i:ab)cd',
    {},
    { query: '("ABc" "Bcd"|"Abc" "bcd"|"Bcd" "aBc"|"abc" "bcd")', required: null, canMatchNewline: false, re2: '(?i:ab)cd', caseInsensitive: false },
  ],
  [
    '\\w+_probe\\(',
    { caseInsensitive: true },
    {
      query:
        '("_PR"|"_Pr"|"_pR"|"_pr") ("PRO"|"PRo"|"PrO"|"Pro"|"pRO"|"pRo"|"prO"|"pro") ("ROB"|"ROb"|"RoB"|"Rob"|"rOB"|"rOb"|"roB"|"rob") ("OBE"|"OBe"|"ObE"|"Obe"|"oBE"|"oBe"|"obE"|"obe") ("BE("|"Be("|"bE("|"be(")',
      required: ['_probe('],
      canMatchNewline: false,
      re2: '[\\w]_probe\\(',
      literalAlternatives: null,
      caseInsensitive: true,
    },
  ],
  ['[^a-z]', { caseInsensitive: true }, { query: '+', required: null, canMatchNewline: false, re2: '[^\\na-z]' }],
  // what still meets a newline: \C, and anything in multiline mode
  ['a\\Cb', {}, { query: '+', required: null, canMatchNewline: true, re2: 'a\\Cb' }],
  ['[^a-z]', { multiline: true }, { query: '+', required: null, canMatchNewline: true, re2: '[^a-z]' }],
  ['(?s)a.b', { multiline: true }, { query: '+', required: null, canMatchNewline: true, re2: '(?s)a.b' }],
  ['foo\\nbar', { multiline: true }, { query: '"bar" "foo"', required: ['foo'], canMatchNewline: true, re2: 'foo\\nbar', literalAlternatives: null }],
];

describe('pattern facts table', () => {
  it.each(TABLE)('%j %j', (pattern, options, want) => {
    const facts = analyzePattern(pattern, options);
    const got: Facts = {
      query: formatQuery(patternQuery(facts)),
      required: facts.required,
      canMatchNewline: facts.canMatchNewline,
      re2: facts.re2Source,
    };
    if (want.literalAlternatives !== undefined) got.literalAlternatives = facts.literalAlternatives?.map((b) => b.toString()) ?? null;
    if (want.literalPrefix !== undefined) got.literalPrefix = facts.literalPrefix;
    if (want.caseInsensitive !== undefined) got.caseInsensitive = facts.caseInsensitive;
    expect(got).toEqual(want);
    // RE2 compiles every rewrite.
    expect(() => compilePattern(pattern, options)).not.toThrow();
  });
});

describe('the line rule refuses what names the line break', () => {
  const refused = [
    '\\n',
    '[\\n]',
    'a\\nb',
    '[\\n]|b',
    'b|\\n',
    '\\x0a',
    '\\x{a}',
    '\\012',
    '\\n?',
    '(\\n)?a',
    '(?i)\\n',
    '(?s)\\n',
    '[\\x0a]',
    '[\\n\\n]',
    '[\\n-\\n]',
    '[^\\x00-\\x09\\x0b-\\x{10ffff}]',
    'foo\nbar',
  ];
  it.each(refused)('%j', (pattern) => {
    for (const caseInsensitive of [false, true]) {
      let error: unknown;
      try {
        compilePattern(pattern, { caseInsensitive });
      } catch (e) {
        error = e;
      }
      expect(error).toBeInstanceOf(VfsError);
      expect((error as VfsError).code).toBe('INVALID_PARAMETER');
      expect((error as VfsError).message).toMatch(/^invalid pattern: .*multiline=true/);
      expect(() => compilePattern(pattern, { caseInsensitive, multiline: true })).not.toThrow();
    }
  });

  it('still answers RE2 syntax errors with RE2 message, whatever the line rule', () => {
    expect(() => compilePattern('a(\\n')).toThrow(/^invalid pattern: missing \)/);
  });
});

// Patterns from pieces that exercise every node the printer writes: classes with groups,
// negations and folding, flags turned on and off, assertions, laziness, repetitions.
const PIECES = [
  'a',
  'B',
  'k',
  'é',
  '日',
  '\\.',
  '\\x{212a}',
  '.',
  '\\s',
  '\\S',
  '\\d',
  '\\D',
  '\\w',
  '\\W',
  '\\b',
  '\\B',
  '^',
  '$',
  '\\A',
  '\\z',
  '[a-c]',
  '[^a-c]',
  '[\\s\\d]',
  '[^\\W_]',
  '[[:alpha:]]',
  '[[:^space:]]',
  '\\pL',
  '\\PL',
  '[\\pN-]',
  '\\p{Greek}',
  '(?i)',
  '(?-i)',
  '(?s)',
  '(?U)',
  '(?-m)',
  '\\n',
  '[\\t-\\r]',
  '\\Q*+\\E',
];
const QUANTIFIERS = ['', '', '*', '+', '?', '{2}', '{1,3}', '*?', '+?'];

const patternArb = fc
  .array(fc.tuple(fc.constantFrom(...PIECES), fc.constantFrom(...QUANTIFIERS), fc.integer({ min: 0, max: 5 })), { minLength: 1, maxLength: 6 })
  .map((parts) => {
    let out = '';
    for (const [piece, q, shape] of parts) {
      const quantifiable = !piece.startsWith('(?') && !['^', '$', '\\A', '\\z', '\\b', '\\B'].includes(piece);
      const atom = shape === 1 ? `(${piece})` : shape === 2 ? `(?:${piece}|x)` : piece;
      out += atom + (quantifiable || shape > 0 ? q : '');
    }
    return out;
  })
  .filter((p) => {
    try {
      new RE2(p, 'm');
      return true;
    } catch {
      return false;
    }
  });

const textArb = fc
  .array(fc.constantFrom('a', 'B', 'b', 'c', 'K', 'k', '\u212a', 'é', 'É', '日', 'α', 'Ω', ' ', '\t', '\n', '\r', '.', '_', '1', '-', '*', '+', 'x'), {
    maxLength: 40,
  })
  .map((t) => t.join(''));

describe('the printer', () => {
  it('writes a tree RE2 reads as the pattern itself (every match, same place and length)', () => {
    fc.assert(
      fc.property(patternArb, textArb, fc.boolean(), fc.boolean(), (pattern, text, caseInsensitive, multiline) => {
        const flags = 'gm' + (caseInsensitive ? 'i' : '') + (multiline ? 's' : '');
        const printed = printRegex(parseRegex(pattern), { caseInsensitive, dotMatchesNewline: multiline });
        const matches = (source: string) =>
          [
            ...Buffer.from(text)
              .toString()
              .matchAll(new RE2(source, flags) as unknown as RegExp),
          ].map((m) => [m.index, m[0]]);
        expect(matches(printed)).toEqual(matches(pattern));
      }),
      { numRuns: 3000 },
    );
  });

  it('with the line rule, finds exactly the lines RE2 finds in each line alone', () => {
    fc.assert(
      fc.property(patternArb, textArb, fc.boolean(), (pattern, text, caseInsensitive) => {
        let compiled: CompiledPattern;
        try {
          compiled = compilePattern(pattern, { caseInsensitive });
        } catch {
          return; // names the line break: refused (the table above)
        }
        expect(compiled.facts.canMatchNewline).toBe(false);
        const lines = text.split('\n');
        const perLine = new RE2(pattern, caseInsensitive ? 'mi' : 'm');
        const hit = (re: RE2, line: string) => {
          re.lastIndex = 0;
          return re.test(line);
        };
        // Every match of the rewrite lies inside one line, and a line holds one exactly when the
        // pattern matches the line alone.
        const whole = new RE2(compiled.facts.re2Source, compiled.facts.re2Flags.replace('g', ''));
        for (const m of text.matchAll(new RE2(compiled.facts.re2Source, compiled.facts.re2Flags) as unknown as RegExp)) expect(m[0]).not.toContain('\n');
        expect(lines.map((l) => hit(whole, l))).toEqual(lines.map((l) => hit(perLine, l)));
      }),
      { numRuns: 3000 },
    );
  });
});
