/**
 * Finds the lines of a document that a regex matches, the way ripgrep reports them.
 *
 * ripgrep matches line by line: a match never spans a newline (it removes `\n` from the regex).
 * Here RE2 searches the whole document buffer at once (a Buffer, so `lastIndex` counts bytes)
 * and each hit is mapped to its line through the stored line starts; the search then resumes
 * at the next line's start, so every line is reported once. This is exact because RE2 returns
 * the leftmost match and a match inside one line is also a match in the whole buffer:
 *
 *  - when the pattern cannot match `\n` at all (decided conservatively from its text,
 *    `cannotMatchNewline`), every hit lies inside one line, and `test()` (which only moves
 *    `lastIndex` to the hit's end, allocating nothing) is enough;
 *  - otherwise `exec()` gives the hit's start; a hit that runs past its line's end is checked
 *    again on that line alone, and the search resumes at the next line either way.
 *
 * In multiline mode (`-U`, dot matches newline) matches may span lines and every line a match
 * touches is a matching line, as `rg -U` prints them.
 *
 * The loop allocates nothing per match on the fast path and decodes no text.
 */

import RE2 from 're2';
import { invalidParameter } from '../core/errors.js';
import { lineEndOf, lineIndexAt, type LineStarts } from './doc-text.js';

const NEWLINE = 0x0a;

// Unicode property names (after `\p`) that cannot include U+000A, a control character.
const SAFE_PROPERTIES = new Set([
  'L', 'Lu', 'Ll', 'Lt', 'Lm', 'Lo', 'M', 'Mn', 'Mc', 'Me', 'N', 'Nd', 'Nl', 'No',
  'P', 'Pc', 'Pd', 'Ps', 'Pe', 'Pi', 'Pf', 'Po', 'S', 'Sm', 'Sc', 'Sk', 'So', 'Z', 'Zs', 'Zl', 'Zp',
  'Greek', 'Latin', 'Cyrillic', 'Han', 'Hiragana', 'Katakana', 'Arabic', 'Hebrew', 'Hangul', 'Thai', 'Devanagari',
]);

// Escapes that never match a newline: ASCII classes that exclude it, empty-width assertions.
const SAFE_LETTER_ESCAPES = new Set(['d', 'w', 'S', 'b', 'B', 'A', 'z']);

const META = new Set(['.', '^', '$', '*', '+', '?', '(', ')', '[', ']', '{', '}', '|', '\\']);

/**
 * The alternatives of a pattern that is only literal text, or literal texts
 * joined by `|` (punctuation may be escaped, e.g. `\(`); null for anything
 * else, including an empty alternative (which matches every line).
 */
export function literalAlternatives(pattern: string): string[] | null {
  const out: string[] = [];
  let current = '';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i];
    if (ch === '|') {
      if (current === '') return null;
      out.push(current);
      current = '';
    } else if (ch === '\\') {
      const next = pattern[i + 1];
      // Only escaped punctuation is a literal; \w, \d, \x41, \Q... and the like are not handled here.
      if (next === undefined || /[A-Za-z0-9\s]/.test(next) || next.charCodeAt(0) > 0x7e) return null;
      current += next;
      i++;
    } else if (META.has(ch) || ch.charCodeAt(0) < 0x20) {
      return null;
    } else {
      current += ch;
    }
  }
  if (current === '') return null;
  out.push(current);
  return out;
}

/**
 * True when `pattern` (without the `s` flag) certainly cannot match a string containing `\n`.
 * Conservative: false for anything it is not sure about (negated or POSIX classes, `\s`, `\D`,
 * `\W`, hex/octal/control escapes, `\p` outside a known list, `(?s)`, raw control characters).
 */
export function cannotMatchNewline(pattern: string): boolean {
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern.charCodeAt(i);
    if (c < 0x20) return false;
    const ch = pattern[i];
    if (ch === '[' && (pattern[i + 1] === '^' || pattern[i + 1] === ':')) return false;
    if (ch === '(' && pattern[i + 1] === '?') {
      // Flag groups: (?flags) or (?flags:...). Any `s` may turn dot-matches-newline on.
      let j = i + 2;
      while (j < pattern.length && /[a-zA-Z-]/.test(pattern[j])) {
        if (pattern[j] === 's') return false;
        j++;
      }
      continue;
    }
    if (ch !== '\\') continue;
    const next = pattern[i + 1];
    if (next === undefined) return false;
    if (/[a-zA-Z0-9]/.test(next)) {
      if (SAFE_LETTER_ESCAPES.has(next)) {
        i++;
        continue;
      }
      if (next === 'p') {
        const m = /^\\p(?:([A-Za-z])|\{([A-Za-z_]+)\})/.exec(pattern.slice(i));
        const name = m === null ? undefined : (m[1] ?? m[2]);
        if (name === undefined || !SAFE_PROPERTIES.has(name)) return false;
        i += m![0].length - 1;
        continue;
      }
      return false;
    }
    i++; // an escaped punctuation character is itself
  }
  return true;
}

/** Options for compiling a matcher; undefined means false. */
export interface LineMatcherOptions {
  /** `-i`: case-insensitive (Unicode simple case folding). */
  caseInsensitive?: boolean;
  /** `-U`: `.` matches newlines and matches may span lines. */
  multiline?: boolean;
}

/**
 * An RE2 regex plus the state of a scan over one document. Usage: `begin(text, starts)`, then
 * `next()` until false; each true reports matching lines `first..last` (0-based, inclusive;
 * equal unless multiline). After the text buffer has been re-read, `rebind` continues the scan.
 */
export class LineMatcher {
  /** True when hits are located with `test()` alone (see the module comment). */
  readonly fast: boolean;
  /** First matching line of the current hit (0-based). */
  first = 0;
  /** Last matching line of the current hit (0-based, inclusive). */
  last = 0;

  private readonly re: RE2;
  private readonly multiline: boolean;
  /** For a pattern of literal alternatives: their bytes, and where each occurs next (or -1). */
  private readonly literals: Buffer[] | null;
  private readonly nextAt: Int32Array;
  private text: Buffer = Buffer.alloc(0);
  private starts: LineStarts = new Uint32Array(0);
  private pos = 0;
  private end = 0; // where searching stops: the text length, or 0 past the last line

  /** Compiles `pattern`; a syntax error is INVALID_PARAMETER naming `pattern`. */
  constructor(pattern: string, options: LineMatcherOptions = {}) {
    this.multiline = options.multiline === true;
    const flags = 'gm' + (options.caseInsensitive === true ? 'i' : '') + (this.multiline ? 's' : '');
    try {
      this.re = new RE2(pattern, flags);
    } catch (error) {
      // node-re2 shows the pattern with the flags it added, e.g. `(?m)`: show the caller's pattern.
      throw invalidParameter('pattern', (error as Error).message.replace(/\(\?[ims]+\)/, ''));
    }
    this.fast = !this.multiline && cannotMatchNewline(pattern);
    const alternatives = this.multiline || options.caseInsensitive === true ? null : literalAlternatives(pattern);
    this.literals = alternatives === null ? null : alternatives.map((a) => Buffer.from(a));
    this.nextAt = new Int32Array(this.literals?.length ?? 0);
  }

  /** Starts scanning `text` (one document's text) whose line starts are `starts`. */
  begin(text: Buffer, starts: LineStarts): void {
    this.text = text;
    this.starts = starts;
    this.pos = 0;
    this.end = starts.length === 0 ? 0 : text.byteLength;
    this.nextAt.fill(-2); // not searched yet
  }

  /** Continues the current scan over a re-read copy of the same document. */
  rebind(text: Buffer, starts: LineStarts): void {
    this.text = text;
    this.starts = starts;
  }

  /** Advances to the next matching line(s); false when the document has no more. */
  next(): boolean {
    if (this.multiline) return this.nextMultiline();
    if (this.literals !== null) return this.nextLiteral(this.literals);
    const re = this.re;
    const text = this.text;
    const starts = this.starts;
    const len = this.end;
    while (this.pos < len) {
      re.lastIndex = this.pos;
      let line: number;
      if (this.fast) {
        if (!re.test(text)) break;
        const e = re.lastIndex;
        // The hit lies in one line. A non-empty hit's last byte is in it; an empty hit at `e`
        // is in the line containing `e`, unless `e` is the end of a text ending with `\n`.
        let b = e > this.pos && text[e - 1] !== NEWLINE ? e - 1 : e;
        if (b >= len) {
          if (text[len - 1] === NEWLINE) break;
          b = len - 1;
        }
        line = lineIndexAt(starts, b);
      } else {
        const m = re.exec(text);
        if (m === null) break;
        const s = m.index;
        const e = s + m[0].length;
        let b = s;
        if (b >= len) {
          if (text[len - 1] === NEWLINE) break;
          b = len - 1;
        }
        line = lineIndexAt(starts, b);
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
    this.pos = len;
    return false;
  }

  /**
   * Literal alternatives need no regex: the leftmost occurrence of any of them
   * is the leftmost match, found with indexOf (memmem), and a document without
   * any of them is passed over at memory speed. Each literal's next occurrence
   * is remembered, so a rare one is not searched for again at every hit.
   */
  private nextLiteral(literals: Buffer[]): boolean {
    const text = this.text;
    const starts = this.starts;
    const len = this.end;
    while (this.pos < len) {
      let best = -1;
      for (let k = 0; k < literals.length; k++) {
        let at = this.nextAt[k];
        if (at !== -1 && at < this.pos) {
          at = text.indexOf(literals[k], this.pos);
          this.nextAt[k] = at;
        }
        if (at !== -1 && at < len && (best === -1 || at < best)) best = at;
      }
      if (best === -1) break;
      const line = lineIndexAt(starts, best);
      return this.hit(line, len);
    }
    this.pos = len;
    return false;
  }

  /** Reports `line` as the current hit and moves the scan to the next line. */
  private hit(line: number, len: number): true {
    this.first = line;
    this.last = line;
    this.pos = line + 1 < this.starts.length ? this.starts[line + 1] : len;
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
