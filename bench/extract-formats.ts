/**
 * Extraction throughput per format, on documents generated here: megabytes per second of
 * source and of text, one thread, the extractor alone (the pool adds a thread hop per file).
 *
 *   node --import tsx bench/extract-formats.ts [runs=5]
 *
 * Each format gets one document of comparable text (about 1 MB): Word and OpenDocument text of
 * 10,000 paragraphs, PowerPoint and OpenDocument presentations of 500 slides of 10 lines,
 * Excel and OpenDocument spreadsheets of 20,000 rows of 5 cells, an EPUB of 100 chapters, a PDF
 * of 100 pages, and plain text for reference. Reports the median of `runs` extractions.
 */
import ExcelJS from 'exceljs';
import { Document, Packer, Paragraph } from 'docx';
import { extractBuffer } from '../ingest/extract/dispatch.js';
import { makeEpub, makeOdf, newPresentation } from '../test/helpers/make-documents.js';
import { makePdf } from '../test/helpers/make-pdf.js';

const runs = Number(process.argv[2] ?? 5);

const sentence = (i: number): string => `Paragraph ${i}: the quarterly figures for region ${i % 17} rose by ${i % 9} percent over the year.`;
const xmlText = (s: string): string => s.replaceAll('&', '&amp;').replaceAll('<', '&lt;');

async function documents(): Promise<Array<[string, Buffer]>> {
  const paragraphs = Array.from({ length: 10_000 }, (_, i) => sentence(i));
  const docx = await Packer.toBuffer(new Document({ sections: [{ children: paragraphs.map((p) => new Paragraph(p)) }] }));
  const pptx = newPresentation();
  for (let s = 0; s < 500; s++) {
    pptx.addSlide().addText(
      Array.from({ length: 10 }, (_, l) => ({ text: sentence(s * 10 + l), options: { breakLine: true } })),
      { x: 0.5, y: 0.5, w: 9, h: 5 },
    );
  }
  const workbook = new ExcelJS.Workbook();
  const sheet = workbook.addWorksheet('Data');
  for (let r = 0; r < 20_000; r++) sheet.addRow([`region ${r % 17}`, r, r * 1.5, `note ${r}`, r % 2 === 0]);
  const rows = Array.from(
    { length: 20_000 },
    (_, r) =>
      `<table:table-row>${[`region ${r % 17}`, r, r * 1.5, `note ${r}`, r % 2 === 0].map((v) => `<table:table-cell><text:p>${v}</text:p></table:table-cell>`).join('')}</table:table-row>`,
  ).join('');
  const slides = Array.from(
    { length: 500 },
    (_, s) =>
      `<draw:page><draw:frame><draw:text-box>${Array.from({ length: 10 }, (_, l) => `<text:p>${xmlText(sentence(s * 10 + l))}</text:p>`).join('')}</draw:text-box></draw:frame></draw:page>`,
  ).join('');
  const chapters = Array.from(
    { length: 100 },
    (_, c) =>
      `<h1>Chapter ${c}</h1>${paragraphs
        .slice(c * 100, c * 100 + 100)
        .map((p) => `<p>${xmlText(p)}</p>`)
        .join('')}`,
  );
  return [
    ['text', Buffer.from(paragraphs.join('\n') + '\n')],
    [
      'pdf',
      await makePdf(
        Array.from({ length: 100 }, (_, p) => paragraphs.slice(p * 100, p * 100 + 100)),
        { compress: true },
      ),
    ],
    ['docx', docx],
    ['pptx', (await pptx.write({ outputType: 'nodebuffer' })) as Buffer],
    ['xlsx', Buffer.from(await workbook.xlsx.writeBuffer())],
    ['odt', makeOdf('odt', `<office:text>${paragraphs.map((p) => `<text:p>${xmlText(p)}</text:p>`).join('')}</office:text>`)],
    ['odp', makeOdf('odp', `<office:presentation>${slides}</office:presentation>`)],
    ['ods', makeOdf('ods', `<office:spreadsheet><table:table table:name="Data">${rows}</table:table></office:spreadsheet>`)],
    ['epub', makeEpub(chapters)],
  ];
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const rows = [];
for (const [format, bytes] of await documents()) {
  const times: number[] = [];
  let textBytes = 0;
  for (let i = 0; i < runs + 1; i++) {
    const t0 = performance.now();
    const result = await extractBuffer(bytes, 'application/octet-stream', `/doc.${format}`);
    const ms = performance.now() - t0;
    if (!result.ok) throw new Error(`${format}: ${result.error}`);
    textBytes = result.text.length;
    if (i > 0) times.push(ms); // the first run loads the format's modules
  }
  const ms = median(times);
  const row = {
    format,
    sourceMB: +(bytes.length / 1e6).toFixed(2),
    textMB: +(textBytes / 1e6).toFixed(2),
    ms: +ms.toFixed(1),
    sourceMBps: +(bytes.length / 1e3 / ms).toFixed(1),
    textMBps: +(textBytes / 1e3 / ms).toFixed(1),
  };
  rows.push(row);
  process.stderr.write(`${format}\t${row.sourceMB} MB -> ${row.textMB} MB text\t${row.ms} ms\t${row.sourceMBps} MB/s source\t${row.textMBps} MB/s text\n`);
}
process.stdout.write(JSON.stringify({ runs, rows }, null, 2) + '\n');
