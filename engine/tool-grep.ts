/**
 * `grep`: search file contents with an RE2 regex, matched line by line as ripgrep does.
 *
 *   files_with_matches  one path per line, densest first (matching lines ÷ total lines), ties
 *                       by path;
 *   count               `path:N` (N matching lines, as `rg --count`), same order;
 *   content             files in path order, `path:N:text` for matching lines, `path-N-text`
 *                       for context lines (`path:text` / `path-text` without line numbers),
 *                       `--` between non-adjacent groups when context is requested (also
 *                       between files, as ripgrep prints it), long lines cut as in `cat`.
 *
 * `offset` skips that many output entries (files, or content lines counting context lines but
 * not `--`), `headLimit` caps what follows; when more remain, a footer line starting with `[`
 * says so and how to continue. A search that passes `deadline` stops between documents and
 * reports what it found with a footer saying the results are incomplete.
 *
 * Pipeline: the regex's trigram query selects candidate documents from the postings; path,
 * glob, type and visibility filters drop candidates before any text is read; RE2 verifies each
 * remaining document in one pass over its buffer (line-matcher.ts).
 *
 * Parallel scans. `partition` restricts a call to the documents with docId % count === index.
 * For the sorted modes the caller runs `collectGrepCounts` once per share (e.g. in a piscina
 * pool; each worker opens the shard itself), then passes all the collections to
 * `emitGrepCounts`, which sorts and formats them (this is exactly what `grep` does with one
 * share). For content mode, path order must hold across shares: run the shares'
 * `collectGrepCounts` in parallel, then call `grep` once with `paths` set to the matching paths
 * (in any order); it reads only those files. Shares taken from different snapshots may
 * disagree about a file written meanwhile; `emitGrepCounts` keeps one entry per path.
 */

import { VfsError } from '../core/errors.js';
import { lineEndOf, lineStartsOf, type LineStarts } from './doc-text.js';
import { evaluateQuery, rootExists, selectCandidates, type GrepPartition } from './grep-candidates.js';
import { GrepFilter } from './grep-filter.js';
import { LineMatcher } from './line-matcher.js';
import { regexQuery } from './regex-query.js';
import type { DocMeta, ShardReader, ShardSnapshot } from './shard-reader.js';
import {
  ChunkedOutput,
  comparePaths,
  formatLine,
  HEARTBEAT,
  requestDirPath,
  requestFilePath,
  type ToolSummary,
} from './tool-output.js';
import { Visibility, type Claims } from './visibility.js';

export type { GrepPartition } from './grep-candidates.js';

/** What grep prints. */
export type GrepOutputMode = 'files_with_matches' | 'content' | 'count';

/** Parameters of `grep` (already validated by the HTTP layer; undefined means the default). */
export interface GrepRequest {
  /** Caller's claims: null for a management key. */
  claims: Claims;
  /** RE2 regular expression. */
  pattern: string;
  /** Directory or file to search; default `/`. */
  path?: string;
  /** ripgrep `--glob` filter (`*.md`, `src/**`, `!*.min.js`); default none. */
  glob?: string;
  /** ripgrep file type (`py`, `ts`, `md`, ...); default none. */
  type?: string;
  /** Output mode; default `files_with_matches`. */
  outputMode?: GrepOutputMode;
  /** `-i`: case-insensitive; default false. */
  caseInsensitive?: boolean;
  /** Matches may span lines and `.` matches `\n` (`rg -U --multiline-dotall`); default false. */
  multiline?: boolean;
  /** `-B`: context lines before each match (content mode); default `context`, else 0. */
  before?: number;
  /** `-A`: context lines after each match (content mode); default `context`, else 0. */
  after?: number;
  /** `-C`: context lines before and after, where `before`/`after` are not given; default 0. */
  context?: number;
  /** `-n`: print line numbers in content mode; default true. */
  lineNumbers?: boolean;
  /** Most entries (files, or content lines) to print after `offset`; default unlimited. */
  headLimit?: number;
  /** Entries to skip before `headLimit` applies; default 0. */
  offset?: number;
  /** Time (ms since the epoch) after which the search stops with partial results; default none. */
  deadline?: number;
  /** Search only this share of the documents (see the module comment); default all. */
  partition?: GrepPartition;
  /** Search only these files (canonical paths; see the module comment); default all. */
  paths?: readonly string[];
}

/** One file's result in the sorted modes. */
export interface GrepFileCount {
  /** The file's path. */
  path: string;
  /** Lines that match. */
  matchingLines: number;
  /** Lines of the file. */
  totalLines: number;
}

/** The per-file results of one share of a sorted-mode search. */
export interface GrepCollection {
  /** Files with at least one matching line, in no particular order. */
  files: GrepFileCount[];
  /** Candidate files (after the filters). */
  candidates: number;
  /** Candidate files actually searched (fewer when the deadline passed). */
  searched: number;
  /** True when the deadline stopped the search. */
  timedOut: boolean;
}

/** How often a long scan yields a heartbeat chunk. */
const HEARTBEAT_MS = 50;

interface GrepPlan {
  root: string;
  filter: GrepFilter;
  visibility: Visibility;
  matcher: LineMatcher;
  pattern: string;
  caseInsensitive: boolean;
  multiline: boolean;
  before: number;
  after: number;
  lineNumbers: boolean;
  headLimit: number;
  offset: number;
  deadline: number;
  partition: GrepPartition | undefined;
  paths: readonly string[] | undefined;
}

/** Applies the defaults to a copy and compiles the regex and filters (INVALID_PARAMETER on error). */
function plan(request: GrepRequest): GrepPlan {
  const caseInsensitive = request.caseInsensitive === true;
  const multiline = request.multiline === true;
  const matcher = new LineMatcher(request.pattern, { caseInsensitive, multiline });
  const root = requestDirPath(request.path);
  return {
    root,
    filter: new GrepFilter(root, request.glob, request.type),
    visibility: new Visibility(request.claims),
    matcher,
    pattern: request.pattern,
    caseInsensitive,
    multiline,
    before: request.before ?? request.context ?? 0,
    after: request.after ?? request.context ?? 0,
    lineNumbers: request.lineNumbers ?? true,
    headLimit: request.headLimit ?? Infinity,
    offset: request.offset ?? 0,
    deadline: request.deadline ?? Infinity,
    partition: request.partition,
    paths: request.paths?.map((p) => requestFilePath(p, 'paths')),
  };
}

/** Candidate documents of a planned search; NO_SUCH_FILE when the root does not exist. */
function candidates(snapshot: ShardSnapshot, p: GrepPlan): DocMeta[] {
  const kind = rootExists(snapshot, p.root, p.visibility);
  if (kind === null) throw new VfsError('NO_SUCH_FILE', { path: p.root });
  const ids = p.paths !== undefined ? null : evaluateQuery(snapshot, regexQuery(p.pattern, { caseInsensitive: p.caseInsensitive, multiline: p.multiline }));
  return selectCandidates(snapshot, ids, {
    root: p.root,
    rootIsFile: kind === 'file',
    filter: p.filter,
    visibility: p.visibility,
    partition: p.partition,
    paths: p.paths,
  });
}

/** Matching lines of one document (reads its text; nothing is kept). */
function countMatchingLines(snapshot: ShardSnapshot, meta: DocMeta, matcher: LineMatcher): number {
  if (meta.lines === 0) return 0;
  const value = snapshot.docValue(meta);
  matcher.begin(value.subarray(0, meta.textBytes), lineStartsOf(value, meta.textBytes, meta.lines));
  let count = 0;
  let covered = -1; // last line counted (multiline hits may overlap)
  while (matcher.next()) {
    const first = matcher.first > covered ? matcher.first : covered + 1;
    if (matcher.last >= first) {
      count += matcher.last - first + 1;
      covered = matcher.last;
    }
  }
  return count;
}

/**
 * Searches one share (or all) of the documents and returns per-file matching-line counts, for
 * `emitGrepCounts`. Yields only HEARTBEAT chunks.
 */
export function* collectGrepCounts(reader: ShardReader, request: GrepRequest): Generator<Buffer, GrepCollection> {
  const p = plan(request);
  const snapshot = reader.snapshot();
  try {
    // Id order follows the order texts were written in, which is the best disk order.
    const docs = candidates(snapshot, p).sort((a, b) => a.id - b.id);
    const files: GrepFileCount[] = [];
    let searched = 0;
    let timedOut = false;
    let beat = Date.now();
    for (const meta of docs) {
      const now = Date.now();
      if (now > p.deadline) {
        timedOut = true;
        break;
      }
      if (now - beat > HEARTBEAT_MS) {
        beat = now;
        yield HEARTBEAT;
      }
      const matching = countMatchingLines(snapshot, meta, p.matcher);
      searched++;
      if (matching > 0) files.push({ path: meta.path, matchingLines: matching, totalLines: meta.lines });
    }
    return { files, candidates: docs.length, searched, timedOut };
  } finally {
    snapshot.done();
  }
}

/** Densest first (matching ÷ total lines), ties by path. */
function byDensity(a: GrepFileCount, b: GrepFileCount): number {
  // Cross-multiplied: exact for counts below 2^26.
  return b.matchingLines * a.totalLines - a.matchingLines * b.totalLines || comparePaths(a.path, b.path);
}

function incompleteNote(searched: number, candidates: number): string {
  return `search stopped at the time limit after ${searched} of ${candidates} files, so results are incomplete: narrow with path, glob or type`;
}

/**
 * Formats sorted-mode results (`files_with_matches` or `count` per `request.outputMode`) from
 * one or more collections: merge, sort, `offset`, `headLimit`, footer.
 */
export function* emitGrepCounts(request: GrepRequest, collections: readonly GrepCollection[]): Generator<Buffer, ToolSummary> {
  const mode = request.outputMode ?? 'files_with_matches';
  const offset = request.offset ?? 0;
  const headLimit = request.headLimit ?? Infinity;
  const seen = new Set<string>();
  const files: GrepFileCount[] = [];
  let searched = 0;
  let total = 0;
  let timedOut = false;
  for (const c of collections) {
    searched += c.searched;
    total += c.candidates;
    timedOut ||= c.timedOut;
    for (const f of c.files) {
      if (seen.has(f.path)) continue;
      seen.add(f.path);
      files.push(f);
    }
  }
  files.sort(byDensity);
  const out = new ChunkedOutput();
  const end = Math.min(files.length, offset + headLimit);
  for (let i = offset; i < end; i++) {
    const f = files[i];
    if (out.write(mode === 'count' ? `${f.path}:${f.matchingLines}\n` : `${f.path}\n`)) yield* out.drain();
  }
  const notes: string[] = [];
  if (end < files.length) {
    notes.push(`${files.length - end} more files not shown (${files.length} in total); raise head_limit or continue with offset=${end}`);
  }
  if (timedOut) notes.push(incompleteNote(searched, total));
  if (notes.length > 0) out.write(`[${notes.join('; ')}]\n`);
  yield* out.drain(true);
  return { resultCount: Math.max(0, end - offset) };
}

/**
 * True when the pattern gives the index nothing to narrow with (its trigram query is `all`), so
 * grep reads every file under the root: the case worth splitting into partitions.
 */
export function grepScansEverything(request: Pick<GrepRequest, 'pattern' | 'caseInsensitive' | 'multiline'>): boolean {
  return regexQuery(request.pattern, { caseInsensitive: request.caseInsensitive === true, multiline: request.multiline === true }).op === 'all';
}

/** Runs `grep`. Throws INVALID_PARAMETER for a bad pattern/glob/type, NO_SUCH_FILE for a missing path. */
export function* grep(reader: ShardReader, request: GrepRequest): Generator<Buffer, ToolSummary> {
  if ((request.outputMode ?? 'files_with_matches') !== 'content') {
    const collection = yield* collectGrepCounts(reader, request);
    return yield* emitGrepCounts(request, [collection]);
  }
  return yield* grepContent(reader, plan(request));
}

function* grepContent(reader: ShardReader, p: GrepPlan): Generator<Buffer, ToolSummary> {
  const snapshot = reader.snapshot();
  try {
    const docs = candidates(snapshot, p);
    const out = new ChunkedOutput();
    const separators = p.before > 0 || p.after > 0;
    const matcher = p.matcher;
    let skip = p.offset;
    let emitted = 0;
    let matchesShown = 0;
    let cut = false;
    let lastDoc = -1;
    let lastLine = -1;
    let searched = 0;
    let timedOut = false;
    let beat = Date.now();
    // The current document; `text`/`starts` view lmdb-js's reused read buffer and are
    // re-read after every yield.
    let meta: DocMeta = docs[0];
    let text: Buffer = Buffer.alloc(0);
    let starts: LineStarts = new Uint32Array(0);
    const load = (): void => {
      const value = snapshot.docValue(meta);
      text = value.subarray(0, meta.textBytes);
      starts = lineStartsOf(value, meta.textBytes, meta.lines);
    };
    const emit = (line: number, isMatch: boolean): void => {
      if (cut) return;
      if (skip > 0) {
        skip--;
        return;
      }
      if (emitted >= p.headLimit) {
        cut = true;
        return;
      }
      if (separators && lastDoc !== -1 && (lastDoc !== meta.id || lastLine !== line - 1)) out.write('--\n');
      const body = formatLine(text, starts[line], lineEndOf(text, starts, line));
      const sep = isMatch ? ':' : '-';
      out.write(p.lineNumbers ? `${meta.path}${sep}${line + 1}${sep}${body}\n` : `${meta.path}${sep}${body}\n`);
      emitted++;
      if (isMatch) matchesShown++;
      lastDoc = meta.id;
      lastLine = line;
    };

    for (const doc of docs) {
      if (cut) break;
      const now = Date.now();
      if (now > p.deadline) {
        timedOut = true;
        break;
      }
      if (now - beat > HEARTBEAT_MS) {
        beat = now;
        yield HEARTBEAT;
      }
      searched++;
      if (doc.lines === 0) continue;
      meta = doc;
      load();
      matcher.begin(text, starts);
      let printed = -1; // last line of this file printed (or skipped)
      let afterUntil = -1; // after-context of the last hit reaches this line
      while (!cut && matcher.next()) {
        const first = matcher.first > printed ? matcher.first : printed + 1;
        const last = matcher.last;
        if (last < first) continue;
        const contextEnd = Math.min(afterUntil, first - 1);
        for (let i = printed + 1; i <= contextEnd; i++) emit(i, false);
        if (contextEnd > printed) printed = contextEnd;
        for (let i = Math.max(printed + 1, first - p.before); i < first; i++) emit(i, false);
        for (let i = first; i <= last; i++) emit(i, true);
        printed = last;
        afterUntil = last + p.after;
        if (out.ready) {
          yield* out.drain();
          beat = Date.now();
          load();
          matcher.rebind(text, starts);
        }
      }
      const tail = Math.min(afterUntil, meta.lines - 1);
      for (let i = printed + 1; i <= tail; i++) emit(i, false);
      if (out.ready) {
        yield* out.drain();
        beat = Date.now();
      }
    }
    const notes: string[] = [];
    if (cut) notes.push(`output cut at head_limit=${p.headLimit}; more lines follow: raise head_limit or continue with offset=${p.offset + emitted}`);
    if (timedOut) notes.push(incompleteNote(searched, docs.length));
    if (notes.length > 0) out.write(`[${notes.join('; ')}]\n`);
    yield* out.drain(true);
    return { resultCount: matchesShown };
  } finally {
    snapshot.done();
  }
}
