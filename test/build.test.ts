/**
 * `npm run build`, which `npm start` runs first: dist/ is never missing or half written while it
 * builds (the command line and a second start may run from the same checkout meanwhile), the
 * command line stays executable, and files no longer built are removed.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect, test } from 'vitest';
import { ROOT } from '../service/script-args.js';

const DIST = join(ROOT, 'dist');
const WATCHED = ['cli/main.js', 'service/main.js', 'api/server.js', 'db/migrations/001-foundation.sql'];

test('dist/ stays whole while it is rebuilt, and loses what is no longer built', async () => {
  const stale = join(DIST, 'no-such-folder/stale.js');
  mkdirSync(join(DIST, 'no-such-folder'), { recursive: true });
  writeFileSync(stale, 'export {};\n');
  const whole = WATCHED.map((file) => readFileSync(join(DIST, file)));

  const build = spawn('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  const done = new Promise<number | null>((resolve) => build.on('exit', resolve));
  let finished = false;
  void done.then(() => {
    finished = true;
  });
  const seen: string[] = [];
  let polls = 0;
  while (!finished) {
    for (const [i, file] of WATCHED.entries()) {
      const path = join(DIST, file);
      if (!existsSync(path)) seen.push(`${file} missing`);
      else if (!readFileSync(path).equals(whole[i])) seen.push(`${file} differs`);
    }
    if ((statSync(join(DIST, 'cli/main.js')).mode & 0o111) === 0) seen.push('cli/main.js not executable');
    polls++;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  expect(await done).toBe(0);
  expect(seen).toEqual([]);
  expect(polls).toBeGreaterThan(20);
  expect(existsSync(stale)).toBe(false);
  expect(existsSync(join(DIST, 'no-such-folder'))).toBe(false);
  expect(statSync(join(DIST, 'cli/main.js')).mode & 0o111).not.toBe(0);
});
