/**
 * The searched tree (outside multiline mode, after the line rule) as a JavaScript RegExp over
 * the text read as Latin-1, one code unit a byte: nothing is decoded and offsets stay byte
 * offsets. V8's own engine then finds the matching lines, where each call into RE2's binding
 * costs about a microsecond (docs/benchmarks.md, "V8's engine beside RE2").
 *
 * Every literal, class and `.` becomes the UTF-8 byte sequences of its code points, as RE2's
 * compiler writes them (AddRuneRangeUTF8): a range is split where the encoded length changes
 * and where the leading bytes differ, and the range 80-10FFFF, which `.` and every negated
 * class hold, takes RE2's shorter form. So `[^a-z]{8}` counts characters, not bytes. The line
 * matcher gives V8 only texts that are valid UTF-8: on the others RE2's answers depend on how
 * it merged the pattern's classes (the shorter form also takes overlong sequences), which this
 * printer does not follow. Case folding is compiled out: a literal under `(?i)` becomes its orbit (fold.ts); a
 * class under `(?i)`, or holding a Unicode group (no table here), becomes the code points RE2
 * itself matches, found by running it once over every code point in order (cached).
 *
 * The RegExp has neither `u` nor `i`, so `\b \B` are ASCII word edges, as in RE2. `^ $` need
 * `m`, under which V8 also reads `\r` as a line break: a text holding `\r` is searched by RE2
 * when the pattern has either (`anchors`).
 *
 * Only whether a line holds a match has to agree: greediness and which alternative wins change
 * where a match ends, never whether there is one, and the line matcher reports lines.
 *
 * That, and texts that are valid UTF-8, let a class holding every code point from 80 on
 * (`[^)]`, `\S`, `.`) be read byte by byte where it is repeated as `x*` or `x+` (no most), or
 * stands once at an end of the searched sequence (where edge-trim.ts leaves `\S+\s+\S+` as
 * `\S\s+\S`), and what stands on each side of it in the sequence is nothing, `^` before or `$`
 * after, or a match of ASCII bytes that is never empty. It becomes one byte class, its ASCII
 * members and every byte from 80 (`[^)]*` as `[\x00-\x09\x0b-\x28\x2a-\xff]*`), which V8 runs
 * without the alternation of sequences: `\([^)]*\)` took a fifth less time, `\S+\s+\S+` two
 * fifths. Every match of the sequences is one of the bytes. A match of the bytes begins and ends
 * at whole characters next to an ASCII byte or at a line's edge; at the sequence's own start or
 * end it may begin or end inside a character, and widened to the whole character, whose bytes
 * are all in the class, it is a match of the sequences.
 *
 * V8 backtracks: a pattern such as `(a+)+$`, or `\S+\s+\S+` on a long line without a space,
 * can take it exponential or quadratic time, where RE2 takes linear time. The printer does not
 * try to tell such patterns apart; engine/guarded-scan.ts runs every V8 search under a time
 * limit and hands the rest of the search to RE2 when it is reached. (V8's own breadth-first
 * fallback was measured and refused: docs/benchmarks.md, "V8's engine beside RE2".)
 */

import RE2 from 're2';
import { groupRanges, negateRanges, normalizeRanges, type Ranges } from './char-class.js';
import { utf8 } from './bytes.js';
import { foldOrbit } from './fold.js';
import { printRegex, quantifier } from './print.js';
import type { Assertion, Regex } from './syntax.js';

/** A tree compiled for V8 (see the module comment). */
export interface ByteRegex {
  /** Global; `m` when `anchors`. */
  readonly regex: RegExp;
  /** True when the pattern has `^` or `$`: a text holding `\r` must be searched by RE2. */
  readonly anchors: boolean;
}

/** A text long enough that V8 makes machine code for a regex at once (`toMachineCode`). */
const MACHINE_CODE_TEXT = '\n'.repeat(1024);

/** What the printer throws for a node it does not print. */
class Unprintable extends Error {}

/**
 * The tree RE2 searches (`searched`, after the line rule), read with the search's `-i`, as a
 * V8 RegExp over Latin-1 text; null when it holds what is not printed (`\C`, the text's own
 * edges) or V8 cannot compile it.
 */
export function compileByteRegex(searched: Regex, caseInsensitive: boolean): ByteRegex | null {
  const state = { caseInsensitive, anchors: false };
  try {
    const regex = new RegExp(printSearched(searched, state), state.anchors ? 'gm' : 'g');
    // V8 compiles at the first search: one now, so that a pattern too large for it fails here.
    regex.test('');
    regex.lastIndex = 0;
    return { regex, anchors: state.anchors };
  } catch (error) {
    if (error instanceof Unprintable || error instanceof RangeError || error instanceof SyntaxError) return null;
    throw error;
  }
}

/**
 * Has V8 make `form`'s machine code now: for a text under 1,000 characters it makes bytecode
 * and runs that first. A search about to time V8 against RE2 calls it, since code made inside
 * the timed trial cost V8 the trial (the first grep of `\S+\s+\S+` then took RE2's path, 3 times
 * longer). Line breaks only: a V8 form never matches one, so each start fails at once.
 */
export function toMachineCode(form: ByteRegex): void {
  form.regex.test(MACHINE_CODE_TEXT);
  form.regex.lastIndex = 0;
}

/**
 * A searched tree that is one class or `.` (no `\n` in it, after the line rule), alone or
 * repeated at least `min` times (`x`, `x+`, `x{n}`, `x{n,}`, `x{n,m}` with n ≥ 1), and perhaps
 * followed by one code point of a second class (`\s{4,}\w`): a line holds a match exactly when
 * `min` of its code points in a row are in the class, and (with `after`) the code point just after
 * them is in `after`. (Of a longer run before that code point, its last `min` make the match, so
 * the repetition's most does not matter.) `ranges` and `after` are the code points as RE2 reads
 * the classes with the search's `-i` (Unicode groups and folding included).
 */
export interface ClassRun {
  readonly ranges: Ranges;
  readonly min: number;
  readonly after: Ranges | null;
  /**
   * For `\b\w{n,m}\b` (`\w` without `-i`, whose word edges are its own): a line holds a match
   * exactly when it holds a whole word of `min` to `word` word characters (-1: no most), a run
   * of them with none just before or after. Null for any other run.
   */
  readonly word: number | null;
}

/** The ASCII word characters, which `\w` and `\b` read. */
const WORD: Ranges = [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a];

/** The searched tree (after the line rule) as a ClassRun, or null when it is not one. */
export function classRunOf(searched: Regex, caseInsensitive: boolean): ClassRun | null {
  let node = searched;
  if (node.k === 'cat' && node.subs.length === 3 && isWordEdge(node.subs[0]) && isWordEdge(node.subs[2])) {
    const word = node.subs[1];
    const [min, most, one] = word.k === 'rep' ? [word.min, word.max, word.sub] : [1, 1, word];
    const ranges = classOf(one, caseInsensitive);
    if (min < 1 || ranges === null || ranges.join() !== WORD.join()) return null;
    return { ranges, min, after: null, word: most };
  }
  let after: Ranges | null = null;
  if (node.k === 'cat' && node.subs.length === 2) {
    after = lineClassOf(node.subs[1], caseInsensitive);
    if (after === null) return null;
    node = node.subs[0];
  }
  let min = 1;
  if (node.k === 'rep') {
    if (node.min < 1) return null;
    min = node.min;
    node = node.sub;
  }
  const ranges = lineClassOf(node, caseInsensitive);
  return ranges === null ? null : { ranges, min, after, word: null };
}

function isWordEdge(node: Regex): boolean {
  return node.k === 'assert' && node.at === 'wordBoundary';
}

/** `classOf`, where the class does not hold `\n`; else null. */
function lineClassOf(node: Regex, caseInsensitive: boolean): Ranges | null {
  const ranges = classOf(node, caseInsensitive);
  if (ranges === null) return null;
  for (let i = 0; i < ranges.length; i += 2) if (ranges[i] <= 0x0a && 0x0a <= ranges[i + 1]) return null;
  return ranges;
}

/** The code points of a class, `.`, or an alternation of them (the line rule makes `[\s\S]` one); null for any other node. */
function classOf(node: Regex, caseInsensitive: boolean): Ranges | null {
  if (node.k === 'class') return classRanges(node, caseInsensitive);
  if (node.k === 'dot') return node.nl === true ? null : [0, 0x09, 0x0b, 0x10ffff];
  if (node.k !== 'alt') return null;
  const all: Ranges = [];
  for (const sub of node.subs) {
    const ranges = classOf(sub, caseInsensitive);
    if (ranges === null) return null;
    all.push(...ranges);
  }
  return normalizeRanges(all);
}

/** The searched tree (outside multiline mode) printed, its repetitions read by byte where they may be (see the module comment). */
function printSearched(searched: Regex, state: PrintState): string {
  if (searched.k !== 'cat') return asByteClass(searched, undefined, undefined, state.caseInsensitive) ?? print(searched, state, 0);
  const subs = searched.subs;
  return subs.map((sub, i) => asByteClass(sub, subs[i - 1], subs[i + 1], state.caseInsensitive) ?? print(sub, state, 1)).join('');
}

/**
 * `node` as one byte class, alone or repeated, when it is a class holding every code point from
 * 80 on, repeated as `x*` or `x+` or else standing at an end of the searched sequence, and
 * `before` and `after` (its neighbours in the sequence; undefined: none) leave its ends at whole
 * characters; else null (see the module comment).
 */
function asByteClass(node: Regex, before: Regex | undefined, after: Regex | undefined, caseInsensitive: boolean): string | null {
  const repeated = node.k === 'rep' && node.max === -1 && node.min <= 1;
  if (!repeated && before !== undefined && after !== undefined) return null;
  const ranges = lineClassOf(repeated ? node.sub : node, caseInsensitive);
  if (ranges === null || !ranges.some((lo, i) => i % 2 === 0 && lo <= 0x80 && ranges[i + 1] === 0x10ffff)) return null;
  if (before !== undefined && !endsAscii(before, 'lineStart', caseInsensitive)) return null;
  if (after !== undefined && !endsAscii(after, 'lineEnd', caseInsensitive)) return null;
  const bytes: number[] = [];
  for (let i = 0; i < ranges.length && ranges[i] < 0x80; i += 2) bytes.push(ranges[i], Math.min(ranges[i + 1], 0x7f));
  bytes.push(0x80, 0xff);
  const byteClass = printByteClass(normalizeRanges(bytes));
  return repeated ? byteClass + quantifier(node.min, -1) + (node.greedy ? '' : '?') : byteClass;
}

/** Whether `node`'s matches are never empty and are ASCII bytes alone, or `node` is the assertion `edge`. */
function endsAscii(node: Regex, edge: Assertion, caseInsensitive: boolean): boolean {
  if (node.k === 'assert') return node.at === edge;
  const ranges = charRanges(node.k === 'rep' && node.min >= 1 ? node.sub : node, caseInsensitive);
  return ranges !== null && ranges.length > 0 && ranges[ranges.length - 1] < 0x80;
}

/**
 * The code points a one-character node (a literal, a class, `.`, or an alternation of classes)
 * matches, as RE2 reads it with the search's `-i`; null for any other node.
 */
export function charRanges(node: Regex, caseInsensitive: boolean): Ranges | null {
  if (node.k === 'lit') return (node.fold ?? caseInsensitive) ? orbitRanges(node.cp) : [node.cp, node.cp];
  return classOf(node, caseInsensitive);
}

interface PrintState {
  readonly caseInsensitive: boolean;
  anchors: boolean;
}

/** Binding strength: 0 an alternation may stand here, 1 a concatenation, 2 only an atom. */
type Level = 0 | 1 | 2;

function print(node: Regex, state: PrintState, level: Level): string {
  switch (node.k) {
    case 'empty':
      return '(?:)';
    case 'lit':
      if (node.fold ?? state.caseInsensitive) return atom(printRanges(orbitRanges(node.cp)), level);
      return atom(escapeBytes(utf8(node.cp)), level);
    case 'class':
      return atom(printRanges(classRanges(node, state.caseInsensitive)), level);
    case 'dot':
      // Outside multiline mode the line rule has taken `\n` out of every `.`.
      return atom(printRanges(node.nl === true ? [0, 0x10ffff] : [0, 0x09, 0x0b, 0x10ffff]), level);
    case 'byte':
      throw new Unprintable('\\C');
    case 'assert':
      // JavaScript repeats no assertion but a group holding one.
      return level > 1 ? `(?:${assertion(node.at, state)})` : assertion(node.at, state);
    case 'cat': {
      const text = node.subs.map((sub) => print(sub, state, 1)).join('');
      return level > 1 ? `(?:${text})` : text;
    }
    case 'alt': {
      const text = node.subs.map((sub) => print(sub, state, 0)).join('|');
      return level > 0 ? `(?:${text})` : text;
    }
    case 'rep': {
      const text = print(node.sub, state, 2) + quantifier(node.min, node.max) + (node.greedy ? '' : '?');
      return level > 1 ? `(?:${text})` : text;
    }
  }
}

function assertion(at: Assertion, state: PrintState): string {
  switch (at) {
    case 'lineStart':
      state.anchors = true;
      return '^';
    case 'lineEnd':
      state.anchors = true;
      return '$';
    case 'wordBoundary':
      return '\\b';
    case 'notWordBoundary':
      return '\\B';
    default:
      throw new Unprintable(at);
  }
}

/** `text` (one atom, or an alternation of byte sequences) wrapped as `level` requires. */
function atom(text: string, level: Level): string {
  if (level === 0 || isSingleAtom(text) || (level === 1 && !text.includes('|'))) return text;
  return `(?:${text})`;
}

/** Whether `text` is one class or one escaped byte (a quantifier applies to the whole of it). */
function isSingleAtom(text: string): boolean {
  return /^(?:\[[^\]]*\]|\\x[0-9a-f]{2}|[A-Za-z0-9_])$/.test(text);
}

/** A byte string (code units below 0x100) as a pattern that matches exactly those bytes. */
function escapeBytes(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) out += escapeByte(s.charCodeAt(i));
  return out;
}

function escapeByte(b: number): string {
  return (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || b === 0x5f
    ? String.fromCharCode(b)
    : `\\x${b.toString(16).padStart(2, '0')}`;
}

/** The code points RE2 matches for a literal under `(?i)`. */
function orbitRanges(cp: number): Ranges {
  return normalizeRanges(foldOrbit(cp).flatMap((c) => [c, c]));
}

/** The code points a class node matches, as RE2 reads it with the search's `-i`. */
function classRanges(node: Regex & { k: 'class' }, caseInsensitive: boolean): Ranges {
  const fold = node.fold ?? caseInsensitive;
  const cls = node.cls;
  if (!fold && cls.groups.every((g) => g.kind !== 'unicode')) {
    const ranges = normalizeRanges([...cls.ranges, ...cls.groups.flatMap(groupRanges)]);
    return cls.negated ? negateRanges(ranges) : ranges;
  }
  return matchedByRe2(printRegex({ ...node, fold }, { caseInsensitive: false, dotMatchesNewline: false }));
}

/** Classes RE2 has been asked about, by their RE2 text (bounded; entries are shared read-only). */
const re2Classes = new Map<string, Ranges>();
const MAX_CACHED_CLASSES = 256;

/** Byte offsets in `everyCodePoint()` where the encodings of 2, 3 and 4 bytes begin. */
const TWO = 0x80;
const THREE = TWO + 2 * (0x800 - 0x80);
const FOUR = THREE + 3 * (0x10000 - 0x800);
const END = FOUR + 4 * (0x110000 - 0x10000);

/**
 * The code points RE2 matches with the one-character pattern `re2Class`: RE2 runs once over
 * every code point, in order and UTF-8 encoded (4.4 MB), and each run of matches is a range.
 */
function matchedByRe2(re2Class: string): Ranges {
  const known = re2Classes.get(re2Class);
  if (known !== undefined) return known;
  const re = new RE2(`(?:${re2Class})+`, 'g');
  const text = everyCodePoint();
  const ranges: Ranges = [];
  for (let m = re.exec(text); m !== null; m = re.exec(text)) {
    const start = m.index;
    const end = start + m[0].byteLength;
    ranges.push(codePointAt(start), codePointAt(end) - 1);
  }
  if (re2Classes.size >= MAX_CACHED_CLASSES) re2Classes.clear();
  re2Classes.set(re2Class, ranges);
  return ranges;
}

/** The code point whose encoding starts at byte `offset` of `everyCodePoint()` (0x110000 at its end). */
function codePointAt(offset: number): number {
  if (offset < TWO) return offset;
  if (offset < THREE) return 0x80 + (offset - TWO) / 2;
  if (offset < FOUR) return 0x800 + (offset - THREE) / 3;
  return 0x10000 + (offset - FOUR) / 4;
}

/** Every code point from 0 to 10FFFF in order, UTF-8 encoded (surrogates as RE2 encodes them). */
function everyCodePoint(): Buffer {
  const out = Buffer.allocUnsafe(END);
  let at = 0;
  for (let cp = 0; cp < 0x110000; cp++) {
    if (cp < 0x80) out[at++] = cp;
    else if (cp < 0x800) {
      out[at++] = 0xc0 | (cp >> 6);
      out[at++] = 0x80 | (cp & 63);
    } else if (cp < 0x10000) {
      out[at++] = 0xe0 | (cp >> 12);
      out[at++] = 0x80 | ((cp >> 6) & 63);
      out[at++] = 0x80 | (cp & 63);
    } else {
      out[at++] = 0xf0 | (cp >> 18);
      out[at++] = 0x80 | ((cp >> 12) & 63);
      out[at++] = 0x80 | ((cp >> 6) & 63);
      out[at++] = 0x80 | (cp & 63);
    }
  }
  return out;
}

/** A UTF-8 byte sequence: one byte range a position. */
type Sequence = [number, number][];

/** Code point ranges as a pattern of the byte sequences RE2 compiles them to (see the module comment). */
export function printRanges(ranges: Ranges): string {
  const sequences: Sequence[] = [];
  for (let i = 0; i < ranges.length; i += 2) addRange(ranges[i], ranges[i + 1], sequences);
  // An empty class matches nothing.
  return sequences.length === 0 ? '[]' : printSequences(sequences);
}

/** RE2's AddRuneRangeUTF8: the sequences of `lo..hi`, appended to `out`. */
function addRange(lo: number, hi: number, out: Sequence[]): void {
  if (lo > hi) return;
  if (lo === 0x80 && hi === 0x10ffff) {
    out.push(
      [
        [0xc2, 0xdf],
        [0x80, 0xbf],
      ],
      [
        [0xe0, 0xef],
        [0x80, 0xbf],
        [0x80, 0xbf],
      ],
      [
        [0xf0, 0xf4],
        [0x80, 0xbf],
        [0x80, 0xbf],
        [0x80, 0xbf],
      ],
    );
    return;
  }
  // Ranges whose code points encode to as many bytes.
  for (const max of [0x7f, 0x7ff, 0xffff]) {
    if (lo <= max && max < hi) {
      addRange(lo, max, out);
      addRange(max + 1, hi, out);
      return;
    }
  }
  if (hi < 0x80) {
    out.push([[lo, hi]]);
    return;
  }
  // Ranges that agree on their leading bytes.
  for (let i = 1; i < 4; i++) {
    const m = (1 << (6 * i)) - 1; // the last i bytes of a sequence
    if ((lo & ~m) !== (hi & ~m)) {
      if ((lo & m) !== 0) {
        addRange(lo, lo | m, out);
        addRange((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) !== m) {
        addRange(lo, (hi & ~m) - 1, out);
        addRange(hi & ~m, hi, out);
        return;
      }
    }
  }
  const a = utf8(lo);
  const b = utf8(hi);
  const sequence: Sequence = [];
  for (let i = 0; i < a.length; i++) sequence.push([a.charCodeAt(i), b.charCodeAt(i)]);
  out.push(sequence);
}

/**
 * Sequences as an alternation, factored by their leading bytes (a trie whose branches with the
 * same tail share one class), one-byte sequences first: each alternative fails at its first
 * byte, and ASCII text mostly stops at the first.
 */
function printSequences(sequences: Sequence[]): string {
  // The first bytes cut into pieces that each sequence covers wholly or not at all.
  const cuts = new Set<number>();
  for (const s of sequences) cuts.add(s[0][0]).add(s[0][1] + 1);
  const points = [...cuts].sort((a, b) => a - b);
  const byTail = new Map<string, number[]>();
  for (let i = 0; i + 1 < points.length; i++) {
    const lo = points[i];
    const hi = points[i + 1] - 1;
    const tails = sequences.filter((s) => s[0][0] <= lo && hi <= s[0][1]).map((s) => s.slice(1));
    if (tails.length === 0) continue;
    const ends = tails.some((t) => t.length === 0);
    const rest = tails.filter((t) => t.length > 0);
    let tail = rest.length === 0 ? '' : printSequences(rest);
    if (rest.length > 0 && (ends || tail.includes('|'))) tail = `(?:${tail})${ends ? '?' : ''}`;
    const heads = byTail.get(tail);
    if (heads === undefined) byTail.set(tail, [lo, hi]);
    else if (heads[heads.length - 1] + 1 === lo) heads[heads.length - 1] = hi;
    else heads.push(lo, hi);
  }
  const alternatives: string[] = [];
  for (const [tail, heads] of byTail) {
    const head = printByteClass(heads);
    if (tail === '') alternatives.unshift(head);
    else alternatives.push(head + tail);
  }
  return alternatives.join('|');
}

/** Byte ranges `[lo, hi, ...]` as one class (one byte alone as itself). */
function printByteClass(ranges: number[]): string {
  if (ranges.length === 2 && ranges[0] === ranges[1]) return escapeByte(ranges[0]);
  let out = '[';
  for (let i = 0; i < ranges.length; i += 2) {
    out += `\\x${ranges[i].toString(16).padStart(2, '0')}`;
    if (ranges[i + 1] > ranges[i]) out += `-\\x${ranges[i + 1].toString(16).padStart(2, '0')}`;
  }
  return out + ']';
}
