/**
 * grep's candidate documents: the trigram query of the pattern evaluated over the postings
 * (AND lists intersected rarest first, OR lists merged, `all` = every live document), then
 * the path, glob/type, partition and visibility filters, all before any text is read.
 *
 * Small candidate sets are resolved id by id in `docs`; large ones (or `all`) by one range scan
 * of `paths` under the search root, which also yields them in path order.
 */

import type { Query } from './regex-query.js';
import type { GrepFilter } from './grep-filter.js';
import { dirRange, type DocMeta, type ShardSnapshot } from './shard-reader.js';
import { comparePaths } from './tool-output.js';
import type { Visibility } from './visibility.js';

const EMPTY = new Uint32Array(0);

/** Candidate sets up to this size are looked up id by id instead of by a range scan. */
const DIRECT_LOOKUP_MAX = 2048;

/** Ascending doc ids present in both sorted lists. */
export function intersect(a: Uint32Array, b: Uint32Array): Uint32Array {
  if (a.length > b.length) [a, b] = [b, a];
  const out = new Uint32Array(a.length);
  let n = 0;
  if (b.length > 16 * a.length) {
    // Gallop: binary-search each id of the short list in the rest of the long one.
    let lo = 0;
    for (let i = 0; i < a.length; i++) {
      const x = a[i];
      let hi = b.length;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (b[mid] < x) lo = mid + 1;
        else hi = mid;
      }
      if (lo === b.length) break;
      if (b[lo] === x) out[n++] = x;
    }
  } else {
    let i = 0;
    let j = 0;
    while (i < a.length && j < b.length) {
      const x = a[i];
      const y = b[j];
      if (x === y) {
        out[n++] = x;
        i++;
        j++;
      } else if (x < y) i++;
      else j++;
    }
  }
  return out.subarray(0, n);
}

/** Ascending union of sorted lists. */
export function union(lists: Uint32Array[]): Uint32Array {
  if (lists.length === 0) return EMPTY;
  if (lists.length === 1) return lists[0];
  let total = 0;
  for (const l of lists) total += l.length;
  const all = new Uint32Array(total);
  let pos = 0;
  for (const l of lists) {
    all.set(l, pos);
    pos += l.length;
  }
  all.sort();
  let n = 0;
  for (let i = 0; i < total; i++) if (n === 0 || all[n - 1] !== all[i]) all[n++] = all[i];
  return all.subarray(0, n);
}

/**
 * The ascending ids (possibly dead) of the documents that can match `query`, or null for
 * "every document" (`all`).
 */
export function evaluateQuery(snapshot: ShardSnapshot, query: Query): Uint32Array | null {
  const cache = new Map<number, Uint32Array>();
  const postings = (t: number): Uint32Array => {
    let list = cache.get(t);
    if (list === undefined) {
      list = snapshot.postings(t);
      cache.set(t, list);
    }
    return list;
  };
  const evaluate = (q: Query): Uint32Array | null => {
    switch (q.op) {
      case 'all':
        return null;
      case 'none':
        return EMPTY;
      case 'and': {
        const lists: Uint32Array[] = [];
        for (const t of q.trigrams) {
          const list = postings(t);
          if (list.length === 0) return EMPTY;
          lists.push(list);
        }
        for (const sub of q.sub) {
          const list = evaluate(sub);
          if (list === null) continue;
          if (list.length === 0) return EMPTY;
          lists.push(list);
        }
        if (lists.length === 0) return null;
        lists.sort((a, b) => a.length - b.length);
        let result = lists[0];
        for (let i = 1; i < lists.length && result.length > 0; i++) result = intersect(result, lists[i]);
        return result;
      }
      case 'or': {
        const lists: Uint32Array[] = [];
        for (const t of q.trigrams) lists.push(postings(t));
        for (const sub of q.sub) {
          const list = evaluate(sub);
          if (list === null) return null;
          lists.push(list);
        }
        return union(lists);
      }
    }
  };
  return evaluate(query);
}

/** Restricts a scan to a share of the documents, so that shares can run in parallel. */
export interface GrepPartition {
  /** This share, 0 ≤ index < count. */
  index: number;
  /** Number of shares. A document belongs to share `docId % count`. */
  count: number;
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
  /** Only this share of the documents, if set. */
  partition: GrepPartition | undefined;
  /** Only these paths, if set (already canonical). */
  paths: readonly string[] | undefined;
}

/** The live, visible, filtered documents whose ids are in `ids` (null: all), in path order. */
export function selectCandidates(snapshot: ShardSnapshot, ids: Uint32Array | null, options: CandidateOptions): DocMeta[] {
  const { root, filter, visibility, partition } = options;
  const out: DocMeta[] = [];
  const inShare = (id: number): boolean => partition === undefined || id % partition.count === partition.index;
  // SECURITY: every path below passes visibility.canSee before it is a candidate.
  if (options.paths !== undefined) {
    const prefix = root === '/' ? '/' : root + '/';
    for (const path of options.paths) {
      const meta = snapshot.docByPath(path);
      if (meta === undefined || !inShare(meta.id) || !visibility.canSee(meta.claims)) continue;
      if (options.rootIsFile ? path !== root : !path.startsWith(prefix) || !filter.test(path)) continue;
      out.push(meta);
    }
    return sortByPath(out);
  }
  if (options.rootIsFile) {
    const meta = snapshot.docByPath(root);
    if (meta !== undefined && inShare(meta.id) && visibility.canSee(meta.claims) && (ids === null || contains(ids, meta.id))) {
      out.push(meta);
    }
    return out;
  }
  if (ids !== null && ids.length <= DIRECT_LOOKUP_MAX) {
    const prefix = root === '/' ? '/' : root + '/';
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i];
      if (!inShare(id)) continue;
      const meta = snapshot.docById(id);
      if (meta === undefined || !meta.path.startsWith(prefix)) continue;
      if (!filter.test(meta.path) || !visibility.canSee(meta.claims)) continue;
      out.push(meta);
    }
    return sortByPath(out);
  }
  let member: Uint8Array | null = null;
  if (ids !== null) {
    member = new Uint8Array(ids.length === 0 ? 1 : ids[ids.length - 1] + 1);
    for (let i = 0; i < ids.length; i++) member[ids[i]] = 1;
  }
  const { start, end } = dirRange(root);
  for (const meta of snapshot.docsInRange(start, end)) {
    const id = meta.id;
    if (member !== null && (id >= member.length || member[id] === 0)) continue;
    if (!inShare(id) || !filter.test(meta.path) || !visibility.canSee(meta.claims)) continue;
    out.push(meta);
  }
  return out;
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
  let lo = 0;
  let hi = ids.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (ids[mid] < id) lo = mid + 1;
    else hi = mid;
  }
  return lo < ids.length && ids[lo] === id;
}

function sortByPath(docs: DocMeta[]): DocMeta[] {
  return docs.sort((a, b) => comparePaths(a.path, b.path));
}
