/**
 * Reads a workspace shard. The shard format, version 3 (FORMAT_VERSION):
 *
 * A shard is one LMDB environment in its own directory (`data.mdb`, `lock.mdb`), 4 KiB pages,
 * holding eight named databases. Every number is unsigned.
 *
 *   info      string → msgpack.
 *               "format": FORMAT_VERSION; a reader refuses a shard with another value.
 *               "state":  ShardState { nextDocId, liveDocs, deadIds, textBytes, segFirst, segNext,
 *                         recentBytes } (the writer's books).
 *               "docsVersion": a counter the writer increments in every transaction that
 *                         changes `docs` or `paths` (absent means 0): readers cache the live
 *                         records per version (shard-catalog.ts).
 *   docs      u32 docId → DocRecord. A doc id is live iff it has an entry here.
 *   paths     path (UTF-8 string key) → the same DocRecord, for the live version of each path.
 *             Keys sort by UTF-8 bytes, i.e. by code point, so the files under directory `/a`
 *             are exactly the keys in ["/a/", "/a0") ("0" is the byte after "/").
 *   text      u32 docId → the extracted UTF-8 text (T bytes), zero padding to a multiple of 4,
 *             then the byte offset of the start of each line: u16 LE when T < 65536, else u32
 *             LE (doc-text.ts). Line N (1-based) is found without scanning the text.
 *   postings  (level 1) 7-byte key: trigram (3 bytes, big-endian) ‖ firstDocId (u32 BE) →
 *             block: count (u32 LE) ‖ lastId (u32 LE) ‖ count LEB128 varints, the first id then
 *             the gaps to each next id (posting-block.ts).
 *             A trigram's blocks concatenated in key order list its doc ids in ascending order:
 *             "sealed" blocks are keyed by their first id, and the open "tail" block, which the
 *             writer extends by rewriting it, has firstDocId 0xFFFFFFFF so it sorts last.
 *             Trigrams are three consecutive text bytes without `\n` (trigram-extract.ts).
 *   recent    (level 0) 6-byte key: segment (u32 BE) ‖ the first two bytes of a trigram →
 *             group: n (u16 LE) ‖ the n third bytes, ascending ‖ n block ends (u32 LE, relative
 *             to the blocks) ‖ n blocks (format above): the segment's ids of the n trigrams
 *             with that prefix (posting-block.ts, encodeGroup). Every write batch appends one
 *             segment (its keys sort after all existing ones, so pages are filled and never
 *             copied); the live segments are [state.segFirst, state.segNext). When there are
 *             too many, the writer merges them all into `postings` and empties `recent` in
 *             one transaction. Segment ids exceed every id in `postings`, so a trigram's full
 *             list is its `postings` blocks followed by its block in each live segment.
 *   quads, recentQuads  the same two levels for quadgrams (four consecutive text bytes without
 *             `\n`, ASCII letters lowercased): keys and groups name a folded quadgram's 18-bit
 *             bucket (`foldQuad`, `quadBucket`, trigram-extract.ts) where those above name a
 *             trigram. Format 2 hashed quadgrams as they are; format 3 folds them so that one
 *             list serves every case variant (`-i`). Segments are numbered with
 *             those of `recent`: a write batch adds one to each, and a merge empties both.
 *
 * DocRecord is a msgpack array [id, path, textBytes, sizeBytes, lines, updatedAt (ms),
 * contentType, claims (string[] or null = visible to every token), version].
 *
 * Doc ids come from state.nextDocId (starting at 1), grow monotonically and are never reused.
 * Replacing or deleting a document removes its docs/paths/text entries but leaves its id in
 * the postings ("dead id"): a reader checks every candidate against `docs`. Compaction
 * (ShardWriter.compact) rewrites postings without dead ids.
 *
 * Block sizes (shard-writer.ts): a tail holds at most 4080 bytes (one overflow page); sealed
 * blocks fill whole overflow pages (up to four, 16368 bytes), so the B-tree leaves hold only
 * small tails and page references.
 *
 * Sizes: text + ≤ 3 padding bytes + 2 or 4 bytes per line; postings about 1.1 bytes per
 * (trigram, document) pair plus 15 bytes per block (key and header). Measured on the Linux 6.1
 * source (78,576 files, 1.30 GB of text): text values 1.16x the text (line starts, overflow
 * page rounding), postings 0.21x, quads 0.29x, docs+paths 0.03x, plus the pages the last
 * write transactions copied (LMDB is copy-on-write; free pages are reused by later writes):
 * 2.0x in all after an upload of the whole tree (1.46-1.58x in format 1).
 *
 * Reading: every tool call takes one snapshot (an LMDB read transaction) and does all its reads
 * through it, so it sees one consistent version even while the writer commits. Values read
 * with `getBinaryFast` live in a buffer lmdb-js reuses for the next read on the thread: they
 * are used immediately and never kept across a `yield`.
 */

import { resolve } from 'node:path';
import { open, type Database, type Key, type RootDatabase, type Transaction } from 'lmdb';
import { blockCount, decodeBlock, findInGroup } from './posting-block.js';
import { startsOffset, startWidth } from './doc-text.js';
import { ShardCatalog } from './shard-catalog.js';
import { foldQuad, QUAD_KEY_BASE, quadBucket } from './trigram-extract.js';

/**
 * Version of the on-disk format described above; bump it on any change. Version 1 had no
 * quadgram lists, version 2 did not fold them: a shard of another version is refused, and
 * shard repair rebuilds it.
 */
export const FORMAT_VERSION = 3;

/** First doc id of the open tail block in a postings key. */
export const TAIL_BLOCK_ID = 0xffffffff;

/** One live document, as stored in `docs` and `paths`. */
export interface DocMeta {
  /** Doc id, unique for the life of the shard. */
  id: number;
  /** Canonical path, beginning with `/`. */
  path: string;
  /** Bytes of extracted UTF-8 text. */
  textBytes: number;
  /** Bytes of the uploaded original. */
  sizeBytes: number;
  /** Number of lines of the text. */
  lines: number;
  /** Upload time, ms since the epoch. */
  updatedAt: number;
  /** Content-Type given at upload. */
  contentType: string;
  /** Visibility claims; null means visible to every token. */
  claims: readonly string[] | null;
  /** Opaque version (content hash) given by the ingest layer; equal versions mean equal text. */
  version: string;
}

/** The writer's bookkeeping, stored under info "state". */
export interface ShardState {
  /** Next doc id to allocate. */
  nextDocId: number;
  /** Number of live documents. */
  liveDocs: number;
  /** Ids that died (replaced or deleted) since the last compaction. */
  deadIds: number;
  /** Total text bytes of live documents. */
  textBytes: number;
  /** First live segment of `recent`. */
  segFirst: number;
  /** Next segment id; the live segments are [segFirst, segNext). */
  segNext: number;
  /** Bytes of blocks in the live segments. */
  recentBytes: number;
}

/** The state of a shard nothing was written to. */
export const EMPTY_STATE: Readonly<ShardState> = { nextDocId: 1, liveDocs: 0, deadIds: 0, textBytes: 0, segFirst: 0, segNext: 0, recentBytes: 0 };

/** A stored state completed with the defaults of fields it predates. */
export function withDefaults(state: Partial<ShardState> | undefined): ShardState {
  return { ...EMPTY_STATE, ...state };
}

/** The stored form of DocMeta (see the format description). */
export type DocRecord = [number, string, number, number, number, number, string, string[] | null, string];

/** Converts a DocMeta to its stored form. */
export function toRecord(meta: DocMeta): DocRecord {
  return [
    meta.id,
    meta.path,
    meta.textBytes,
    meta.sizeBytes,
    meta.lines,
    meta.updatedAt,
    meta.contentType,
    meta.claims === null ? null : [...meta.claims],
    meta.version,
  ];
}

/** Converts a stored record to a DocMeta. */
export function fromRecord(r: DocRecord): DocMeta {
  return {
    id: r[0],
    path: r[1],
    textBytes: r[2],
    sizeBytes: r[3],
    lines: r[4],
    updatedAt: r[5],
    contentType: r[6],
    claims: r[7],
    version: r[8],
  };
}

/** The 7-byte postings key of (trigram, firstDocId). */
export function postingKey(trigram: number, firstDocId: number): Buffer {
  const key = Buffer.allocUnsafe(7);
  key[0] = trigram >>> 16;
  key[1] = (trigram >>> 8) & 0xff;
  key[2] = trigram & 0xff;
  key.writeUInt32BE(firstDocId, 3);
  return key;
}

/** The 6-byte `recent` key of (segment, first two bytes of a trigram = trigram >>> 8). */
export function recentKey(segment: number, prefix: number): Buffer {
  const key = Buffer.allocUnsafe(6);
  key.writeUInt32BE(segment, 0);
  key.writeUInt16BE(prefix, 4);
  return key;
}

/** The key range [start, end) holding every block of `trigram`. */
export function trigramRange(trigram: number): { start: Buffer; end: Buffer } {
  // The last trigram has no successor: any 8-byte key of 0xFF sorts after its 7-byte keys.
  const end = trigram === 0xffffff ? Buffer.alloc(8, 0xff) : postingKey(trigram + 1, 0);
  return { start: postingKey(trigram, 0), end };
}

/** The key range [start, end) of the files under directory `dir` (`/` or `/a/b`): see `paths`. */
export function dirRange(dir: string): { start: string; end: string } {
  const start = dir === '/' ? '/' : dir + '/';
  return { start, end: start.slice(0, -1) + '0' };
}

/**
 * A trigram's posting list as stored: its blocks in id order (the `postings` blocks, then its
 * block in each live `recent` segment), so the ids of block i all precede those of block i + 1.
 */
export interface PostingBlocks {
  /** Number of ids (live or dead) in all blocks, from their headers. */
  count: number;
  /** The blocks (format in posting-block.ts), none empty. */
  blocks: Buffer[];
}

/** Every id of a posting list, ascending. */
export function decodePostings(list: PostingBlocks): Uint32Array {
  const ids = new Uint32Array(list.count);
  let pos = 0;
  for (const block of list.blocks) pos = decodeBlock(block, ids, pos);
  return ids;
}

/** The databases of one open environment. */
export interface ShardEnv {
  dir: string;
  env: RootDatabase;
  info: Database<unknown, string>;
  docs: Database<DocRecord, number>;
  paths: Database<DocRecord, string>;
  text: Database<Buffer, number>;
  postings: Database<Buffer, Buffer>;
  recent: Database<Buffer, Buffer>;
  quads: Database<Buffer, Buffer>;
  recentQuads: Database<Buffer, Buffer>;
}

interface CachedEnv {
  shard: ShardEnv;
  refs: number;
}

// lmdb-js opens an environment once per process and shares it between threads; within a thread
// one ShardEnv per directory is shared by the reader and a writer (reference-counted).
const envs = new Map<string, CachedEnv>();

/**
 * Opens (or shares) the environment of the shard in `dir`, creating it if missing. Readers and
 * the writer use the same options: lmdb-js refuses to open an environment read-write in a
 * process where it is already open read-only.
 */
export function acquireShardEnv(directory: string): ShardEnv {
  const dir = resolve(directory);
  const cached = envs.get(dir);
  if (cached !== undefined) {
    cached.refs++;
    return cached.shard;
  }
  const env = open({
    path: dir,
    noSubdir: false,
    maxDbs: 10,
    maxReaders: 1024,
    pageSize: 4096,
    // Commits return only once fsynced, so a visible document is a durable one.
    overlappingSync: false,
  });
  const shard: ShardEnv = {
    dir,
    env,
    info: env.openDB<unknown, string>({ name: 'info' }),
    docs: env.openDB<DocRecord, number>({ name: 'docs', keyEncoding: 'uint32' }),
    paths: env.openDB<DocRecord, string>({ name: 'paths' }),
    text: env.openDB<Buffer, number>({ name: 'text', keyEncoding: 'uint32', encoding: 'binary' }),
    postings: env.openDB<Buffer, Buffer>({ name: 'postings', keyEncoding: 'binary', encoding: 'binary' }),
    recent: env.openDB<Buffer, Buffer>({ name: 'recent', keyEncoding: 'binary', encoding: 'binary' }),
    quads: env.openDB<Buffer, Buffer>({ name: 'quads', keyEncoding: 'binary', encoding: 'binary' }),
    recentQuads: env.openDB<Buffer, Buffer>({ name: 'recentQuads', keyEncoding: 'binary', encoding: 'binary' }),
  };
  const format = shard.info.get('format');
  if (format !== undefined && format !== FORMAT_VERSION) {
    void env.close();
    throw new Error(`shard ${dir} has format ${String(format)}, this build reads ${FORMAT_VERSION}: rebuild it`);
  }
  envs.set(dir, { shard, refs: 1 });
  return shard;
}

/** Releases a reference taken by acquireShardEnv; the last one closes the environment. */
export async function releaseShardEnv(shard: ShardEnv): Promise<void> {
  const cached = envs.get(shard.dir);
  if (cached === undefined || cached.shard !== shard) return;
  if (--cached.refs > 0) return;
  envs.delete(shard.dir);
  await shard.env.close();
}

type FastGet<K> = (key: K, options?: { transaction: Transaction }) => Uint8Array | undefined;

/**
 * `db.getBinaryFast` (typed: lmdb-js's declaration lacks the options). The result is a view of
 * the reused read buffer, exactly the value's length.
 */
export function readFast<K extends Key>(db: Database<Buffer, K>, key: K, options?: { transaction: Transaction }): Buffer | undefined {
  const raw = (db.getBinaryFast as unknown as FastGet<K>).call(db, key, options);
  if (raw === undefined) return undefined;
  // lmdb-js sets `length` to the value size; the underlying memory may be larger.
  return Buffer.from(raw.buffer, raw.byteOffset, (raw as { length: number }).length);
}

/**
 * One consistent view of a shard for the duration of a tool call. Call `done()` when finished
 * (the tools do, in a `finally`).
 */
export class ShardSnapshot {
  private readonly txn: Transaction;
  private readonly opts: { transaction: Transaction };
  private finished = false;
  private cachedState: ShardState | undefined;

  /** This snapshot's `docsVersion` (see the format description). */
  readonly docsVersion: number;
  /** The live records of `docsVersion`, when the reader holds them; else they are read from LMDB. */
  private catalog: ShardCatalog | null = null;
  /** Records read from LMDB, reported to the reader (see ShardReader.snapshot). */
  private recordsRead = 0;

  constructor(
    private readonly shard: ShardEnv,
    private readonly onDone: (snapshot: ShardSnapshot, recordsRead: number) => void = () => {},
  ) {
    this.txn = shard.env.useReadTransaction();
    this.opts = { transaction: this.txn };
    this.docsVersion = (shard.info.get('docsVersion', this.opts) as number | undefined) ?? 0;
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
    const value = readFast(this.shard.text, meta.id, this.opts);
    if (value === undefined) throw new Error(`shard ${this.shard.dir}: no text for live doc ${meta.id}`);
    const expected = startsOffset(meta.textBytes) + meta.lines * startWidth(meta.textBytes);
    if (value.length !== expected) {
      throw new Error(`shard ${this.shard.dir}: text of doc ${meta.id} has ${value.length} bytes, expected ${expected}`);
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
      const group = readFast(recent, recentKey(segment, key >>> 8), this.opts);
      const block = group === undefined ? undefined : findInGroup(group, key & 0xff);
      if (block === undefined || blockCount(block) === 0) continue;
      blocks.push(Buffer.from(block)); // copy: the read buffer is reused by the next get
      count += blockCount(block);
    }
    return { count, blocks };
  }

  /** The writer's bookkeeping as of this snapshot. */
  state(): ShardState {
    this.cachedState ??= withDefaults(this.shard.info.get('state', this.opts) as Partial<ShardState> | undefined);
    return this.cachedState;
  }

  /** Ends the snapshot; further reads are not allowed. */
  done(): void {
    if (this.finished) return;
    this.finished = true;
    this.txn.done();
    this.onDone(this, this.recordsRead);
  }
}

/** Live documents the catalogs of one thread may hold in all (about 470 bytes each as measured on the Linux tree, so about 94 MB). */
export const CATALOG_BUDGET_DOCS = 200_000;

/** Readers a thread keeps open (see openShardReader): 768 file descriptors. */
export const MAX_OPEN_READERS = 256;

/** Limits of one thread's shard readers (setReaderLimits); undefined means the default. */
export interface ReaderLimits {
  /** Readers the thread keeps open (see openShardReader); default MAX_OPEN_READERS. */
  maxOpen?: number;
  /** Live documents the catalogs of the thread may hold in all; default CATALOG_BUDGET_DOCS. */
  catalogBudget?: number;
  /**
   * Live documents of the largest shard the thread catalogs: building one reads them all in one
   * go (about 1 µs each), so a thread that must answer others meanwhile sets it lower; default
   * CATALOG_BUDGET_DOCS.
   */
  largestCatalog?: number;
}

/** The limits of this thread's readers, defaults applied. */
let limits: Readonly<Required<ReaderLimits>> = readerLimitsWithDefaults({});

/** A copy of `given` with every default applied. */
function readerLimitsWithDefaults(given: ReaderLimits): Readonly<Required<ReaderLimits>> {
  return Object.freeze({
    maxOpen: given.maxOpen ?? MAX_OPEN_READERS,
    catalogBudget: given.catalogBudget ?? CATALOG_BUDGET_DOCS,
    largestCatalog: given.largestCatalog ?? CATALOG_BUDGET_DOCS,
  });
}

/**
 * Sets the limits of this thread's readers (those not given: their defaults), for the readers
 * open and those opened later. Readers are cached per thread, so their limits are the thread's.
 */
export function setReaderLimits(given: ReaderLimits): void {
  limits = readerLimitsWithDefaults(given);
}

/** A shard opened for reading: hands out snapshots. Cheap to keep open per thread. */
export class ShardReader {
  private closed = false;
  /** The catalog of the newest version seen that earned one (shard-catalog.ts). */
  private catalog: ShardCatalog | null = null;
  /** Records that snapshots of `spentVersion` read from LMDB, and its live documents. */
  private spent = 0;
  private spentVersion = -1;
  private spentVersionDocs = 0;
  /** The readers of this thread holding a catalog, and their documents in all. */
  private static readonly holding = { readers: new Set<ShardReader>(), docs: 0 };
  private static tick = 0;
  /** Snapshots begun and not yet done: while any is, the reader is not closed to make room. */
  private inUse = 0;
  /**
   * When the reader last began a snapshot (ShardReader.tick). A reader holding a catalog used it
   * in that snapshot (one of a newer version drops it), so this also orders the catalogs.
   */
  private touched = 0;
  /** Set by closeWhenIdle while snapshots are in use: the last one to end closes the reader. */
  private closeWhenDone = false;
  private readonly account = (snapshot: ShardSnapshot, recordsRead: number): void => {
    if (--this.inUse === 0 && this.closeWhenDone) void this.close().catch(() => {});
    if (snapshot.docsVersion === this.spentVersion) this.spent += recordsRead;
  };

  /**
   * A catalog is built once snapshots of one version have read this many times its live
   * documents' records from LMDB (1: the ski-rental rule; 0: at once; Infinity: never).
   */
  catalogAfter = 1;

  constructor(readonly shard: ShardEnv) {}

  /** Begins a snapshot of the latest committed state. */
  snapshot(): ShardSnapshot {
    if (this.closed) throw new Error(`shard reader for ${this.shard.dir} is closed`);
    const snapshot = new ShardSnapshot(this.shard, this.account);
    this.inUse++;
    this.touched = ++ShardReader.tick;
    try {
      this.serveFromCatalog(snapshot);
    } catch (error) {
      snapshot.done();
      throw error;
    }
    return snapshot;
  }

  /** Lets `snapshot` use the catalog of its version, built first if it has been earned. */
  private serveFromCatalog(snapshot: ShardSnapshot): void {
    const version = snapshot.docsVersion;
    if (this.catalog?.version !== version) {
      // Versions only grow: a catalog of an older one serves no later snapshot.
      if (this.catalog !== null) this.dropCatalog();
      if (this.spentVersion !== version) {
        this.spentVersion = version;
        this.spent = 0;
        // Read once per version: a shard that never earns a catalog must not pay for it per snapshot.
        this.spentVersionDocs = snapshot.state().liveDocs;
      }
      const live = this.spentVersionDocs;
      if (this.spent >= this.catalogAfter * Math.max(1, live) && live <= Math.min(limits.largestCatalog, limits.catalogBudget)) {
        this.holdCatalog(snapshot.buildCatalog());
      }
    }
    if (this.catalog?.version === version) snapshot.useCatalog(this.catalog);
  }

  /** True when no snapshot of this reader is in use. */
  get idle(): boolean {
    return this.inUse === 0;
  }

  /** When the reader last began a snapshot, as a count of the thread's snapshots. */
  get lastSnapshot(): number {
    return this.touched;
  }

  /** Keeps `catalog` as this reader's, dropping the least recently used ones of the thread over budget. */
  private holdCatalog(catalog: ShardCatalog): void {
    const held = ShardReader.holding;
    this.dropCatalog();
    this.catalog = catalog;
    held.readers.add(this);
    held.docs += catalog.docs.length;
    while (held.docs > limits.catalogBudget) {
      let oldest: ShardReader | null = null;
      for (const reader of held.readers) if (reader !== this && (oldest === null || reader.touched < oldest.touched)) oldest = reader;
      if (oldest === null) break;
      oldest.dropCatalog();
    }
  }

  /** Live documents of the last cataloged version, or null without a catalog (a hint: the shard may have changed since). */
  get catalogedDocs(): number | null {
    return this.catalog === null ? null : this.catalog.docs.length;
  }

  /** Drops the catalog; the next snapshots read LMDB until one is earned again. */
  dropCatalog(): void {
    if (this.catalog !== null) {
      ShardReader.holding.docs -= this.catalog.docs.length;
      ShardReader.holding.readers.delete(this);
    }
    this.catalog = null;
    this.spent = 0;
  }

  /** Closes the reader now if no snapshot is in use, else when the last one ends. */
  closeWhenIdle(): void {
    if (this.inUse === 0) void this.close().catch(() => {});
    else this.closeWhenDone = true;
  }

  /** Closes the reader (and the environment once no writer uses it on this thread). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.dropCatalog();
    if (readers.get(this.shard.dir) === this) readers.delete(this.shard.dir);
    await releaseShardEnv(this.shard);
  }
}

const readers = new Map<string, ShardReader>();

/**
 * The reader of the shard in directory `dir`, opened once per thread and cached. A missing
 * shard is created empty (a workspace without files has an empty shard).
 *
 * A thread keeps at most ReaderLimits.maxOpen readers open (each holds three file descriptors
 * and a memory map): opening one more first closes the least recently used reader that has no
 * snapshot in use. Readers in use are never closed, so the bound is exceeded only by as many
 * shards as are being read at that moment.
 */
export function openShardReader(directory: string): ShardReader {
  // Looked up as given first: callers pass the same absolute path on every call.
  let reader = readers.get(directory);
  if (reader !== undefined) return reader;
  const dir = resolve(directory);
  reader = readers.get(dir);
  if (reader === undefined) {
    if (readers.size >= limits.maxOpen) closeLeastRecentReader();
    reader = new ShardReader(acquireShardEnv(dir));
    readers.set(dir, reader);
  }
  return reader;
}

/**
 * Forgets this thread's reader of the shard in `directory` (a deleted workspace's): it closes
 * once its snapshots in use end, which frees the shard's disk space and descriptors.
 */
export function closeShardReader(directory: string): void {
  const dir = resolve(directory);
  const reader = readers.get(dir);
  if (reader === undefined) return;
  readers.delete(dir);
  reader.closeWhenIdle();
}

/** Closes the reader that began a snapshot longest ago among those with none in use. */
function closeLeastRecentReader(): void {
  let oldest: ShardReader | null = null;
  for (const reader of readers.values()) if (reader.idle && (oldest === null || reader.lastSnapshot < oldest.lastSnapshot)) oldest = reader;
  // Its map entry goes at once; the environment closes when lmdb-js is done with it.
  oldest?.closeWhenIdle();
}

/** Readers open on this thread (for tests and monitoring). */
export function openReaderCount(): number {
  return readers.size;
}
