/**
 * The tree → a trigram query whose answer is a SUPERSET of the files in which the pattern can
 * match; RE2 then decides on the candidates. This is the algorithm of Russ Cox, "Regular
 * Expression Matching with a Trigram Index", as implemented in google/codesearch
 * `index/regexp.go`, with its known soundness gaps closed (see "Differences" below).
 *
 * The shard indexes, for every file, the set of byte trigrams of its UTF-8 text, leaving out
 * every trigram that contains the byte 0x0A (newline).
 *
 * Every node of the lowered tree (lowered.ts) is summarised bottom-up as an Info:
 *   canEmpty  the node may match the empty string;
 *   exact     a set of byte strings containing every string the node matches, or null;
 *   prefix    (when exact is null) every non-empty match starts with one of these;
 *   suffix    (when exact is null) every non-empty match ends with one of these;
 *   match     a query every text containing a match satisfies.
 * Concatenation crosses sets, alternation unions them; when a set grows past its limit it is
 * "flushed": the OR over its strings of the AND of their trigrams is ANDed into `match`, and
 * the set is cut down to 2-byte prefixes / suffixes (codesearch's simplify).
 *
 * Newlines: a trigram containing 0x0A is never required; a string whose every trigram touches a
 * newline contributes no constraint. Because the query never relies on a newline being absent,
 * one query is right both for line-by-line matching and for `multiline`.
 *
 * Case folding: under `-i` or `(?i)` each literal character (and each member of a small class)
 * is its case-folding orbit (fold.ts), so the alternatives cover every case variant RE2
 * accepts; the expansion is bounded by MAX_EXACT like any other set. Under `-i` the index's
 * folded quadgrams of the required literals (required.ts) are ANDed in as well.
 *
 * Differences from codesearch (each one a case where codesearch can return a narrower query):
 * prefix/suffix sets cover only non-empty matches and concatenation adds the other side's sets
 * when a side can be empty (codesearch drops them for exact neighbours, e.g. `(abcd+)?xyz`);
 * the suffix×prefix trigram is only required when neither side can be empty (`(a+b)?c+`);
 * repetitions `x*` and `x{n,m}` keep the prefix/suffix information of x.
 *
 * Limits (all fall back to something weaker, never narrower): more than the Budget's units of
 * work give `all`. Exact sets hold at most MAX_EXACT strings, prefix and suffix sets MAX_SET
 * strings, `x{n,m}` is unrolled at most REPEAT_UNROLL times, an AND keeps at most
 * MAX_AND_TRIGRAMS trigrams (query.ts), and the suffix×prefix cross product is skipped above
 * MAX_CROSS strings.
 */

import { foldQuad, QUAD_KEY_BASE } from '../trigram-extract.js';
import { utf8 } from './bytes.js';
import { foldsWithinAscii } from './fold.js';
import type { Lowered } from './lowered.js';
import { ALL, mk, NONE, type Query, type QueryAlgebra, type Trigram } from './query.js';

const NEWLINE = 0x0a;
import { clean, cross, minLen, nonEmpty } from './string-sets.js';

/** Exact sets larger than this are flushed to prefix/suffix (codesearch: 7, so 3 folded letters flush). */
const MAX_EXACT = 7;
/** Prefix/suffix sets larger than this are shortened (codesearch: 20, holds 2^3 folded variants and more). */
const MAX_SET = 20;
/** The suffix×prefix cross product of a concatenation is skipped above this many strings. */
const MAX_CROSS = 100;
/** `x{n,m}` is analysed as at most this many copies of x. */
const REPEAT_UNROLL = 3;

/** The trigram query of a lowered tree: a superset of the files it can match in. */
export function trigramQuery(alg: QueryAlgebra, tree: Lowered): Query {
  const info = simplify(alg, analyze(alg, tree), true);
  if (info.canEmpty) return ALL;
  return info.exact !== null ? alg.andTrigrams(info.match, [...info.exact]) : info.match;
}

interface Info {
  /** The node may match the empty string. */
  readonly canEmpty: boolean;
  /** Every match is one of these strings; null when not tracked. */
  readonly exact: readonly string[] | null;
  /** When exact is null: every non-empty match starts with one of these. */
  readonly prefix: readonly string[];
  /** When exact is null: every non-empty match ends with one of these. */
  readonly suffix: readonly string[];
  /** Satisfied by every text that contains a match. */
  readonly match: Query;
}

const EMPTY_STRING: Info = { canEmpty: true, exact: [''], prefix: [], suffix: [], match: ALL };
const NO_MATCH: Info = { canEmpty: false, exact: [], prefix: [], suffix: [], match: NONE };
const ANY_CHAR: Info = { canEmpty: false, exact: null, prefix: [''], suffix: [''], match: ALL };

/** Prefixes covering every non-empty match. */
function pre(x: Info): string[] {
  return x.exact !== null ? nonEmpty([...x.exact]) : [...x.prefix];
}

/** Suffixes covering every non-empty match. */
function suf(x: Info): string[] {
  return x.exact !== null ? nonEmpty([...x.exact]) : [...x.suffix];
}

/** Prefixes covering every match, the empty one included. */
function preE(x: Info): string[] {
  return x.canEmpty ? [...pre(x), ''] : pre(x);
}

function sufE(x: Info): string[] {
  return x.canEmpty ? [...suf(x), ''] : suf(x);
}

function exactInfo(alg: QueryAlgebra, strings: string[]): Info {
  const exact = clean(alg.budget, strings);
  return simplify(alg, { canEmpty: exact.includes(''), exact, prefix: [], suffix: [], match: ALL }, false);
}

/** The same language described without an exact set, its trigrams moved into match. */
function withoutExact(alg: QueryAlgebra, x: Info): Info {
  if (x.exact === null) return x;
  const strings = nonEmpty([...x.exact]);
  return {
    canEmpty: x.canEmpty,
    exact: null,
    prefix: strings,
    suffix: strings,
    match: x.canEmpty ? x.match : alg.andTrigrams(x.match, strings),
  };
}

function concat(alg: QueryAlgebra, x: Info, y: Info): Info {
  alg.budget.spend(1);
  let match = alg.and(x.match, y.match);
  if (x.exact !== null && y.exact !== null) {
    return simplify(
      alg,
      {
        canEmpty: x.canEmpty && y.canEmpty,
        exact: cross(alg.budget, [...x.exact], [...y.exact]),
        prefix: [],
        suffix: [],
        match,
      },
      false,
    );
  }
  // A non-empty match uv starts inside u unless u is empty, and ends inside v unless v is empty.
  let prefix = x.exact !== null ? cross(alg.budget, nonEmpty([...x.exact]), preE(y)) : [...x.prefix];
  if (x.canEmpty) prefix = clean(alg.budget, [...prefix, ...pre(y)]);
  let suffix = y.exact !== null ? cross(alg.budget, sufE(x), nonEmpty([...y.exact])) : [...y.suffix];
  if (y.canEmpty) suffix = clean(alg.budget, [...suffix, ...suf(x)]);

  // When both sides are non-empty, the match contains (some suffix of x)(some prefix of y).
  if (
    x.exact === null &&
    y.exact === null &&
    !x.canEmpty &&
    !y.canEmpty &&
    x.suffix.length * y.prefix.length <= MAX_CROSS &&
    minLen([...x.suffix]) + minLen([...y.prefix]) >= 3
  ) {
    match = alg.andTrigrams(match, cross(alg.budget, [...x.suffix], [...y.prefix]));
  }
  return simplify(alg, { canEmpty: x.canEmpty && y.canEmpty, exact: null, prefix, suffix, match }, false);
}

function alternate(alg: QueryAlgebra, x: Info, y: Info): Info {
  alg.budget.spend(1);
  if (x.exact !== null && y.exact !== null) {
    return simplify(
      alg,
      {
        canEmpty: x.canEmpty || y.canEmpty,
        exact: clean(alg.budget, [...x.exact, ...y.exact]),
        prefix: [],
        suffix: [],
        match: alg.or(x.match, y.match),
      },
      false,
    );
  }
  // Move an exact side's trigrams into its match first, or the OR below would lose them.
  const a = withoutExact(alg, x);
  const b = withoutExact(alg, y);
  return simplify(
    alg,
    {
      canEmpty: a.canEmpty || b.canEmpty,
      exact: null,
      prefix: clean(alg.budget, [...a.prefix, ...b.prefix]),
      suffix: clean(alg.budget, [...a.suffix, ...b.suffix]),
      match: alg.or(a.match, b.match),
    },
    false,
  );
}

/** x+ given x: at least one copy, so prefixes, suffixes and match stay valid. */
function plus(alg: QueryAlgebra, x: Info): Info {
  if (x.exact === null) return x;
  const strings = nonEmpty([...x.exact]);
  return simplify(alg, { canEmpty: x.canEmpty, exact: null, prefix: strings, suffix: strings, match: x.match }, false);
}

/** x{min,max} (max -1: unbounded) given the Info of x. */
function repeat(alg: QueryAlgebra, x: Info, min: number, max: number): Info {
  if (max === 0) return EMPTY_STRING;
  if (min === 0) return alternate(alg, repeat(alg, x, 1, max), EMPTY_STRING);
  // Every match is x^k for some k >= min; it starts and ends with x^unroll and contains it.
  const unroll = Math.min(min, REPEAT_UNROLL);
  let y = x;
  for (let i = 1; i < unroll; i++) y = concat(alg, y, x);
  if (min === max && min === unroll) return y;
  return plus(alg, y);
}

/** Flushes oversized sets into match, as codesearch's simplify/simplifySet. */
function simplify(alg: QueryAlgebra, info: Info, force: boolean): Info {
  let exact = info.exact;
  let match = info.match;
  let prefix = [...info.prefix];
  let suffix = [...info.suffix];
  if (exact !== null) {
    const n = minLen([...exact]);
    if (exact.length > MAX_EXACT || (force && n >= 3) || n >= 4) {
      match = alg.andTrigrams(match, [...exact]);
      prefix = [];
      suffix = [];
      for (const s of exact) {
        if (s === '') continue;
        prefix.push(s.length < 3 ? s : s.slice(0, 2));
        suffix.push(s.length < 3 ? s : s.slice(s.length - 2));
      }
      exact = null;
    }
  }
  if (exact === null) {
    // The trigram OR over a prefix set only holds for non-empty matches.
    if (!info.canEmpty) match = alg.andTrigrams(alg.andTrigrams(match, prefix), suffix);
    prefix = shorten(alg, prefix, false);
    suffix = shorten(alg, suffix, true);
  }
  return { canEmpty: info.canEmpty, exact, prefix: exact ? [] : prefix, suffix: exact ? [] : suffix, match };
}

/** Cuts a prefix (or suffix) set to strings of at most 2 bytes, shorter while it has too many. */
function shorten(alg: QueryAlgebra, set: string[], isSuffix: boolean): string[] {
  let t = clean(alg.budget, set);
  for (let n = 3; n === 3 || t.length > MAX_SET; n--) {
    t = clean(
      alg.budget,
      t.map((s) => (s.length < n ? s : isSuffix ? s.slice(s.length - n + 1) : s.slice(0, n - 1))),
    );
  }
  // "ab" covers every string that "abc" covers: keep only the shortest cover.
  return t.filter((s) => !t.some((o) => o.length < s.length && (isSuffix ? s.endsWith(o) : s.startsWith(o))));
}

function analyze(alg: QueryAlgebra, node: Lowered): Info {
  alg.budget.spend(1);
  switch (node.k) {
    case 'empty':
      return EMPTY_STRING;
    case 'none':
      return NO_MATCH;
    case 'any':
      return ANY_CHAR;
    case 'lit': {
      let s = '';
      for (const cp of node.cps) s += utf8(cp);
      return exactInfo(alg, [s]);
    }
    case 'set':
      return exactInfo(alg, node.cps.map(utf8));
    case 'cat': {
      let info = EMPTY_STRING;
      for (const sub of node.subs) info = concat(alg, info, analyze(alg, sub));
      return info;
    }
    case 'alt': {
      let info = NO_MATCH;
      for (const sub of node.subs) info = alternate(alg, info, analyze(alg, sub));
      return info;
    }
    case 'rep':
      return repeat(alg, analyze(alg, node.sub), node.min, node.max);
  }
}

// ---------------------------------------------------------------------------------------------
// Required literals

/**
 * Under `-i`: the folded quadgrams (trigram-extract.ts) of the literals every match requires,
 * or `all`, from `set`, the strings `requiredStrings` (required.ts) finds in the tree read without folding: a
 * case-insensitive match holds a case variant of one of them. A quadgram is
 * used only when each of its characters has case variants in ASCII alone, so that every
 * variant folds to the same key: a text may spell `k` as U+212A KELVIN SIGN and `s` as U+017F
 * LONG S, which RE2 matches.
 */
export function foldedRequiredQuads(alg: QueryAlgebra, set: readonly string[]): Query {
  let q: Query = NONE;
  for (const s of set) {
    const quads = new Set<Trigram>();
    let run = 0; // characters before i that fold within ASCII, up to 3
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c === NEWLINE || !foldsWithinAscii(c)) {
        run = 0;
        continue;
      }
      if (run < 3) {
        run++;
        continue;
      }
      const quad = ((s.charCodeAt(i - 3) << 24) | (s.charCodeAt(i - 2) << 16) | (s.charCodeAt(i - 1) << 8) | c) >>> 0;
      quads.add(QUAD_KEY_BASE + foldQuad(quad));
    }
    if (quads.size === 0) return ALL; // this string, hence the set, constrains nothing
    q = alg.or(
      q,
      mk(
        'and',
        [...quads].sort((a, b) => a - b),
        [],
      ),
    );
  }
  return q;
}
