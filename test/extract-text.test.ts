/**
 * Text extraction rules, as a table of uploads and expected outcomes. Every
 * case that yields text is also checked against ripgrep: `rg -n` on the
 * original bytes must report the same line numbers (and, for UTF-8, the same
 * line bytes) as the extracted text split on `\n`, because `cat` and `grep`
 * promise ripgrep's numbering.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { extractBuffer } from '../ingest/extract/dispatch.js';

const RG = '/usr/bin/rg';
const dir = mkdtempSync(join(tmpdir(), 'vfs-extract-text-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const bom8 = Buffer.from([0xef, 0xbb, 0xbf]);
function utf16le(s: string): Buffer {
  return Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from(s, 'utf16le')]);
}
function utf16be(s: string): Buffer {
  const le = Buffer.from(s, 'utf16le');
  return Buffer.concat([Buffer.from([0xfe, 0xff]), Buffer.from(le).swap16()]);
}

/** Line numbers (1-based) and line bytes of the lines of `text` containing `needle`, split on `\n` as the indexer does. */
function ourMatches(text: Buffer, needle: string): Array<[number, string]> {
  const out: Array<[number, string]> = [];
  let start = 0;
  for (let n = 1; start <= text.length; n++) {
    let end = text.indexOf(0x0a, start);
    if (end === -1) end = text.length;
    const line = text.subarray(start, end);
    if (line.includes(Buffer.from(needle, 'utf8'))) out.push([n, line.toString('latin1')]);
    if (end === text.length) break;
    start = end + 1;
  }
  return out;
}

/** What `rg -n` reports for `needle` (fixed string) on the original bytes. */
function rgMatches(original: Buffer, needle: string): Array<[number, string]> {
  const file = join(dir, `case-${Math.random().toString(36).slice(2)}`);
  writeFileSync(file, original);
  let out: Buffer;
  try {
    out = execFileSync(RG, ['-n', '--no-filename', '--color=never', '-F', needle, file]);
  } catch (err) {
    if ((err as { status?: number }).status === 1) return [];
    throw err;
  }
  return out
    .toString('latin1')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => {
      const colon = l.indexOf(':');
      return [Number(l.slice(0, colon)), l.slice(colon + 1)] as [number, string];
    });
}

interface TextCase {
  name: string;
  bytes: Buffer;
  contentType?: string;
  /** Expected text, or an expected error (exact). */
  text?: Buffer;
  error?: string;
  /** Strings whose line numbers must agree with rg. */
  needles?: string[];
}

const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0, 0, 0, 13, 0x49, 0x48, 0x44, 0x52]);
const zip = Buffer.concat([Buffer.from('PK\x03\x04', 'latin1'), Buffer.from('\x14\x00\x00\x00\x08\x00', 'latin1'), Buffer.from('word/document.xml')]);
const gzip = Buffer.from([0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x4b, 0x4c]);
const jpeg = Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46]);

const cases: TextCase[] = [
  {
    name: 'plain UTF-8 is kept byte for byte',
    bytes: Buffer.from('alpha\nbéta\ngamma needle\n', 'utf8'),
    text: Buffer.from('alpha\nbéta\ngamma needle\n', 'utf8'),
    needles: ['needle', 'béta'],
  },
  {
    name: 'UTF-8 BOM is stripped',
    bytes: Buffer.concat([bom8, Buffer.from('first needle\nsecond\nthird needle', 'utf8')]),
    text: Buffer.from('first needle\nsecond\nthird needle', 'utf8'),
    needles: ['needle', 'second'],
  },
  {
    name: 'UTF-16 LE with BOM is decoded to UTF-8',
    bytes: utf16le('héllo\nwörld needle\r\n日本語 needle\nlast'),
    text: Buffer.from('héllo\nwörld needle\r\n日本語 needle\nlast', 'utf8'),
    needles: ['needle', 'wörld', '日本語', 'last'],
  },
  {
    name: 'UTF-16 BE with BOM is decoded to UTF-8',
    bytes: utf16be('one\ntwo needle\nthree 😀 needle\n'),
    text: Buffer.from('one\ntwo needle\nthree 😀 needle\n', 'utf8'),
    needles: ['needle', 'one', '😀'],
  },
  {
    name: 'UTF-16 LE unpaired surrogate becomes U+FFFD',
    bytes: Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('a\n', 'utf16le'), Buffer.from([0x00, 0xd8]), Buffer.from('b\nneedle\n', 'utf16le')]),
    text: Buffer.from('a\n\ufffdb\nneedle\n', 'utf8'),
    needles: ['needle', 'b'],
  },
  {
    name: 'CRLF line endings are untouched',
    bytes: Buffer.from('one\r\ntwo needle\r\n\r\nfour needle\r\n'),
    text: Buffer.from('one\r\ntwo needle\r\n\r\nfour needle\r\n'),
    needles: ['needle', 'one'],
  },
  {
    name: 'lone CR is not a line break',
    bytes: Buffer.from('one\rtwo\nthree needle\n'),
    text: Buffer.from('one\rtwo\nthree needle\n'),
    needles: ['needle', 'two'],
  },
  {
    name: 'invalid UTF-8 is kept raw, not re-encoded',
    bytes: Buffer.from('ok\n\xc3\x28 bad\ncaf\xe9 latin1\nend needle\n', 'latin1'),
    text: Buffer.from('ok\n\xc3\x28 bad\ncaf\xe9 latin1\nend needle\n', 'latin1'),
    needles: ['needle', 'bad', 'latin1'],
  },
  { name: 'empty file is empty text', bytes: Buffer.alloc(0), text: Buffer.alloc(0) },
  { name: 'BOM alone is empty text', bytes: bom8, text: Buffer.alloc(0) },
  { name: 'no trailing newline', bytes: Buffer.from('a\nb needle'), text: Buffer.from('a\nb needle'), needles: ['needle'] },
  {
    name: 'a NUL byte means binary',
    bytes: Buffer.from('abc\x00def', 'latin1'),
    error: 'not a text file: binary content (NUL byte at offset 3)',
  },
  {
    name: 'NUL offset counts the UTF-8 BOM',
    bytes: Buffer.concat([bom8, Buffer.from('ab\x00', 'latin1')]),
    error: 'not a text file: binary content (NUL byte at offset 5)',
  },
  {
    name: 'a NUL character in UTF-16 means binary, offset in the original',
    bytes: utf16le('ab\u0000c'),
    error: 'not a text file: binary content (NUL byte at offset 6)',
  },
  { name: 'PNG under text/plain', bytes: png, contentType: 'text/plain', error: 'not a text file: looks like a PNG image' },
  {
    name: 'ZIP under text/plain',
    bytes: zip,
    contentType: 'text/plain; charset=utf-8',
    error: 'ZIP archive refused: not a readable ZIP archive (invalid zip data); the file may be truncated',
  },
  { name: 'gzip under text/plain', bytes: gzip, contentType: 'text/plain', error: 'not a text file: looks like a gzip-compressed file' },
  { name: 'JPEG under text/plain', bytes: jpeg, contentType: 'text/plain', error: 'not a text file: looks like a JPEG image' },
  {
    name: 'GIF is named once its NUL bytes show it is binary',
    bytes: Buffer.from('GIF89a\x01\x00\x01\x00\x80\x00\x00', 'latin1'),
    error: 'not a text file: looks like a GIF image (NUL byte at offset 7)',
  },
  {
    name: 'text that merely starts like a weak signature stays text',
    bytes: Buffer.from('GIF89a is a needle of a format\n'),
    text: Buffer.from('GIF89a is a needle of a format\n'),
    needles: ['needle'],
  },
  {
    name: 'text mentioning %PDF- near its start stays text',
    bytes: Buffer.from('# Notes\nA PDF starts with %PDF-1.7 and a needle\n'),
    contentType: 'text/markdown',
    text: Buffer.from('# Notes\nA PDF starts with %PDF-1.7 and a needle\n'),
    needles: ['needle'],
  },
  {
    name: 'text declared as PDF is still text (content decides)',
    bytes: Buffer.from('plain needle\n'),
    contentType: 'application/pdf',
    text: Buffer.from('plain needle\n'),
    needles: ['needle'],
  },
  {
    name: 'binary declared as PDF without a header',
    bytes: Buffer.from('\x01\x02\x00\x03', 'latin1'),
    contentType: 'application/pdf',
    error: 'PDF could not be parsed: no %PDF- header in the first 1024 bytes (not a text file: binary content (NUL byte at offset 2))',
  },
];

describe('extractBuffer on text', () => {
  for (const c of cases) {
    it(c.name, async () => {
      const result = await extractBuffer(c.bytes, c.contentType ?? 'application/octet-stream', '/file');
      if (c.error !== undefined) {
        expect(result).toEqual({ ok: false, error: c.error, retryable: false });
        return;
      }
      expect(result.ok).toBe(true);
      if (!result.ok) return;
      expect(result.kind).toBe('text');
      expect(Buffer.isBuffer(result.text)).toBe(true);
      expect(result.text.equals(c.text!)).toBe(true);
      for (const needle of c.needles ?? []) {
        const ours = ourMatches(result.text, needle);
        const rg = rgMatches(c.bytes, needle);
        expect(ours.length).toBeGreaterThan(0);
        expect(ours.map(([n]) => n)).toEqual(rg.map(([n]) => n));
        // rg prints transcoded UTF-16 as UTF-8 and raw bytes otherwise, as we store them.
        expect(ours.map(([, line]) => line)).toEqual(rg.map(([, line]) => line));
      }
    });
  }
});
