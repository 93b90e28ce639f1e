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
import { readFile } from 'node:fs/promises';
import { setV8Scans } from '../engine/guarded-scan.js';
import { countScan, type ScanText, scanText } from './count-scan.js';
import { median, walk } from './lib.js';

const runsArg = process.argv.find((a) => a.startsWith('--runs='));
const runs = runsArg === undefined ? 5 : Number(runsArg.slice(7));
const [dir, ...patterns] = process.argv.slice(2).filter((a) => !a.startsWith('--runs='));
if (dir === undefined || patterns.length === 0) {
  process.stderr.write('usage: node --import tsx bench/grep-engines.ts [--runs=5] <dir> <pattern>...\n');
  process.exit(2);
}

const texts: ScanText[] = [];
for (const [path] of await walk(dir)) {
  const bytes = await readFile(path);
  if (bytes.byteLength > 0) texts.push(scanText(bytes));
}
const total = texts.reduce((n, t) => n + t.bytes.byteLength, 0);

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
    const a = countScan(pattern, texts);
    setV8Scans('on');
    const b = countScan(pattern, texts);
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
