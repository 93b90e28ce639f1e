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
 * `RunPrinter` prints many runs of one document at once (`grep` content without context): the
 * text they cover is copied in once, and one call writes as many lines as an output chunk holds.
 *
 * Each thread instantiates the module at its first call; its memory grows to the largest run
 * printed (a caller keeps a run near half an output chunk, so about 100 KiB) or, for runs, to
 * the text a printer holds and a chunk (about 320 KiB).
 */

import type { LineStarts } from './doc-text.js';

/** engine/line-printer.wat compiled by scripts/line-printer-wasm.ts (test/line-printer.test.ts checks it). */
const LINE_PRINTER_WASM =
  'AGFzbQEAAAABPgVgDH9/f39/f39/f39/fwF/YBJ/f39/f39/f39/f39/f39/f38Bf2AGf39/f39/AX9gA39/fwBgA39/fwF/AwYFAAECAwQFAwEAAQcZAwZtZW1vcnkCAAVsaW5lcwAABHJ1bnMAAQqZBQVtAQN/AkADQCAMIANPDQEgCyAHIAggBiAJIAoQAiELIAEgAiAMEAQhDSAMQQFqIQwgDCADSQR/IAEgAiAMEAQFIAULIQ4gCyAAIA0gBGtqIA4gDWsQAyALIA4gDWtqIQsgBkEBaiEGDAALCyALC5sCAQd/IAxBAmogDUEKIA1BCkobaiEYAkADQCAJIAhPDQEgByAJQQN0aigCACESIAcgCUEDdEEEamooAgAhEyAKIBJIBEAgEiEKCwJAA0AgCiATSg0BIAEgAiAKIANrEAQhFCAKIARIBH8gASACIApBAWogA2sQBAUgBgshFSAVIBRrIRYgFiAPSwRAQQEhFwwECyAQIBhqIBZqIBFLBEBBAiEXDAQLIBAgCyAMIApBAWogDSAOEAIhECAQIAAgFCAFa2ogFhADIBAgFmohECAWRSAQQQFrLQAAQQpHcgRAIBBBCjoAACAQQQFqIRALIApBAWohCgwACwsgCUEBaiEJDAALC0EAIAk2AgBBBCAKNgIAQQggFzYCACAQC7kBAQR/IAAgASACEAMgACACaiEAIARBAE4EQEEBIQZBCiEHAkADQCADIAdJDQEgBkEBaiEGIAZBCkYNASAHQQpsIQcMAAsLIAQgBmshCQJAA0AgCUEATA0BIABBIDoAACAAQQFqIQAgCUEBayEJDAALCyADIQkgACAGaiEIA0AgCEEBayEIIAhBMCAJQQpwajoAACAJQQpuIQkgCCAASw0ACyAAIAZqIQAgACAFOgAAIABBAWohAAsgAAsyAQF/IAAgAmohAwJAA0AgACADTw0BIAAgASkDADcDACAAQQhqIQAgAUEIaiEBDAALCwseACABBH8gACACQQJ0aigCAAUgACACQQF0ai8BAAsL';

const PAGE_BYTES = 65536;
/** The module's copies may read and write this far past their ends (line-printer.wat, `$copy`). */
const SLACK_BYTES = 8;
/**
 * The fewest lines printLines hands to the module. Printing every line of 5,000 documents in
 * runs of at most this many lines, in JavaScript and in the module: 87 and 103 ns a line in runs
 * of 4, 87 and 79 in runs of 8, 73 and 50 in whole runs (half a chunk).
 */
export const WASM_MIN_LINES = 6;

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
  runs: (
    text: number,
    starts: number,
    wide: number,
    l0: number,
    lmax: number,
    base: number,
    to: number,
    runs: number,
    nruns: number,
    run: number,
    line: number,
    prefix: number,
    plen: number,
    width: number,
    sep: number,
    maxline: number,
    out: number,
    limit: number,
  ) => number;
  bytes: Uint8Array;
}

let printer: Printer | null = null;

function instantiate(): Printer {
  const exports = new wasm.Instance(new wasm.Module(Buffer.from(LINE_PRINTER_WASM, 'base64'))).exports as Pick<Printer, 'memory' | 'lines' | 'runs'>;
  return { memory: exports.memory, lines: exports.lines, runs: exports.runs, bytes: new Uint8Array(exports.memory.buffer) };
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

/** Why `RunPrinter.print` stopped: every line written, a line longer than the limit, or no room for the next. */
export const RUNS_DONE = 0;
export const RUNS_LONG_LINE = 1;
export const RUNS_FULL = 2;

/** Where printing runs goes on: a run (the index of its pair) and a line (0-based; any line before the run's first means its first). */
export interface RunCursor {
  run: number;
  line: number;
}

/** Address in the module's memory where `runs` leaves where and why it stopped (three i32). */
const STATE_AT = 0;

/**
 * Runs of one document's lines, from a cursor on, held in the module's memory and printed into
 * one buffer after another without copying the text again: a dense grep's matching lines come
 * in runs of a few lines between empty ones, and each run printed on its own cost more in calls
 * and copies than its lines (docs/benchmarks.md). It holds the runs whose lines lie within
 * `spanBytes` of text from the cursor's line (at least that line), so that a large document is
 * copied in about once over successive printers, whatever output is taken between them.
 */
export class RunPrinter {
  private readonly p: Printer;
  private readonly startsAt: number;
  private readonly wide: number;
  private readonly l0: number;
  private readonly lmax: number;
  private readonly base: number;
  private readonly to: number;
  private readonly textAt: number;
  private readonly prefixAt: number;
  private readonly plen: number;
  private readonly runsAt: number;
  private readonly fromRun: number;
  private readonly nruns: number;
  /** Whether the last run held ends before its last line (at `lmax`). */
  private readonly clipped: boolean;
  private readonly outAt: number;
  /** Where the last `print` ended in its buffer. */
  end = 0;

  /**
   * Copies in, from `cursor` on, the runs of `runs` (pairs of first and last line, 0-based, in
   * ascending order) that `spanBytes` of text hold, their lines' starts and `prefix`, with room
   * for `outBytes` of output.
   */
  constructor(text: Uint8Array, starts: LineStarts, runs: readonly number[], cursor: RunCursor, prefix: Uint8Array, outBytes: number, spanBytes: number) {
    const fromRun = cursor.run;
    const l0 = Math.max(runs[2 * fromRun], cursor.line);
    const base = starts[l0];
    const endOf = (line: number): number => (line + 1 < starts.length ? starts[line + 1] : text.length);
    // Whole runs while they fit, then the lines of the next one that fit (at least line l0).
    const count = runs.length / 2;
    let toRun = fromRun;
    let lmax = l0;
    while (toRun < count && endOf(runs[2 * toRun + 1]) - base <= spanBytes) lmax = Math.max(lmax, runs[2 * toRun++ + 1]);
    let clipped = false;
    if (toRun < count) {
      let line = toRun === fromRun ? l0 : Math.max(runs[2 * toRun], lmax + 1);
      if (toRun === fromRun || endOf(line) - base <= spanBytes) {
        while (line < runs[2 * toRun + 1] && endOf(line + 1) - base <= spanBytes) line++;
        lmax = Math.max(lmax, line);
        toRun++;
        clipped = true;
      }
    }
    this.clipped = clipped;
    const width8 = starts.BYTES_PER_ELEMENT;
    this.startsAt = STATE_AT + 16;
    this.prefixAt = this.startsAt + (lmax - l0 + 1) * width8;
    this.textAt = this.prefixAt + prefix.length;
    this.base = base;
    this.to = endOf(lmax);
    this.runsAt = (this.textAt + (this.to - base) + 3) & ~3;
    this.nruns = toRun - fromRun;
    this.outAt = this.runsAt + this.nruns * 8;
    this.p = printerOf(this.outAt + outBytes + SLACK_BYTES);
    const memory = this.p.bytes;
    memory.set(new Uint8Array(starts.buffer, starts.byteOffset + l0 * width8, (lmax - l0 + 1) * width8), this.startsAt);
    memory.set(prefix, this.prefixAt);
    memory.set(new Uint8Array(text.buffer, text.byteOffset + base, this.to - base), this.textAt);
    const pairs = new Int32Array(this.p.memory.buffer, this.runsAt, this.nruns * 2);
    for (let i = 0; i < pairs.length; i++) pairs[i] = runs[2 * fromRun + i];
    if (this.clipped) pairs[pairs.length - 1] = lmax;
    this.wide = width8 === 4 ? 1 : 0;
    this.l0 = l0;
    this.lmax = lmax;
    this.plen = prefix.length;
    this.fromRun = fromRun;
  }

  /**
   * Writes the lines held from `cursor` on into `buf` from `at`, while they fit before `limit`,
   * each as `printLines` writes it (with a newline after a last line that has none), none twice
   * where runs overlap; a line of more than `maxLine` bytes is not written. Moves `cursor` to
   * where it stopped, sets `end`, and returns why: RUNS_DONE once every line held is written
   * (the cursor is then past them: at the next run, or in a clipped one), RUNS_LONG_LINE,
   * RUNS_FULL. A line takes at most the prefix, max(`width`, 10) + 2 bytes and its own.
   */
  print(buf: Uint8Array, at: number, limit: number, cursor: RunCursor, width: number, sep: number, maxLine: number): number {
    const p = this.p;
    const outEnd = p.runs(
      this.textAt,
      this.startsAt,
      this.wide,
      this.l0,
      this.lmax,
      this.base,
      this.to,
      this.runsAt,
      this.nruns,
      cursor.run - this.fromRun,
      cursor.line,
      this.prefixAt,
      this.plen,
      width,
      sep,
      maxLine,
      this.outAt,
      this.outAt + (limit - at),
    );
    const state = new Int32Array(p.memory.buffer, STATE_AT, 3);
    const why = state[2];
    cursor.run = state[0] + this.fromRun;
    cursor.line = state[1];
    // The clipped run goes on in the next printer, from the line after the last one held.
    if (why === RUNS_DONE && this.clipped) cursor.run--;
    buf.set(p.bytes.subarray(this.outAt, outEnd), at);
    this.end = at + outEnd - this.outAt;
    return why;
  }
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
