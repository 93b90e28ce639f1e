import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { countLines, encodeDocValue, lineStartsOf, type LineStarts } from '../engine/doc-text.js';
import { printLines } from '../engine/line-printer.js';
import { CHUNK_BYTES, ChunkedOutput, MAX_LINE_CHARS } from '../engine/tool-output.js';
import { compileLinePrinter, heldLinePrinter } from '../scripts/line-printer-wasm.js';

/** A document as the shard stores it: its text and line starts (u16 under 64 KiB, else u32). */
function stored(text: Buffer): { text: Buffer; starts: LineStarts } {
  const lines = countLines(text);
  const value = encodeDocValue(text, lines);
  return { text: value.subarray(0, text.byteLength), starts: lineStartsOf(value, text.byteLength, lines) };
}

/** What writeLines must print, built line by line with strings and concatenation. */
function expected(text: Buffer, starts: LineStarts, first: number, count: number, prefix: Buffer, width: number, sep: number): Buffer {
  const parts: Buffer[] = [];
  for (let line = first; line < first + count; line++) {
    parts.push(prefix);
    if (width >= 0) parts.push(Buffer.from(`${String(line + 1).padStart(width)}${String.fromCharCode(sep)}`));
    const end = line + 1 < starts.length ? starts[line + 1] : text.byteLength;
    parts.push(text.subarray(starts[line], end));
  }
  const out = Buffer.concat(parts);
  return out.length > 0 && out[out.length - 1] === 0x0a ? out : Buffer.concat([out, Buffer.from('\n')]);
}

/** What ChunkedOutput.writeLines prints, all chunks joined. */
function written(text: Buffer, starts: LineStarts, first: number, count: number, prefix: Buffer, width: number, sep: number): Buffer {
  const out = new ChunkedOutput();
  out.writeLines(text, starts, first, count, prefix, width, sep);
  return Buffer.concat([...out.drain(true)]);
}

/**
 * What writeRuns prints for `runs` (pairs of first and last line, ascending, possibly
 * overlapping), all chunks joined, taken whenever it stops for `maxWaiting` waiting chunks; a
 * line longer than MAX_LINE_CHARS bytes is written as a marker naming it.
 */
function writtenRuns(text: Buffer, starts: LineStarts, runs: number[], prefix: Buffer, width: number, sep: number, maxWaiting: number): Buffer {
  const out = new ChunkedOutput();
  const chunks: Buffer[] = [];
  const cursor = { run: 0, line: -1 };
  const longLine = (line: number) => out.write(`<line ${line}>`, true);
  while (!out.writeRuns(text, starts, runs, cursor, prefix, width, sep, maxWaiting, longLine)) {
    expect(out.waiting).toBeGreaterThanOrEqual(maxWaiting);
    chunks.push(...out.drain());
  }
  chunks.push(...out.drain(true));
  for (const chunk of chunks) expect(chunk.length).toBeLessThanOrEqual(CHUNK_BYTES);
  return Buffer.concat(chunks);
}

/** The same built line by line, each line printed once. */
function expectedRuns(text: Buffer, starts: LineStarts, runs: number[], prefix: Buffer, width: number, sep: number): Buffer {
  const parts: Buffer[] = [];
  let printed = -1;
  for (let i = 0; i < runs.length; i += 2) {
    for (let line = Math.max(runs[i], printed + 1); line <= runs[i + 1]; line++) {
      const end = line + 1 < starts.length ? starts[line + 1] : text.byteLength;
      parts.push(end - starts[line] > MAX_LINE_CHARS ? Buffer.from(`<line ${line}>\n`) : expected(text, starts, line, 1, prefix, width, sep));
      printed = line;
    }
  }
  return Buffer.concat(parts);
}

/** Runs over a document of `lines` lines: ascending starts, some touching or overlapping the run before. */
function runsOver(lines: number, picks: Array<[number, number]>): number[] {
  const runs: number[] = [];
  for (const [at, length] of picks.map(([a, l]) => [a % lines, l] as const).sort((x, y) => x[0] - y[0])) {
    runs.push(at, Math.min(lines - 1, at + length));
  }
  return runs;
}

/** One line's bytes: text with astral and accented characters, or any bytes but `\n` (invalid UTF-8 included), with or without `\r`. */
const line = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 60 }).map((s) => Buffer.from(s.replaceAll('\n', ' '))),
  fc.uint8Array({ maxLength: 40 }).map((bytes) => Buffer.from(bytes.map((b) => (b === 0x0a ? 0x0d : b)))),
  fc.constant(Buffer.alloc(0)),
);

/** Lines as above, some longer than MAX_LINE_CHARS bytes. */
const lineOrLong = fc.oneof({ arbitrary: line, weight: 9 }, { arbitrary: fc.nat(600).map((n) => Buffer.alloc(MAX_LINE_CHARS - 300 + n, 0x61)), weight: 1 });

/** A text of at least one line: lines joined by `\n`, with or without a last `\n`. */
const documents = fc
  .tuple(fc.array(line, { minLength: 1, maxLength: 80 }), fc.boolean())
  .map(([lines, newlineAtEnd]) =>
    Buffer.concat([Buffer.concat(lines.flatMap((l, i) => (i === 0 ? [l] : [Buffer.from('\n'), l]))), Buffer.from(newlineAtEnd ? '\n' : '')]),
  )
  .filter((text) => text.byteLength > 0);

describe('printing a run of lines', () => {
  it('holds the module compiled from engine/line-printer.wat (run scripts/line-printer-wasm.ts after changing it)', async () => {
    expect(Buffer.from(await compileLinePrinter()).toString('base64')).toBe(heldLinePrinter());
  });

  it('prints prefix, number, separator and line for every run, in JavaScript and in the module alike', () => {
    fc.assert(
      fc.property(
        documents,
        fc.nat(),
        fc.nat(),
        fc.string({ maxLength: 70 }),
        fc.integer({ min: -1, max: 8 }),
        fc.constantFrom(0x3a, 0x2d, 0x09),
        (text, a, b, prefixText, width, sep) => {
          const doc = stored(text);
          const lines = doc.starts.length;
          const first = a % lines;
          const count = 1 + (b % (lines - first));
          const prefix = Buffer.from(prefixText);
          expect(written(doc.text, doc.starts, first, count, prefix, width, sep)).toEqual(expected(doc.text, doc.starts, first, count, prefix, width, sep));
        },
      ),
      { numRuns: 2000 },
    );
  });

  it('reads line starts of four bytes, as a text of 64 KiB or more stores them', () => {
    const text = Buffer.from(Array.from({ length: 3000 }, (_, i) => `line ${i} ${'é'.repeat(i % 13)}\n`).join(''));
    const doc = stored(text);
    expect(doc.starts.BYTES_PER_ELEMENT).toBe(4);
    for (const [first, count] of [
      [0, 400],
      [2500, 500],
      [1234, 7],
      [2999, 1],
    ]) {
      const prefix = Buffer.from('/a/long/path/to/the/file.c:');
      expect(written(doc.text, doc.starts, first, count, prefix, 0, 0x3a)).toEqual(expected(doc.text, doc.starts, first, count, prefix, 0, 0x3a));
    }
  });

  it('writes numbers of seven digits and more, padded to the width asked for', () => {
    const doc = stored(Buffer.from('x\n'.repeat(1_100_000)));
    for (const [first, count, width] of [
      [999_990, 20, 0],
      [999_990, 20, 9],
      [1_099_995, 5, 12],
      [999_998, 3, 3],
    ]) {
      const prefix = Buffer.from('p:');
      expect(written(doc.text, doc.starts, first, count, prefix, width, 0x2d)).toEqual(expected(doc.text, doc.starts, first, count, prefix, width, 0x2d));
    }
  });

  it('prints runs of a document in as few calls as chunks, each line as a run of one prints it', () => {
    const docs = fc
      .tuple(fc.array(lineOrLong, { minLength: 1, maxLength: 80 }), fc.boolean())
      .map(([lines, newlineAtEnd]) =>
        Buffer.concat([Buffer.concat(lines.flatMap((l, i) => (i === 0 ? [l] : [Buffer.from('\n'), l]))), Buffer.from(newlineAtEnd ? '\n' : '')]),
      )
      .filter((text) => text.byteLength > 0);
    fc.assert(
      fc.property(
        docs,
        fc.array(fc.tuple(fc.nat(), fc.nat(6)), { minLength: 1, maxLength: 12 }),
        fc.string({ maxLength: 40 }),
        fc.integer({ min: -1, max: 12 }),
        fc.integer({ min: 1, max: 3 }),
        (text, picks, prefixText, width, maxWaiting) => {
          const doc = stored(text);
          const runs = runsOver(doc.starts.length, picks);
          const prefix = Buffer.from(prefixText);
          expect(writtenRuns(doc.text, doc.starts, runs, prefix, width, 0x3a, maxWaiting)).toEqual(
            expectedRuns(doc.text, doc.starts, runs, prefix, width, 0x3a),
          );
        },
      ),
      { numRuns: 1500 },
    );
  });

  it('prints the runs of a document larger than the text one call holds, in pieces that cut runs anywhere', () => {
    // Mostly short lines (the output fills the chunks before the text held runs out), and mostly
    // lines too long to copy (the text held runs out first, in the middle of a run).
    const short = Array.from({ length: 60_000 }, (_, i) => (i % 997 === 0 ? 'z'.repeat(MAX_LINE_CHARS + 5) : `line ${i} ${'é'.repeat(i % 7)}`));
    const long = Array.from({ length: 60_000 }, (_, i) => (i % 3 === 0 ? `line ${i}` : 'z'.repeat(MAX_LINE_CHARS + 1 + (i % 50))));
    const prefix = Buffer.from('/some/where/file.txt:');
    const spread = runsOver(
      60_000,
      Array.from({ length: 400 }, (_, i) => [i * 150, (i * 37) % 400] as [number, number]),
    );
    // And lines longer than all the text one call holds.
    const huge = Array.from({ length: 60_000 }, (_, i) => (i % 20_000 === 7 ? 'h'.repeat(300_000) : `line ${i}`));
    for (const doc of [stored(Buffer.from(short.join('\n'))), stored(Buffer.from(long.join('\n'))), stored(Buffer.from(huge.join('\n')))]) {
      for (const runs of [[0, 59_999], spread, [5, 5, 6, 9000, 8000, 30_000, 59_998, 59_999], [7, 7, 20_007, 20_008, 40_006, 40_007]]) {
        const want = expectedRuns(doc.text, doc.starts, runs, prefix, 0, 0x3a);
        for (const maxWaiting of [1, 4]) {
          // Compared as Latin-1 strings: a deep comparison of megabytes of bytes takes seconds.
          expect(writtenRuns(doc.text, doc.starts, runs, prefix, 0, 0x3a, maxWaiting).toString('latin1')).toBe(want.toString('latin1'));
        }
      }
    }
  });

  it('writes at any offset of the buffer, leaving the bytes around the output as they were', () => {
    const doc = stored(Buffer.from('alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\niota\n'));
    for (const count of [2, 9]) {
      const want = expected(doc.text, doc.starts, 0, count, Buffer.from('f:'), 0, 0x3a);
      const buf = Buffer.alloc(want.length + 40, 0xee);
      const end = printLines(buf, 17, doc.text, doc.starts, 0, count, doc.starts[count] ?? doc.text.length, Buffer.from('f:'), 0, 0x3a, want.length);
      expect(end).toBe(17 + want.length);
      expect(buf.subarray(17, end)).toEqual(want);
      expect(buf.subarray(0, 17).every((b) => b === 0xee) && buf.subarray(end).every((b) => b === 0xee)).toBe(true);
    }
  });
});
