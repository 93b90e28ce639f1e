/**
 * Regenerates FOLD_EXCEPTIONS_SRC, the table of case-folding orbits in engine/regex/fold.ts,
 * by asking RE2 (node-re2, the package the engine runs) what `(?i)` folds together.
 *
 *   node --import tsx scripts/case-fold-table.ts > table.ts
 *
 * stdout is the constant, ready to paste; stderr says what was scanned, how long it took, and
 * whether the closure overridden by the printed table reproduces every RE2 orbit.
 *
 * The engine expands a literal under `(?i)` to its orbit: the closure of the code point under
 * JavaScript's toLowerCase/toUpperCase (single-code-point results only), except for the code
 * points the table lists, whose orbit is the table's. The table is derived in four steps:
 *
 *   1. Which code points fold with any other (the set F). RE2 closes a class under folding, so
 *      `(?i:[X])` matches exactly the code points whose orbit meets X. For each block of 256 code
 *      points, X = everything outside the block finds the members with a partner outside it, and
 *      for each of the 8 low bits, X = the block's members with that bit set (then clear), scanned
 *      over the members with it clear (then set), finds the partners inside it: two distinct code
 *      points differ in some bit. 17 small regexes per block, about 74,000 in all.
 *   2. The orbit of each member c of F: the code points of F that `(?i:\x{c})` matches (RE2 turns
 *      a folded literal into the class of its orbit). Every other code point is its own orbit.
 *   3. The closure of every code point, computed as the engine computes it.
 *   4. Code points linked by the closure or by an RE2 orbit form groups. A group in which some code
 *      point's closure is not its RE2 orbit is listed: every RE2 orbit of the group, so that none
 *      inherits the closure's reach into another (`49 69` and `131`: ı's closure holds I and i,
 *      RE2 folds ı with nothing). Groups the closure links come first, by smallest code point;
 *      then the orbits JavaScript's case mappings do not express at all.
 *
 * The result depends on the Unicode version of Node's ICU (the closure) and of the RE2 that
 * node-re2 bundles (the orbits): rerun after upgrading either. Where Node knows case pairs that
 * RE2 does not (Node 20.20's ICU has Unicode 17, RE2 1.22.3 predates Unicode 16: U+019B/U+A7DC,
 * U+1C89/U+1C8A, the Garay letters, ...), the closure over-reaches and those code points are
 * listed as orbits of their own. Over-reach only makes the prefilter less selective; an RE2 orbit
 * member missing from ours would lose matches. The run fails (exit 1) if closure and table do not
 * reproduce every RE2 orbit exactly.
 */
import RE2 from 're2';
import { caseClosure } from '../engine/regex/fold.js';

const MAX_CODE_POINT = 0x10ffff;
const BLOCK = 256;
/** Longest line of the printed constant, as the table has been wrapped so far. */
const LINE_WIDTH = 95;

const hex = (cp: number): string => cp.toString(16);
const isSurrogate = (cp: number): boolean => cp >= 0xd800 && cp <= 0xdfff;

/** A RE2 class of the given inclusive ranges, surrogates left out (UTF-8 cannot hold them). */
function charClass(ranges: Array<[number, number]>): string {
  let out = '';
  const add = (lo: number, hi: number): void => {
    if (lo <= hi) out += lo === hi ? `\\x{${hex(lo)}}` : `\\x{${hex(lo)}}-\\x{${hex(hi)}}`;
  };
  for (const [lo, hi] of ranges) {
    add(lo, Math.min(hi, 0xd7ff));
    add(Math.max(lo, 0xe000), hi);
  }
  return `[${out}]`;
}

/** Sorted code points as inclusive ranges. */
function rangesOf(cps: number[]): Array<[number, number]> {
  const ranges: Array<[number, number]> = [];
  for (const cp of cps) {
    const last = ranges.at(-1);
    if (last !== undefined && last[1] + 1 === cp) last[1] = cp;
    else ranges.push([cp, cp]);
  }
  return ranges;
}

/** The code points of `text` that `(?i:class)` matches. */
function foldedMatches(cls: string, text: string): number[] {
  if (cls === '[]' || text === '') return [];
  const found = text.match(new RE2(`(?i:${cls})`, 'gu')) ?? [];
  return found.map((m) => m.codePointAt(0) as number);
}

/** Step 1: every code point RE2 folds with at least one other. */
function foldingCodePoints(): number[] {
  const folding = new Set<number>();
  for (let lo = 0; lo <= MAX_CODE_POINT; lo += BLOCK) {
    const hi = lo + BLOCK - 1;
    const members: number[] = [];
    for (let cp = lo; cp <= hi; cp++) if (!isSurrogate(cp)) members.push(cp);
    if (members.length === 0) continue;
    const outside: Array<[number, number]> = [];
    if (lo > 0) outside.push([0, lo - 1]);
    if (hi < MAX_CODE_POINT) outside.push([hi + 1, MAX_CODE_POINT]);
    for (const cp of foldedMatches(charClass(outside), String.fromCodePoint(...members))) folding.add(cp);
    for (let bit = 1; bit < BLOCK; bit <<= 1) {
      const set = members.filter((cp) => (cp & bit) !== 0);
      const clear = members.filter((cp) => (cp & bit) === 0);
      for (const [x, scanned] of [
        [set, clear],
        [clear, set],
      ]) {
        for (const cp of foldedMatches(charClass(rangesOf(x)), String.fromCodePoint(...scanned))) folding.add(cp);
      }
    }
  }
  return [...folding].sort((a, b) => a - b);
}

/** Step 2: the RE2 orbit of each code point that folds, sorted. */
function re2Orbits(folding: number[]): Map<number, number[]> {
  const text = String.fromCodePoint(...folding);
  const orbits = new Map<number, number[]>();
  for (const cp of folding) {
    const orbit = foldedMatches(`\\x{${hex(cp)}}`, text).sort((a, b) => a - b);
    if (!orbit.includes(cp)) throw new Error(`RE2 does not fold U+${hex(cp)} with itself`);
    orbits.set(cp, orbit);
  }
  return orbits;
}

/** Step 3: the closure, as the engine's foldOrbit computes it. */
const closure = caseClosure;

const sameSet = (a: number[], b: number[]): boolean => a.length === b.length && a.every((x, i) => x === b[i]);

/** Step 4: the orbits to list, in the table's order. */
function exceptionOrbits(orbits: Map<number, number[]>, closures: Map<number, number[]>): number[][] {
  const re2Orbit = (cp: number): number[] => orbits.get(cp) ?? [cp];
  const closureOf = (cp: number): number[] => closures.get(cp) ?? [cp];
  const parent = new Map<number, number>();
  const find = (cp: number): number => {
    let root = cp;
    while (parent.has(root) && parent.get(root) !== root) root = parent.get(root) as number;
    parent.set(cp, root);
    return root;
  };
  const union = (a: number, b: number): void => {
    const ra = find(a);
    const rb = find(b);
    if (ra !== rb) parent.set(Math.max(ra, rb), Math.min(ra, rb));
  };
  const members = new Set<number>();
  for (const cp of [...orbits.keys(), ...closures.keys()]) {
    for (const other of [cp, ...re2Orbit(cp), ...closureOf(cp)]) {
      members.add(other);
      union(cp, other);
    }
  }
  // Each group sorted, so its first member is its smallest and an orbit is met first at its smallest.
  const groups = new Map<number, number[]>();
  for (const cp of [...members].sort((a, b) => a - b)) {
    const group = groups.get(find(cp));
    if (group === undefined) groups.set(find(cp), [cp]);
    else group.push(cp);
  }
  const jsLinked = (group: number[]): boolean => group.some((cp) => closureOf(cp).length > 1);
  const listed = [...groups.values()]
    .filter((group) => group.some((cp) => !sameSet(closureOf(cp), re2Orbit(cp))))
    .sort((a, b) => Number(jsLinked(b)) - Number(jsLinked(a)) || a[0] - b[0]);
  const out: number[][] = [];
  for (const group of listed) {
    for (const cp of group) {
      const orbit = re2Orbit(cp);
      if (orbit[0] === cp) out.push(orbit);
    }
  }
  return out;
}

/** The constant's source text, wrapped at LINE_WIDTH. */
function printTable(table: number[][]): string {
  const groups = table.map((orbit) => orbit.map(hex).join(' '));
  const lines: string[] = [];
  let line = '';
  for (const [i, group] of groups.entries()) {
    const piece = i < groups.length - 1 ? `${group},` : group;
    if (line !== '' && `  '${line}${piece}' +`.length > LINE_WIDTH) {
      lines.push(`  '${line}' +`);
      line = '';
    }
    line += piece;
  }
  lines.push(`  '${line}';`);
  return `const FOLD_EXCEPTIONS_SRC =\n${lines.join('\n')}\n`;
}

function main(): void {
  const started = performance.now();
  const folding = foldingCodePoints();
  const orbits = re2Orbits(folding);
  for (const [cp, orbit] of orbits) {
    for (const c of orbit) {
      if (!sameSet(orbits.get(c) ?? [], orbit)) throw new Error(`RE2 orbits of U+${hex(cp)} and U+${hex(c)} differ`);
    }
  }
  const closures = new Map<number, number[]>();
  for (let cp = 0; cp <= MAX_CODE_POINT; cp++) {
    if (isSurrogate(cp)) continue;
    const c = closure(cp);
    if (c.length > 1) closures.set(cp, c);
  }
  const table = exceptionOrbits(orbits, closures);

  // The check the engine relies on: closure overridden by the table gives RE2's orbit everywhere.
  const overridden = new Map<number, number[]>();
  for (const orbit of table) for (const cp of orbit) overridden.set(cp, orbit);
  let wrong = 0;
  for (const cp of new Set([...orbits.keys(), ...closures.keys()])) {
    const ours = overridden.get(cp) ?? closures.get(cp) ?? [cp];
    if (!sameSet(ours, orbits.get(cp) ?? [cp])) wrong++;
  }
  const seconds = ((performance.now() - started) / 1000).toFixed(1);
  process.stderr.write(
    `Node ${process.versions.node} (Unicode ${process.versions.unicode}), re2: ${folding.length} code points fold, ` +
      `${[...orbits].filter(([cp, orbit]) => orbit[0] === cp).length} orbits; ${table.length} listed; ${wrong} code points where closure + table differ from RE2; ${seconds} s\n`,
  );
  process.stdout.write(printTable(table));
  if (wrong > 0) process.exitCode = 1;
}

main();
