/**
 * The literals every match requires: a few byte strings of which every match contains at least
 * one (a concatenation's best literal run, an alternation's union of its branches'), which
 * LineMatcher finds with a StringFinder before it runs RE2 on the lines around them; under `-i`
 * their case variants (caseInsensitiveRequired); the index's folded quadgrams of them are
 * foldedRequiredQuads in trigram-plan.ts.
 */

import type { Budget } from './budget.js';
import { literalPattern, utf8 } from './bytes.js';
import { foldOrbit, foldsWithinAscii } from './fold.js';
import type { Lowered } from './lowered.js';
import { clean, minLen } from './string-sets.js';

/** A required-literal set holds at most this many strings (each one is an indexOf per document). */
const MAX_REQUIRED = 8;
/** Every string of a required-literal set has at least this many bytes (shorter ones are everywhere). */
const MIN_REQUIRED_BYTES = 3;

/**
 * Byte strings of which every match of `node` contains at least one, or null when there is no
 * usable set: a string shorter than MIN_REQUIRED_BYTES, more than MAX_REQUIRED strings, or
 * literals read under `(?i)`. Null means "no constraint", so a concatenation can still
 * take the set of another child; a set kept here always satisfies the limits above.
 */
export function requiredStrings(node: Lowered, budget: Budget): string[] | null {
  budget.spend(1);
  switch (node.k) {
    case 'lit': {
      // Read under (?i): its characters have no other case, but folding is not relied on here.
      if (node.folded === true) return null;
      let s = '';
      for (const cp of node.cps) s += utf8(cp);
      budget.spend(s.length);
      // No line holds a newline, but every match holds each newline-free piece of the run.
      let piece = '';
      for (const p of s.split('\n')) if (p.length > piece.length) piece = p;
      return piece.length >= MIN_REQUIRED_BYTES ? [piece] : null;
    }
    case 'cat': {
      // Every match contains a match of each child: take the child whose set is best.
      let best: string[] | null = null;
      for (const sub of node.subs) {
        const set = requiredStrings(sub, budget);
        if (set !== null && (best === null || betterRequired(set, best))) best = set;
      }
      return best;
    }
    case 'alt': {
      // A match is a match of some branch: every branch must contribute.
      let union: string[] = [];
      for (const sub of node.subs) {
        const set = requiredStrings(sub, budget);
        if (set === null) return null;
        union = withoutCovered(budget, clean(budget, [...union, ...set]));
        if (union.length > MAX_REQUIRED) return null;
      }
      return union;
    }
    case 'rep':
      // At least one copy of x when min >= 1 (then max >= 1 too).
      return node.min >= 1 ? requiredStrings(node.sub, budget) : null;
    default:
      // Classes, any character, no match and empty-width assertions require no literal.
      return null;
  }
}

function betterRequired(a: string[], b: string[]): boolean {
  const m = minLen(a);
  const n = minLen(b);
  return m > n || (m === n && a.length < b.length);
}

/** Drops the strings that contain another string of the set: a text holding one holds the other. */
function withoutCovered(budget: Budget, set: string[]): string[] {
  return set.filter(
    (s) =>
      !set.some((o) => {
        budget.spend(s.length);
        return o !== s && o.length <= s.length && s.includes(o);
      }),
  );
}

/**
 * What finds, under `-i`, the strings every match contains one of (caseInsensitiveRequired), in
 * a text read as Latin-1 (one code unit per UTF-8 byte). Two RegExps (flags `gi`), because V8
 * plans a RegExp's skip-ahead once, from a sample of the first text it runs on, and alternations
 * of unequal lengths (the variants outside ASCII spelt in) make that plan depend on which text
 * came first; the ASCII variants alone search at one speed whatever it was (docs/benchmarks.md,
 * "Case-insensitive search").
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
 * copies the text once and searches all strings in one pass; from three runs on, the passes
 * cost nearly as much as the copy. This and MIN_FOLDED_RUN: fit with bench/engine-phases.ts -i
 * (docs/benchmarks.md, "Case-insensitive search").
 */
const MAX_FOLDED_RUNS = 2;

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
 * accepts of `set`, the strings of which every match contains one (`requiredStrings` of the
 * tree read without folding), for LineMatcher's prefilter; null when a string holds a byte
 * outside ASCII (Latin-1 cannot express how UTF-8 text folds). JavaScript folds ASCII letters as
 * RE2 does, and folds no Latin-1 character onto one; the members of an orbit outside ASCII are
 * added as their UTF-8 bytes. Other Latin-1 folds (`\xe2` and `\xc2`) only widen what `full`
 * finds.
 */
export function caseInsensitiveRequired(set: readonly string[]): CaseInsensitiveRequired | null {
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
