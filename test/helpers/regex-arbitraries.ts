import fc from 'fast-check';

/** Generated patterns and texts for the property tests of the line matcher's regex forms. */

// Atoms: letters with folds beyond ASCII (k, s, ß, Σ), code points at each UTF-8 length's edges,
// Perl, POSIX and Unicode classes, negated classes, ranges across the surrogates, assertions.
const ATOMS =
  String.raw`a,b,k,K,s,S,ß,é,É,\x{212a},ſ,σ,Σ,ς,α,😀,\x{7f},\x{80},\x{7ff},\x{800},\x{ffff},\x{10000},\x{10ffff}, ,\t,\r,-,\.,.,\w,\W,\d,\D,\s,\S,\pL,\PL,\p{Greek},\pN,\p{Lu},[a-zé],[^a-z],[^k],[à-ÿ],[^\x{80}-\x{10ffff}],[[:alpha:]],[[:^space:]],[\x{d7ff}-\x{e000}],[^\pL\d],[\x{100}-\x{17f}],[^\x{7ff}],\b,\B,^,$,\A,\z,(?i:k),(?i:ß),(?-i:s),(?i:[a-k]),(?i:\W),(?s:.),(?U:a+)`.split(
    ',',
  );

export const patterns = fc.letrec<{ pattern: string; cat: string; alt: string; rep: string }>((tie) => ({
  pattern: fc.oneof({ depthSize: 'small', withCrossShrink: true }, fc.constantFrom(...ATOMS), tie('cat'), tie('alt'), tie('rep')),
  cat: fc.array(tie('pattern'), { minLength: 2, maxLength: 4 }).map((subs) => subs.join('')),
  alt: fc.array(tie('pattern'), { minLength: 2, maxLength: 3 }).map((subs) => `(?:${subs.join('|')})`),
  rep: fc.tuple(tie('pattern'), fc.constantFrom('*', '+', '?', '{2}', '{0,3}', '{1,}', '*?', '{2,5}', '+?')).map(([sub, q]) => `(?:${sub})${q}`),
})).pattern;

// Texts: the atoms' characters and their folds, bytes that are not UTF-8 (a lone lead or
// continuation byte, an overlong form, a surrogate, past 10FFFF), CRLF and empty lines.
const TOKENS: Buffer[] = [
  ...'a b k K s S ß ẞ é É \u212a ſ σ ς Σ α 😀 \u{10ffff} \uffff \u07ff \u0800 \u0100 x - . 0 9 _'.split(' '),
  ...[' ', '\t', '\r', '\r\n', '\n', '\n'],
]
  .map((s) => Buffer.from(s))
  .concat([[0xff], [0x80], [0xc3], [0xed, 0xa0, 0x80], [0xe0, 0x80, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xc0, 0x80]].map((b) => Buffer.from(b)));
export const texts = fc.array(fc.constantFrom(...TOKENS), { maxLength: 60 }).map((parts) => Buffer.concat(parts));
