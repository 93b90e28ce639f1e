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
