/**
 * Loads the HTTP layer: by default our implementation on `node:http` of the part of the
 * uWebSockets.js API the service uses (uws-node-http.ts), which answers every HTTP/1.x client;
 * with `native` (VFS_HTTP=native, for nodes behind a proxy) a native uWebSockets.js build. No
 * single npm build covers every Node.js ABI and glibc the service runs on, so for `native` this
 * module tries the candidates in order, takes the first that loads, and says which it took and
 * why each one before it did not:
 *
 * 1. `@btc-vision/uwebsockets.js` 20.57.0: binaries for Node.js 20, 22 and 24
 *    (ABI 115, 127, 137) that need glibc 2.38 (Debian 13);
 * 2. `@based/uws` 6.0.1 (pinned exactly: its `latest` tag is an older build):
 *    binaries for ABI 115 and 127 that need glibc 2.27, so Node.js 20 and 22
 *    load natively on Debian 12; its ABI 137 binary needs glibc 2.38;
 * 3. `@trufflesuite/uws-js-unofficial` (the `uWebSockets.js` dependency, whose
 *    typings the service is written against): Node.js 20 only, glibc 2.27;
 * 4. the node:http implementation, where none loads. The packages' own fallbacks are skipped: each
 *    binary is required directly, and trufflesuite's `node:http` one throws
 *    "Not implemented" from methods the service needs.
 *
 * So on Debian 12 (glibc 2.36) Node.js 20 takes `@based/uws`, not trufflesuite,
 * the build the service was first written against. Kept so, on evidence
 * (2026-11, Node.js 20.20): the service's HTTP test files pass on both; the
 * newer build answers a request head over 4 KiB that arrives in several TCP
 * segments (trufflesuite drops it) and refuses a request line it cannot split
 * at once with 505 (trufflesuite leaves it to the 10 s idle timeout); `cat` and
 * `/healthz` under autocannon, the builds alternating in one run, differ by
 * less than the run-to-run noise.
 */
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import type * as Uws from 'uWebSockets.js';
import { MAX_HEAD_BYTES, nodeHttpUws } from './uws-node-http.js';

const require = createRequire(import.meta.url);

/** The loaded module and a sentence saying which candidate it is. */
export interface LoadedUws {
  uws: typeof Uws;
  /** Which candidate was taken, and why each one tried before it failed. */
  description: string;
  /** True for a native build, with its limits (README, "Known limitations"). */
  native: boolean;
  /** The candidate taken: a package name from the list above, or `node:http`. */
  build: string;
}

/**
 * Which HTTP implementation to take (Config.http): `node` the node:http one (the default: it
 * answers every HTTP/1.x client), `native` the first native build that loads here (faster, but it
 * answers neither pipelined requests nor HTTP/1.0: for use behind a proxy that sends neither),
 * else the node:http one.
 */
export type HttpChoice = 'node' | 'native';

/** A native npm build: its package name, and where its binaries lie relative to the file its name resolves to. */
interface NativeCandidate {
  /** The npm package, as LoadedUws.build names it. */
  name: string;
  /** What `require` resolves: the package name, or the dependency alias it is installed under. */
  specifier: string;
  /** Package root relative to the resolved main file's directory. */
  root: string;
  /** Binary directory relative to the package root. */
  binaries: string;
}

/** The native builds in the order they are tried (see the module comment). */
const NATIVE: readonly NativeCandidate[] = [
  { name: '@btc-vision/uwebsockets.js', specifier: '@btc-vision/uwebsockets.js', root: '.', binaries: '.' },
  { name: '@based/uws', specifier: '@based/uws', root: '.', binaries: '.' },
  // Installed as the `uWebSockets.js` dependency; its main file is src/uws.js.
  { name: '@trufflesuite/uws-js-unofficial', specifier: 'uWebSockets.js', root: '..', binaries: 'binaries' },
];

/** The default, and the last candidate of `VFS_HTTP=native`. */
const NODE_HTTP: LoadedUws = {
  uws: nodeHttpUws as unknown as typeof Uws,
  description: 'the node:http implementation of the uWebSockets.js API',
  native: false,
  build: 'node:http',
};

let loaded: LoadedUws | null = null;

/** The node:http implementation; with `http` `native`, the first native build that loads here (once), else that one (see HttpChoice). */
export function loadUws(http: HttpChoice = 'node'): LoadedUws {
  if (http === 'node') return NODE_HTTP;
  if (loaded !== null) return loaded;
  const file = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
  // The btc-vision and based builds read their cap on a request head (default 4 KiB, answered
  // 431) from the environment when the binary loads. The service takes 40 KB grep patterns in
  // the URL, so it gets the node:http implementation's cap. The trufflesuite build has no cap.
  process.env.UWS_HTTP_MAX_HEADERS_SIZE = String(MAX_HEAD_BYTES);
  const failures: string[] = [];
  for (const candidate of NATIVE) {
    const attempt = tryNative(candidate, file);
    if (typeof attempt === 'string') {
      failures.push(`${candidate.name}: ${attempt}`);
      continue;
    }
    const others = failures.length === 0 ? '' : `; not taken: ${failures.join('; ')}`;
    loaded = { uws: attempt.uws, description: `uWebSockets.js native build ${attempt.label}${others}`, native: true, build: candidate.name };
    return loaded;
  }
  loaded = { ...NODE_HTTP, description: `${NODE_HTTP.description} (VFS_HTTP=native, but no native build loads: ${failures.join('; ')})` };
  return loaded;
}

/** The candidate's module, or a sentence saying why it does not load here. */
function tryNative(candidate: NativeCandidate, file: string): { uws: typeof Uws; label: string } | string {
  let root: string;
  try {
    root = join(dirname(require.resolve(candidate.specifier)), candidate.root);
  } catch {
    return 'not installed';
  }
  const binary = join(root, candidate.binaries, file);
  // Checked first so that a missing binary reads as such, not as a bare "Cannot find module".
  if (!existsSync(binary)) return `no binary for ${process.platform}-${process.arch} ABI ${process.versions.modules} (Node.js ${process.versions.node})`;
  try {
    const uws = require(binary) as typeof Uws;
    return { uws, label: `${packageLabel(root)} (${file})` };
  } catch (error) {
    return loadError(error);
  }
}

/** `name version` from the package.json in `root` (read directly: the packages' `exports` hide it). */
function packageLabel(root: string): string {
  try {
    const json = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { name?: string; version?: string };
    return `${json.name} ${json.version}`;
  } catch {
    return root;
  }
}

/** Why a binary failed to load, in one line: the glibc it needs when that is the reason. */
function loadError(error: unknown): string {
  const message = String(error instanceof Error ? error.message : error);
  const glibc = /GLIBC_([\d.]+)' not found/.exec(message);
  if (glibc !== null) {
    const here = (process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined)?.header?.glibcVersionRuntime;
    return `needs glibc ${glibc[1]}, this system has ${here ?? 'an older one'}`;
  }
  return message.split('\n')[0];
}
