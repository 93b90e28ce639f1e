/**
 * grep's candidate documents: the trigram query of the pattern evaluated over the postings
 * (AND lists intersected rarest first, OR lists merged, `all` = every live document), then
 * the path, glob/type, share (path range or hash class) and visibility filters, all before any
 * text is read.
 *
 * Candidate ids are resolved id by id in `docs` (then sorted by path) when that is cheaper
 * than one range scan of `paths` under the search root (which yields path order for free):
 * see LOOKUP_COST.
 */

import type { Query } from './regex/query.js';
import type { GrepFilter } from './grep-filter.js';
import { blockCount, blockFirstId, blockLastId, decodePostings, intersectBlock, type PostingBlocks } from './posting-block.js';
import { dirRange, type DocMeta } from './shard-format.js';
import type { ShardSnapshot } from './shard-snapshot.js';
import { comparePaths } from './tool-output.js';
import type { Visibility } from './visibility.js';

const EMPTY = new Uint32Array(0);

/**
 * One lookup of a candidate by id (`docById`, then its share of the path sort) costs about
 * this many times one document of a range scan of `paths` (decoded in path order, no sort),
 * so lookups win below about half the root's files. Fit with bench/engine-phases.ts
 * (selection; docs/benchmarks.md, "Engine level").
 */
const LOOKUP_COST = 2;

/**
 * Up to this many ids (a few milliseconds of lookups at most) the root is not counted: counting
 * costs about 0.13 µs per file under it, which under a large root exceeds what it could save.
 * Fit with bench/engine-phases.ts (selection; docs/benchmarks.md, "Engine level").
 */
const LOOKUP_ALWAYS = 2048;

/** Ascending union of sorted lists (merged in pairs: no sort). */
export function union(lists: readonly Uint32Array[]): Uint32Array {
  let layer = lists.filter((l) => l.length > 0);
  if (layer.length === 0) return EMPTY;
  while (layer.length > 1) {
    const next: Uint32Array[] = [];
    for (let i = 0; i + 1 < layer.length; i += 2) next.push(merge(layer[i], layer[i + 1]));
    if (layer.length % 2 === 1) next.push(layer[layer.length - 1]);
    layer = next;
  }
  return layer[0];
}

/** Ascending union of two sorted lists. */
function merge(a: Uint32Array, b: Uint32Array): Uint32Array {
  const out = new Uint32Array(a.length + b.length);
  let i = 0;
  let j = 0;
  let n = 0;
  while (i < a.length && j < b.length) {
    const x = a[i];
    const y = b[j];
    if (x <= y) {
      out[n++] = x;
      i++;
      if (x === y) j++;
    } else {
      out[n++] = y;
      j++;
    }
  }
  while (i < a.length) out[n++] = a[i++];
  while (j < b.length) out[n++] = b[j++];
  return out.subarray(0, n);
}

/**
 * The costs that decide how much of an AND to evaluate (bench machine, Linux source). Leaving a
 * conjunct out only widens the answer, which stays a superset (every candidate is verified
 * against its text afterwards), so evaluation trades index work for verification work:
 *
 *   DECODE_NS_PER_ID         decoding one posting id while intersecting (intersectBlock);
 *   VERIFY_NS_PER_CANDIDATE  selecting and reading one candidate (a lookup in `docs`, one in
 *                            `text`), and VERIFY_NS_PER_BYTE searching its text;
 *   CANDIDATE_SIZE           a candidate's expected size in average documents: a selective
 *                            query's candidates are bigger than the average file.
 *
 * What a conjunct will remove is not known before it is decoded. The next one is expected to
 * remove the share of the candidates the previous one removed (PRIOR_REMOVAL for the first);
 * if decoding it all does not pay at that rate, it is tried on the first 1/SAMPLE_SHARE of the
 * candidates (at least MIN_SAMPLE), and decoded for the rest only if it pays at the rate seen
 * there. On the Linux source the last conjuncts of a long literal often remove almost nothing,
 * but not always in order of size, hence a sample of each rather than a stop.
 *
 * Fit with bench/engine-phases.ts (query, selection, verification; docs/benchmarks.md,
 * "Engine level").
 */
const DECODE_NS_PER_ID = 4.5;
const VERIFY_NS_PER_CANDIDATE = 5_000;
const VERIFY_NS_PER_BYTE = 0.4;
const CANDIDATE_SIZE = 2;
/** The share of the candidates the first narrowing conjunct is expected to remove. */
const PRIOR_REMOVAL = 1 / 14;
const SAMPLE_SHARE = 8;
const MIN_SAMPLE = 32;

/**
 * The ascending ids (possibly dead) of the documents that can match `query`, or null for
 * "every document" (`all`). The answer is a SUPERSET of the documents the query selects (it
 * may leave out conjuncts, or apply one to part of the candidates: see the costs above),
 * which is all the caller needs.
 *
 * An AND reads the block headers of all its trigrams first (no varint decoded), answers EMPTY
 * at once if one of them occurs nowhere, then narrows the candidates conjunct by conjunct in
 * ascending order of their size bound (a trigram's count; the sum over an OR, the least over
 * an AND): it decodes the smallest fully and, for each next one, only the blocks whose
 * [first, last] id range holds a remaining candidate, stopping once nothing remains. A
 * sub-query is evaluated within the candidates the conjuncts before it left. An OR merges all
 * its lists (within the candidates, if any).
 */
export function evaluateQuery(snapshot: ShardSnapshot, query: Query): Uint32Array | null {
  // A small shard's image has no lists: every document is a candidate.
  if (!snapshot.indexed) return null;
  return new QueryEvaluation(snapshot).evaluate(query, null);
}

/** One evaluation: the posting lists it read, kept until it ends. */
class QueryEvaluation {
  private readonly lists = new Map<number, PostingBlocks>();
  private readonly bounds = new Map<Query, number>();
  /** What verifying one candidate is expected to cost, in ns (see the costs above). */
  private readonly candidateNs: number;

  constructor(private readonly snapshot: ShardSnapshot) {
    const { textBytes, liveDocs } = snapshot.state();
    this.candidateNs = VERIFY_NS_PER_CANDIDATE + (VERIFY_NS_PER_BYTE * CANDIDATE_SIZE * textBytes) / Math.max(1, liveDocs);
  }

  /**
   * The ids of `within` (null: of every document) that may match `q`, ascending, or null when
   * `q` does not narrow `within` (`all`, or not worth evaluating).
   */
  evaluate(q: Query, within: Uint32Array | null): Uint32Array | null {
    switch (q.op) {
      case 'all':
        return null;
      case 'none':
        return EMPTY;
      case 'and':
        return this.and(q.trigrams, q.sub, within);
      case 'or':
        return this.or(q.trigrams, q.sub, within);
    }
  }

  private and(trigrams: readonly number[], subs: readonly Query[], within: Uint32Array | null): Uint32Array | null {
    // Conjuncts by ascending size bound: trigrams as numbers, sub-queries as themselves.
    const order: { bound: number; conjunct: number | Query }[] = [];
    for (const t of trigrams) {
      const bound = this.list(t).count;
      if (bound === 0) return EMPTY;
      order.push({ bound, conjunct: t });
    }
    for (const sub of subs) {
      const bound = this.bound(sub);
      if (bound === 0) return EMPTY;
      // Unbounded means `all` on every path down (no trigram): it cannot narrow anything.
      if (bound !== Infinity) order.push({ bound, conjunct: sub });
    }
    order.sort((a, b) => a.bound - b.bound);
    let result = within;
    let removal = PRIOR_REMOVAL;
    for (const { conjunct } of order) {
      if (result !== null && result.length === 0) return EMPTY;
      if (typeof conjunct === 'number') {
        const list = this.list(conjunct);
        if (result === null) {
          result = decodePostings(list);
          continue;
        }
        const before = result.length;
        let sample = before;
        if (!this.pays(idsToDecode(list, result), removal * before)) {
          if (before < MIN_SAMPLE * SAMPLE_SHARE) continue; // too few candidates to sample: left out
          sample = Math.ceil(before / SAMPLE_SHARE);
        }
        const head = intersectList(list, result.subarray(0, sample));
        removal = (sample - head.length + 0.5) / (sample + 1);
        if (sample === before) {
          result = head;
          continue;
        }
        const rest = result.subarray(sample);
        result = concat(head, this.pays(idsToDecode(list, rest), removal * rest.length) ? intersectList(list, rest) : rest);
      } else {
        result = this.evaluate(conjunct, result) ?? result;
      }
    }
    return result;
  }

  /** Whether decoding `ids` posting ids costs less than verifying `removed` candidates. */
  private pays(ids: number, removed: number): boolean {
    return ids * DECODE_NS_PER_ID <= removed * this.candidateNs;
  }

  private or(trigrams: readonly number[], subs: readonly Query[], within: Uint32Array | null): Uint32Array | null {
    if (within !== null && within.length === 0) return EMPTY;
    const parts: Uint32Array[] = [];
    if (within !== null) {
      // A union needs every list: if that is too much work for the candidates, narrow nothing.
      let work = 0;
      for (const t of trigrams) work += idsToDecode(this.list(t), within);
      if (!this.pays(work, PRIOR_REMOVAL * within.length)) return null;
    }
    for (const t of trigrams) {
      const list = this.list(t);
      if (list.count === 0) continue;
      parts.push(within === null ? decodePostings(list) : intersectList(list, within));
    }
    for (const sub of subs) {
      const part = this.evaluate(sub, within);
      if (part === null) return null;
      parts.push(part);
    }
    return union(parts);
  }

  /** The blocks of a trigram's list, read once per evaluation. */
  private list(t: number): PostingBlocks {
    let list = this.lists.get(t);
    if (list === undefined) {
      list = this.snapshot.postingBlocks(t);
      this.lists.set(t, list);
    }
    return list;
  }

  /** An upper bound on the number of ids `q` answers (Infinity: it may answer null). */
  private bound(q: Query): number {
    let bound = this.bounds.get(q);
    if (bound !== undefined) return bound;
    switch (q.op) {
      case 'all':
        bound = Infinity;
        break;
      case 'none':
        bound = 0;
        break;
      case 'and':
        bound = Infinity;
        for (const t of q.trigrams) bound = Math.min(bound, this.list(t).count);
        for (const sub of q.sub) bound = Math.min(bound, this.bound(sub));
        break;
      case 'or':
        bound = 0;
        for (const t of q.trigrams) bound += this.list(t).count;
        for (const sub of q.sub) bound += this.bound(sub);
        break;
    }
    this.bounds.set(q, bound);
    return bound;
  }
}

/** `a` followed by `b`. */
function concat(a: Uint32Array, b: Uint32Array): Uint32Array {
  const out = new Uint32Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/** Index in `sorted` of the first id ≥ `id`, searching from `lo`. */
function lowerBound(sorted: Uint32Array, id: number, lo: number): number {
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid] < id) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** How many ids intersecting `list` with `sorted` decodes: those of the blocks whose range holds one of `sorted`. */
function idsToDecode(list: PostingBlocks, sorted: Uint32Array): number {
  let work = 0;
  let c = 0;
  for (const block of list.blocks) {
    c = lowerBound(sorted, blockFirstId(block), c);
    if (c === sorted.length) break;
    if (sorted[c] <= blockLastId(block)) work += blockCount(block);
  }
  return work;
}

/** The ids of `sorted` that are in `list`, decoding only the blocks whose range holds one of them. */
function intersectList(list: PostingBlocks, sorted: Uint32Array): Uint32Array {
  const out = new Uint32Array(sorted.length);
  let n = 0;
  let c = 0;
  for (const block of list.blocks) {
    c = lowerBound(sorted, blockFirstId(block), c);
    if (c === sorted.length) break;
    const last = blockLastId(block);
    if (sorted[c] > last) continue;
    n = intersectBlock(block, sorted, c, out, n);
    c = lowerBound(sorted, last + 1, c);
  }
  return out.subarray(0, n);
}

/** How candidates are chosen. */
export interface CandidateOptions {
  /** Search root: `/`, a directory, or a file. */
  root: string;
  /** True when `root` is a visible file (searched alone, bypassing glob and type). */
  rootIsFile: boolean;
  /** Glob/type filter. */
  filter: GrepFilter;
  /** The caller's visibility. */
  visibility: Visibility;
  /** Only the paths in [from, to) (null: unbounded), if set: one share of a content search. */
  pathRange: { from: string | null; to: string | null } | undefined;
  /** Only the paths of this hash class (pathHash), if set: one share of a sorted-mode search. */
  pathShare?: PathShare;
}

/** The paths whose pathHash is `index` modulo `count`. */
export interface PathShare {
  index: number;
  count: number;
}

/** FNV-1a over the UTF-16 units of a path: spreads the files of one directory over the shares. */
export function pathHash(path: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < path.length; i++) h = Math.imul(h ^ path.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** The live, visible, filtered documents whose ids are in `ids` (null: all), in path order. */
export function selectCandidates(snapshot: ShardSnapshot, ids: Uint32Array | null, options: CandidateOptions): DocMeta[] {
  const { root, visibility } = options;
  if (options.rootIsFile) {
    const meta = snapshot.docByPath(root);
    // SECURITY: visibility is checked on the file.
    if (meta !== undefined && inRange(meta.path, options) && visibility.canSee(meta.claims) && (ids === null || contains(ids, meta.id))) {
      return [meta];
    }
    return [];
  }
  if (ids !== null && preferLookups(snapshot, ids, options)) return lookupCandidates(snapshot, ids, options);
  return scanCandidates(snapshot, ids, options);
}

/**
 * selectCandidates under a directory root by one lookup in `docs` per id.
 * Exported for tests and benchmarks; selectCandidates picks the cheaper of the two.
 */
export function lookupCandidates(snapshot: ShardSnapshot, ids: Uint32Array, options: CandidateOptions): DocMeta[] {
  const { root, filter, visibility } = options;
  const prefix = root === '/' ? '/' : root + '/';
  // SECURITY: visibility is checked on every candidate.
  const keep = (meta: DocMeta): boolean =>
    meta.path.startsWith(prefix) && inRange(meta.path, options) && filter.test(meta.path) && visibility.canSee(meta.claims);
  // A catalog hands the records over in path order already.
  const ordered = snapshot.catalogDocsByIds(ids);
  if (ordered !== null) return ordered.filter(keep);
  const out: DocMeta[] = [];
  for (let i = 0; i < ids.length; i++) {
    const meta = snapshot.docById(ids[i]);
    if (meta !== undefined && keep(meta)) out.push(meta);
  }
  return sortByPath(out);
}

/**
 * selectCandidates under a directory root by one scan of the paths under it, keeping the ids
 * in `ids` (null: all). Exported for tests and benchmarks.
 */
export function scanCandidates(snapshot: ShardSnapshot, ids: Uint32Array | null, options: CandidateOptions): DocMeta[] {
  const { root, filter, visibility } = options;
  const out: DocMeta[] = [];
  let member: Uint8Array | null = null;
  if (ids !== null) {
    member = new Uint8Array(ids.length === 0 ? 1 : ids[ids.length - 1] + 1);
    for (let i = 0; i < ids.length; i++) member[ids[i]] = 1;
  }
  let { start, end } = dirRange(root);
  // Keys sort by code point, as comparePaths does: the range narrows the scan itself.
  const range = options.pathRange;
  if (range?.from != null && comparePaths(range.from, start) > 0) start = range.from;
  if (range?.to != null && comparePaths(range.to, end) < 0) end = range.to;
  if (comparePaths(start, end) >= 0) return out;
  for (const meta of snapshot.docsInRange(start, end)) {
    const id = meta.id;
    if (member !== null && (id >= member.length || member[id] === 0)) continue;
    // SECURITY: visibility is checked on every candidate.
    if (!filter.test(meta.path) || !visibility.canSee(meta.claims) || !inShare(meta.path, options.pathShare)) continue;
    out.push(meta);
  }
  return out;
}

/**
 * Whether looking `ids` up one by one is cheaper than scanning the root: LOOKUP_COST times the
 * ids against the live documents under the root, counted only when the answer depends on it.
 */
function preferLookups(snapshot: ShardSnapshot, ids: Uint32Array, options: CandidateOptions): boolean {
  if (ids.length <= LOOKUP_ALWAYS) return true;
  const cost = ids.length * LOOKUP_COST;
  // The root holds at most every live document, and exactly those when it is `/`.
  const live = snapshot.state().liveDocs;
  if (cost > live) return false;
  if (options.root === '/') return true;
  const { start, end } = dirRange(options.root);
  return cost <= snapshot.countPathsInRange(start, end);
}

/** Whether `path` is in the options' path range and hash class (each when set). */
function inRange(path: string, options: CandidateOptions): boolean {
  const { pathRange } = options;
  if (!inShare(path, options.pathShare)) return false;
  if (pathRange === undefined) return true;
  return (pathRange.from === null || comparePaths(path, pathRange.from) >= 0) && (pathRange.to === null || comparePaths(path, pathRange.to) < 0);
}

function inShare(path: string, share: PathShare | undefined): boolean {
  return share === undefined || pathHash(path) % share.count === share.index;
}

/** Whether some visible file is at `root` or under it. */
export function rootExists(snapshot: ShardSnapshot, root: string, visibility: Visibility): 'file' | 'dir' | null {
  if (root === '/') return 'dir';
  const file = snapshot.docByPath(root);
  // SECURITY: invisible files do not reveal that a path exists.
  if (file !== undefined && visibility.canSee(file.claims)) return 'file';
  const { start, end } = dirRange(root);
  for (const meta of snapshot.docsInRange(start, end)) {
    if (visibility.canSee(meta.claims)) return 'dir';
  }
  return null;
}

function contains(ids: Uint32Array, id: number): boolean {
  const i = lowerBound(ids, id, 0);
  return i < ids.length && ids[i] === id;
}

/** UTF-16 order differs from code point order only between a surrogate and U+E000-U+FFFF. */
const HIGH_UNIT = /[\ud800-\uffff]/;

/** Sorts by path in code point order (comparePaths). */
function sortByPath(docs: DocMeta[]): DocMeta[] {
  // Without such code units, code unit order is code point order, and V8's own string
  // comparison sorts faster than comparePaths.
  for (const doc of docs) if (HIGH_UNIT.test(doc.path)) return docs.sort((a, b) => comparePaths(a.path, b.path));
  return docs.sort(byCodeUnits);
}

function byCodeUnits(a: DocMeta, b: DocMeta): number {
  return a.path < b.path ? -1 : a.path > b.path ? 1 : 0;
}
