/**
 * The trigram query: a boolean query over the presence of trigrams (and quadgrams) in a file,
 * codesearch's tiny algebra (`all`, `none`, AND, OR) whose `and`/`or` simplify as they build.
 *
 * QueryAlgebra combines queries: it flattens, drops duplicates, applies the all/none
 * identities, absorbs (q ⇒ r: q∧r = q, q∨r = r) and factors out trigrams and sub-queries shared
 * by both sides, like codesearch's `andOr`. Built queries share structure (and `all`/`none` are
 * frozen singletons): treat them as read-only.
 *
 * Format (formatQuery), modelled on codesearch's Query.String:
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

import { foldQuad, QUAD_KEY_BASE } from '../trigram-extract.js';
import type { Budget } from './budget.js';

/**
 * A trigram is the 24-bit number (b0 << 16) | (b1 << 8) | b2 of three UTF-8 bytes; a quadgram
 * QUAD_KEY_BASE + ((b0 << 24) | … | b3) stands beside them in an index that lists them.
 */
export type Trigram = number;

/** A boolean query over trigram presence; `and`/`or` combine their trigrams and sub-queries. */
export type Query =
  | { op: 'all' } // matches every file (no usable trigram)
  | { op: 'none' } // matches no file
  | { op: 'and' | 'or'; trigrams: Trigram[]; sub: Query[] }; // AND/OR of trigram presence and sub-queries

type Op = 'and' | 'or';
type OpQuery = { op: Op; trigrams: Trigram[]; sub: Query[] };

/** The query every file satisfies. */
export const ALL: Query = Object.freeze({ op: 'all' as const });
/** The query no file satisfies. */
export const NONE: Query = Object.freeze({ op: 'none' as const });

/** An AND keeps at most this many trigrams (an evenly spread sample). */
const MAX_AND_TRIGRAMS = 64;
/** An AND keeps at most this many sub-queries. */
const MAX_AND_SUBS = 64;
/** `implies` gives up (answers "no") after visiting this many query nodes. */
const MAX_IMPLIES_VISITS = 256;

const NEWLINE = 0x0a;

function isOp(q: Query): q is OpQuery {
  return q.op === 'and' || q.op === 'or';
}

function isAtom(q: OpQuery): boolean {
  return q.trigrams.length === 1 && q.sub.length === 0;
}

/** Builds a normalised node: empty AND = all, empty OR = none, lone sub unwrapped, lone trigram as AND. */
export function mk(op: Op, trigrams: Trigram[], sub: Query[]): Query {
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

/** Combines queries within one analysis's budget; `quadgrams` adds the quadgrams of strings. */
export class QueryAlgebra {
  private impliesVisits = 0;

  constructor(
    readonly budget: Budget,
    private readonly quadgrams: boolean,
  ) {}

  /** q AND r. */
  and(q: Query, r: Query): Query {
    return this.andOr(q, r, 'and');
  }

  /** q OR r. */
  or(q: Query, r: Query): Query {
    return this.andOr(q, r, 'or');
  }

  /**
   * The AND of the newline-free trigrams of a byte string (all when it has none), and of its
   * newline-free quadgrams when the algebra adds them.
   */
  trigramsOf(s: string): Query {
    // A long string stops after enough distinct trigrams: fewer conjuncts only widen the answer.
    const seen = new Set<Trigram>();
    let i = 0;
    for (; i + 3 <= s.length && seen.size < 4 * MAX_AND_TRIGRAMS; i++) {
      const b0 = s.charCodeAt(i);
      const b1 = s.charCodeAt(i + 1);
      const b2 = s.charCodeAt(i + 2);
      if (b0 === NEWLINE || b1 === NEWLINE || b2 === NEWLINE) continue;
      seen.add((b0 << 16) | (b1 << 8) | b2);
      if (!this.quadgrams || i + 4 > s.length) continue;
      const b3 = s.charCodeAt(i + 3);
      if (b3 !== NEWLINE) seen.add(QUAD_KEY_BASE + foldQuad(((b0 << 24) | (b1 << 16) | (b2 << 8) | b3) >>> 0));
    }
    this.budget.spend(i + 1);
    return mk(
      'and',
      [...seen].sort((a, b) => a - b),
      [],
    );
  }

  /** q AND (OR over the strings of `set` of the AND of each string's trigrams). */
  andTrigrams(q: Query, set: readonly string[]): Query {
    // A string shorter than 3 bytes guarantees no trigram, and then neither does the OR.
    if (set.length === 0 || set.some((s) => s.length < 3)) return q;
    let alt: Query = NONE;
    for (const s of set) {
      alt = this.or(alt, this.trigramsOf(s));
      if (alt.op === 'all') return q;
    }
    return this.and(q, alt);
  }

  /** q AND r or q OR r, simplified like codesearch's andOr; never mutates its arguments. */
  private andOr(q: Query, r: Query, op: Op): Query {
    this.budget.spend(1);
    if (q.op === 'none' || r.op === 'none') return op === 'and' ? NONE : q.op === 'none' ? r : q;
    if (q.op === 'all' || r.op === 'all') return op === 'or' ? ALL : q.op === 'all' ? r : q;
    if (q.trigrams.length === 0 && q.sub.length === 1) return this.andOr(q.sub[0], r, op);
    if (r.trigrams.length === 0 && r.sub.length === 1) return this.andOr(q, r.sub[0], op);
    if (this.sameQuery(q, r)) return q;

    // Absorption: if q ⇒ r then q AND r = q and q OR r = r.
    if (this.implies(q, r)) return op === 'and' ? q : r;
    if (this.implies(r, q)) return op === 'and' ? r : q;

    const qAtom = isAtom(q);
    const rAtom = isAtom(r);
    if ((q.op === op || qAtom) && (r.op === op || rAtom)) {
      this.budget.spend(q.trigrams.length + r.trigrams.length);
      return mk(op, unionSorted(q.trigrams, r.trigrams), this.appendSubs(q.sub, r.sub));
    }
    if (q.op === op) return mk(op, q.trigrams, this.appendSubs(q.sub, [r]));
    if (r.op === op) return mk(op, r.trigrams, this.appendSubs(r.sub, [q]));

    // An AND of two ORs or an OR of two ANDs: factor out the operands both share.
    //   (abc|def|ghi) AND (abc|def|jkl)  =>  (abc|def) OR (ghi AND jkl)
    //   (abc&def&ghi) OR  (abc&def&jkl)  =>  (abc&def) AND (ghi OR jkl)
    const common = intersectSorted(q.trigrams, r.trigrams);
    const commonSub = q.sub.length + r.sub.length > 32 ? [] : q.sub.filter((s) => r.sub.some((o) => this.sameQuery(s, o)));
    if (common.length + commonSub.length > 0) {
      const other: Op = op === 'and' ? 'or' : 'and';
      const rest = (x: OpQuery): Query =>
        mk(
          other,
          minusSorted(x.trigrams, common),
          x.sub.filter((s) => !commonSub.some((o) => this.sameQuery(s, o))),
        );
      return this.andOr(mk(other, common, commonSub), this.andOr(rest(q), rest(r), op), other);
    }
    return { op, trigrams: [], sub: [q, r] };
  }

  /** a's sub-queries followed by those of b that are not already present (small lists only). */
  private appendSubs(a: Query[], b: Query[]): Query[] {
    this.budget.spend(a.length + b.length);
    if (a.length + b.length > 32) return [...a, ...b];
    const out = [...a];
    for (const s of b) if (!out.some((o) => this.sameQuery(o, s))) out.push(s);
    return out;
  }

  /** Structural equality (bounded; answers false when the comparison gets large). */
  private sameQuery(a: Query, b: Query, budget = { left: 256 }): boolean {
    if (a === b) return true;
    if (--budget.left < 0) return false;
    this.budget.spend(1);
    if (a.op !== b.op) return false;
    if (!isOp(a) || !isOp(b)) return true;
    if (a.trigrams.length !== b.trigrams.length || a.sub.length !== b.sub.length) return false;
    for (let i = 0; i < a.trigrams.length; i++) if (a.trigrams[i] !== b.trigrams[i]) return false;
    for (let i = 0; i < a.sub.length; i++) if (!this.sameQuery(a.sub[i], b.sub[i], budget)) return false;
    return true;
  }

  /** Reports whether q implies r; may answer false when it does (never true when it does not). */
  private implies(q: Query, r: Query): boolean {
    this.impliesVisits = 0;
    return this.impliesRec(q, r);
  }

  private impliesRec(q: Query, r: Query): boolean {
    if (q.op === 'none' || r.op === 'all') return true;
    if (q.op === 'all' || r.op === 'none') return false;
    if (++this.impliesVisits > MAX_IMPLIES_VISITS) return false;
    this.budget.spend(1);
    if (q.op === 'and') {
      // A conjunction implies r when its trigrams alone, or one of its conjuncts, does.
      if (this.trigramsImply(q.trigrams, r)) return true;
      for (const s of q.sub) if (this.impliesRec(s, r)) return true;
      return false;
    }
    // A disjunction implies r when every one of its alternatives does.
    for (const t of q.trigrams) if (!this.trigramsImply([t], r)) return false;
    for (const s of q.sub) if (!this.impliesRec(s, r)) return false;
    return true;
  }

  /** Reports whether the presence of all trigrams t implies r (false when unsure). */
  private trigramsImply(t: Trigram[], r: Query): boolean {
    if (++this.impliesVisits > MAX_IMPLIES_VISITS) return false;
    this.budget.spend(1);
    switch (r.op) {
      case 'all':
        return true;
      case 'none':
        return false;
      case 'or':
        if (intersectSorted(t, r.trigrams).length > 0) return true;
        for (const s of r.sub) if (this.trigramsImply(t, s)) return true;
        return false;
      case 'and':
        if (!isSubsetSorted(r.trigrams, t)) return false;
        for (const s of r.sub) if (!this.trigramsImply(t, s)) return false;
        return true;
    }
  }
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
      const cp = len === 2 ? ((c & 0x1f) << 6) | (b[i + 1] & 0x3f) : ((c & 0x0f) << 12) | ((b[i + 1] & 0x3f) << 6) | (b[i + 2] & 0x3f);
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
