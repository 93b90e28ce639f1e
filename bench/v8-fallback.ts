/**
 * V8's breadth-first regex engine as a guard against backtracking, measured: what its fallback
 * flag costs an ordinary dense scan, and how fast that engine is where it would be needed.
 * Runs on whichever Node.js runs it (no native module), so each version can be compared.
 *
 *   node --import tsx bench/v8-fallback.ts <dir>
 *
 * 1. Every file under <dir> (for instance 3,000 files of drivers/net), as Latin-1 strings, is
 *    scanned for lines matching `\D{10}` written as UTF-8 byte sequences (the form
 *    engine/regex/byte-regex.ts prints), one `test()` a matching line, in a child process per
 *    setting: no flag; `--enable-experimental-regexp-engine-on-excessive-backtracks` with
 *    backtrack limits of 50,000 (V8's default), 10^6 and 10^8.
 * 2. The breadth-first engine itself (the `l` flag) against a line of 1 MiB of `a` then `b`,
 *    for a letter and for patterns that blow up a backtracking engine.
 *
 * Prints the lines found and the milliseconds of each (median of 3).
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { setFlagsFromString } from 'node:v8';

const D =
  '(?:[\\x00-\\x09\\x0b-\\x2f\\x3a-\\x7f]|[\\xc2-\\xdf][\\x80-\\xbf]|[\\xe0-\\xef][\\x80-\\xbf][\\x80-\\xbf]|[\\xf0-\\xf4][\\x80-\\xbf][\\x80-\\xbf][\\x80-\\xbf])';
const HOSTILE = ['x', '(a+)+$', '(a|a)*c', '(\\w+\\s?)+$', '(.*a){12}'];

const [, , dir, child] = process.argv;
if (dir === undefined) {
  process.stderr.write('usage: node --import tsx bench/v8-fallback.ts <dir>\n');
  process.exit(2);
}

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

if (child === 'scan') {
  // In a child: the flags are in execArgv.
  const texts = readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile())
    .map((e) => readFileSync(join(e.parentPath, e.name)).toString('latin1'));
  const re = new RegExp(`${D}{10}`, 'g');
  const times: number[] = [];
  let lines = 0;
  for (let r = 0; r < 3; r++) {
    const started = performance.now();
    lines = 0;
    for (const s of texts) {
      for (let pos = 0; pos < s.length; ) {
        re.lastIndex = pos;
        if (!re.test(s)) break;
        lines++;
        const nl = s.indexOf('\n', re.lastIndex - 1);
        if (nl === -1) break;
        pos = nl + 1;
      }
    }
    times.push(performance.now() - started);
  }
  const mb = texts.reduce((n, s) => n + s.length, 0) / 1e6;
  console.log(JSON.stringify({ lines, ms: median(times), mb }));
  process.exit(0);
}

console.log(`node --import tsx bench/v8-fallback.ts ${dir}  # Node.js ${process.version}\n`);
console.log('| setting | lines of `\\D{10}` | ms | times without the flag |');
console.log('|---|---|---|---|');
const FLAG = '--enable-experimental-regexp-engine-on-excessive-backtracks';
let plain = 0;
for (const [label, flags] of [
  ['no flag', []],
  ['fallback, 50,000 backtracks', [FLAG]],
  ['fallback, 10^6', [FLAG, '--regexp-backtracks-before-fallback=1000000']],
  ['fallback, 10^8', [FLAG, '--regexp-backtracks-before-fallback=100000000']],
] as const) {
  const r = spawnSync(process.execPath, [...process.execArgv, ...flags, process.argv[1], dir, 'scan'], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(r.stderr);
  const { lines, ms, mb } = JSON.parse(r.stdout) as { lines: number; ms: number; mb: number };
  if (plain === 0) plain = ms;
  console.log(`| ${label} (${mb.toFixed(1)} MB) | ${lines} | ${ms.toFixed(0)} | ${(ms / plain).toFixed(2)} |`);
}

setFlagsFromString('--enable-experimental-regexp-engine');
const line = `${'a'.repeat(1 << 20)}b`;
console.log('\n| pattern, breadth-first engine (`l`), 1 MiB line | ms |');
console.log('|---|---|');
for (const pattern of HOSTILE) {
  const re = new RegExp(pattern, 'l');
  const started = performance.now();
  re.test(line);
  console.log(`| \`${pattern.replaceAll('|', '\\|')}\` | ${(performance.now() - started).toFixed(0)} |`);
}
