/**
 * `npm run build` (and so `npm start`): compiles the service into dist/ without ever leaving dist/
 * missing or half written. tsc writes into a folder of this build's own; then each file that
 * differs from dist/'s is written beside it and renamed over it (a rename is atomic), and files
 * no longer built are removed. So the command line, or a second start, run from the same checkout
 * while a start builds sees each file whole, old or new, and two builds at once agree.
 */
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(ROOT, 'dist');
/** Files that must be executable: package.json's `bin`. */
const EXECUTABLE = new Set(['cli/main.js']);

/** Every file under `dir`, as paths relative to it. */
function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)));
}

/** Removes the folders under `dir` that hold no file, deepest first. */
function removeEmptyFolders(dir: string): void {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isDirectory()) continue;
    const path = join(dir, entry.name);
    removeEmptyFolders(path);
    try {
      rmdirSync(path);
    } catch {
      // Not empty (or gone): another build is writing into it, or has removed it.
    }
  }
}

/** Whether process `pid` is alive (a build writing its `.next` files). */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

const staging = join(ROOT, '.build', `${process.pid}-${Date.now()}`);
try {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', staging], { cwd: ROOT, stdio: 'inherit' });
  cpSync(join(ROOT, 'db/migrations'), join(staging, 'db/migrations'), { recursive: true });

  const built = filesUnder(staging);
  for (const file of built) {
    const from = join(staging, file);
    const to = join(DIST, file);
    const bytes = readFileSync(from);
    if (!existsSync(to) || !bytes.equals(readFileSync(to))) {
      mkdirSync(dirname(to), { recursive: true });
      const next = `${to}.${process.pid}.next`;
      writeFileSync(next, bytes);
      if (EXECUTABLE.has(file)) chmodSync(next, 0o755);
      renameSync(next, to);
    } else if (EXECUTABLE.has(file)) {
      chmodSync(to, 0o755);
    }
  }
  const current = new Set(built);
  for (const file of filesUnder(DIST)) {
    if (current.has(file) || (file.endsWith('.next') && running(Number(file.split('.').at(-2))))) continue;
    // Not built any more, or a file a build that is gone left before its rename.
    rmSync(join(DIST, file), { force: true });
  }
  removeEmptyFolders(DIST);
} finally {
  rmSync(staging, { recursive: true, force: true });
}
