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
 * Parallel scans. A search can be split into shares that run in parallel, e.g. in a piscina
 * pool where each worker opens the shard itself: contiguous path ranges balanced by text bytes
 * in content mode (which prints in path order), hash classes of paths in the sorted modes
 * (which mix every directory, so that no share gets all the prose and another all the code).
 * Which share a call searches is a GrepShare passed beside the request (none: the whole search).
 * The first share runs with `lead`: having found its candidates, it reports the further shares
 * with each one's candidate ids through `lead.onSplit` before reading any text (none when the
 * candidates are too few to be worth splitting), and searches its own. The caller starts each
 * further share (`pathRange` or `pathShare`, and `candidateIds`). A share whose snapshot has the
 * lead's docsVersion holds exactly the lead's documents, so it takes the lead's candidates
 * instead of evaluating the query again, and the whole search reads one version of the shard;
 * otherwise (a write committed in between) it evaluates the query over its share. Ranges and
 * classes are defined by paths, so shares from different versions still cover every path
 * exactly once. Content shares print no footer (their GrepContentSummary says whether they
 * stopped early): the caller concatenates the outputs in range order, puts `--` between two
 * shares' output when context is on, and ends with `grepContentFooter`. Sorted-mode shares
 * return GrepCollections for `emitGrepCounts` (the read pool merges them in a task of their own).
 */

import { VfsError } from '../core/errors.js';
import { lineEndOf, lineStartsOf, type LineStarts } from './doc-text.js';
import { evaluateQuery, pathHash, rootExists, selectCandidates, type PathShare } from './grep-candidates.js';
import { GrepFilter } from './grep-filter.js';
import { LineMatcher } from './line-matcher.js';
import { WASM_MIN_LINES } from './line-printer.js';
import { GuardedScan, textBytes } from './guarded-scan.js';
import { compilePattern, patternQuery, type PatternFacts } from './regex/pattern.js';
import type { DocMeta } from './shard-format.js';
import type { ShardSource } from './shard-reader.js';
import type { ShardSnapshot } from './shard-snapshot.js';
import { CHUNK_BYTES, ChunkedOutput, comparePaths, formatLine, HEARTBEAT, MAX_LINE_CHARS, requestDirPath, type ToolSummary } from './tool-output.js';
import { Visibility, type Claims } from './visibility.js';

/** What grep prints. */
export type GrepOutputMode = 'files_with_matches' | 'content' | 'count';

/**
 * Parameters of `grep`, as a caller asks for them (already validated by the HTTP layer);
 * undefined means the default, applied by grepWithDefaults.
 */
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
}

/** A GrepRequest with every default applied (grepWithDefaults); `context` is folded into `before` and `after`. */
export type GrepSettings = Required<Omit<GrepRequest, 'glob' | 'type' | 'context'>> & Pick<GrepRequest, 'glob' | 'type'>;

/** A copy of `request` with every default applied: the one place grep's defaults are written. */
export function grepWithDefaults(request: GrepRequest): GrepSettings {
  return {
    claims: request.claims,
    pattern: request.pattern,
    path: request.path ?? '/',
    glob: request.glob,
    type: request.type,
    outputMode: request.outputMode ?? 'files_with_matches',
    caseInsensitive: request.caseInsensitive ?? false,
    multiline: request.multiline ?? false,
    before: request.before ?? request.context ?? 0,
    after: request.after ?? request.context ?? 0,
    lineNumbers: request.lineNumbers ?? true,
    headLimit: request.headLimit ?? Infinity,
    offset: request.offset ?? 0,
    deadline: request.deadline ?? Infinity,
  };
}

/**
 * Which share of a split search a call searches, passed beside its GrepRequest (see the module
 * comment); undefined fields mean the whole search.
 */
export interface GrepShare {
  /** Content mode: search only the files whose paths are in this range, and print no footer; default all. */
  pathRange?: GrepPathRange;
  /** Sorted modes: search only the files of this hash class of paths; default all. */
  pathShare?: PathShare;
  /** The lead's candidates for this share, used if this snapshot has the same docsVersion; default: evaluate the query. */
  candidateIds?: GrepCandidateIds;
  /** Be the first of `count` shares; default: search alone. */
  lead?: GrepLead;
}

/** The whole search: no share of a split one. */
const WHOLE: GrepShare = Object.freeze({});

/** How the first share of a search splits it. */
export interface GrepLead {
  /** Shares wanted (at most this many; path ranges also hold at least `minBytes` each). */
  count: number;
  /** Candidates with fewer text bytes than this are searched by the lead alone. */
  minBytes: number;
  /** Path ranges: at least one for each of this many text bytes, beyond `count` (default: `count` alone). */
  rangeBytes?: number;
  /** Receives the split before any text is read. */
  onSplit: (split: GrepSplit) => void;
}

/** A lead's split of a search: the shares after its own. */
export interface GrepSplit {
  /** Shares 2, 3, ... in output order, each with its path range or hash class and the lead's candidates in it (none: the lead searches everything). */
  shares: GrepShare[];
}

/** Candidates found by another share's snapshot. */
export interface GrepCandidateIds {
  /** The docsVersion of the snapshot that found them. */
  docsVersion: number;
  /** Their ids. */
  ids: Uint32Array;
}

/** The paths [from, to) in code point order; null is unbounded. */
export interface GrepPathRange {
  from: string | null;
  to: string | null;
}

/** What a content search reports besides its text (a share's caller builds the footer from it). */
export interface GrepContentSummary extends ToolSummary {
  /** Candidate files (after the filters). */
  candidates: number;
  /** Candidate files actually searched (fewer when the deadline passed or head_limit was reached). */
  searched: number;
  /** Text bytes of the files searched. */
  verifiedBytes: number;
  /** True when the deadline stopped the search. */
  timedOut: boolean;
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
  /** Text bytes of the files searched. */
  verifiedBytes: number;
  /** True when the deadline stopped the search. */
  timedOut: boolean;
}

const COLON = 0x3a;
const DASH = 0x2d;

/**
 * In `content` mode, the full chunks a document's output may hold before they are yielded in its
 * middle. A yield there costs a copy of the document (its text views lmdb-js's read buffer, which
 * the next read anywhere on the thread overwrites); most documents' output fits, and is yielded
 * after their last line.
 */
const HELD_CHUNKS = 4;

/**
 * In `content` mode, hits on consecutive lines are printed as one run of up to this many lines:
 * one call prints a run (engine/line-printer.ts), where a dense pattern's hits come a line at a
 * time; the bound keeps a document's output between yields near HELD_CHUNKS.
 */
const RUN_LINES = 1024;

/**
 * Without context, a document of up to this many lines has all its hits found before any is
 * printed (its runs are then printed together); a longer one is printed as its hits are found,
 * so that the pairs held stay few.
 */
const COLLECTED_LINES = 1 << 20;

/** How often a long scan yields a heartbeat chunk. */
const HEARTBEAT_MS = 50;

/**
 * Paces a scan over documents: it stops past the deadline, and yields a heartbeat chunk when
 * nothing was sent for HEARTBEAT_MS.
 */
class Pace {
  private beat = Date.now();

  constructor(private readonly deadline: number) {}

  /** Before each document: `stop` past the deadline, `beat` when a heartbeat is due, else `go`. */
  step(): 'stop' | 'beat' | 'go' {
    const now = Date.now();
    if (now > this.deadline) return 'stop';
    if (now - this.beat <= HEARTBEAT_MS) return 'go';
    this.beat = now;
    return 'beat';
  }

  /** Output was just sent: the next heartbeat is due HEARTBEAT_MS from now. */
  sent(): void {
    this.beat = Date.now();
  }
}

interface GrepPlan {
  outputMode: GrepOutputMode;
  root: string;
  filter: GrepFilter;
  visibility: Visibility;
  matcher: LineMatcher;
  facts: PatternFacts;
  before: number;
  after: number;
  lineNumbers: boolean;
  headLimit: number;
  offset: number;
  deadline: number;
}

/** Applies the defaults to a copy and compiles the regex and filters (INVALID_PARAMETER on error). */
function plan(request: GrepRequest): GrepPlan {
  // The pattern is read once: its facts steer the candidates and the matcher's paths.
  const s = grepWithDefaults(request);
  const compiled = compilePattern(s.pattern, { caseInsensitive: s.caseInsensitive, multiline: s.multiline });
  const matcher = new LineMatcher(compiled);
  const root = requestDirPath(s.path);
  return {
    outputMode: s.outputMode,
    root,
    filter: new GrepFilter(root, s.glob, s.type),
    visibility: new Visibility(s.claims),
    matcher,
    facts: compiled.facts,
    before: s.before,
    after: s.after,
    lineNumbers: s.lineNumbers,
    headLimit: s.headLimit,
    offset: s.offset,
    deadline: s.deadline,
  };
}

/**
 * Candidate documents of a planned search's share, in path order; NO_SUCH_FILE when the root does
 * not exist. A lead reports its split here (into path ranges, or hash classes of paths with
 * `byHash`) and keeps the first share.
 */
function candidates(snapshot: ShardSnapshot, p: GrepPlan, share: GrepShare, byHash: boolean): DocMeta[] {
  const kind = rootExists(snapshot, p.root, p.visibility);
  if (kind === null) throw new VfsError('NO_SUCH_FILE', { path: p.root });
  // The same docsVersion means the same documents: the lead's candidates are this snapshot's.
  const given = share.candidateIds !== undefined && share.candidateIds.docsVersion === snapshot.docsVersion ? share.candidateIds.ids : undefined;
  const ids = given ?? evaluateQuery(snapshot, patternQuery(p.facts, { quadgrams: true }));
  const docs = selectCandidates(snapshot, ids, {
    root: p.root,
    rootIsFile: kind === 'file',
    filter: p.filter,
    visibility: p.visibility,
    pathRange: share.pathRange,
    pathShare: share.pathShare,
  });
  if (share.lead === undefined) return docs;
  const total = textBytes(docs);
  const { count, minBytes, rangeBytes } = share.lead;
  const idsOf = (part: readonly DocMeta[]): GrepCandidateIds => ({ docsVersion: snapshot.docsVersion, ids: Uint32Array.from(part, (d) => d.id).sort() });
  // A path range holds at least minBytes: each is a task of its own, which a small search pays for.
  const wanted = rangeBytes === undefined ? count : Math.max(count, Math.ceil(total / rangeBytes));
  const ranges = minBytes > 0 ? Math.min(wanted, Math.floor(total / minBytes)) : wanted;
  const split =
    total < minBytes || count < 2 ? { first: docs, shares: [] } : byHash ? splitByHash(docs, count, idsOf) : splitRanges(docs, ranges, total, idsOf);
  share.lead.onSplit({ shares: split.shares });
  return split.first;
}

/** A lead's own documents and the further shares. */
interface SplitDocs {
  first: DocMeta[];
  shares: GrepShare[];
}

/** Reads a document's text (a view valid until the next read) and starts `matcher` on it. */
function beginDocument(snapshot: ShardSnapshot, meta: DocMeta, matcher: LineMatcher): void {
  const value = snapshot.docValue(meta);
  matcher.begin(value.subarray(0, meta.textBytes), lineStartsOf(value, meta.textBytes, meta.lines));
}

/**
 * The rest of the document's hits as runs, pairs of first and last line: hits that touch or
 * overlap are one run of up to RUN_LINES lines (a dense pattern's lines, one pair a line, would
 * each be printed alone). Runs may overlap where a multiline hit crosses that bound.
 */
function joinedHits(matcher: LineMatcher): number[] {
  const hits: number[] = [];
  while (matcher.next()) {
    const n = hits.length;
    if (n > 0 && matcher.first <= hits[n - 1] + 1 && hits[n - 1] - hits[n - 2] < RUN_LINES) {
      if (matcher.last > hits[n - 1]) hits[n - 1] = matcher.last;
    } else hits.push(matcher.first, matcher.last);
  }
  return hits;
}

/**
 * Bytes of gap between a document's runs that each printed line may bring into the printing
 * module when the runs are printed together (their text is copied in whole, gaps included). The
 * copy costs 0.02-0.03 ns a byte; the module saves 25-40 ns a line against printing run by run
 * in JavaScript (engine/line-printer.ts), so a line's 512 bytes of gap cost at most about half
 * of what it saves.
 */
const GAP_BYTES_A_LINE = 512;

/** Whether runs (of at least one pair) holding `lines` lines are worth printing together. */
function worthTogether(hits: readonly number[], lines: number, text: Uint8Array, starts: LineStarts): boolean {
  let covered = 0;
  for (let i = 0; i < hits.length; i += 2) covered += lineEndOf(text, starts, hits[i + 1]) - starts[hits[i]];
  const gaps = lineEndOf(text, starts, hits[hits.length - 1]) - starts[hits[0]] - covered;
  return gaps <= GAP_BYTES_A_LINE * lines;
}

/** Lines that runs cover, each counted once. */
function linesOf(hits: readonly number[]): number {
  let lines = 0;
  let covered = -1;
  for (let i = 0; i < hits.length; i += 2) {
    const first = Math.max(hits[i], covered + 1);
    if (hits[i + 1] >= first) {
      lines += hits[i + 1] - first + 1;
      covered = hits[i + 1];
    }
  }
  return lines;
}

/** Matching lines of one document (reads its text; nothing is kept). */
function countMatchingLines(snapshot: ShardSnapshot, meta: DocMeta, matcher: LineMatcher): number {
  if (meta.lines === 0) return 0;
  beginDocument(snapshot, meta, matcher);
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
export function* collectGrepCounts(reader: ShardSource, request: GrepRequest, share: GrepShare = WHOLE): Generator<Buffer, GrepCollection> {
  return yield* collectCounts(reader, plan(request), share);
}

function* collectCounts(reader: ShardSource, p: GrepPlan, share: GrepShare): Generator<Buffer, GrepCollection> {
  const snapshot = reader.snapshot();
  try {
    // Id order follows the order texts were written in, which is the best disk order.
    const docs = candidates(snapshot, p, share, true).sort((a, b) => a.id - b.id);
    const files: GrepFileCount[] = [];
    let searched = 0;
    let verifiedBytes = 0;
    let timedOut = false;
    const pace = new Pace(p.deadline);
    const scan = new GuardedScan(p.matcher, docs, reader);
    const find = (i: number): number => countMatchingLines(snapshot, docs[i], p.matcher);
    const keep = (i: number, matching: number): void => {
      const meta = docs[i];
      searched++;
      verifiedBytes += meta.textBytes;
      if (matching > 0) files.push({ path: meta.path, matchingLines: matching, totalLines: meta.lines });
    };
    for (let i = 0; i < docs.length; ) {
      const step = pace.step();
      if (step === 'stop') {
        timedOut = true;
        break;
      }
      if (step === 'beat') yield HEARTBEAT;
      i = scan.run(i, find, keep);
    }
    return { files, candidates: docs.length, searched, verifiedBytes, timedOut };
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
  return yield* emitCounts(grepWithDefaults(request), collections);
}

function* emitCounts(s: Pick<GrepSettings, 'outputMode' | 'offset' | 'headLimit'>, collections: readonly GrepCollection[]): Generator<Buffer, ToolSummary> {
  const { outputMode: mode, offset, headLimit } = s;
  const seen = new Set<string>();
  const files: GrepFileCount[] = [];
  let searched = 0;
  let total = 0;
  let verifiedBytes = 0;
  let timedOut = false;
  for (const c of collections) {
    searched += c.searched;
    total += c.candidates;
    verifiedBytes += c.verifiedBytes;
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
  return { resultCount: Math.max(0, end - offset), grep: { candidates: total, verifiedBytes } };
}

/**
 * Splits `docs` (in path order, `total` text bytes) into at most `count` contiguous ranges with
 * about as many text bytes each: content mode prints in path order.
 */
function splitRanges(docs: DocMeta[], count: number, total: number, idsOf: (part: readonly DocMeta[]) => GrepCandidateIds): SplitDocs {
  const starts: number[] = []; // index in `docs` where ranges 2, 3, ... begin
  let before = 0; // text bytes of the documents before docs[i]
  for (let i = 0, share = 1; i < docs.length && share < count; i++) {
    if (i > 0 && before >= (total * share) / count) {
      starts.push(i);
      while (share < count && before >= (total * share) / count) share++;
    }
    before += docs[i].textBytes;
  }
  if (starts.length === 0) return { first: docs, shares: [] };
  const shares = starts.map((from, k) => ({
    pathRange: { from: docs[from].path, to: k + 1 < starts.length ? docs[starts[k + 1]].path : null },
    candidateIds: idsOf(docs.slice(from, starts[k + 1] ?? docs.length)),
  }));
  return { first: docs.slice(0, starts[0]), shares };
}

/**
 * Splits `docs` into `count` hash classes of paths. The sorted modes print in no path order, and
 * a hash class mixes every directory, where a path range would give one thread the prose of
 * /Documentation and another the C of /drivers, matched at different costs per byte.
 */
function splitByHash(docs: DocMeta[], count: number, idsOf: (part: readonly DocMeta[]) => GrepCandidateIds): SplitDocs {
  const classes: DocMeta[][] = Array.from({ length: count }, () => []);
  for (const d of docs) classes[pathHash(d.path) % count].push(d);
  const shares = classes.slice(1).map((members, k) => ({ pathShare: { index: k + 1, count }, candidateIds: idsOf(members) }));
  return { first: classes[0], shares };
}

/** The footer of a content search run as path-range shares, or null (see the module comment). */
export function grepContentFooter(shares: readonly GrepContentSummary[]): string | null {
  if (!shares.some((s) => s.timedOut)) return null;
  let searched = 0;
  let candidates = 0;
  for (const s of shares) {
    searched += s.searched;
    candidates += s.candidates;
  }
  return `[${incompleteNote(searched, candidates)}]\n`;
}

/**
 * Runs `grep`, or one share of it (see the module comment). Throws INVALID_PARAMETER for a bad
 * pattern/glob/type, NO_SUCH_FILE for a missing path.
 */
export function* grep(reader: ShardSource, request: GrepRequest, share: GrepShare = WHOLE): Generator<Buffer, ToolSummary> {
  const p = plan(request);
  if (p.outputMode !== 'content') {
    const collection = yield* collectCounts(reader, p, share);
    return yield* emitCounts(p, [collection]);
  }
  return yield* grepContent(reader, p, share);
}

function* grepContent(reader: ShardSource, p: GrepPlan, share: GrepShare): Generator<Buffer, GrepContentSummary> {
  const snapshot = reader.snapshot();
  try {
    const docs = candidates(snapshot, p, share, false);
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
    let verifiedBytes = 0;
    let timedOut = false;
    const pace = new Pace(p.deadline);
    // The current document. `text`/`starts` view lmdb-js's reused read buffer, valid only
    // until a yield; a document whose output spans a yield is copied once (`keep`), since
    // re-reading a large one after every chunk copies it again each time.
    let meta: DocMeta = docs[0];
    let text: Buffer = Buffer.alloc(0);
    let starts: LineStarts = new Uint32Array(0);
    let kept = false;
    const load = (): void => {
      const value = snapshot.docValue(meta);
      text = value.subarray(0, meta.textBytes);
      starts = lineStartsOf(value, meta.textBytes, meta.lines);
      kept = false;
    };
    const keep = (): void => {
      if (kept) return;
      const value = snapshot.docValue(meta);
      const copy = Buffer.allocUnsafeSlow(value.length); // its own ArrayBuffer: line starts stay aligned
      value.copy(copy);
      text = copy.subarray(0, meta.textBytes);
      starts = lineStartsOf(copy, meta.textBytes, meta.lines);
      kept = true;
      matcher.rebind(text, starts);
    };
    // The line number's width for the printer: as wide as it is, or none.
    const width = p.lineNumbers ? 0 : -1;
    // `path:` and `path-` of the document being printed, as bytes.
    let pathFor = -1;
    let matchPrefix: Buffer = Buffer.alloc(0);
    let contextPrefix: Buffer = Buffer.alloc(0);
    const prefixesOf = (doc: DocMeta): void => {
      if (pathFor === doc.id) return;
      pathFor = doc.id;
      matchPrefix = Buffer.from(`${doc.path}:`);
      contextPrefix = Buffer.from(`${doc.path}-`);
    };
    // A line too long to copy as it is, cut as `cat` cuts it.
    const writeCut = (line: number, isMatch: boolean): void => {
      const mark = isMatch ? ':' : '-';
      const head = p.lineNumbers ? `${meta.path}${mark}${line + 1}${mark}` : `${meta.path}${mark}`;
      out.write(`${head}${formatLine(text, starts[line], lineEndOf(text, starts, line))}\n`);
    };
    const writeCutMatch = (line: number): void => writeCut(line, true);
    // Prints lines `first` to `last` of the document, after `offset` skipped and up to
    // `head_limit`: runs of lines that need no cut are copied in one piece each.
    const emit = (first: number, last: number, isMatch: boolean): void => {
      if (cut) return;
      if (skip > 0) {
        const skipped = Math.min(skip, last - first + 1);
        skip -= skipped;
        first += skipped;
        if (first > last) return;
      }
      if (emitted >= p.headLimit) {
        cut = true;
        return;
      }
      if (last - first + 1 > p.headLimit - emitted) {
        last = first + p.headLimit - emitted - 1;
        cut = true; // more lines follow
      }
      if (separators && lastDoc !== -1 && (lastDoc !== meta.id || lastLine !== first - 1)) out.write('--\n');
      prefixesOf(meta);
      const prefix = isMatch ? matchPrefix : contextPrefix;
      const sep = isMatch ? COLON : DASH;
      const lineCost = prefix.length + 12;
      let line = first;
      while (line <= last) {
        let runEnd = line;
        let runBytes = 0;
        while (runEnd <= last && runBytes < CHUNK_BYTES / 2) {
          const bytes = lineEndOf(text, starts, runEnd) - starts[runEnd];
          // No more bytes than the character limit, so no cut: copy the bytes, decode nothing (as cat does).
          if (bytes > MAX_LINE_CHARS) break;
          runBytes += lineCost + bytes;
          runEnd++;
        }
        if (runEnd > line) {
          out.writeLines(text, starts, line, runEnd - line, prefix, width, sep);
          line = runEnd;
          continue;
        }
        writeCut(line, isMatch);
        line++;
      }
      emitted += last - first + 1;
      if (isMatch) matchesShown += last - first + 1;
      lastDoc = meta.id;
      lastLine = last;
    };

    // Where the scan batches documents (engine/guarded-scan.ts), each batch's hits are found
    // first, [first, last] pairs by document, and printed from there; otherwise each document's
    // hits are found as it is printed.
    const scan = new GuardedScan(matcher, docs, reader);
    let found = new Map<number, number[]>();
    let foundUntil = 0; // documents before this one were batched (or left to the live path)
    const findHits = (k: number): number[] => {
      const doc = docs[k];
      if (doc.lines === 0) return [];
      beginDocument(snapshot, doc, matcher);
      return joinedHits(matcher);
    };
    const keepHits = (k: number, hits: number[]): void => {
      found.set(k, hits);
    };

    for (let d = 0; d < docs.length; d++) {
      const doc = docs[d];
      if (cut) break;
      const step = pace.step();
      if (step === 'stop') {
        timedOut = true;
        break;
      }
      if (step === 'beat') yield HEARTBEAT;
      if (d >= foundUntil && scan.batches) {
        found = new Map();
        foundUntil = scan.run(d, findHits, keepHits);
      } else if (d >= foundUntil) scan.searchedAlone(d);
      searched++;
      verifiedBytes += doc.textBytes;
      if (doc.lines === 0) continue;
      meta = doc;
      load();
      let hits = found.get(d);
      if (hits === undefined) {
        matcher.begin(text, starts);
        if (!separators && doc.lines <= COLLECTED_LINES) hits = joinedHits(matcher);
      }
      // Without context, offset or a cut, all of a document's runs are printed in one call a
      // chunk, where they are as many lines as the module takes and the text between them is
      // not too long to copy in whole; a selective pattern's few hits far apart are not.
      const lines = hits === undefined || separators || skip > 0 ? -1 : linesOf(hits);
      if (lines === 0) continue;
      if (lines >= WASM_MIN_LINES && lines <= p.headLimit - emitted && worthTogether(hits!, lines, text, starts)) {
        prefixesOf(meta);
        const cursor = { run: 0, line: -1 };
        while (!out.writeRuns(text, starts, hits!, cursor, matchPrefix, width, COLON, HELD_CHUNKS, writeCutMatch)) {
          keep();
          yield* out.drain();
          pace.sent();
        }
        emitted += lines;
        matchesShown += lines;
        if (out.ready) {
          yield* out.drain();
          pace.sent();
        }
        continue;
      }
      let h = 0;
      let held = false; // the matcher holds a hit not yet printed (found while joining a run)
      let printed = -1; // last line of this file printed (or skipped)
      let afterUntil = -1; // after-context of the last hit reaches this line
      while (!cut) {
        let first: number;
        let last: number;
        if (hits !== undefined) {
          if (h === hits.length) break;
          first = hits[h++];
          last = hits[h++];
        } else {
          if (!held && !matcher.next()) break;
          first = matcher.first;
          last = matcher.last;
          // Hits on the lines that follow join this one, as findHits joins them.
          held = false;
          while (last - first < RUN_LINES && matcher.next()) {
            if (matcher.first > last + 1) {
              held = true;
              break;
            }
            if (matcher.last > last) last = matcher.last;
          }
        }
        if (first <= printed) first = printed + 1;
        if (last < first) continue;
        const contextEnd = Math.min(afterUntil, first - 1);
        if (contextEnd > printed) {
          emit(printed + 1, contextEnd, false);
          printed = contextEnd;
        }
        const before = Math.max(printed + 1, first - p.before);
        if (before < first) emit(before, first - 1, false);
        emit(first, last, true);
        printed = last;
        afterUntil = last + p.after;
        if (out.waiting >= HELD_CHUNKS) {
          keep();
          yield* out.drain();
          pace.sent();
        }
      }
      const tail = Math.min(afterUntil, meta.lines - 1);
      if (tail > printed) emit(printed + 1, tail, false);
      if (out.ready) {
        yield* out.drain();
        pace.sent();
      }
    }
    const notes: string[] = [];
    if (cut) notes.push(`output cut at head_limit=${p.headLimit}; more lines follow: raise head_limit or continue with offset=${p.offset + emitted}`);
    if (timedOut) notes.push(incompleteNote(searched, docs.length));
    // A share's footer is written by its caller, after the shares that follow it.
    if (notes.length > 0 && share.pathRange === undefined && share.lead === undefined) out.write(`[${notes.join('; ')}]\n`);
    yield* out.drain(true);
    return { resultCount: matchesShown, candidates: docs.length, searched, verifiedBytes, timedOut, grep: { candidates: docs.length, verifiedBytes } };
  } finally {
    snapshot.done();
  }
}
