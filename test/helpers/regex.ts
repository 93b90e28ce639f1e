/**
 * The pattern analyses one question at a time, for table tests: each reads the pattern's facts
 * (engine/regex/pattern.ts) and asks one of them. Queries are read in multiline mode, where no
 * pattern is refused: the query is the same in both modes.
 */
import { analyzePattern, patternQuery, type PatternOptions } from '../../engine/regex/pattern.js';
import type { Query } from '../../engine/regex/query.js';
import { type CaseInsensitiveRequired, caseInsensitiveRequired } from '../../engine/regex/required.js';

/** Options of `regexQuery`. */
export interface RegexQueryOptions extends PatternOptions {
  quadgrams?: boolean;
}

/** The trigram query of `pattern`. */
export function regexQuery(pattern: string, options: RegexQueryOptions = {}): Query {
  return patternQuery(analyzePattern(pattern, { ...options, multiline: true }), options);
}

/** The required literals the case-sensitive prefilter would search for (null under -i or multiline). */
export function requiredLiterals(pattern: string, options: PatternOptions = {}): Buffer[] | null {
  if (options.caseInsensitive === true || options.multiline === true) return null;
  return analyzePattern(pattern, { multiline: true }).required?.map((s) => Buffer.from(s, 'latin1')) ?? null;
}

/** What the -i prefilter would search for. */
export function foldedRequired(pattern: string): CaseInsensitiveRequired | null {
  const required = analyzePattern(pattern, { multiline: true }).required;
  return required === null ? null : caseInsensitiveRequired(required);
}
