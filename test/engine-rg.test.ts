/**
 * The engine against ripgrep (and `cat -n`) on the same corpus: files_with_matches sets,
 * count values and content lines (per file, with context separators) must equal what `rg`
 * reports for the same files. Outside multiline mode no match spans a line end (ripgrep removes
 * `\n` from the regex), and a pattern that names the line break itself is refused, as ripgrep
 * refuses it.
 *
 * RE2's `\w \d \s \b` are ASCII while ripgrep's are Unicode, so ripgrep gets those escapes as
 * explicit ASCII classes (rgPattern): the comparison is about line matching, not dialects.
 */

import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import picomatch from 'picomatch';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cat, find, grep, type GrepRequest, setV8Scans } from '../engine/index.js';
import { scanCounts } from '../engine/guarded-scan.js';
import { comparePaths, formatLine } from '../engine/tool-output.js';
import { makeCorpus, writeCorpus, type CorpusFile } from './helpers/engine-corpus.js';
import { rgPattern } from './helpers/rg-pattern.js';
import { buildShard, output, toolError, type TestShard } from './helpers/engine-shard.js';

const RG = '/usr/bin/rg';

interface Case {
  pattern: string;
  i?: boolean;
  multiline?: boolean;
  A?: number;
  B?: number;
  C?: number;
  glob?: string;
  path?: string; // relative to the corpus root
  type?: string;
}

/**
 * Patterns that RE2 could let match a `\n` when it searches a whole document (negated classes,
 * `\s`, `\D`, `\W`, `\P{…}`, `.` under `(?s)`, ranges holding it). ripgrep removes `\n` from
 * them, so they match inside one line only; the corpus holds lines they would match across
 * (edges/*): CRLF ends, tabs, control characters, Unicode spaces, blank lines, no final newline.
 */
const NEWLINE_CAPABLE: Case[] = [
  { pattern: '[^a-z]' },
  { pattern: '[^a-z]', i: true },
  { pattern: '[^a]' },
  { pattern: '[^ -~\\t]' },
  { pattern: '[^ -~\\t]', i: true },
  { pattern: '"[^"]*"' },
  { pattern: '\\([^)]*\\)' },
  { pattern: '[^;]+;' },
  { pattern: '[^\\n]' },
  { pattern: '[^\\n\\r]{3}' },
  { pattern: '[\\n-\\r]' }, // \v \f \r remain
  { pattern: '[\\t-\\n]' }, // \t remains
  { pattern: '\\s+' },
  { pattern: '\\s{2,}' },
  { pattern: '^\\s+$' },
  { pattern: '=\\s*$' },
  { pattern: '\\S+\\s+\\S+' },
  { pattern: '\\S+\\s+\\S+', i: true },
  { pattern: '[\\s]+' },
  { pattern: '[^\\w\\s]' },
  { pattern: '(?s).' },
  { pattern: '(?s)a.b' },
  { pattern: '(?s)a.b', i: true },
  { pattern: '(?s:a.b)' },
  { pattern: '(?s)^.{0,3}$' },
  { pattern: '(?s)foo.*bar' },
  { pattern: '[\\s\\S]' },
  { pattern: '[\\s\\S]{3}' },
  { pattern: '\\D' },
  { pattern: '\\D{4}' },
  { pattern: '\\W' },
  { pattern: '\\W', i: true },
  { pattern: '\\W\\W' },
  { pattern: '\\W+$' },
  { pattern: '\\P{L}' },
  { pattern: '\\P{L}{3}' },
  { pattern: '\\pC' },
  { pattern: '\\p{Cc}' },
  { pattern: '[[:space:]]+' },
  { pattern: '[[:cntrl:]]' },
  { pattern: '[^[:print:]]' },
  { pattern: '[[:^print:]]' },
  { pattern: '[\\x00-\\x7f]{10}' },
  { pattern: '[\\x00-\\x7f]+' },
];

// The context each NEWLINE_CAPABLE case is also compared with, in turn.
const CONTEXTS: Pick<Case, 'A' | 'B' | 'C'>[] = [{ C: 1 }, { A: 2 }, { B: 2 }, { A: 1, B: 3 }];

/**
 * Patterns that name the line break itself: ripgrep refuses them outside multiline mode ("the
 * literal '\n' is not allowed in a regex"), and so must the engine; with multiline they match.
 */
const LINE_BREAK_PATTERNS = [
  '\\n',
  '[\\n]',
  'a\\nb',
  '[\\n]|b',
  'b|[\\n]',
  '\\x0a',
  '\\x0A',
  '\\x{a}',
  '[\\x0a]',
  '[\\n\\n]',
  '[\\n-\\n]',
  '[^\\x00-\\x09\\x0b-\\x{10ffff}]', // a class of \n alone
  '\\n?',
  '(\\n)?a',
  'a|\\n',
  '(?i)\\n',
  '(?s)\\n',
  ';\\s*\\n',
  'foo\nbar', // a raw line break in the pattern
];

const CASES: Case[] = [
  // literals
  { pattern: 'foo' },
  { pattern: 'mutex_lock' },
  { pattern: 'EXPORT_SYMBOL' },
  { pattern: 'café' },
  { pattern: '日本語' },
  { pattern: 'emoji😀' },
  { pattern: 'http://example.org/path' },
  { pattern: 'foo bar' },
  { pattern: '0x1F' },
  { pattern: '#include <stdio.h>' },
  { pattern: 'zzz_not_there' },
  { pattern: 'var v899=foo' },
  // classes
  { pattern: '[0-9]{3}' },
  { pattern: '[A-Z]{4,}' },
  { pattern: '[a-z]+_[a-z]+' },
  { pattern: 'mutex_(un)?lock' },
  { pattern: '\\d+\\.\\d+' },
  { pattern: '[^a-z ]{5}' },
  { pattern: '[[:upper:]]{3}' },
  // alternations
  { pattern: 'foo|bar' },
  { pattern: 'printk|kfree|kmalloc' },
  { pattern: '(TODO|FIXME|XXX):?' },
  { pattern: 'café|naïve|résumé' },
  { pattern: 'Москва|東京' },
  // anchors and boundaries
  { pattern: '^int' },
  { pattern: '^\\s*$' },
  { pattern: ';$' },
  { pattern: '^$' },
  { pattern: '^' },
  { pattern: '$' },
  { pattern: '^[ \\t]+return' },
  { pattern: '\\bint\\b' },
  { pattern: '\\bfoo' },
  { pattern: 'bar\\b' },
  { pattern: '\\Bar' },
  { pattern: '^\\S+$' },
  // text-edge assertions: ripgrep matches each line alone, so they mean the line's edges
  { pattern: '\\Aint' },
  { pattern: ';\\z' },
  { pattern: '(?-m)^\\s*return' },
  { pattern: '(?i-m:^INT)' },
  // repetitions
  { pattern: 'o{2,}' },
  { pattern: '(foo){2}' },
  { pattern: 'ba+z?' },
  { pattern: 'x*' },
  { pattern: 'a.*b' },
  { pattern: 'f.o' },
  { pattern: '.{80,}' },
  // case-insensitive
  { pattern: 'error', i: true },
  { pattern: 'STRASSE', i: true },
  { pattern: 'ΕΛΛΗΝΙΚΆ', i: true },
  { pattern: 'kelvin', i: true },
  { pattern: 'k', i: true },
  { pattern: 'foo|BAR', i: true },
  { pattern: 'spin_lock', i: true }, // a prefix starting with s: the RegExpFinder prefilter
  { pattern: 'static\\s+int', i: true },
  { pattern: '\\w+_unlock', i: true },
  { pattern: 'kmalloc|kfree', i: true },
  { pattern: 'KELVIN', i: true }, // also as U+212A KELVIN SIGN + elvin
  { pattern: '(?i)spin_lock|KFREE' }, // read as -i
  { pattern: '(?i)mutex_(?-i)lock' },
  // unicode classes
  { pattern: '\\pL{4}' },
  { pattern: '\\p{Greek}+' },
  { pattern: '\\p{Han}' },
  { pattern: '[\\p{Cyrillic}]{3}' },
  { pattern: '\\PL{3}' },
  // no usable trigram
  { pattern: 'a1' },
  { pattern: '\\d' },
  { pattern: '[xyz]' },
  { pattern: '..' },
  { pattern: '\\s{2}' },
  { pattern: '\\t' },
  { pattern: '\\r$' },
  { pattern: '\\r' },
  // patterns that could match a newline in a whole-buffer search
  { pattern: '[^x]*foo' },
  { pattern: 'foo\\s+bar' },
  { pattern: 'o\\W+b' },
  { pattern: '\\D{3}foo' },
  { pattern: 'bar[\\s\\S]*baz' },
  { pattern: '\\s$' },
  // context
  { pattern: 'foo', C: 2 },
  { pattern: 'TODO', A: 1 },
  { pattern: 'return', B: 3 },
  { pattern: 'kfree', A: 2, B: 1 },
  { pattern: '^$', C: 1 },
  { pattern: 'foo|bar', C: 5 },
  // glob, path, type
  { pattern: 'foo', glob: '*.c' },
  { pattern: 'foo', glob: '!*.md' },
  { pattern: 'foo', glob: 'src/**' },
  { pattern: 'foo', glob: '!vendor' },
  { pattern: 'foo', glob: '*.{c,h}' },
  { pattern: 'foo', glob: '.*' },
  { pattern: 'int', path: 'src' },
  { pattern: 'int', path: 'src/net', glob: '*.c' },
  { pattern: 'foo', path: 'données' },
  { pattern: 'foo', path: 'src', glob: 'net/**' },
  { pattern: 'foo', path: 'long/wide.txt' },
  { pattern: 'foo', type: 'py' },
  { pattern: 'foo', type: 'md' },
  { pattern: 'int', type: 'c' },
  { pattern: 'foo', type: 'sh' },
  // multiline
  { pattern: 'foo\\nbar', multiline: true },
  { pattern: 'int.*\\n.*return', multiline: true },
  { pattern: '\\{[^}]*\\}', multiline: true },
  { pattern: '^$\\n^$', multiline: true },
  // patterns naming the line break: refused outside multiline mode (LINE_BREAK_PATTERNS)
  ...LINE_BREAK_PATTERNS.map((pattern) => ({ pattern, multiline: true })),
  // newline-capable patterns, each alone and with context
  ...NEWLINE_CAPABLE.flatMap((c, k) => [c, { ...c, ...CONTEXTS[k % CONTEXTS.length] }]),
];

let root: string;
let corpus: CorpusFile[];
let shard: TestShard;
let known: Set<string>; // '/'-prefixed paths
let longestPath: number;

beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'engine-rg-'));
  corpus = makeCorpus();
  writeCorpus(root, corpus);
  shard = await buildShard(corpus.map((f) => ({ path: '/' + f.rel, text: f.text })));
  known = new Set(corpus.map((f) => '/' + f.rel));
  longestPath = Math.max(...[...known].map((p) => p.length));
});
afterAll(async () => {
  await shard.close();
  rmSync(root, { recursive: true, force: true });
});

type Mode = 'files' | 'count' | 'content';

/** rg's answers by case and mode: the V8 section asks for each again, and the corpus does not change. */
const rgAnswers = new Map<string, string[]>();

/** rg's answer for a case (once per case and mode). */
function rg(c: Case, mode: Mode): string[] {
  const key = `${mode} ${label(c)}`;
  const answer = rgAnswers.get(key) ?? runRg(c, mode);
  rgAnswers.set(key, answer);
  return [...answer];
}

/** Runs rg for a case; returns its stdout with paths rewritten to the engine's `/`-form. */
function runRg(c: Case, mode: Mode): string[] {
  const args = ['--no-config', '--hidden', '--no-ignore', '--no-messages', '--color', 'never', '--with-filename'];
  if (c.i) args.push('-i');
  if (c.multiline) args.push('-U', '--multiline-dotall');
  if (c.glob !== undefined) args.push('--glob', c.glob);
  if (c.type !== undefined) args.push('-t', c.type);
  if (mode === 'files') args.push('-l');
  if (mode === 'count') args.push('--count');
  if (mode === 'content') {
    args.push('-n', '--no-heading');
    if (c.A !== undefined) args.push('-A', String(c.A));
    if (c.B !== undefined) args.push('-B', String(c.B));
    if (c.C !== undefined) args.push('-C', String(c.C));
  }
  const isFile = c.path !== undefined && statSync(join(root, c.path)).isFile();
  const cwd = c.path === undefined || isFile ? root : join(root, c.path);
  args.push('-e', rgPattern(c.pattern), isFile ? c.path! : '.');
  const r = spawnSync(RG, args, { cwd, maxBuffer: 1 << 28 });
  if (r.status === 2) throw new Error(`rg failed: ${r.stderr.toString()}`);
  const base = c.path === undefined || isFile ? '/' : `/${c.path}/`;
  return r.stdout
    .toString('utf8')
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => (l === '--' ? l : l.startsWith('./') ? base + l.slice(2) : '/' + l));
}

function engine(c: Case, mode: Mode): string[] {
  const request: GrepRequest = {
    claims: null,
    pattern: c.pattern,
    caseInsensitive: c.i,
    multiline: c.multiline,
    glob: c.glob,
    type: c.type,
    path: c.path,
    outputMode: mode === 'files' ? 'files_with_matches' : mode === 'count' ? 'count' : 'content',
    after: c.A,
    before: c.B,
    context: c.C,
  };
  return output(grep(shard.reader, request))
    .split('\n')
    .filter((l) => l !== '');
}

/** Splits `path<sep>rest` at the longest known path (names may contain `-` and `:`). */
function splitPath(line: string): [string, string] {
  for (let end = Math.min(longestPath, line.length - 1); end > 0; end--) {
    if ((line[end] === ':' || line[end] === '-') && known.has(line.slice(0, end))) return [line.slice(0, end), line.slice(end)];
  }
  throw new Error(`no known path in ${JSON.stringify(line)}`);
}

/** Content output → per file: its lines (`:N:text` / `-N-text`) and `--` between its groups. */
function perFile(lines: string[], cutLongLines: boolean): Map<string, string[]> {
  const files = new Map<string, string[]>();
  let previous = '';
  let separator = false;
  for (const line of lines) {
    if (line === '--') {
      separator = true;
      continue;
    }
    let [path, rest] = splitPath(line);
    if (cutLongLines) {
      const m = /^([:-]\d+[:-])(.*)$/s.exec(rest)!;
      const text = Buffer.from(m[2], 'utf8');
      rest = m[1] + formatLine(text, 0, text.length);
    }
    const list = files.get(path) ?? [];
    if (separator && previous === path) list.push('--');
    list.push(rest);
    files.set(path, list);
    previous = path;
    separator = false;
  }
  return files;
}

function label(c: Case): string {
  const flags = Object.entries(c)
    .filter(([k]) => k !== 'pattern')
    .map(([k, v]) => `${k}=${String(v)}`)
    .join(' ');
  return `${JSON.stringify(c.pattern)} ${flags}`;
}

describe('grep equals ripgrep', () => {
  it('has the corpus and ripgrep', () => {
    expect(existsSync(RG)).toBe(true);
    expect(corpus.length).toBeGreaterThanOrEqual(400);
    expect(CASES.length).toBeGreaterThanOrEqual(60);
  });

  it.each(CASES.map((c) => [label(c), c] as const))('%s', (_, c) => {
    const files = engine(c, 'files');
    expect([...files].sort()).toEqual(rg(c, 'files').sort());
    if (!c.multiline) {
      // ripgrep -U counts differently (per match group); the engine counts matching lines.
      const count = engine(c, 'count');
      expect(new Set(count)).toEqual(new Set(rg(c, 'count')));
      // Densest first: counts ÷ lines never increase down the list.
      expect(count.map((l) => l.slice(0, l.lastIndexOf(':')))).toEqual(files);
    }
    const content = engine(c, 'content');
    expect(perFile(content, false)).toEqual(perFile(rg(c, 'content'), true));
    const order = [...perFile(content, false).keys()];
    expect(order).toEqual([...order].sort(comparePaths));
  });
});

describe('grep equals ripgrep with V8 scanning (engine/guarded-scan.ts)', () => {
  const v8Before = scanCounts.v8;
  beforeAll(() => setV8Scans('always')); // every search takes V8, whatever its size
  afterAll(() => setV8Scans('off'));

  it.each(CASES.filter((c) => !c.multiline).map((c) => [label(c), c] as const))('%s', (_, c) => {
    const files = engine(c, 'files');
    expect([...files].sort()).toEqual(rg(c, 'files').sort());
    expect(new Set(engine(c, 'count'))).toEqual(new Set(rg(c, 'count')));
    expect(perFile(engine(c, 'content'), false)).toEqual(perFile(rg(c, 'content'), true));
  });

  it('scanned with V8', () => {
    expect(scanCounts.v8).toBeGreaterThan(v8Before);
  });
});

describe('a pattern naming the line break', () => {
  it.each(
    LINE_BREAK_PATTERNS.flatMap(
      (p) =>
        [
          [p, false],
          [p, true],
        ] as const,
    ),
  )('%j (-i %s) is refused outside multiline mode, as ripgrep refuses it', (pattern, i) => {
    const r = spawnSync(RG, ['--no-config', ...(i ? ['-i'] : []), '-e', rgPattern(pattern), '.'], { cwd: root });
    expect(r.status).toBe(2);
    expect(r.stderr.toString('utf8')).toContain('the literal \'"\\n"\' is not allowed in a regex');
    const error = toolError(grep(shard.reader, { claims: null, pattern, caseInsensitive: i }));
    expect(error?.code).toBe('INVALID_PARAMETER');
    expect(error?.message).toMatch(/^invalid pattern: /);
    expect(error?.message).toContain('multiline=true');
  });
});

describe('find and cat on the corpus', () => {
  const all = (): string[] => corpus.map((f) => '/' + f.rel);
  // glob → an independent predicate over paths relative to the root
  const cases: [string, (rel: string) => boolean][] = [
    ['**/*.md', (r) => r.endsWith('.md')],
    ['*.md', (r) => !r.includes('/') && r.endsWith('.md')],
    ['src/**', (r) => r.startsWith('src/')],
    ['**/.*', (r) => r.split('/').pop()!.startsWith('.')],
    ['**/*main*', (r) => r.split('/').pop()!.includes('main')],
    ['données/**/*.c', (r) => r.startsWith('données/') && r.endsWith('.c')],
    ['**/README.md', (r) => r === 'README.md' || r.endsWith('/README.md')],
  ];
  it.each(cases)('find %s', (pattern, predicate) => {
    // The shard was written in one batch, in corpus order: updatedAt grows with the index.
    const order = new Map(all().map((p, i) => [p, i]));
    const expected = all()
      .filter((p) => predicate(p.slice(1)))
      .sort((a, b) => order.get(b)! - order.get(a)! || comparePaths(a, b));
    const got = output(find(shard.reader, { claims: null, pattern, headLimit: 1000 }))
      .split('\n')
      .filter((l) => l);
    expect(got).toEqual(expected);
    expect(expected.every((p) => picomatch(pattern, { dot: true })(p.slice(1)))).toBe(true);
  });

  it('cat equals cat -n for files with ordinary lines', () => {
    let compared = 0;
    for (const f of corpus) {
      const lines = f.text.split('\n');
      if (f.text === '' || lines.length > 2000 || lines.some((l) => [...l].length > 2000)) continue;
      const expected = spawnSync('cat', ['-n', f.rel], { cwd: root }).stdout.toString('utf8');
      const got = output(cat(shard.reader, { claims: null, path: f.rel }));
      expect(got).toBe(expected.endsWith('\n') ? expected : expected + '\n');
      compared++;
    }
    expect(compared).toBeGreaterThan(300);
  });
});
