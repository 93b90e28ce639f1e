/**
 * The Content-Type an upload carries, guessed from the file name's extension.
 * The service stores it and echoes it on reads; extraction itself looks at the
 * bytes, so a wrong guess costs nothing but a misleading label.
 */
import { extname } from 'node:path';

const TEXT = 'text/plain; charset=utf-8';

/** Extension (lower case, with the dot) to media type. */
const BY_EXTENSION: Record<string, string> = {
  '.txt': TEXT,
  // Markdown is sent as plain text: it is read as text, and every client knows text/plain.
  '.md': TEXT,
  '.markdown': TEXT,
  '.rst': TEXT,
  '.adoc': TEXT,
  '.csv': 'text/csv; charset=utf-8',
  '.tsv': 'text/tab-separated-values; charset=utf-8',
  '.log': TEXT,
  '.html': 'text/html; charset=utf-8',
  '.htm': 'text/html; charset=utf-8',
  '.xml': 'application/xml',
  '.json': 'application/json',
  '.yaml': 'application/yaml',
  '.yml': 'application/yaml',
  '.pdf': 'application/pdf',
  '.docx': 'application/vnd.openxmlformats-officedocument.wordprocessingml.document',
  '.xlsx': 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet',
  '.pptx': 'application/vnd.openxmlformats-officedocument.presentationml.presentation',
  '.odt': 'application/vnd.oasis.opendocument.text',
  '.ods': 'application/vnd.oasis.opendocument.spreadsheet',
  '.odp': 'application/vnd.oasis.opendocument.presentation',
  '.epub': 'application/epub+zip',
};

/** The media type of a file by its extension; `application/octet-stream` when the extension is not in the table. */
export function contentTypeOf(path: string): string {
  return BY_EXTENSION[extname(path).toLowerCase()] ?? 'application/octet-stream';
}
