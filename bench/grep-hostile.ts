/**
 * Patterns that make a backtracking engine take exponential or quadratic time, over lines of
 * 1 MiB, searched as grep's count mode searches (engine/guarded-scan.ts): RE2 alone, against
 * the scan that tries V8 first under its time limit. In the same run, on one thread.
 *
 *   node --import tsx bench/grep-hostile.ts [--mib=5] [--runs=3]
 *
 * Each pattern gets a text of `--mib` lines of 1 MiB each, made to defeat it (a run of the
 * letters it repeats, then a byte that makes the match fail at the end), so that the search
 * is larger than the two batches from which V8 is tried. Prints a markdown table: the median
 * time of each, their ratio, the engine the scan ended on, whether V8's batch was stopped at
 * its limit, and the matching lines (equal in both, or the run stops with an error).
 */
import { setV8Scans } from '../engine/guarded-scan.js';
import { countScan, scanText } from './count-scan.js';
import { median } from './lib.js';

/** [pattern, the line (without its `\n`) repeated to 1 MiB's worth of line]. */
const HOSTILE: ReadonlyArray<readonly [string, string]> = [
  ['(a+)+$', 'a*!'],
  ['(a|a)*b', 'a*'],
  ['(a|aa)+$', 'a*!'],
  ['(a*)*b', 'a*'],
  ['(a+)*b', 'a*'],
  ['(a|a?)+b', 'a*'],
  ['(a|aa|aaa)*b', 'a*'],
  ['(?:a+)+$', 'a*!'],
  ['^(a+)+$', 'a*!'],
  ['(x+x+)+y', 'x*'],
  ['(\\w+\\s?)+$', 'a*!'],
  ['^(\\w+\\s?)*$', 'a*!'],
  ['(\\w+)*!x', 'a*'],
  ['(\\w|\\d)+!x', '1*'],
  ['(\\d+)*x', '1*'],
  ['([a-z]+)*$', 'a*!'],
  ['(\\s*\\w+\\s*)+;', 'a *'],
  ['(\\S+\\s*)+x', 'a *'],
  ['(.*a){20}', 'a*'],
  ['(.*){1,32}b', 'a*'],
  ['(.+)+!x', 'a*'],
  ['(.*?a)+z', 'a*'],
  ['(.*,)*z', ',*'],
  ['([^,]*,)*z', 'a,*'],
  ['(a?){25}a{25}', 'a*'],
  ['(ab|a)*c', 'ab*'],
  ['(\\w+\\.)+\\w+@', 'a.*'],
  ['\\S+\\s+\\S+', 'x*'],
  ['\\w+\\W+\\w+', 'a*'],
  ['(a{1,10}){1,10}$', 'a*!'],
];

const MIB = 1 << 20;

function option(name: string, fallback: number): number {
  const arg = process.argv.find((a) => a.startsWith(`--${name}=`));
  return arg === undefined ? fallback : Number(arg.slice(name.length + 3));
}

/** `spec` ("a*!": a run of a's, then `!`) as a line of 1 MiB. */
function hostileLine(spec: string): string {
  const star = spec.indexOf('*');
  const unit = spec.slice(0, star);
  const tail = spec.slice(star + 1);
  return unit.repeat(Math.floor((MIB - tail.length) / unit.length)) + tail;
}

const mib = option('mib', 5);
const runs = option('runs', 3);
console.log(`node --import tsx bench/grep-hostile.ts --mib=${mib} --runs=${runs}  # Node.js ${process.version}\n`);
console.log('| pattern | RE2 alone ms | scan trying V8 ms | ratio | ended on | V8 stopped | matching lines |');
console.log('|---|---|---|---|---|---|---|');
for (const [pattern, spec] of HOSTILE) {
  const line = hostileLine(spec);
  // Each line its own document (a text of one 1 MiB line).
  const docs = Array.from({ length: mib }, () => scanText(Buffer.from(`${line}\n`, 'latin1')));
  const re2: number[] = [];
  const v8: number[] = [];
  let last: ReturnType<typeof countScan> | null = null;
  for (let r = 0; r < runs; r++) {
    setV8Scans('off');
    const a = countScan(pattern, docs);
    setV8Scans('on');
    const b = countScan(pattern, docs);
    if (a.lines !== b.lines) throw new Error(`${pattern}: ${a.lines} lines with RE2, ${b.lines} trying V8`);
    re2.push(a.ms);
    v8.push(b.ms);
    last = b;
  }
  const r = median(re2);
  const v = median(v8);
  console.log(
    `| \`${pattern.replaceAll('|', '\\|')}\` | ${r.toFixed(0)} | ${v.toFixed(0)} | ${(v / r).toFixed(2)} | ${last!.engine} | ${last!.stopped ? 'yes' : 'no'} | ${last!.lines} |`,
  );
}
