/**
 * Pieces shared by the four read tools: the chunked output buffer, line truncation, path
 * ordering and request path checks.
 *
 * A tool is a synchronous generator that yields UTF-8 chunks of at most CHUNK_BYTES (never one
 * per line) and returns a ToolSummary. The caller pulls chunks, may stop early (it must then
 * call `return()` on the generator so the snapshot is released), and may receive EMPTY
 * heartbeat chunks during long scans: they carry no text and only give it a point to check
 * for cancellation. A chunk is the caller's once yielded: the tool never writes to it again.
 */

import { invalidParameter } from '../core/errors.js';
import { checkDirPath, checkFilePath } from '../core/paths.js';
import type { LineStarts } from './doc-text.js';
import { digitsOf, printLines, RUNS_DONE, RUNS_LONG_LINE, type RunCursor, RunPrinter } from './line-printer.js';

/** What a tool reports besides its text. */
export interface ToolSummary {
  /** Entries (ls), files (find, grep files_with_matches/count), lines (cat) or matching lines (grep content) reported. */
  resultCount: number;
  /** grep: how much it read (for the metrics). */
  grep?: GrepStats;
}

/** How much a grep read: candidate files (after the filters) and the text bytes it verified with the regex. */
export interface GrepStats {
  candidates: number;
  verifiedBytes: number;
}

/** Target size of one yielded chunk. */
export const CHUNK_BYTES = 64 * 1024;

/**
 * Lines that `ls` and `find` join into one string per write: a write per short line costs
 * about 2 ns a character, one of a joined string half as much.
 * Fit with looped `ls` and `find` calls (docs/benchmarks.md, "Engine level").
 */
export const LINES_PER_WRITE = 100;

/** First size of an output buffer (it grows to CHUNK_BYTES as needed). */
const INITIAL_BYTES = 4 * 1024;

const EMPTY = Buffer.alloc(0);

/**
 * Output buffers up to SMALL_BYTES are cut from a block of SLAB_BYTES shared by the thread's
 * calls, as Node's `Buffer.allocUnsafe` cuts from its 8 KiB pool: most answers are a few KiB,
 * and a memory block of their own each (or a new 8 KiB pool every second `cat` of 100 lines)
 * cost the HTTP thread more than the copy of their text (docs/benchmarks.md, "Read tools over
 * HTTP"). A block is never reused: it is freed once no answer cut from it is still held.
 */
const SLAB_BYTES = 64 * 1024;
const SMALL_BYTES = 16 * 1024;
let slab: Buffer = EMPTY;
let slabUsed = 0;
/** The ArrayBuffers of the shared blocks: a chunk cut from one shares its memory (`sharesMemory`). */
const slabs = new WeakSet<ArrayBufferLike>();

/** An uninitialised buffer of `bytes`, from the shared block when it is small. */
function outputBuffer(bytes: number): Buffer {
  if (bytes > SMALL_BYTES) return Buffer.allocUnsafe(bytes);
  if (slabUsed + bytes > slab.length) {
    slab = Buffer.allocUnsafeSlow(SLAB_BYTES);
    slabs.add(slab.buffer);
    slabUsed = 0;
  }
  const buf = slab.subarray(slabUsed, slabUsed + bytes);
  slabUsed += (bytes + 7) & ~7; // 8-byte aligned, as Node's pool
  return buf;
}

/**
 * Whether a yielded chunk shares its memory with other output (it was cut from a shared block);
 * any other chunk's ArrayBuffer is the chunk's alone, and the tool never writes to it again, so
 * it may be transferred to another thread as it is.
 */
export function sharesMemory(chunk: Uint8Array): boolean {
  return slabs.has(chunk.buffer);
}

/**
 * Full chunks handed back by a caller that copied them elsewhere (a read thread's ring):
 * the next chunk of any output on this thread is one of these rather than a new ArrayBuffer.
 * A dense grep writes hundreds of MB, and a buffer of its own per 64 KiB chunk kept the
 * collector and V8's helper threads busy.
 */
const spareChunks: Buffer[] = [];
const SPARE_CHUNKS = 4;

/**
 * Gives back a yielded chunk whose bytes the caller has copied and no longer reads: its memory
 * becomes a later chunk's. Only a whole CHUNK_BYTES buffer of its own is kept.
 */
export function recycleChunk(chunk: Uint8Array): void {
  const memory = chunk.buffer;
  if (chunk.byteOffset !== 0 || memory.byteLength !== CHUNK_BYTES || slabs.has(memory) || spareChunks.length >= SPARE_CHUNKS) return;
  spareChunks.push(Buffer.from(memory as ArrayBuffer, 0, CHUNK_BYTES));
}

/** Strings up to this many characters are tried as ASCII before the UTF-8 encoder. */
const SHORT_ASCII = 128;

/** A chunk without text, yielded during long scans as a cancellation point. */
export const HEARTBEAT: Buffer = Buffer.alloc(0);

/** Lines longer than this many characters (code points) are cut. */
export const MAX_LINE_CHARS = 2000;

/**
 * Accumulates output text into CHUNK_BYTES buffers. `write` returns true when a full chunk is
 * waiting; the generator then yields `take()`.
 */
export class ChunkedOutput {
  // Allocated at the first write, at least INITIAL_BYTES, and grown to CHUNK_BYTES: most
  // answers are a few KiB, and a 64 KiB buffer per call is garbage the collector then has to
  // chase. A first write larger than INITIAL_BYTES (`cat`'s lines) gets its size at once.
  private buf: Buffer = EMPTY;
  private used = 0;
  private readonly full: Buffer[] = [];
  /** Bytes written so far (all chunks). */
  total = 0;

  /**
   * Appends `text`, then `\n` if `newline` (which spares the caller a concatenated string);
   * true when a chunk is ready to be taken.
   */
  write(text: string, newline = false): boolean {
    const extra = newline ? 1 : 0;
    // Most writes fit; measure exactly only when they might not.
    if (this.used + text.length * 3 + extra > this.buf.length) this.reserve(Buffer.byteLength(text) + extra);
    let written = text.length <= SHORT_ASCII ? writeAscii(this.buf, this.used, text) : -1;
    if (written < 0) written = this.buf.write(text, this.used, 'utf8');
    if (newline) this.buf[this.used + written++] = 0x0a;
    this.used += written;
    this.total += written;
    return this.full.length > 0;
  }

  /**
   * Appends lines `first` to `first + count - 1` of `text` (0-based; `starts` holds each line's
   * first byte, and `text` ends the last line), each as `prefix`, then (when `width` ≥ 0) its
   * 1-based number left-padded with spaces to `width` and the byte `sep`, then the line and
   * `\n`, written by engine/line-printer.ts. The caller keeps a call near half a chunk, so that
   * no chunk outgrows CHUNK_BYTES. True when a chunk is ready.
   */
  writeLines(text: Uint8Array, starts: LineStarts, first: number, count: number, prefix: Uint8Array, width: number, sep: number): boolean {
    const from = starts[first];
    const next = first + count;
    const to = next < starts.length ? starts[next] : text.length;
    const addNewline = to === from || text[to - 1] !== 0x0a ? 1 : 0;
    let heads = prefix.length * count;
    if (width >= 0) for (let n = first + 1; n <= next; n++) heads += Math.max(width, digitsOf(n)) + 1;
    const bytes = heads + (to - from) + addNewline;
    this.reserve(bytes);
    const buf = this.buf;
    let at = printLines(buf, this.used, text, starts, first, count, to, prefix, width, sep, bytes - addNewline);
    if (addNewline === 1) buf[at++] = 0x0a;
    this.total += at - this.used;
    this.used = at;
    return this.full.length > 0;
  }

  /**
   * Appends the lines of a document's `runs` (pairs of first and last line, 0-based, ascending)
   * from `cursor` on, each as `writeLines` writes it, in as few calls as chunks: true once all
   * are written, false when `maxWaiting` full chunks wait first (the caller takes them and calls
   * again with the same cursor, `text` and `starts` possibly re-read). A line of more than
   * MAX_LINE_CHARS bytes, which may need a cut, goes to `longLine` to be written.
   */
  writeRuns(
    text: Uint8Array,
    starts: LineStarts,
    runs: readonly number[],
    cursor: RunCursor,
    prefix: Uint8Array,
    width: number,
    sep: number,
    maxWaiting: number,
    longLine: (line: number) => void,
  ): boolean {
    let printer: RunPrinter | null = null;
    while (this.full.length < maxWaiting) {
      if (cursor.run === runs.length / 2) return true;
      if (this.buf.length < CHUNK_BYTES) this.reserve(CHUNK_BYTES - this.used);
      // The text of about the output that may be written before the caller takes it.
      printer ??= new RunPrinter(text, starts, runs, cursor, prefix, CHUNK_BYTES, maxWaiting * CHUNK_BYTES);
      const why = printer.print(this.buf, this.used, Math.min(this.buf.length, this.used + CHUNK_BYTES), cursor, width, sep, MAX_LINE_CHARS);
      this.total += printer.end - this.used;
      this.used = printer.end;
      if (why === RUNS_DONE) printer = null;
      else if (why === RUNS_LONG_LINE) {
        longLine(cursor.line);
        if (cursor.line++ === runs[2 * cursor.run + 1]) cursor.run++;
      } else this.nextChunk(CHUNK_BYTES);
    }
    return false;
  }

  /** Makes room for `bytes` more: grows the buffer up to CHUNK_BYTES, else starts a new chunk. */
  private reserve(bytes: number): void {
    if (this.used + bytes <= this.buf.length) return;
    if (this.used + bytes <= CHUNK_BYTES) {
      const grown = outputBuffer(Math.min(CHUNK_BYTES, Math.max(this.buf.length * 2, this.used + bytes, INITIAL_BYTES)));
      this.buf.copy(grown, 0, 0, this.used);
      this.buf = grown;
      return;
    }
    this.nextChunk(bytes);
  }

  /** Sets the text written so far aside as a full chunk and starts one of room for `bytes` (a spare one when it fits). */
  private nextChunk(bytes: number): void {
    if (this.used > 0) this.full.push(this.buf.subarray(0, this.used));
    this.buf = bytes <= CHUNK_BYTES ? (spareChunks.pop() ?? Buffer.allocUnsafe(CHUNK_BYTES)) : Buffer.allocUnsafe(bytes);
    this.used = 0;
  }

  /** True when a full chunk is waiting. */
  get ready(): boolean {
    return this.full.length > 0;
  }

  /** How many full chunks are waiting. */
  get waiting(): number {
    return this.full.length;
  }

  /** The oldest full chunk (call only when `ready`). */
  take(): Buffer {
    return this.full.shift()!;
  }

  /** The remaining text as a last chunk, or null when there is none. */
  flush(): Buffer | null {
    if (this.used === 0) return null;
    const last = this.buf.subarray(0, this.used);
    this.buf = EMPTY; // most outputs end here: allocate again only if more is written
    this.used = 0;
    return last;
  }

  /** Yields every full chunk, then (if `end`) the rest. */
  *drain(end = false): Generator<Buffer> {
    while (this.full.length > 0) yield this.full.shift()!;
    if (end) {
      const last = this.flush();
      if (last !== null) yield last;
    }
  }
}

/**
 * Copies `text` to `buf` at `at` when it is all ASCII (a short line such as a path or a listing
 * entry: cheaper in a loop than through the encoder); -1, with nothing meaningful written, otherwise.
 */
function writeAscii(buf: Buffer, at: number, text: string): number {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0x80) return -1;
    buf[at + i] = c;
  }
  return text.length;
}

/**
 * Decodes text[start, end) as one output line, cutting it after MAX_LINE_CHARS code points
 * with a marker that says how long it was. Only the bytes that are sent are decoded.
 */
export function formatLine(text: Buffer, start: number, end: number): string {
  if (end - start <= MAX_LINE_CHARS) return text.toString('utf8', start, end);
  // Count code points (bytes that are not UTF-8 continuation bytes) and find the cut.
  let chars = 0;
  let cut = -1;
  for (let i = start; i < end; i++) {
    if ((text[i] & 0xc0) !== 0x80) {
      if (chars === MAX_LINE_CHARS) cut = i;
      chars++;
    }
  }
  if (cut < 0) return text.toString('utf8', start, end);
  return `${text.toString('utf8', start, cut)}… [line truncated: ${chars} characters]`;
}

/** Orders paths by code point (the shard's key order), not by UTF-16 unit. */
export function comparePaths(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    // Surrogates (0xD800-0xDFFF) encode code points above 0xFFFF: they sort after 0xE000-0xFFFF.
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys) return xs ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

/** The canonical file path of a request parameter; invalid → INVALID_PARAMETER naming `name`. */
export function requestFilePath(raw: string, name = 'path'): string {
  const check = checkFilePath(raw);
  if (!check.ok) throw invalidParameter(name, check.reason);
  return check.path;
}

/** The canonical directory (`/` or `/a/b`) of a request parameter; undefined means `/`. */
export function requestDirPath(raw: string | undefined, name = 'path'): string {
  const check = checkDirPath(raw);
  if (!check.ok) throw invalidParameter(name, check.reason);
  return check.path;
}

/** `path` relative to directory `dir` (`/` or `/a/b`), without a leading slash. */
export function relativeTo(dir: string, path: string): string {
  return dir === '/' ? path.slice(1) : path.slice(dir.length + 1);
}
