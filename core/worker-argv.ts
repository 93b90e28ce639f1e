/**
 * Node options for the service's worker threads. A worker takes its parent's options, except
 * the V8 heap sizes that `npm start` gives the HTTP thread (package.json): a worker refuses
 * those (ERR_WORKER_INVALID_EXEC_ARGV) and keeps V8's defaults.
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

/** Options of the parent that a worker refuses. */
const HEAP_SIZE = /^--(?:max|min)-semi-space-size(?:=|$)/;

/**
 * The parent's options less the heap sizes; with `loadTsx`, plus tsx's loader when the parent
 * did not load tsx itself (vitest transforms TypeScript on its own, so its processes have no
 * tsx flag). The loader is an absolute URL, so that it resolves whatever the working directory.
 */
export function workerExecArgv(loadTsx: boolean): string[] {
  const inherited = process.execArgv.filter((a) => !HEAP_SIZE.test(a));
  if (!loadTsx || inherited.some((a) => a.includes('tsx'))) return inherited;
  return [...inherited, '--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href];
}
