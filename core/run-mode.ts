/**
 * Whether this process runs the TypeScript sources (the tests under vitest, the benchmarks and
 * the operator command under tsx) or the JavaScript that `npm run build` compiles into dist/
 * (`npm start`), and what that means for the code it starts in other threads and processes.
 *
 * `npm start` runs the compiled code because tsx compiles with esbuild's `keepNames`, which
 * wraps every named function made at run time in a call that defines its name, a cost the HTTP
 * thread pays on every request (docs/benchmarks.md, "Read tools over HTTP", "Compiled, not run
 * through tsx").
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import type { ResourceLimits } from 'node:worker_threads';

/** True when this module, and so every other one, is TypeScript source. */
export const FROM_SOURCE = import.meta.url.endsWith('.ts');

/** The module `name` beside the module at `base` (its import.meta.url), source or compiled as this one is. */
export function siblingModule(name: string, base: string): URL {
  return new URL(`./${name}${FROM_SOURCE ? '.ts' : '.js'}`, base);
}

/** The file URL of tsx's loader (or of `subpath`), absolute so that it resolves whatever the working directory. */
export function tsxUrl(subpath = 'tsx'): string {
  return pathToFileURL(createRequire(import.meta.url).resolve(subpath)).href;
}

/**
 * Options of the parent that a worker refuses (ERR_WORKER_INVALID_EXEC_ARGV): the V8 flags that
 * `npm start` gives, the semi-space sizes and the memory reducer (package.json).
 */
const V8_FLAGS = /^--(?:(?:max|min)-semi-space-size|(?:no-)?memory-reducer)(?:=|$)/;

/**
 * Node options for a worker thread: the parent's, less V8's flags. With `loadTsx`, from source, plus
 * tsx's loader when the parent did not load tsx itself (vitest transforms TypeScript on its
 * own, so its processes have no tsx flag).
 */
export function workerExecArgv(loadTsx: boolean): string[] {
  const inherited = process.execArgv.filter((a) => !V8_FLAGS.test(a));
  if (!loadTsx || !FROM_SOURCE || inherited.some((a) => a.includes('tsx'))) return inherited;
  return [...inherited, '--import', tsxUrl()];
}

/**
 * The young generation of each worker thread's heap, in MB: V8 makes it two semi-spaces of a
 * third each (8 MB) and a third for new large objects. The read threads' grep throughput is the
 * same with 8, 16 and 32 MB semi-spaces (docs/benchmarks.md, "the worker threads' young
 * generations"); a larger one only grows, slowly under light load, and with the memory reducer
 * off is never given back.
 */
const WORKER_YOUNG_GENERATION_MB = 24;

let semiSpaceFlagsCleared = false;

/**
 * Heap limits for a worker thread. V8's flags belong to the process, and a semi-space flag
 * overrides a thread's own limit: with `npm start`'s `--max-semi-space-size=32` (meant for the
 * HTTP thread, whose heap is already made when this runs) every worker's young generation could
 * grow to 96 MB (a new space of 64). So the first call clears those flags for the heaps made
 * after it.
 */
export function workerResourceLimits(): ResourceLimits {
  if (!semiSpaceFlagsCleared) {
    setFlagsFromString('--max-semi-space-size=0');
    setFlagsFromString('--min-semi-space-size=0');
    semiSpaceFlagsCleared = true;
  }
  return { maxYoungGenerationSizeMb: WORKER_YOUNG_GENERATION_MB };
}

/**
 * Node options for a child process that runs one of these modules: from source, tsx's loader;
 * nothing of the parent's own (an `-e` script, an inspector port or V8 flags are not the child's).
 */
export function childExecArgv(): string[] {
  return FROM_SOURCE ? ['--import', tsxUrl()] : [];
}
