/**
 * Byte strings: JavaScript strings whose code units are UTF-8 bytes (0-255), the form in which
 * the trigram plan and the required literals hold the text a pattern needs.
 */

/** The UTF-8 encoding of a code point as a byte string. */
export function utf8(cp: number): string {
  if (cp < 0x80) return String.fromCharCode(cp);
  if (cp < 0x800) return String.fromCharCode(0xc0 | (cp >> 6), 0x80 | (cp & 63));
  if (cp < 0x10000) {
    return String.fromCharCode(0xe0 | (cp >> 12), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63));
  }
  return String.fromCharCode(0xf0 | (cp >> 18), 0x80 | ((cp >> 12) & 63), 0x80 | ((cp >> 6) & 63), 0x80 | (cp & 63));
}

/**
 * `s` (code units below 0x100) as a pattern of its word characters and `\xNN` for the rest:
 * JavaScript reads it as those units (the bytes of a text read as Latin-1), and RE2 as `s` when
 * `s` is ASCII.
 */
export function literalPattern(s: string): string {
  let out = '';
  for (let i = 0; i < s.length; i++) out += /[A-Za-z0-9_]/.test(s[i]) ? s[i] : `\\x${s.charCodeAt(i).toString(16).padStart(2, '0')}`;
  return out;
}
