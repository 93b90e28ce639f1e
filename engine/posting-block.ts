/**
 * Postings blocks: the value format of the shard's `postings` database (see the format
 * description in `shard-reader.ts`).
 *
 *   count (u32 LE) ‖ lastId (u32 LE) ‖ `count` LEB128 varints
 *
 * The first varint is the block's first doc id, every next one the (positive) gap to the
 * following id, so a block lists strictly ascending ids. The header lets the writer append to
 * a block without decoding it and lets the reader size its output before decoding.
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

/**
 * Encodes `ids[from..to)` (strictly ascending) as a complete block: header, then the first id
 * and the gaps.
 */
export function encodeBlock(ids: Uint32Array, from: number, to: number): Buffer {
  let size = BLOCK_HEADER_BYTES + varintSize(ids[from]);
  for (let i = from + 1; i < to; i++) size += varintSize(ids[i] - ids[i - 1]);
  const out = Buffer.allocUnsafe(size);
  out.writeUInt32LE(to - from, 0);
  out.writeUInt32LE(ids[to - 1], 4);
  let pos = writeVarint(out, BLOCK_HEADER_BYTES, ids[from]);
  for (let i = from + 1; i < to; i++) pos = writeVarint(out, pos, ids[i] - ids[i - 1]);
  return out;
}

/**
 * Returns a new block holding `block`'s ids followed by `ids[from..to)`, which must all be
 * greater than the block's last id. The old varints are copied, not decoded.
 */
export function appendToBlock(block: Uint8Array, ids: Uint32Array, from: number, to: number): Buffer {
  const view = Buffer.from(block.buffer, block.byteOffset, block.byteLength);
  const count = view.readUInt32LE(0);
  let last = view.readUInt32LE(4);
  let extra = 0;
  for (let i = from, prev = last; i < to; i++) {
    extra += varintSize(ids[i] - prev);
    prev = ids[i];
  }
  const out = Buffer.allocUnsafe(block.byteLength + extra);
  out.set(block, 0);
  let pos = block.byteLength;
  for (let i = from; i < to; i++) {
    pos = writeVarint(out, pos, ids[i] - last);
    last = ids[i];
  }
  out.writeUInt32LE(count + (to - from), 0);
  out.writeUInt32LE(last, 4);
  return out;
}

/** The number of ids a block holds, read from its header. */
export function blockCount(block: Uint8Array): number {
  return (block[0] | (block[1] << 8) | (block[2] << 16) | (block[3] << 24)) >>> 0;
}

/** Decodes the ids of `block` into `out` starting at `outPos`; returns the position after them. */
export function decodeBlock(block: Uint8Array, out: Uint32Array, outPos: number): number {
  const end = block.byteLength;
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
    out[outPos++] = id;
  }
  return outPos;
}
