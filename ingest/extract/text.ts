/**
 * Text extraction for uploads that are not PDFs: decides whether the bytes are
 * text the way ripgrep 13 does, and yields the exact bytes ripgrep would search,
 * so that line numbers in `cat` and `grep` agree with `rg -n` on the original.
 *
 * Rules, in order:
 * 1. A known binary signature that never starts a text file (PNG, JPEG, ZIP,
 *    gzip, …) is refused with the format's name.
 * 2. UTF-8 BOM: stripped (rg strips it); the rest is kept byte for byte.
 *    UTF-16 LE/BE BOM: decoded to UTF-8 (rg transcodes BOM-marked UTF-16);
 *    invalid code units become U+FFFD, as in rg's encoding_rs.
 *    Anything else: kept byte for byte, invalid UTF-8 included (rg searches raw
 *    bytes; re-encoding would shift offsets).
 * 3. A NUL byte in the resulting text means binary (rg's heuristic); the error
 *    gives its offset in the original file, and the format's name when a weaker
 *    signature (GIF, SQLite, …) also matches.
 * Line endings are never touched: CRLF stays CRLF, the indexer splits on `\n`.
 */
import type { ExtractResult } from './types.js';

/** How far into the file a `%PDF-` header is looked for (where readers such as Acrobat and pdfjs accept it). */
export const PDF_HEADER_WINDOW = 1024;
const PDF_HEADER = Buffer.from('%PDF-', 'latin1');

/** Offset of `%PDF-` within the first 1024 bytes, or -1. */
export function findPdfHeader(bytes: Uint8Array): number {
  const window = Buffer.from(bytes.buffer, bytes.byteOffset, Math.min(bytes.byteLength, PDF_HEADER_WINDOW));
  return window.indexOf(PDF_HEADER);
}

/** A local file header or an empty archive's end record: the first bytes of every zip. */
export function isZip(bytes: Uint8Array): boolean {
  return bytes.length >= 4 && bytes[0] === 0x50 && bytes[1] === 0x4b && ((bytes[2] === 3 && bytes[3] === 4) || (bytes[2] === 5 && bytes[3] === 6));
}

/**
 * The text of an upload that is plainly text (no zip, no `%PDF-` header, text by the rules
 * above): what extractBuffer (dispatch.ts) gives for those bytes, without loading a parser. Null
 * for anything else, which goes to dispatch in an extraction process.
 */
export function plainText(bytes: Buffer): ExtractResult | null {
  if (isZip(bytes) || findPdfHeader(bytes) !== -1) return null;
  const result = extractText(bytes);
  return result.ok ? result : null;
}

/** A file signature: bytes at an offset, the name shown in the error, and whether it alone proves binary. */
interface Signature {
  offset: number;
  magic: Buffer;
  name: string;
  /**
   * True when the magic holds a byte that cannot begin a text file (a control
   * byte or an invalid UTF-8 lead), so a match refuses the file at once.
   * ASCII-only magics (GIF89a, OggS) only name a file already refused for NULs.
   */
  strong: boolean;
}

const sig = (offset: number, magic: string | number[], name: string, strong: boolean): Signature => ({
  offset,
  magic: typeof magic === 'string' ? Buffer.from(magic, 'latin1') : Buffer.from(magic),
  name,
  strong,
});

const SIGNATURES: readonly Signature[] = [
  sig(0, [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a], 'a PNG image', true),
  sig(0, [0xff, 0xd8, 0xff], 'a JPEG image', true),
  sig(0, 'PK\x03\x04', 'a ZIP archive (not one of the documents read from ZIP: Word, PowerPoint, Excel, OpenDocument, EPUB)', true),
  sig(0, 'PK\x05\x06', 'an empty ZIP archive', true),
  sig(0, 'PK\x07\x08', 'a ZIP archive', true),
  sig(0, [0x1f, 0x8b], 'a gzip-compressed file', true),
  sig(0, [0xfd, 0x37, 0x7a, 0x58, 0x5a, 0x00], 'an xz-compressed file', true),
  sig(0, [0x28, 0xb5, 0x2f, 0xfd], 'a zstd-compressed file', true),
  sig(0, [0x37, 0x7a, 0xbc, 0xaf, 0x27, 0x1c], 'a 7-Zip archive', true),
  sig(0, 'Rar!\x1a\x07', 'a RAR archive', true),
  sig(0, [0x7f, 0x45, 0x4c, 0x46], 'an ELF executable', true),
  sig(0, [0xd0, 0xcf, 0x11, 0xe0, 0xa1, 0xb1, 0x1a, 0xe1], 'a legacy Microsoft Office document', true),
  sig(0, [0x00, 0x61, 0x73, 0x6d], 'a WebAssembly module', true),
  sig(0, [0xca, 0xfe, 0xba, 0xbe], 'a Java class file or Mach-O binary', true),
  sig(0, [0xcf, 0xfa, 0xed, 0xfe], 'a Mach-O binary', true),
  sig(0, [0x1a, 0x45, 0xdf, 0xa3], 'a Matroska/WebM video', true),
  sig(0, 'II*\x00', 'a TIFF image', true),
  sig(0, 'MM\x00*', 'a TIFF image', true),
  sig(0, 'GIF87a', 'a GIF image', false),
  sig(0, 'GIF89a', 'a GIF image', false),
  sig(0, 'SQLite format 3\x00', 'an SQLite database', true),
  sig(0, 'OggS', 'an Ogg audio/video file', false),
  sig(0, 'fLaC', 'a FLAC audio file', false),
  sig(0, 'ID3', 'an MP3 audio file', false),
  sig(0, 'BZh', 'a bzip2-compressed file', false),
  sig(0, 'RIFF', 'a RIFF media file (WAV, AVI or WebP)', false),
  sig(4, 'ftyp', 'an MP4/QuickTime media file', false),
  sig(257, 'ustar', 'a tar archive', false),
  sig(0, 'MZ', 'a Windows executable', false),
];

/** Names the binary format the bytes start with, or null; `strongOnly` limits it to signatures that alone prove binary. */
export function sniffBinaryFormat(bytes: Uint8Array, strongOnly: boolean): string | null {
  for (const s of SIGNATURES) {
    if (strongOnly && !s.strong) continue;
    if (bytes.length < s.offset + s.magic.length) continue;
    if (Buffer.compare(s.magic, bytes.subarray(s.offset, s.offset + s.magic.length)) === 0) return s.name;
  }
  return null;
}

type Bom = 'utf-8' | 'utf-16le' | 'utf-16be';

function detectBom(bytes: Uint8Array): Bom | null {
  if (bytes.length >= 3 && bytes[0] === 0xef && bytes[1] === 0xbb && bytes[2] === 0xbf) return 'utf-8';
  if (bytes.length >= 2 && bytes[0] === 0xff && bytes[1] === 0xfe) return 'utf-16le';
  if (bytes.length >= 2 && bytes[0] === 0xfe && bytes[1] === 0xff) return 'utf-16be';
  return null;
}

function binaryError(bytes: Uint8Array, nulOffset: number): ExtractResult {
  const format = sniffBinaryFormat(bytes, false);
  const error =
    format !== null
      ? `not a text file: looks like ${format} (NUL byte at offset ${nulOffset})`
      : `not a text file: binary content (NUL byte at offset ${nulOffset})`;
  return { ok: false, error, retryable: false };
}

/** Turns the bytes of a non-PDF upload into the UTF-8 text ripgrep would search, or says why they are not text. */
export function extractText(bytes: Buffer): ExtractResult {
  const format = sniffBinaryFormat(bytes, true);
  if (format !== null) return { ok: false, error: `not a text file: looks like ${format}`, retryable: false };

  const bom = detectBom(bytes);
  if (bom === 'utf-16le' || bom === 'utf-16be') {
    // fatal: false replaces unpaired surrogates and a trailing odd byte with
    // U+FFFD, as encoding_rs (rg's transcoder) does.
    const decoded = new TextDecoder(bom, { fatal: false, ignoreBOM: false }).decode(bytes);
    const nul = decoded.indexOf('\u0000');
    // One UTF-16 code unit is two bytes of the original, after the 2-byte BOM.
    if (nul !== -1) return binaryError(bytes, 2 + 2 * nul);
    return { ok: true, text: Buffer.from(decoded, 'utf8'), kind: 'text' };
  }

  const start = bom === 'utf-8' ? 3 : 0;
  const text = bytes.subarray(start);
  const nul = text.indexOf(0);
  if (nul !== -1) return binaryError(bytes, start + nul);
  return start === 0 ? { ok: true, text, kind: 'text', original: true } : { ok: true, text, kind: 'text' };
}
