/**
 * The line matching of grep's count mode on one thread, RE2 alone against the scan that tries
 * V8 (engine/guarded-scan.ts), alternated in the same run over the same texts.
 *
 *   node --import tsx bench/grep-engines.ts [--runs=5] <dir> <pattern>...
 *
 * Reads every file under <dir> (for instance the sample bench/grep-no-trigram.ts links into
 * `<data-dir>-corpus`) into memory with its line starts, then for each pattern runs both scans
 * `--runs` times in turn and prints a markdown table: the median of each, their ratio, the engine
 * each run of the trying scan ended on (v: V8, r: RE2), and the matching lines (equal in every
 * run, or the run stops with an error). No HTTP, no shard: the engines alone.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { GuardedScan, setV8Scans } from '../engine/guarded-scan.js';
import { LineMatcher } from '../engine/line-matcher.js';
import { compilePattern } from '../engine/regex/pattern.js';
import { lineStarts } from '../test/helpers/line-starts.js';

const runsArg = process.argv.find((a) => a.startsWith('--runs='));
const runs = runsArg === undefined ? 5 : Number(runsArg.slice(7));
const [dir, ...patterns] = process.argv.slice(2).filter((a) => !a.startsWith('--runs='));
if (dir === undefined || patterns.length === 0) {
  process.stderr.write('usage: node --import tsx bench/grep-engines.ts [--runs=5] <dir> <pattern>...\n');
  process.exit(2);
}

interface Text {
  bytes: Buffer;
  starts: Uint32Array;
}

const entries = await readdir(dir, { recursive: true, withFileTypes: true });
const texts: Text[] = [];
for (const e of entries.filter((x) => x.isFile()).sort((a, b) => (a.parentPath + a.name < b.parentPath + b.name ? -1 : 1))) {
  const bytes = await readFile(join(e.parentPath, e.name));
  if (bytes.byteLength > 0) texts.push({ bytes, starts: lineStarts(bytes) });
}
const total = texts.reduce((n, t) => n + t.bytes.byteLength, 0);

/** One count-mode scan of every text: matching lines, time, and the engine it ended on. */
function scan(pattern: string): { lines: number; ms: number; engine: string } {
  const started = performance.now();
  const matcher = new LineMatcher(compilePattern(pattern));
  const guarded = new GuardedScan(
    matcher,
    texts.map((t) => ({ textBytes: t.bytes.byteLength })),
  );
  let lines = 0;
  for (let i = 0; i < texts.length; ) {
    i = guarded.run(
      i,
      (k) => {
        let n = 0;
        matcher.begin(texts[k].bytes, texts[k].starts);
        while (matcher.next()) n += matcher.last - matcher.first + 1;
        return n;
      },
      (_k, n) => {
        lines += n;
      },
    );
  }
  return { lines, ms: performance.now() - started, engine: guarded.engine };
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

console.log(`node --import tsx bench/grep-engines.ts --runs=${runs} ${dir} …  # Node.js ${process.version}`);
console.log(`${texts.length} files, ${(total / 1e6).toFixed(1)} MB, one thread\n`);
console.log('| pattern | RE2 alone ms | trying V8 ms | ratio | ended on | matching lines |');
console.log('|---|---|---|---|---|---|');
for (const pattern of patterns) {
  const re2: number[] = [];
  const tried: number[] = [];
  const lines = new Set<number>();
  let ends = '';
  for (let r = 0; r < runs; r++) {
    setV8Scans('off');
    const a = scan(pattern);
    setV8Scans('on');
    const b = scan(pattern);
    re2.push(a.ms);
    tried.push(b.ms);
    lines.add(a.lines).add(b.lines);
    ends += b.engine === 'v8' ? 'v' : 'r';
  }
  if (lines.size !== 1) throw new Error(`${pattern}: matching lines differ between runs: ${[...lines].join(', ')}`);
  const m = median(re2);
  const t = median(tried);
  console.log(`| \`${pattern.replaceAll('|', '\\|')}\` | ${m.toFixed(0)} | ${t.toFixed(0)} | ${(t / m).toFixed(2)} | ${ends} | ${[...lines][0]} |`);
}
