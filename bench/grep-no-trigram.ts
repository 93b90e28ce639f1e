/**
 * grep over HTTP for patterns with no usable trigram, against ripgrep over the same files on
 * disk, in the same run.
 *
 *   node --import tsx bench/grep-no-trigram.ts [--runs=3] [--sample=N] [--only=REGEX]
 *     [--timeout=120] [--max-seconds=90] <corpus-dir> <data-dir>
 *
 * Every pattern here leaves the index nothing to select with (negated classes, `.`, runs of
 * `\s \w \d`, word boundaries, Unicode classes), so each search reads every file: the table
 * shows what a full scan costs next to rg's.
 *
 * <data-dir> keeps the service's data between runs: on the first run the corpus is uploaded
 * into workspace `bench` and the ingest time printed; later runs reuse it. With `--sample=N`
 * the corpus searched is N files of <corpus-dir> spread evenly over its sorted paths (file
 * ⌊i·total/N⌋ for i < N), hard-linked into `<data-dir>-corpus` (made once), so rg searches
 * exactly the files uploaded.
 *
 * For each pattern, after three full scans that warm the page cache and the read threads:
 * the median latency (whole body received) of `files_with_matches`, `count` and `content`,
 * and the median wall time of `rg -c` and `rg -n` (output drained through a pipe). `count`
 * does rg -c's work (every matching line of every file is counted to rank files by density),
 * and so does `files_with_matches`. Runs of one measurement stop early once they have taken
 * `--max-seconds` (a note says so). The service's grep deadline is raised to `--timeout`
 * seconds so that a slow pattern is measured, not cut; the `cut?` column says which modes
 * were cut all the same (the body ends with the time-limit footer), and the notes name those
 * over 30 s, the default deadline.
 *
 * Answers are checked against rg's: the file set of `files_with_matches` and every file's
 * number of `count` against `rg -c`, the number of `content` lines against `rg -n`'s. RE2's
 * `\w \d \s \b` are ASCII where rg's are Unicode, so rg gets those escapes as ASCII classes
 * (`rgPattern`).
 *
 * Prints the command, the machine and a markdown table (stdout); progress goes to stderr.
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { link, mkdir, readdir, stat } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { cpus } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { rgPattern } from '../test/helpers/rg-pattern.js';
import { call, startBenchService, uploadAll, waitReady, walk } from './lib.js';

/** The patterns, each with what it stands for. None holds a literal of three bytes. */
const PATTERNS: ReadonlyArray<readonly [pattern: string, kind: string]> = [
  ['[^ -~\\t]', 'negated class'],
  ['"[^"]*"', 'negated class'],
  ['\\([^)]*\\)', 'negated class'],
  ['[^a-z]{8}', 'negated class'],
  ['<[^>]+>', 'negated class'],
  ['^.{100,}$', 'dot'],
  ['a.b.c', 'dot'],
  ['\\s{4,}\\w', 'space and word runs'],
  ['\\w{20,}', 'space and word runs'],
  ['\\s+$', 'space and word runs'],
  ['^\\s*$', 'space and word runs'],
  ['\\d{6}', 'digit runs'],
  ['[0-9]{4}-[0-9]{2}', 'digit runs'],
  ['0x[0-9a-f]{8}', 'digit runs'],
  ['\\b\\w{3}\\b', 'word boundaries'],
  ['\\bx\\w\\b', 'word boundaries'],
  ['(\\w+,\\s*){6}', 'long repetitions'],
  ['[a-z]{12,}', 'long repetitions'],
  ['([A-Z][a-z]+ ){3}', 'long repetitions'],
  ['\\p{Greek}', 'Unicode classes'],
  ['\\pL{4}', 'Unicode classes'],
  // RE2 knows no `\P{ASCII}`; the POSIX class says the same in both dialects.
  ['[[:^ascii:]]', 'Unicode classes'],
  ['\\p{Han}', 'Unicode classes'],
  ['\\S+\\s+\\S+', 'any text'],
  ['(?s).', 'any text'],
  ['[\\s\\S]', 'any text'],
  ['\\D{10}', 'any text'],
  ['\\W{4}', 'any text'],
  [';\\s*$', 'any text'],
];

interface Options {
  corpus: string;
  dataDir: string;
  runs: number;
  sample: number | null;
  only: RegExp | null;
  timeoutSeconds: number;
  maxSeconds: number;
}

function parseOptions(argv: string[]): Options {
  const positional: string[] = [];
  const flags = new Map<string, string>();
  for (const a of argv) {
    const m = /^--([a-z-]+)=(.*)$/.exec(a);
    if (m !== null) flags.set(m[1], m[2]);
    else positional.push(a);
  }
  const known = new Set(['runs', 'sample', 'only', 'timeout', 'max-seconds']);
  if (positional.length !== 2 || [...flags.keys()].some((k) => !known.has(k))) {
    process.stderr.write(
      'usage: node --import tsx bench/grep-no-trigram.ts [--runs=3] [--sample=N] [--only=REGEX] [--timeout=120] [--max-seconds=90] <corpus-dir> <data-dir>\n',
    );
    process.exit(2);
  }
  const number = (name: string, fallback: number): number => Number(flags.get(name) ?? fallback);
  return {
    corpus: positional[0],
    dataDir: positional[1],
    runs: number('runs', 3),
    sample: flags.has('sample') ? number('sample', 0) : null,
    only: flags.has('only') ? new RegExp(flags.get('only')!) : null,
    timeoutSeconds: number('timeout', 120),
    maxSeconds: number('max-seconds', 90),
  };
}

/** N files of `source` spread evenly over its sorted paths, hard-linked into `dest` unless it already holds them. */
async function sampleCorpus(source: string, dest: string, n: number): Promise<void> {
  if (existsSync(dest)) {
    const have = (await readdir(dest, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).length;
    if (have !== n) throw new Error(`${dest} holds ${have} files, not ${n}: remove it to sample again`);
    return;
  }
  const files = await walk(source);
  if (n > files.length) throw new Error(`--sample=${n} but ${source} holds ${files.length} files`);
  for (let i = 0; i < n; i++) {
    const [full, rel] = files[Math.floor((i * files.length) / n)];
    await mkdir(dirname(join(dest, rel)), { recursive: true });
    await link(full, join(dest, rel));
  }
}

/** What a streamed answer held: its newline count and last line, never the whole body. */
interface Drained {
  ms: number;
  lines: number;
  lastLine: string;
  /** The whole output, when asked for. */
  body: Buffer | null;
}

/** Counts newlines of streamed chunks and keeps the tail, from which the last line is read. */
class Drain {
  lines = 0;
  private tail: Buffer = Buffer.alloc(0);
  private readonly chunks: Buffer[] | null;

  constructor(keep: boolean) {
    this.chunks = keep ? [] : null;
  }

  push(chunk: Buffer): void {
    for (let at = chunk.indexOf(0x0a); at !== -1; at = chunk.indexOf(0x0a, at + 1)) this.lines++;
    // A line is at most MAX_LINE_CHARS code points plus the marker: 16 KB holds the last one.
    this.tail = chunk.length >= 16_384 ? chunk.subarray(-16_384) : Buffer.concat([this.tail, chunk]).subarray(-16_384);
    this.chunks?.push(chunk);
  }

  done(t0: number): Drained {
    const text = this.tail.toString('utf8').replace(/\n$/, '');
    const lastLine = text.slice(text.lastIndexOf('\n') + 1);
    return { ms: performance.now() - t0, lines: this.lines, lastLine, body: this.chunks === null ? null : Buffer.concat(this.chunks) };
  }
}

/** rg in `cwd` (paths printed relative to it), its output drained through a pipe. */
function rg(cwd: string, args: string[], keep: boolean): Promise<Drained> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn('rg', ['--no-config', '--no-ignore', '--hidden', '--no-messages', ...args], { cwd, stdio: ['ignore', 'pipe', 'ignore'] });
    const drain = new Drain(keep);
    child.stdout.on('data', (chunk: Buffer) => drain.push(chunk));
    child.on('error', reject);
    child.on('close', (code) => (code === 2 ? reject(new Error(`rg ${args.join(' ')} failed`)) : resolve(drain.done(t0))));
  });
}

const agent = new Agent({ keepAlive: true, maxSockets: 4 });

/** A GET of the service, its body drained as it arrives (a content answer can hold gigabytes). */
function get(base: string, path: string, key: string, keep: boolean): Promise<Drained & { status: number }> {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = request(base + path, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
      const drain = new Drain(keep);
      res.on('data', (chunk: Buffer) => drain.push(chunk));
      res.on('end', () => resolve({ ...drain.done(t0), status: res.statusCode ?? 0 }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** The runs of one measurement: the first answer kept (when asked), the median time, how many runs were made. */
async function measure(runs: number, maxMs: number, once: (keep: boolean) => Promise<Drained>): Promise<{ first: Drained; ms: number; made: number }> {
  const times: number[] = [];
  let first: Drained | null = null;
  let spent = 0;
  while (times.length < runs && (times.length === 0 || spent < maxMs)) {
    const r = await once(first === null);
    first ??= r;
    times.push(r.ms);
    spent += r.ms;
  }
  return { first: first!, ms: median(times), made: times.length };
}

/** `path:N` lines (rg -c, or the service's count with a leading `/`) as a map. */
function countsOf(body: Buffer, stripSlash: boolean): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of body.toString('utf8').split('\n')) {
    if (line === '' || line.startsWith('[')) continue;
    const colon = line.lastIndexOf(':');
    counts.set(stripSlash ? line.slice(1, colon) : line.slice(0, colon), Number(line.slice(colon + 1)));
  }
  return counts;
}

const FOOTER_CUT = 'search stopped at the time limit';

/** One table row. */
interface Row {
  pattern: string;
  corpus: string;
  files: number;
  mb: number;
  fwmMs: number;
  rgCountMs: number;
  countMs: number;
  contentMs: number;
  rgLinesMs: number;
  cut: string[];
  notes: string[];
}

async function main(): Promise<void> {
  const o = parseOptions(process.argv.slice(2));
  let corpus = o.corpus;
  let label = basename(o.corpus);
  if (o.sample !== null) {
    corpus = `${o.dataDir.replace(/\/$/, '')}-corpus`;
    label = `${o.sample.toLocaleString('en-US')}-file sample`;
    await sampleCorpus(o.corpus, corpus, o.sample);
  }
  const fresh = !existsSync(o.dataDir);
  const service = await startBenchService({ DATA_DIR: o.dataDir, VFS_READ_THREADS: '2', VFS_GREP_TIMEOUT_SECONDS: String(o.timeoutSeconds) });
  const header: string[] = [];
  const rows: Row[] = [];
  try {
    if (fresh) {
      const files = await walk(corpus);
      const t0 = performance.now();
      await call(service.url, 'POST', '/v1/workspaces', service.key, JSON.stringify({ name: 'bench' }));
      const { bytes, refused } = await uploadAll(service, 'bench', files, 48);
      const errors = await waitReady(service, 'bench', 3_600_000);
      const seconds = (performance.now() - t0) / 1000;
      header.push(
        `Ingest: ${files.length} files, ${(bytes / 1e6).toFixed(1)} MB in ${seconds.toFixed(0)} s ` +
          `(${(bytes / 1e6 / seconds).toFixed(1)} MB/s), ${refused.length} refused, ${errors} in error.`,
      );
      process.stderr.write(header[header.length - 1] + '\n');
    }
    const grepPath = (pattern: string, mode: string): string => `/v1/workspaces/bench/grep?pattern=${encodeURIComponent(pattern)}&output_mode=${mode}`;
    // Three full scans warm the page cache and give each read thread the shard's catalog;
    // one rg scan warms the corpus's pages.
    for (let i = 0; i < 3; i++) await get(service.url, grepPath('\\x00', 'count'), service.key, false);
    await rg(corpus, ['-c', '-e', '\\x00'], false);

    const maxMs = o.maxSeconds * 1000;
    for (const [pattern] of PATTERNS) {
      if (o.only !== null && !o.only.test(pattern)) continue;
      const rgPat = rgPattern(pattern);
      const notes: string[] = [];
      const cut: string[] = [];
      const rgCount = await measure(o.runs, maxMs, (keep) => rg(corpus, ['-c', '-e', rgPat], keep));
      const rgLines = await measure(o.runs, maxMs, () => rg(corpus, ['-n', '-e', rgPat], false));
      const expected = countsOf(rgCount.first.body!, false);
      let bytes = 0;
      for (const path of expected.keys()) bytes += (await stat(join(corpus, path))).size;

      const service3 = async (mode: 'files_with_matches' | 'count' | 'content', keepBody: boolean) => {
        const m = await measure(o.runs, maxMs, async (keep) => {
          const r = await get(service.url, grepPath(pattern, mode), service.key, keep && keepBody);
          if (r.status !== 200) throw new Error(`${mode} ${pattern}: HTTP ${r.status} ${r.lastLine}`);
          return r;
        });
        if (m.first.lastLine.startsWith('[') && m.first.lastLine.includes(FOOTER_CUT)) cut.push(mode);
        if (m.ms > 30_000) notes.push(`${mode} over 30 s`);
        if (m.made < o.runs) notes.push(`${mode}: ${m.made} run${m.made === 1 ? '' : 's'}`);
        return m;
      };
      const fwm = await service3('files_with_matches', true);
      const count = await service3('count', true);
      const content = await service3('content', false);

      // The answers against rg's.
      const fwmPaths = new Set(
        fwm.first
          .body!.toString('utf8')
          .split('\n')
          .filter((l) => l.startsWith('/'))
          .map((l) => l.slice(1)),
      );
      const missing = [...expected.keys()].filter((p) => !fwmPaths.has(p));
      const extra = [...fwmPaths].filter((p) => !expected.has(p));
      if (missing.length + extra.length > 0)
        notes.push(`files_with_matches ≠ rg: ${missing.length} missing, ${extra.length} extra (e.g. ${[...missing, ...extra][0]})`);
      const counts = countsOf(count.first.body!, true);
      const differ = [...new Set([...counts.keys(), ...expected.keys()])].filter((p) => counts.get(p) !== expected.get(p));
      if (differ.length > 0)
        notes.push(`count ≠ rg in ${differ.length} files (e.g. ${differ[0]}: ${counts.get(differ[0]) ?? 0} vs ${expected.get(differ[0]) ?? 0})`);
      const contentLines = content.first.lines - (content.first.lastLine.startsWith('[') ? 1 : 0);
      if (contentLines !== rgLines.first.lines) notes.push(`content ≠ rg: ${contentLines} lines vs ${rgLines.first.lines}`);

      const row: Row = {
        pattern,
        corpus: label,
        files: expected.size,
        mb: bytes / 1e6,
        fwmMs: fwm.ms,
        rgCountMs: rgCount.ms,
        countMs: count.ms,
        contentMs: content.ms,
        rgLinesMs: rgLines.ms,
        cut,
        notes,
      };
      rows.push(row);
      process.stderr.write(`${tableRow(row)}\n`);
    }
  } finally {
    await service.stop();
  }
  process.stdout.write(report(o, header, rows));
}

const ms = (x: number): string => (x >= 100 ? x.toFixed(0) : x.toFixed(1));
const ratio = (a: number, b: number): string => (a / b).toFixed(2);

function tableRow(r: Row): string {
  const cells = [
    '`' + r.pattern.replaceAll('|', '\\|') + '`',
    r.corpus,
    r.files.toLocaleString('en-US'),
    r.mb.toFixed(1),
    ms(r.fwmMs),
    ms(r.rgCountMs),
    ratio(r.fwmMs, r.rgCountMs),
    ms(r.countMs),
    ratio(r.countMs, r.rgCountMs),
    ms(r.contentMs),
    ms(r.rgLinesMs),
    ratio(r.contentMs, r.rgLinesMs),
    r.cut.length === 0 ? 'no' : r.cut.join(', '),
    r.notes.join('; '),
  ];
  return `| ${cells.join(' | ')} |`;
}

function report(o: Options, header: string[], rows: Row[]): string {
  const rgVersion = spawnSync('rg', ['--version']).stdout.toString().split('\n')[0];
  const commit = spawnSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: dirname(new URL(import.meta.url).pathname) })
    .stdout.toString()
    .trim();
  const lines = [
    `Command: node --import tsx bench/grep-no-trigram.ts ${process.argv.slice(2).join(' ')}`,
    `Machine: ${cpus().length} cores (${cpus()[0]?.model ?? 'unknown CPU'}), Node.js ${process.version}, ${rgVersion}; commit ${commit}, ${new Date().toISOString()}.`,
    `Medians of ${o.runs} runs (fewer once a measurement's runs took ${o.maxSeconds} s); service grep deadline ${o.timeoutSeconds} s; 2 read threads.`,
    ...header,
    '',
    '| pattern | corpus | files | MB | fwm ms | rg -c ms | ratio | count ms | ratio | content ms | rg -n ms | ratio | cut? | notes |',
    '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|',
    ...rows.map(tableRow),
    '',
  ];
  return lines.join('\n');
}

await main();
