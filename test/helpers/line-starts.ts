import RE2 from 're2';

/** Line starts as the shard stores them (engine/doc-text.ts): `\n` ends a line, a last line may lack it. */
export function lineStarts(text: Buffer): Uint32Array {
  const starts: number[] = [];
  for (let pos = 0; pos < text.byteLength; ) {
    starts.push(pos);
    const nl = text.indexOf(0x0a, pos);
    pos = nl === -1 ? text.byteLength : nl + 1;
  }
  return Uint32Array.from(starts);
}

/** The reference for a line matcher: the lines RE2 matches with `flags`, each line alone, as ripgrep matches. */
export function re2LineMatches(pattern: string, flags: string, text: Buffer): number[] {
  const re = new RE2(pattern, flags);
  const starts = lineStarts(text);
  const out: number[] = [];
  for (let i = 0; i < starts.length; i++) {
    const end = i + 1 < starts.length ? starts[i + 1] - 1 : text[text.byteLength - 1] === 0x0a ? text.byteLength - 1 : text.byteLength;
    if (re.test(text.subarray(starts[i], end))) out.push(i);
  }
  return out;
}
