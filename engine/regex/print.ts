/**
 * The tree back to RE2 syntax, for RE2 to compile after a rewrite (line-rule.ts). The text is
 * read with the flags the engine compiles every pattern with: `m`, plus `i` under `-i` and `s`
 * in multiline mode (the `base` here). A node whose own flag differs from the base is wrapped
 * in a flag group (`(?i:…)`, `(?-s:.)`); groups print as `(?:…)` (captures do not change what
 * matches); ASCII punctuation is escaped with a backslash, and every other literal that is not a letter, digit,
 * `_` or space is written `\x{…}`.
 */

import type { CharClass, ClassGroup, Regex } from './syntax.js';

/** The flags RE2 is given beside the printed text. */
export interface PrintBase {
  /** `i`: the search's `-i`. */
  caseInsensitive: boolean;
  /** `s`: multiline mode. */
  dotMatchesNewline: boolean;
}

/** The tree as an RE2 pattern that matches what it matches under `base`'s flags and `m`. */
export function printRegex(node: Regex, base: PrintBase): string {
  return print(node, base, 0);
}

/** Binding strength: 0 an alternation may stand here, 1 a concatenation, 2 only an atom. */
type Level = 0 | 1 | 2;

function print(node: Regex, base: PrintBase, level: Level): string {
  switch (node.k) {
    case 'empty':
      return '(?:)';
    case 'lit':
      return withFold(node.fold, base, char(node.cp));
    case 'class':
      return withFold(node.fold, base, printClass(node.cls));
    case 'dot': {
      const nl = node.nl ?? base.dotMatchesNewline;
      return nl === base.dotMatchesNewline ? '.' : nl ? '(?s:.)' : '(?-s:.)';
    }
    case 'byte':
      return '\\C';
    case 'assert':
      return ASSERTIONS[node.at];
    case 'cat': {
      const text = node.subs.map((sub) => print(sub, base, 1)).join('');
      return level > 1 ? `(?:${text})` : text;
    }
    case 'alt': {
      const text = node.subs.map((sub) => print(sub, base, 0)).join('|');
      return level > 0 ? `(?:${text})` : text;
    }
    case 'rep': {
      const sub = node.sub;
      const atomic = sub.k === 'lit' || sub.k === 'class' || sub.k === 'dot' || sub.k === 'byte';
      const inner = print(sub, base, 2);
      return (atomic ? inner : `(?:${inner})`) + quantifier(node.min, node.max) + (node.greedy ? '' : '?');
    }
  }
}

const ASSERTIONS = {
  lineStart: '^',
  lineEnd: '$',
  textStart: '\\A',
  textEnd: '\\z',
  wordBoundary: '\\b',
  notWordBoundary: '\\B',
} as const;

/** A repeat's quantifier as RE2 and JavaScript both write it (`*`, `{2,5}`). */
export function quantifier(min: number, max: number): string {
  if (min === 0 && max === -1) return '*';
  if (min === 1 && max === -1) return '+';
  if (min === 0 && max === 1) return '?';
  if (max === -1) return `{${min},}`;
  return min === max ? `{${min}}` : `{${min},${max}}`;
}

function withFold(fold: boolean | undefined, base: PrintBase, text: string): string {
  const effective = fold ?? base.caseInsensitive;
  if (effective === base.caseInsensitive) return text;
  return effective ? `(?i:${text})` : `(?-i:${text})`;
}

function char(cp: number): string {
  const ch = String.fromCodePoint(cp);
  if (/^[A-Za-z0-9_ ]$/.test(ch)) return ch;
  if (cp === 0x09) return '\\t';
  if (cp === 0x0a) return '\\n';
  if (cp === 0x0d) return '\\r';
  // RE2 reads any escaped ASCII punctuation as itself.
  if (/^[!-/:-@[-`{-~]$/.test(ch)) return '\\' + ch;
  return `\\x{${cp.toString(16)}}`;
}

function printClass(cls: CharClass): string {
  let items = '';
  for (let i = 0; i < cls.ranges.length; i += 2) {
    const lo = cls.ranges[i];
    const hi = cls.ranges[i + 1];
    items += lo === hi ? char(lo) : `${char(lo)}-${char(hi)}`;
  }
  for (const g of cls.groups) items += printGroup(g);
  // RE2 has no empty class: `[]` would swallow the `]`.
  if (items === '') return cls.negated ? '[\\x{0}-\\x{10ffff}]' : '[^\\x{0}-\\x{10ffff}]';
  return `[${cls.negated ? '^' : ''}${items}]`;
}

function printGroup(g: ClassGroup): string {
  if (g.kind === 'perl') return `\\${g.negated ? g.name.toUpperCase() : g.name}`;
  if (g.kind === 'posix') return `[:${g.negated ? '^' : ''}${g.name}:]`;
  return `\\${g.negated ? 'P' : 'p'}{${g.name}}`;
}
