/**
 * The n-grams of a text as query keys, computed here as the index defines them
 * (engine/trigram-extract.ts), for checking queries without a shard: every run of three or
 * four UTF-8 bytes without 0x0A; trigrams as they are, quadgrams as QUAD_KEY_BASE + their
 * bytes with A-Z made a-z.
 */
import { QUAD_KEY_BASE } from '../../engine/trigram-extract.js';

const foldByte = (b: number): number => (b >= 0x41 && b <= 0x5a ? b | 0x20 : b);

export function textGrams(text: string): Set<number> {
  const b = Buffer.from(text, 'utf8');
  const out = new Set<number>();
  for (let i = 0; i + 3 <= b.length; i++) {
    if (b[i] === 0x0a || b[i + 1] === 0x0a || b[i + 2] === 0x0a) continue;
    out.add((b[i] << 16) | (b[i + 1] << 8) | b[i + 2]);
    if (i + 4 > b.length || b[i + 3] === 0x0a) continue;
    const quad = ((foldByte(b[i]) << 24) | (foldByte(b[i + 1]) << 16) | (foldByte(b[i + 2]) << 8) | foldByte(b[i + 3])) >>> 0;
    out.add(QUAD_KEY_BASE + quad);
  }
  return out;
}
