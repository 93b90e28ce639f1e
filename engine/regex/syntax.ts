/**
 * RE2 syntax → one tree. Every fact the engine needs about a pattern (the trigram plan, the
 * required literals, whether it can match a newline, the rewrite for line-by-line matching) is
 * computed from this tree (pattern.ts), never from the pattern's text.
 *
 * The pattern is first rewritten exactly as node-re2 1.22.3 rewrites a string pattern before
 * RE2 sees it (`\uXXXX`, `\u{…}`, `\cX`, `\p{Long_Name}`, `/` → `\/`, `(?<name>`), so the parser
 * reads the same text RE2 compiles. The tree keeps everything that decides what a pattern
 * matches, with the flags resolved onto the nodes they govern:
 *
 *   - `fold` on literals and classes: true under `(?i)`, false under `(?-i)`, undefined where
 *     the search's `-i` option decides;
 *   - `nl` on `.`: true under `(?s)`, false under `(?-s)`, undefined where multiline mode
 *     (which sets `s`) decides;
 *   - `^ $` resolved to line or text edges (the engine always compiles with `m`, so they are
 *     line edges unless `(?-m)` says otherwise); `\A \z \b \B` as themselves;
 *   - greediness resolved against `(?U)`.
 *
 * Groups, capturing or not, leave no node: they only delimit. A class keeps its explicit ranges
 * and its named groups (`\d`, `[:alpha:]`, `\P{Greek}`) as they were written: Perl and POSIX
 * groups are ASCII ranges in RE2 (char-class.ts), Unicode groups have no tables here.
 *
 * `parseRegex` throws RegexSyntaxError for what it cannot read. It is only called on patterns
 * RE2 has compiled, so that means a gap in this parser, not in the pattern; its callers then
 * fall back to facts that are always safe.
 */

import { MAX_RUNE, normalizeRanges, POSIX_GROUPS, type Ranges } from './char-class.js';

/** A flag as resolved at a node: set, cleared, or left to the search's option (undefined). */
export type Flag = boolean | undefined;

/** A zero-width assertion. */
export type Assertion = 'lineStart' | 'lineEnd' | 'textStart' | 'textEnd' | 'wordBoundary' | 'notWordBoundary';

/**
 * A named group of a class: Perl's `\d \s \w` (name `d`, `s`, `w`), POSIX's `[:alpha:]`, or
 * Unicode's `\pL`; negated for `\D`, `[:^alpha:]`, `\PL`. Under `(?i)` RE2 folds a negated
 * group's positive form and then negates it, so a group stays a group in the tree.
 */
export interface ClassGroup {
  kind: 'perl' | 'posix' | 'unicode';
  name: string;
  negated: boolean;
}

/** A character class: its explicit ranges and its groups, negated as a whole or not. */
export interface CharClass {
  negated: boolean;
  /** The explicit characters and ranges: sorted, merged, inclusive. */
  ranges: Ranges;
  groups: ClassGroup[];
}

/** The parsed pattern: a tree of these nodes (treat as read-only; rewrites build new nodes). */
export type Regex =
  | { k: 'empty' } // the empty string
  | { k: 'lit'; cp: number; fold: Flag } // one code point
  | { k: 'class'; cls: CharClass; fold: Flag } // one code point of a class
  | { k: 'dot'; nl: Flag } // `.`
  | { k: 'byte' } // `\C`: any one byte, `\n` included
  | { k: 'assert'; at: Assertion }
  | { k: 'cat'; subs: Regex[] }
  | { k: 'alt'; subs: Regex[] }
  | { k: 'rep'; sub: Regex; min: number; max: number; greedy: boolean }; // max -1: unbounded

/** What `parseRegex` throws for a pattern it cannot read. */
export class RegexSyntaxError extends Error {}

/** Longer patterns (UTF-16 code units) are not parsed. */
const MAX_PATTERN_LENGTH = 65_536;
/** Deeper group nesting is not parsed. */
const MAX_NESTING = 1000;

/** Parses an RE2 pattern (as node-re2 receives it) into its tree. */
export function parseRegex(pattern: string): Regex {
  if (pattern.length > MAX_PATTERN_LENGTH) throw new RegexSyntaxError('pattern too long');
  return new Parser(toCodePoints(translateLikeNodeRe2(pattern))).parse();
}

const HEX_UPPER = '0123456789ABCDEF';

function isAsciiAlnum(ch: string | undefined): boolean {
  return ch !== undefined && /^[0-9A-Za-z]$/.test(ch);
}

const UNICODE_CLASS_ALIASES: Record<string, string> = {
  Uppercase_Letter: 'Lu',
  Lowercase_Letter: 'Ll',
  Titlecase_Letter: 'Lt',
  Cased_Letter: 'LC',
  Modifier_Letter: 'Lm',
  Other_Letter: 'Lo',
  Letter: 'L',
  Nonspacing_Mark: 'Mn',
  Spacing_Mark: 'Mc',
  Enclosing_Mark: 'Me',
  Mark: 'M',
  Decimal_Number: 'Nd',
  Letter_Number: 'Nl',
  Other_Number: 'No',
  Number: 'N',
  Connector_Punctuation: 'Pc',
  Dash_Punctuation: 'Pd',
  Open_Punctuation: 'Ps',
  Close_Punctuation: 'Pe',
  Initial_Punctuation: 'Pi',
  Final_Punctuation: 'Pf',
  Other_Punctuation: 'Po',
  Punctuation: 'P',
  Math_Symbol: 'Sm',
  Currency_Symbol: 'Sc',
  Modifier_Symbol: 'Sk',
  Other_Symbol: 'So',
  Symbol: 'S',
  Space_Separator: 'Zs',
  Line_Separator: 'Zl',
  Paragraph_Separator: 'Zp',
  Separator: 'Z',
  Control: 'Cc',
  Format: 'Cf',
  Surrogate: 'Cs',
  Private_Use: 'Co',
  Unassigned: 'Cn',
  Other: 'C',
};

/**
 * The pattern as node-re2 1.22.3 hands it to RE2 (lib/new.cc translateRegExp): JavaScript
 * escapes become RE2 ones. Ported as-is, quirks included (its "hex" test accepts any letter).
 */
function translateLikeNodeRe2(src: string): string {
  let out = src.length === 0 ? '(?:)' : '';
  const n = src.length;
  let i = 0;
  while (i < n) {
    const ch = src[i];
    if (ch === '\\' && i + 1 < n) {
      const c = src[i + 1];
      switch (c) {
        case '\\':
          out += '\\\\';
          i += 2;
          continue;
        case 'c': {
          const d = src.charCodeAt(i + 2);
          if (i + 2 < n && d >= 0x41 && d <= 0x5a) {
            const v = d - 0x40;
            out += '\\x' + HEX_UPPER[(v >> 4) & 15] + HEX_UPPER[v & 15];
            i += 3;
            continue;
          }
          out += '\\c';
          i += 2;
          continue;
        }
        case 'u':
          if (i + 2 < n) {
            const d = src[i + 2];
            if (isAsciiAlnum(d)) {
              out += '\\x{' + d;
              i += 3;
              for (let j = 0; j < 3 && i < n; ++i, ++j) {
                if (!isAsciiAlnum(src[i])) break;
                out += src[i];
              }
              out += '}';
              continue;
            }
            if (d === '{') {
              out += '\\x';
              i += 2;
              continue;
            }
          }
          out += '\\u';
          i += 2;
          continue;
        case 'p':
        case 'P':
          if (i + 2 < n && src[i + 2] === '{') {
            const j = src.indexOf('}', i + 3);
            if (j >= 0) {
              let name = src.slice(i + 3, j);
              const alias = Object.hasOwn(UNICODE_CLASS_ALIASES, name) ? UNICODE_CLASS_ALIASES[name] : undefined;
              if (alias !== undefined) name = alias;
              else if (name.length > 7 && name.startsWith('Script=')) name = name.slice(7);
              else if (name.length > 3 && name.startsWith('sc=')) name = name.slice(3);
              const oneByte = name.length === 1 && name.charCodeAt(0) < 0x80;
              out += '\\' + c + (oneByte ? name : '{' + name + '}');
              i = j + 1;
              continue;
            }
          }
          out += '\\' + c;
          i += 2;
          continue;
        default: {
          const cp = src.codePointAt(i + 1) ?? 0;
          const len = cp > 0xffff ? 2 : 1;
          out += '\\' + src.slice(i + 1, i + 1 + len);
          i += 1 + len;
          continue;
        }
      }
    }
    if (ch === '/') {
      out += '\\/';
      i += 1;
      continue;
    }
    if (ch === '(' && i + 2 < n && src[i + 1] === '?' && src[i + 2] === '<') {
      if (i + 3 >= n || (src[i + 3] !== '=' && src[i + 3] !== '!')) {
        out += '(?P<';
        i += 3;
        continue;
      }
    }
    const cp = src.codePointAt(i) ?? 0;
    const len = cp > 0xffff ? 2 : 1;
    out += src.slice(i, i + len);
    i += len;
  }
  return out;
}

/** Code points of a JS string; lone surrogates become U+FFFD, as in the UTF-8 RE2 receives. */
function toCodePoints(s: string): number[] {
  const out: number[] = [];
  for (const ch of s) {
    const cp = ch.codePointAt(0) ?? 0xfffd;
    out.push(cp >= 0xd800 && cp <= 0xdfff ? 0xfffd : cp);
  }
  return out;
}

const C = (ch: string): number => ch.charCodeAt(0);

/** The flags in force at a point of the pattern. */
interface Flags {
  fold: Flag;
  nl: Flag;
  /** `m`: `^ $` at line edges (the engine compiles every pattern with it). */
  multi: boolean;
  /** `U`: repetitions lazy by default. */
  ungreedy: boolean;
}

/** Accumulates the items of one class. */
interface ClassBuilder {
  ranges: Ranges;
  groups: ClassGroup[];
}

class Parser {
  private pos = 0;
  private depth = 0;
  private flags: Flags = { fold: undefined, nl: undefined, multi: true, ungreedy: false };

  constructor(private readonly cps: number[]) {}

  parse(): Regex {
    const node = this.parseAlt();
    if (this.pos < this.cps.length) throw new RegexSyntaxError('unexpected )');
    return node;
  }

  private peek(offset = 0): number {
    const c = this.cps[this.pos + offset];
    return c === undefined ? -1 : c;
  }

  private parseAlt(): Regex {
    const alts = [this.parseConcat()];
    while (this.peek() === C('|')) {
      this.pos++;
      alts.push(this.parseConcat());
    }
    return alts.length === 1 ? alts[0] : { k: 'alt', subs: alts };
  }

  private parseConcat(): Regex {
    const items: Regex[] = [];
    while (this.pos < this.cps.length) {
      const c = this.peek();
      if (c === C('|') || c === C(')')) break;
      if (c === C('*') || c === C('+') || c === C('?')) throw new RegexSyntaxError('missing argument');
      if (c === C('{') && this.tryRepeat() !== null) throw new RegexSyntaxError('missing argument');
      const atom = this.parseAtom(items);
      if (atom !== null) items.push(this.parseRepetition(atom));
      // RE2 applies a repetition after a flag group, `a(?i)+`, to the item before the group.
      else if (items.length > 0) items.push(this.parseRepetition(items.pop()!));
    }
    if (items.length === 0) return { k: 'empty' };
    return items.length === 1 ? items[0] : { k: 'cat', subs: items };
  }

  private parseRepetition(atom: Regex): Regex {
    const c = this.peek();
    let min: number;
    let max: number;
    if (c === C('*')) [min, max] = [0, -1];
    else if (c === C('+')) [min, max] = [1, -1];
    else if (c === C('?')) [min, max] = [0, 1];
    else if (c === C('{')) {
      const r = this.tryRepeat();
      if (r === null) return atom;
      [min, max] = [r.min, r.max];
      this.pos = r.end - 1;
    } else {
      return atom;
    }
    this.pos++;
    let lazy = false;
    if (this.peek() === C('?')) {
      lazy = true;
      this.pos++;
    }
    const next = this.peek();
    // RE2 rejects stacked repetition (a**, a{2}{3}).
    if (next === C('*') || next === C('+') || next === C('?')) throw new RegexSyntaxError('stacked');
    if (next === C('{') && this.tryRepeat() !== null) throw new RegexSyntaxError('stacked');
    return { k: 'rep', sub: atom, min, max, greedy: lazy === this.flags.ungreedy };
  }

  /** Parses {n}, {n,} or {n,m} at pos without consuming; null when it is a literal `{`. */
  private tryRepeat(): { min: number; max: number; end: number } | null {
    let p = this.pos;
    if (this.cps[p] !== C('{')) return null;
    p++;
    const int = (): number | null => {
      const start = p;
      while (p < this.cps.length && this.cps[p] >= C('0') && this.cps[p] <= C('9')) p++;
      if (p === start) return null;
      if (p - start >= 2 && this.cps[start] === C('0')) return null; // RE2: no leading zeros
      if (p - start > 8) return null;
      let v = 0;
      for (let i = start; i < p; i++) v = v * 10 + this.cps[i] - C('0');
      return v;
    };
    const min = int();
    if (min === null) return null;
    let max = min;
    if (this.cps[p] === C(',')) {
      p++;
      if (this.cps[p] === C('}')) max = -1;
      else {
        const m = int();
        if (m === null) return null;
        max = m;
      }
    }
    if (this.cps[p] !== C('}')) return null;
    p++;
    if (min > 1000 || max > 1000 || (max !== -1 && max < min)) throw new RegexSyntaxError('bad repeat');
    return { min, max, end: p };
  }

  /** One atom; null for a flag group like (?i). `items` receives all but the last \Q…\E char. */
  private parseAtom(items: Regex[]): Regex | null {
    const c = this.peek();
    switch (c) {
      case C('('):
        return this.parseGroup();
      case C('['):
        return this.parseClass();
      case C('.'):
        this.pos++;
        return { k: 'dot', nl: this.flags.nl };
      case C('^'):
        this.pos++;
        return { k: 'assert', at: this.flags.multi ? 'lineStart' : 'textStart' };
      case C('$'):
        this.pos++;
        return { k: 'assert', at: this.flags.multi ? 'lineEnd' : 'textEnd' };
      case C('\\'):
        return this.parseEscapeAtom(items);
      default:
        this.pos++;
        return this.literal(c);
    }
  }

  private literal(cp: number): Regex {
    return { k: 'lit', cp, fold: this.flags.fold };
  }

  private parseGroup(): Regex | null {
    if (this.peek(1) !== C('?')) {
      this.pos++;
      return this.groupBody(this.flags);
    }
    const c2 = this.peek(2);
    if (c2 === C('=') || c2 === C('!')) throw new RegexSyntaxError('lookaround');
    if ((c2 === C('P') && this.peek(3) === C('<')) || c2 === C('<')) {
      const c3 = this.peek(3);
      if (c2 === C('<') && (c3 === C('=') || c3 === C('!'))) throw new RegexSyntaxError('lookbehind');
      let p = this.pos + (c2 === C('P') ? 4 : 3);
      const start = p;
      while (p < this.cps.length && this.cps[p] !== C('>')) p++;
      if (p >= this.cps.length || p === start) throw new RegexSyntaxError('bad name');
      this.pos = p + 1;
      return this.groupBody(this.flags);
    }
    // Flags: (?flags) or (?flags:re), flags from imsU, one optional '-'.
    this.pos += 2;
    const flags = { ...this.flags };
    let negated = false;
    let sawFlag = false;
    for (;;) {
      const c = this.peek();
      this.pos++;
      if (c === C('i') || c === C('m') || c === C('s') || c === C('U')) {
        if (c === C('i')) flags.fold = !negated;
        else if (c === C('s')) flags.nl = !negated;
        else if (c === C('m')) flags.multi = !negated;
        else flags.ungreedy = !negated;
        sawFlag = true;
      } else if (c === C('-')) {
        if (negated) throw new RegexSyntaxError('bad flags');
        negated = true;
        sawFlag = false;
      } else if (c === C(':')) {
        if (negated && !sawFlag) throw new RegexSyntaxError('bad flags');
        return this.groupBody(flags);
      } else if (c === C(')')) {
        if (negated && !sawFlag) throw new RegexSyntaxError('bad flags');
        this.flags = flags; // for the rest of the enclosing group, across `|` too
        return null;
      } else {
        throw new RegexSyntaxError('bad flags');
      }
    }
  }

  /** The body of a group whose opening has been consumed, read under `flags`. */
  private groupBody(flags: Flags): Regex {
    if (++this.depth > MAX_NESTING) throw new RegexSyntaxError('nesting');
    const saved = this.flags;
    this.flags = flags;
    const node = this.parseAlt();
    if (this.peek() !== C(')')) throw new RegexSyntaxError('missing )');
    this.pos++;
    this.flags = saved;
    this.depth--;
    return node;
  }

  private parseEscapeAtom(items: Regex[]): Regex | null {
    const c = this.peek(1);
    if (c === -1) throw new RegexSyntaxError('trailing backslash');
    const assertion: Assertion | null =
      c === C('b') ? 'wordBoundary' : c === C('B') ? 'notWordBoundary' : c === C('A') ? 'textStart' : c === C('z') ? 'textEnd' : null;
    if (assertion !== null) {
      this.pos += 2;
      return { k: 'assert', at: assertion };
    }
    if (c === C('C')) {
      this.pos += 2;
      return { k: 'byte' };
    }
    if (c === C('Q')) {
      this.pos += 2;
      const lits: Regex[] = [];
      while (this.pos < this.cps.length) {
        if (this.peek() === C('\\') && this.peek(1) === C('E')) {
          this.pos += 2;
          break;
        }
        lits.push(this.literal(this.cps[this.pos++]));
      }
      // A following repetition applies to the last character only, as in RE2.
      const last = lits.pop();
      items.push(...lits);
      if (last === undefined) {
        const next = this.peek();
        if (next === C('*') || next === C('+') || next === C('?') || next === C('{')) {
          throw new RegexSyntaxError('repetition after empty \\Q\\E');
        }
        return null;
      }
      return last;
    }
    if (c === C('p') || c === C('P')) {
      return this.classNode({ ranges: [], groups: [this.unicodeGroup()] }, false);
    }
    const perl = this.tryPerlGroup();
    if (perl !== null) return this.classNode({ ranges: [], groups: [perl] }, false);
    return this.literal(this.parseEscapeChar());
  }

  /** Reads \pX, \p{Name}, \p{^Name} or their \P forms at pos. */
  private unicodeGroup(): ClassGroup {
    let negated = this.peek(1) === C('P');
    this.pos += 2;
    if (this.peek() === -1) throw new RegexSyntaxError('bad \\p');
    if (this.peek() !== C('{')) return { kind: 'unicode', name: String.fromCodePoint(this.cps[this.pos++]), negated };
    const start = this.pos + 1;
    while (this.pos < this.cps.length && this.peek() !== C('}')) this.pos++;
    if (this.peek() !== C('}')) throw new RegexSyntaxError('bad \\p');
    let name = String.fromCodePoint(...this.cps.slice(start, this.pos));
    this.pos++;
    if (name.startsWith('^')) {
      negated = !negated;
      name = name.slice(1);
    }
    if (name === '') throw new RegexSyntaxError('bad \\p');
    return { kind: 'unicode', name, negated };
  }

  private tryPerlGroup(): ClassGroup | null {
    if (this.peek() !== C('\\')) return null;
    const c = this.peek(1);
    const name = c === -1 ? '' : String.fromCodePoint(c);
    const lower = name.toLowerCase();
    if (!['d', 's', 'w'].includes(lower) || name.length !== 1) return null;
    this.pos += 2;
    return { kind: 'perl', name: lower, negated: name !== lower };
  }

  /** RE2's ParseEscape: one escaped character at pos (which is a backslash). */
  private parseEscapeChar(): number {
    this.pos++;
    const c = this.peek();
    if (c === -1) throw new RegexSyntaxError('trailing backslash');
    this.pos++;
    const isOct = (x: number): boolean => x >= C('0') && x <= C('7');
    if (c >= C('1') && c <= C('7') && !isOct(this.peek())) throw new RegexSyntaxError('backreference');
    if (c >= C('0') && c <= C('7')) {
      let code = c - C('0');
      for (let i = 0; i < 2 && isOct(this.peek()); i++) code = code * 8 + this.cps[this.pos++] - C('0');
      return code;
    }
    const hexVal = (x: number): number => {
      if (x >= C('0') && x <= C('9')) return x - C('0');
      if (x >= C('a') && x <= C('f')) return x - C('a') + 10;
      if (x >= C('A') && x <= C('F')) return x - C('A') + 10;
      return -1;
    };
    switch (c) {
      case C('x'): {
        if (this.peek() === C('{')) {
          this.pos++;
          let code = 0;
          let digits = 0;
          while (hexVal(this.peek()) >= 0) {
            code = code * 16 + hexVal(this.cps[this.pos++]);
            digits++;
            if (code > MAX_RUNE) throw new RegexSyntaxError('bad \\x');
          }
          if (digits === 0 || this.peek() !== C('}')) throw new RegexSyntaxError('bad \\x');
          this.pos++;
          return code;
        }
        const h1 = hexVal(this.peek());
        const h2 = hexVal(this.peek(1));
        if (h1 < 0 || h2 < 0) throw new RegexSyntaxError('bad \\x');
        this.pos += 2;
        return h1 * 16 + h2;
      }
      case C('n'):
        return 0x0a;
      case C('r'):
        return 0x0d;
      case C('t'):
        return 0x09;
      case C('a'):
        return 0x07;
      case C('f'):
        return 0x0c;
      case C('v'):
        return 0x0b;
      default:
        // Escaped ASCII punctuation (and `_`) is itself; anything else is an RE2 error.
        if (c < 0x80 && !isAsciiAlnum(String.fromCharCode(c))) return c;
        throw new RegexSyntaxError('bad escape');
    }
  }

  private parseClass(): Regex {
    this.pos++; // '['
    let negated = false;
    if (this.peek() === C('^')) {
      negated = true;
      this.pos++;
    }
    const b: ClassBuilder = { ranges: [], groups: [] };
    let first = true;
    while (this.pos < this.cps.length && (this.peek() !== C(']') || first)) {
      first = false;
      // [:alpha:] and [:^alpha:]
      if (this.peek() === C('[') && this.peek(1) === C(':')) {
        let p = this.pos + 2;
        while (p + 1 < this.cps.length && !(this.cps[p] === C(':') && this.cps[p + 1] === C(']'))) p++;
        if (p + 1 < this.cps.length) {
          let name = String.fromCodePoint(...this.cps.slice(this.pos + 2, p));
          const neg = name.startsWith('^');
          if (neg) name = name.slice(1);
          if (!Object.hasOwn(POSIX_GROUPS, name)) throw new RegexSyntaxError('bad posix class');
          b.groups.push({ kind: 'posix', name, negated: neg });
          this.pos = p + 2;
          continue;
        }
      }
      if (this.peek() === C('\\') && (this.peek(1) === C('p') || this.peek(1) === C('P'))) {
        b.groups.push(this.unicodeGroup());
        continue;
      }
      const perl = this.tryPerlGroup();
      if (perl !== null) {
        b.groups.push(perl);
        continue;
      }
      const lo = this.classChar();
      let hi = lo;
      if (this.peek() === C('-') && this.peek(1) !== -1 && this.peek(1) !== C(']')) {
        this.pos++;
        hi = this.classChar();
        if (hi < lo) throw new RegexSyntaxError('bad range');
      }
      b.ranges.push(lo, hi);
    }
    if (this.peek() !== C(']')) throw new RegexSyntaxError('missing ]');
    this.pos++;
    return this.classNode(b, negated);
  }

  private classChar(): number {
    if (this.peek() === C('\\')) return this.parseEscapeChar();
    const c = this.peek();
    if (c === -1) throw new RegexSyntaxError('missing ]');
    this.pos++;
    return c;
  }

  private classNode(b: ClassBuilder, negated: boolean): Regex {
    const cls: CharClass = { negated, ranges: normalizeRanges(b.ranges), groups: b.groups };
    return { k: 'class', cls, fold: this.flags.fold };
  }
}
