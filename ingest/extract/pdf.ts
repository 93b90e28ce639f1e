/**
 * PDF text extraction through pdfjs-dist (legacy build, the one meant for
 * Node), run inside an extraction process, never in the service's own.
 *
 * Output format (what `cat` shows and `grep` searches for a PDF):
 *
 *     --- page 1 ---
 *     First line of page one
 *     Second line of page one
 *
 *     A paragraph after a vertical gap
 *     --- page 2 ---
 *     …
 *
 * - Every page, empty ones included, starts with a marker line
 *   `--- page N ---` (N counts from 1), so `grep '^--- page '` lists the page
 *   boundaries and the last marker above a match names its page.
 * - Lines follow the content-stream order (no re-sorting, which would
 *   interleave columns). A new line starts where pdfjs reports an end of line
 *   (`hasEOL`) or where the baseline moves by more than half the text height; a
 *   downward jump of more than 1.8 line heights leaves one empty line.
 * - Control characters are dropped, trailing blanks trimmed, and the text
 *   ends with `\n`. No NUL can reach the output.
 * - A page whose text cannot be read keeps its marker, followed by the line
 *   `(text of this page could not be extracted: <reason>)`.
 * - Caps (PdfLimits): at most 5000 pages and 64 MiB of text by default; the
 *   rest is replaced by a final line `--- truncated: <what> ---`. Time and
 *   memory are capped by the pool (pool.ts).
 *
 * pdfjs is configured so that it touches nothing outside this process: no eval,
 * no font faces, no system fonts, its fake (in-thread) worker registered from
 * the package itself, and the standard fonts and CMaps read from the package's
 * own directories on disk.
 */
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { CONTROL_CHARS, type ExtractResult } from './types.js';

/** Caps on one PDF's extraction; every field is optional. */
export interface PdfLimits {
  /** Pages extracted at most; the rest is replaced by a truncation marker (default 5000). */
  maxPages?: number;
  /** Bytes of UTF-8 text produced at most; extraction stops at the line that would pass it (default 64 MiB). */
  maxTextBytes?: number;
}

/** The caps used when none are given: 5000 pages, 64 MiB of text. */
export const DEFAULT_PDF_LIMITS: Readonly<Required<PdfLimits>> = Object.freeze({ maxPages: 5000, maxTextBytes: 64 * 1024 * 1024 });

type PdfJs = typeof import('pdfjs-dist/legacy/build/pdf.mjs');

interface Loaded {
  pdfjs: PdfJs;
  /** Directory of the pdfjs-dist package, with a trailing separator added by callers. */
  packageDir: string;
}

let loading: Promise<Loaded> | null = null;

/** Loads pdfjs once per process and registers its worker code for in-thread use. */
function loadPdfJs(): Promise<Loaded> {
  loading ??= (async () => {
    const require = createRequire(import.meta.url);
    const packageDir = dirname(require.resolve('pdfjs-dist/package.json'));
    // In Node, pdfjs runs its parser on a "fake worker" in the same thread; it
    // takes the handler from globalThis.pdfjsWorker when present, otherwise it
    // imports GlobalWorkerOptions.workerSrc. Registering it here avoids that
    // dynamic import. The specifier is a variable because the worker bundle
    // ships no type declarations.
    const workerSpecifier = 'pdfjs-dist/legacy/build/pdf.worker.mjs';
    const worker: unknown = await import(workerSpecifier);
    (globalThis as { pdfjsWorker?: unknown }).pdfjsWorker = worker;
    const pdfjs = await import('pdfjs-dist/legacy/build/pdf.mjs');
    return { pdfjs, packageDir };
  })();
  return loading;
}

/**
 * Loads pdfjs ahead of a PDF, so that the extraction process's time cap is not charged for it
 * (about 0.35 s compiled, 2 s from source under tsx).
 */
export async function preparePdf(): Promise<void> {
  await loadPdfJs();
}

/** One text run of pdfjs' getTextContent (marked-content entries have no `str`). */
interface TextRun {
  str: string;
  hasEOL: boolean;
  transform: number[];
  height: number;
}

const LINE_BREAKS = /[\r\n\u2028\u2029]+/g;

function clean(s: string): string {
  return s.replace(LINE_BREAKS, ' ').replace(CONTROL_CHARS, '');
}

/** Turns one page's text runs into lines, as described at the top of the file. */
export function pageLines(items: readonly unknown[]): string[] {
  const lines: string[] = [];
  let line = '';
  let lineY: number | null = null; // baseline of the current line's last visible run
  let lineHeight = 0;
  let prevLineY: number | null = null; // baseline of the previous line written
  let prevLineHeight = 0;

  const flush = () => {
    const text = line.trimEnd();
    if (text !== '') {
      if (prevLineY !== null && lineY !== null && lines.length > 0) {
        const gap = prevLineY - lineY; // PDF y grows upwards: moving down is positive
        if (gap > 1.8 * Math.max(prevLineHeight, lineHeight, 1)) lines.push('');
      }
      lines.push(text);
      prevLineY = lineY;
      prevLineHeight = lineHeight;
    }
    line = '';
    lineY = null;
    lineHeight = 0;
  };

  for (const raw of items) {
    const item = raw as Partial<TextRun>;
    if (typeof item.str !== 'string') continue;
    const str = clean(item.str);
    const visible = str.trim() !== '';
    const y = Array.isArray(item.transform) ? Number(item.transform[5]) : NaN;
    const h = Math.abs(Number(item.height)) || (Array.isArray(item.transform) ? Math.abs(Number(item.transform[3])) : 0);
    if (visible && lineY !== null && Number.isFinite(y) && Math.abs(y - lineY) > Math.max(0.5 * Math.max(h, lineHeight), 1)) {
      flush();
    }
    line += str;
    if (visible && Number.isFinite(y)) {
      lineY = y;
      lineHeight = Math.max(lineHeight, h);
    }
    if (item.hasEOL === true) flush();
  }
  flush();
  return lines;
}

function reason(err: unknown): string {
  const message = err instanceof Error ? err.message : String(err);
  return message.trim().replace(/\.$/, '') || 'unknown error';
}

function isPasswordError(err: unknown): boolean {
  return err instanceof Error && err.name === 'PasswordException';
}

/** Extracts the text of a PDF in reading order with page markers (format at the top of this file), or a readable error. */
export async function extractPdf(bytes: Uint8Array, limits: PdfLimits = {}): Promise<ExtractResult> {
  const maxPages = limits.maxPages ?? DEFAULT_PDF_LIMITS.maxPages;
  const maxTextBytes = limits.maxTextBytes ?? DEFAULT_PDF_LIMITS.maxTextBytes;
  const { pdfjs, packageDir } = await loadPdfJs();
  // pdfjs transfers (detaches) the buffer it is given: hand it a private copy.
  const data = new Uint8Array(bytes);
  const task = pdfjs.getDocument({
    data,
    isEvalSupported: false,
    disableFontFace: true,
    useSystemFonts: false,
    stopAtErrors: false,
    enableXfa: false,
    verbosity: pdfjs.VerbosityLevel.ERRORS,
    // Read from the package directory through fs, never fetched.
    standardFontDataUrl: join(packageDir, 'standard_fonts') + '/',
    cMapUrl: join(packageDir, 'cmaps') + '/',
    cMapPacked: true,
  });
  try {
    let doc: Awaited<typeof task.promise>;
    try {
      doc = await task.promise;
    } catch (err) {
      if (isPasswordError(err)) {
        return { ok: false, error: 'PDF is encrypted and needs a password to open', retryable: false };
      }
      return { ok: false, error: `PDF could not be parsed: ${reason(err)}`, retryable: false };
    }

    const out: string[] = [];
    let bytesOut = 0;
    let pagesRead = 0;
    let firstPageError: string | null = null;
    let truncated: string | null = null;
    const pageCount = Math.min(doc.numPages, maxPages);

    pages: for (let n = 1; n <= pageCount; n++) {
      const page: string[] = [`--- page ${n} ---`];
      try {
        const p = await doc.getPage(n);
        const content = await p.getTextContent();
        for (const line of pageLines(content.items)) page.push(line); // no spread: a page may have millions of lines
        p.cleanup();
        pagesRead++;
      } catch (err) {
        firstPageError ??= reason(err);
        page.push(`(text of this page could not be extracted: ${reason(err)})`);
      }
      for (const line of page) {
        const size = Buffer.byteLength(line, 'utf8') + 1;
        if (bytesOut + size > maxTextBytes) {
          truncated = `text limit of ${maxTextBytes} bytes reached on page ${n} of ${doc.numPages}`;
          break pages;
        }
        out.push(line);
        bytesOut += size;
      }
    }
    if (truncated === null && doc.numPages > maxPages) {
      truncated = `page limit of ${maxPages} reached, pages ${maxPages + 1}-${doc.numPages} not extracted`;
    }
    if (pagesRead === 0 && firstPageError !== null) {
      return { ok: false, error: `PDF could not be parsed: ${firstPageError}`, retryable: false };
    }
    if (truncated !== null) out.push(`--- truncated: ${truncated} ---`);
    return { ok: true, text: Buffer.from(out.length > 0 ? out.join('\n') + '\n' : '', 'utf8'), kind: 'pdf' };
  } finally {
    await task.destroy();
  }
}
