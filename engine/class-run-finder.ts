/**
 * Finds where a line first holds `min` code points in a row of one class: the whole search for
 * a pattern that is one class or `.` repeated (`\D{10}`, `[^a-z]{8}`, `\pL{4}`, `(?s).`;
 * engine/regex/byte-regex.ts, ClassRun), path 4 of line-matcher.ts. Such a pattern matches most
 * lines of most texts, where RE2 pays a call into its binding for each matching line and V8
 * backtracks through the UTF-8 alternatives of each class; here one loop reads each byte once:
 * an ASCII byte through a table, without a branch on whether it is in the class, and a longer
 * sequence decoded and looked up in the class's ranges.
 *
 * The text must be valid UTF-8 (the line matcher checks), and the class must not hold `\n`, so
 * a run never crosses a line.
 */

import type { ClassRun } from './regex/byte-regex.js';

/**
 * Lines of ASCII and of 2-, 3- and 4-byte characters that `warmUp` searches: a finder run first
 * inside a timed trial (engine/guarded-scan.ts) would be timed while V8 still interprets it.
 */
const WARM_TEXT = Buffer.from('int x = a[0];\n\tb, c;\nné Ω 漢 \u{1d4b3}\n\n'.repeat(64));
const WARM_ROUNDS = 200;
let warmed = false;

export class ClassRunFinder {
  /** 1 for each ASCII byte in the class, else 0. */
  private readonly ascii = new Uint8Array(0x80);
  /** The class's code points from 0x80 on, as ranges [lo, hi, ...], sorted. */
  private readonly wide: Int32Array;
  private readonly min: number;

  constructor(run: ClassRun) {
    this.min = run.min;
    const wide: number[] = [];
    const r = run.ranges;
    for (let i = 0; i < r.length; i += 2) {
      for (let c = r[i]; c <= Math.min(r[i + 1], 0x7f); c++) this.ascii[c] = 1;
      if (r[i + 1] >= 0x80) wide.push(Math.max(r[i], 0x80), r[i + 1]);
    }
    this.wide = Int32Array.from(wide);
  }

  /**
   * The offset of the last byte of the first run of `min` code points of the class in
   * `text[from, end)`, where `from` is a line start; -1 when there is none.
   */
  find(text: Uint8Array, from: number, end: number): number {
    const ascii = this.ascii;
    const min = this.min;
    let run = 0;
    for (let i = from; i < end; i++) {
      const c = text[i];
      if (c < 0x80) {
        run = (run + 1) * ascii[c];
      } else {
        let cp: number;
        if (c < 0xe0) {
          cp = ((c & 0x1f) << 6) | (text[i + 1] & 0x3f);
          i += 1;
        } else if (c < 0xf0) {
          cp = ((c & 0x0f) << 12) | ((text[i + 1] & 0x3f) << 6) | (text[i + 2] & 0x3f);
          i += 2;
        } else {
          cp = ((c & 0x07) << 18) | ((text[i + 1] & 0x3f) << 12) | ((text[i + 2] & 0x3f) << 6) | (text[i + 3] & 0x3f);
          i += 3;
        }
        run = this.holdsWide(cp) ? run + 1 : 0;
      }
      if (run >= min) return i;
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
    for (let round = 0; round < WARM_ROUNDS; round++) {
      for (let pos = 0; pos < text.length; ) {
        const at = this.find(text, pos, text.length);
        if (at === -1) break;
        const nl = text.indexOf(0x0a, at);
        pos = nl === -1 ? text.length : nl + 1;
      }
    }
  }

  /** Whether the class holds `cp` (0x80 or more): a binary search of its ranges. */
  private holdsWide(cp: number): boolean {
    const wide = this.wide;
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
}
