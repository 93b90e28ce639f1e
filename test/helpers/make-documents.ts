/**
 * Office, OpenDocument and EPUB files for the extraction tests, made with maintained writers
 * (docx, pptxgenjs, exceljs) or zipped from inline XML (fflate), and hostile archives.
 */
import ExcelJS from 'exceljs';
import { Document, HeadingLevel, Packer, Paragraph, Table, TableCell, TableRow, TextRun } from 'docx';
import { strToU8, zipSync, type Zippable } from 'fflate';
import * as pptxgenjs from 'pptxgenjs';

type Presentation = import('pptxgenjs').default;
// The package's CommonJS build, loaded from ESM, puts the class one `default` deeper than its types say.
const loaded = pptxgenjs as unknown as { default: { default?: new () => Presentation } & (new () => Presentation) };
const PptxGenJS: new () => Presentation = loaded.default.default ?? loaded.default;

/** A new, empty presentation (pptxgenjs). */
export function newPresentation(): Presentation {
  return new PptxGenJS();
}

/** A Word document: a heading, paragraphs (a tab, a line break), a 2×2 table, Unicode. */
export async function makeDocx(): Promise<Buffer> {
  const doc = new Document({
    sections: [
      {
        children: [
          new Paragraph({ text: 'Quarterly report', heading: HeadingLevel.HEADING_1 }),
          new Paragraph({ children: [new TextRun('Revenue grew by '), new TextRun({ text: '12%', bold: true }), new TextRun(' this quarter.')] }),
          new Paragraph({ children: [new TextRun('Name'), new TextRun({ text: 'Value', break: 0 }), new TextRun({ children: ['\t', 'tabbed'] })] }),
          new Paragraph({ children: [new TextRun('first line'), new TextRun({ text: 'second line', break: 1 })] }),
          new Table({
            rows: [
              new TableRow({ children: [new TableCell({ children: [new Paragraph('Region')] }), new TableCell({ children: [new Paragraph('Sales')] })] }),
              new TableRow({ children: [new TableCell({ children: [new Paragraph('Zürich')] }), new TableCell({ children: [new Paragraph('1,200')] })] }),
            ],
          }),
          new Paragraph('Closing remarks: café déjà vu 日本語.'),
        ],
      },
    ],
  });
  return Packer.toBuffer(doc);
}

/** A presentation of three slides; the second has two text boxes. */
export async function makePptx(): Promise<Buffer> {
  const pptx = newPresentation();
  pptx.addSlide().addText('Welcome to the launch', { x: 1, y: 1, w: 8, h: 1 });
  const second = pptx.addSlide();
  second.addText('Agenda', { x: 1, y: 0.5, w: 8, h: 1 });
  second.addText([{ text: 'First item', options: { breakLine: true } }, { text: 'Second item' }], { x: 1, y: 2, w: 8, h: 2 });
  pptx.addSlide().addText('Questions? Écrivez-nous.', { x: 1, y: 1, w: 8, h: 1 });
  return (await pptx.write({ outputType: 'nodebuffer' })) as Buffer;
}

/** A workbook of two sheets: strings, numbers, a boolean, a gap between columns, an empty row. */
export async function makeXlsx(): Promise<Buffer> {
  const workbook = new ExcelJS.Workbook();
  const sales = workbook.addWorksheet('Sales');
  sales.addRow(['Region', 'Units', 'Active']);
  sales.addRow(['North', 120, true]);
  sales.addRow(['South', 80.5, false]);
  sales.getCell('E5').value = 'far cell';
  const notes = workbook.addWorksheet('Notes 2026');
  notes.getCell('A1').value = 'Shared text';
  notes.getCell('B2').value = 'Shared text';
  return Buffer.from(await workbook.xlsx.writeBuffer());
}

const ODF_TYPES = {
  odt: 'application/vnd.oasis.opendocument.text',
  odp: 'application/vnd.oasis.opendocument.presentation',
  ods: 'application/vnd.oasis.opendocument.spreadsheet',
} as const;

const ODF_NS =
  'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" ' +
  'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" ' +
  'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"';

/** An OpenDocument file zipped from its `office:body` content (mimetype first, stored). */
export function makeOdf(kind: keyof typeof ODF_TYPES, body: string): Buffer {
  const content = `<?xml version="1.0" encoding="UTF-8"?>\n<office:document-content ${ODF_NS} office:version="1.3"><office:body>${body}</office:body></office:document-content>`;
  const manifest =
    '<?xml version="1.0" encoding="UTF-8"?><manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">' +
    `<manifest:file-entry manifest:full-path="/" manifest:media-type="${ODF_TYPES[kind]}"/><manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/></manifest:manifest>`;
  return zipFiles({ mimetype: [strToU8(ODF_TYPES[kind]), { level: 0 }], 'content.xml': strToU8(content), 'META-INF/manifest.xml': strToU8(manifest) });
}

/** An EPUB of the given chapters (XHTML bodies), its spine in the order given by `spine` (indexes into `chapters`). */
export function makeEpub(chapters: string[], spine: number[] = chapters.map((_, i) => i)): Buffer {
  const files: Zippable = { mimetype: [strToU8('application/epub+zip'), { level: 0 }] };
  files['META-INF/container.xml'] = strToU8(
    '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>',
  );
  const items = chapters.map((_, i) => `<item id="c${i}" href="text/chapter%20${i}.xhtml" media-type="application/xhtml+xml"/>`).join('');
  const refs = spine.map((i) => `<itemref idref="c${i}"/>`).join('');
  files['OEBPS/content.opf'] = strToU8(
    `<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:identifier id="id">test</dc:identifier><dc:title>Test</dc:title></metadata><manifest>${items}</manifest><spine>${refs}</spine></package>`,
  );
  chapters.forEach((body, i) => {
    files[`OEBPS/text/chapter ${i}.xhtml`] = strToU8(
      `<?xml version="1.0" encoding="UTF-8"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>Chapter ${i}</title><style>p { color: red; }</style></head><body>${body}</body></html>`,
    );
  });
  return zipFiles(files);
}

/** Zips files as given (fflate). */
export function zipFiles(files: Zippable): Buffer {
  return Buffer.from(zipSync(files));
}
