/**
 * `npm run build`, which `npm start` runs first: while it replaces the compiled service, `dist/`
 * is never missing, half written or a mix of two builds (the command line, or a second start,
 * may run from the same checkout meanwhile), the command line stays executable, and the build a
 * running service was started from stays on disk. A build of unchanged sources is the current
 * build itself: every file it makes, the console's compressed ones included, is the same. And
 * when the sources are those the current build records, nothing is compiled at all.
 */
import { spawn, spawnSync } from 'node:child_process';
import {
  appendFileSync,
  cpSync,
  existsSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  realpathSync,
  renameSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { ROOT } from '../service/script-args.js';

const DIST = join(ROOT, 'dist');
const BUILDS = join(ROOT, '.build');
const WATCHED = ['cli/main.js', 'service/main.js', 'api/server.js', 'db/migrations/001-foundation.sql', 'console/index.html'];

/** What each watched file holds, read through `dist`. */
function contents(): Buffer[] {
  return WATCHED.map((file) => readFileSync(join(DIST, file)));
}

test('dist/ is whole and of one build all through a rebuild, and the build before it stays', { timeout: 180_000 }, async () => {
  const built = contents();
  // A build that differs from what the sources make: a copy of the current one with a line
  // added to each watched file, put in place as the build does it.
  const stale = join(BUILDS, `${Date.now()}-planted-by-test`);
  cpSync(join(ROOT, readlinkSync(DIST)), stale, { recursive: true });
  for (const file of WATCHED)
    appendFileSync(join(stale, file), file.endsWith('.sql') ? '\n-- planted\n' : file.endsWith('.html') ? '\n<!-- planted -->\n' : '\n// planted\n');
  // It was made from other sources, as its digest of them says.
  writeFileSync(join(stale, '.sources'), 'other sources\n');
  const link = join(ROOT, `.dist-test-${process.pid}`);
  symlinkSync(join('.build', stale.slice(BUILDS.length + 1)), link);
  renameSync(link, DIST);
  const planted = contents();
  expect(planted.map((b, i) => b.equals(built[i]))).toEqual(WATCHED.map(() => false));

  const build = spawn('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  let finished = false;
  const done = new Promise<number | null>((resolve) =>
    build.on('exit', (code) => {
      finished = true;
      resolve(code);
    }),
  );
  const seen = new Set<string>();
  let polls = 0;
  while (!finished) {
    // Each poll reads every watched file of the build `dist` points at (resolved once, as Node
    // resolves a module's real path: the link may move to the new build between two reads):
    // all of the planted build, or all of the new one.
    const current = existsSync(DIST) ? realpathSync(DIST) : null;
    const now = WATCHED.map((file) => (current !== null && existsSync(join(current, file)) ? readFileSync(join(current, file)) : null));
    if (now.some((b) => b === null)) seen.add('a file missing');
    else if (now.every((b, i) => b!.equals(planted[i]))) seen.add('planted');
    else if (now.every((b, i) => b!.equals(built[i]))) seen.add('built');
    else seen.add('a mix of builds');
    if ((statSync(join(DIST, 'cli/main.js')).mode & 0o111) === 0) seen.add('cli/main.js not executable');
    polls++;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  expect(await done).toBe(0);
  expect(polls).toBeGreaterThan(20);
  expect([...seen].filter((s) => s !== 'planted' && s !== 'built')).toEqual([]);
  expect(contents().map((b, i) => b.equals(built[i]))).toEqual(WATCHED.map(() => true));
  // The planted build stays for a service started on it, and no staging folder is left.
  expect(existsSync(stale)).toBe(true);
  expect(readdirSync(BUILDS).filter((name) => name.startsWith('staging-'))).toEqual([]);
});

/** Runs `npm run build` with `args` to its end; what it printed. */
function build(...args: string[]): string {
  const run = spawnSync('npm', ['run', '--silent', 'build', '--', ...args], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] });
  expect(run.status).toBe(0);
  return run.stdout;
}

test('a build of unchanged sources keeps the current build', { timeout: 180_000 }, () => {
  build();
  const current = readlinkSync(DIST);
  expect(existsSync(join(DIST, 'console/index.html.br'))).toBe(true);
  // Compiled again, with NODE_ENV as a test runner sets it: the same files.
  const env = process.env.NODE_ENV;
  process.env.NODE_ENV = 'test';
  try {
    expect(build('--force')).not.toMatch(/nothing to compile/);
  } finally {
    process.env.NODE_ENV = env;
  }
  expect(readlinkSync(DIST)).toBe(current);
  expect(readFileSync(join(DIST, '.sources'), 'utf8')).toMatch(/^[0-9a-f]{64}$/);
});

test('sources that the current build records compile nothing', { timeout: 180_000 }, () => {
  build();
  const current = readlinkSync(DIST);
  const builds = readdirSync(BUILDS);
  expect(build()).toBe(`build: the sources are those of ${current}; nothing to compile (--force builds anyway)\n`);
  expect(readlinkSync(DIST)).toBe(current);
  expect(readdirSync(BUILDS)).toEqual(builds);
});
