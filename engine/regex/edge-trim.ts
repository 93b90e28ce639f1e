/**
 * A pattern cut to what decides whether a line holds a match. grep reports lines, never where a
 * match starts or ends, so outside multiline mode the line matcher only asks whether a line holds
 * one; a repetition at either edge of the pattern can then keep only its fewest repeats:
 * `\S+\s+\S+` finds the lines `\S\s+\S` finds, `\w{20,}` those of `\w{20}`, `\s*foo` those of `foo`.
 *
 * Why it holds, for a pattern `X{n,m} R` (the right edge is the mirror image): a match of it is
 * k ≥ n matches of X and then one of R, and the last n of those k with the match of R are a match
 * of `X{n} R` in the same line; the converse is immediate. An assertion (`^ $ \b`) reads the
 * characters beside it, which are the same text in both, so the argument holds with assertions
 * anywhere; only an assertion at the edge itself stops the cut, as a literal or class does. An
 * alternation at the edge is cut branch by branch, and when one branch can be cut to nothing the
 * whole alternation can: a match of `(A|B) R` ends with a match of R.
 *
 * One cut is not made: a branch of an alternation that the cut would leave one character wide keeps
 * its repetition (`\W+|x` stays), unless that character is ASCII. RE2 joins an alternation's
 * one-character branches into one class, and it compiles a class spanning exactly U+0080-U+10FFFF
 * to a shorter form that also accepts a few invalid UTF-8 sequences (`F4 90 80 80`), so two
 * branches joined could match such a line where neither did alone.
 *
 * The shorter form is cheaper for both engines: RE2 stops a hit earlier (node-re2's `test` finds
 * the whole leftmost match, forward and back), and V8 no longer backtracks through `\S+` at every
 * start (docs/benchmarks.md, "Edges of a pattern").
 */

import { charRanges } from './byte-regex.js';
import type { Regex } from './syntax.js';

const EMPTY: Regex = { k: 'empty' };

type Side = 'left' | 'right';

/**
 * `node` with the repetitions at both of its edges cut to their fewest repeats (see the module
 * comment); `caseInsensitive` is the search's `-i`, which a node's unset fold flag follows.
 */
export function trimEdges(node: Regex, caseInsensitive: boolean): Regex {
  return trim(trim(node, 'left', caseInsensitive), 'right', caseInsensitive);
}

/** `node` cut at one edge; the node itself when nothing there repeats. */
function trim(node: Regex, side: Side, ci: boolean): Regex {
  switch (node.k) {
    case 'rep':
      if (node.min === 0) return EMPTY;
      // One repeat left: its own edge is the pattern's edge.
      if (node.min === 1) return trim(node.sub, side, ci);
      return trimRepeats(node, side, ci);
    case 'alt': {
      const subs = node.subs.map((sub) => {
        const cut = trim(sub, side, ci);
        return cut !== sub && wideCharacter(cut, ci) ? sub : cut;
      });
      if (subs.some((sub) => sub.k === 'empty')) return EMPTY;
      return subs.every((sub, i) => sub === node.subs[i]) ? node : { k: 'alt', subs };
    }
    case 'cat': {
      const subs = side === 'left' ? node.subs : [...node.subs].reverse();
      for (let i = 0; i < subs.length; i++) {
        const cut = trim(subs[i], side, ci);
        if (cut.k === 'empty') continue;
        if (i === 0 && cut === subs[0]) return node;
        const rest = [cut, ...subs.slice(i + 1)];
        if (side === 'right') rest.reverse();
        return rest.length === 1 ? rest[0] : { k: 'cat', subs: rest };
      }
      return EMPTY;
    }
    default:
      return node;
  }
}

/**
 * A repetition of at least two: its fewest repeats, and of those the one at the edge cut as any
 * other node is (`X{n}` is `X X{n-1}`, and `X{n-1} X` at the right), so `(\w+,\s*){6}` runs as
 * `\w,\s*(?:\w+,\s*){5}` and then, at the right, with the last `\s*` cut too: V8 no longer
 * tries every length of the first `\w+` at every start.
 */
function trimRepeats(node: Regex & { k: 'rep' }, side: Side, ci: boolean): Regex {
  const fewest = node.max === node.min ? node : { ...node, max: node.min };
  const cut = trim(node.sub, side, ci);
  if (cut === node.sub) return fewest;
  // X R matches the lines R does, for any R: so do X{n} R and, one repeat at a time, R.
  if (cut.k === 'empty') return EMPTY;
  const rest: Regex = { ...fewest, min: node.min - 1, max: node.min - 1 };
  return { k: 'cat', subs: side === 'left' ? [cut, rest] : [rest, cut] };
}

/** Whether `node` is one character that may be outside ASCII (see the module comment). */
function wideCharacter(node: Regex, ci: boolean): boolean {
  const ranges = charRanges(node, ci);
  return ranges !== null && ranges.length > 0 && ranges[ranges.length - 1] >= 0x80;
}
