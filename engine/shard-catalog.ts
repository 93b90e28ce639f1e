/**
 * A shard's live documents held in memory, for one `docsVersion` of the shard (see the format
 * description in shard-format.ts): the same DocMeta records as `docs` and `paths`, in path
 * order, with lookups by id and by path.
 *
 * `ls`, `find` and grep's candidate selection read one record per listed path or candidate;
 * from LMDB each costs a cursor step and a msgpack decode (about 1 µs), from here an array or
 * map access. The writer bumps `docsVersion` in every transaction that changes `docs` or
 * `paths`, so a catalog built in a snapshot that read version V holds exactly the records of
 * every later snapshot that reads V: serving those snapshots from it is exact.
 *
 * Building costs about one record read per live document. ShardReader builds one only after
 * snapshots of the same version have read that many records themselves (the ski-rental rule:
 * at most twice the cost of the cheaper choice in hindsight), so a shard rewritten faster than
 * it is read never pays for catalogs it would not use. The catalogs of one thread hold at most
 * CATALOG_BUDGET_DOCS documents in all (shard-reader.ts); the least recently used are dropped,
 * and a catalog of an older version as soon as a snapshot sees a newer one.
 */

import { SizedLru } from '../core/answer-memory.js';
import type { DocMeta } from './shard-format.js';
import { comparePaths } from './tool-output.js';

/**
 * `find`'s output order for records in path order: most recently updated first; a stable sort
 * leaves equal times in path order.
 */
export const newestFirst = (a: DocMeta, b: DocMeta): number => b.updatedAt - a.updatedAt;

/** Ranks are worked out once a sort covers at least 1/RANK_AFTER_SHARE of the catalog. */
const RANK_AFTER_SHARE = 16;

/** Most `find` answers a catalog remembers. */
const MAX_REMEMBERED_FINDS = 64;
/** Records all remembered `find` answers hold together, beyond the catalog's own count. */
const REMEMBERED_FINDS_SLACK = 4096;

/** The live documents of one version of a shard. */
export class ShardCatalog {
  /** Every live document, in code point order of path (the order of the `paths` keys). */
  readonly docs: readonly DocMeta[];
  /** Each live document's index in `docs`, by id. */
  private readonly byId = new Map<number, number>();
  private readonly byPath = new Map<string, DocMeta>();
  private recency: { rank: Int32Array; byRank: DocMeta[] } | null = null;
  /** Every path, each followed by `\n` (which no path holds), and where each starts: built at first use. */
  private joined: { text: string; starts: Int32Array } | null = null;
  /** `find`'s matches by query, least recently used first, and how many records they hold. */
  private readonly finds: SizedLru<readonly DocMeta[]>;

  /** `docs` must be the records of `paths` in key order, as read in one snapshot of `version`. */
  constructor(
    readonly version: number,
    docs: DocMeta[],
  ) {
    this.docs = docs;
    this.finds = new SizedLru(MAX_REMEMBERED_FINDS, docs.length + REMEMBERED_FINDS_SLACK, (found) => found.length);
    for (let i = 0; i < docs.length; i++) {
      this.byId.set(docs[i].id, i);
      this.byPath.set(docs[i].path, docs[i]);
    }
  }

  /** The live document with this id, or undefined. */
  docById(id: number): DocMeta | undefined {
    const i = this.byId.get(id);
    return i === undefined ? undefined : this.docs[i];
  }

  /**
   * The live documents among `ids`, in path order: their indexes sorted as numbers, where
   * sorting the records by path compares strings, milliseconds for thousands of candidates.
   */
  docsByIds(ids: Uint32Array): DocMeta[] {
    const at = new Int32Array(ids.length);
    let n = 0;
    for (let k = 0; k < ids.length; k++) {
      const i = this.byId.get(ids[k]);
      if (i !== undefined) at[n++] = i;
    }
    const order = at.subarray(0, n).sort();
    const out: DocMeta[] = new Array(n);
    for (let k = 0; k < n; k++) out[k] = this.docs[order[k]];
    return out;
  }

  /**
   * The documents at `indexes` (ascending indexes into `docs`) in `find`'s output order: most
   * recently updated first, ties in path order. Once many documents are sorted so, each
   * document's place in that order (its rank) is worked out for the whole catalog, and sorting
   * becomes a numeric sort of ranks, cheaper than calling a comparator. A few documents
   * of a large catalog are sorted with the comparator, which costs less than ranking every
   * document of a version that may not be read again.
   */
  inRecencyOrder(indexes: Int32Array): DocMeta[] {
    const docs = this.docs;
    const out = new Array<DocMeta>(indexes.length);
    if (this.recency === null && indexes.length * RANK_AFTER_SHARE < docs.length) {
      for (let k = 0; k < indexes.length; k++) out[k] = docs[indexes[k]];
      return out.sort(newestFirst);
    }
    if (this.recency === null) {
      // Indexes in path order, sorted stably: equal times stay in path order.
      const order = Array.from(docs.keys()).sort((a, b) => newestFirst(docs[a], docs[b]));
      const rank = new Int32Array(docs.length);
      for (let k = 0; k < order.length; k++) rank[order[k]] = k;
      this.recency = { rank, byRank: order.map((i) => docs[i]) };
    }
    const { rank, byRank } = this.recency;
    const ranks = new Int32Array(indexes.length);
    for (let k = 0; k < indexes.length; k++) ranks[k] = rank[indexes[k]];
    ranks.sort();
    for (let k = 0; k < ranks.length; k++) out[k] = byRank[ranks[k]];
    return out;
  }

  /**
   * The indexes in [from, to) of the documents whose path contains `text` (which must not hold
   * `\n`), ascending. One `indexOf` over all paths joined finds them: a glob's required text
   * is looked for in a few characters per path instead of once per path.
   */
  containing(text: string, from: number, to: number): Int32Array {
    if (this.joined === null) {
      const starts = new Int32Array(this.docs.length + 1);
      for (let i = 0; i < this.docs.length; i++) starts[i + 1] = starts[i] + this.docs[i].path.length + 1;
      this.joined = { text: this.docs.map((d) => d.path + '\n').join(''), starts };
    }
    const { text: all, starts } = this.joined;
    const found = new Int32Array(to - from);
    let n = 0;
    let i = from;
    // A hit cannot cross a `\n`, so one that starts before `to`'s path lies inside [from, to).
    for (let at = all.indexOf(text, starts[from]); at !== -1 && at < starts[to]; at = all.indexOf(text, starts[i + 1])) {
      while (starts[i + 1] <= at) i++;
      found[n++] = i;
    }
    return found.subarray(0, n);
  }

  /**
   * The matches `remember` stored under `key`, or undefined. A catalog never changes, so an
   * answer stays exact for as long as the catalog serves. Agents repeat their globs, and a
   * repeated `find` skips matching and sorting (docs/benchmarks.md, "Read tools over HTTP").
   */
  recall(key: string): readonly DocMeta[] | undefined {
    return this.finds.get(key);
  }

  /**
   * Keeps `find`'s matches for `key` (every match, visible to the caller or not, in output
   * order). At most MAX_REMEMBERED_FINDS answers holding as many records in all as the catalog
   * has documents (plus REMEMBERED_FINDS_SLACK) are kept, the least recently used dropped
   * first: at most a pointer more per document, beside the catalog's 470 bytes.
   */
  remember(key: string, found: readonly DocMeta[]): void {
    // Two `find`s of one query can interleave (each yields on long scans): the first is kept.
    this.finds.set(key, found);
  }

  /** The live document at this canonical path, or undefined. */
  docByPath(path: string): DocMeta | undefined {
    return this.byPath.get(path);
  }

  /** The index of the first document whose path is not below `path` in code point order. */
  lowerBound(path: string): number {
    let lo = 0;
    let hi = this.docs.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (comparePaths(this.docs[mid].path, path) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}
