/**
 * One grep pattern, read once: `analyzePattern` parses it into its tree (syntax.ts) and derives
 * from the tree every fact the engine needs; `compilePattern` adds the RE2 regex that searches.
 *
 * Outside multiline mode the tree is first rewritten by ripgrep's line rule (line-rule.ts), and
 * RE2 compiles the rewritten tree, printed (print.ts), whenever the rule changed it. The facts
 * that steer the line matcher's paths (literal alternatives, literal prefix, can-match-newline,
 * reads-text-edges) describe the tree RE2 runs; the trigram query and the required literals are
 * computed from the tree as written, which matches in every line the rewritten one matches in.
 * Where no match can meet `\n`, the rewritten tree's edges are also trimmed (edge-trim.ts): its
 * matches are shorter, in the same lines.
 */

import RE2 from 're2';
import { invalidParameter } from '../../core/errors.js';
import { Budget, GiveUp } from './budget.js';
import { utf8 } from './bytes.js';
import { type ByteRegex, type ClassRun, classRunOf, compileByteRegex } from './byte-regex.js';
import { trimEdges } from './edge-trim.js';
import { applyLineRule, canMatchNewline, LineBreakInPattern, readsTextEdges } from './line-rule.js';
import { lower } from './lowered.js';
import { printRegex } from './print.js';
import { ALL, type Query, QueryAlgebra } from './query.js';
import { requiredStrings } from './required.js';
import { parseRegex, RegexSyntaxError, type Regex } from './syntax.js';
import { foldedRequiredQuads, trigramQuery } from './trigram-plan.js';

/** How a pattern is searched; undefined means false. */
export interface PatternOptions {
  /** `-i`: case-insensitive (Unicode simple case folding). */
  caseInsensitive?: boolean;
  /** `-U`: `.` matches newlines and matches may span lines. */
  multiline?: boolean;
}

/** Everything the engine knows about a pattern, derived from its one tree. */
export interface PatternFacts {
  /** The pattern as the caller gave it. */
  readonly source: string;
  /**
   * The tree as written; null when the parser cannot read a pattern (only ever one RE2 rejects,
   * or a gap in the parser), and then every fact below is the safe one.
   */
  readonly tree: Regex | null;
  /** `-i`, or a pattern whose every letter and class carries its own case flag, one at least `(?i)`. */
  readonly caseInsensitive: boolean;
  readonly multiline: boolean;
  /** What RE2 compiles (with `re2Flags`): `source`, or the line rule's rewrite printed. */
  readonly re2Source: string;
  readonly re2Flags: string;
  /** True when the regex RE2 runs may match a string holding `\n`. */
  readonly canMatchNewline: boolean;
  /**
   * Outside multiline mode, when no match can meet `\n`: a pattern (flags `re2Flags` without
   * `g`) that matches, from a line's start, the longest run of consecutive lines that each hold a
   * match, `\n`s included; null otherwise. The line matcher counts dense hits with it.
   */
  readonly lineRuns: string | null;
  /** True when the regex RE2 runs reads the text's own edges (`\A`, `\z`, `(?-m)^`). */
  readonly readsTextEdges: boolean;
  /**
   * The alternatives (UTF-8) of a pattern that is only literal text or literal texts joined by
   * `|`, none empty, outside `-i` and multiline mode; null otherwise.
   */
  readonly literalAlternatives: Buffer[] | null;
  /** The literal code points every match starts with ('' when none or unsure). */
  readonly literalPrefix: string;
  /**
   * Byte strings (one code unit a byte) of which every match contains one, the tree read
   * without folding (letters under `(?i)` contribute none); null when there is no useful set.
   */
  readonly required: string[] | null;
}

const NEWLINE = 0x0a;

/**
 * The facts of `pattern` under `options`. Throws INVALID_PARAMETER naming `pattern` when it names
 * the line break outside multiline mode; does not check RE2 syntax (compilePattern does).
 */
export function analyzePattern(pattern: string, options: PatternOptions = {}): PatternFacts {
  const multiline = options.multiline === true;
  let tree: Regex | null = null;
  try {
    tree = parseRegex(pattern);
  } catch (error) {
    if (!(error instanceof RegexSyntaxError)) throw error;
  }
  const caseInsensitive = options.caseInsensitive === true || (tree !== null && foldsThroughout(tree));
  const re2Flags = 'gm' + (caseInsensitive ? 'i' : '') + (multiline ? 's' : '');
  if (tree === null) {
    return {
      source: pattern,
      tree,
      caseInsensitive,
      multiline,
      re2Source: pattern,
      re2Flags,
      canMatchNewline: true,
      lineRuns: null,
      readsTextEdges: true,
      literalAlternatives: null,
      literalPrefix: '',
      required: null,
    };
  }
  let searched = tree; // the tree RE2 runs
  if (!multiline) {
    try {
      searched = lineTree(tree, caseInsensitive);
    } catch (error) {
      if (error instanceof LineBreakInPattern) throw invalidParameter('pattern', error.message);
      throw error;
    }
  }
  const newline = canMatchNewline(searched, multiline);
  // Outside multiline mode the rewritten tree, printed once: what RE2 runs when the rule changed
  // the tree, and the heart of the run pattern.
  const printed = multiline ? null : printRegex(searched, { caseInsensitive, dotMatchesNewline: false });
  return {
    source: pattern,
    tree,
    caseInsensitive,
    multiline,
    re2Source: printed === null || searched === tree ? pattern : printed,
    re2Flags,
    canMatchNewline: newline,
    lineRuns: printed === null || newline ? null : `^(?:[^\\n]*?(?:${printed})[^\\n]*(?:\\n|\\z))+`,
    readsTextEdges: readsTextEdges(searched),
    literalAlternatives: caseInsensitive || multiline ? null : literalAlternatives(searched),
    literalPrefix: literalPrefix(searched),
    required: safely(() => requiredStrings(lower(tree, false, new Budget()), new Budget()), null),
  };
}

/** A pattern's facts and the regexes that search. */
export interface CompiledPattern {
  readonly facts: PatternFacts;
  /** RE2's (flags `re2Flags`). */
  readonly regex: RE2;
  /**
   * The same tree for V8 over text read as Latin-1 (byte-regex.ts), outside multiline mode when
   * no match can meet `\n`; null when it is not printed. Compiled at the first call (a Unicode
   * class costs RE2 a run over every code point), so a search that never tries V8 pays nothing.
   */
  readonly byteRegex: () => ByteRegex | null;
  /**
   * The same tree as a run of one class (byte-regex.ts, ClassRun), outside multiline mode when
   * no match can meet `\n`; null when it is not one. Computed at the first call, as `byteRegex`.
   */
  readonly classRun: () => ClassRun | null;
}

/**
 * Checks `pattern` with RE2 (a syntax error is INVALID_PARAMETER naming `pattern`, RE2's message
 * quoting the caller's pattern), reads its facts, and compiles what RE2 is to run.
 */
export function compilePattern(pattern: string, options: PatternOptions = {}): CompiledPattern {
  const flags = 'gm' + (options.caseInsensitive === true ? 'i' : '') + (options.multiline === true ? 's' : '');
  let checked: RE2;
  try {
    checked = new RE2(pattern, flags);
  } catch (error) {
    // node-re2 shows the pattern with the flags it added, e.g. `(?m)`: show the caller's pattern.
    throw invalidParameter('pattern', (error as Error).message.replace(/\(\?[ims]+\)/, ''));
  }
  const facts = analyzePattern(pattern, options);
  const same = facts.re2Source === pattern && facts.re2Flags === flags;
  // The tree each later form is made from, where a line's match cannot meet `\n`.
  const searched = once((): Regex | null => {
    const tree = facts.tree;
    return tree === null || facts.multiline || facts.canMatchNewline ? null : lineTree(tree, facts.caseInsensitive);
  });
  return {
    facts,
    regex: same ? checked : new RE2(facts.re2Source, facts.re2Flags),
    byteRegex: once(() => {
      const tree = searched();
      return tree === null ? null : compileByteRegex(tree, facts.caseInsensitive);
    }),
    classRun: once(() => {
      const tree = searched();
      return tree === null ? null : classRunOf(tree, facts.caseInsensitive);
    }),
  };
}

/** `make`, called at the first call only; later calls return what it returned. */
function once<T>(make: () => T): () => T {
  let made = false;
  let value: T;
  return () => {
    if (!made) {
      value = make();
      made = true;
    }
    return value;
  };
}

/**
 * The tree as the line matcher runs it outside multiline mode: the line rule applied, and then,
 * where no match can meet `\n`, the edges trimmed (edge-trim.ts), since only which lines hold a
 * match counts. Throws LineBreakInPattern.
 */
function lineTree(tree: Regex, caseInsensitive: boolean): Regex {
  const lines = applyLineRule(tree);
  return canMatchNewline(lines, false) ? lines : trimEdges(lines, caseInsensitive);
}

/**
 * The trigram query of a pattern: a superset of the files it can match in (`all` when it cannot
 * tell). With `quadgrams`, each string's quadgrams too, and under `-i` the folded quadgrams of
 * the required literals, for an index that lists them.
 */
export function patternQuery(facts: PatternFacts, options: { quadgrams?: boolean } = {}): Query {
  const tree = facts.tree;
  if (tree === null) return ALL;
  const quadgrams = options.quadgrams === true;
  const alg = new QueryAlgebra(new Budget(), quadgrams);
  const q = safely(() => trigramQuery(alg, lower(tree, facts.caseInsensitive, alg.budget)), ALL);
  if (!facts.caseInsensitive || !quadgrams || facts.required === null) return q;
  // The folded quadgrams get a budget of their own: the query stands without them.
  const quads = new QueryAlgebra(new Budget(), true);
  return safely(() => quads.and(q, foldedRequiredQuads(quads, facts.required!)), q);
}

/** `run()`, or `fallback` when it runs out of budget (a query or set that is never narrower). */
function safely<T>(run: () => T, fallback: T): T {
  try {
    return run();
  } catch (error) {
    if (error instanceof GiveUp || error instanceof RangeError) return fallback;
    throw error;
  }
}

/** True when every literal and class has a case flag of its own and one at least is `(?i)`. */
function foldsThroughout(tree: Regex): boolean {
  let folded = false;
  const visit = (node: Regex): boolean => {
    switch (node.k) {
      case 'lit':
      case 'class':
        if (node.fold === undefined) return false;
        folded ||= node.fold;
        return true;
      case 'cat':
      case 'alt':
        return node.subs.every(visit);
      case 'rep':
        return visit(node.sub);
      default:
        return true;
    }
  };
  return visit(tree) && folded;
}

/** The code point of a literal node read case-sensitively (outside `-i`), or null. */
function plainLiteral(node: Regex): number | null {
  return node.k === 'lit' && node.fold !== true ? node.cp : null;
}

function literalAlternatives(tree: Regex): Buffer[] | null {
  const branches = tree.k === 'alt' ? tree.subs : [tree];
  const out: Buffer[] = [];
  for (const branch of branches) {
    const items = branch.k === 'cat' ? branch.subs : [branch];
    let text = '';
    for (const item of items) {
      const cp = plainLiteral(item);
      if (cp === null || cp === NEWLINE) return null;
      text += utf8(cp);
    }
    if (text === '') return null;
    out.push(Buffer.from(text, 'latin1'));
  }
  return out;
}

function literalPrefix(tree: Regex): string {
  let out = '';
  let node = tree;
  while (node.k === 'cat' && node.subs.length > 0) {
    let i = 0;
    for (; i < node.subs.length && node.subs[i].k === 'lit'; i++) out += String.fromCodePoint((node.subs[i] as { cp: number }).cp);
    if (i === node.subs.length || node.subs[i].k !== 'cat') return out;
    node = node.subs[i];
  }
  return node.k === 'lit' ? out + String.fromCodePoint(node.cp) : out;
}
