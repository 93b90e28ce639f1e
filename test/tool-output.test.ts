import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CHUNK_BYTES, ChunkedOutput, recycleChunk } from '../engine/tool-output.js';

/** Every chunk of an output that writes `lines`, each copied and then given back, as a read thread's ring does. */
function copiedAndGivenBack(lines: readonly string[]): { text: Buffer; chunks: Buffer[] } {
  const out = new ChunkedOutput();
  const chunks: Buffer[] = [];
  const copies: Buffer[] = [];
  const take = (chunk: Buffer) => {
    chunks.push(chunk);
    copies.push(Buffer.from(chunk));
    recycleChunk(chunk);
  };
  for (const line of lines) if (out.write(line, true)) while (out.ready) take(out.take());
  for (const chunk of out.drain(true)) take(chunk);
  return { text: Buffer.concat(copies), chunks };
}

describe('chunks given back', () => {
  it('become the memory of later chunks, on this output and the next', () => {
    const line = 'x'.repeat(999);
    const first = copiedAndGivenBack(Array.from({ length: 300 }, () => line));
    // The first full chunk was given back before the third was started: the third reuses it.
    expect(first.chunks.length).toBeGreaterThan(3);
    expect(first.chunks[0].buffer.byteLength).toBe(CHUNK_BYTES);
    expect(first.chunks[2].buffer).toBe(first.chunks[0].buffer);
    const next = copiedAndGivenBack(Array.from({ length: 300 }, () => line));
    const seen = new Set(first.chunks.map((c) => c.buffer));
    expect(next.chunks.slice(1).some((c) => seen.has(c.buffer))).toBe(true);
  });

  it('are kept only when they are a whole chunk of their own', () => {
    const small = new ChunkedOutput();
    small.write('a short answer', true);
    const shared = small.flush()!;
    recycleChunk(shared); // cut from a block other answers share: never reused
    const view = Buffer.allocUnsafe(2 * CHUNK_BYTES).subarray(CHUNK_BYTES); // not at the start of its memory
    recycleChunk(view);
    const { chunks } = copiedAndGivenBack(Array.from({ length: 200 }, () => 'y'.repeat(999)));
    for (const chunk of chunks) {
      expect(chunk.buffer).not.toBe(shared.buffer);
      expect(chunk.buffer).not.toBe(view.buffer);
    }
  });

  it('never change what was written, whatever the lines and however often memory is reused', () => {
    const lines = fc.array(fc.string({ unit: 'grapheme', maxLength: 3000 }), { maxLength: 200 });
    fc.assert(
      fc.property(fc.array(lines, { minLength: 1, maxLength: 4 }), (outputs) => {
        for (const output of outputs) {
          const expected = Buffer.from(output.map((l) => `${l}\n`).join(''));
          expect(copiedAndGivenBack(output).text.equals(expected)).toBe(true);
        }
      }),
      { numRuns: 60 },
    );
  });
});
