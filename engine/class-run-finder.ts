/**
 * Finds where a line first holds `min` code points in a row of one class, perhaps followed by one
 * of a second: the whole search for a pattern that is one class or `.` repeated (`\D{10}`,
 * `[^a-z]{8}`, `\pL{4}`, `(?s).`), or such a run and then a class (`\s{4,}\w`, an indented line;
 * engine/regex/byte-regex.ts, ClassRun), path 4 of line-matcher.ts. Such a pattern matches most
 * lines of most texts, where RE2 pays a call into its binding for each matching line and V8
 * backtracks through the UTF-8 alternatives of each class; here one loop reads each byte once:
 * an ASCII byte through a table, without a branch on whether it is in the class, and a longer
 * sequence decoded and looked up in the class's ranges.
 *
 * The text must be valid UTF-8 (the line matcher checks), and the classes must not hold `\n`, so
 * a match never crosses a line. A search stops at the first match in a line, and the line matcher
 * goes on from the next line: where a line's match comes early (an indentation), the rest of the
 * line is never read.
 */

import { isAscii } from 'node:buffer';
import type { ClassRun } from './regex/byte-regex.js';

/**
 * Lines of ASCII and of 2-, 3- and 4-byte characters that `warmUp` searches: a finder run first
 * inside a timed trial (engine/guarded-scan.ts) would be timed while V8 still interprets it, or
 * while it makes its code again for a branch the warm-up never took.
 */
const WARM_TEXT = Buffer.from('int x = a[0];\n\tb, c;\nné Ω 漢 \u{1d4b3}\n\n    return abc1;\n'.repeat(64));
const WARM_ROUNDS = 200;
/**
 * Finders that between them take each of `find`'s loops to hits and misses in WARM_TEXT: `[a-z]{3}`
 * and four spaces then `[a-z]` by probes, `[a-zé-ü]{2}` and a character outside ASCII then a
 * space code point by code point, and words of three characters.
 */
const WARM_RUNS: ClassRun[] = [
  { ranges: [0x61, 0x7a], min: 3, after: null, word: null },
  { ranges: [0x20, 0x20], min: 4, after: [0x61, 0x7a], word: null },
  { ranges: [0x61, 0x7a, 0xe9, 0xfc], min: 2, after: null, word: null },
  { ranges: [0x80, 0x10ffff], min: 1, after: [0x20, 0x20], word: null },
  { ranges: [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a], min: 3, after: null, word: 3 },
];
let warmed = false;

/** A class as a table of its ASCII bytes (1 in, 0 out, indexed by any byte) and its code points from 0x80 on, as sorted ranges [lo, hi, ...]. */
interface ClassTable {
  readonly ascii: Uint8Array;
  readonly wide: Int32Array;
}

function tableOf(ranges: readonly number[]): ClassTable {
  const ascii = new Uint8Array(0x100); // 0 from 0x80 on: a byte of a longer sequence
  const wide: number[] = [];
  for (let i = 0; i < ranges.length; i += 2) {
    for (let c = ranges[i]; c <= Math.min(ranges[i + 1], 0x7f); c++) ascii[c] = 1;
    if (ranges[i + 1] >= 0x80) wide.push(Math.max(ranges[i], 0x80), ranges[i + 1]);
  }
  return { ascii, wide: Int32Array.from(wide) };
}

export class ClassRunFinder {
  private readonly ascii: Uint8Array;
  private readonly wide: Int32Array;
  private readonly min: number;
  /** The class that must follow the run, or null. */
  private readonly after: ClassTable | null;
  /** For whole words (ClassRun's `word`): their most characters (-1: no most); else null. */
  private readonly word: number | null;
  /** True for a class of ASCII characters only and runs of 2 or more: `findByProbes` serves every text. */
  private readonly probes: boolean;
  /** Whether `findByProbes` serves the current text (`begin`). */
  private probing: boolean;

  constructor(run: ClassRun) {
    this.min = run.min;
    ({ ascii: this.ascii, wide: this.wide } = tableOf(run.ranges));
    this.after = run.after === null ? null : tableOf(run.after);
    this.word = run.word;
    this.probes = this.wide.length === 0 && this.min > 1;
    this.probing = this.probes;
  }

  /**
   * Starts on a text. Runs of 2 or more of a class holding characters outside ASCII (`[^a-z]{8}`,
   * `\D{10}`, `\pL{4}`) are found by probes too in a text of ASCII alone, most texts of a source
   * tree, where a run of n characters is n bytes and no byte of the text is outside the table.
   */
  begin(text: Uint8Array): void {
    this.probing = this.probes || (this.min > 1 && isAscii(text));
  }

  /**
   * The offset of the last byte of the first match in `text[from, end)` (a run of `min` code
   * points of the class, and the code point after it where there is `after`), where `from` is a
   * line start; -1 when there is none.
   */
  find(text: Uint8Array, from: number, end: number): number {
    if (this.word !== null) return this.findWord(text, from, end, this.word);
    if (this.probing) return this.findByProbes(text, from, end);
    if (this.after !== null) return this.findFollowed(text, from, end, this.after);
    const ascii = this.ascii;
    const min = this.min;
    let run = 0;
    for (let i = from; i < end; i++) {
      const c = text[i];
      if (c < 0x80) {
        run = (run + 1) * ascii[c];
      } else {
        const cp = codePointAt(text, i, c);
        i += trailingBytes(c);
        run = holdsWide(this.wide, cp) ? run + 1 : 0;
      }
      if (run >= min) return i;
    }
    return -1;
  }

  /**
   * `find` for a class of ASCII characters only, or a text of ASCII alone, where a run of `min`
   * code points is `min` bytes: a byte outside the class breaks every run that would hold it, so
   * the search reads one byte in `min` until one is in the class, and then the run around it.
   * Where runs are rare (`\s{4,}\w`, `\d{6}`) most bytes are never read.
   */
  private findByProbes(text: Uint8Array, from: number, end: number): number {
    const ascii = this.ascii;
    const min = this.min;
    const after = this.after;
    let start = from; // the byte before this one is outside the class (or a line's end)
    for (let p = from + min - 1; p < end; ) {
      if (ascii[text[p]] === 0) {
        start = p + 1;
        p += min;
        continue;
      }
      let s = p;
      while (s > start && ascii[text[s - 1]] === 1) s--;
      // Without a class after, the run is read no further than `min`: a dense class's runs last
      // to the line's end.
      let e = p + 1;
      const most = after === null ? s + min : end;
      while (e < most && e < end && ascii[text[e]] === 1) e++;
      if (e - s >= min) {
        if (after === null) return s + min - 1;
        // The class after may share characters with the run's: the code point after `min` of them.
        for (let i = s + min; i < e; i++) if (after.ascii[text[i]] === 1) return i;
        if (e < end) {
          const c = text[e];
          if (c < 0x80) {
            if (after.ascii[c] === 1) return e;
          } else if (holdsWide(after.wide, codePointAt(text, e, c))) return e + trailingBytes(c);
        }
      }
      start = e + 1;
      p = e + min;
    }
    return -1;
  }

  /**
   * `find` for a whole word of `min` to `most` characters (-1: no most). Word characters are
   * ASCII, so any text's word is as many bytes as characters, and probes one byte in `min` find
   * every word long enough; each probe in a word reads the whole of it.
   */
  private findWord(text: Uint8Array, from: number, end: number, most: number): number {
    const ascii = this.ascii;
    const min = this.min;
    for (let p = from + min - 1; p < end; ) {
      if (ascii[text[p]] === 0) {
        p += min;
        continue;
      }
      // The byte before `from` is a line's `\n` (or the text's start), not a word character.
      let s = p;
      while (s > from && ascii[text[s - 1]] === 1) s--;
      let e = p + 1;
      while (e < end && ascii[text[e]] === 1) e++;
      if (e - s >= min && (most < 0 || e - s <= most)) return e - 1;
      p = e + min;
    }
    return -1;
  }

  /** `find` for a run that must be followed by a code point of `after`. */
  private findFollowed(text: Uint8Array, from: number, end: number, after: ClassTable): number {
    const ascii = this.ascii;
    const afterAscii = after.ascii;
    const min = this.min;
    let run = 0;
    for (let i = from; i < end; i++) {
      const c = text[i];
      if (c < 0x80) {
        if (run >= min && afterAscii[c] === 1) return i;
        run = (run + 1) * ascii[c];
      } else {
        const cp = codePointAt(text, i, c);
        i += trailingBytes(c);
        if (run >= min && holdsWide(after.wide, cp)) return i;
        run = holdsWide(this.wide, cp) ? run + 1 : 0;
      }
    }
    return -1;
  }

  /**
   * Runs `find` over a small text as a search would, once a thread, so that V8 has made its
   * machine code before a trial times it (as byte-regex.ts's `toMachineCode` does for V8's form).
   */
  warmUp(): void {
    if (warmed) return;
    warmed = true;
    const text = WARM_TEXT;
    for (const run of WARM_RUNS) {
      const finder = new ClassRunFinder(run);
      for (let round = 0; round < WARM_ROUNDS; round++) {
        for (let pos = 0; pos < text.length; ) {
          const at = finder.find(text, pos, text.length);
          if (at === -1) break;
          const nl = text.indexOf(0x0a, at);
          pos = nl === -1 ? text.length : nl + 1;
        }
      }
    }
  }
}

/** The code point whose sequence starts at `text[i]`, a lead byte `c` of 0xc0 or more. */
function codePointAt(text: Uint8Array, i: number, c: number): number {
  if (c < 0xe0) return ((c & 0x1f) << 6) | (text[i + 1] & 0x3f);
  if (c < 0xf0) return ((c & 0x0f) << 12) | ((text[i + 1] & 0x3f) << 6) | (text[i + 2] & 0x3f);
  return ((c & 0x07) << 18) | ((text[i + 1] & 0x3f) << 12) | ((text[i + 2] & 0x3f) << 6) | (text[i + 3] & 0x3f);
}

/** Bytes after a lead byte `c` of 0xc0 or more in its sequence. */
function trailingBytes(c: number): number {
  return c < 0xe0 ? 1 : c < 0xf0 ? 2 : 3;
}

/** Whether `wide` (a class's ranges from 0x80 on) holds `cp`: a binary search. */
function holdsWide(wide: Int32Array, cp: number): boolean {
  let lo = 0;
  let hi = wide.length / 2 - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (cp < wide[2 * mid]) hi = mid - 1;
    else if (cp > wide[2 * mid + 1]) lo = mid + 1;
    else return true;
  }
  return false;
}
