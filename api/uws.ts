/**
 * Loads uWebSockets.js. No single npm build covers every Node.js ABI and glibc
 * we run on, so this module tries the candidates in order and reports which
 * one it took and why the others did not load:
 *
 * 1. the native binary of the `uWebSockets.js` dependency (an npm-published
 *    build, `@trufflesuite/uws-js-unofficial`) for this platform and ABI;
 * 2. our implementation of the part of its API the service uses on `node:http`
 *    (uws-node-http.ts), slower, for ABIs that build has no binary for (Node.js
 *    22 and 24). The package's own `node:http` implementation throws "Not
 *    implemented" from methods the service needs.
 */
import { createRequire } from 'node:module';
import type * as Uws from 'uWebSockets.js';
import { nodeHttpUws } from './uws-node-http.js';

const require = createRequire(import.meta.url);

/** The loaded module and a sentence saying which candidate it is. */
export interface LoadedUws {
  uws: typeof Uws;
  description: string;
  /** True for the native build, with its limits (README, "Known limitations"). */
  native: boolean;
}

/** Which HTTP implementation to take (Config.http): `auto` the first that loads, `node` candidate 2. */
export type HttpChoice = 'auto' | 'node';

/** Candidate 2, which `VFS_HTTP=node` also picks. */
const NODE_HTTP: LoadedUws = {
  uws: nodeHttpUws as unknown as typeof Uws,
  description: 'the node:http implementation of the uWebSockets.js API',
  native: false,
};

let loaded: LoadedUws | null = null;

/** Loads (once) the first uWebSockets.js candidate that works here; with `http` `node`, candidate 2 (see Config). */
export function loadUws(http: HttpChoice = 'auto'): LoadedUws {
  if (http === 'node') return NODE_HTTP;
  if (loaded !== null) return loaded;
  const binary = `uWebSockets.js/binaries/uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  const failures: string[] = [];
  try {
    loaded = { uws: require(binary) as typeof Uws, description: `uWebSockets.js native (${binary})`, native: true };
    return loaded;
  } catch (error) {
    failures.push(`${binary}: ${firstLine(error)}`);
  }
  loaded = { ...NODE_HTTP, description: `${NODE_HTTP.description} (slower; native build failed: ${failures.join('; ')})` };
  return loaded;
}

function firstLine(error: unknown): string {
  return String(error instanceof Error ? error.message : error).split('\n')[0];
}
