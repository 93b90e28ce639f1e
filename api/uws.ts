/**
 * Loads uWebSockets.js. No single npm build covers every Node.js ABI and glibc
 * we run on, so this module tries the candidates in order and reports which
 * one it took and why the others did not load:
 *
 * 1. the native binary of the `uWebSockets.js` dependency (an npm-published
 *    build, `@trufflesuite/uws-js-unofficial`) for this platform and ABI;
 * 2. the same package's implementation on `node:http`, same API, slower, for
 *    ABIs that build has no binary for (Node.js 22 and 24).
 */
import { createRequire } from 'node:module';
import type * as Uws from 'uWebSockets.js';

const require = createRequire(import.meta.url);

/** The loaded module and a sentence saying which candidate it is. */
export interface LoadedUws {
  uws: typeof Uws;
  description: string;
}

let loaded: LoadedUws | null = null;

/** Loads (once) the first uWebSockets.js candidate that works here. */
export function loadUws(): LoadedUws {
  if (loaded !== null) return loaded;
  const binary = `uWebSockets.js/binaries/uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  const failures: string[] = [];
  try {
    loaded = { uws: require(binary) as typeof Uws, description: `uWebSockets.js native (${binary})` };
    return loaded;
  } catch (error) {
    failures.push(`${binary}: ${firstLine(error)}`);
  }
  try {
    loaded = {
      uws: require('uWebSockets.js/dist/index.js') as typeof Uws,
      description: `uWebSockets.js node:http implementation (slower; native build failed: ${failures.join('; ')})`,
    };
    return loaded;
  } catch (error) {
    failures.push(`uWebSockets.js/dist/index.js: ${firstLine(error)}`);
  }
  throw new Error(`no uWebSockets.js build loads on Node.js ${process.version}: ${failures.join('; ')}`);
}

function firstLine(error: unknown): string {
  return String(error instanceof Error ? error.message : error).split('\n')[0];
}
