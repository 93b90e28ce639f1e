/**
 * PDF extraction on real PDFs written by pdfkit (and a few hand-assembled
 * ones), checked against the exact output format documented at the top of
 * ingest/extract/pdf.ts: page markers, line order, Latin-1 text, caps, and
 * the errors for damaged and encrypted files.
 */
import PDFDocument from 'pdfkit';
import { describe, expect, it } from 'vitest';
import { extractBuffer } from '../ingest/extract/dispatch.js';
import type { ExtractResult } from '../ingest/extract/types.js';
import { extractPdf, pageLines } from '../ingest/extract/pdf.js';
import { assemblePdf, makeFlatePdf, makePdf } from './helpers/make-pdf.js';

function text(result: ExtractResult): string {
  if (!result.ok) throw new Error(`expected text, got error: ${result.error}`);
  return result.text.toString('utf8');
}

function encryptedPdf(options: PDFKit.PDFDocumentOptions): Promise<Buffer> {
  const doc = new PDFDocument(options);
  const chunks: Buffer[] = [];
  doc.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise<Buffer>((resolve) => doc.on('end', () => resolve(Buffer.concat(chunks))));
  doc.text('Secret sentence.');
  doc.end();
  return done;
}

describe('extractBuffer on PDFs', () => {
  it('extracts a one-page PDF with a page marker and its sentences in order', async () => {
    const pdf = await makePdf([['The quick brown fox jumps over the lazy dog.', 'Pack my box with five dozen liquor jugs.']]);
    const result = await extractBuffer(pdf, 'application/pdf', '/doc.pdf');
    expect(result.ok && result.kind).toBe('pdf');
    expect(text(result)).toBe('--- page 1 ---\nThe quick brown fox jumps over the lazy dog.\nPack my box with five dozen liquor jugs.\n');
  });

  it('keeps pages in order, each after its own marker, empty pages included', async () => {
    const pdf = await makePdf([['Alpha one.', 'Alpha two.'], ['Bravo.'], [], ['Delta.']]);
    const result = await extractBuffer(pdf, 'application/pdf', '/doc.pdf');
    expect(text(result)).toBe('--- page 1 ---\nAlpha one.\nAlpha two.\n--- page 2 ---\nBravo.\n--- page 3 ---\n--- page 4 ---\nDelta.\n');
  });

  it('decodes Latin-1 text of a standard font to UTF-8', async () => {
    const pdf = await makePdf([['café crème brûlée, naïve façade', 'Ærø Straße €5 ±1 ¿qué?']]);
    expect(text(await extractBuffer(pdf, 'application/pdf', '/doc.pdf'))).toBe('--- page 1 ---\ncafé crème brûlée, naïve façade\nÆrø Straße €5 ±1 ¿qué?\n');
  });

  it('wraps long paragraphs into the lines the page shows', async () => {
    const sentence = 'Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua.';
    const lines = text(await extractBuffer(await makePdf([[sentence]]), 'application/pdf', '/doc.pdf')).split('\n');
    expect(lines[0]).toBe('--- page 1 ---');
    expect(lines.length).toBeGreaterThan(3); // marker, at least two wrapped lines, final ''
    expect(lines.slice(1).join(' ').trim()).toBe(sentence);
  });

  it('decides by content: a PDF uploaded as application/octet-stream or text/plain is a PDF', async () => {
    const pdf = await makePdf([['Sniffed by magic bytes.']]);
    for (const type of ['application/octet-stream', 'text/plain']) {
      const result = await extractBuffer(pdf, type, '/upload.bin');
      expect(result.ok && result.kind).toBe('pdf');
      expect(text(result)).toBe('--- page 1 ---\nSniffed by magic bytes.\n');
    }
  });

  it('finds a PDF header after leading junk within the first 1024 bytes', async () => {
    const pdf = await makePdf([['After junk.']]);
    const junk = Buffer.from('\x00\x01\x02junk before the header\n', 'latin1');
    const result = await extractBuffer(Buffer.concat([junk, pdf]), 'application/octet-stream', '/x');
    expect(text(result)).toBe('--- page 1 ---\nAfter junk.\n');
  });

  it('reads a hand-assembled FlateDecode PDF without a cross-reference table', async () => {
    expect(text(await extractBuffer(makeFlatePdf('Rebuilt by scanning'), '', '/f.pdf'))).toBe('--- page 1 ---\nRebuilt by scanning\n');
  });

  it('does not detach or modify the caller’s buffer', async () => {
    const pdf = await makePdf([['Untouched.']]);
    const copy = Buffer.from(pdf);
    await extractBuffer(pdf, 'application/pdf', '/doc.pdf');
    expect(pdf.byteLength).toBe(copy.byteLength);
    expect(pdf.equals(copy)).toBe(true);
  });

  const broken: Array<{ name: string; bytes: () => Promise<Buffer>; error: string }> = [
    {
      name: 'a truncated real PDF',
      bytes: async () => {
        const pdf = await makePdf([['Cut in half.'], ['Second page.']]);
        return pdf.subarray(0, pdf.length >> 1);
      },
      error: 'PDF could not be parsed: Invalid PDF structure',
    },
    {
      name: 'a real PDF with flipped bytes',
      bytes: async () => {
        const pdf = Buffer.from(await makePdf([['Scrambled.']]));
        for (let i = 20; i < pdf.length; i += 7) pdf[i] ^= 0x5a;
        return pdf;
      },
      error: 'PDF could not be parsed: Invalid PDF structure',
    },
    {
      name: 'a %PDF- header followed by garbage',
      bytes: async () => Buffer.from('%PDF-1.7\n' + 'this is not a pdf, only garbage\n'.repeat(20)),
      error: 'PDF could not be parsed: Invalid PDF structure',
    },
    { name: 'a bare %PDF- header', bytes: async () => Buffer.from('%PDF-'), error: 'PDF could not be parsed: Invalid PDF structure' },
    {
      name: 'a PDF that needs a user password',
      bytes: () => encryptedPdf({ userPassword: 'open sesame', ownerPassword: 'owner' }),
      error: 'PDF is encrypted and needs a password to open',
    },
  ];
  for (const c of broken) {
    it(`refuses ${c.name} with a readable error`, async () => {
      expect(await extractBuffer(await c.bytes(), 'application/pdf', '/bad.pdf')).toEqual({ ok: false, error: c.error, retryable: false });
    });
  }

  /** Two pages whose second Kids entry is `secondKid`, by hand, since pdfkit writes only sound page trees. */
  const twoPagePdf = (secondKid: string, firstKid = '3 0 R') => {
    const content = 'BT /F1 12 Tf 72 700 Td (Good page) Tj ET';
    return assemblePdf([
      '<< /Type /Catalog /Pages 2 0 R >>',
      `<< /Type /Pages /Kids [${firstKid} ${secondKid}] /Count 2 >>`,
      '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R /Resources << /Font << /F1 4 0 R >> >> >>',
      '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>',
      `<< /Length ${content.length} >>\nstream\n${content}\nendstream`,
    ]);
  };

  it('keeps the marker of a page that cannot be read and says why', async () => {
    expect(text(await extractBuffer(twoPagePdf('2 0 R'), 'application/pdf', '/doc.pdf'))).toBe(
      '--- page 1 ---\nGood page\n--- page 2 ---\n(text of this page could not be extracted: Pages tree contains circular reference)\n',
    );
  });

  it('refuses a PDF none of whose pages can be read', async () => {
    expect(await extractBuffer(twoPagePdf('99 0 R', '7'), 'application/pdf', '/doc.pdf')).toEqual({
      ok: false,
      error: 'PDF could not be parsed: Page dictionary kid reference points to wrong type of object',
      retryable: false,
    });
  });

  it('opens a PDF encrypted with an owner password only (empty user password)', async () => {
    const pdf = await encryptedPdf({ ownerPassword: 'owner', permissions: { printing: 'lowResolution' } });
    expect(text(await extractBuffer(pdf, 'application/pdf', '/doc.pdf'))).toBe('--- page 1 ---\nSecret sentence.\n');
  });
});

describe('extractPdf caps', () => {
  it('stops at the page cap with a truncation marker', async () => {
    const pdf = await makePdf([['One.'], ['Two.'], ['Three.'], ['Four.']]);
    expect(text(await extractPdf(pdf, { maxPages: 2 }))).toBe(
      '--- page 1 ---\nOne.\n--- page 2 ---\nTwo.\n--- truncated: page limit of 2 reached, pages 3-4 not extracted ---\n',
    );
  });

  it('stops at the text cap at a line boundary', async () => {
    const pdf = await makePdf([['First line.', 'Second line.'], ['Third line.']]);
    // '--- page 1 ---\n' (15) + 'First line.\n' (12) = 27 bytes fit; the next line does not.
    expect(text(await extractPdf(pdf, { maxTextBytes: 30 }))).toBe(
      '--- page 1 ---\nFirst line.\n--- truncated: text limit of 30 bytes reached on page 1 of 2 ---\n',
    );
  });
});

describe('pageLines', () => {
  const run = (str: string, y: number, hasEOL = false, height = 12) => ({ str, hasEOL, height, transform: [height, 0, 0, height, 72, y] });
  const cases: Array<{ name: string; items: unknown[]; lines: string[] }> = [
    { name: 'hasEOL ends a line', items: [run('a', 700, true), run('b', 686)], lines: ['a', 'b'] },
    { name: 'runs on one baseline join', items: [run('Col A', 400), run(' ', 400), run('Col B', 400)], lines: ['Col A Col B'] },
    { name: 'a baseline change starts a line', items: [run('up', 700), run('down', 680)], lines: ['up', 'down'] },
    { name: 'a small baseline shift (superscript) does not', items: [run('x', 700), run('2', 703, false, 7), run(' + y', 700)], lines: ['x2 + y'] },
    { name: 'a big downward gap leaves one empty line', items: [run('para one', 700, true), run('para two', 600)], lines: ['para one', '', 'para two'] },
    { name: 'control characters and NUL are dropped, breaks become spaces', items: [run('a\u0000b\u0007c\r\nd', 700)], lines: ['abc d'] },
    {
      name: 'trailing blanks are trimmed and blank runs add no line',
      items: [run('text   ', 700, true), run('   ', 680, true), run('', 660, true)],
      lines: ['text'],
    },
    { name: 'marked-content entries are skipped', items: [{ type: 'beginMarkedContent' }, run('only', 700)], lines: ['only'] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      expect(pageLines(c.items)).toEqual(c.lines);
    });
  }
});
