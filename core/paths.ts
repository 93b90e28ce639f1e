/**
 * Workspace paths. A stored path is NFC-normalized and always begins with `/`
 * (`/src/main.c`). Valid paths: 1-1024 bytes after the leading `/`, segments of
 * 1-255 bytes, no empty, `.` or `..` segment, no NUL, control character or
 * backslash. Nothing here touches a real filesystem: a path is only a key.
 */

export const MAX_PATH_BYTES = 1024;
export const MAX_SEGMENT_BYTES = 255;

// biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what a path may not contain
const FORBIDDEN = /[\u0000-\u001f\u007f\\]/;

/** The result of validating a path: the canonical form, or the reason it is refused. */
export type PathCheck = { ok: true; path: string } | { ok: false; reason: string };

/**
 * Validates and canonicalizes a file path given with or without a leading `/`.
 * The input is already percent-decoded.
 */
export function checkFilePath(raw: string): PathCheck {
  if (raw.length === 0) return { ok: false, reason: 'the path is empty' };
  if (raw.length > MAX_PATH_BYTES * 4) return { ok: false, reason: `the path exceeds ${MAX_PATH_BYTES} bytes` };
  if (!raw.isWellFormed()) return { ok: false, reason: 'the path is not valid Unicode' };
  const nfc = raw.normalize('NFC');
  const body = nfc.startsWith('/') ? nfc.slice(1) : nfc;
  if (body.length === 0) return { ok: false, reason: 'the path names no file' };
  if (FORBIDDEN.test(body)) return { ok: false, reason: 'the path contains a control character, NUL or backslash' };
  if (Buffer.byteLength(body) > MAX_PATH_BYTES) return { ok: false, reason: `the path exceeds ${MAX_PATH_BYTES} bytes` };
  for (const segment of body.split('/')) {
    if (segment === '') return { ok: false, reason: 'the path has an empty segment' };
    if (segment === '.' || segment === '..') return { ok: false, reason: `the path has a "${segment}" segment` };
    if (Buffer.byteLength(segment) > MAX_SEGMENT_BYTES) {
      return { ok: false, reason: `a path segment exceeds ${MAX_SEGMENT_BYTES} bytes` };
    }
  }
  return { ok: true, path: '/' + body };
}

/**
 * Validates a directory path for the read tools: `/`, the empty string and
 * undefined mean the root; a trailing `/` is ignored. Returns `/` or `/a/b`.
 */
export function checkDirPath(raw: string | undefined): PathCheck {
  if (raw === undefined || raw === '' || raw === '/') return { ok: true, path: '/' };
  const trimmed = raw.length > 1 && raw.endsWith('/') ? raw.slice(0, -1) : raw;
  return checkFilePath(trimmed);
}
