/**
 * Regular expression → trigram query, and the literals every match requires.
 *
 * The shard indexes, for every file, the set of byte trigrams of its UTF-8 text, leaving out
 * every trigram that contains the byte 0x0A (newline). `regexQuery` turns an RE2 pattern into a
 * boolean query over those trigrams whose answer is a SUPERSET of the files the regex can
 * match; RE2 then decides on the candidates. This is the algorithm of Russ Cox, "Regular
 * Expression Matching with a Trigram Index", as implemented in google/codesearch
 * `index/regexp.go`, with its known soundness gaps closed (see "Differences" below).
 *
 * Pipeline
 *   1. The pattern is rewritten exactly as node-re2 1.22.3 rewrites a string pattern before
 *      RE2 sees it (`\uXXXX`, `\u{…}`, `\cX`, `\p{Long_Name}`, `/` → `\/`, `(?<name>`), so the
 *      parser reads the same text RE2 compiles.
 *   2. Our own RE2-syntax parser builds a small tree: literal runs, one-character sets (a class
 *      or a case-folded letter, at most MAX_CLASS code points), "any character", "no match",
 *      concatenation, alternation and repetition. Empty-width assertions (`^ $ \A \z \b \B`)
 *      become the empty string; `(?i)` is applied while parsing; `(?m) (?s) (?U)` and laziness
 *      do not change which texts contain a match, so they are parsed and ignored.
 *   3. Every node is summarised bottom-up as an Info:
 *        canEmpty  the node may match the empty string;
 *        exact     a set of byte strings containing every string the node matches, or null;
 *        prefix    (when exact is null) every non-empty match starts with one of these;
 *        suffix    (when exact is null) every non-empty match ends with one of these;
 *        match     a query every text containing a match satisfies.
 *      Strings are "byte strings": JS strings whose code units are the UTF-8 bytes (0–255).
 *      Concatenation crosses sets, alternation unions them; when a set grows past its limit it
 *      is "flushed": the OR over its strings of the AND of their trigrams is ANDed into
 *      `match`, and the set is cut down to 2-byte prefixes / suffixes (codesearch's simplify).
 *   4. The query algebra (`and`/`or`) flattens, drops duplicates, applies the all/none
 *      identities, absorbs (q ⇒ r: q∧r = q, q∨r = r) and factors out trigrams and sub-queries
 *      shared by both sides, like codesearch's `andOr`. Returned queries share structure (and
 *      `all`/`none` are frozen singletons): treat them as read-only.
 *   5. `requiredLiterals` asks the same tree another question: a few strings of which every
 *      match contains one (a concatenation's best literal run, an alternation's union of its
 *      branches'), which LineMatcher finds with indexOf before it runs RE2 on the lines around them.
 *
 * Newlines: a trigram containing 0x0A is never required; a string whose every trigram touches a
 * newline contributes no constraint. Because the query never relies on a newline being absent,
 * one query is right both for line-by-line matching and for `multiline` (where `.`, `\s` or
 * `\n` may match a newline and a match may span lines); the option is accepted and changes
 * nothing.
 *
 * Case folding: `caseInsensitive` or `(?i)` expands each literal character (and each member of a
 * small class) to its simple case-folding orbit: the toLowerCase/toUpperCase closure, overridden
 * by FOLD_EXCEPTIONS for the orbits that closure cannot reach (k/K/U+212A, s/S/ſ, σ/ς/Σ, ...).
 * Every orbit in RE2 1.22.3's fold table is contained in ours, so the alternatives cover every
 * case variant RE2 accepts; the expansion is bounded by MAX_EXACT like any other set. A negated
 * class under folding is "any character" (folding a complement exactly would need RE2's tables).
 *
 * Differences from codesearch (each one a case where codesearch can return a narrower query):
 * prefix/suffix sets cover only non-empty matches and concatenation adds the other side's sets
 * when a side can be empty (codesearch drops them for exact neighbours, e.g. `(abcd+)?xyz`);
 * the suffix×prefix trigram is only required when neither side can be empty (`(a+b)?c+`);
 * repetitions `x*` and `x{n,m}` keep the prefix/suffix information of x.
 *
 * Limits (all fall back to something weaker, never narrower): patterns longer than
 * MAX_PATTERN_LENGTH, nesting deeper than MAX_NESTING, any parse problem, or more than
 * WORK_BUDGET units of work return `all`. Exact sets hold at most MAX_EXACT strings, prefix and
 * suffix sets MAX_SET strings, classes are expanded up to MAX_CLASS code points (bigger ones are
 * "any character"), `x{n,m}` is unrolled at most REPEAT_UNROLL times, an AND keeps at most
 * MAX_AND_TRIGRAMS trigrams and MAX_AND_SUBS sub-queries (dropping a conjunct only widens the
 * answer), and the suffix×prefix cross product is skipped above MAX_CROSS strings.
 * Unicode classes (`\pL`, `\p{Greek}`, `\PL`) and `\C` are "any character": no tables needed.
 *
 * Query format (formatQuery), modelled on codesearch's Query.String:
 *   `+` all, `-` none, `"abc"` one trigram (`"abcd"` one quadgram);
 *   AND: its operands separated by one space, e.g. `"abc" "bcd"`;
 *   OR: its operands separated by `|` inside parentheses, e.g. `("abc"|"xyz")`;
 *   an AND inside an OR is written without parentheses (AND binds tighter, as concatenation
 *   does in a regex): `("abc" "bcd"|"xyz")`. Trigrams come first, in ascending numeric (= byte)
 *   order, then sub-queries in the order they were built. Inside quotes printable ASCII is
 *   itself (`"` and `\` escaped), a complete UTF-8 letter, digit, punctuation or symbol inside
 *   the trigram is printed as that character, and every other byte as `\xhh` (lower-case hex),
 *   e.g. `"a\xc3"`, `"\x09ab"` or `"日"`. An AND nested directly in an AND (never produced)
 *   would be parenthesised.
 */

import { foldQuad, QUAD_KEY_BASE } from './trigram-extract.js';

/**
 * A trigram is the 24-bit number (b0 << 16) | (b1 << 8) | b2 of three UTF-8 bytes; with the
 * `quadgrams` option, a quadgram QUAD_KEY_BASE + ((b0 << 24) | … | b3) stands beside them.
 */
export type Trigram = number;

/** A boolean query over trigram presence; `and`/`or` combine their trigrams and sub-queries. */
export type Query =
  | { op: 'all' } // matches every file (no usable trigram)
  | { op: 'none' } // matches no file
  | { op: 'and' | 'or'; trigrams: Trigram[]; sub: Query[] }; // AND/OR of trigram presence and sub-queries

/** Options for `regexQuery`; `undefined` means the default. */
export interface RegexQueryOptions {
  /** `-i`: case-insensitive; trigram alternatives must cover case variants (ASCII and Unicode simple case folding of the pattern's literals). */
  caseInsensitive?: boolean;
  /** ripgrep -U --multiline-dotall: `.` matches newline and a match may span lines. Default false. */
  multiline?: boolean;
  /**
   * Also require the quadgrams of each string whose trigrams are required, as keys
   * QUAD_KEY_BASE + the four bytes (trigram-extract.ts), for an index that lists them.
   * Default false: the query names trigrams only.
   */
  quadgrams?: boolean;
}

// ---------------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------------

/** Longer patterns (UTF-16 code units) are not analysed. */
const MAX_PATTERN_LENGTH = 65_536;
/** Deeper group nesting is not analysed. */
const MAX_NESTING = 1000;
/** Exact sets larger than this are flushed to prefix/suffix (codesearch: 7, so 3 folded letters flush). */
const MAX_EXACT = 7;
/** Prefix/suffix sets larger than this are shortened (codesearch: 20, holds 2^3 folded variants and more). */
const MAX_SET = 20;
/** Classes with more code points are "any character" (a bigger set would be cut to "" anyway). */
const MAX_CLASS = MAX_SET;
/** The suffix×prefix cross product of a concatenation is skipped above this many strings. */
const MAX_CROSS = 100;
/** `x{n,m}` is analysed as at most this many copies of x. */
const REPEAT_UNROLL = 3;
/** An AND keeps at most this many trigrams (an evenly spread sample). */
const MAX_AND_TRIGRAMS = 64;
/** An AND keeps at most this many sub-queries. */
const MAX_AND_SUBS = 64;
/** `implies` gives up (answers "no") after visiting this many query nodes. */
const MAX_IMPLIES_VISITS = 256;
/** Total units of work (nodes, bytes of set strings, query operations) before giving up. */
const WORK_BUDGET = 400_000;

const NEWLINE = 0x0a;
const MAX_RUNE = 0x10ffff;

// ---------------------------------------------------------------------------------------------
// Work budget. regexQuery is synchronous, so one module-level counter serves every call.
// ---------------------------------------------------------------------------------------------

class GiveUp extends Error {}
let work = 0;
/** The current call's `quadgrams` option (regexQuery is synchronous). */
let withQuadgrams = false;

function tick(n: number): void {
  work += n;
  if (work > WORK_BUDGET) throw new GiveUp('work budget exceeded');
}

// ---------------------------------------------------------------------------------------------
// Query algebra
// ---------------------------------------------------------------------------------------------

type Op = 'and' | 'or';
type OpQuery = { op: Op; trigrams: Trigram[]; sub: Query[] };

const ALL: Query = Object.freeze({ op: 'all' as const });
const NONE: Query = Object.freeze({ op: 'none' as const });

function isOp(q: Query): q is OpQuery {
  return q.op === 'and' || q.op === 'or';
}

function isAtom(q: OpQuery): boolean {
  return q.trigrams.length === 1 && q.sub.length === 0;
}

/** Builds a normalised node: empty AND = all, empty OR = none, lone sub unwrapped, lone trigram as AND. */
function mk(op: Op, trigrams: Trigram[], sub: Query[]): Query {
  if (trigrams.length + sub.length === 0) return op === 'and' ? ALL : NONE;
  if (trigrams.length === 0 && sub.length === 1) return sub[0];
  if (trigrams.length === 1 && sub.length === 0) return { op: 'and', trigrams, sub };
  if (op === 'and') {
    // Dropping conjuncts only widens the answer; keeps the work per operation bounded.
    if (trigrams.length > MAX_AND_TRIGRAMS) trigrams = sample(trigrams, MAX_AND_TRIGRAMS);
    if (sub.length > MAX_AND_SUBS) sub = sub.slice(0, MAX_AND_SUBS);
  }
  return { op, trigrams, sub };
}

function sample(sorted: Trigram[], n: number): Trigram[] {
  const out: Trigram[] = [];
  for (let i = 0; i < n; i++) out.push(sorted[Math.floor((i * sorted.length) / n)]);
  return out;
}

function unionSorted(a: Trigram[], b: Trigram[]): Trigram[] {
  tick(a.length + b.length);
  const out: Trigram[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] < b[j]) out.push(a[i++]);
    else if (a[i] > b[j]) out.push(b[j++]);
    else {
      out.push(a[i++]);
      j++;
    }
  }
  while (i < a.length) out.push(a[i++]);
  while (j < b.length) out.push(b[j++]);
  return out;
}

function intersectSorted(a: Trigram[], b: Trigram[]): Trigram[] {
  const out: Trigram[] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    if (a[i] < b[j]) i++;
    else if (a[i] > b[j]) j++;
    else {
      out.push(a[i++]);
      j++;
    }
  }
  return out;
}

function minusSorted(a: Trigram[], b: Trigram[]): Trigram[] {
  const out: Trigram[] = [];
  let j = 0;
  for (const t of a) {
    while (j < b.length && b[j] < t) j++;
    if (j >= b.length || b[j] !== t) out.push(t);
  }
  return out;
}

function isSubsetSorted(a: Trigram[], b: Trigram[]): boolean {
  let j = 0;
  for (const t of a) {
    while (j < b.length && b[j] < t) j++;
    if (j >= b.length || b[j] !== t) return false;
  }
  return true;
}

function and(q: Query, r: Query): Query {
  return andOr(q, r, 'and');
}

function or(q: Query, r: Query): Query {
  return andOr(q, r, 'or');
}

/** q AND r or q OR r, simplified like codesearch's andOr; never mutates its arguments. */
function andOr(q: Query, r: Query, op: Op): Query {
  tick(1);
  if (q.op === 'none' || r.op === 'none') return op === 'and' ? NONE : q.op === 'none' ? r : q;
  if (q.op === 'all' || r.op === 'all') return op === 'or' ? ALL : q.op === 'all' ? r : q;
  if (q.trigrams.length === 0 && q.sub.length === 1) return andOr(q.sub[0], r, op);
  if (r.trigrams.length === 0 && r.sub.length === 1) return andOr(q, r.sub[0], op);
  if (sameQuery(q, r)) return q;

  // Absorption: if q ⇒ r then q AND r = q and q OR r = r.
  if (implies(q, r)) return op === 'and' ? q : r;
  if (implies(r, q)) return op === 'and' ? r : q;

  const qAtom = isAtom(q);
  const rAtom = isAtom(r);
  if ((q.op === op || qAtom) && (r.op === op || rAtom)) {
    return mk(op, unionSorted(q.trigrams, r.trigrams), appendSubs(q.sub, r.sub));
  }
  if (q.op === op) return mk(op, q.trigrams, appendSubs(q.sub, [r]));
  if (r.op === op) return mk(op, r.trigrams, appendSubs(r.sub, [q]));

  // An AND of two ORs or an OR of two ANDs: factor out the operands both share.
  //   (abc|def|ghi) AND (abc|def|jkl)  =>  (abc|def) OR (ghi AND jkl)
  //   (abc&def&ghi) OR  (abc&def&jkl)  =>  (abc&def) AND (ghi OR jkl)
  const common = intersectSorted(q.trigrams, r.trigrams);
  const commonSub =
    q.sub.length + r.sub.length > 32
      ? []
      : q.sub.filter((s) => r.sub.some((o) => sameQuery(s, o)));
  if (common.length + commonSub.length > 0) {
    const other: Op = op === 'and' ? 'or' : 'and';
    const rest = (x: OpQuery): Query =>
      mk(
        other,
        minusSorted(x.trigrams, common),
        x.sub.filter((s) => !commonSub.some((o) => sameQuery(s, o))),
      );
    return andOr(mk(other, common, commonSub), andOr(rest(q), rest(r), op), other);
  }
  return { op, trigrams: [], sub: [q, r] };
}

/** a's sub-queries followed by those of b that are not already present (small lists only). */
function appendSubs(a: Query[], b: Query[]): Query[] {
  tick(a.length + b.length);
  if (a.length + b.length > 32) return [...a, ...b];
  const out = [...a];
  for (const s of b) if (!out.some((o) => sameQuery(o, s))) out.push(s);
  return out;
}

/** Structural equality (bounded; answers false when the comparison gets large). */
function sameQuery(a: Query, b: Query, budget = { left: 256 }): boolean {
  if (a === b) return true;
  if (--budget.left < 0) return false;
  tick(1);
  if (a.op !== b.op) return false;
  if (!isOp(a) || !isOp(b)) return true;
  if (a.trigrams.length !== b.trigrams.length || a.sub.length !== b.sub.length) return false;
  for (let i = 0; i < a.trigrams.length; i++) if (a.trigrams[i] !== b.trigrams[i]) return false;
  for (let i = 0; i < a.sub.length; i++) if (!sameQuery(a.sub[i], b.sub[i], budget)) return false;
  return true;
}

let impliesVisits = 0;

/** Reports whether q implies r; may answer false when it does (never true when it does not). */
function implies(q: Query, r: Query): boolean {
  impliesVisits = 0;
  return impliesRec(q, r);
}

function impliesRec(q: Query, r: Query): boolean {
  if (q.op === 'none' || r.op === 'all') return true;
  if (q.op === 'all' || r.op === 'none') return false;
  if (++impliesVisits > MAX_IMPLIES_VISITS) return false;
  tick(1);
  if (q.op === 'and') {
    // A conjunction implies r when its trigrams alone, or one of its conjuncts, does.
    if (trigramsImply(q.trigrams, r)) return true;
    for (const s of q.sub) if (impliesRec(s, r)) return true;
    return false;
  }
  // A disjunction implies r when every one of its alternatives does.
  for (const t of q.trigrams) if (!trigramsImply([t], r)) return false;
  for (const s of q.sub) if (!impliesRec(s, r)) return false;
  return true;
}

/** Reports whether the presence of all trigrams t implies r (false when unsure). */
function trigramsImply(t: Trigram[], r: Query): boolean {
  if (++impliesVisits > MAX_IMPLIES_VISITS) return false;
  tick(1);
  switch (r.op) {
    case 'all':
      return true;
    case 'none':
      return false;
    case 'or':
      if (intersectSorted(t, r.trigrams).length > 0) return true;
      for (const s of r.sub) if (trigramsImply(t, s)) return true;
      return false;
    case 'and':
      if (!isSubsetSorted(r.trigrams, t)) return false;
      for (const s of r.sub) if (!trigramsImply(t, s)) return false;
      return true;
  }
}

// ---------------------------------------------------------------------------------------------
// Byte strings and trigrams
// ---------------------------------------------------------------------------------------------

/** The UTF-8 encoding of a code point as a byte string. */
function utf8(cp: number): string {
  if (cp < 0x80) return String.fromCharCode(cp);
  if (cp < 0x800) return String.fromCharCode(0xc0 | (cp >> 6), 0x80 | (cp & 63));
  if (cp < 0x10000) {
    return String.fromCharCode(0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63));
  }
  return String.fromCharCode(
    0xf0 | (cp >> 18),
    0x80 | ((cp >> 12) & 63),
    0x80 | ((cp >> 6) & 63),
    0x80 | (cp & 63),
  );
}

/**
 * The AND of the newline-free trigrams of a byte string (all when it has none), and of its
 * newline-free quadgrams when the call asks for them.
 */
function trigramsOf(s: string): Query {
  // A long string stops after enough distinct trigrams: fewer conjuncts only widen the answer.
  const seen = new Set<Trigram>();
  let i = 0;
  for (; i + 3 <= s.length && seen.size < 4 * MAX_AND_TRIGRAMS; i++) {
    const b0 = s.charCodeAt(i);
    const b1 = s.charCodeAt(i + 1);
    const b2 = s.charCodeAt(i + 2);
    if (b0 === NEWLINE || b1 === NEWLINE || b2 === NEWLINE) continue;
    seen.add((b0 << 16) | (b1 << 8) | b2);
    if (!withQuadgrams || i + 4 > s.length) continue;
    const b3 = s.charCodeAt(i + 3);
    if (b3 !== NEWLINE) seen.add(QUAD_KEY_BASE + foldQuad(((b0 << 24) | (b1 << 16) | (b2 << 8) | b3) >>> 0));
  }
  tick(i + 1);
  return mk('and', [...seen].sort((a, b) => a - b), []);
}

// ---------------------------------------------------------------------------------------------
// String sets (sorted, duplicate-free arrays of byte strings)
// ---------------------------------------------------------------------------------------------

function clean(set: string[]): string[] {
  tick(set.length);
  const s = [...set].sort();
  let w = 0;
  for (let i = 0; i < s.length; i++) if (w === 0 || s[w - 1] !== s[i]) s[w++] = s[i];
  s.length = w;
  return s;
}

function cross(a: string[], b: string[]): string[] {
  const out: string[] = [];
  for (const x of a) {
    for (const y of b) {
      tick(x.length + y.length + 1);
      out.push(x + y);
    }
  }
  return clean(out);
}

function minLen(set: string[]): number {
  let m = Infinity;
  for (const s of set) if (s.length < m) m = s.length;
  return m === Infinity ? 0 : m;
}

function nonEmpty(set: string[]): string[] {
  return set.filter((s) => s !== '');
}

/** Query AND (OR over the strings of set of the AND of each string's trigrams). */
function andTrigrams(q: Query, set: string[]): Query {
  // A string shorter than 3 bytes guarantees no trigram, and then neither does the OR.
  if (set.length === 0 || minLen(set) < 3) return q;
  let alt: Query = NONE;
  for (const s of set) {
    alt = or(alt, trigramsOf(s));
    if (alt.op === 'all') return q;
  }
  return and(q, alt);
}

// ---------------------------------------------------------------------------------------------
// Analysis
// ---------------------------------------------------------------------------------------------

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

function exactInfo(strings: string[]): Info {
  const exact = clean(strings);
  return simplify(
    { canEmpty: exact.includes(''), exact, prefix: [], suffix: [], match: ALL },
    false,
  );
}

/** The same language described without an exact set, its trigrams moved into match. */
function withoutExact(x: Info): Info {
  if (x.exact === null) return x;
  const strings = nonEmpty([...x.exact]);
  return {
    canEmpty: x.canEmpty,
    exact: null,
    prefix: strings,
    suffix: strings,
    match: x.canEmpty ? x.match : andTrigrams(x.match, strings),
  };
}

function concat(x: Info, y: Info): Info {
  tick(1);
  let match = and(x.match, y.match);
  if (x.exact !== null && y.exact !== null) {
    return simplify(
      {
        canEmpty: x.canEmpty && y.canEmpty,
        exact: cross([...x.exact], [...y.exact]),
        prefix: [],
        suffix: [],
        match,
      },
      false,
    );
  }
  // A non-empty match uv starts inside u unless u is empty, and ends inside v unless v is empty.
  let prefix = x.exact !== null ? cross(nonEmpty([...x.exact]), preE(y)) : [...x.prefix];
  if (x.canEmpty) prefix = clean([...prefix, ...pre(y)]);
  let suffix = y.exact !== null ? cross(sufE(x), nonEmpty([...y.exact])) : [...y.suffix];
  if (y.canEmpty) suffix = clean([...suffix, ...suf(x)]);

  // When both sides are non-empty, the match contains (some suffix of x)(some prefix of y).
  if (
    x.exact === null &&
    y.exact === null &&
    !x.canEmpty &&
    !y.canEmpty &&
    x.suffix.length * y.prefix.length <= MAX_CROSS &&
    minLen([...x.suffix]) + minLen([...y.prefix]) >= 3
  ) {
    match = andTrigrams(match, cross([...x.suffix], [...y.prefix]));
  }
  return simplify(
    { canEmpty: x.canEmpty && y.canEmpty, exact: null, prefix, suffix, match },
    false,
  );
}

function alternate(x: Info, y: Info): Info {
  tick(1);
  if (x.exact !== null && y.exact !== null) {
    return simplify(
      {
        canEmpty: x.canEmpty || y.canEmpty,
        exact: clean([...x.exact, ...y.exact]),
        prefix: [],
        suffix: [],
        match: or(x.match, y.match),
      },
      false,
    );
  }
  // Move an exact side's trigrams into its match first, or the OR below would lose them.
  const a = withoutExact(x);
  const b = withoutExact(y);
  return simplify(
    {
      canEmpty: a.canEmpty || b.canEmpty,
      exact: null,
      prefix: clean([...a.prefix, ...b.prefix]),
      suffix: clean([...a.suffix, ...b.suffix]),
      match: or(a.match, b.match),
    },
    false,
  );
}

/** x+ given x: at least one copy, so prefixes, suffixes and match stay valid. */
function plus(x: Info): Info {
  if (x.exact === null) return x;
  const strings = nonEmpty([...x.exact]);
  return simplify(
    { canEmpty: x.canEmpty, exact: null, prefix: strings, suffix: strings, match: x.match },
    false,
  );
}

/** x{min,max} (max -1: unbounded) given the Info of x. */
function repeat(x: Info, min: number, max: number): Info {
  if (max === 0) return EMPTY_STRING;
  if (min === 0) return alternate(repeat(x, 1, max), EMPTY_STRING);
  // Every match is x^k for some k >= min; it starts and ends with x^unroll and contains it.
  const unroll = Math.min(min, REPEAT_UNROLL);
  let y = x;
  for (let i = 1; i < unroll; i++) y = concat(y, x);
  if (min === max && min === unroll) return y;
  return plus(y);
}

/** Flushes oversized sets into match, as codesearch's simplify/simplifySet. */
function simplify(info: Info, force: boolean): Info {
  let exact = info.exact;
  let match = info.match;
  let prefix = [...info.prefix];
  let suffix = [...info.suffix];
  if (exact !== null) {
    const n = minLen([...exact]);
    if (exact.length > MAX_EXACT || (force && n >= 3) || n >= 4) {
      match = andTrigrams(match, [...exact]);
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
    if (!info.canEmpty) match = andTrigrams(andTrigrams(match, prefix), suffix);
    prefix = shorten(prefix, false);
    suffix = shorten(suffix, true);
  }
  return { canEmpty: info.canEmpty, exact, prefix: exact ? [] : prefix, suffix: exact ? [] : suffix, match };
}

/** Cuts a prefix (or suffix) set to strings of at most 2 bytes, shorter while it has too many. */
function shorten(set: string[], isSuffix: boolean): string[] {
  let t = clean(set);
  for (let n = 3; n === 3 || t.length > MAX_SET; n--) {
    t = clean(
      t.map((s) => (s.length < n ? s : isSuffix ? s.slice(s.length - n + 1) : s.slice(0, n - 1))),
    );
  }
  // "ab" covers every string that "abc" covers: keep only the shortest cover.
  return t.filter(
    (s) =>
      !t.some(
        (o) => o.length < s.length && (isSuffix ? s.endsWith(o) : s.startsWith(o)),
      ),
  );
}

function analyze(node: RNode): Info {
  tick(1);
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
      return exactInfo([s]);
    }
    case 'set':
      return exactInfo(node.cps.map(utf8));
    case 'cat': {
      let info = EMPTY_STRING;
      for (const sub of node.subs) info = concat(info, analyze(sub));
      return info;
    }
    case 'alt': {
      let info = NO_MATCH;
      for (const sub of node.subs) info = alternate(info, analyze(sub));
      return info;
    }
    case 'rep':
      return repeat(analyze(node.sub), node.min, node.max);
  }
}

// ---------------------------------------------------------------------------------------------
// Required literals
// ---------------------------------------------------------------------------------------------

/** A required-literal set holds at most this many strings (each one is an indexOf per document). */
const MAX_REQUIRED = 8;
/** Every string of a required-literal set has at least this many bytes (shorter ones are everywhere). */
const MIN_REQUIRED_BYTES = 3;

/**
 * Byte strings of which every match of `node` contains at least one, or null when there is no
 * usable set (see requiredLiterals). Null means "no constraint", so a concatenation can still
 * take the set of another child; a set kept here always satisfies the limits above.
 */
function required(node: RNode): string[] | null {
  tick(1);
  switch (node.k) {
    case 'lit': {
      // Read under (?i): its characters have no other case, but folding is not relied on here.
      if (node.folded === true) return null;
      let s = '';
      for (const cp of node.cps) s += utf8(cp);
      tick(s.length);
      // No line holds a newline, but every match holds each newline-free piece of the run.
      let piece = '';
      for (const p of s.split('\n')) if (p.length > piece.length) piece = p;
      return piece.length >= MIN_REQUIRED_BYTES ? [piece] : null;
    }
    case 'cat': {
      // Every match contains a match of each child: take the child whose set is best.
      let best: string[] | null = null;
      for (const sub of node.subs) {
        const set = required(sub);
        if (set !== null && (best === null || betterRequired(set, best))) best = set;
      }
      return best;
    }
    case 'alt': {
      // A match is a match of some branch: every branch must contribute.
      let union: string[] = [];
      for (const sub of node.subs) {
        const set = required(sub);
        if (set === null) return null;
        union = withoutCovered(clean([...union, ...set]));
        if (union.length > MAX_REQUIRED) return null;
      }
      return union;
    }
    case 'rep':
      // At least one copy of x when min >= 1 (then max >= 1 too).
      return node.min >= 1 ? required(node.sub) : null;
    default:
      // Classes, any character, no match and empty-width assertions require no literal.
      return null;
  }
}

/** 1 at c: ASCII character c folds only to ASCII characters (built on first use). */
let asciiOrbits: Uint8Array | null = null;

/** Whether `c` is an ASCII character whose case variants are all ASCII (all but k, K, s, S). */
export function foldsWithinAscii(c: number): boolean {
  if (asciiOrbits === null) {
    asciiOrbits = new Uint8Array(0x80);
    for (let cp = 0; cp < 0x80; cp++) asciiOrbits[cp] = foldOrbit(cp).every((o) => o < 0x80) ? 1 : 0;
  }
  return c < 0x80 && asciiOrbits[c] === 1;
}

/**
 * Under `-i`: the folded quadgrams (trigram-extract.ts) of the literals every match requires,
 * or `all`. The pattern (code points `cps`) is parsed without folding: a case-insensitive
 * match holds a case variant of one of the strings `required` finds there. A quadgram is
 * used only when each of its characters has case variants in ASCII alone, so that every
 * variant folds to the same key: a text may spell `k` as U+212A KELVIN SIGN and `s` as U+017F
 * LONG S, which RE2 matches.
 */
function foldedRequiredQuads(cps: number[]): Query {
  const set = caseSensitiveRequired(cps);
  if (set === null) return ALL;
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
    q = or(q, mk('and', [...quads].sort((a, b) => a - b), []));
  }
  return q;
}

/** `required` of the pattern (code points `cps`) parsed without folding. */
function caseSensitiveRequired(cps: number[]): string[] | null {
  return required(new Parser(cps, false).parse());
}

/** A longer shortest string is rarer; on a tie, fewer strings mean fewer searches. */
function betterRequired(a: string[], b: string[]): boolean {
  const m = minLen(a);
  const n = minLen(b);
  return m > n || (m === n && a.length < b.length);
}

/** Drops the strings that contain another string of the set: a text holding one holds the other. */
function withoutCovered(set: string[]): string[] {
  return set.filter((s) =>
    !set.some((o) => {
      tick(s.length);
      return o !== s && o.length <= s.length && s.includes(o);
    }),
  );
}

// ---------------------------------------------------------------------------------------------
// Case folding
// ---------------------------------------------------------------------------------------------

/**
 * Orbits that the toLowerCase/toUpperCase closure misses or over-reaches (hex code points, one
 * orbit per comma). Generated by scanning every code point with Node 20 and cross-checked against
 * RE2 1.22.3's own table (vendor/re2/re2/unicode_casefold.cc): with these, every RE2 orbit is
 * contained in ours. `49 69` keeps dotless ı out of the orbit of i, as RE2 does; the last three
 * entries are folds that JavaScript's case mappings do not express at all.
 */
const FOLD_EXCEPTIONS_SRC =
  '49 69,131,4b 6b 212a,53 73 17f,b5 39c 3bc,c5 e5 212b,df 1e9e,1c4 1c5 1c6,1c7 1c8 1c9,' +
  '1ca 1cb 1cc,1f1 1f2 1f3,345 399 3b9 1fbe,392 3b2 3d0,395 3b5 3f5,398 3b8 3d1 3f4,' +
  '39a 3ba 3f0,3a0 3c0 3d6,3a1 3c1 3f1,3a3 3c2 3c3,3a6 3c6 3d5,3a9 3c9 2126,412 432 1c80,' +
  '414 434 1c81,41e 43e 1c82,421 441 1c83,422 442 1c84 1c85,42a 44a 1c86,462 463 1c87,' +
  '1c88 a64a a64b,1e60 1e61 1e9b,1f80 1f88,1f81 1f89,1f82 1f8a,1f83 1f8b,1f84 1f8c,' +
  '1f85 1f8d,1f86 1f8e,1f87 1f8f,1f90 1f98,1f91 1f99,1f92 1f9a,1f93 1f9b,1f94 1f9c,' +
  '1f95 1f9d,1f96 1f9e,1f97 1f9f,1fa0 1fa8,1fa1 1fa9,1fa2 1faa,1fa3 1fab,1fa4 1fac,' +
  '1fa5 1fad,1fa6 1fae,1fa7 1faf,1fb3 1fbc,1fc3 1fcc,1ff3 1ffc,390 1fd3,3b0 1fe3,fb05 fb06';

let foldExceptions: Map<number, number[]> | null = null;
/** Orbits computed so far (bounded; they are shared read-only). */
const orbitCache = new Map<number, number[]>();

function singleCodePoint(s: string): number {
  const cp = s.codePointAt(0);
  return cp !== undefined && s.length === (cp > 0xffff ? 2 : 1) ? cp : -1;
}

/** The case-folding orbit of a code point, sorted, the code point included. */
function foldOrbit(cp: number): number[] {
  if (foldExceptions === null) {
    foldExceptions = new Map();
    for (const group of FOLD_EXCEPTIONS_SRC.split(',')) {
      const orbit = group.split(' ').map((h) => parseInt(h, 16));
      for (const c of orbit) foldExceptions.set(c, orbit);
    }
  }
  const known = foldExceptions.get(cp) ?? orbitCache.get(cp);
  if (known !== undefined) return known;
  const seen = [cp];
  for (let i = 0; i < seen.length && seen.length < 8; i++) {
    const s = String.fromCodePoint(seen[i]);
    for (const mapped of [s.toLowerCase(), s.toUpperCase()]) {
      const c = singleCodePoint(mapped);
      if (c >= 0 && !seen.includes(c)) seen.push(c);
    }
  }
  seen.sort((a, b) => a - b);
  if (orbitCache.size >= 4096) orbitCache.clear();
  orbitCache.set(cp, seen);
  return seen;
}

// ---------------------------------------------------------------------------------------------
// Character classes: sorted, merged, inclusive ranges [lo, hi, lo, hi, ...]
// ---------------------------------------------------------------------------------------------

type Ranges = number[];

function normalizeRanges(r: Ranges): Ranges {
  const pairs: [number, number][] = [];
  for (let i = 0; i < r.length; i += 2) pairs.push([r[i], r[i + 1]]);
  pairs.sort((a, b) => a[0] - b[0]);
  const out: Ranges = [];
  for (const [lo, hi] of pairs) {
    const last = out.length - 1;
    if (last > 0 && lo <= out[last] + 1) out[last] = Math.max(out[last], hi);
    else out.push(lo, hi);
  }
  return out;
}

function negateRanges(r: Ranges): Ranges {
  const n = normalizeRanges(r);
  const out: Ranges = [];
  let next = 0;
  for (let i = 0; i < n.length; i += 2) {
    if (n[i] > next) out.push(next, n[i] - 1);
    next = n[i + 1] + 1;
  }
  if (next <= MAX_RUNE) out.push(next, MAX_RUNE);
  return out;
}

function countRanges(r: Ranges): number {
  let n = 0;
  for (let i = 0; i < r.length; i += 2) n += r[i + 1] - r[i] + 1;
  return n;
}

function enumerateRanges(r: Ranges): number[] {
  const out: number[] = [];
  for (let i = 0; i < r.length; i += 2) for (let c = r[i]; c <= r[i + 1]; c++) out.push(c);
  return out;
}

const PERL_GROUPS: Record<string, Ranges> = {
  d: [0x30, 0x39],
  s: [0x09, 0x0a, 0x0c, 0x0d, 0x20, 0x20],
  w: [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a],
};

const POSIX_GROUPS: Record<string, Ranges> = {
  alnum: [0x30, 0x39, 0x41, 0x5a, 0x61, 0x7a],
  alpha: [0x41, 0x5a, 0x61, 0x7a],
  ascii: [0x00, 0x7f],
  blank: [0x09, 0x09, 0x20, 0x20],
  cntrl: [0x00, 0x1f, 0x7f, 0x7f],
  digit: [0x30, 0x39],
  graph: [0x21, 0x7e],
  lower: [0x61, 0x7a],
  print: [0x20, 0x7e],
  punct: [0x21, 0x2f, 0x3a, 0x40, 0x5b, 0x60, 0x7b, 0x7e],
  space: [0x09, 0x0d, 0x20, 0x20],
  upper: [0x41, 0x5a],
  word: [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a],
  xdigit: [0x30, 0x39, 0x41, 0x46, 0x61, 0x66],
};

/** Accumulates the items of one class; `unknown` means some item is not tracked (e.g. \p). */
interface ClassBuilder {
  ranges: Ranges;
  unknown: boolean;
  sawNegated: boolean;
}

// ---------------------------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------------------------

type RNode =
  | { k: 'empty' }
  | { k: 'none' }
  | { k: 'any' }
  | { k: 'lit'; cps: number[]; folded?: true } // a run of literal code points; folded: read under (?i)
  | { k: 'set'; cps: number[] } // one code point out of a small set
  | { k: 'cat'; subs: RNode[] }
  | { k: 'alt'; subs: RNode[] }
  | { k: 'rep'; sub: RNode; min: number; max: number }; // max -1: unbounded

class ParseError extends Error {}

const HEX_UPPER = '0123456789ABCDEF';

function isAsciiAlnum(ch: string | undefined): boolean {
  return ch !== undefined && /^[0-9A-Za-z]$/.test(ch);
}

const UNICODE_CLASS_ALIASES: Record<string, string> = {
  Uppercase_Letter: 'Lu', Lowercase_Letter: 'Ll', Titlecase_Letter: 'Lt', Cased_Letter: 'LC',
  Modifier_Letter: 'Lm', Other_Letter: 'Lo', Letter: 'L', Nonspacing_Mark: 'Mn',
  Spacing_Mark: 'Mc', Enclosing_Mark: 'Me', Mark: 'M', Decimal_Number: 'Nd',
  Letter_Number: 'Nl', Other_Number: 'No', Number: 'N', Connector_Punctuation: 'Pc',
  Dash_Punctuation: 'Pd', Open_Punctuation: 'Ps', Close_Punctuation: 'Pe',
  Initial_Punctuation: 'Pi', Final_Punctuation: 'Pf', Other_Punctuation: 'Po',
  Punctuation: 'P', Math_Symbol: 'Sm', Currency_Symbol: 'Sc', Modifier_Symbol: 'Sk',
  Other_Symbol: 'So', Symbol: 'S', Space_Separator: 'Zs', Line_Separator: 'Zl',
  Paragraph_Separator: 'Zp', Separator: 'Z', Control: 'Cc', Format: 'Cf', Surrogate: 'Cs',
  Private_Use: 'Co', Unassigned: 'Cn', Other: 'C',
};

/**
 * The pattern as node-re2 1.22.3 hands it to RE2 (lib/new.cc translateRegExp): JavaScript
 * escapes become RE2 ones. Ported as-is, quirks included (its "hex" test accepts any letter).
 */
function translateLikeNodeRe2(src: string): string {
  let out = src.length === 0 ? '(?:)' : '';
  const n = src.length;
  let i = 0;
  while (i < n) {
    const ch = src[i];
    if (ch === '\\' && i + 1 < n) {
      const c = src[i + 1];
      switch (c) {
        case '\\':
          out += '\\\\';
          i += 2;
          continue;
        case 'c': {
          const d = src.charCodeAt(i + 2);
          if (i + 2 < n && d >= 0x41 && d <= 0x5a) {
            const v = d - 0x40;
            out += '\\x' + HEX_UPPER[(v >> 4) & 15] + HEX_UPPER[v & 15];
            i += 3;
            continue;
          }
          out += '\\c';
          i += 2;
          continue;
        }
        case 'u':
          if (i + 2 < n) {
            const d = src[i + 2];
            if (isAsciiAlnum(d)) {
              out += '\\x{' + d;
              i += 3;
              for (let j = 0; j < 3 && i < n; ++i, ++j) {
                if (!isAsciiAlnum(src[i])) break;
                out += src[i];
              }
              out += '}';
              continue;
            }
            if (d === '{') {
              out += '\\x';
              i += 2;
              continue;
            }
          }
          out += '\\u';
          i += 2;
          continue;
        case 'p':
        case 'P':
          if (i + 2 < n && src[i + 2] === '{') {
            const j = src.indexOf('}', i + 3);
            if (j >= 0) {
              let name = src.slice(i + 3, j);
              const alias = Object.hasOwn(UNICODE_CLASS_ALIASES, name)
                ? UNICODE_CLASS_ALIASES[name]
                : undefined;
              if (alias !== undefined) name = alias;
              else if (name.length > 7 && name.startsWith('Script=')) name = name.slice(7);
              else if (name.length > 3 && name.startsWith('sc=')) name = name.slice(3);
              const oneByte = name.length === 1 && name.charCodeAt(0) < 0x80;
              out += '\\' + c + (oneByte ? name : '{' + name + '}');
              i = j + 1;
              continue;
            }
          }
          out += '\\' + c;
          i += 2;
          continue;
        default: {
          const cp = src.codePointAt(i + 1) ?? 0;
          const len = cp > 0xffff ? 2 : 1;
          out += '\\' + src.slice(i + 1, i + 1 + len);
          i += 1 + len;
          continue;
        }
      }
    }
    if (ch === '/') {
      out += '\\/';
      i += 1;
      continue;
    }
    if (ch === '(' && i + 2 < n && src[i + 1] === '?' && src[i + 2] === '<') {
      if (i + 3 >= n || (src[i + 3] !== '=' && src[i + 3] !== '!')) {
        out += '(?P<';
        i += 3;
        continue;
      }
    }
    const cp = src.codePointAt(i) ?? 0;
    const len = cp > 0xffff ? 2 : 1;
    out += src.slice(i, i + len);
    i += len;
  }
  return out;
}

/** Code points of a JS string; lone surrogates become U+FFFD, as in the UTF-8 RE2 receives. */
function toCodePoints(s: string): number[] {
  const out: number[] = [];
  for (const ch of s) {
    const cp = ch.codePointAt(0) ?? 0xfffd;
    out.push(cp >= 0xd800 && cp <= 0xdfff ? 0xfffd : cp);
  }
  return out;
}

const C = (ch: string): number => ch.charCodeAt(0);

class Parser {
  private pos = 0;
  private depth = 0;

  constructor(
    private readonly cps: number[],
    private fold: boolean,
  ) {}

  parse(): RNode {
    const node = this.parseAlt();
    if (this.pos < this.cps.length) throw new ParseError('unexpected )');
    return node;
  }

  private peek(offset = 0): number {
    const c = this.cps[this.pos + offset];
    return c === undefined ? -1 : c;
  }

  private parseAlt(): RNode {
    const alts = [this.parseConcat()];
    while (this.peek() === C('|')) {
      this.pos++;
      alts.push(this.parseConcat());
    }
    return alts.length === 1 ? alts[0] : { k: 'alt', subs: alts };
  }

  private parseConcat(): RNode {
    const items: RNode[] = [];
    while (this.pos < this.cps.length) {
      const c = this.peek();
      if (c === C('|') || c === C(')')) break;
      if (c === C('*') || c === C('+') || c === C('?')) throw new ParseError('missing argument');
      if (c === C('{') && this.tryRepeat() !== null) throw new ParseError('missing argument');
      tick(1);
      const atom = this.parseAtom(items);
      if (atom === null) continue;
      items.push(this.parseRepetition(atom));
    }
    // Merge adjacent literal runs (a repetition has already claimed its own operand).
    const merged: RNode[] = [];
    let run: { k: 'lit'; cps: number[]; folded?: true } | null = null; // merged's last node while it is a literal run
    for (const item of items) {
      if (item.k === 'lit' && run !== null) {
        for (const cp of item.cps) run.cps.push(cp);
        if (item.folded) run.folded = true;
      } else if (item.k === 'lit') {
        run = item.folded ? { k: 'lit', cps: [...item.cps], folded: true } : { k: 'lit', cps: [...item.cps] };
        merged.push(run);
      } else if (item.k !== 'empty') {
        // Empty-width items are dropped: the empty string is the identity of concatenation.
        run = null;
        merged.push(item);
      }
    }
    if (merged.length === 0) return { k: 'empty' };
    return merged.length === 1 ? merged[0] : { k: 'cat', subs: merged };
  }

  private parseRepetition(atom: RNode): RNode {
    const c = this.peek();
    let min: number;
    let max: number;
    if (c === C('*')) [min, max] = [0, -1];
    else if (c === C('+')) [min, max] = [1, -1];
    else if (c === C('?')) [min, max] = [0, 1];
    else if (c === C('{')) {
      const r = this.tryRepeat();
      if (r === null) return atom;
      [min, max] = [r.min, r.max];
      this.pos = r.end - 1;
    } else {
      return atom;
    }
    this.pos++;
    if (this.peek() === C('?')) this.pos++; // lazy: same set of matching texts
    const next = this.peek();
    // RE2 rejects stacked repetition (a**, a{2}{3}).
    if (next === C('*') || next === C('+') || next === C('?')) throw new ParseError('stacked');
    if (next === C('{') && this.tryRepeat() !== null) throw new ParseError('stacked');
    return { k: 'rep', sub: atom, min, max };
  }

  /** Parses {n}, {n,} or {n,m} at pos without consuming; null when it is a literal `{`. */
  private tryRepeat(): { min: number; max: number; end: number } | null {
    let p = this.pos;
    if (this.cps[p] !== C('{')) return null;
    p++;
    const int = (): number | null => {
      const start = p;
      while (p < this.cps.length && this.cps[p] >= C('0') && this.cps[p] <= C('9')) p++;
      if (p === start) return null;
      if (p - start >= 2 && this.cps[start] === C('0')) return null; // RE2: no leading zeros
      if (p - start > 8) return null;
      let v = 0;
      for (let i = start; i < p; i++) v = v * 10 + this.cps[i] - C('0');
      return v;
    };
    const min = int();
    if (min === null) return null;
    let max = min;
    if (this.cps[p] === C(',')) {
      p++;
      if (this.cps[p] === C('}')) max = -1;
      else {
        const m = int();
        if (m === null) return null;
        max = m;
      }
    }
    if (this.cps[p] !== C('}')) return null;
    p++;
    if (min > 1000 || max > 1000 || (max !== -1 && max < min)) throw new ParseError('bad repeat');
    return { min, max, end: p };
  }

  /** One atom; null for a flag group like (?i). `items` receives all but the last \Q…\E char. */
  private parseAtom(items: RNode[]): RNode | null {
    const c = this.peek();
    switch (c) {
      case C('('):
        return this.parseGroup();
      case C('['):
        return this.parseClass();
      case C('.'):
        this.pos++;
        return { k: 'any' };
      case C('^'):
      case C('$'):
        this.pos++;
        return { k: 'empty' };
      case C('\\'):
        return this.parseEscapeAtom(items);
      default:
        this.pos++;
        return this.literal(c);
    }
  }

  private literal(cp: number): RNode {
    if (cp >= 0xd800 && cp <= 0xdfff) return { k: 'any' };
    if (!this.fold) return { k: 'lit', cps: [cp] };
    const orbit = foldOrbit(cp);
    return orbit.length === 1 ? { k: 'lit', cps: [cp], folded: true } : { k: 'set', cps: orbit };
  }

  private parseGroup(): RNode | null {
    if (this.peek(1) !== C('?')) {
      this.pos++;
      return this.groupBody(this.fold);
    }
    const c2 = this.peek(2);
    if (c2 === C('=') || c2 === C('!')) throw new ParseError('lookaround');
    if ((c2 === C('P') && this.peek(3) === C('<')) || c2 === C('<')) {
      const c3 = this.peek(3);
      if (c2 === C('<') && (c3 === C('=') || c3 === C('!'))) throw new ParseError('lookbehind');
      let p = this.pos + (c2 === C('P') ? 4 : 3);
      const start = p;
      while (p < this.cps.length && this.cps[p] !== C('>')) p++;
      if (p >= this.cps.length || p === start) throw new ParseError('bad name');
      this.pos = p + 1;
      return this.groupBody(this.fold);
    }
    // Flags: (?flags) or (?flags:re), flags from imsU, one optional '-'.
    this.pos += 2;
    let fold = this.fold;
    let negated = false;
    let sawFlag = false;
    for (;;) {
      const c = this.peek();
      this.pos++;
      if (c === C('i')) {
        fold = !negated;
        sawFlag = true;
      } else if (c === C('m') || c === C('s') || c === C('U')) {
        sawFlag = true;
      } else if (c === C('-')) {
        if (negated) throw new ParseError('bad flags');
        negated = true;
        sawFlag = false;
      } else if (c === C(':')) {
        if (negated && !sawFlag) throw new ParseError('bad flags');
        return this.groupBody(fold);
      } else if (c === C(')')) {
        if (negated && !sawFlag) throw new ParseError('bad flags');
        this.fold = fold; // for the rest of the enclosing group, across `|` too
        return null;
      } else {
        throw new ParseError('bad flags');
      }
    }
  }

  /** The body of a group whose opening has been consumed, with the given case flag. */
  private groupBody(fold: boolean): RNode {
    if (++this.depth > MAX_NESTING) throw new GiveUp('nesting');
    const saved = this.fold;
    this.fold = fold;
    const node = this.parseAlt();
    if (this.peek() !== C(')')) throw new ParseError('missing )');
    this.pos++;
    this.fold = saved;
    this.depth--;
    return node;
  }

  private parseEscapeAtom(items: RNode[]): RNode | null {
    const c = this.peek(1);
    if (c === -1) throw new ParseError('trailing backslash');
    if (c === C('b') || c === C('B') || c === C('A') || c === C('z')) {
      this.pos += 2;
      return { k: 'empty' };
    }
    if (c === C('C')) {
      this.pos += 2;
      return { k: 'any' };
    }
    if (c === C('Q')) {
      this.pos += 2;
      const lits: RNode[] = [];
      while (this.pos < this.cps.length) {
        if (this.peek() === C('\\') && this.peek(1) === C('E')) {
          this.pos += 2;
          break;
        }
        lits.push(this.literal(this.cps[this.pos++]));
      }
      // A following repetition applies to the last character only, as in RE2.
      const last = lits.pop();
      items.push(...lits);
      if (last === undefined) {
        const next = this.peek();
        if (next === C('*') || next === C('+') || next === C('?') || next === C('{')) {
          throw new ParseError('repetition after empty \\Q\\E');
        }
        return null;
      }
      return last;
    }
    if (c === C('p') || c === C('P')) {
      this.skipUnicodeGroup();
      return { k: 'any' };
    }
    const perl = this.tryPerlGroup();
    if (perl !== null) return this.classNode(perl, false);
    return this.literal(this.parseEscapeChar());
  }

  /** Skips \pX or \p{Name}; Unicode groups are not tracked. */
  private skipUnicodeGroup(): void {
    this.pos += 2;
    if (this.peek() === -1) throw new ParseError('bad \\p');
    if (this.peek() === C('{')) {
      while (this.pos < this.cps.length && this.peek() !== C('}')) this.pos++;
      if (this.peek() !== C('}')) throw new ParseError('bad \\p');
    }
    this.pos++;
  }

  private tryPerlGroup(): ClassBuilder | null {
    if (this.peek() !== C('\\')) return null;
    const c = this.peek(1);
    const name = c === -1 ? '' : String.fromCodePoint(c);
    const lower = name.toLowerCase();
    if (!['d', 's', 'w'].includes(lower) || name.length !== 1) return null;
    this.pos += 2;
    const base = PERL_GROUPS[lower];
    const negated = name !== lower;
    return { ranges: negated ? negateRanges(base) : [...base], unknown: false, sawNegated: negated };
  }

  /** RE2's ParseEscape: one escaped character at pos (which is a backslash). */
  private parseEscapeChar(): number {
    this.pos++;
    const c = this.peek();
    if (c === -1) throw new ParseError('trailing backslash');
    this.pos++;
    const isOct = (x: number): boolean => x >= C('0') && x <= C('7');
    if (c >= C('1') && c <= C('7') && !isOct(this.peek())) throw new ParseError('backreference');
    if (c >= C('0') && c <= C('7')) {
      let code = c - C('0');
      for (let i = 0; i < 2 && isOct(this.peek()); i++) code = code * 8 + this.cps[this.pos++] - C('0');
      return code;
    }
    const hexVal = (x: number): number => {
      if (x >= C('0') && x <= C('9')) return x - C('0');
      if (x >= C('a') && x <= C('f')) return x - C('a') + 10;
      if (x >= C('A') && x <= C('F')) return x - C('A') + 10;
      return -1;
    };
    switch (c) {
      case C('x'): {
        if (this.peek() === C('{')) {
          this.pos++;
          let code = 0;
          let digits = 0;
          while (hexVal(this.peek()) >= 0) {
            code = code * 16 + hexVal(this.cps[this.pos++]);
            digits++;
            if (code > MAX_RUNE) throw new ParseError('bad \\x');
          }
          if (digits === 0 || this.peek() !== C('}')) throw new ParseError('bad \\x');
          this.pos++;
          return code;
        }
        const h1 = hexVal(this.peek());
        const h2 = hexVal(this.peek(1));
        if (h1 < 0 || h2 < 0) throw new ParseError('bad \\x');
        this.pos += 2;
        return h1 * 16 + h2;
      }
      case C('n'):
        return 0x0a;
      case C('r'):
        return 0x0d;
      case C('t'):
        return 0x09;
      case C('a'):
        return 0x07;
      case C('f'):
        return 0x0c;
      case C('v'):
        return 0x0b;
      default:
        // Escaped ASCII punctuation (and `_`) is itself; anything else is an RE2 error.
        if (c < 0x80 && !isAsciiAlnum(String.fromCharCode(c))) return c;
        throw new ParseError('bad escape');
    }
  }

  private parseClass(): RNode {
    this.pos++; // '['
    let negated = false;
    if (this.peek() === C('^')) {
      negated = true;
      this.pos++;
    }
    const b: ClassBuilder = { ranges: [], unknown: false, sawNegated: false };
    let first = true;
    while (this.pos < this.cps.length && (this.peek() !== C(']') || first)) {
      first = false;
      tick(1);
      // [:alpha:] and [:^alpha:]
      if (this.peek() === C('[') && this.peek(1) === C(':')) {
        let p = this.pos + 2;
        while (p + 1 < this.cps.length && !(this.cps[p] === C(':') && this.cps[p + 1] === C(']'))) p++;
        if (p + 1 < this.cps.length) {
          let name = String.fromCodePoint(...this.cps.slice(this.pos + 2, p));
          const neg = name.startsWith('^');
          if (neg) name = name.slice(1);
          const base = Object.hasOwn(POSIX_GROUPS, name) ? POSIX_GROUPS[name] : undefined;
          if (base === undefined) throw new ParseError('bad posix class');
          b.ranges.push(...(neg ? negateRanges(base) : base));
          b.sawNegated ||= neg;
          this.pos = p + 2;
          continue;
        }
      }
      if (this.peek() === C('\\') && (this.peek(1) === C('p') || this.peek(1) === C('P'))) {
        this.skipUnicodeGroup();
        b.unknown = true;
        continue;
      }
      const perl = this.tryPerlGroup();
      if (perl !== null) {
        b.ranges.push(...perl.ranges);
        b.sawNegated ||= perl.sawNegated;
        continue;
      }
      const lo = this.classChar();
      let hi = lo;
      if (this.peek() === C('-') && this.peek(1) !== -1 && this.peek(1) !== C(']')) {
        this.pos++;
        hi = this.classChar();
        if (hi < lo) throw new ParseError('bad range');
      }
      b.ranges.push(lo, hi);
    }
    if (this.peek() !== C(']')) throw new ParseError('missing ]');
    this.pos++;
    return this.classNode(b, negated);
  }

  private classChar(): number {
    if (this.peek() === C('\\')) return this.parseEscapeChar();
    const c = this.peek();
    if (c === -1) throw new ParseError('missing ]');
    this.pos++;
    return c;
  }

  /** Turns a parsed class into a node: a small explicit set, any character, or no match. */
  private classNode(b: ClassBuilder, negated: boolean): RNode {
    if (b.unknown) return { k: 'any' };
    // Folding a complement exactly would need RE2's tables; "any" is a superset.
    if (this.fold && (negated || b.sawNegated)) return { k: 'any' };
    let ranges = normalizeRanges(b.ranges);
    if (this.fold) {
      if (countRanges(ranges) > MAX_CLASS) return { k: 'any' };
      const folded: Ranges = [];
      for (const cp of enumerateRanges(ranges)) for (const f of foldOrbit(cp)) folded.push(f, f);
      ranges = normalizeRanges(folded);
    }
    if (negated) ranges = negateRanges(ranges);
    const count = countRanges(ranges);
    if (count === 0) return { k: 'none' };
    if (count > MAX_CLASS) return { k: 'any' };
    const cps = enumerateRanges(ranges);
    if (cps.some((cp) => cp >= 0xd800 && cp <= 0xdfff)) return { k: 'any' };
    if (cps.length > 1) return { k: 'set', cps };
    return this.fold ? { k: 'lit', cps, folded: true } : { k: 'lit', cps };
  }
}

// ---------------------------------------------------------------------------------------------
// Public API
// ---------------------------------------------------------------------------------------------

/** Returns a trigram query matching a superset of the files in which `pattern` (RE2 syntax) can match; `all` when it cannot tell. */
export function regexQuery(pattern: string, options?: RegexQueryOptions): Query {
  if (typeof pattern !== 'string' || pattern.length > MAX_PATTERN_LENGTH) return ALL;
  work = 0;
  withQuadgrams = options?.quadgrams === true;
  try {
    const cps = toCodePoints(translateLikeNodeRe2(pattern));
    const caseInsensitive = options?.caseInsensitive === true;
    const tree = new Parser(cps, caseInsensitive).parse();
    const info = simplify(analyze(tree), true);
    if (info.canEmpty) return ALL;
    const q = info.exact !== null ? andTrigrams(info.match, [...info.exact]) : info.match;
    if (!caseInsensitive || !withQuadgrams) return q;
    try {
      return and(q, foldedRequiredQuads(cps));
    } catch {
      return q; // the work budget ran out: the query stands without them
    }
  } catch {
    // Parse problems, the work budget, or any surprise: no narrowing is always correct.
    return ALL;
  }
}

/**
 * A few UTF-8 byte strings of which every match of `pattern` (RE2 syntax, read as regexQuery
 * reads it) contains at least one, for a prefilter that finds them with indexOf; null when
 * there is no useful set: case-insensitive or multiline options, anything read under `(?i)`,
 * a string shorter than 3 bytes, more than 8 strings, or a pattern it cannot parse. No string
 * contains a newline. For a pure literal alternation it returns the alternatives (LineMatcher
 * checks `literalAlternatives` first and needs no regex there).
 */
export function requiredLiterals(pattern: string, options?: RegexQueryOptions): Buffer[] | null {
  if (typeof pattern !== 'string' || pattern.length > MAX_PATTERN_LENGTH) return null;
  if (options?.caseInsensitive === true || options?.multiline === true) return null;
  work = 0;
  try {
    const cps = toCodePoints(translateLikeNodeRe2(pattern));
    const set = required(new Parser(cps, false).parse());
    return set === null ? null : set.map((s) => Buffer.from(s, 'latin1'));
  } catch {
    // Parse problems, the work budget, or any surprise: no prefilter is always correct.
    return null;
  }
}

/**
 * What finds, under `-i`, the strings every match contains one of (caseInsensitiveRequired), in
 * a text read as Latin-1 (one code unit per UTF-8 byte). Two RegExps (flags `gi`), because V8
 * plans a RegExp's skip-ahead once, from a sample of the first text it runs on, and alternations
 * of unequal lengths make that plan erratic: with the variants outside ASCII spelt in,
 * `-i sched_clock_register` searched its 168 MB of Linux candidates in 48 ms when first run on
 * /arch/Kconfig and in 94 ms when first run on /include/linux/filter.h. Without them it took
 * 48-50 ms after every first text tried (and `-i static int` 368-396 ms against 384-512).
 */
export interface CaseInsensitiveRequired {
  /** The ASCII case variants only: enough in a text that holds none of `beyond`. */
  ascii: RegExp;
  /** Every variant RE2 accepts: `ascii`'s, and with the members outside ASCII as their bytes. */
  full: RegExp;
  /** The UTF-8 bytes of those members (U+212A KELVIN SIGN for k, U+017F LONG S for s). */
  beyond: Buffer[];
  /**
   * For each string, its longest run of characters whose case variants are all ASCII (no k or
   * s): every match holds one of them. Null when there are more than MAX_FOLDED_RUNS strings or
   * a run is shorter than MIN_FOLDED_RUN.
   */
  runs: string[] | null;
}

/** The shortest run in `CaseInsensitiveRequired.runs`: shorter ones occur too often to pay. */
const MIN_FOLDED_RUN = 4;

/**
 * The most runs: each is searched in a pass of its own (FoldedRunFinder), where a RegExpFinder
 * copies the text once and searches all strings in one pass. On the Linux candidates, two runs
 * took 0.6-0.8 of the RegExpFinder's time, three 0.8-0.9.
 */
const MAX_FOLDED_RUNS = 2;

/**
 * `s` (code units below 0x100) as a pattern of its word characters and `\xNN` for the rest:
 * JavaScript reads it as those units (the bytes of a text read as Latin-1), and RE2 as `s` when
 * `s` is ASCII.
 */
export function literalPattern(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) out += /[A-Za-z0-9_]/.test(s[i]) ? s[i] : `\\x${s.charCodeAt(i).toString(16).padStart(2, '0')}`;
  return out;
}

/** The longest run of `s` (ASCII) without a character that folds outside ASCII, or ''. */
function longestFoldedRun(s: string): string {
  let best = '';
  let start = 0;
  for (let i = 0; i <= s.length; i++) {
    if (i < s.length && foldsWithinAscii(s.charCodeAt(i))) continue;
    if (i - start > best.length) best = s.slice(start, i);
    start = i + 1;
  }
  return best;
}

/**
 * Under `-i` outside multiline mode, the RegExps that find at least every case variant RE2
 * accepts of the strings of which every match contains one (`required`, the pattern read
 * case-sensitively), for LineMatcher's prefilter; null when there is none, or when a string holds
 * a byte outside ASCII (Latin-1 cannot express how UTF-8 text folds). JavaScript folds ASCII
 * letters as RE2 does, and folds no Latin-1 character onto one; the members of an orbit outside
 * ASCII are added as their UTF-8 bytes. Other Latin-1 folds (`\xe2` and `\xc2`) only widen what
 * `full` finds.
 */
export function caseInsensitiveRequired(pattern: string): CaseInsensitiveRequired | null {
  if (typeof pattern !== 'string' || pattern.length > MAX_PATTERN_LENGTH) return null;
  work = 0;
  let set: string[] | null;
  try {
    set = caseSensitiveRequired(toCodePoints(translateLikeNodeRe2(pattern)));
  } catch {
    return null;
  }
  if (set === null) return null;
  const asciiBranches: string[] = [];
  const fullBranches: string[] = [];
  const beyond = new Set<string>();
  for (const s of set) {
    let ascii = '';
    let full = '';
    for (let i = 0; i < s.length; i++) {
      const c = s.charCodeAt(i);
      if (c >= 0x80) return null;
      const self = literalPattern(s[i]);
      const others = foldOrbit(c)
        .filter((o) => o >= 0x80)
        .map((o) => utf8(o));
      for (const o of others) beyond.add(o);
      ascii += self;
      full += others.length === 0 ? self : `(?:${[self, ...others.map(literalPattern)].join('|')})`;
    }
    asciiBranches.push(ascii);
    fullBranches.push(full);
  }
  const runs = set.length <= MAX_FOLDED_RUNS ? set.map(longestFoldedRun) : [];
  return {
    ascii: new RegExp(asciiBranches.join('|'), 'gi'),
    full: new RegExp(fullBranches.join('|'), 'gi'),
    beyond: [...beyond].map((o) => Buffer.from(o, 'latin1')),
    runs: runs.length > 0 && runs.every((r) => r.length >= MIN_FOLDED_RUN) ? runs : null,
  };
}

/** Evaluates a query given trigram presence (`has`), e.g. against one file's trigram set. */
export function evalQuery(q: Query, has: (t: Trigram) => boolean): boolean {
  switch (q.op) {
    case 'all':
      return true;
    case 'none':
      return false;
    case 'and':
      for (const t of q.trigrams) if (!has(t)) return false;
      for (const s of q.sub) if (!evalQuery(s, has)) return false;
      return true;
    case 'or':
      for (const t of q.trigrams) if (has(t)) return true;
      for (const s of q.sub) if (evalQuery(s, has)) return true;
      return false;
  }
}

/** Formats a query as text (see the header: `+`, `-`, `"abc" "bcd"`, `("abc"|"xyz")`). */
export function formatQuery(q: Query): string {
  switch (q.op) {
    case 'all':
      return '+';
    case 'none':
      return '-';
    case 'and': {
      const parts = q.trigrams.map(formatTrigram);
      for (const s of q.sub) parts.push(s.op === 'and' ? '(' + formatQuery(s) + ')' : formatQuery(s));
      return parts.join(' ');
    }
    case 'or': {
      const parts = q.trigrams.map(formatTrigram);
      for (const s of q.sub) parts.push(formatQuery(s));
      return '(' + parts.join('|') + ')';
    }
  }
}

const PRINTABLE = /^[\p{L}\p{N}\p{P}\p{S}]$/u;

function formatTrigram(t: Trigram): string {
  const quad = t - QUAD_KEY_BASE;
  const b = quad >= 0 ? [quad >>> 24, (quad >>> 16) & 0xff, (quad >>> 8) & 0xff, quad & 0xff] : [(t >>> 16) & 0xff, (t >>> 8) & 0xff, t & 0xff];
  let out = '"';
  let i = 0;
  while (i < b.length) {
    const c = b[i];
    if (c >= 0x20 && c < 0x7f) {
      out += c === 0x22 || c === 0x5c ? '\\' + String.fromCharCode(c) : String.fromCharCode(c);
      i++;
      continue;
    }
    // A complete, printable UTF-8 character that fits inside the trigram is shown as itself.
    const len = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : 0;
    if (len > 0 && i + len <= b.length && b.slice(i + 1, i + len).every((x) => (x & 0xc0) === 0x80)) {
      const cp =
        len === 2
          ? ((c & 0x1f) << 6) | (b[i + 1] & 0x3f)
          : ((c & 0x0f) << 12) | ((b[i + 1] & 0x3f) << 6) | (b[i + 2] & 0x3f);
      const valid = len === 2 || (cp >= 0x800 && (cp < 0xd800 || cp > 0xdfff));
      if (valid && PRINTABLE.test(String.fromCodePoint(cp))) {
        out += String.fromCodePoint(cp);
        i += len;
        continue;
      }
    }
    out += '\\x' + c.toString(16).padStart(2, '0');
    i++;
  }
  return out + '"';
}
