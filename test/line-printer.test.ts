import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { countLines, encodeDocValue, lineStartsOf, type LineStarts } from '../engine/doc-text.js';
import { printLines } from '../engine/line-printer.js';
import { ChunkedOutput } from '../engine/tool-output.js';
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

/** One line's bytes: text with astral and accented characters, or any bytes but `\n` (invalid UTF-8 included), with or without `\r`. */
const line = fc.oneof(
  fc.string({ unit: 'grapheme', maxLength: 60 }).map((s) => Buffer.from(s.replaceAll('\n', ' '))),
  fc.uint8Array({ maxLength: 40 }).map((bytes) => Buffer.from(bytes.map((b) => (b === 0x0a ? 0x0d : b)))),
  fc.constant(Buffer.alloc(0)),
);

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
