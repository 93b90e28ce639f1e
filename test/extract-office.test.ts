/**
 * Text of Office, OpenDocument and EPUB files, made by maintained writers or zipped from inline
 * XML, line by line; and archives built to hurt the extractor, each refused naming its limit.
 */
import { strToU8, zipSync } from 'fflate';
import { describe, expect, it } from 'vitest';
import { extractBuffer } from '../ingest/extract/dispatch.js';
import { extractOffice } from '../ingest/extract/office.js';
import { makeDocx, makeEpub, makeOdf, makePptx, makeXlsx, zipFiles } from './helpers/make-documents.js';

async function textOf(bytes: Buffer, path = 'file'): Promise<string> {
  const result = await extractBuffer(bytes, 'application/octet-stream', path);
  if (!result.ok) throw new Error(result.error);
  expect(result.kind).toBe('document');
  return result.text.toString('utf8');
}

async function errorOf(bytes: Buffer, path = 'file'): Promise<string> {
  const result = await extractBuffer(bytes, 'application/octet-stream', path);
  if (result.ok) throw new Error(`extracted: ${result.text.toString().slice(0, 200)}`);
  expect(result.retryable).toBe(false);
  return result.error;
}

describe('formats', () => {
  it('Word: headings and paragraphs on lines, tabs and line breaks kept, table rows as tab-separated cells', async () => {
    expect((await textOf(await makeDocx(), 'report.docx')).split('\n')).toEqual([
      'Quarterly report',
      'Revenue grew by 12% this quarter.',
      'NameValue\ttabbed',
      'first line',
      'second line',
      'Region\tSales',
      'Zürich\t1,200',
      'Closing remarks: café déjà vu 日本語.',
      '',
    ]);
  });

  it('PowerPoint: a marker per slide in presentation order, a line per paragraph', async () => {
    expect((await textOf(await makePptx(), 'deck.pptx')).split('\n')).toEqual([
      '--- slide 1 ---',
      'Welcome to the launch',
      '--- slide 2 ---',
      'Agenda',
      'First item',
      'Second item',
      '--- slide 3 ---',
      'Questions? Écrivez-nous.',
      '',
    ]);
  });

  it('Excel: a marker per sheet, rows as tab-separated cells in their columns, shared strings resolved', async () => {
    expect((await textOf(await makeXlsx(), 'book.xlsx')).split('\n')).toEqual([
      '--- sheet Sales ---',
      'Region\tUnits\tActive',
      'North\t120\tTRUE',
      'South\t80.5\tFALSE',
      '\t\t\t\tfar cell',
      '--- sheet Notes 2026 ---',
      'Shared text',
      '\tShared text',
      '',
    ]);
  });

  it('OpenDocument text: headings, paragraphs, spaces, tabs, line breaks and tables', async () => {
    const odt = makeOdf(
      'odt',
      '<office:text><text:h text:outline-level="1">Title</text:h><text:p>Hello <text:span>world</text:span><text:s text:c="3"/>spaced<text:tab/>tab</text:p>' +
        '<table:table table:name="T"><table:table-row><table:table-cell><text:p>a</text:p></table:table-cell><table:table-cell><text:p>b</text:p><text:p>c</text:p></table:table-cell></table:table-row></table:table>' +
        '<text:p>after<text:line-break/>break<office:annotation><text:p>a comment</text:p></office:annotation></text:p></office:text>',
    );
    expect((await textOf(odt, 'notes.odt')).split('\n')).toEqual(['Title', 'Hello world   spaced\ttab', 'a\tb c', 'after', 'break', '']);
  });

  it('OpenDocument presentation: a marker per slide, speaker notes left out', async () => {
    const odp = makeOdf(
      'odp',
      '<office:presentation><draw:page draw:name="p1"><draw:frame><draw:text-box><text:p>Slide one</text:p></draw:text-box></draw:frame>' +
        '<presentation:notes><draw:frame><draw:text-box><text:p>speaker notes</text:p></draw:text-box></draw:frame></presentation:notes></draw:page>' +
        '<draw:page><draw:frame><draw:text-box><text:p>Slide two</text:p><text:p>More</text:p></draw:text-box></draw:frame></draw:page></office:presentation>',
    );
    expect((await textOf(odp, 'deck.odp')).split('\n')).toEqual(['--- slide 1 ---', 'Slide one', '--- slide 2 ---', 'Slide two', 'More', '']);
  });

  it('OpenDocument spreadsheet: a marker per sheet; repeated cells and rows written out only where they hold text', async () => {
    const ods = makeOdf(
      'ods',
      '<office:spreadsheet><table:table table:name="Budget"><table:table-row><table:table-cell><text:p>Item</text:p></table:table-cell>' +
        '<table:table-cell table:number-columns-repeated="2"/><table:table-cell><text:p>Cost</text:p></table:table-cell><table:table-cell table:number-columns-repeated="16000"/></table:table-row>' +
        '<table:table-row table:number-rows-repeated="1048000"><table:table-cell table:number-columns-repeated="1024"/></table:table-row>' +
        '<table:table-row table:number-rows-repeated="2"><table:table-cell><text:p>twice</text:p></table:table-cell></table:table-row></table:table>' +
        '<table:table table:name="Empty"/></office:spreadsheet>',
    );
    expect((await textOf(ods, 'budget.ods')).split('\n')).toEqual(['--- sheet Budget ---', 'Item\t\t\tCost', 'twice', 'twice', '--- sheet Empty ---', '']);
  });

  it('EPUB: chapters in spine order with markers, no scripts or styles, link targets kept', async () => {
    const epub = makeEpub(
      [
        '<h1>One</h1><p>First <a href="https://example.com/x">link</a>.</p><script>alert("no")</script>',
        '<h2>Two</h2><p>Second chapter.</p><ul><li>item</li></ul>',
      ],
      [1, 0],
    );
    const text = await textOf(epub, 'book.epub');
    expect(text.split('\n')).toEqual([
      '--- chapter 1 ---',
      'Two',
      '',
      'Second chapter.',
      '',
      ' * item',
      '--- chapter 2 ---',
      'One',
      '',
      'First link [https://example.com/x].',
      '',
    ]);
    expect(text).not.toMatch(/alert|color: red|Chapter 0/);
  });

  it('tells formats by their entries, whatever the name, and refuses another zip as an archive', async () => {
    expect(await textOf(await makeDocx(), 'misnamed.pdf')).toContain('Quarterly report');
    const other = zipFiles({ 'a.txt': strToU8('hello') });
    expect(extractOffice(other)).toBeNull();
    expect(await errorOf(other, 'a.zip')).toMatch(/^not a text file: looks like a ZIP archive/);
    // A name or type that claims a document only names the part that is missing.
    expect(await errorOf(other, 'a.docx')).toBe('Word document refused: it lacks its part "word/document.xml"');
    const odt = await extractBuffer(other, 'application/vnd.oasis.opendocument.text', 'notes');
    expect(odt).toEqual({ ok: false, error: 'OpenDocument text document refused: it lacks its part "content.xml"', retryable: false });
  });
});

/** Sets the uncompressed size that the central directory declares for `name`. */
function declareSize(zip: Buffer, name: string, size: number): Buffer {
  const out = Buffer.from(zip);
  const nameBytes = Buffer.from(name);
  for (let at = out.indexOf(Buffer.from([0x50, 0x4b, 1, 2])); at !== -1; at = out.indexOf(Buffer.from([0x50, 0x4b, 1, 2]), at + 4)) {
    const length = out.readUInt16LE(at + 28);
    if (out.subarray(at + 46, at + 46 + length).equals(nameBytes)) {
      out.writeUInt32LE(size, at + 24);
      return out;
    }
  }
  throw new Error(`no central directory entry for ${name}`);
}

/** A Word document whose body is `xml`. */
function docxWith(xml: string): Buffer {
  return zipFiles({ '[Content_Types].xml': strToU8('<Types/>'), 'word/document.xml': strToU8(xml) });
}

describe('hostile files', () => {
  it('a zip bomb (an entry inflating a thousand times and more) is refused by its ratio', async () => {
    const bomb = Buffer.from(zipSync({ 'word/document.xml': new Uint8Array(64 * 1024 * 1024) }, { level: 9 }));
    expect(bomb.length).toBeLessThan(200_000);
    expect(await errorOf(bomb, 'bomb.docx')).toMatch(/^ZIP archive refused: entry "word\/document.xml" would inflate \d+ times, over the limit of 1000$/);
  });

  it('an entry that inflates past the size its directory declares is stopped there', async () => {
    const body = `<w:document xmlns:w="w"><w:body>${'<w:p><w:r><w:t>padding</w:t></w:r></w:p>'.repeat(2000)}</w:body></w:document>`;
    const lying = declareSize(docxWith(body), 'word/document.xml', 1000);
    expect(await errorOf(lying, 'lying.docx')).toBe('Word document refused: entry "word/document.xml" inflates past its declared size of 1000 bytes');
  });

  it('an archive of more entries than the limit is refused before anything is inflated', async () => {
    const files: Record<string, Uint8Array> = { 'word/document.xml': strToU8('<w:document/>') };
    for (let i = 0; i < 10_001; i++) files[`f/${i}`] = new Uint8Array(0);
    expect(await errorOf(zipFiles(files), 'many.docx')).toBe('ZIP archive refused: more than 10000 entries');
  });

  it('billion laughs: XML that declares entities is refused, nothing is expanded', async () => {
    const laughs =
      '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">' +
      Array.from({ length: 7 }, (_, i) => `<!ENTITY lol${i + 3} "${`&lol${i + 2};`.repeat(10)}">`).join('') +
      ']><w:document xmlns:w="w"><w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>';
    expect(await errorOf(docxWith(laughs), 'laughs.docx')).toBe(
      'Word document refused: its XML declares a document type, which is refused (no entities are expanded)',
    );
    const external = '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY x SYSTEM "file:///etc/passwd">]><w:document><w:t>&x;</w:t></w:document>';
    expect(await errorOf(docxWith(external), 'xxe.docx')).toMatch(/declares a document type/);
    expect(await errorOf(docxWith('<w:document><w:t>&undefined;</w:t></w:document>'), 'entity.docx')).toMatch(/^Word document refused: its XML is malformed/);
  });

  it('a deeply nested document is refused at the nesting limit', async () => {
    const deep = `<w:document>${'<w:p>'.repeat(100_000)}${'</w:p>'.repeat(100_000)}</w:document>`;
    expect(await errorOf(docxWith(deep), 'deep.docx')).toBe('Word document refused: its XML nests elements deeper than 1000');
    const deepHtml = makeEpub([`${'<div>'.repeat(50_000)}x${'</div>'.repeat(50_000)}`]);
    expect(await errorOf(deepHtml, 'deep.epub')).toMatch(/^EPUB document (refused|could not be read)/);
  });

  it('a truncated file is refused as damaged', async () => {
    const whole = await makeDocx();
    for (const cut of [whole.length - 10, Math.floor(whole.length / 2), 100]) {
      expect(await errorOf(whole.subarray(0, cut), 'cut.docx')).toMatch(/^(ZIP archive|Word document) refused: .*(truncated|damaged)/);
    }
    expect(await errorOf(whole.subarray(0, whole.length - 10), 'cut.docx')).toMatch(/truncated/);
  });
});
