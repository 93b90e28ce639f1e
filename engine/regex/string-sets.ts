/**
 * Sets of byte strings (bytes.ts): sorted, duplicate-free arrays, as the trigram plan and the
 * required literals build them.
 */

import type { Budget } from './budget.js';

/** The set sorted and without duplicates. */
export function clean(budget: Budget, set: string[]): string[] {
  budget.spend(set.length);
  const s = [...set].sort();
  let w = 0;
  for (let i = 0; i < s.length; i++) if (w === 0 || s[w - 1] !== s[i]) s[w++] = s[i];
  s.length = w;
  return s;
}

/** Every string of `a` followed by every string of `b`. */
export function cross(budget: Budget, a: string[], b: string[]): string[] {
  const out: string[] = [];
  for (const x of a) {
    for (const y of b) {
      budget.spend(x.length + y.length + 1);
      out.push(x + y);
    }
  }
  return clean(budget, out);
}

/** The length of the set's shortest string (0 for an empty set). */
export function minLen(set: string[]): number {
  let m = Infinity;
  for (const s of set) if (s.length < m) m = s.length;
  return m === Infinity ? 0 : m;
}

/** The set without the empty string. */
export function nonEmpty(set: string[]): string[] {
  return set.filter((s) => s !== '');
}
