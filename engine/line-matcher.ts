/**
 * Finds the lines of a document that a regex matches, the way ripgrep reports them.
 *
 * The pattern comes compiled (engine/regex/pattern.ts): read once, and outside multiline mode
 * rewritten by ripgrep's line rule so that it cannot match `\n` and `\A \z` are line edges.
 * Its facts choose one of four paths; each reports a line once and then resumes at the next
 * line's start:
 *
 * 1. Literal alternatives (`foo|bar\(`) need no regex: the leftmost occurrence of any of them
 *    (StringFinder, string-finder.ts) is the leftmost match.
 * 2. Required-literal prefilter: when every match contains one of a few strings (the facts'
 *    `required`, e.g. `_probe(struct platform_device` for
 *    `static int \w+_probe\(struct platform_device`), a StringFinder finds the next line
 *    holding one and RE2 searches, as in path 3, a window of whole lines from there
 *    (WINDOW_BYTES, cut out of the text so RE2 stops at its end). Lines holding none are
 *    passed over at memory speed. Under `-i` the strings may come in any case
 *    (`caseInsensitiveRequired`): RE2 finds the longest run without k or s of each of one or
 *    two strings (FoldedRunFinder), else a RegExpFinder finds them all; RE2 skips ahead to a
 *    literal prefix by itself under `-i` too, unless the prefix starts with k or s.
 *    It reports the lines path 3 would: a match inside a line contains one of the strings
 *    (none contains `\n`), and `^ $ \b` read a window's edges, which are line edges, as they
 *    read them in the whole text. A pattern that reads the text's own edges takes path 3 (only
 *    in multiline mode, after the line rule), and so does one whose one string is its literal
 *    prefix, which RE2 skips to by itself as fast.
 * 3. Otherwise RE2 searches the whole document buffer at once (a Buffer, so `lastIndex` counts
 *    bytes) and each hit is mapped to its line through the stored line starts. This is exact
 *    because RE2 returns the leftmost match and a match inside one line is also a match in the
 *    whole buffer. After the line rule no hit can span lines, so `test()` (which only moves
 *    `lastIndex` to the hit's end, allocating nothing) is enough. Only a pattern the rule
 *    cannot narrow (`\C`, any byte) takes `exec()`: a hit that runs past its line's end is
 *    checked again on that line alone. When the caller allows it (`useV8`, which
 *    engine/guarded-scan.ts turns on under a time limit), V8 takes RE2's place here: the
 *    pattern's byte form (engine/regex/byte-regex.ts) over the text copied into Latin-1
 *    strings (`view`) of whole lines, a piece of at most PIECE_BYTES at a time, for texts of
 *    valid UTF-8 up to MAX_V8_TEXT_BYTES, and, when the pattern has `^` or `$`, without `\r`.
 * 4. A pattern that path 3 would take and that is one class or `.` repeated (`\D{10}`,
 *    `[^a-z]{8}`, `\pL{4}`, `(?s).`), or a whole word (`\b\w{3}\b`: the pattern's `classRun`),
 *    needs neither engine on a text of valid UTF-8: ClassRunFinder (class-run-finder.ts) reads
 *    each byte at most once and reports where a line first holds the run (or the word). Where
 *    such a pattern matches most lines it takes half the time of the faster engine; where
 *    matches are rare (`\p{Greek}`, `\d{6}`) RE2 skips faster (docs/benchmarks.md, "a run of
 *    one class"). So it is one more way beside RE2 in
 *    engine/guarded-scan.ts's timed trial (`ways`, `useV8`), tried before V8.
 *
 * In multiline mode (`-U`, dot matches newline) matches may span lines and every line a match
 * touches is a matching line, as `rg -U` prints them.
 *
 * No path decodes text (path 4 reads a code point's bytes, never a string). Paths 1, 3 and 4
 * allocate nothing per match on the fast path; path 2 allocates one subarray per RE2 call;
 * V8's path 3 copies the text once.
 */

import { constants, isUtf8 } from 'node:buffer';
import RE2 from 're2';
import { ClassRunFinder } from './class-run-finder.js';
import { lineEndOf, lineIndexAt, lineIndexFrom, type LineStarts } from './doc-text.js';
import { foldsWithinAscii } from './regex/fold.js';
import { type ByteRegex, type ClassRun, toMachineCode } from './regex/byte-regex.js';
import type { CompiledPattern, PatternFacts } from './regex/pattern.js';
import { caseInsensitiveRequired } from './regex/required.js';
import { FoldedRunFinder, RegExpFinder, StringFinder, type Finder } from './string-finder.js';

/**
 * The largest text V8 searches: its copy as a string lives on the read thread's heap while it
 * is searched (and a string holds at most `constants.MAX_STRING_LENGTH` units).
 */
const MAX_V8_TEXT_BYTES = Math.min(64 << 20, constants.MAX_STRING_LENGTH);
/**
 * The most text V8 reads as one string, unless one line is longer. A string of more than V8's
 * largest regular object (128 KiB) goes to its large-object space, fresh pages each time: copying
 * 1 MB that way costs about 6 ns a byte, against 0.1 in pieces of 64 KB (docs/benchmarks.md,
 * "Edges of a pattern, and V8's text in pieces").
 */
const PIECE_BYTES = 64 << 10;
const NEWLINE = 0x0a;
const CARRIAGE_RETURN = 0x0d;

/**
 * Path 3 takes the next matching lines as one run (`nextRun`) once this many hits in a row each
 * fell on the line after the one before (or after a line that broke a run), and again only after
 * as many more once two runs in a row failed at once: a run that ends at once costs one RE2 call
 * more than `search` would have made. Measure with bench/grep-no-trigram.ts.
 */
const RUN_STREAK = 4;

/**
 * Path 2 hands RE2 the lines from a required string's line to the end of the line this many
 * bytes further on. One RE2 call costs about as much as RE2 scanning a kilobyte: where the
 * strings are dense, one call covers many lines (a call per line can be slower than path 3),
 * and where they are rare, a failed line costs about one call more.
 * Fit with bench/engine-phases.ts (docs/benchmarks.md, "Engine level").
 */
const WINDOW_BYTES = 1024;

/** A way beside RE2 for path 3: path 4 (a run of one class) or V8. */
export type BesideWay = 'runs' | 'v8';

/**
 * An RE2 regex plus the state of a scan over one document. Usage: `begin(text, starts)`, then
 * `next()` until false; each true reports matching lines `first..last` (0-based, inclusive;
 * equal unless multiline). After the text buffer has been re-read, `rebind` continues the scan.
 */
export class LineMatcher {
  /** True when hits are located with `test()` alone (see the module comment). */
  readonly fast: boolean;
  /** True when lines are found through required strings first (path 2 of the module comment). */
  readonly prefiltered: boolean;
  /** What RE2 searches for, its flags included: the same for every matcher of the same search. */
  readonly key: string;
  /** First matching line of the current hit (0-based). */
  first = 0;
  /** Last matching line of the current hit (0-based, inclusive). */
  last = 0;

  private readonly re: RE2;
  /** Path 4's class and run length (engine/regex/byte-regex.ts, computed at the first call), where path 3 serves; else null. */
  private classRun: (() => ClassRun | null) | null;
  /** Path 4's finder, made at the first text it searches. */
  private runFinder: ClassRunFinder | null = null;
  /** True while path 4 searches the current text. */
  private byRuns = false;
  /** Path 3's regex for V8 (engine/regex/byte-regex.ts, compiled at the first call), where path 3 serves; else null. */
  private readonly byteRegex: (() => ByteRegex | null) | null;
  /** See `useV8`. */
  private v8 = false;
  /** Which way `useV8` allows beside RE2 (see `ways`); null: the first of `ways`. */
  private way: BesideWay | null = null;
  /**
   * While V8 searches the current text (path 3): the piece of it read as Latin-1, and where that
   * piece starts and ends in the text (a line start, and a line start or the text's end); else null.
   */
  private view: string | null = null;
  private viewStart = 0;
  private viewEnd = 0;
  private v8Regex: RegExp | null = null;
  private readonly multiline: boolean;
  /** True for a pattern of literal alternatives (path 1): `finder` finds its matches. */
  private readonly literal: boolean;
  /** Path 1: the alternatives; path 2: the required strings; otherwise null. */
  private readonly finder: Finder | null;
  private text: Buffer = Buffer.alloc(0);
  private starts: LineStarts = new Uint32Array(0);
  private pos = 0;
  private end = 0; // where searching stops: the text length, or 0 past the last line
  private windowEnd = 0; // path 2: the end of the current window of lines
  /**
   * Path 3: the pattern of runs of matching lines (see `nextRun`), and its sticky regex, compiled
   * the first time hits are dense (a Unicode class can take milliseconds); null for the other
   * paths, or once RE2 refused it.
   */
  private runsSource: string | null;
  private runs: RE2 | null = null;
  private readonly runsFlags: string;
  /** The last line reported in this text, and how many hits in a row were on consecutive lines. */
  private lastLine = -1;
  private streak = 0;
  /** The line at which the last run failed (a hit just after it still counts as consecutive). */
  private broken = -2;
  /** Runs in a row that failed at once. */
  private misses = 0;

  /** A matcher for a compiled pattern (compilePattern, engine/regex/pattern.ts); it owns the pattern's RE2 object. */
  constructor(pattern: CompiledPattern) {
    const facts = pattern.facts;
    this.re = pattern.regex;
    this.key = `${facts.re2Flags}/${facts.re2Source}`;
    this.multiline = facts.multiline;
    this.fast = !facts.multiline && !facts.canMatchNewline;
    const alternatives = facts.literalAlternatives;
    this.literal = alternatives !== null;
    this.finder = alternatives === null ? prefilter(facts) : new StringFinder(alternatives);
    this.prefiltered = this.finder !== null && !this.literal;
    this.runsSource = this.finder === null ? facts.lineRuns : null;
    this.byteRegex = this.finder === null && this.fast ? pattern.byteRegex : null;
    this.classRun = this.finder === null && this.fast ? pattern.classRun : null;
    this.runsFlags = facts.re2Flags.replace('g', 'y');
  }

  /** Starts scanning `text` (one document's text) whose line starts are `starts`. */
  begin(text: Buffer, starts: LineStarts): void {
    this.text = text;
    this.starts = starts;
    this.pos = 0;
    this.windowEnd = 0;
    this.lastLine = -1;
    this.streak = 0;
    this.broken = -2;
    this.misses = 0;
    this.end = starts.length === 0 ? 0 : text.byteLength;
    this.finder?.begin(text);
    this.view = null;
    const way = this.v8 ? this.wayTaken() : undefined;
    this.byRuns = way === 'runs' && this.end > 0 && isUtf8(text);
    if (this.byRuns) {
      this.runFinder!.begin(text);
      this.v8Regex = null;
      return;
    }
    const v8 = way === 'v8' ? this.byteForm() : null;
    const byV8 = v8 !== null && this.end > 0 && this.end <= MAX_V8_TEXT_BYTES && !(v8.anchors && text.includes(CARRIAGE_RETURN)) && isUtf8(text);
    this.v8Regex = byV8 ? v8.regex : null;
    if (byV8) this.readPiece(0);
  }

  /**
   * The ways path 3 may leave RE2 for (`useV8`), in the order a trial tries them: path 4 for a
   * run of one class, then V8 for a pattern with a form for it (engine/regex/byte-regex.ts).
   */
  get ways(): BesideWay[] {
    const ways: BesideWay[] = [];
    if (this.classRunFinder() !== null) ways.push('runs');
    if (this.byteForm() !== null) ways.push('v8');
    return ways;
  }

  /** Which of `ways` `useV8` allows from now on (the first of them until this is called). */
  takeWay(way: BesideWay): void {
    this.way = way;
  }

  /** The way `useV8` allows: the one taken, else the first of `ways` (undefined when there is none). */
  private wayTaken(): BesideWay | undefined {
    return this.way ?? this.ways[0];
  }

  private classRunFinder(): ClassRunFinder | null {
    if (this.runFinder === null && this.classRun !== null) {
      const run = this.classRun();
      if (run === null) this.classRun = null;
      else this.runFinder = new ClassRunFinder(run);
    }
    return this.runFinder;
  }

  /** Has V8 make the machine code of the way on trial (V8's form, `toMachineCode`, or path 4's finder) before a search times it. */
  prepareV8(): void {
    const way = this.wayTaken();
    if (way === 'runs') this.classRunFinder()?.warmUp();
    if (way !== 'v8') return;
    const form = this.byteForm();
    if (form !== null) toMachineCode(form);
  }

  private byteForm(): ByteRegex | null {
    return this.byteRegex === null ? null : this.byteRegex();
  }

  /**
   * Whether the texts begun from now on may be searched the way `takeWay` chose beside RE2: V8,
   * or path 4 for a run of one class. Off unless a caller that bounds V8's time
   * (engine/guarded-scan.ts) turns it on: V8 backtracks, and path 4, which reads every byte, is
   * slower than RE2 where matches are rare.
   */
  useV8(on: boolean): void {
    this.v8 = on;
  }

  /** True while path 4 (a run of one class) searches the current text. */
  get searchesByRuns(): boolean {
    return this.byRuns;
  }

  /** True while V8 searches the current text (path 3 with engine/regex/byte-regex.ts). */
  get searchesWithV8(): boolean {
    return this.view !== null;
  }

  /** Continues the current scan over a re-read copy of the same document. */
  rebind(text: Buffer, starts: LineStarts): void {
    this.text = text;
    this.starts = starts;
  }

  /** Advances to the next matching line(s); false when the document has no more. */
  next(): boolean {
    if (this.multiline) return this.nextMultiline();
    if (this.finder === null) {
      if (this.byRuns) return this.nextByRuns(this.runFinder!);
      if (this.view !== null) return this.searchV8(this.v8Regex!);
      // RUN_STREAK hits in a row on consecutive lines: the lines are dense, take the next as a run.
      if (this.streak >= RUN_STREAK && this.runsSource !== null && this.nextRun()) return true;
      return this.search(0, this.end);
    }
    if (this.literal) return this.nextLiteral(this.finder);
    // Path 2: a window of whole lines from the line of the next required string. A line holding
    // none has no match (so an empty line never matches here and may end a window unsearched).
    const starts = this.starts;
    while (this.pos < this.end) {
      const at = this.finder.find(this.text, this.pos);
      if (at === -1 || at >= this.end) break;
      // After a hit, the rest of its window is searched first if a string occurs there.
      if (at < this.windowEnd) {
        if (this.search(this.pos, this.windowEnd)) return true;
        continue;
      }
      const fromLine = this.lineAt(at);
      const from = starts[fromLine];
      const last = lineIndexFrom(starts, Math.min(from + WINDOW_BYTES, this.end - 1), fromLine);
      this.pos = from;
      this.windowEnd = lineEndOf(this.text, starts, last);
      if (this.search(from, this.windowEnd)) return true;
    }
    this.pos = this.end;
    return false;
  }

  /**
   * Searches `text[from, to)` (whole lines; the whole text when `to` is its end) with RE2 from
   * `pos` (see the module comment, path 3). At a hit, reports its line; otherwise moves `pos`
   * to the line after `to` and returns false.
   */
  private search(from: number, to: number): boolean {
    const re = this.re;
    const text = this.text;
    const starts = this.starts;
    const len = this.end;
    // A window is cut out so RE2 stops at its end; `^ $ \b` read its edges as line edges.
    const buf = from === 0 && to === text.byteLength ? text : text.subarray(from, to);
    while (this.pos < to) {
      re.lastIndex = this.pos - from;
      let line: number;
      if (this.fast) {
        if (!re.test(buf)) break;
        line = this.lineOfHit(re.lastIndex + from);
        if (line === -1) break;
      } else {
        const m = re.exec(buf);
        if (m === null) break;
        const s = m.index + from;
        const e = s + m[0].length;
        let b = s;
        if (b >= len) {
          if (text[len - 1] === NEWLINE) break;
          b = len - 1;
        }
        line = this.lineAt(b);
        const lineEnd = lineEndOf(text, starts, line);
        if (e > lineEnd) {
          // The hit runs through the newline: ripgrep would only match within the line.
          re.lastIndex = 0;
          const inLine = re.test(text.subarray(starts[line], lineEnd));
          if (!inLine) {
            this.pos = line + 1 < starts.length ? starts[line + 1] : len;
            continue;
          }
        }
      }
      return this.hit(line, len);
    }
    this.pos = to < len ? to + 1 : len;
    return false;
  }

  /**
   * The line of a hit that ends at `e` and lies in one line (path 3's fast case): a non-empty
   * hit's last byte is in it; an empty hit at `e` is in the line containing `e`, unless `e` is
   * the end of a text ending with `\n` (then -1: no line).
   */
  private lineOfHit(e: number): number {
    const text = this.text;
    const len = this.end;
    let b = e > this.pos && text[e - 1] !== NEWLINE ? e - 1 : e;
    if (b >= len) {
      if (text[len - 1] === NEWLINE) return -1;
      b = len - 1;
    }
    return this.lineAt(b);
  }

  /** Path 3 by V8, piece by piece of the text (see the module comment). */
  private searchV8(re: RegExp): boolean {
    const len = this.end;
    while (this.pos < len) {
      if (this.pos >= this.viewEnd) this.readPiece(this.pos);
      re.lastIndex = this.pos - this.viewStart;
      if (!re.test(this.view!)) {
        this.pos = this.viewEnd;
        continue;
      }
      const e = re.lastIndex + this.viewStart;
      // A piece ends after a `\n`, and no hit holds one: a hit at its very end is an empty one
      // at the next line's start, which the next piece reads with that line.
      if (e === this.viewEnd && e < len) {
        this.pos = e;
        continue;
      }
      const line = this.lineOfHit(e);
      if (line === -1) break;
      return this.hit(line, len);
    }
    this.pos = len;
    return false;
  }

  /** Reads as `view` the whole lines from `from` (a line start) on, PIECE_BYTES of them or one longer line. */
  private readPiece(from: number): void {
    const text = this.text;
    const len = this.end;
    let to = len;
    if (from + PIECE_BYTES < len) {
      const nl = text.lastIndexOf(NEWLINE, from + PIECE_BYTES - 1);
      const longLine = nl < from ? text.indexOf(NEWLINE, from + PIECE_BYTES) : nl;
      to = longLine === -1 ? len : longLine + 1;
    }
    this.view = text.toString('latin1', from, to);
    this.viewStart = from;
    this.viewEnd = to;
  }

  /** Path 4: the line where the class's next run of its length ends is the next hit. */
  private nextByRuns(finder: ClassRunFinder): boolean {
    const len = this.end;
    const at = this.pos < len ? finder.find(this.text, this.pos, len) : -1;
    if (at === -1) {
      this.pos = len;
      return false;
    }
    return this.hit(this.lineAt(at), len);
  }

  /** Path 1: the line of the leftmost occurrence of any literal alternative is the next hit. */
  private nextLiteral(finder: Finder): boolean {
    const len = this.end;
    const at = this.pos < len ? finder.find(this.text, this.pos) : -1;
    if (at === -1 || at >= len) {
      this.pos = len;
      return false;
    }
    return this.hit(this.lineAt(at), len);
  }

  /** The line holding byte `pos` of the text: no hit lies before the line after the last one reported. */
  private lineAt(pos: number): number {
    return lineIndexFrom(this.starts, pos, this.lastLine + 1);
  }

  /** Reports `line` as the current hit and moves the scan to the next line. */
  private hit(line: number, len: number): true {
    this.first = line;
    this.last = line;
    this.streak = line === this.lastLine + 1 || line === this.broken + 1 ? this.streak + 1 : 0;
    this.lastLine = line;
    this.pos = line + 1 < this.starts.length ? this.starts[line + 1] : len;
    return true;
  }

  /**
   * Path 3 where hits are dense: from the line after the last hit (where `pos` stands), the run
   * of consecutive lines that each hold a match, in one RE2 call, where `search` makes one call
   * a line. It is `^(?:[^\n]*?(?:P)[^\n]*(?:\n|\z))+` (the facts' `lineRuns`), anchored at
   * `pos`: each repetition is one line holding a match of P, which cannot meet `\n`. Reports the
   * run; false when that line holds no match (`search` goes on from it).
   */
  private nextRun(): boolean {
    const from = this.pos;
    if (from >= this.end) return false;
    if (this.runs === null) {
      try {
        this.runs = new RE2(this.runsSource!, this.runsFlags);
      } catch {
        // A pattern near RE2's size limit: `search` serves alone.
        this.runsSource = null;
        return false;
      }
    }
    const runs = this.runs;
    runs.lastIndex = from;
    if (!runs.test(this.text) || runs.lastIndex <= from) {
      // The line at `from` breaks the run. A hit on the next line goes on with the run; a second
      // run in a row that fails at once (lines that alternate) starts the count again.
      this.broken = this.lastLine + 1;
      if (++this.misses >= 2) {
        this.streak = 0;
        this.misses = 0;
      }
      return false;
    }
    const end = runs.lastIndex;
    this.first = this.lastLine + 1;
    this.last = this.lineAt(end - 1);
    this.misses = 0;
    this.lastLine = this.last;
    this.pos = end;
    return true;
  }

  private nextMultiline(): boolean {
    const re = this.re;
    const text = this.text;
    const len = this.end;
    if (this.pos > len || len === 0) return false;
    re.lastIndex = this.pos;
    const m = re.exec(text);
    if (m === null) {
      this.pos = len + 1;
      return false;
    }
    const s = m.index;
    const e = s + m[0].length;
    // An empty hit after a final newline is not on any line (ripgrep ignores it too).
    if (s >= len && text[len - 1] === NEWLINE) {
      this.pos = len + 1;
      return false;
    }
    this.first = lineIndexAt(this.starts, Math.min(s, len - 1));
    this.last = lineIndexAt(this.starts, Math.min(e > s ? e - 1 : s, len - 1));
    this.pos = e > s ? e : e + 1;
    return true;
  }
}

/** What path 2 looks for, or null when it would not pay or not be exact. */
function prefilter(facts: PatternFacts): Finder | null {
  if (facts.multiline || facts.readsTextEdges || facts.required === null) return null;
  const prefix = facts.literalPrefix;
  if (facts.caseInsensitive) {
    // RE2 skips ahead to a literal prefix under -i too, unless its first character folds
    // outside ASCII (k, s): then its first byte may be any of three.
    if (prefix !== '' && foldsWithinAscii(prefix.charCodeAt(0))) return null;
    const required = caseInsensitiveRequired(facts.required);
    if (required === null) return null;
    return required.runs !== null ? new FoldedRunFinder(required.runs) : new RegExpFinder(required);
  }
  // RE2 already skips to its literal prefix as fast as indexOf would: path 2 would only add its
  // per-line cost.
  const required = facts.required.map((r) => Buffer.from(r, 'latin1'));
  const head = Buffer.from(prefix);
  if (required.length === 1 && head.subarray(0, required[0].length).equals(required[0])) return null;
  return new StringFinder(required);
}
