/**
 * Patterns for ripgrep that mean what they mean to RE2: RE2's `\w \d \s \b` are ASCII where
 * ripgrep's are Unicode. Used by the equivalence tests and the grep benchmarks.
 */

// RE2's ASCII classes spelled as Unicode-mode classes for ripgrep (a `(?-u:\D)` would match
// single bytes of multi-byte characters); RE2's `\s` is [\t\n\f\r ].
const RG_CLASSES: Record<string, string> = {
  d: '[0-9]',
  D: '[^0-9]',
  w: '[0-9A-Za-z_]',
  W: '[^0-9A-Za-z_]',
  s: '[\\t\\n\\f\\r ]',
  S: '[^\\t\\n\\f\\r ]',
  b: '(?-u:\\b)',
  B: '(?-u:\\B)',
};

/**
 * RE2's ASCII `\w \d \s \b` (and negations) as ripgrep spells them; inside a class the class
 * escapes become nested classes (`[^\w\s]` → `[^[0-9A-Za-z_][\t\n\f\r ]]`), which ripgrep reads.
 */
export function rgPattern(pattern: string): string {
  let out = '';
  let inClass = false;
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i];
    if (ch === '\\') {
      const next = pattern[i + 1];
      const assertion = next === 'b' || next === 'B';
      out += Object.hasOwn(RG_CLASSES, next) && !(inClass && assertion) ? RG_CLASSES[next] : ch + next;
      i++;
      continue;
    }
    if (ch === '[') inClass = true;
    else if (ch === ']') inClass = false;
    out += ch;
  }
  return out;
}
