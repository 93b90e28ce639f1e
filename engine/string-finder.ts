/**
 * Finds the leftmost occurrence of any of a few byte strings: the search behind grep's literal
 * patterns and its required-literal prefilter (line-matcher.ts, paths 1 and 2). Under `-i` the
 * prefilter uses FoldedRunFinder or RegExpFinder (at the end) instead.
 *
 * Each string is searched for in one of two ways, whichever the cost model below expects to be
 * cheaper on the texts searched so far:
 *
 * 1. Anchored: Buffer.indexOf of the (at most TAIL_BYTES) bytes of the string that start at a
 *    rare byte of it (the anchor), then a comparison of the whole string around the hit.
 *    Node's indexOf of a needle shorter than 7 bytes is memchr on its first byte plus a
 *    comparison at each occurrence; a longer needle soon gives up memchr for
 *    Boyer-Moore-Horspool, which jumps at most the needle's length. So the cost is about one
 *    memchr restart per occurrence of the anchor: little when it is rare, much when it is not.
 *    A hit of the tail that is not an occurrence also returns to JS: an anchor near the
 *    string's end leaves a short tail that hits often (`printk` anchored at `k`).
 * 2. In a set: all the set's strings in one pass, Wu-Manber's multi-pattern Horspool over
 *    2-byte blocks (LiteralSet), about 5 ns per step whatever the bytes are, a step jumping up
 *    to the shortest string's length − 1. indexOf per string would scan the text once each.
 *
 * Cost model, in ns per byte of text (fitted on Linux candidates held in memory, ±30%):
 *   anchored at a byte of frequency f, with a tail of frequency t (the product of its bytes'):
 *     ANCHOR_SCAN + ANCHOR_HIT × f + RETURN_HIT × t
 *   a set whose shortest string has m bytes: SET_STEP / (m − 1)
 * Each string is anchored at its cheapest byte; then the k strings most expensive to anchor
 * go into one set, for the k (0 included) that minimises the total.
 *
 * Byte frequencies are sampled from the texts searched, all along: up to FIRST_SAMPLE bytes
 * from the middle of the first, then SAMPLE_SLICE bytes from a text after every SAMPLE_EVERY
 * bytes of text (0.4% of the text, a few percent of a search's time). The plan is remade every
 * REPLAN_BYTES of sample, and the counts then halved, so that it follows the texts as they
 * change: grep reads its candidates in path order, and the Linux candidates of
 * `static int \w+_probe\(struct platform_device` begin with prose in /Documentation, where `(`
 * is much rarer than over all of them. A fixed table would mislead too: the candidates share
 * the pattern's trigrams and so its bytes, which are commoner there than in the whole tree.
 */

import { constants } from 'node:buffer';
import RE2 from 're2';
import { literalPattern } from './regex/bytes.js';
import type { CaseInsensitiveRequired } from './regex/required.js';

const MAX_STRING_LENGTH = constants.MAX_STRING_LENGTH;

/** Bytes of a string from its anchor that indexOf is given (see 1. above: below 7). */
const TAIL_BYTES = 6;

// The cost model (module comment): fit with bench/engine-phases.ts (docs/benchmarks.md, "Engine level").
/** Anchored search: ns per byte scanned by memchr, and per occurrence of the anchor byte. */
const ANCHOR_SCAN = 0.05;
const ANCHOR_HIT = 20;
/** Anchored search: ns per hit of the tail returned to JS (indexOf's own cost, a comparison). */
const RETURN_HIT = 60;

/** Set search: ns per step of the window (a step jumps up to the shortest length − 1). */
const SET_STEP = 5;

/** Bytes sampled from the middle of the first text, then from one text in SAMPLE_EVERY bytes. */
const FIRST_SAMPLE = 16 * 1024;
const SAMPLE_SLICE = 512;
const SAMPLE_EVERY = 128 * 1024;

/** The plan is remade after this many bytes of sample. */
const REPLAN_BYTES = 8 * 1024;

/** One way of searching: the leftmost position ≥ `from` where one of its strings occurs, or -1. */
interface Searcher {
  indexIn(text: Buffer, from: number): number;
}

/**
 * What LineMatcher's prefilter looks for lines with: `begin(text)` for each text, then
 * `find(text, from)` with non-decreasing `from` (the same bytes may come in another Buffer):
 * the leftmost position ≥ `from` of something every match holds, or -1.
 */
export interface Finder {
  begin(text: Uint8Array): void;
  find(text: Buffer, from: number): number;
}

/**
 * The leftmost occurrence of any of a fixed list of strings. Usage: `begin(text)` for each text,
 * then `find(text, from)` with non-decreasing `from` (the same bytes may come in another Buffer).
 */
export class StringFinder implements Finder {
  private readonly strings: Buffer[];
  /** Byte counts of the sample (halved at every plan), and their sum. */
  private readonly counts = new Uint32Array(256);
  private sampled = 0;
  /** Bytes of text begun since the last sample. */
  private unsampled = 0;
  /** The sample size at which the plan is remade next. */
  private planAt = 0;
  private searchers: Searcher[] = [];
  /** Where each searcher's next occurrence is (-1: nowhere, -2: not searched yet). */
  private nextAt = new Int32Array(0);
  /** Sets built so far, by their strings' indexes: plans change while sampling. */
  private readonly sets = new Map<string, LiteralSet>();

  /** Prepares a search for `strings` (none empty). */
  constructor(strings: readonly Uint8Array[]) {
    if (strings.length === 0 || strings.some((s) => s.byteLength === 0)) throw new Error('StringFinder: strings must be non-empty');
    this.strings = strings.map((s) => Buffer.from(s.buffer, s.byteOffset, s.byteLength));
    this.plan();
  }

  /** How each string is searched now: `set`, or `anchored at <offset>` (for tests and benchmarks). */
  ways(): string[] {
    const ways = this.strings.map(() => 'set');
    for (const s of this.searchers) if (s instanceof AnchoredString) ways[this.strings.indexOf(s.string)] = `anchored at ${s.anchor}`;
    return ways;
  }

  /** Starts on a new text: forgets the positions found so far, samples its bytes now and then. */
  begin(text: Uint8Array): void {
    if (this.sampled === 0) {
      this.sample(text, FIRST_SAMPLE);
      this.plan();
    } else {
      this.unsampled += text.byteLength;
      if (this.unsampled >= SAMPLE_EVERY) {
        this.unsampled = 0;
        this.sample(text, SAMPLE_SLICE);
        if (this.sampled >= this.planAt) this.plan();
      }
    }
    this.nextAt.fill(-2);
  }

  /** The leftmost position ≥ `from` at which one of the strings occurs in `text` (whole, inside it), or -1. */
  find(text: Buffer, from: number): number {
    return nearest(this.searchers, this.nextAt, text, from);
  }

  /** Adds up to `bytes` bytes from the middle of `text` to the byte counts. */
  private sample(text: Uint8Array, bytes: number): void {
    const n = Math.min(bytes, text.byteLength);
    const from = (text.byteLength - n) >>> 1;
    const counts = this.counts;
    for (let i = from; i < from + n; i++) counts[text[i]]++;
    this.sampled += n;
  }

  /**
   * Chooses each string's way of searching from the byte counts (see the module comment), then
   * halves the counts so that the next plan weighs the texts sampled since more.
   */
  private plan(): void {
    const total = this.sampled + 256;
    // Add-one smoothing: a byte not seen is rare, not absent.
    const freq = (b: number) => (this.counts[b] + 1) / total;
    const anchors: number[] = [];
    const costs: number[] = [];
    for (const s of this.strings) {
      let best = 0;
      let bestCost = Infinity;
      for (let d = 0; d < s.byteLength; d++) {
        let tail = 1;
        for (let j = d; j < Math.min(d + TAIL_BYTES, s.byteLength); j++) tail *= freq(s[j]);
        const cost = ANCHOR_SCAN + ANCHOR_HIT * freq(s[d]) + RETURN_HIT * tail;
        if (cost < bestCost) {
          bestCost = cost;
          best = d;
        }
      }
      anchors.push(best);
      costs.push(bestCost);
    }
    // The k most expensive to anchor go to the set; the rest stay anchored.
    const order = this.strings.map((_, k) => k).sort((a, b) => costs[b] - costs[a]);
    let rest = costs.reduce((sum, c) => sum + c, 0);
    let bestCost = rest;
    let bestK = 0;
    let shortest = Infinity;
    for (let k = 1; k <= order.length; k++) {
      rest -= costs[order[k - 1]];
      shortest = Math.min(shortest, this.strings[order[k - 1]].byteLength);
      if (shortest < 2) break; // a set needs 2-byte blocks
      const cost = SET_STEP / (Math.min(shortest, MAX_WINDOW) - 1) + rest;
      if (cost < bestCost) {
        bestCost = cost;
        bestK = k;
      }
    }
    const members = order.slice(0, bestK).sort((a, b) => a - b);
    const searchers: Searcher[] = [];
    for (let k = 0; k < this.strings.length; k++) {
      if (!members.includes(k)) searchers.push(new AnchoredString(this.strings[k], anchors[k]));
    }
    if (members.length > 0) {
      const key = members.join(',');
      let set = this.sets.get(key);
      if (set === undefined) {
        set = new LiteralSet(members.map((k) => this.strings[k]));
        this.sets.set(key, set);
      }
      searchers.push(set);
    }
    this.searchers = searchers;
    this.nextAt = new Int32Array(searchers.length).fill(-2);
    let sum = 0;
    for (let b = 0; b < 256; b++) sum += this.counts[b] >>>= 1;
    this.sampled = sum;
    this.planAt = sum + REPLAN_BYTES;
  }
}

/** One string found through indexOf of its bytes from `anchor` on (way 1 of the module comment). */
class AnchoredString implements Searcher {
  private readonly tail: Buffer;
  /** True when the tail is the whole string: a hit needs no comparison. */
  private readonly whole: boolean;

  constructor(
    readonly string: Buffer,
    readonly anchor: number,
  ) {
    this.tail = string.subarray(anchor, anchor + TAIL_BYTES);
    this.whole = anchor === 0 && string.byteLength <= TAIL_BYTES;
  }

  indexIn(text: Buffer, from: number): number {
    const anchor = this.anchor;
    let at = from + anchor;
    for (;;) {
      at = text.indexOf(this.tail, at);
      if (at === -1) return -1;
      if (this.whole || occursAt(this.string, text, at - anchor)) return at - anchor;
      at++;
    }
  }
}

/** Longest window of a set: its shifts are bytes. */
const MAX_WINDOW = 255;

/**
 * Strings (at least 2 bytes each) found in one pass, Wu-Manber's multi-pattern Horspool over
 * 2-byte blocks (S. Wu and U. Manber, "A fast algorithm for multi-pattern searching", 1994).
 *
 * A window of `width` bytes (the shortest string's length, at most MAX_WINDOW) slides over the
 * text. The block of its last two bytes indexes `shift`: the distance from that block's
 * rightmost occurrence within the first `width` bytes of any string to the window's end
 * (`width - 1` when it occurs in none). No string starts less than that far ahead, so the
 * window jumps. At distance 0, the strings whose first `width` bytes end with that block
 * (chained from `head`) are compared at the window's start. Windows are visited by ascending
 * start, so the first comparison that succeeds is the leftmost occurrence. Blocks of 3 bytes
 * (hashed) jumped no further on C source and cost more per step.
 */
export class LiteralSet implements Searcher {
  private readonly strings: Buffer[];
  private readonly width: number;
  /** By block (first byte << 8 | second): how far the window may jump. */
  private readonly shift = new Uint8Array(65536);
  /** By block: 1 + the first string whose window ends with it (0: none); `link` chains the rest the same way. */
  private readonly head = new Uint16Array(65536);
  private readonly link: Uint16Array;

  /** Compiles `strings` (at most 65535, each at least 2 bytes). */
  constructor(strings: readonly Buffer[]) {
    if (strings.length > 0xffff || strings.some((s) => s.byteLength < 2)) throw new Error('LiteralSet: at most 65535 strings of 2 bytes or more');
    this.strings = [...strings];
    const width = Math.min(MAX_WINDOW, ...strings.map((s) => s.byteLength));
    this.width = width;
    this.shift.fill(width - 1);
    this.link = new Uint16Array(strings.length);
    for (let k = strings.length - 1; k >= 0; k--) {
      const s = strings[k];
      for (let j = 1; j < width; j++) {
        const block = (s[j - 1] << 8) | s[j];
        if (width - 1 - j < this.shift[block]) this.shift[block] = width - 1 - j;
      }
      const last = (s[width - 2] << 8) | s[width - 1];
      this.link[k] = this.head[last];
      this.head[last] = k + 1;
    }
  }

  indexIn(text: Buffer, from: number): number {
    const shift = this.shift;
    const width = this.width;
    const n = text.byteLength;
    let i = from + width - 1; // the window's last byte
    while (i < n) {
      const block = (text[i - 1] << 8) | text[i];
      const s = shift[block];
      if (s !== 0) {
        i += s;
        continue;
      }
      const start = i - width + 1;
      for (let k = this.head[block]; k !== 0; k = this.link[k - 1]) {
        if (occursAt(this.strings[k - 1], text, start)) return start;
      }
      i++;
    }
    return -1;
  }
}

/**
 * The leftmost position ≥ `from` at which one of `searchers` finds its string in `text`, or -1.
 * Each searcher's next occurrence is remembered in `nextAt` (-1: nowhere, -2: not searched yet;
 * a position, so it holds for another Buffer with the same bytes), so that a rare string is not
 * searched for at every call.
 */
function nearest(searchers: readonly Searcher[], nextAt: Int32Array, text: Buffer, from: number): number {
  let best = -1;
  for (let k = 0; k < nextAt.length; k++) {
    let at = nextAt[k];
    if (at !== -1 && at < from) {
      at = searchers[k].indexIn(text, from);
      nextAt[k] = at;
    }
    if (at !== -1 && (best === -1 || at < best)) best = at;
  }
  return best;
}

/** True when `s` occurs in `text` at `start` (≥ 0). */
function occursAt(s: Uint8Array, text: Uint8Array, start: number): boolean {
  if (start + s.byteLength > text.byteLength) return false;
  for (let j = 0; j < s.byteLength; j++) if (text[start + j] !== s[j]) return false;
  return true;
}

/**
 * The leftmost match of a RegExp in a text read as Latin-1, one UTF-16 unit per byte, so that
 * an index is a byte offset: for case-insensitive literals (`caseInsensitiveRequired`,
 * engine/regex/required.ts). V8's compiled RegExp skips through a one-byte string faster than RE2
 * scans case-insensitively, copy included. A text is searched with the ASCII variants alone
 * unless it holds the bytes of a variant outside ASCII (a memchr-speed look per text).
 * Measure with bench/engine-phases.ts -i (docs/benchmarks.md, "Case-insensitive search").
 */
export class RegExpFinder implements Finder {
  private view = '';
  /** The text is longer than a string can be: every position is a hit. */
  private whole = false;
  /** The RegExp for the current text. */
  private re: RegExp;

  constructor(private readonly required: CaseInsensitiveRequired) {
    this.re = required.ascii;
  }

  begin(text: Uint8Array): void {
    this.whole = text.byteLength > MAX_STRING_LENGTH;
    if (this.whole) {
      this.view = '';
      return;
    }
    const bytes = Buffer.from(text.buffer, text.byteOffset, text.byteLength);
    this.view = bytes.toString('latin1');
    this.re = this.required.beyond.some((b) => bytes.indexOf(b) >= 0) ? this.required.full : this.required.ascii;
  }

  find(_text: Buffer, from: number): number {
    if (this.whole) return from;
    this.re.lastIndex = from;
    const m = this.re.exec(this.view);
    return m === null ? -1 : m.index;
  }
}

/**
 * The leftmost occurrence, in any case, of one of a few strings whose characters have case
 * variants in ASCII alone (`CaseInsensitiveRequired.runs`: no k or s), found by RE2 in the
 * text's bytes, one pass per string: RE2 skips ahead to a case-insensitive literal whose first
 * character folds within ASCII at memory speed, and the text is not copied. Every variant of a
 * string is as long as it. Where the runs are one or two, these passes cost less than
 * RegExpFinder's copy into a string, whose time also varies with page faults.
 * Measure with bench/engine-phases.ts -i (docs/benchmarks.md, "Case-insensitive search").
 */
export class FoldedRunFinder implements Finder {
  private readonly searchers: FoldedRun[];
  /** Where each string next occurs (see `nearest`). */
  private readonly nextAt: Int32Array;

  constructor(runs: readonly string[]) {
    this.searchers = runs.map((run) => new FoldedRun(run));
    this.nextAt = new Int32Array(runs.length).fill(-2);
  }

  begin(): void {
    this.nextAt.fill(-2);
  }

  find(text: Buffer, from: number): number {
    return nearest(this.searchers, this.nextAt, text, from);
  }
}

/** One string of a FoldedRunFinder: RE2 finds it in any case. */
class FoldedRun implements Searcher {
  private readonly re: RE2;

  constructor(private readonly run: string) {
    this.re = new RE2(`(?i)${literalPattern(run)}`, 'g');
  }

  indexIn(text: Buffer, from: number): number {
    this.re.lastIndex = from;
    return this.re.test(text) ? this.re.lastIndex - this.run.length : -1;
  }
}
