/**
 * Extracts the distinct byte trigrams of a text, as the shard indexes them: every run of three
 * consecutive bytes that contains no `\n` (0x0A), as the number (b0 << 16) | (b1 << 8) | b2.
 * The query side (`regex-query.ts`) never requires a trigram with a newline, so leaving them
 * out loses nothing and saves space.
 *
 * The scratch memory (a 2 MiB bit set and a list) is shared by every call on a thread: a call
 * runs to completion synchronously and leaves the bit set cleared.
 */

const TRIGRAM_SPACE = 1 << 24;
// Allocated on first use: threads that only read never pay for them.
let seen: Uint32Array | null = null;
let scratch = new Uint32Array(0);

/** The distinct trigrams of `text`, in order of first occurrence. */
export function distinctTrigrams(text: Uint8Array): Uint32Array {
  const length = text.byteLength;
  const needed = Math.min(length, TRIGRAM_SPACE);
  if (scratch.length < needed) scratch = new Uint32Array(Math.max(needed, scratch.length * 2, 1 << 16));
  const list = scratch;
  const bits = (seen ??= new Uint32Array(TRIGRAM_SPACE >>> 5));
  let count = 0;
  let trigram = 0;
  let run = 0;
  for (let i = 0; i < length; i++) {
    const b = text[i];
    if (b === 0x0a) {
      run = 0;
      continue;
    }
    trigram = ((trigram << 8) | b) & 0xffffff;
    if (++run < 3) continue;
    const word = trigram >>> 5;
    const bit = 1 << (trigram & 31);
    if ((bits[word] & bit) === 0) {
      bits[word] |= bit;
      list[count++] = trigram;
    }
  }
  for (let i = 0; i < count; i++) bits[list[i] >>> 5] = 0;
  return list.slice(0, count);
}
