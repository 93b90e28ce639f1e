/**
 * Character classes as sorted, merged, inclusive code point ranges `[lo, hi, lo, hi, ...]`,
 * and the named classes RE2 defines over ASCII (Perl's `\d \s \w`, POSIX's `[:alpha:]`...).
 */

/** Inclusive code point ranges, flattened: `[lo, hi, lo, hi, ...]`. */
export type Ranges = number[];

/** The largest code point. */
export const MAX_RUNE = 0x10ffff;

/** The ranges sorted and merged (touching or overlapping ranges become one). */
export function normalizeRanges(r: Ranges): Ranges {
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

/** Every code point the ranges do not hold. */
export function negateRanges(r: Ranges): Ranges {
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

/** The ranges without one code point. */
export function removeFromRanges(r: Ranges, cp: number): Ranges {
  const out: Ranges = [];
  for (let i = 0; i < r.length; i += 2) {
    const lo = r[i];
    const hi = r[i + 1];
    if (cp < lo || cp > hi) {
      out.push(lo, hi);
      continue;
    }
    if (lo < cp) out.push(lo, cp - 1);
    if (cp < hi) out.push(cp + 1, hi);
  }
  return out;
}

/** Whether the ranges hold `cp`. */
export function rangesHold(r: Ranges, cp: number): boolean {
  for (let i = 0; i < r.length; i += 2) if (r[i] <= cp && cp <= r[i + 1]) return true;
  return false;
}

/** How many code points the ranges hold. */
export function countRanges(r: Ranges): number {
  let n = 0;
  for (let i = 0; i < r.length; i += 2) n += r[i + 1] - r[i] + 1;
  return n;
}

/** Every code point of the ranges, in order (callers bound the count first). */
export function enumerateRanges(r: Ranges): number[] {
  const out: number[] = [];
  for (let i = 0; i < r.length; i += 2) for (let c = r[i]; c <= r[i + 1]; c++) out.push(c);
  return out;
}

/** RE2's Perl classes `\d \s \w` (ASCII); upper case negates them. */
export const PERL_GROUPS: Record<string, Ranges> = {
  d: [0x30, 0x39],
  s: [0x09, 0x0a, 0x0c, 0x0d, 0x20, 0x20],
  w: [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a],
};

/** RE2's POSIX classes `[:name:]` (ASCII); `[:^name:]` negates them. */
export const POSIX_GROUPS: Record<string, Ranges> = {
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

/** The ranges of a Perl or POSIX group (ASCII, exact), negated or not. */
export function groupRanges(group: { kind: 'perl' | 'posix' | 'unicode'; name: string; negated: boolean }): Ranges {
  if (group.kind === 'unicode') throw new Error(`no table for \\p{${group.name}}`);
  const base = group.kind === 'perl' ? PERL_GROUPS[group.name] : POSIX_GROUPS[group.name];
  return group.negated ? negateRanges(base) : base;
}
