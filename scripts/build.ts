/**
 * `npm run build` (and so `npm start`): compiles the service so that `dist/` is never missing,
 * half written or of two builds at once, and a running service keeps the files it loads later.
 *
 * Each build is a folder of its own, `.build/<id>/`, and `dist` is a symbolic link to the
 * current one. tsc writes into a staging folder, and Vite the operator console into its
 * `console/` (every text file beside its brotli and gzip forms, made here once so the server
 * never compresses; both are deterministic, so an unchanged console keeps the build's digest).
 * If what they made equals the current build,
 * nothing changes; else the staging folder becomes a build and a new link is renamed over
 * `dist` (a rename is atomic). Node runs a module from its real path, so a service started on
 * an earlier build goes on loading that build's files (worker threads, child processes, lazy
 * imports): the last KEEP_BUILDS builds are kept. A `dist/` that is a plain folder (an older
 * checkout's) is moved into `.build/` first.
 *
 * Each build records a digest of the sources it was made from (SOURCES_FILE). When the sources
 * are those of the current build, nothing is compiled: `npm start` and every test run start at
 * once. `--force` builds anyway (and keeps the current build if the result is the same).
 */
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  chmodSync,
  cpSync,
  existsSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, constants, gzipSync } from 'node:zlib';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const DIST = join(ROOT, 'dist');
const BUILDS = join(ROOT, '.build');
/** Builds kept besides the current one, for services still running on them. */
const KEEP_BUILDS = 3;
/** Files that must be executable: package.json's `bin`. */
const EXECUTABLE = ['cli/main.js'];
/** What a build is made from: the folders tsc compiles and the console's, whole, and these files. */
const SOURCE_DIRS = [...(JSON.parse(readFileSync(join(ROOT, 'tsconfig.build.json'), 'utf8')) as { include: string[] }).include, 'console'];
const SOURCE_FILES = ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json', 'scripts/build.ts'];
/** The file in a build that holds the digest of its sources; not part of the build's own digest. */
const SOURCES_FILE = '.sources';
/** The console's files that are sent compressed (images other than SVG are compressed already). */
const COMPRESSED = /\.(?:js|css|html|svg|json)$/;

/** Whether process `pid` is alive. */
function running(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Every file under `dir`, as paths relative to `base`. */
function filesUnder(dir: string, base: string): string[] {
  return readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(base, join(entry.parentPath, entry.name)));
}

/** A digest of `files` (relative to `base`), by path and content. */
function digestOf(base: string, files: string[]): string {
  const hash = createHash('sha256');
  for (const file of files.sort())
    hash
      .update(file)
      .update('\0')
      .update(readFileSync(join(base, file)))
      .update('\0');
  return hash.digest('hex');
}

/** A digest of every file of the build in `dir`. */
function digest(dir: string): string {
  return digestOf(
    dir,
    filesUnder(dir, dir).filter((file) => file !== SOURCES_FILE),
  );
}

/** A digest of what a build is made from. */
function sourcesDigest(): string {
  const files = SOURCE_DIRS.flatMap((dir) => filesUnder(join(ROOT, dir), ROOT));
  return digestOf(ROOT, [...files, ...SOURCE_FILES.filter((file) => existsSync(join(ROOT, file)))]);
}

/** Builds the operator console into `outDir`; the reason when it failed, else null. */
async function buildConsole(outDir: string): Promise<string | null> {
  try {
    // Vite bundles for development (JSX with source locations) unless NODE_ENV says production,
    // and a test runner sets it to `test`: the console is built the same from anywhere.
    process.env.NODE_ENV = 'production';
    const { build: vite } = await import('vite');
    await vite({ configFile: join(ROOT, 'console/vite.config.ts'), build: { outDir } });
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  for (const entry of readdirSync(outDir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !COMPRESSED.test(entry.name)) continue;
    const file = join(entry.parentPath, entry.name);
    const bytes = readFileSync(file);
    writeFileSync(
      `${file}.br`,
      brotliCompressSync(bytes, { params: { [constants.BROTLI_PARAM_QUALITY]: 11, [constants.BROTLI_PARAM_SIZE_HINT]: bytes.length } }),
    );
    writeFileSync(`${file}.gz`, gzipSync(bytes, { level: 9 }));
  }
  return null;
}

/** The build `dist` points at, or null. */
function currentBuild(): string | null {
  if (!existsSync(DIST)) return null;
  return lstatSync(DIST).isSymbolicLink() ? join(ROOT, readlinkSync(DIST)) : null;
}

/** Writes the digest of the sources `build` was made from (or found equal to), in one rename. */
function recordSources(build: string, sources: string): void {
  const temp = join(build, `${SOURCES_FILE}-${process.pid}`);
  writeFileSync(temp, sources);
  renameSync(temp, join(build, SOURCES_FILE));
}

/** Points `dist` at `build` in one rename. */
function switchTo(build: string): void {
  const link = join(ROOT, `.dist-${process.pid}`);
  rmSync(link, { force: true });
  symlinkSync(relative(ROOT, build), link);
  renameSync(link, DIST);
}

mkdirSync(BUILDS, { recursive: true });
// What a build killed before its end left: staging folders of processes that are gone (tsc
// runs on when its parent is killed, so its folder is only removed once it has ended too).
for (const name of existsSync(BUILDS) ? readdirSync(BUILDS) : []) {
  const staging = /^staging-(\d+)-/.exec(name);
  if (staging !== null && !running(Number(staging[1]))) rmSync(join(BUILDS, name), { recursive: true, force: true });
}
// A plain dist/ folder becomes a build of its own (dist becomes a link below).
if (existsSync(DIST) && !lstatSync(DIST).isSymbolicLink()) renameSync(DIST, join(BUILDS, `legacy-${Date.now()}`));

const sources = sourcesDigest();
const built = currentBuild();
if (
  !process.argv.includes('--force') &&
  built !== null &&
  existsSync(join(built, SOURCES_FILE)) &&
  readFileSync(join(built, SOURCES_FILE), 'utf8') === sources
) {
  process.stdout.write(`build: the sources are those of ${relative(ROOT, built)}; nothing to compile (--force builds anyway)\n`);
  process.exit(0);
}

const staging = join(BUILDS, `staging-${process.pid}-${Date.now()}`);
try {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const compiled = spawnSync(process.execPath, [tsc, '-p', join(ROOT, 'tsconfig.build.json'), '--outDir', staging], { cwd: ROOT, stdio: 'inherit' });
  const consoleFailed = compiled.status === 0 ? await buildConsole(join(staging, 'console')) : null;
  if (compiled.status !== 0) {
    process.stderr.write(`build: tsc failed${compiled.signal === null ? '' : ` (${compiled.signal})`}; dist/ is unchanged\n`);
    process.exitCode = compiled.status ?? 1;
  } else if (consoleFailed !== null) {
    process.stderr.write(`build: the console's build (Vite, console/vite.config.ts) failed; dist/ is unchanged:\n${consoleFailed}\n`);
    process.exitCode = 1;
  } else {
    cpSync(join(ROOT, 'db/migrations'), join(staging, 'db/migrations'), { recursive: true });
    for (const file of EXECUTABLE) chmodSync(join(staging, file), 0o755);
    const current = currentBuild();
    const id = digest(staging).slice(0, 16);
    if (current !== null && existsSync(current) && digest(current).slice(0, 16) === id) {
      rmSync(staging, { recursive: true, force: true });
    } else {
      const build = join(BUILDS, `${Date.now()}-${id}`);
      renameSync(staging, build);
      switchTo(build);
    }
    const now = currentBuild()!;
    recordSources(now, sources);
    // Builds past the newest KEEP_BUILDS (the current one always kept) are removed, oldest first.
    const made = (name: string): number => Number(/\d{13}/.exec(name)?.[0] ?? 0);
    const builds = readdirSync(BUILDS)
      .filter((name) => !name.startsWith('staging-') && join(BUILDS, name) !== now)
      .sort((a, b) => made(b) - made(a));
    for (const old of builds.slice(KEEP_BUILDS)) rmSync(join(BUILDS, old), { recursive: true, force: true });
  }
} finally {
  rmSync(staging, { recursive: true, force: true });
}
