/**
 * ripgrep's line rule, applied to the tree: outside multiline mode a match never spans lines, so
 * the pattern is rewritten until it cannot match `\n` at all, and every hit RE2 finds in a whole
 * document lies inside one line (no hit needs a second look). As ripgrep's `strip.rs` does:
 *
 *   - `\n` leaves every class: `[^a-z]` becomes `[^a-z\n]`, `\s` `[\t\f\r ]`, `\D` and `\W`
 *     lose it, `\P{L}` becomes `[^\p{L}\n]`; `.` under `(?s)` becomes `[^\n]`;
 *   - a literal `\n` (`\n`, `\x0a`, `a\nb`, `(\n)?`), or a class of `\n` alone (`[\n]`), is
 *     refused: the caller asked for the line break itself, which only multiline mode can match;
 *   - the text's edges are the line's: `\A` and `\z` (and `^ $` under `(?-m)`) become `^ $`.
 *
 * One node stays able to match `\n`, and a search with it checks each hit's line again: `\C`
 * (any byte, which no class can narrow).
 */

import RE2 from 're2';
import { countRanges, groupRanges, MAX_RUNE, normalizeRanges, rangesHold, removeFromRanges } from './char-class.js';
import type { CharClass, ClassGroup, Regex } from './syntax.js';

const NEWLINE = 0x0a;

/** What `applyLineRule` throws for a pattern that names the line break itself. */
export class LineBreakInPattern extends Error {
  constructor() {
    super('the literal "\\n" is not allowed in a regex outside multiline mode; set multiline=true to match across lines');
  }
}

/** Whether each Unicode group (by name) holds U+000A, as RE2 itself answers. */
const unicodeHoldingNewline = new Map<string, boolean>();

/** Whether a group holds `\n` (under any case flag: nothing folds to or from `\n`). */
function groupHoldsNewline(group: ClassGroup): boolean {
  if (group.kind !== 'unicode') return rangesHold(groupRanges(group), NEWLINE);
  let holds = unicodeHoldingNewline.get(group.name);
  if (holds === undefined) {
    holds = new RE2(`\\p{${group.name}}`).test('\n');
    if (unicodeHoldingNewline.size < 1024) unicodeHoldingNewline.set(group.name, holds);
  }
  return holds !== group.negated;
}

/** Whether a class (read under any case flag) holds `\n`. */
function classHoldsNewline(cls: CharClass): boolean {
  const inItems = rangesHold(cls.ranges, NEWLINE) || cls.groups.some(groupHoldsNewline);
  return inItems !== cls.negated;
}

/**
 * The tree as it matches within one line (see the module comment). Throws LineBreakInPattern.
 */
export function applyLineRule(node: Regex): Regex {
  switch (node.k) {
    case 'empty':
    case 'byte':
      return node;
    case 'lit':
      if (node.cp === NEWLINE) throw new LineBreakInPattern();
      return node;
    case 'dot':
      return node.nl === false ? node : { k: 'dot', nl: false };
    case 'assert':
      if (node.at === 'textStart') return { k: 'assert', at: 'lineStart' };
      if (node.at === 'textEnd') return { k: 'assert', at: 'lineEnd' };
      return node;
    case 'class':
      return classWithoutNewline(node);
    case 'cat':
    case 'alt': {
      let changed = false;
      const subs = node.subs.map((sub) => {
        const out = applyLineRule(sub);
        changed ||= out !== sub;
        return out;
      });
      return changed ? { k: node.k, subs } : node;
    }
    case 'rep': {
      const sub = applyLineRule(node.sub);
      return sub === node.sub ? node : { ...node, sub };
    }
  }
}

/**
 * A class node without `\n` (the node itself when it has none). RE2 reads each item of a class
 * on its own (under `(?i)` a negated group is its positive form folded, then negated) and joins
 * them, so each item loses `\n` on its own: explicit ranges directly, and a group G that holds
 * it becomes the class `[^G'\n]`, G' being G negated, beside the rest (alternatives of single
 * characters match what one class of them matches).
 */
function classWithoutNewline(node: Regex & { k: 'class' }): Regex {
  const cls = node.cls;
  if (!classHoldsNewline(cls)) return node;
  if (cls.negated) {
    // `[^…]` holds `\n` because its items do not: adding it to them takes it out.
    const ranges = normalizeRanges([...cls.ranges, NEWLINE, NEWLINE]);
    if (cls.groups.length === 0 && countRanges(ranges) === MAX_RUNE + 1) throw new LineBreakInPattern();
    return { k: 'class', cls: { ...cls, ranges }, fold: node.fold };
  }
  const ranges = removeFromRanges(cls.ranges, NEWLINE);
  const holding = cls.groups.filter(groupHoldsNewline);
  const others = cls.groups.filter((g) => !groupHoldsNewline(g));
  if (ranges.length === 0 && others.length === 0 && holding.length === 0) throw new LineBreakInPattern(); // `[\n]`
  const parts: Regex[] = holding.map((g) => ({
    k: 'class',
    cls: { negated: true, ranges: [NEWLINE, NEWLINE], groups: [{ ...g, negated: !g.negated }] },
    fold: node.fold,
  }));
  if (ranges.length > 0 || others.length > 0) parts.unshift({ k: 'class', cls: { negated: false, ranges, groups: others }, fold: node.fold });
  return parts.length === 1 ? parts[0] : { k: 'alt', subs: parts };
}

/** Whether the tree can match a string holding `\n`, with the search's `-i` and multiline mode. */
export function canMatchNewline(node: Regex, multiline: boolean): boolean {
  switch (node.k) {
    case 'empty':
    case 'assert':
      return false;
    case 'byte':
      return true;
    case 'lit':
      return node.cp === NEWLINE;
    case 'dot':
      return node.nl ?? multiline;
    case 'class':
      return classHoldsNewline(node.cls);
    case 'cat':
    case 'alt':
      return node.subs.some((sub) => canMatchNewline(sub, multiline));
    case 'rep':
      return node.max !== 0 && canMatchNewline(node.sub, multiline);
  }
}

/** Whether the tree reads the text's own edges (`\A`, `\z`, or `^ $` under `(?-m)`). */
export function readsTextEdges(node: Regex): boolean {
  switch (node.k) {
    case 'assert':
      return node.at === 'textStart' || node.at === 'textEnd';
    case 'cat':
    case 'alt':
      return node.subs.some(readsTextEdges);
    case 'rep':
      return readsTextEdges(node.sub);
    default:
      return false;
  }
}
