/**
 * Snapshots: every tool call takes one (an LMDB read transaction) and does all its reads
 * through it, so it sees one consistent version of the shard even while the writer commits
 * (format: shard-format.ts). Values read with `getBinaryFast` (readFast) live in a buffer
 * lmdb-js reuses for the next read on the thread: they are used immediately and never kept
 * across a `yield`. A snapshot of a small shard's image (shard-image.ts) reads no LMDB at all:
 * its records come from the image's catalog, and it has no trigram lists (`indexed` is false).
 */

import type { Transaction } from 'lmdb';
import { startsOffset, startWidth } from './doc-text.js';
import { blockCount, decodePostings, findInGroup, type PostingBlocks } from './posting-block.js';
import { ShardCatalog } from './shard-catalog.js';
import { readFast, type ShardEnv } from './shard-env.js';
import type { ShardImage } from './shard-image.js';
import { fromRecord, groupOf, readDocsVersion, readState, recentKey, trigramRange, type DocMeta, type ShardState } from './shard-format.js';
import { foldQuad, QUAD_KEY_BASE, quadBucket } from './trigram-extract.js';

/**
 * One consistent view of a shard for the duration of a tool call. Call `done()` when finished
 * (the tools do, in a `finally`).
 */
export class ShardSnapshot {
  private readonly shard: ShardEnv;
  private readonly txn: Transaction;
  private readonly opts: { transaction: Transaction };
  /** The image this snapshot reads instead of LMDB, if any. */
  private readonly image: ShardImage | null;
  private finished = false;
  private cachedState: ShardState | undefined;

  /** This snapshot's `docsVersion` (see the format description). */
  readonly docsVersion: number;
  /** The live records of `docsVersion`, when the reader holds them; else they are read from LMDB. */
  private catalog: ShardCatalog | null = null;
  /** Records read from LMDB, reported to the reader (see ShardReader.snapshot). */
  private recordsRead = 0;

  /** A snapshot of the latest commit of `source`, or of the version a small shard's image holds. */
  constructor(
    source: ShardEnv | ShardImage,
    private readonly onDone: (snapshot: ShardSnapshot, recordsRead: number) => void = () => {},
  ) {
    if ('env' in source) {
      this.shard = source;
      this.image = null;
      this.txn = source.env.useReadTransaction();
      this.opts = { transaction: this.txn };
      this.docsVersion = readDocsVersion(source.info, this.opts);
    } else {
      // Unset: with the catalog and the state given from the start, and docValue and
      // postingBlocks asking `image` first, no method of an image's snapshot reaches LMDB.
      this.shard = null as never;
      this.txn = null as never;
      this.opts = null as never;
      this.image = source;
      this.docsVersion = source.docsVersion;
      this.catalog = source.catalog;
      this.cachedState = source.state;
    }
  }

  /** False for a snapshot of an image, which has no trigram lists: every document is a candidate. */
  get indexed(): boolean {
    return this.image === null;
  }

  /** Serves this snapshot's records from `catalog`, which must hold this snapshot's `docsVersion`. */
  useCatalog(catalog: ShardCatalog): void {
    if (catalog.version !== this.docsVersion) throw new Error(`catalog of version ${catalog.version} for a snapshot of version ${this.docsVersion}`);
    this.catalog = catalog;
  }

  /** True when the records come from an in-memory catalog. */
  get cataloged(): boolean {
    return this.catalog !== null;
  }

  /** A catalog of this snapshot's live records (reads every one of them). */
  buildCatalog(): ShardCatalog {
    if (this.image !== null) return this.image.catalog;
    const docs: DocMeta[] = [];
    for (const { value } of this.shard.paths.getRange({ transaction: this.txn })) docs.push(fromRecord(value));
    return new ShardCatalog(this.docsVersion, docs);
  }

  /**
   * The live documents among `ids` in path order, when a catalog serves this snapshot; null
   * otherwise (look them up with docById and sort them).
   */
  catalogDocsByIds(ids: Uint32Array): DocMeta[] | null {
    return this.catalog === null ? null : this.catalog.docsByIds(ids);
  }

  /** The live document with this id, or undefined (dead or never allocated). */
  docById(id: number): DocMeta | undefined {
    if (this.catalog !== null) return this.catalog.docById(id);
    this.recordsRead++;
    const record = this.shard.docs.get(id, this.opts);
    return record === undefined ? undefined : fromRecord(record);
  }

  /** The live document at this canonical path, or undefined. */
  docByPath(path: string): DocMeta | undefined {
    if (this.catalog !== null) return this.catalog.docByPath(path);
    this.recordsRead++;
    const record = this.shard.paths.get(path, this.opts);
    return record === undefined ? undefined : fromRecord(record);
  }

  /** Paths in [start, end) in code point order (from LMDB, keys only: no record is decoded). */
  *pathsInRange(start: string, end: string): Generator<string> {
    const catalog = this.catalog;
    if (catalog !== null) {
      const docs = catalog.docs;
      for (let i = catalog.lowerBound(start), to = catalog.lowerBound(end); i < to; i++) yield docs[i].path;
      return;
    }
    for (const key of this.shard.paths.getKeys({ start, end, transaction: this.txn })) {
      this.recordsRead++;
      yield key as string;
    }
  }

  /** The number of paths in [start, end) (from LMDB, counted natively: no key reaches JS). */
  countPathsInRange(start: string, end: string): number {
    if (this.catalog !== null) return Math.max(0, this.catalog.lowerBound(end) - this.catalog.lowerBound(start));
    return this.shard.paths.getKeysCount({ start, end, transaction: this.txn });
  }

  /**
   * From a catalog, the documents whose paths are in [start, end) as a part of its array
   * (`catalog.docs[from]` to `catalog.docs[to - 1]`, in code point order of path); null without
   * a catalog.
   */
  catalogRange(start: string, end: string): { catalog: ShardCatalog; from: number; to: number } | null {
    const catalog = this.catalog;
    return catalog === null ? null : { catalog, from: catalog.lowerBound(start), to: catalog.lowerBound(end) };
  }

  /** Documents whose paths are in [start, end), in code point order of path. */
  *docsInRange(start: string, end: string): Generator<DocMeta> {
    const catalog = this.catalog;
    if (catalog !== null) {
      const docs = catalog.docs;
      for (let i = catalog.lowerBound(start), to = catalog.lowerBound(end); i < to; i++) yield docs[i];
      return;
    }
    for (const { value } of this.shard.paths.getRange({ start, end, transaction: this.txn })) {
      this.recordsRead++;
      yield fromRecord(value);
    }
  }

  /**
   * The stored value of a document (text, padding, line starts). The Buffer is lmdb-js's reused
   * read buffer: valid only until the next read on this thread, never across a `yield`.
   */
  docValue(meta: DocMeta): Buffer {
    const value = this.image === null ? readFast(this.shard.text, meta.id, this.opts) : this.image.values.get(meta.id);
    const where = this.image === null ? `shard ${this.shard.dir}` : 'shard image';
    if (value === undefined) throw new Error(`${where}: no text for live doc ${meta.id}`);
    const expected = startsOffset(meta.textBytes) + meta.lines * startWidth(meta.textBytes);
    if (value.length !== expected) {
      throw new Error(`${where}: text of doc ${meta.id} has ${value.length} bytes, expected ${expected}`);
    }
    return value;
  }

  /**
   * The ascending doc ids (live or dead) of the documents containing `gram` (both levels): a
   * trigram, or a quadgram as QUAD_KEY_BASE + its bytes (the ids of its folded quadgram's
   * bucket: every document holding it in some ASCII case, and others).
   */
  postings(gram: number): Uint32Array {
    return decodePostings(this.postingBlocks(gram));
  }

  /**
   * The stored blocks of `gram`'s list (both levels) and its length, read but not decoded:
   * counting costs one read per block and per live segment, no varint. The blocks are copies,
   * valid for as long as the caller keeps them.
   */
  postingBlocks(gram: number): PostingBlocks {
    if (this.image !== null) throw new Error('a snapshot of a shard image has no trigram lists');
    const quad = gram >= QUAD_KEY_BASE;
    const key = quad ? quadBucket(foldQuad(gram - QUAD_KEY_BASE)) : gram;
    const blocks: Buffer[] = [];
    let count = 0;
    // Binary values of a range are copies (lmdb-js slices them out of its read buffer).
    const range = (quad ? this.shard.quads : this.shard.postings).getRange({ ...trigramRange(key), transaction: this.txn });
    for (const { value } of range) {
      const n = blockCount(value);
      if (n === 0) continue; // never written; skipped so that every block has a first id
      blocks.push(value);
      count += n;
    }
    const recent = quad ? this.shard.recentQuads : this.shard.recent;
    const { segFirst, segNext } = this.state();
    for (let segment = segFirst; segment < segNext; segment++) {
      const group = readFast(recent, recentKey(segment, groupOf(key)), this.opts);
      const block = group === undefined ? undefined : findInGroup(group, key);
      if (block === undefined || blockCount(block) === 0) continue;
      blocks.push(Buffer.from(block)); // copy: the read buffer is reused by the next get
      count += blockCount(block);
    }
    return { count, blocks };
  }

  /** The writer's bookkeeping as of this snapshot. */
  state(): ShardState {
    this.cachedState ??= readState(this.shard.info, this.opts);
    return this.cachedState;
  }

  /** Ends the snapshot; further reads are not allowed. */
  done(): void {
    if (this.finished) return;
    this.finished = true;
    if (this.image === null) this.txn.done();
    this.onDone(this, this.recordsRead);
  }
}
