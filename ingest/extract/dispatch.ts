/**
 * Extraction dispatch: decides from the bytes (not from the declared
 * Content-Type alone) whether an upload is a zip-based document (Office,
 * OpenDocument, EPUB: office.ts), a PDF or text, and hands it to the
 * matching extractor. Pure apart from loading pdfjs; it runs inside the
 * extraction process (see pool.ts), which reads the blob itself. A small
 * upload that is plainly text (text.ts, plainText) never gets here: the pool
 * reads it in the calling thread.
 *
 * A PDF is recognised by `%PDF-` within the first 1024 bytes, where readers
 * such as Acrobat and pdfjs accept it. At offset 0 the file is a PDF whatever
 * its Content-Type. Further in, it is a PDF when the upload says so
 * (Content-Type application/pdf or a `.pdf` path) or when the bytes are not
 * text; a text file that merely mentions `%PDF-` near its start stays text.
 */
import { claimedFormat, extractOffice } from './office.js';
import { extractPdf } from './pdf.js';
import { extractText, findPdfHeader, isZip, PDF_HEADER_WINDOW } from './text.js';
import type { ExtractResult } from './types.js';

function declaredPdf(contentType: string, path: string): boolean {
  const mime = contentType.split(';')[0].trim().toLowerCase();
  return mime === 'application/pdf' || mime === 'application/x-pdf' || path.toLowerCase().endsWith('.pdf');
}

/** Extracts the text of one upload from its bytes, declared Content-Type and path. */
export async function extractBuffer(bytes: Buffer, contentType: string, path: string): Promise<ExtractResult> {
  // Office, OpenDocument and EPUB files are zips, told apart by their entries; another zip is
  // refused below as an archive.
  if (isZip(bytes)) {
    const document = extractOffice(bytes, claimedFormat(contentType, path));
    if (document !== null) return document;
  }
  const header = findPdfHeader(bytes);
  if (header === 0) return extractPdf(bytes);
  if (header > 0) {
    if (declaredPdf(contentType, path)) return extractPdf(bytes);
    const asText = extractText(bytes);
    return asText.ok ? asText : extractPdf(bytes);
  }
  const asText = extractText(bytes);
  if (!asText.ok && declaredPdf(contentType, path) && bytes.length > 0) {
    return { ok: false, error: `PDF could not be parsed: no %PDF- header in the first ${PDF_HEADER_WINDOW} bytes (${asText.error})`, retryable: false };
  }
  return asText;
}
