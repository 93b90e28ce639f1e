/**
 * The Content-Type an upload carries, guessed from the file name's extension, for the command
 * line's push and the console's uploads (a browser's own guess calls `.ts` a video). The
 * service stores it and echoes it on reads; extraction itself looks at the bytes, so a wrong
 * guess costs nothing but a misleading label. No Node.js import: the console's bundle takes it.
 */

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
  const name = path.slice(path.lastIndexOf('/') + 1);
  const dot = name.lastIndexOf('.');
  return (dot > 0 ? BY_EXTENSION[name.slice(dot).toLowerCase()] : undefined) ?? 'application/octet-stream';
}
