/**
 * Writes a workspace shard (format: `shard-format.ts`). One ShardWriter per shard: its
 * operations run one after another, each in ONE LMDB write transaction whose promise resolves
 * once the commit is on disk (the environment is opened without noSync and without
 * overlappingSync). Readers keep seeing the previous version until the commit.
 *
 * A batch is indexed before its transaction starts: line counts, the distinct trigrams of each
 * new document, then, per trigram, the sorted list of the batch's doc ids (counting sorts by
 * two-byte prefix, then by third byte). The transaction stores the texts and appends the lists
 * as one new segment of `recent` (level 0): one write per distinct two-byte trigram prefix, all at the end
 * of the B-tree, so no existing page is copied, however small the batch. Quadgram buckets
 * (QUAD_BUCKET_BITS-bit keys) go through the same steps into `recentQuads` and `quads`, in the same
 * transactions: below, "trigram" stands for either key.
 *
 * Once MAX_RECENT_SEGMENTS segments or MAX_RECENT_BYTES of blocks accumulate, the next write
 * first merges them into `postings` (level 1) in one transaction: each trigram's ids are
 * appended to its tail block, and a tail that would grow past TAIL_BLOCK_BYTES is sealed into
 * page-sized blocks keyed by their first id. A merge costs one read and one or two writes per
 * distinct trigram of everything merged, so merging many batches at once keeps the cost per
 * byte low: several times the write speed of updating `postings` on every batch.
 *
 * The CPU work is synchronous; the ingest layer should run the writer off the HTTP thread.
 */

import { checkFilePath } from '../core/paths.js';
import { VfsError } from '../core/errors.js';
import { countLines, docValueBytes, encodeDocValueInto } from './doc-text.js';
import {
  appendedBytes,
  appendToBlockInto,
  BLOCK_HEADER_BYTES,
  blockCount,
  blockCountAt,
  decodeBlock,
  decodeBlockAt,
  decodePostings,
  encodeBlockInto,
  encodeGroupInto,
  groupBytes,
  groupData,
  groupEnd,
  groupLow,
  groupSize,
  varintSize,
  type PostingBlocks,
} from './posting-block.js';
import { acquireShardEnv, dropFreePageList, readFast, releaseShardEnv, type ShardEnv } from './shard-env.js';
import {
  bumpDocsVersion,
  fromRecord,
  gramOf,
  groupOf,
  PAGE_BYTES,
  postingKey,
  postingKeyGram,
  postingsRange,
  readDocsVersion,
  readState,
  recentKey,
  recentKeyGroup,
  segmentsRange,
  stampFormat,
  TAIL_BLOCK_ID,
  toRecord,
  writeState,
  type DocMeta,
  type DocRecord,
  type ShardState,
} from './shard-format.js';
import { dropShardImage, wantsImage, writeShardImage } from './shard-image.js';
import { distinctGrams, QUAD_BUCKET_BITS } from './trigram-extract.js';

/** One document to store. */
export interface DocInput {
  /** Canonical path (NFC, leading `/`, valid per core/paths.ts). */
  path: string;
  /** Extracted text, UTF-8. */
  text: Buffer;
  /** Bytes of the uploaded original. */
  sizeBytes: number;
  /** Content-Type given at upload. */
  contentType: string;
  /** Upload time, ms since the epoch. */
  updatedAt: number;
  /** Visibility claims (non-empty), or null: visible to every token. */
  visibility: string[] | null;
  /** Content version (e.g. a hash of the original): equal versions promise equal text. */
  version: string;
}

/** What a batch did. */
export interface BatchResult {
  /** Documents whose text was (re)indexed. */
  indexed: number;
  /** Documents whose stored version was equal: only changed metadata was rewritten. */
  unchanged: number;
}

/** What a compaction did. */
export interface CompactResult {
  /** Lists (of a trigram or a quadgram bucket) whose blocks were rewritten. */
  listsRewritten: number;
  /** Dead doc ids dropped, counted once per list that held them. */
  deadIdsDropped: number;
}

/**
 * A tail block is rewritten on every batch that touches its trigram; past this size it is
 * sealed. One LMDB overflow page holds exactly this much (4 KiB minus the 16-byte page header),
 * and rewriting a tail costs about one page, as dirtying the leaf page of a small tail does.
 */
export const TAIL_BLOCK_BYTES = PAGE_BYTES - 16;
/**
 * Sealed blocks fill whole overflow pages: SEALED_BLOCK_BYTES (four pages) while enough ids
 * remain, else as many whole pages as they fill. So sealed blocks waste almost no space and
 * the B-tree leaves hold only small tails and 8-byte overflow references.
 */
export const SEALED_BLOCK_BYTES = 4 * PAGE_BYTES - 16;
/** Level-0 segments (write batches) kept before they are merged into level 1. */
export const MAX_RECENT_SEGMENTS = 64;
/**
 * Level-0 block bytes (both indexes) kept before they are merged into level 1: the quadgram
 * lists more than double the bytes of the trigram lists, and a merge costs about the same per
 * list however many ids it appends, so fewer, larger merges write faster (at 64 MiB the whole
 * Linux tree took 15 merges and 8% longer than at this size's 10). This and MAX_RECENT_SEGMENTS:
 * fit with bench/engine-grep.ts --batch-mb and bench/ingest.ts (docs/benchmarks.md, "Ingest").
 */
export const MAX_RECENT_BYTES = 128 << 20;
/** Key range handled per compaction transaction (2^24 / 64 trigram ranges; one holds every quadgram bucket). */
const COMPACT_RANGE = 1 << 18;

interface NewDoc {
  meta: DocMeta;
  text: Buffer;
  trigrams: Uint32Array;
  quads: Uint32Array;
  replaces: DocMeta | undefined;
}

/** One n-gram index: its two levels (see shard-format.ts) and the number of its keys. */
interface GramIndex {
  postings: ShardEnv['postings'];
  recent: ShardEnv['recent'];
  keys: number;
}

/** Per-trigram doc-id lists of one batch: ids[ends[k-1] .. ends[k]) belong to trigrams[k]. */
interface BatchPostings {
  trigrams: Uint32Array;
  ends: Uint32Array;
  ids: Uint32Array;
}

/**
 * Where values are encoded before a put, shared by all writers of a thread. Inside a write
 * transaction lmdb-js copies a value into the database before `put` returns, so one buffer
 * serves every put: no allocation, and lmdb-js looks up its address once, not per value.
 */
let valueScratch = Buffer.allocUnsafe(1 << 16);
/** The most valueScratch grows to: a larger value (a large text) gets a buffer of its own. */
const SCRATCH_MAX_BYTES = 4 << 20;

/** A buffer of at least `bytes` to encode one value into: valueScratch, grown if need be. */
function scratchFor(bytes: number): Buffer {
  if (bytes > SCRATCH_MAX_BYTES) return Buffer.allocUnsafe(bytes);
  if (valueScratch.length < bytes) valueScratch = Buffer.allocUnsafe(Math.min(Math.max(bytes, valueScratch.length * 2), SCRATCH_MAX_BYTES));
  return valueScratch;
}

/**
 * Lists laid out in key order, two-byte prefix by prefix (buildPostings, mergeGroups): each
 * list's key and end, and the ids they fill.
 */
class ListLayout {
  readonly ids: Uint32Array;
  private readonly keys: Uint32Array;
  private readonly ends: Uint32Array;
  private count = 0;
  private filled = 0;

  constructor(maxLists: number, ids: number) {
    this.ids = new Uint32Array(ids);
    this.keys = new Uint32Array(maxLists);
    this.ends = new Uint32Array(maxLists);
  }

  /**
   * Adds the lists of prefix `prefix`, after those before it: `at` holds the number of ids for
   * each third byte, and is left holding where each one's ids start.
   */
  place(prefix: number, at: Uint32Array): void {
    for (let low = 0; low < 256; low++) {
      const c = at[low];
      if (c === 0) continue;
      at[low] = this.filled;
      this.filled += c;
      this.keys[this.count] = gramOf(prefix, low);
      this.ends[this.count++] = this.filled;
    }
  }

  postings(): BatchPostings {
    return { trigrams: this.keys.subarray(0, this.count), ends: this.ends.subarray(0, this.count), ids: this.ids };
  }
}

/**
 * The per-key lists of a batch: `keys[d]` holds the distinct keys (trigrams or quadgram
 * buckets, below `keySpace`) of the document with id `ids[d]`, ids ascending. Two counting
 * sorts, as a merge places level 0 (mergeGroups): the entries by two-byte prefix (in document
 * order), then each prefix's by third byte, so the lists come out in key order, each ascending.
 */
function buildPostings(docIds: readonly number[], keys: readonly Uint32Array[], keySpace: number): BatchPostings {
  const prefixCount = keySpace >>> 8;
  const starts = new Uint32Array(prefixCount + 1);
  let total = 0;
  for (const list of keys) {
    total += list.length;
    for (let i = 0; i < list.length; i++) starts[(list[i] >>> 8) + 1]++;
  }
  for (let p = 1; p <= prefixCount; p++) starts[p] += starts[p - 1];
  const next = starts.slice(0, prefixCount);
  const lows = new Uint8Array(total);
  const owners = new Uint32Array(total);
  for (let d = 0; d < keys.length; d++) {
    const list = keys[d];
    const id = docIds[d];
    for (let i = 0; i < list.length; i++) {
      const at = next[list[i] >>> 8]++;
      lows[at] = list[i] & 0xff;
      owners[at] = id;
    }
  }
  const lists = new ListLayout(total, total);
  const at = new Uint32Array(256);
  for (let p = 0; p < prefixCount; p++) {
    const first = starts[p];
    const last = starts[p + 1];
    if (first === last) continue;
    at.fill(0);
    for (let o = first; o < last; o++) at[lows[o]]++;
    lists.place(p, at);
    for (let o = first; o < last; o++) lists.ids[at[lows[o]]++] = owners[o];
  }
  return lists.postings();
}

/**
 * The per-trigram id lists of level-0 group values (in segment order, so each list comes out
 * ascending; `prefixes[g]` is the group of `groups[g]`, from its key). Group by group of the
 * same two-byte prefix, with one 256-entry count per third byte: every list of a prefix is
 * placed before the next prefix's, so the lists come out in trigram order with no sort and
 * no table over the whole key space.
 */
function mergeGroups(prefixes: number[], groups: Buffer[]): BatchPostings {
  // The groups in prefix order, each prefix's in segment order (a counting sort: stable).
  let maxPrefix = 0;
  for (const prefix of prefixes) if (prefix > maxPrefix) maxPrefix = prefix;
  const starts = new Uint32Array(maxPrefix + 2);
  for (const prefix of prefixes) starts[prefix + 1]++;
  for (let p = 1; p < starts.length; p++) starts[p] += starts[p - 1];
  const order = new Uint32Array(groups.length);
  const next = starts.slice(0, maxPrefix + 1);
  for (let g = 0; g < groups.length; g++) order[next[prefixes[g]]++] = g;

  let total = 0;
  let entries = 0;
  for (const group of groups) {
    const n = groupSize(group);
    const data = groupData(n);
    entries += n;
    for (let i = 0, start = 0; i < n; i++) {
      total += blockCountAt(group, data + start);
      start = groupEnd(group, n, i);
    }
  }
  const lists = new ListLayout(entries, total);
  const at = new Uint32Array(256);
  for (let p = 0; p <= maxPrefix; p++) {
    const first = starts[p];
    const last = starts[p + 1];
    if (first === last) continue;
    // Ids per third byte over this prefix's groups, then where each third byte's list starts.
    at.fill(0);
    for (let o = first; o < last; o++) {
      const group = groups[order[o]];
      const n = groupSize(group);
      const data = groupData(n);
      for (let i = 0, start = 0; i < n; i++) {
        at[groupLow(group, i)] += blockCountAt(group, data + start);
        start = groupEnd(group, n, i);
      }
    }
    lists.place(p, at);
    for (let o = first; o < last; o++) {
      const group = groups[order[o]];
      const n = groupSize(group);
      const data = groupData(n);
      for (let i = 0, start = 0; i < n; i++) {
        const end = groupEnd(group, n, i);
        const low = groupLow(group, i);
        at[low] = decodeBlockAt(group, data + start, data + end, lists.ids, at[low]);
        start = end;
      }
    }
  }
  return lists.postings();
}

/** The metadata a document's row can change without its text: equal on both sides. */
export type RowMeta = Pick<DocMeta, 'sizeBytes' | 'contentType' | 'updatedAt' | 'claims'>;

/** True when two documents' row metadata (size, type, time, claims) are equal. */
export function sameMeta(a: RowMeta, b: RowMeta): boolean {
  if (a.sizeBytes !== b.sizeBytes || a.contentType !== b.contentType || a.updatedAt !== b.updatedAt) return false;
  if (a.claims === null || b.claims === null) return a.claims === b.claims;
  return a.claims.length === b.claims.length && a.claims.every((c, i) => c === b.claims![i]);
}

function checkInput(doc: DocInput): void {
  const check = checkFilePath(doc.path);
  if (!check.ok) throw new VfsError('INVALID_PATH', { reason: check.reason });
  if (check.path !== doc.path) throw new VfsError('INVALID_PATH', { reason: `the path is not canonical: ${doc.path}` });
  if (!Buffer.isBuffer(doc.text)) throw new TypeError(`text of ${doc.path} is not a Buffer`);
  if (doc.visibility !== null && doc.visibility.length === 0) {
    // An empty claim list is ambiguous (nobody? everybody?): callers pass null for "everybody".
    throw new TypeError(`visibility of ${doc.path} is an empty list; pass null for "visible to every token"`);
  }
}

/** The writer of one shard. Create with `openShardWriter`. */
export class ShardWriter {
  private queue: Promise<unknown> = Promise.resolve();
  private closed = false;
  /** Trigrams, then quadgram buckets. */
  private readonly indexes: readonly GramIndex[];

  constructor(private readonly shard: ShardEnv) {
    this.indexes = [
      { postings: shard.postings, recent: shard.recent, keys: 1 << 24 },
      { postings: shard.quads, recent: shard.recentQuads, keys: 1 << QUAD_BUCKET_BITS },
    ];
  }

  /** The live document at `path` as last committed (with its `version`), or undefined. */
  lookup(path: string): DocMeta | undefined {
    const record = this.shard.paths.get(path);
    return record === undefined ? undefined : fromRecord(record);
  }

  /** The bookkeeping record as last committed. */
  state(): ShardState {
    return readState(this.shard.info);
  }

  /** True when enough ids died since the last compaction that `compact()` is worth its cost. */
  needsCompaction(): boolean {
    const state = this.state();
    return state.deadIds > Math.max(1024, state.liveDocs / 4);
  }

  /**
   * Stores the documents in one transaction. A path already stored with the same `version` keeps
   * its text and doc id (only changed metadata is rewritten), so repeating a batch changes
   * nothing; any other existing path is replaced atomically. Later entries for a repeated path
   * win. Resolves once the commit is durable. Keep a batch under ~64 MiB of text: LMDB limits
   * the pages one transaction may dirty.
   */
  writeBatch(docs: readonly DocInput[]): Promise<BatchResult> {
    try {
      for (const doc of docs) checkInput(doc);
    } catch (error) {
      return Promise.reject(error);
    }
    return this.enqueue(() => this.changingDocuments(() => this.doWriteBatch(docs)));
  }

  /** Deletes the document at `path` in one transaction; resolves to false if there was none. */
  deleteDocument(path: string): Promise<boolean> {
    return this.enqueue(() =>
      this.changingDocuments(() =>
        this.atomically(() => {
          const record = this.shard.paths.get(path);
          if (record === undefined) return false;
          const old = fromRecord(record);
          const state = this.readState();
          this.shard.paths.remove(path);
          this.shard.docs.remove(old.id);
          this.shard.text.remove(old.id);
          state.liveDocs--;
          state.deadIds++;
          state.textBytes -= old.textBytes;
          writeState(this.shard.info, state);
          bumpDocsVersion(this.shard.info); // readers' catalogs of the old version stop applying
          return true;
        }),
      ),
    );
  }

  /**
   * Merges level 0, then rewrites the blocks of every trigram that lists dead ids, without them,
   * one trigram range per transaction (readers never see a trigram half rewritten). Writes
   * queued meanwhile wait.
   */
  compact(): Promise<CompactResult> {
    return this.enqueue(() => this.doCompact());
  }

  /**
   * Merges the level-0 segments into `postings` now (writes do it when enough accumulate); worth
   * calling when ingest goes idle, so readers look up fewer segments.
   */
  flush(): Promise<void> {
    return this.enqueue(() => this.doMerge());
  }

  /** Runs `compact()` if `needsCompaction()`; resolves to null when it did nothing. */
  compactIfNeeded(): Promise<CompactResult | null> {
    return this.needsCompaction() ? this.compact() : Promise.resolve(null);
  }

  /** Waits for queued operations, then releases the environment. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.queue.catch(() => undefined);
    try {
      dropFreePageList(this.shard);
    } finally {
      await releaseShardEnv(this.shard);
    }
  }

  /**
   * Runs `op`, whose transactions change documents, with the shard's image kept exact
   * (shard-image.ts): removed before, written anew after the commit.
   */
  private async changingDocuments<T>(op: () => Promise<T>): Promise<T> {
    dropShardImage(this.shard.dir);
    const result = await op();
    try {
      this.writeImage();
    } catch {
      // Written under another name and renamed last, an image that failed is not there: the
      // shard is read from LMDB, and the image only saves opening it.
    }
    return result;
  }

  /** After a commit: writes the shard's image, when it is small enough to have one. */
  private writeImage(): void {
    this.shard.env.resetReadTxn();
    const state = this.state();
    if (!wantsImage(state)) return;
    const records: DocRecord[] = [];
    const values: Buffer[] = [];
    for (const { value } of this.shard.paths.getRange()) {
      const text = this.shard.text.getBinary(value[0]);
      if (text === undefined) throw new Error(`shard ${this.shard.dir}: no text for live doc ${value[0]}`);
      records.push(value);
      values.push(text);
    }
    writeShardImage(this.shard.dir, readDocsVersion(this.shard.info), state, records, values);
  }

  private enqueue<T>(op: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new Error(`shard writer for ${this.shard.dir} is closed`));
    const result = this.queue.then(op);
    this.queue = result.catch(() => undefined);
    return result;
  }

  /**
   * Runs `fn` in one write transaction that commits durably, or rolls back entirely if `fn`
   * throws (lmdb-js commits a plain `transaction()` callback's writes even when it throws, so a
   * child transaction provides the rollback).
   */
  private atomically<T>(fn: () => T): Promise<T> {
    return this.shard.env.childTransaction(fn);
  }

  private readState(): ShardState {
    return { ...this.state() };
  }

  private async doWriteBatch(input: readonly DocInput[]): Promise<BatchResult> {
    const before = this.state();
    if (before.segNext - before.segFirst >= MAX_RECENT_SEGMENTS || before.recentBytes >= MAX_RECENT_BYTES) {
      await this.doMerge();
    }
    const byPath = new Map<string, DocInput>();
    for (const doc of input) {
      byPath.delete(doc.path); // keep the last occurrence, at its position
      byPath.set(doc.path, doc);
    }
    const startState = this.state();
    let nextId = startState.nextDocId;
    const fresh: NewDoc[] = [];
    const metaUpdates: DocMeta[] = [];
    for (const doc of byPath.values()) {
      const existing = this.lookup(doc.path);
      const meta: DocMeta = {
        id: 0,
        path: doc.path,
        textBytes: doc.text.byteLength,
        sizeBytes: doc.sizeBytes,
        lines: 0,
        updatedAt: doc.updatedAt,
        contentType: doc.contentType,
        claims: doc.visibility === null ? null : [...doc.visibility],
        version: doc.version,
      };
      if (existing !== undefined && existing.version === doc.version && existing.textBytes === meta.textBytes) {
        meta.id = existing.id;
        meta.lines = existing.lines;
        if (!sameMeta(existing, meta)) metaUpdates.push(meta);
        continue;
      }
      if (nextId >= TAIL_BLOCK_ID) throw new Error(`shard ${this.shard.dir} ran out of doc ids: rebuild it`);
      meta.id = nextId++;
      meta.lines = countLines(doc.text);
      fresh.push({ meta, text: doc.text, ...distinctGrams(doc.text), replaces: existing });
    }
    if (fresh.length === 0 && metaUpdates.length === 0) return { indexed: 0, unchanged: byPath.size };
    const docIds = fresh.map((doc) => doc.meta.id);
    const postings = [
      buildPostings(
        docIds,
        fresh.map((doc) => doc.trigrams),
        this.indexes[0].keys,
      ),
      buildPostings(
        docIds,
        fresh.map((doc) => doc.quads),
        this.indexes[1].keys,
      ),
    ];
    for (const doc of fresh) doc.trigrams = doc.quads = EMPTY; // free memory before the transaction

    await this.atomically(() => {
      const state = this.readState();
      if (state.nextDocId !== startState.nextDocId) {
        throw new Error(`shard ${this.shard.dir} was written by another writer: one ShardWriter per shard`);
      }
      for (const doc of fresh) {
        const { meta, replaces } = doc;
        const current = this.shard.paths.get(meta.path);
        if ((current === undefined ? undefined : fromRecord(current).id) !== replaces?.id) {
          throw new Error(`shard ${this.shard.dir}: ${meta.path} changed under this writer: one ShardWriter per shard`);
        }
        if (replaces !== undefined) {
          this.shard.docs.remove(replaces.id);
          this.shard.text.remove(replaces.id);
          state.liveDocs--;
          state.deadIds++;
          state.textBytes -= replaces.textBytes;
        }
        const record = toRecord(meta);
        const out = scratchFor(docValueBytes(meta.textBytes, meta.lines));
        this.shard.text.put(meta.id, out.subarray(0, encodeDocValueInto(out, doc.text, meta.lines)));
        this.shard.docs.put(meta.id, record);
        this.shard.paths.put(meta.path, record);
        state.liveDocs++;
        state.textBytes += meta.textBytes;
      }
      for (const meta of metaUpdates) {
        const record = toRecord(meta);
        this.shard.docs.put(meta.id, record);
        this.shard.paths.put(meta.path, record);
      }
      if (postings.some((batch) => batch.trigrams.length > 0)) {
        const segment = state.segNext++;
        for (let i = 0; i < postings.length; i++) state.recentBytes += this.writeSegment(this.indexes[i].recent, segment, postings[i]);
      }
      state.nextDocId = nextId;
      writeState(this.shard.info, state);
      bumpDocsVersion(this.shard.info); // readers' catalogs of the old version stop applying
      stampFormat(this.shard.info);
    });
    return { indexed: fresh.length, unchanged: byPath.size - fresh.length };
  }

  /** Inside a write transaction: stores a batch's lists as level-0 `segment`; returns the bytes written. */
  private writeSegment(recent: GramIndex['recent'], segment: number, batch: BatchPostings): number {
    const { trigrams, ends, ids } = batch;
    let bytes = 0;
    // One value per two-byte prefix: several times fewer writes than one per trigram.
    for (let first = 0; first < trigrams.length; ) {
      const prefix = groupOf(trigrams[first]);
      let last = first + 1;
      while (last < trigrams.length && groupOf(trigrams[last]) === prefix) last++;
      const out = scratchFor(groupBytes(ends, ids, first, last));
      const length = encodeGroupInto(out, trigrams, ends, ids, first, last);
      // Keys grow (segment, then prefix): MDB_APPEND fills pages and touches no old page.
      recent.putSync(recentKey(segment, prefix), out.subarray(0, length), { append: true });
      bytes += length;
      first = last;
    }
    return bytes;
  }

  /** Merges every level-0 segment into level 1 and empties level 0, of both indexes, in one transaction. */
  private async doMerge(): Promise<void> {
    if (this.state().segNext === this.state().segFirst) return;
    await this.atomically(() => {
      const state = this.readState();
      for (const index of this.indexes) {
        const prefixes: number[] = [];
        const groups: Buffer[] = [];
        for (const { key, value } of index.recent.getRange(segmentsRange(state.segFirst, state.segNext))) {
          prefixes.push(recentKeyGroup(key));
          groups.push(value); // binary values from a range are copies
        }
        this.appendPostings(index.postings, mergeGroups(prefixes, groups));
        index.recent.clearSync(); // inside this transaction: frees the pages, no per-key copy
      }
      state.segFirst = state.segNext;
      state.recentBytes = 0;
      writeState(this.shard.info, state);
    });
  }

  /** Inside a write transaction: appends each trigram's new ids to its level-1 blocks. */
  private appendPostings(db: GramIndex['postings'], batch: BatchPostings): void {
    const { trigrams, ends, ids } = batch;
    // Into an empty level 1 (a shard's first merge) every list is new and its keys come in order:
    // no tail to look up, and each put goes at the end of the B-tree (MDB_APPEND).
    let empty = true;
    for (const _ of db.getKeys({ limit: 1 })) empty = false;
    let from = 0;
    for (let k = 0; k < trigrams.length; k++) {
      const trigram = trigrams[k];
      const to = ends[k];
      const tailKey = postingKey(trigram, TAIL_BLOCK_ID);
      const raw = empty ? undefined : readFast(db, tailKey);
      if (raw === undefined) {
        this.writeBlocks(db, trigram, ids, from, to, tailKey, empty);
      } else {
        // `raw` views the thread's read buffer, which the next read reuses: it is used up here.
        const size = raw.byteLength + appendedBytes(raw, ids, from, to);
        if (size <= TAIL_BLOCK_BYTES) {
          const out = scratchFor(size);
          db.put(tailKey, out.subarray(0, appendToBlockInto(out, raw, ids, from, to)));
        } else {
          const merged = new Uint32Array(blockCount(raw) + (to - from));
          const n = decodeBlock(raw, merged, 0);
          merged.set(ids.subarray(from, to), n);
          this.writeBlocks(db, trigram, merged, 0, merged.length, tailKey);
        }
      }
      from = to;
    }
  }

  /**
   * Writes ids[from..to) (ascending, after every id already stored for the trigram) as sealed
   * blocks plus a tail block of at most TAIL_BLOCK_BYTES; replaces any existing tail. With
   * `append`, every key written is after every key in `db` (which then holds no tail of the trigram).
   */
  private writeBlocks(db: GramIndex['postings'], trigram: number, ids: Uint32Array, from: number, to: number, tailKey: Buffer, append = false): void {
    let gaps = 0; // encoded size of the gaps after ids[from]
    for (let i = from + 1; i < to; i++) gaps += varintSize(ids[i] - ids[i - 1]);
    let pos = from;
    while (pos < to && BLOCK_HEADER_BYTES + varintSize(ids[pos]) + gaps > TAIL_BLOCK_BYTES) {
      const remaining = BLOCK_HEADER_BYTES + varintSize(ids[pos]) + gaps;
      // More than a tail remains, so at least one whole page can be filled.
      const limit = remaining >= SEALED_BLOCK_BYTES ? SEALED_BLOCK_BYTES : Math.floor((remaining + 16) / PAGE_BYTES) * PAGE_BYTES - 16;
      let size = BLOCK_HEADER_BYTES + varintSize(ids[pos]);
      let end = pos + 1;
      while (end < to) {
        const gap = varintSize(ids[end] - ids[end - 1]);
        if (size + gap > limit) break;
        size += gap;
        gaps -= gap;
        end++;
      }
      if (end < to) gaps -= varintSize(ids[end] - ids[end - 1]); // becomes the next block's first id
      putBlock(db, postingKey(trigram, ids[pos]), this.encoded(ids, pos, end, size), append);
      pos = end;
    }
    if (pos < to) putBlock(db, tailKey, this.encoded(ids, pos, to, BLOCK_HEADER_BYTES + varintSize(ids[pos]) + gaps), append);
    else if (!append) db.remove(tailKey);
  }

  /** The block of ids[from..to) (`bytes` long) in valueScratch, for a put inside a write transaction. */
  private encoded(ids: Uint32Array, from: number, to: number, bytes: number): Buffer {
    const out = scratchFor(bytes);
    return out.subarray(0, encodeBlockInto(out, 0, ids, from, to));
  }

  private async doCompact(): Promise<CompactResult> {
    await this.doMerge();
    // Live ids as of now; no write interleaves (the queue), so this stays exact.
    const state = this.state();
    const live = new Uint8Array(state.nextDocId);
    for (const id of this.shard.docs.getKeys()) live[id as number] = 1;
    const result: CompactResult = { listsRewritten: 0, deadIdsDropped: 0 };
    for (const index of this.indexes) {
      for (let rangeStart = 0; rangeStart < index.keys; rangeStart += COMPACT_RANGE) {
        await this.atomically(() => this.compactRange(index, rangeStart, live, result));
      }
    }
    await this.atomically(() => {
      const current = this.readState();
      current.deadIds = 0;
      writeState(this.shard.info, current);
    });
    return result;
  }

  /**
   * Inside a write transaction: rewrites the lists of COMPACT_RANGE keys of `index` from
   * `rangeStart` without ids not `live`; the last range runs to the end of the database.
   */
  private compactRange(index: GramIndex, rangeStart: number, live: Uint8Array, result: CompactResult): void {
    const db = index.postings;
    const rangeEnd = rangeStart + COMPACT_RANGE;
    // Read the whole range first: no writes while a cursor walks it.
    const entries: { key: Buffer; value: Buffer }[] = [];
    for (const entry of db.getRange(postingsRange(rangeStart, rangeEnd >= index.keys ? undefined : rangeEnd))) {
      entries.push({ key: Buffer.from(entry.key), value: Buffer.from(entry.value) });
    }
    let i = 0;
    while (i < entries.length) {
      const trigram = postingKeyGram(entries[i].key);
      let j = i;
      const list: PostingBlocks = { count: 0, blocks: [] };
      while (j < entries.length && postingKeyGram(entries[j].key) === trigram) {
        list.count += blockCount(entries[j].value);
        list.blocks.push(entries[j].value);
        j++;
      }
      const ids = decodePostings(list);
      const n = ids.length;
      let kept = 0;
      for (let k = 0; k < n; k++) {
        const id = ids[k];
        if (id >= live.length || live[id] === 1) ids[kept++] = id;
      }
      if (kept < n) {
        for (let k = i; k < j; k++) db.remove(entries[k].key);
        if (kept > 0) this.writeBlocks(db, trigram, ids, 0, kept, postingKey(trigram, TAIL_BLOCK_ID));
        result.listsRewritten++;
        result.deadIdsDropped += n - kept;
      }
      i = j;
    }
  }
}

/** Inside a write transaction: puts a block, with `append` at the B-tree's end (MDB_APPEND: its key after every key of `db`). */
function putBlock(db: GramIndex['postings'], key: Buffer, value: Buffer, append: boolean): void {
  if (append) db.putSync(key, value, { append: true });
  else db.put(key, value);
}

const EMPTY = new Uint32Array(0);

/** Opens the writer of the shard in directory `dir` (created if missing). */
export function openShardWriter(dir: string): ShardWriter {
  return new ShardWriter(acquireShardEnv(dir));
}
