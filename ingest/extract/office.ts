/**
 * Text of zip-based documents: Word, PowerPoint and Excel (Office Open XML: .docx, .pptx,
 * .xlsx), OpenDocument (.odt, .odp, .ods) and EPUB, run inside an extraction process. The
 * format is told by the archive's entries (the declared type and extension only name it in
 * messages). Archives are read under limits (zip-reader.ts); XML with a document type
 * declaration is refused, so no entity is ever expanded or fetched.
 *
 * Output (what `cat` shows and `grep` searches), in the manner of PDFs' `--- page N ---`:
 *
 *   Word, OpenDocument text   a line per paragraph or heading; a table row as one line of
 *                             tab-separated cells
 *   PowerPoint, OpenDocument  `--- slide N ---`, then a line per paragraph of the slide
 *   presentation
 *   Excel, OpenDocument       `--- sheet NAME ---`, then a line per row that holds a value, its
 *   spreadsheet               cells tab-separated in their columns (shared strings resolved;
 *                             numbers as stored, so dates show as serial numbers)
 *   EPUB                      `--- chapter N ---` per spine item, in spine order, its HTML as
 *                             text without scripts or styles, link targets kept as `[href]`
 *
 * Control characters are dropped, trailing blanks trimmed, and the text ends with `\n`. Past
 * MAX_TEXT_BYTES the rest is replaced by `--- truncated: … ---`. Elements nested deeper than
 * MAX_DEPTH end the file in `error`.
 */
import { convert } from 'html-to-text';
import { SaxesParser, type SaxesTagPlain } from 'saxes';
import { CONTROL_CHARS, type ExtractResult } from './types.js';
import { ArchiveError, ZipReader, type ZipLimits } from './zip-reader.js';

/** Text produced at most; the rest is replaced by a truncation marker. */
const MAX_TEXT_BYTES = 64 * 1024 * 1024;
/** XML elements open at once at most. */
const MAX_DEPTH = 1000;
/** Columns of a spreadsheet row at most (Excel's own limit). */
const MAX_COLUMNS = 16_384;

/** The formats read here, by the name messages give them. */
type Format = 'Word' | 'PowerPoint' | 'Excel' | 'OpenDocument text' | 'OpenDocument presentation' | 'OpenDocument spreadsheet' | 'EPUB';

const ODF_TYPES: Record<string, Format> = {
  'application/vnd.oasis.opendocument.text': 'OpenDocument text',
  'application/vnd.oasis.opendocument.presentation': 'OpenDocument presentation',
  'application/vnd.oasis.opendocument.spreadsheet': 'OpenDocument spreadsheet',
};

/** The format an archive's entries say it is, or null for another zip. */
function formatOf(zip: ZipReader): Format | null {
  if (zip.has('word/document.xml')) return 'Word';
  if (zip.has('ppt/presentation.xml')) return 'PowerPoint';
  if (zip.has('xl/workbook.xml')) return 'Excel';
  if (zip.has('mimetype')) {
    const mimetype = (zip.text('mimetype') ?? '').trim();
    if (mimetype === 'application/epub+zip') return 'EPUB';
    if (Object.hasOwn(ODF_TYPES, mimetype)) return ODF_TYPES[mimetype];
  }
  if (zip.has('META-INF/container.xml') && zip.names((n) => n.endsWith('.opf')).length > 0) return 'EPUB';
  return null;
}

/** The part whose absence says a zip is not the format its name or type claims. */
const MAIN_PART: Record<Format, string> = {
  Word: 'word/document.xml',
  PowerPoint: 'ppt/presentation.xml',
  Excel: 'xl/workbook.xml',
  'OpenDocument text': 'content.xml',
  'OpenDocument presentation': 'content.xml',
  'OpenDocument spreadsheet': 'content.xml',
  EPUB: 'META-INF/container.xml',
};

const EXTENSIONS: Record<string, Format> = {
  docx: 'Word',
  pptx: 'PowerPoint',
  xlsx: 'Excel',
  odt: 'OpenDocument text',
  odp: 'OpenDocument presentation',
  ods: 'OpenDocument spreadsheet',
  epub: 'EPUB',
};

/** The format an upload's path or Content-Type claims, if one read here: only a hint, for messages. */
export function claimedFormat(contentType: string, path: string): Format | null {
  const mime = contentType.split(';')[0].trim().toLowerCase();
  if (Object.hasOwn(ODF_TYPES, mime)) return ODF_TYPES[mime];
  if (mime === 'application/epub+zip') return 'EPUB';
  if (mime.includes('wordprocessingml')) return 'Word';
  if (mime.includes('presentationml')) return 'PowerPoint';
  if (mime.includes('spreadsheetml')) return 'Excel';
  const dot = path.lastIndexOf('.');
  const extension = dot === -1 ? '' : path.slice(dot + 1).toLowerCase();
  return Object.hasOwn(EXTENSIONS, extension) ? EXTENSIONS[extension] : null;
}

/**
 * Extracts a zip-based document, or returns null when the archive is no format read here and
 * the upload claims none (the caller then refuses it as a ZIP archive). The entries decide the
 * format; `claimed` (claimedFormat) only names what is missing when they match none.
 */
export function extractOffice(bytes: Uint8Array, claimed: Format | null = null, limits?: ZipLimits): ExtractResult | null {
  let zip: ZipReader;
  try {
    zip = new ZipReader(bytes, limits);
  } catch (error) {
    return failed(error, null);
  }
  let format: Format | null = null;
  try {
    format = formatOf(zip);
    if (format === null) {
      if (claimed === null) return null;
      return failed(new ArchiveError(`it lacks its part ${JSON.stringify(MAIN_PART[claimed])}`), claimed);
    }
    const out = new TextOut();
    EXTRACTORS[format](zip, out);
    return { ok: true, text: out.finish(), kind: 'document' };
  } catch (error) {
    return failed(error, format);
  }
}

function failed(error: unknown, format: Format | null): ExtractResult {
  const what = format === null ? 'ZIP archive' : `${format} document`;
  if (error instanceof ArchiveError) return { ok: false, error: `${what} refused: ${error.message}`, retryable: false };
  const message = error instanceof Error ? error.message : String(error);
  return { ok: false, error: `${what} could not be read: ${message}`, retryable: false };
}

const EXTRACTORS: Record<Format, (zip: ZipReader, out: TextOut) => void> = {
  Word: (zip, out) => walkXml(required(zip, 'word/document.xml'), wordHandler(out)),
  PowerPoint: (zip, out) => {
    const slides = relatedParts(zip, 'ppt/presentation.xml', 'p:sldId', 'ppt/');
    const parts = readAll(zip, slides);
    slides.forEach((slide, i) => {
      out.marker(`--- slide ${i + 1} ---`);
      walkXml(parts.get(slide)!, paragraphHandler(out, 'a:p', 'a:t', 'a:br', 'a:tab', 'a:pPr'));
    });
  },
  Excel: (zip, out) => {
    const shared = zip.has('xl/sharedStrings.xml') ? sharedStrings(required(zip, 'xl/sharedStrings.xml')) : [];
    const names: string[] = [];
    walkXml(required(zip, 'xl/workbook.xml'), {
      open: (tag) => {
        // The sheets relatedParts finds: those with a relationship id, in the same order.
        if (tag.name === 'sheet' && tag.attributes['r:id'] !== undefined) names.push(tag.attributes.name ?? '');
      },
    });
    const sheets = relatedParts(zip, 'xl/workbook.xml', 'sheet', 'xl/');
    const parts = readAll(zip, sheets);
    sheets.forEach((sheet, i) => {
      out.marker(`--- sheet ${names[i] ?? i + 1} ---`);
      walkXml(parts.get(sheet)!, excelSheetHandler(out, shared));
    });
  },
  'OpenDocument text': (zip, out) => walkXml(required(zip, 'content.xml'), odfHandler(out)),
  'OpenDocument presentation': (zip, out) => walkXml(required(zip, 'content.xml'), odfHandler(out)),
  'OpenDocument spreadsheet': (zip, out) => walkXml(required(zip, 'content.xml'), odfHandler(out)),
  EPUB: (zip, out) => {
    const chapters = epubChapters(zip);
    const parts = readAll(zip, chapters);
    chapters.forEach((chapter, i) => {
      out.marker(`--- chapter ${i + 1} ---`);
      out.block(htmlText(parts.get(chapter)!));
    });
  },
};

/** Parts as text, read in one pass over the archive (a pass per part would cost the whole archive each). */
function readAll(zip: ZipReader, names: readonly string[]): Map<string, string> {
  const parts = new Map<string, string>();
  for (const [name, bytes] of zip.read(names)) parts.set(name, bytes.toString('utf8'));
  for (const name of names) if (!parts.has(name)) throw new ArchiveError(`it lacks its part ${JSON.stringify(name)}`);
  return parts;
}

function required(zip: ZipReader, name: string): string {
  const text = zip.text(name);
  if (text === null) throw new ArchiveError(`it lacks its part ${JSON.stringify(name)}`);
  return text;
}

// ---------------------------------------------------------------------------------------------
// XML

interface XmlHandler {
  open?(tag: SaxesTagPlain): void;
  close?(name: string): void;
  text?(text: string): void;
}

/** Runs `handler` over an XML document's elements and text; a DOCTYPE or too deep a nesting throws. */
function walkXml(xml: string, handler: XmlHandler): void {
  const parser = new SaxesParser({ xmlns: false, position: false });
  let depth = 0;
  parser.on('doctype', () => {
    // SECURITY: no DTD, so no entity expansion (billion laughs) and no external entity.
    throw new ArchiveError('its XML declares a document type, which is refused (no entities are expanded)');
  });
  parser.on('opentag', (tag) => {
    if (++depth > MAX_DEPTH) throw new ArchiveError(`its XML nests elements deeper than ${MAX_DEPTH}`);
    handler.open?.(tag as SaxesTagPlain);
    if ((tag as SaxesTagPlain).isSelfClosing) {
      depth--;
      handler.close?.(tag.name);
    }
  });
  parser.on('closetag', (tag) => {
    if (tag.isSelfClosing) return;
    depth--;
    handler.close?.(tag.name);
  });
  if (handler.text !== undefined) {
    const onText = handler.text;
    parser.on('text', onText);
    parser.on('cdata', onText);
  }
  parser.on('error', (e) => {
    throw new ArchiveError(`its XML is malformed (${e.message.split('\n')[0]})`);
  });
  parser.write(xml).close();
}

/** The parts a document part lists by relationship id (`r:id`), in its order, as archive paths. */
function relatedParts(zip: ZipReader, part: string, element: string, base: string): string[] {
  const ids: string[] = [];
  walkXml(required(zip, part), {
    open: (tag) => {
      if (tag.name === element && tag.attributes['r:id'] !== undefined) ids.push(tag.attributes['r:id']);
    },
  });
  const slash = part.lastIndexOf('/');
  const rels = `${part.slice(0, slash)}/_rels/${part.slice(slash + 1)}.rels`;
  const targets = new Map<string, string>();
  walkXml(required(zip, rels), {
    open: (tag) => {
      if (tag.name === 'Relationship') targets.set(tag.attributes.Id ?? '', tag.attributes.Target ?? '');
    },
  });
  return ids.map((id) => {
    const target = targets.get(id);
    if (target === undefined) throw new ArchiveError(`${part} names a part ${JSON.stringify(id)} it has no relationship for`);
    return target.startsWith('/') ? target.slice(1) : resolvePath(base, target);
  });
}

/** `target` (relative, with `..` allowed) against the directory `base` (ending in `/`). */
function resolvePath(base: string, target: string): string {
  const parts = base.split('/').filter((p) => p !== '');
  for (const segment of target.split('/')) {
    if (segment === '..') parts.pop();
    else if (segment !== '.' && segment !== '') parts.push(segment);
  }
  return parts.join('/');
}

// ---------------------------------------------------------------------------------------------
// Word and PowerPoint paragraphs

/** Paragraph `p` on lines of their own, text from `t` only, `br` a line break, `tab` a TAB unless inside paragraph properties `pPr` (where it is a tab stop). */
function paragraphHandler(out: TextOut, p: string, t: string, br: string, tab: string, pPr: string): XmlHandler {
  let inText = 0;
  let inProps = 0;
  return {
    open: (tag) => {
      if (tag.name === t) inText++;
      else if (tag.name === pPr) inProps++;
      else if (inProps === 0 && tag.name === br) out.newline();
      else if (inProps === 0 && tag.name === tab) out.text('\t');
    },
    close: (name) => {
      if (name === t) inText--;
      else if (name === pPr) inProps--;
      else if (name === p) out.newline();
    },
    text: (text) => {
      if (inText > 0) out.text(text);
    },
  };
}

/** Word's body: paragraphs, and table rows as tab-separated cells (a cell's paragraphs joined by a space). */
function wordHandler(out: TextOut): XmlHandler {
  const paragraphs = paragraphHandler(out, 'w:p', 'w:t', 'w:br', 'w:tab', 'w:pPr');
  const row = new TableRow(out);
  return {
    open: (tag) => {
      if (tag.name === 'w:tr') row.begin();
      else if (tag.name === 'w:tc') row.cell();
      else if (row.open && (tag.name === 'w:br' || tag.name === 'w:cr')) out.text(' ');
      else if (tag.name === 'w:cr') out.newline();
      else paragraphs.open!(tag);
    },
    close: (name) => {
      if (name === 'w:tr') row.end();
      else if (name === 'w:p' && row.open) row.paragraphEnd();
      else paragraphs.close!(name);
    },
    text: paragraphs.text,
  };
}

/**
 * A table row being written: while one is open the output's paragraphs are its cells' text,
 * collected and written as one line of tab-separated cells at its end. Nested tables add their
 * text to the cell that holds them.
 */
class TableRow {
  private cells: string[] = [];
  private depth = 0;
  private saved = '';

  constructor(private readonly out: TextOut) {}

  get open(): boolean {
    return this.depth > 0;
  }

  begin(): void {
    if (this.depth++ > 0) return;
    this.saved = this.out.takeLine();
    this.cells = [];
  }

  cell(): void {
    if (this.depth > 1) return;
    this.flushCell();
    this.cells.push('');
  }

  paragraphEnd(): void {
    this.out.text(' ');
  }

  end(): void {
    if (--this.depth > 0) return;
    this.flushCell();
    if (this.saved !== '') {
      this.out.text(this.saved);
      this.out.newline();
    }
    const line = this.cells.map((c) => c.replace(/\s+/g, ' ').trim()).join('\t');
    this.out.text(line);
    this.out.newline();
  }

  private flushCell(): void {
    const text = this.out.takeLine();
    if (this.cells.length > 0) this.cells[this.cells.length - 1] += text;
  }
}

// ---------------------------------------------------------------------------------------------
// Excel

/** The shared strings of a workbook: each `si`'s text runs (`t`), phonetic guides (`rPh`) left out. */
function sharedStrings(xml: string): string[] {
  const strings: string[] = [];
  let current: string | null = null;
  let inText = 0;
  let inPhonetic = 0;
  walkXml(xml, {
    open: (tag) => {
      if (tag.name === 'si') current = '';
      else if (tag.name === 't') inText++;
      else if (tag.name === 'rPh') inPhonetic++;
    },
    close: (name) => {
      if (name === 'si') {
        strings.push(current ?? '');
        current = null;
      } else if (name === 't') inText--;
      else if (name === 'rPh') inPhonetic--;
    },
    text: (text) => {
      if (current !== null && inText > 0 && inPhonetic === 0) current += text;
    },
  });
  return strings;
}

/** A worksheet's rows (`row`), each cell (`c`) in the column its reference names. */
function excelSheetHandler(out: TextOut, shared: readonly string[]): XmlHandler {
  let cells: string[] = [];
  let column = 0;
  let type = '';
  let value: string | null = null;
  let inValue = false;
  return {
    open: (tag) => {
      if (tag.name === 'row') {
        cells = [];
        column = 0;
      } else if (tag.name === 'c') {
        const ref = tag.attributes.r;
        column = ref === undefined ? column + 1 : columnOf(ref);
        type = tag.attributes.t ?? 'n';
        value = null;
      } else if (tag.name === 'v' || (tag.name === 't' && type === 'inlineStr')) inValue = true;
    },
    close: (name) => {
      if (name === 'v' || name === 't') inValue = false;
      else if (name === 'c' && value !== null && column >= 1 && column <= MAX_COLUMNS) {
        cells[column - 1] = cellText(type, value, shared);
      } else if (name === 'row') writeRow(out, cells);
    },
    text: (text) => {
      if (inValue) value = (value ?? '') + text;
    },
  };
}

function cellText(type: string, value: string, shared: readonly string[]): string {
  if (type === 's') return shared[Number(value)] ?? '';
  if (type === 'b') return value === '1' ? 'TRUE' : 'FALSE';
  return value;
}

/** The 1-based column of a cell reference such as `AB12`. */
function columnOf(ref: string): number {
  let column = 0;
  for (let i = 0; i < ref.length; i++) {
    const c = ref.charCodeAt(i) | 0x20;
    if (c < 0x61 || c > 0x7a) break;
    column = column * 26 + (c - 0x60);
    if (column > MAX_COLUMNS) return MAX_COLUMNS + 1;
  }
  return column;
}

/** A row that holds a value, as tab-separated cells (empty ones between kept, trailing ones dropped). */
function writeRow(out: TextOut, cells: readonly (string | undefined)[], times = 1): void {
  let last = cells.length - 1;
  while (last >= 0 && (cells[last] ?? '') === '') last--;
  if (last < 0) return;
  const line = Array.from({ length: last + 1 }, (_, i) => (cells[i] ?? '').replace(/[\t\n\r]+/g, ' ')).join('\t');
  for (let i = 0; i < times && !out.full; i++) {
    out.text(line);
    out.newline();
  }
}

// ---------------------------------------------------------------------------------------------
// OpenDocument

/**
 * content.xml of any OpenDocument: paragraphs and headings (`text:p`, `text:h`) on lines,
 * `text:s` spaces, `text:tab`, `text:line-break`; a slide (`draw:page`) or a sheet
 * (`table:table` in a spreadsheet) starts with its marker; table rows are tab-separated cells,
 * repeated rows and cells (`number-rows-repeated`, `number-columns-repeated`) written out when
 * they hold text.
 */
function odfHandler(out: TextOut): XmlHandler {
  let spreadsheet = false;
  let slides = 0;
  let rowDepth = 0;
  let cells: string[] = [];
  let rowRepeat = 1;
  let cellRepeat = 1;
  let cell: string | null = null;
  let paragraph = 0;
  let skip = 0; // inside an annotation or a note body's citation: left out
  return {
    open: (tag) => {
      const a = tag.attributes;
      switch (tag.name) {
        case 'office:spreadsheet':
          spreadsheet = true;
          break;
        case 'draw:page':
          out.marker(`--- slide ${++slides} ---`);
          break;
        case 'table:table':
          if (spreadsheet && rowDepth === 0) out.marker(`--- sheet ${a['table:name'] ?? ''} ---`);
          break;
        case 'table:table-row':
          if (rowDepth++ === 0) {
            cells = [];
            rowRepeat = Math.min(Number(a['table:number-rows-repeated'] ?? 1) || 1, 1_048_576);
          }
          break;
        case 'table:table-cell':
        case 'table:covered-table-cell':
          if (rowDepth === 1) {
            cell = '';
            cellRepeat = Math.min(Number(a['table:number-columns-repeated'] ?? 1) || 1, MAX_COLUMNS);
          }
          break;
        case 'text:p':
        case 'text:h':
          if (skip > 0) break;
          if (cell !== null && paragraph === 0 && cell !== '') cell += ' ';
          paragraph++;
          break;
        case 'text:s':
          if (paragraph > 0 && skip === 0) add(' '.repeat(Math.min(Number(a['text:c'] ?? 1) || 1, 1000)));
          break;
        case 'text:tab':
          if (paragraph > 0 && skip === 0) add('\t');
          break;
        case 'text:line-break':
          if (paragraph > 0 && skip === 0) add(cell !== null ? ' ' : '\n');
          break;
        case 'office:annotation':
        case 'presentation:notes':
          skip++;
          break;
      }
    },
    close: (name) => {
      switch (name) {
        case 'text:p':
        case 'text:h':
          if (skip > 0) break;
          if (--paragraph === 0 && cell === null) out.newline();
          break;
        case 'table:table-cell':
        case 'table:covered-table-cell':
          if (rowDepth === 1 && cell !== null) {
            const text = cell.trim();
            for (let i = 0; i < cellRepeat && cells.length < MAX_COLUMNS; i++) cells.push(text);
            cell = null;
          }
          break;
        case 'table:table-row':
          if (--rowDepth === 0) writeRow(out, cells, rowRepeat);
          break;
        case 'office:annotation':
        case 'presentation:notes':
          skip--;
          break;
      }
    },
    text: (text) => {
      if (paragraph > 0 && skip === 0) add(text);
    },
  };
  function add(text: string): void {
    if (cell !== null) cell += text;
    else out.text(text);
  }
}

// ---------------------------------------------------------------------------------------------
// EPUB

/** The spine's chapters, in reading order, as archive paths. */
function epubChapters(zip: ZipReader): string[] {
  let opf: string | null = null;
  if (zip.has('META-INF/container.xml')) {
    walkXml(required(zip, 'META-INF/container.xml'), {
      open: (tag) => {
        if (tag.name === 'rootfile' && opf === null && tag.attributes['full-path'] !== undefined) opf = tag.attributes['full-path'];
      },
    });
  }
  opf ??= zip.names((n) => n.endsWith('.opf'))[0] ?? null;
  if (opf === null) throw new ArchiveError('it has no package document (.opf)');
  const base = opf.includes('/') ? opf.slice(0, opf.lastIndexOf('/') + 1) : '';
  const manifest = new Map<string, string>();
  const spine: string[] = [];
  walkXml(required(zip, opf), {
    open: (tag) => {
      const name = tag.name.replace(/^opf:/, '');
      if (name === 'item' && tag.attributes.id !== undefined && tag.attributes.href !== undefined) manifest.set(tag.attributes.id, tag.attributes.href);
      else if (name === 'itemref' && tag.attributes.idref !== undefined) spine.push(tag.attributes.idref);
    },
  });
  return spine.flatMap((id) => {
    const href = manifest.get(id);
    if (href === undefined) return [];
    let path: string;
    try {
      path = resolvePath(base, decodeURIComponent(href.split('#')[0]));
    } catch {
      return [];
    }
    return zip.has(path) ? [path] : [];
  });
}

/** A chapter's HTML as text: block elements on lines, no scripts or styles, links as `text [href]`. */
function htmlText(html: string): string {
  return convert(html, {
    wordwrap: false,
    selectors: [
      { selector: 'head', format: 'skip' },
      { selector: 'script', format: 'skip' },
      { selector: 'style', format: 'skip' },
      { selector: 'img', format: 'skip' },
      { selector: 'a', options: { hideLinkIfSameAsText: true, linkBrackets: ['[', ']'] } },
      ...['h1', 'h2', 'h3', 'h4', 'h5', 'h6'].map((h) => ({ selector: h, options: { uppercase: false } })),
      { selector: 'table', format: 'dataTable', options: { uppercaseHeaderCells: false } },
    ],
  });
}

// ---------------------------------------------------------------------------------------------
// Output

/** The text being built: lines with control characters dropped and trailing blanks trimmed, capped at MAX_TEXT_BYTES. */
class TextOut {
  private readonly lines: string[] = [];
  private line = '';
  private bytes = 0;
  full = false;

  /** Appends to the current line (a `\n` in `text` ends it). */
  text(text: string): void {
    if (this.full) return;
    const parts = text.split('\n');
    this.line += parts[0];
    for (let i = 1; i < parts.length; i++) {
      this.newline();
      this.line = parts[i];
    }
  }

  /** Ends the current line (an empty line when nothing was added since the last one). */
  newline(): void {
    if (this.full) return;
    const clean = this.line.replace(CONTROL_CHARS, '').trimEnd();
    this.line = '';
    this.bytes += Buffer.byteLength(clean) + 1;
    if (this.bytes > MAX_TEXT_BYTES) {
      this.full = true;
      this.lines.push(`--- truncated: the text passed ${MAX_TEXT_BYTES} bytes ---`);
      return;
    }
    this.lines.push(clean);
  }

  /** A marker line of its own, after the current line if one is open. */
  marker(line: string): void {
    if (this.line !== '') this.newline();
    this.text(line);
    this.newline();
  }

  /** Lines of text (an HTML chapter's, say), each on its own line. */
  block(text: string): void {
    if (this.line !== '') this.newline();
    this.text(text);
    if (this.line !== '') this.newline();
  }

  /** Takes the current line's text away, leaving it empty. */
  takeLine(): string {
    const line = this.line;
    this.line = '';
    return line;
  }

  finish(): Buffer {
    if (this.line !== '') this.newline();
    // Paragraphs leave single blank lines at most between them.
    const text = this.lines
      .join('\n')
      .replace(/\n{3,}/g, '\n\n')
      .replace(/^\n+/, '');
    return Buffer.from(text === '' ? '' : text.endsWith('\n') ? text : text + '\n', 'utf8');
  }
}
