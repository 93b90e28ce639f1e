/**
 * Builds real PDF files for the extraction tests: well-formed documents through
 * pdfkit (a real PDF writer), and hand-assembled ones for the hostile cases
 * pdfkit cannot produce (an exponential form-XObject "text bomb").
 */
import { constants as zlibConstants, deflateRawSync } from 'node:zlib';
import PDFDocument from 'pdfkit';

/** One page of a pdfkit document: its lines of text, drawn top to bottom. */
export type PdfPage = string[];

/** Renders pages of text with pdfkit's standard Helvetica font (WinAnsi, so Latin-1 and € work). */
export function makePdf(pages: PdfPage[], options: { compress?: boolean } = {}): Promise<Buffer> {
  const doc = new PDFDocument({ compress: options.compress ?? true, autoFirstPage: false });
  const chunks: Buffer[] = [];
  doc.on('data', (chunk: Buffer) => chunks.push(chunk));
  const done = new Promise<Buffer>((resolve, reject) => {
    doc.on('end', () => resolve(Buffer.concat(chunks)));
    doc.on('error', reject);
  });
  for (const lines of pages) {
    doc.addPage();
    doc.font('Helvetica').fontSize(12);
    for (const line of lines) doc.text(line);
  }
  doc.end();
  return done;
}

/**
 * Assembles a PDF from object bodies (object i+1 is `bodies[i]`; object 1 must
 * be the catalog) with a correct cross-reference table, so pdfjs parses it
 * without falling back to its repair path.
 */
export function assemblePdf(bodies: string[]): Buffer {
  let out = '%PDF-1.4\n%\xe2\xe3\xcf\xd3\n';
  const offsets: number[] = [];
  bodies.forEach((body, i) => {
    offsets.push(Buffer.byteLength(out, 'latin1'));
    out += `${i + 1} 0 obj\n${body}\nendobj\n`;
  });
  const xref = Buffer.byteLength(out, 'latin1');
  out += `xref\n0 ${bodies.length + 1}\n0000000000 65535 f \n`;
  for (const offset of offsets) out += `${String(offset).padStart(10, '0')} 00000 n \n`;
  out += `trailer\n<< /Size ${bodies.length + 1} /Root 1 0 R >>\nstartxref\n${xref}\n%%EOF\n`;
  return Buffer.from(out, 'latin1');
}

function stream(dict: string, content: string): string {
  return `<< ${dict} /Length ${Buffer.byteLength(content, 'latin1')} >>\nstream\n${content}\nendstream`;
}

/**
 * A one-page PDF whose page draws form X0 once, and each form Xi shows a word
 * and draws X(i+1) `fanout` times: only `depth` small objects, yet
 * `fanout^depth` text runs to extract. A real hostile input for the time and
 * memory caps, not a test hook. A long `word` makes it eat memory faster
 * than time.
 */
export function makeXObjectBombPdf(depth: number, fanout: number, word = 'bomb'): Buffer {
  // Objects: 1 catalog, 2 pages, 3 page, 4 font, 5 page content, 6.. forms.
  const formObj = (i: number) => 6 + i;
  const bodies = [
    '<< /Type /Catalog /Pages 2 0 R >>',
    '<< /Type /Pages /Kids [3 0 R] /Count 1 >>',
    '<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 5 0 R ' + `/Resources << /Font << /F1 4 0 R >> /XObject << /X0 ${formObj(0)} 0 R >> >> >>`,
    '<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>',
    stream('', '/X0 Do'),
  ];
  for (let i = 0; i < depth; i++) {
    const last = i === depth - 1;
    const draw = last ? '' : `${'/N Do '.repeat(fanout)}`;
    const resources = last ? '<< /Font << /F1 4 0 R >> >>' : `<< /Font << /F1 4 0 R >> /XObject << /N ${formObj(i + 1)} 0 R >> >>`;
    bodies.push(stream(`/Type /XObject /Subtype /Form /BBox [0 0 612 792] /Resources ${resources}`, `BT /F1 10 Tf 72 700 Td (${word}${i}) Tj ET ${draw}`));
  }
  return assemblePdf(bodies);
}

/** A piece of an uncompressed content stream, repeated `times` times. */
interface Segment {
  text: string | Buffer;
  times: number;
}

/**
 * Compresses a long content stream cheaply: a full flush resets the
 * compressor's history, so each piece compresses on its own to non-final,
 * byte-aligned blocks that can be repeated; an empty final block closes the
 * stream. pdfjs does not check the Adler-32 trailer, left at zero.
 */
function deflateSegments(segments: Segment[]): Buffer {
  const parts: Buffer[] = [Buffer.from([0x78, 0x9c])];
  for (const { text, times } of segments) {
    const raw = typeof text === 'string' ? Buffer.from(text, 'latin1') : text;
    const block = deflateRawSync(raw, { finishFlush: zlibConstants.Z_FULL_FLUSH });
    for (let i = 0; i < times; i++) parts.push(block);
  }
  parts.push(Buffer.from([0x03, 0x00, 0, 0, 0, 0]));
  return Buffer.concat(parts);
}

/** A one-page PDF whose only content stream is `segments`, FlateDecode-compressed. */
function flatePagePdf(segments: Segment[]): Buffer {
  const content = deflateSegments(segments);
  const head = Buffer.from(
    '%PDF-1.4\n' +
      '1 0 obj\n<< /Type /Catalog /Pages 2 0 R >>\nendobj\n' +
      '2 0 obj\n<< /Type /Pages /Kids [3 0 R] /Count 1 >>\nendobj\n' +
      '3 0 obj\n<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R ' +
      '/Resources << /Font << /F1 5 0 R >> >> >>\nendobj\n' +
      '5 0 obj\n<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>\nendobj\n' +
      `4 0 obj\n<< /Length ${content.length} /Filter /FlateDecode >>\nstream\n`,
    'latin1',
  );
  // No cross-reference table: pdfjs rebuilds it by scanning, as for any damaged file.
  const tail = Buffer.from('\nendstream\nendobj\ntrailer\n<< /Root 1 0 R >>\n%%EOF\n', 'latin1');
  return Buffer.concat([head, content, tail]);
}

/** A one-page PDF whose content stream shows `text` (latin1), for checking the assembly helpers. */
export function makeFlatePdf(text: string): Buffer {
  return flatePagePdf([{ text: `BT /F1 12 Tf 72 700 Td (${text}) Tj ET`, times: 1 }]);
}

/**
 * A one-page PDF whose content stream is a deflate bomb: about 1 KiB of
 * compressed data per MiB of spaces, `inflatedMb` MiB once inflated. pdfjs
 * keeps a decoded stream in one growing ArrayBuffer, outside the V8 heap cap,
 * so this is what the pool's memory watchdog is for.
 */
export function makeDeflateBombPdf(inflatedMb: number): Buffer {
  return flatePagePdf([{ text: Buffer.alloc(1024 * 1024, 0x20), times: inflatedMb }]);
}

/**
 * A one-page PDF that shows one string literal of `megachars` Mi characters.
 * pdfjs' lexer collects a literal one character per array slot, on the V8
 * heap: a real input that exhausts an extraction process's heap cap within seconds.
 */
export function makeStringBombPdf(megachars: number): Buffer {
  return flatePagePdf([
    { text: 'BT /F1 12 Tf 72 700 Td (', times: 1 },
    { text: Buffer.alloc(1024 * 1024, 0x61), times: megachars },
    { text: ') Tj ET', times: 1 },
  ]);
}
