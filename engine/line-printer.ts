/**
 * Prints a run of a document's lines, each with a prefix and its number, in WebAssembly
 * (engine/line-printer.wat). `grep`'s content mode prints every matching line as `path:N:`
 * and the line, `cat` as `N\t` and the line: in JavaScript each line cost two native copies
 * (the prefix and the text) at about 17 ns a call whatever their length. Here the run's bytes
 * are copied into the module's memory once, the lines are written there with word copies, and
 * the output is copied out once: every line of 5,000 documents printed in runs of half a chunk
 * took 73 ns a line in JavaScript and 47-50 through the module (docs/benchmarks.md, "a run of
 * one class, and lines printed in WebAssembly").
 *
 * Each thread instantiates the module at its first call; its memory grows to the largest run
 * printed (a caller keeps a run near half an output chunk, so about 100 KiB).
 */

import type { LineStarts } from './doc-text.js';

/** engine/line-printer.wat compiled by scripts/line-printer-wasm.ts (test/line-printer.test.ts checks it). */
const LINE_PRINTER_WASM =
  'AGFzbQEAAAABHgNgDH9/f39/f39/f39/fwF/YAN/f38AYAN/f38BfwMEAwABAgUDAQABBxICBm1lbW9yeQIABWxpbmVzAAAK5QIDkAIBB38CQANAIAwgA08NASALIAcgCBABIAsgCGohCyAJQQBOBEBBASEPQQohEAJAA0AgBiAQSQ0BIA9BAWohDyAPQQpGDQEgEEEKbCEQDAALCyAJIA9rIRICQANAIBJBAEwNASALQSA6AAAgC0EBaiELIBJBAWshEgwACwsgBiESIAsgD2ohEQNAIBFBAWshESARQTAgEkEKcGo6AAAgEkEKbiESIBEgC0sNAAsgCyAPaiELIAsgCjoAACALQQFqIQsLIAEgAiAMEAIhDSAMQQFqIQwgDCADSQR/IAEgAiAMEAIFIAULIQ4gCyAAIA0gBGtqIA4gDWsQASALIA4gDWtqIQsgBkEBaiEGDAALCyALCzIBAX8gACACaiEDAkADQCAAIANPDQEgACABKQMANwMAIABBCGohACABQQhqIQEMAAsLCx4AIAEEfyAAIAJBAnRqKAIABSAAIAJBAXRqLwEACws=';

const PAGE_BYTES = 65536;
/** The module's copies may read and write this far past their ends (line-printer.wat, `$copy`). */
const SLACK_BYTES = 8;
/**
 * The fewest lines printLines hands to the module. Printing every line of 5,000 documents in
 * runs of at most this many lines, in JavaScript and in the module: 87 and 103 ns a line in runs
 * of 4, 87 and 79 in runs of 8, 73 and 50 in whole runs (half a chunk).
 */
const WASM_MIN_LINES = 6;

/** The parts of the WebAssembly API used here (TypeScript declares them only with the DOM library). */
interface WasmMemory {
  readonly buffer: ArrayBuffer;
  grow(pages: number): number;
}
interface WasmApi {
  Module: new (bytes: Uint8Array) => object;
  Instance: new (module: object) => { exports: Record<string, unknown> };
}
const wasm = (globalThis as unknown as { WebAssembly: WasmApi }).WebAssembly;

interface Printer {
  memory: WasmMemory;
  lines: (
    text: number,
    starts: number,
    wide: number,
    count: number,
    base: number,
    to: number,
    number: number,
    prefix: number,
    plen: number,
    width: number,
    sep: number,
    out: number,
  ) => number;
  bytes: Uint8Array;
}

let printer: Printer | null = null;

function instantiate(): Printer {
  const exports = new wasm.Instance(new wasm.Module(Buffer.from(LINE_PRINTER_WASM, 'base64'))).exports as Pick<Printer, 'memory' | 'lines'>;
  return { memory: exports.memory, lines: exports.lines, bytes: new Uint8Array(exports.memory.buffer) };
}

/** The printer, its memory at least `bytes` long. */
function printerOf(bytes: number): Printer {
  printer ??= instantiate();
  const p = printer;
  if (p.bytes.length < bytes) {
    p.memory.grow(Math.ceil((bytes - p.bytes.length) / PAGE_BYTES));
    p.bytes = new Uint8Array(p.memory.buffer);
  }
  return p;
}

/**
 * Writes lines `first` to `first + count - 1` of `text` (whose line starts are `starts`; the
 * last line ends at `to`) into `buf` at `at`, each as `prefix`, then (when `width` ≥ 0) its
 * 1-based number left-padded with spaces to `width` and the byte `sep`, then the line's bytes
 * as they are (a line's `\n` included). `bytes` is what that makes, which `buf` has room for.
 * Returns where the output ends in `buf`. Runs shorter than WASM_MIN_LINES are written here:
 * the module's four copies in and out cost more than it saves on a line or two.
 */
export function printLines(
  buf: Uint8Array,
  at: number,
  text: Uint8Array,
  starts: LineStarts,
  first: number,
  count: number,
  to: number,
  prefix: Uint8Array,
  width: number,
  sep: number,
  bytes: number,
): number {
  if (count < WASM_MIN_LINES) return printHere(buf, at, text, starts, first, count, to, prefix, width, sep, bytes);
  const from = starts[first];
  // The module's memory: the line starts as the document holds them (aligned), the prefix, the
  // text, the output. Views are made with `new`: a Buffer's `subarray` costs a Buffer.
  const width8 = starts.BYTES_PER_ELEMENT;
  const startsAt = 0;
  const prefixAt = count * width8;
  const textAt = prefixAt + prefix.length;
  const outAt = textAt + (to - from);
  const p = printerOf(outAt + bytes + SLACK_BYTES);
  const memory = p.bytes;
  memory.set(new Uint8Array(starts.buffer, starts.byteOffset + first * width8, count * width8), startsAt);
  memory.set(prefix, prefixAt);
  memory.set(new Uint8Array(text.buffer, text.byteOffset + from, to - from), textAt);
  const end = p.lines(textAt, startsAt, width8 === 4 ? 1 : 0, count, from, to, first + 1, prefixAt, prefix.length, width, sep, outAt);
  buf.set(memory.subarray(outAt, end), at);
  return at + end - outAt;
}

/**
 * printLines in JavaScript: the lines' bytes are copied in one piece and then moved apart, and
 * each prefix after the first is copied from the first within `buf` (a copy from another buffer
 * needs a view of it, which costs more than the bytes of a typical line).
 */
function printHere(
  buf: Uint8Array,
  at: number,
  text: Uint8Array,
  starts: LineStarts,
  first: number,
  count: number,
  to: number,
  prefix: Uint8Array,
  width: number,
  sep: number,
  bytes: number,
): number {
  const from = starts[first];
  const next = first + count;
  // Each line's text starts at or after where its output line does, so moving the lines left
  // in order never overwrites a line not yet moved.
  let src = at + bytes - (to - from);
  buf.set(text.subarray(from, to), src);
  const prefixAt = at;
  for (let line = first; line < next; line++) {
    if (prefix.length > 0) {
      if (line === first) buf.set(prefix, at);
      else buf.copyWithin(at, prefixAt, prefixAt + prefix.length);
      at += prefix.length;
    }
    if (width >= 0) {
      at = putNumber(buf, at, line + 1, width);
      buf[at++] = sep;
    }
    const length = (line + 1 < next ? starts[line + 1] : to) - starts[line];
    if (at !== src) buf.copyWithin(at, src, src + length); // the last line is in place
    at += length;
    src += length;
  }
  return at;
}

/** Writes `number`'s digits left-padded with spaces to `width` at `at`; returns the end. */
function putNumber(buf: Uint8Array, at: number, number: number, width: number): number {
  const digits = digitsOf(number);
  for (let pad = width - digits; pad > 0; pad--) buf[at++] = 0x20;
  for (let i = digits - 1, n = number; i >= 0; i--) {
    const rest = (n / 10) | 0; // a line number is below 2^31
    buf[at + i] = 0x30 + n - rest * 10;
    n = rest;
  }
  return at + digits;
}

/** Decimal digits of a non-negative integer, by comparison rather than division (it runs for every numbered line). */
export function digitsOf(n: number): number {
  let digits = 1;
  for (let bound = 10; n >= bound; bound *= 10) digits++;
  return digits;
}
