/**
 * Postings blocks: the value format of the shard's `postings` and `quads` databases, and of
 * the level-0 groups of `recent` and `recentQuads` (see the format description in
 * `shard-format.ts`).
 *
 *   count (u32 LE) ‖ lastId (u32 LE) ‖ `count` LEB128 varints
 *
 * The first varint is the block's first doc id, every next one the (positive) gap to the
 * following id, so a block lists strictly ascending ids. The header lets the writer append to
 * a block without decoding it, and the reader count a list, size its output and skip blocks
 * whose [first, last] range holds no id it looks for, all before decoding.
 */

/** Bytes before the varints: count and last id. */
export const BLOCK_HEADER_BYTES = 8;

/** Bytes of the LEB128 encoding of a non-negative 32-bit integer. */
export function varintSize(value: number): number {
  return value < 0x80 ? 1 : value < 0x4000 ? 2 : value < 0x200000 ? 3 : value < 0x10000000 ? 4 : 5;
}

/** Writes `value` as LEB128 at `pos`; returns the position after it. */
export function writeVarint(out: Uint8Array, pos: number, value: number): number {
  while (value >= 0x80) {
    out[pos++] = (value & 0x7f) | 0x80;
    value >>>= 7;
  }
  out[pos++] = value;
  return pos;
}

/** Bytes of the block encoding `ids[from..to)`. */
export function blockSize(ids: Uint32Array, from: number, to: number): number {
  let size = BLOCK_HEADER_BYTES + varintSize(ids[from]);
  for (let i = from + 1; i < to; i++) size += varintSize(ids[i] - ids[i - 1]);
  return size;
}

/** Writes the block of `ids[from..to)` at `pos` of `out`; returns the position after it. */
export function encodeBlockInto(out: Buffer, pos: number, ids: Uint32Array, from: number, to: number): number {
  out.writeUInt32LE(to - from, pos);
  out.writeUInt32LE(ids[to - 1], pos + 4);
  pos = writeVarint(out, pos + BLOCK_HEADER_BYTES, ids[from]);
  for (let i = from + 1; i < to; i++) pos = writeVarint(out, pos, ids[i] - ids[i - 1]);
  return pos;
}

/**
 * Encodes `ids[from..to)` (strictly ascending) as a complete block: header, then the first id
 * and the gaps.
 */
export function encodeBlock(ids: Uint32Array, from: number, to: number): Buffer {
  const out = Buffer.allocUnsafe(blockSize(ids, from, to));
  encodeBlockInto(out, 0, ids, from, to);
  return out;
}

/**
 * Level-0 group value: the blocks of up to 256 trigrams that share their first two bytes, for
 * one write batch. n (u16 LE) ‖ the n third bytes, ascending ‖ n block ends (u32 LE, relative
 * to the start of the blocks) ‖ the n blocks.
 */
export function encodeGroup(trigrams: Uint32Array, ends: Uint32Array, ids: Uint32Array, first: number, last: number): Buffer {
  const out = Buffer.allocUnsafe(groupBytes(ends, ids, first, last));
  encodeGroupInto(out, trigrams, ends, ids, first, last);
  return out;
}

/** Bytes of the group value of trigrams[first..last) (encodeGroup). */
export function groupBytes(ends: Uint32Array, ids: Uint32Array, first: number, last: number): number {
  let size = groupData(last - first);
  for (let k = first; k < last; k++) size += blockSize(ids, k === 0 ? 0 : ends[k - 1], ends[k]);
  return size;
}

/** Writes the group value of trigrams[first..last) at the start of `out`; returns its length. */
export function encodeGroupInto(out: Buffer, trigrams: Uint32Array, ends: Uint32Array, ids: Uint32Array, first: number, last: number): number {
  const n = last - first;
  const data = groupData(n);
  out.writeUInt16LE(n, 0);
  let pos = data;
  for (let k = first; k < last; k++) {
    out[2 + (k - first)] = trigrams[k] & 0xff;
    pos = encodeBlockInto(out, pos, ids, k === 0 ? 0 : ends[k - 1], ends[k]);
    out.writeUInt32LE(pos - data, 2 + n + (k - first) * 4);
  }
  return pos;
}

/** The block of `gram` (the group's entry of its third byte) inside a group value, or undefined. */
export function findInGroup(group: Buffer, gram: number): Buffer | undefined {
  const low = gram & 0xff;
  const n = groupSize(group);
  let lo = 0;
  let hi = n;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (groupLow(group, mid) < low) lo = mid + 1;
    else hi = mid;
  }
  if (lo === n || groupLow(group, lo) !== low) return undefined;
  const data = groupData(n);
  const start = lo === 0 ? 0 : groupEnd(group, n, lo - 1);
  return group.subarray(data + start, data + groupEnd(group, n, lo));
}

/** The number of trigrams in a group value. */
export function groupSize(group: Uint8Array): number {
  return group[0] | (group[1] << 8);
}

/** The third byte of the i-th trigram of a group value (the group's key names the first two). */
export function groupLow(group: Uint8Array, i: number): number {
  return group[2 + i];
}

/** Where the blocks of a group value with `n` trigrams begin. */
export function groupData(n: number): number {
  return 2 + n * 5;
}

/** The end of the i-th block of a group value with `n` trigrams, relative to its data. */
export function groupEnd(group: Uint8Array, n: number, i: number): number {
  const at = 2 + n + i * 4;
  return (group[at] | (group[at + 1] << 8) | (group[at + 2] << 16) | (group[at + 3] << 24)) >>> 0;
}

/**
 * Returns a new block holding `block`'s ids followed by `ids[from..to)`, which must all be
 * greater than the block's last id. The old varints are copied, not decoded.
 */
export function appendToBlock(block: Uint8Array, ids: Uint32Array, from: number, to: number): Buffer {
  const out = Buffer.allocUnsafe(block.byteLength + appendedBytes(block, ids, from, to));
  appendToBlockInto(out, block, ids, from, to);
  return out;
}

/** Bytes that appending `ids[from..to)` adds to `block` (appendToBlock). */
export function appendedBytes(block: Uint8Array, ids: Uint32Array, from: number, to: number): number {
  let extra = 0;
  for (let i = from, prev = blockLastId(block); i < to; i++) {
    extra += varintSize(ids[i] - prev);
    prev = ids[i];
  }
  return extra;
}

/** Writes appendToBlock's result at the start of `out` (which may not overlap `block`); returns its length. */
export function appendToBlockInto(out: Buffer, block: Uint8Array, ids: Uint32Array, from: number, to: number): number {
  const count = blockCount(block);
  let last = blockLastId(block);
  out.set(block, 0);
  let pos = block.byteLength;
  for (let i = from; i < to; i++) {
    pos = writeVarint(out, pos, ids[i] - last);
    last = ids[i];
  }
  out.writeUInt32LE(count + (to - from), 0);
  out.writeUInt32LE(last, 4);
  return pos;
}

/**
 * A posting list as stored: its blocks in id order (the level-1 blocks, then its block in each
 * live level-0 segment), so the ids of block i all precede those of block i + 1.
 */
export interface PostingBlocks {
  /** Number of ids (live or dead) in all blocks, from their headers. */
  count: number;
  /** The blocks, none empty. */
  blocks: Buffer[];
}

/** Every id of a posting list, ascending. */
export function decodePostings(list: PostingBlocks): Uint32Array {
  const ids = new Uint32Array(list.count);
  let pos = 0;
  for (const block of list.blocks) pos = decodeBlock(block, ids, pos);
  return ids;
}

/** The number of ids a block holds, read from its header. */
export function blockCount(block: Uint8Array): number {
  return blockCountAt(block, 0);
}

/** The number of ids of the block stored at `buf[pos]`. */
export function blockCountAt(buf: Uint8Array, pos: number): number {
  return (buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16) | (buf[pos + 3] << 24)) >>> 0;
}

/** Decodes the ids of `block` into `out` starting at `outPos`; returns the position after them. */
export function decodeBlock(block: Uint8Array, out: Uint32Array, outPos: number): number {
  return decodeBlockAt(block, 0, block.byteLength, out, outPos);
}

/** Like decodeBlock, for the block stored at buf[start, end). */
export function decodeBlockAt(buf: Uint8Array, start: number, end: number, out: Uint32Array, outPos: number): number {
  let pos = start + BLOCK_HEADER_BYTES;
  let id = 0;
  const block = buf;
  while (pos < end) {
    let b = block[pos++];
    let value = b & 0x7f;
    let shift = 7;
    while (b & 0x80) {
      b = block[pos++];
      value |= (b & 0x7f) << shift;
      shift += 7;
    }
    id += value >>> 0;
    out[outPos++] = id;
  }
  return outPos;
}

/** The last (greatest) id of a block, read from its header. */
export function blockLastId(block: Uint8Array): number {
  return (block[4] | (block[5] << 8) | (block[6] << 16) | (block[7] << 24)) >>> 0;
}

/** The first (smallest) id of a non-empty block: its first varint. */
export function blockFirstId(block: Uint8Array): number {
  let pos = BLOCK_HEADER_BYTES;
  let b = block[pos++];
  let value = b & 0x7f;
  let shift = 7;
  while (b & 0x80) {
    b = block[pos++];
    value |= (b & 0x7f) << shift;
    shift += 7;
  }
  return value >>> 0;
}

/**
 * Decodes `block` and writes to `out` from `outPos` the ids that are also in `sorted`
 * (ascending), looking from index `from` on; returns the position after them. One pass over
 * the varints, no decoded copy of the block: it stops once `sorted` is exhausted.
 */
export function intersectBlock(block: Uint8Array, sorted: Uint32Array, from: number, out: Uint32Array, outPos: number): number {
  const end = block.byteLength;
  const n = sorted.length;
  if (from >= n) return outPos;
  let c = from;
  let want = sorted[c];
  let pos = BLOCK_HEADER_BYTES;
  let id = 0;
  while (pos < end) {
    let b = block[pos++];
    let value = b & 0x7f;
    let shift = 7;
    while (b & 0x80) {
      b = block[pos++];
      value |= (b & 0x7f) << shift;
      shift += 7;
    }
    id += value >>> 0;
    if (id < want) continue;
    while (want < id) {
      if (++c === n) return outPos;
      want = sorted[c];
    }
    if (want === id) {
      out[outPos++] = id;
      if (++c === n) return outPos;
      want = sorted[c];
    }
  }
  return outPos;
}
