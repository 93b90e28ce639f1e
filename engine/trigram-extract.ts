/**
 * The n-grams the shard indexes for a text: every run of three (trigrams) or four (quadgrams)
 * consecutive bytes that contains no `\n` (0x0A). The query side (`engine/regex/`) never
 * requires an n-gram with a newline, so leaving them out loses nothing and saves space.
 *
 * A trigram is indexed as itself, the number (b0 << 16) | (b1 << 8) | b2. A quadgram is
 * indexed under an 18-bit hash of (b0 << 24) | (b1 << 16) | (b2 << 8) | b3 with its ASCII
 * letters lowercased (`foldQuad`, then `quadBucket`): many quadgrams share a bucket, which only
 * makes a bucket's list longer. Quadgrams tell apart what trigrams cannot: `sched_clock` and
 * `_register` in one file give every trigram of `sched_clock_register` but not its quadgram
 * `k_re`.
 *
 * Why folded: a case-insensitive search needs every case variant of a literal. Its trigrams
 * come in up to 8 variants each (an OR of 8 lists), which on the Linux tree leave several times
 * the candidates of the same literal searched case-sensitively. A folded quadgram is one list
 * for all its case variants. Case-sensitive searches keep exact trigrams, so folding costs them
 * only the quadgrams' case distinction.
 *
 * Why 18 bits: on the Linux 6.1 tree, the files holding every quadgram bucket of a literal were
 * almost as few with 2^18 buckets as with 2^24, and clearly more with 2^16, while more
 * buckets made ingest much slower, since every merge updates every bucket's list.
 *
 * The scratch memory (bit sets of 2 MiB and 32 KiB, and lists) is shared by every call on a
 * thread: a call runs to completion synchronously and leaves the bit sets cleared.
 */

const TRIGRAMS = 1 << 24;
/**
 * Bits of a quadgram bucket (see "Why 18 bits" above). Fit with bench/engine-phases.ts and
 * bench/ingest.ts (docs/benchmarks.md, "Quadgrams").
 */
export const QUAD_BUCKET_BITS = 18;
// Allocated on first use: threads that only read never pay for them.
let seen: Uint32Array | null = null;
let seenQuads: Uint32Array | null = null;
let scratch = new Uint32Array(0);
let scratchQuads = new Uint32Array(0);

/**
 * `quad` (four bytes as an unsigned 32-bit number) with each byte A-Z made a-z; other bytes,
 * UTF-8 ones included, unchanged.
 */
export function foldQuad(quad: number): number {
  const low = quad & 0x7f7f7f7f;
  // Per byte, without carries (each is below 0x80 + 0x3f): bit 7 of low + 0x3f is set from
  // `A` up, of low + 0x25 from `[` up; `~quad` drops the bytes from 0x80 up.
  const upper = (low + 0x3f3f3f3f) & ~(low + 0x25252525) & ~quad & 0x80808080;
  return (quad | (upper >>> 2)) >>> 0;
}

/**
 * The list key of quadgram `quad` (its four bytes as an unsigned 32-bit number): the top
 * QUAD_BUCKET_BITS bits of its product with 2^32 divided by the golden ratio, so that every
 * byte moves the bucket (Fibonacci hashing).
 */
export function quadBucket(quad: number): number {
  return Math.imul(quad, 0x9e3779b1) >>> (32 - QUAD_BUCKET_BITS);
}

/** The distinct trigrams and quadgram buckets of a text, each in order of first occurrence. */
export interface DistinctGrams {
  trigrams: Uint32Array;
  quads: Uint32Array;
}

/**
 * The distinct trigrams and quadgram buckets (`quadBucket` of the folded quadgram) of `text`,
 * in one pass over its bytes.
 */
export function distinctGrams(text: Uint8Array): DistinctGrams {
  const length = text.byteLength;
  const needed = Math.min(length, TRIGRAMS);
  if (scratch.length < needed) scratch = new Uint32Array(Math.max(needed, scratch.length * 2, 1 << 16));
  const quadsNeeded = Math.min(length, 1 << QUAD_BUCKET_BITS);
  if (scratchQuads.length < quadsNeeded) scratchQuads = new Uint32Array(Math.max(quadsNeeded, scratchQuads.length * 2, 1 << 16));
  const list = scratch;
  const quadList = scratchQuads;
  seen ??= new Uint32Array(TRIGRAMS >>> 5);
  seenQuads ??= new Uint32Array((1 << QUAD_BUCKET_BITS) >>> 5);
  const bits = seen;
  const quadBits = seenQuads;
  let count = 0;
  let quadCount = 0;
  let gram = 0;
  let run = 0;
  for (let i = 0; i < length; i++) {
    const b = text[i];
    if (b === 0x0a) {
      run = 0;
      continue;
    }
    gram = (gram << 8) | b;
    if (++run < 3) continue;
    const trigram = gram & 0xffffff;
    const word = trigram >>> 5;
    const bit = 1 << (trigram & 31);
    if ((bits[word] & bit) === 0) {
      bits[word] |= bit;
      list[count++] = trigram;
    }
    if (run < 4) continue;
    const quad = quadBucket(foldQuad(gram));
    const quadWord = quad >>> 5;
    const quadBit = 1 << (quad & 31);
    if ((quadBits[quadWord] & quadBit) === 0) {
      quadBits[quadWord] |= quadBit;
      quadList[quadCount++] = quad;
    }
  }
  for (let i = 0; i < count; i++) bits[list[i] >>> 5] = 0;
  for (let i = 0; i < quadCount; i++) quadBits[quadList[i] >>> 5] = 0;
  return { trigrams: list.slice(0, count), quads: quadList.slice(0, quadCount) };
}

/** The distinct trigrams of `text`, in order of first occurrence. */
export function distinctTrigrams(text: Uint8Array): Uint32Array {
  return distinctGrams(text).trigrams;
}

/** The distinct quadgram buckets of `text` (`quadBucket`), in order of first occurrence. */
export function distinctQuadBuckets(text: Uint8Array): Uint32Array {
  return distinctGrams(text).quads;
}

/**
 * Quadgrams in queries: QUAD_KEY_BASE + the four bytes as an unsigned 32-bit number, a key no
 * trigram (< 2^24) can take. The reader looks such a key up in the quadgram lists, which hold
 * the texts containing the quadgram in any ASCII case.
 */
export const QUAD_KEY_BASE = 2 ** 32;
