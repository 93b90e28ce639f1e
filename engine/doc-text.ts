/**
 * The value format of the shard's `text` database (see `shard-format.ts`): a document's UTF-8
 * text, zero padding to a multiple of 4 bytes, then the byte offset where each line starts,
 * as u16 LE when the text is shorter than 64 KiB, else u32 LE.
 *
 * Lines end at `\n` only, as ripgrep counts them: a `\r` before the `\n` belongs to the line,
 * a last line without `\n` is a line, an empty text has no lines, and `a\n` has one line.
 */

/** Line start offsets of one document, indexable by 0-based line number. */
export type LineStarts = Uint16Array | Uint32Array;

const NEWLINE = 0x0a;

/** The number of lines of `text` (see the module comment for what a line is). */
export function countLines(text: Uint8Array): number {
  if (text.byteLength === 0) return 0;
  const buf = Buffer.from(text.buffer, text.byteOffset, text.byteLength);
  let lines = 0;
  let pos = buf.indexOf(NEWLINE, 0);
  while (pos !== -1) {
    lines++;
    pos = buf.indexOf(NEWLINE, pos + 1);
  }
  return buf[buf.byteLength - 1] === NEWLINE ? lines : lines + 1;
}

/** Where the line starts begin inside a stored value whose text is `textBytes` long. */
export function startsOffset(textBytes: number): number {
  return (textBytes + 3) & ~3;
}

/** Bytes per line start for a text of `textBytes`. */
export function startWidth(textBytes: number): 2 | 4 {
  return textBytes < 0x10000 ? 2 : 4;
}

/** Builds the stored value for `text`; `lines` must be `countLines(text)`. */
export function encodeDocValue(text: Uint8Array, lines: number): Buffer {
  const value = Buffer.allocUnsafe(docValueBytes(text.byteLength, lines));
  encodeDocValueInto(value, text, lines);
  return value;
}

/** Bytes of the stored value of a text of `textBytes` with `lines` lines. */
export function docValueBytes(textBytes: number, lines: number): number {
  return startsOffset(textBytes) + lines * startWidth(textBytes);
}

/** Writes the stored value for `text` at the start of `value` (docValueBytes long at least); returns its length. */
export function encodeDocValueInto(value: Buffer, text: Uint8Array, lines: number): number {
  const textBytes = text.byteLength;
  const offset = startsOffset(textBytes);
  const width = startWidth(textBytes);
  value.set(text, 0);
  value.fill(0, textBytes, offset);
  const buf = Buffer.from(text.buffer, text.byteOffset, textBytes);
  let line = 0;
  let start = 0;
  while (line < lines) {
    if (width === 2) value.writeUInt16LE(start, offset + line * 2);
    else value.writeUInt32LE(start, offset + line * 4);
    line++;
    const nl = buf.indexOf(NEWLINE, start);
    start = nl + 1;
  }
  return offset + lines * width;
}

/**
 * The line starts inside a stored `value` (a typed-array view when the bytes are aligned,
 * else a copy). Like the value, a view is only valid until the next shard read.
 */
export function lineStartsOf(value: Uint8Array, textBytes: number, lines: number): LineStarts {
  const offset = startsOffset(textBytes);
  const width = startWidth(textBytes);
  const byteOffset = value.byteOffset + offset;
  if (byteOffset % width === 0) {
    return width === 2 ? new Uint16Array(value.buffer, byteOffset, lines) : new Uint32Array(value.buffer, byteOffset, lines);
  }
  const copy = width === 2 ? new Uint16Array(lines) : new Uint32Array(lines);
  new Uint8Array(copy.buffer).set(value.subarray(offset, offset + lines * width));
  return copy;
}

/** The 0-based line containing byte `pos` (a `\n` belongs to the line it ends). */
export function lineIndexAt(starts: LineStarts, pos: number): number {
  return lineBetween(starts, pos, 0, starts.length - 1);
}

/**
 * `lineIndexAt` for a scan that moves forward: `from` is a line known to start at or before
 * `pos`. It steps out from there in strides that double, then halves, so a hit on the next line
 * costs one comparison and one far on costs the logarithm of the distance. A `from` past `pos`
 * falls back to the whole search.
 */
export function lineIndexFrom(starts: LineStarts, pos: number, from: number): number {
  const count = starts.length;
  if (from < 0 || from >= count || starts[from] > pos) return lineIndexAt(starts, pos);
  let lo = from;
  let stride = 1;
  while (lo + stride < count && starts[lo + stride] <= pos) {
    lo += stride;
    stride <<= 1;
  }
  return lineBetween(starts, pos, lo, Math.min(lo + stride, count) - 1);
}

/** The line containing `pos` among lines `lo` to `hi`, by halving (line `lo` starts at or before `pos`). */
function lineBetween(starts: LineStarts, pos: number, lo: number, hi: number): number {
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (starts[mid] <= pos) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** The end (exclusive, before its `\n`) of 0-based line `line` of a text of `textBytes`. */
export function lineEndOf(text: Uint8Array, starts: LineStarts, line: number): number {
  if (line + 1 < starts.length) return starts[line + 1] - 1;
  const end = text.byteLength;
  return end > 0 && text[end - 1] === NEWLINE ? end - 1 : end;
}
