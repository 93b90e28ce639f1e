/**
 * A deterministic test corpus for comparing the engine with ripgrep: a few hundred files in
 * nested folders with unicode, long lines, CRLF, empty files, dotfiles and files without a
 * final newline. `writeCorpus` puts it on disk; the same files go into a shard.
 */

import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

/** One corpus file: path relative to the corpus root (no leading slash) and its text. */
export interface CorpusFile {
  rel: string;
  text: string;
}

// A small xorshift PRNG: the corpus is the same on every run.
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 0x100000000;
  };
}

const WORDS = [
  'int',
  'return',
  'struct',
  'static',
  'const',
  'void',
  'unsigned',
  'mutex_lock',
  'mutex_unlock',
  'spin_lock',
  'EXPORT_SYMBOL',
  'printk',
  'KERN_INFO',
  'kmalloc',
  'kfree',
  'GFP_KERNEL',
  'NULL',
  'error',
  'Error',
  'ERROR',
  'foo',
  'bar',
  'baz',
  'foobar',
  'foo_bar',
  'FooBar',
  'helper',
  'handler',
  'TODO',
  'FIXME',
  'XXX',
  'café',
  'naïve',
  'résumé',
  'Ærø',
  'straße',
  'STRASSE',
  'Ελληνικά',
  'λόγος',
  'Москва',
  'привет',
  '日本語',
  '東京',
  '中文',
  '한국어',
  'emoji😀',
  '🚀',
  'ﬁle',
  'Kelvin',
  'K',
  'x',
  'y',
  'z',
  'a1',
  'b2',
  '0x1F',
  '42',
  '3.14',
  '1e10',
  '12345',
  '2024-01-15',
  '10.0.0.1',
  'user@example.com',
  'http://example.org/path?q=1',
  '#include',
  '<stdio.h>',
  '{',
  '}',
  '(',
  ')',
  ';',
  '=>',
  '==',
  '!=',
  '&&',
  '||',
  '//',
  '/*',
  '*/',
  '\t',
  '  ',
  'def',
  'class',
  'self',
  'import',
  'from',
  'export',
  'function',
  'let',
  'var',
  'async',
  'await',
  'fn',
  'impl',
  'pub',
  'mod',
];

const DIRS = [
  '',
  'src',
  'src/net',
  'src/net/ipv4',
  'src/fs',
  'src/fs/ext4',
  'src/a',
  'src/a-b',
  'docs',
  'docs/guide',
  'tests',
  'tests/unit',
  '.github',
  '.github/workflows',
  'vendor/lib',
  'données',
  'données/été',
  'scripts',
];

const NAMES = [
  'main',
  'util',
  'helper',
  'core',
  'index',
  'README',
  'notes',
  'test_main',
  'config',
  'lock',
  'net',
  'hash',
  'données',
  'résumé',
  'data-1',
  'x_y',
  'Makefile',
  '.env',
  '.bashrc',
  'CHANGELOG',
];
const EXTS = ['.c', '.h', '.py', '.js', '.ts', '.md', '.json', '.yaml', '.txt', '.sh', '.rs', '.go', '.rb', ''];

function line(rand: () => number): string {
  const n = 1 + Math.floor(rand() * 12);
  const parts: string[] = [];
  for (let i = 0; i < n; i++) parts.push(WORDS[Math.floor(rand() * WORDS.length)]);
  const indent = rand() < 0.3 ? '    ' : rand() < 0.1 ? '\t' : '';
  return indent + parts.join(rand() < 0.8 ? ' ' : '');
}

/** The corpus: `count` files (plus a few special ones), deterministic for a seed. */
export function makeCorpus(count = 400, seed = 12345): CorpusFile[] {
  const rand = rng(seed);
  const files = new Map<string, string>();
  for (let i = 0; files.size < count; i++) {
    const dir = DIRS[Math.floor(rand() * DIRS.length)];
    const name = NAMES[Math.floor(rand() * NAMES.length)];
    const ext = name.startsWith('.') || name === 'Makefile' ? '' : EXTS[Math.floor(rand() * EXTS.length)];
    const base = (dir === '' ? '' : dir + '/') + name;
    let rel = base + (files.has(base + ext) ? `_${i}` : '') + ext;
    if (DIRS.includes(rel)) rel += '.txt'; // a file may not shadow a directory
    const kind = rand();
    const lines: string[] = [];
    const nLines = kind < 0.05 ? 0 : Math.floor(rand() * 60);
    for (let j = 0; j < nLines; j++) lines.push(rand() < 0.12 ? '' : line(rand));
    let text: string;
    if (kind < 0.05)
      text = ''; // empty file
    else if (kind < 0.15)
      text = lines.join('\r\n') + '\r\n'; // CRLF
    else if (kind < 0.25)
      text = lines.join('\n'); // no final newline
    else text = lines.join('\n') + '\n';
    files.set(rel, text);
  }
  // Special cases.
  files.set('long/minified.js', Array.from({ length: 900 }, (_, i) => `var v${i}=foo(${i});`).join('') + '\nshort line foo\n');
  files.set('long/wide.txt', 'é'.repeat(2100) + ' foo\n' + 'bar\n');
  files.set('only-newlines.txt', '\n\n\n');
  files.set('single.txt', 'x');
  files.set('crlf-only.txt', '\r\n\r\n');
  files.set('.hidden-root', 'hidden foo bar\n');
  files.set('src/.dotdir/inner.c', 'int hidden_fn(void) { return 0; }\n');
  files.set('trailing-spaces.txt', 'foo   \nbar\t\n  \n');
  // Lines that a regex searching the whole text could match across a line end (`"[^"]*"`,
  // `\([^)]*\)`, `[^;]+;`, `\s{2,}`, `(?s)a.b`, `\D{4}`, `\W\W`, ...) but no single line matches.
  files.set(
    'edges/spans.c',
    [
      'printf("hello',
      'world");',
      's = "one" + "two";',
      'call(alpha,',
      '     beta);',
      'f(x) + g(y)',
      'x =',
      '    1;',
      'y = \t',
      'z = 2;',
      'let total = a',
      '  + b;',
      'for (;;) {}',
      'data',
      'b',
      'tail a',
      'b head',
      'one ',
      ' two',
      'word',
      'next',
      'a;',
      '(',
      'abc',
      'd1',
      'ab12',
      '34cd',
      '123456789',
      'abcdefghi',
      'end;',
    ].join('\n') + '\n',
  );
  // Control characters, Unicode spaces and digits: what the Unicode classes, `[[:cntrl:]]` and
  // `[^[:print:]]` meet besides `\t` and `\r`.
  files.set(
    'edges/controls.txt',
    [
      'vertical\vtab',
      'form\ffeed',
      'bell\x07 and escape \x1b[0m',
      'delete\x7f',
      'lone\rreturn',
      'nel\u0085next',
      'nbsp\u00a0space',
      'line\u2028separator',
      'para\u2029separator',
      'em\u2003space ideographic\u3000space',
      'zero\u200bwidth',
      'arabic \u0663\u0664\u0665 digits and fullwidth \uff11\uff12\uff13',
      'plain',
    ].join('\n') + '\n',
  );
  files.set('edges/crlf-last.txt', 'x =\r\n\r\n"open\r\nclose"\r\n \t \r\nab\r\n(a;\r\nb)\r\nend');
  files.set('edges/blank.txt', '\n\n\t\n \n\t \t\n\n  \nab\n\n');
  files.set('edges/spaces-last.txt', '  \t');
  files.set('edges/cr-only.txt', 'a\rb\rc');
  return [...files.entries()].map(([rel, text]) => ({ rel, text }));
}

/** Writes the corpus under `root`. */
export function writeCorpus(root: string, files: CorpusFile[]): void {
  for (const f of files) {
    const full = join(root, f.rel);
    mkdirSync(dirname(full), { recursive: true });
    writeFileSync(full, f.text);
  }
}
