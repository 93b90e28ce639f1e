/**
 * The tree as the trigram plan and the required literals read it: only what decides which byte
 * strings a match may contain. Assertions become the empty string, `.` and `\C` any character,
 * and case folding is spelt out: a folded letter is the set of its case variants, a small class
 * the set of its code points. A class too large to spell (or one whose Unicode groups have no
 * tables here) is "any character", which only widens what a match may be.
 */

import type { Budget } from './budget.js';
import { countRanges, enumerateRanges, groupRanges, negateRanges, normalizeRanges, type Ranges } from './char-class.js';
import { foldOrbit } from './fold.js';
import type { CharClass, Regex } from './syntax.js';

/** Classes with more code points are "any character" (a bigger set would be cut down anyway). */
const MAX_CLASS = 20;

/** A node of the lowered tree. */
export type Lowered =
  | { k: 'empty' }
  | { k: 'none' }
  | { k: 'any' }
  | { k: 'lit'; cps: number[]; folded?: true } // a run of literal code points; folded: read under (?i)
  | { k: 'set'; cps: number[] } // one code point out of a small set
  | { k: 'cat'; subs: Lowered[] }
  | { k: 'alt'; subs: Lowered[] }
  | { k: 'rep'; sub: Lowered; min: number; max: number }; // max -1: unbounded

const EMPTY: Lowered = { k: 'empty' };
const ANY: Lowered = { k: 'any' };

/** Lowers `node`, reading nodes whose case flag the search decides as `caseInsensitive` says. */
export function lower(node: Regex, caseInsensitive: boolean, budget: Budget): Lowered {
  budget.spend(1);
  switch (node.k) {
    case 'empty':
    case 'assert':
      return EMPTY;
    case 'dot':
    case 'byte':
      return ANY;
    case 'lit':
      return literal(node.cp, node.fold ?? caseInsensitive);
    case 'class':
      return lowerClass(node.cls, node.fold ?? caseInsensitive);
    case 'cat':
      return concat(node.subs.map((sub) => lower(sub, caseInsensitive, budget)));
    case 'alt':
      return { k: 'alt', subs: node.subs.map((sub) => lower(sub, caseInsensitive, budget)) };
    case 'rep':
      return { k: 'rep', sub: lower(node.sub, caseInsensitive, budget), min: node.min, max: node.max };
  }
}

function literal(cp: number, fold: boolean): Lowered {
  if (cp >= 0xd800 && cp <= 0xdfff) return ANY;
  if (!fold) return { k: 'lit', cps: [cp] };
  const orbit = foldOrbit(cp);
  return orbit.length === 1 ? { k: 'lit', cps: [cp], folded: true } : { k: 'set', cps: orbit };
}

/** Adjacent literal runs merged, empty strings (the identity of concatenation) dropped. */
function concat(items: Lowered[]): Lowered {
  const merged: Lowered[] = [];
  let run: { k: 'lit'; cps: number[]; folded?: true } | null = null; // merged's last node while it is a literal run
  for (const item of items) {
    if (item.k === 'lit' && run !== null) {
      for (const cp of item.cps) run.cps.push(cp);
      if (item.folded) run.folded = true;
    } else if (item.k === 'lit') {
      run = item.folded ? { k: 'lit', cps: [...item.cps], folded: true } : { k: 'lit', cps: [...item.cps] };
      merged.push(run);
    } else if (item.k !== 'empty') {
      run = null;
      merged.push(item);
    }
  }
  if (merged.length === 0) return EMPTY;
  return merged.length === 1 ? merged[0] : { k: 'cat', subs: merged };
}

/** A class as a small explicit set, any character, or no match. */
function lowerClass(cls: CharClass, fold: boolean): Lowered {
  if (cls.groups.some((g) => g.kind === 'unicode')) return ANY;
  // Folding a complement exactly would need RE2's tables; "any" is a superset.
  if (fold && (cls.negated || cls.groups.some((g) => g.negated))) return ANY;
  let ranges: Ranges = normalizeRanges([...cls.ranges, ...cls.groups.flatMap(groupRanges)]);
  if (fold) {
    if (countRanges(ranges) > MAX_CLASS) return ANY;
    const folded: Ranges = [];
    for (const cp of enumerateRanges(ranges)) for (const f of foldOrbit(cp)) folded.push(f, f);
    ranges = normalizeRanges(folded);
  }
  if (cls.negated) ranges = negateRanges(ranges);
  const count = countRanges(ranges);
  if (count === 0) return { k: 'none' };
  if (count > MAX_CLASS) return ANY;
  const cps = enumerateRanges(ranges);
  if (cps.some((cp) => cp >= 0xd800 && cp <= 0xdfff)) return ANY;
  if (cps.length > 1) return { k: 'set', cps };
  return fold ? { k: 'lit', cps, folded: true } : { k: 'lit', cps };
}
