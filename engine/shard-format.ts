/**
 * The shard format, version 3 (FORMAT_VERSION), and the codecs of its keys and records: the
 * writer (shard-writer.ts) and the reader (shard-env.ts, shard-snapshot.ts) spell no key or
 * record layout of their own. The values with a layout of their own are coded beside this
 * file: posting blocks and level-0 groups in posting-block.ts, texts in doc-text.ts, n-grams
 * in trigram-extract.ts.
 *
 * A shard is one LMDB environment in its own directory (`data.mdb`, `lock.mdb`), pages of
 * PAGE_BYTES (4 KiB), holding eight named databases (openShardDatabases); a small shard's
 * directory also holds `image`, a copy of its live records and texts that readers take instead
 * of opening the environment (its layout and rules: shard-image.ts). Every number is
 * unsigned. Keys sort by their bytes; "BE" numbers in a key are big-endian so that they sort
 * as numbers, and the 4-byte doc id keys are LMDB integer keys (native byte order).
 *
 *   info      string → msgpack value:
 *               "format"      FORMAT_VERSION, stored by the first write; a reader refuses a
 *                             shard with another value (checkFormat).
 *               "state"       ShardState { nextDocId, liveDocs, deadIds, textBytes, segFirst,
 *                             segNext, recentBytes }: the writer's books (readState,
 *                             writeState; a field the shard predates reads as its default).
 *               "docsVersion" a counter the writer increments in every transaction that
 *                             changes `docs` or `paths` (absent means 0): readers cache the
 *                             live records per version (shard-catalog.ts).
 *   docs      u32 docId (4 bytes) → DocRecord. A doc id is live iff it has an entry here.
 *   paths     path (its UTF-8 bytes) → the same DocRecord, for the live version of each path.
 *             Keys sort by UTF-8 bytes, i.e. by code point, so the files under directory `/a`
 *             are exactly the keys in ["/a/", "/a0") ("0" is the byte after "/"): dirRange.
 *   text      u32 docId (4 bytes) → the extracted UTF-8 text (T bytes), zero padding to a
 *             multiple of 4, then the byte offset of the start of each line: u16 LE when
 *             T < 65536, else u32 LE (doc-text.ts). Line N (1-based) is found without scanning
 *             the text.
 *   postings  (level 1) 7-byte key (postingKey): trigram (3 bytes BE) ‖ firstDocId (u32 BE) →
 *             block: count (u32 LE) ‖ lastId (u32 LE) ‖ count LEB128 varints, the first id then
 *             the gaps to each next id (posting-block.ts).
 *             A trigram's blocks concatenated in key order (trigramRange) list its doc ids in
 *             ascending order: "sealed" blocks are keyed by their first id, and the open "tail"
 *             block, which the writer extends by rewriting it, has firstDocId TAIL_BLOCK_ID
 *             (0xFFFFFFFF) so it sorts last. Trigrams are three consecutive text bytes without
 *             `\n` (trigram-extract.ts).
 *   recent    (level 0) 6-byte key (recentKey): segment (u32 BE) ‖ group (u16 BE, the first two
 *             bytes of a trigram, groupOf) → group value: n (u16 LE) ‖ the n third bytes,
 *             ascending ‖ n block ends (u32 LE, relative to the blocks) ‖ n blocks (format
 *             above): the segment's ids of the n trigrams of that group (posting-block.ts,
 *             encodeGroup). Every write batch appends one segment (its keys sort after all
 *             existing ones, so pages are filled and never copied); the live segments are
 *             [state.segFirst, state.segNext) (segmentsRange). When there are too many, the
 *             writer merges them all into `postings` and empties `recent` in one transaction.
 *             Segment ids exceed every id in `postings`, so a trigram's full list is its
 *             `postings` blocks followed by its block in each live segment.
 *   quads, recentQuads  the same two levels, with the same keys and values, for quadgrams (four
 *             consecutive text bytes without `\n`, ASCII letters lowercased): where the keys
 *             above name a trigram, these name a folded quadgram's 18-bit bucket (`foldQuad`,
 *             `quadBucket`, trigram-extract.ts), so their first key byte is 0 to 3. Format 2
 *             hashed quadgrams as they are; format 3 folds them so that one list serves every
 *             case variant (`-i`). Segments are numbered with those of `recent`: a write batch
 *             adds one to each, and a merge empties both.
 *
 * DocRecord is a msgpack array [id, path, textBytes, sizeBytes, lines, updatedAt (ms),
 * contentType, claims (string[] or null = visible to every token), version] (toRecord,
 * fromRecord): about 20-35 bytes plus its strings.
 *
 * Doc ids come from state.nextDocId (starting at 1), grow monotonically and are never reused.
 * Replacing or deleting a document removes its docs/paths/text entries but leaves its id in
 * the postings ("dead id"): a reader checks every candidate against `docs`. Compaction
 * (ShardWriter.compact) rewrites postings without dead ids.
 *
 * Block sizes (shard-writer.ts): a tail holds at most 4080 bytes (one overflow page); sealed
 * blocks fill whole overflow pages (up to four, 16368 bytes), so the B-tree leaves hold only
 * small tails and page references. A reader accepts blocks of any size.
 *
 * Sizes: text + ≤ 3 padding bytes + 2 or 4 bytes per line; postings about 1.1 bytes per
 * (trigram, document) pair plus 15 bytes per block (key and header). Measured on the Linux 6.1
 * source (78,576 files, 1.30 GB of text): text values 1.16x the text (line starts, overflow
 * page rounding), postings 0.21x, quads 0.29x, docs+paths 0.03x, plus the pages the last
 * write transactions copied (LMDB is copy-on-write; free pages are reused by later writes):
 * 2.0x in all after an upload of the whole tree. Measure with bench/ingest.ts
 * (docs/benchmarks.md, "Ingest").
 */

import type { Database, RootDatabase, Transaction } from 'lmdb';

/**
 * Version of the on-disk format described above; bump it on any change. Version 1 had no
 * quadgram lists, version 2 did not fold them: a shard of another version is refused, and
 * shard repair rebuilds it.
 */
export const FORMAT_VERSION = 3;

/** Bytes of an LMDB page of a shard; the writer sizes its blocks by it. */
export const PAGE_BYTES = 4096;

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
const EMPTY_STATE: Readonly<ShardState> = { nextDocId: 1, liveDocs: 0, deadIds: 0, textBytes: 0, segFirst: 0, segNext: 0, recentBytes: 0 };

/** The `info` database; its keys are spelled only below. */
type InfoDatabase = Database<unknown, string>;

/** Options of an LMDB read: the read transaction, or none inside a write transaction. */
type ReadOptions = { transaction: Transaction } | undefined;

/** The shard's ShardState (a new object), with the defaults of fields it predates. */
export function readState(info: InfoDatabase, options?: ReadOptions): ShardState {
  return { ...EMPTY_STATE, ...(info.get('state', options) as Partial<ShardState> | undefined) };
}

/** Inside a write transaction: stores the shard's ShardState. */
export function writeState(info: InfoDatabase, state: ShardState): void {
  info.put('state', state);
}

/** The shard's `docsVersion` (0 until the first write). */
export function readDocsVersion(info: InfoDatabase, options?: ReadOptions): number {
  return (info.get('docsVersion', options) as number | undefined) ?? 0;
}

/** Inside a write transaction that changes `docs` or `paths`: increments `docsVersion`. */
export function bumpDocsVersion(info: InfoDatabase): void {
  info.put('docsVersion', readDocsVersion(info) + 1);
}

/** Inside a write transaction: stores FORMAT_VERSION in a shard that has no format yet. */
export function stampFormat(info: InfoDatabase): void {
  if (info.get('format') === undefined) info.put('format', FORMAT_VERSION);
}

/** Throws unless the shard in `dir` is of FORMAT_VERSION or has no format yet (nothing written). */
export function checkFormat(dir: string, info: InfoDatabase): void {
  const format = info.get('format');
  if (format !== undefined && format !== FORMAT_VERSION) {
    throw new Error(`shard ${dir} has format ${String(format)}, this build reads ${FORMAT_VERSION}: rebuild it`);
  }
}

/** The databases of a shard (see the format description). */
export interface ShardDatabases {
  info: InfoDatabase;
  docs: Database<DocRecord, number>;
  paths: Database<DocRecord, string>;
  text: Database<Buffer, number>;
  postings: Database<Buffer, Buffer>;
  recent: Database<Buffer, Buffer>;
  quads: Database<Buffer, Buffer>;
  recentQuads: Database<Buffer, Buffer>;
}

/** Opens the databases of a shard's environment with the key and value encodings of the format. */
export function openShardDatabases(env: RootDatabase): ShardDatabases {
  const lists = { keyEncoding: 'binary', encoding: 'binary' } as const;
  return {
    info: env.openDB<unknown, string>({ name: 'info' }),
    docs: env.openDB<DocRecord, number>({ name: 'docs', keyEncoding: 'uint32' }),
    paths: env.openDB<DocRecord, string>({ name: 'paths' }),
    text: env.openDB<Buffer, number>({ name: 'text', keyEncoding: 'uint32', encoding: 'binary' }),
    postings: env.openDB<Buffer, Buffer>({ name: 'postings', ...lists }),
    recent: env.openDB<Buffer, Buffer>({ name: 'recent', ...lists }),
    quads: env.openDB<Buffer, Buffer>({ name: 'quads', ...lists }),
    recentQuads: env.openDB<Buffer, Buffer>({ name: 'recentQuads', ...lists }),
  };
}

/** The 7-byte postings key of (gram, firstDocId): a trigram, or a quadgram bucket in `quads`. */
export function postingKey(gram: number, firstDocId: number): Buffer {
  const key = Buffer.allocUnsafe(7);
  key[0] = gram >>> 16;
  key[1] = (gram >>> 8) & 0xff;
  key[2] = gram & 0xff;
  key.writeUInt32BE(firstDocId, 3);
  return key;
}

/** The gram of a postings key. */
export function postingKeyGram(key: Uint8Array): number {
  return (key[0] << 16) | (key[1] << 8) | key[2];
}

/** The first doc id of a postings key (TAIL_BLOCK_ID for a tail block). */
export function postingKeyFirstId(key: Buffer): number {
  return key.readUInt32BE(3);
}

/**
 * The postings key range [start, end) holding every block of the grams in [first, end); without
 * `end`, every block from `first` on.
 */
export function postingsRange(first: number, end?: number): { start: Buffer; end: Buffer } {
  // Any 8-byte key of 0xFF sorts after every 7-byte key.
  return { start: postingKey(first, 0), end: end === undefined ? Buffer.alloc(8, 0xff) : postingKey(end, 0) };
}

/** The postings key range [start, end) holding every block of `gram`. */
export function trigramRange(gram: number): { start: Buffer; end: Buffer } {
  // The last trigram has no successor key.
  return postingsRange(gram, gram === 0xffffff ? undefined : gram + 1);
}

/** The level-0 group of a gram: its first two bytes (the group value lists the third). */
export function groupOf(gram: number): number {
  return gram >>> 8;
}

/** The gram of a level-0 group and of a third byte listed in the group's value. */
export function gramOf(group: number, low: number): number {
  return (group << 8) | low;
}

/** The 6-byte `recent` key of (segment, group). */
export function recentKey(segment: number, group: number): Buffer {
  const key = Buffer.allocUnsafe(6);
  key.writeUInt32BE(segment, 0);
  key.writeUInt16BE(group, 4);
  return key;
}

/** The group of a `recent` key. */
export function recentKeyGroup(key: Buffer): number {
  return key.readUInt16BE(4);
}

/** The `recent` key range [start, end) of the segments [first, next). */
export function segmentsRange(first: number, next: number): { start: Buffer; end: Buffer } {
  return { start: recentKey(first, 0), end: recentKey(next, 0) };
}

/** The `paths` key range [start, end) of the files under directory `dir` (`/` or `/a/b`). */
export function dirRange(dir: string): { start: string; end: string } {
  const start = dir === '/' ? '/' : dir + '/';
  return { start, end: start.slice(0, -1) + '0' };
}
