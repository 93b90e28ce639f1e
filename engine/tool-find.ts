/**
 * `find`: files whose path relative to `path` matches a glob (picomatch, dotfiles included; a
 * pattern with a leading `/` is matched against the full path instead). A pattern also matches
 * a path equal to it, so a bare name with glob characters such as `x[1].c` still finds itself.
 * Output: one `/`-prefixed path per line, most recently updated first, ties by path; at most
 * `headLimit` lines, then a footer saying how many more matched.
 *
 * The glob is tested on keys only (a range scan of `paths` under the directory); records are
 * read for matching paths only.
 */

import picomatch from 'picomatch';
import { VfsError, invalidParameter } from '../core/errors.js';
import { DEFAULT_FIND_LIMIT, MAX_FIND_LIMIT } from '../core/read-limits.js';
import { newestFirst } from './shard-catalog.js';
import { dirRange, type DocMeta } from './shard-format.js';
import type { ShardSource } from './shard-reader.js';
import { ChunkedOutput, HEARTBEAT, LINES_PER_WRITE, relativeTo, requestDirPath, type ToolSummary } from './tool-output.js';
import { Visibility, type Claims } from './visibility.js';

/** Parameters of `find` (undefined means the default). */
export interface FindRequest {
  /** Caller's claims: null for a management key. */
  claims: Claims;
  /** Glob, e.g. `**\/*.md`; matched against the path relative to `path`. */
  pattern: string;
  /** Directory to search under; default `/`. */
  path?: string;
  /** Most paths to print, 1-MAX_FIND_LIMIT; default DEFAULT_FIND_LIMIT. */
  headLimit?: number;
}

/** A compiled glob: its test, and a substring every path it matches contains (or null). */
interface Glob {
  test: (path: string) => boolean;
  required: string | null;
}

/** Compiled globs by pattern, least recently used first: agents repeat their patterns. */
const globs = new Map<string, Glob>();
const MAX_GLOBS = 256;

/**
 * A glob of literals (letters and digits of any script, `_`, `.`, `-`), `*`, `?` and `/` only:
 * braces, brackets, extglobs, escapes and `!` are not.
 */
const PLAIN_GLOB = /^[\p{L}\p{N}_.\-/*?]+$/u;

/**
 * The longest run of literal characters in a plain glob (of 2 or more), which every path it
 * matches must contain; null for any other glob. `find` looks for it before running the regular
 * expression, whose `**` prefix costs about 38 ns a path: in each path read from LMDB, or once
 * in a catalog's joined paths.
 */
function requiredText(pattern: string): string | null {
  if (!PLAIN_GLOB.test(pattern)) return null;
  let longest = '';
  for (const run of pattern.split(/[*?/]/)) if (run.length > longest.length) longest = run;
  return longest.length >= 2 ? longest : null;
}

/** The compiled glob; INVALID_PARAMETER naming `pattern` when picomatch refuses it. */
function compiledGlob(pattern: string): Glob {
  let glob = globs.get(pattern);
  if (glob !== undefined) globs.delete(pattern);
  else {
    try {
      // The bare regular expression: picomatch's own matcher allocates a result per path.
      const re = picomatch.makeRe(pattern, { dot: true });
      glob = { test: (path) => re.test(path), required: requiredText(pattern) };
    } catch (error) {
      throw invalidParameter('pattern', (error as Error).message);
    }
    if (globs.size >= MAX_GLOBS) globs.delete(globs.keys().next().value!);
  }
  globs.set(pattern, glob);
  return glob;
}

/** Runs `find`. Throws NO_SUCH_FILE when `path` is not a directory with a visible file. */
export function* find(reader: ShardSource, request: FindRequest): Generator<Buffer, ToolSummary> {
  const dir = requestDirPath(request.path);
  const headLimit = Math.min(request.headLimit ?? DEFAULT_FIND_LIMIT, MAX_FIND_LIMIT);
  if (request.pattern.length === 0) throw invalidParameter('pattern', 'the pattern is empty');
  const absolute = request.pattern.startsWith('/');
  const glob = compiledGlob(request.pattern);
  const { required } = glob;
  const test = (path: string): boolean => {
    const subject = absolute ? path : relativeTo(dir, path);
    return subject === request.pattern || glob.test(subject);
  };
  const visibility = new Visibility(request.claims);
  const snapshot = reader.snapshot();
  try {
    const { start, end } = dirRange(dir);
    let found: readonly DocMeta[];
    let anyVisible = dir === '/';
    const range = snapshot.catalogRange(start, end);
    if (range !== null) {
      // From a catalog the records are at hand, and so is their order by time; the matches of a
      // query it answered before, too. With a required text, only the paths that hold it are
      // looked at.
      const { catalog, from, to } = range;
      const { docs } = catalog;
      const key = `${dir}\n${request.pattern}`; // no path holds `\n`
      let matched = catalog.recall(key);
      if (matched === undefined) {
        const looked = required === null ? null : catalog.containing(required, from, to);
        const count = looked === null ? to - from : looked.length;
        const hits = new Int32Array(count);
        let n = 0;
        for (let k = 0; k < count; k++) {
          if ((k & 8191) === 8191) yield HEARTBEAT;
          const i = looked === null ? from + k : looked[k];
          if (test(docs[i].path)) hits[n++] = i;
        }
        matched = catalog.inRecencyOrder(hits.subarray(0, n));
        catalog.remember(key, matched);
      }
      // SECURITY: invisible files are neither listed nor prove that `path` exists.
      if (visibility.seesAll) found = matched;
      else {
        const visible: DocMeta[] = [];
        for (const meta of matched) if (visibility.canSee(meta.claims)) visible.push(meta);
        found = visible;
      }
      // A visible file that does not match still shows that `path` exists.
      anyVisible ||= found.length > 0;
      for (let i = from; !anyVisible && i < to; i++) anyVisible = visibility.canSee(docs[i].claims);
    } else {
      // From LMDB only the keys are read, and a record only for a path that matches (or while
      // no visible file has shown the directory exists). The literal has no `/`, so a full path
      // holds it when its part under `dir` does (or when `dir` does): testing the full path
      // first spares most paths the slice.
      const matches = required === null ? test : (path: string): boolean => path.includes(required) && test(path);
      const visible: DocMeta[] = [];
      let scanned = 0;
      for (const path of snapshot.pathsInRange(start, end)) {
        if (++scanned % 8192 === 0) yield HEARTBEAT;
        const hit = matches(path);
        if (!hit && anyVisible) continue;
        const meta = snapshot.docByPath(path);
        if (meta === undefined || !visibility.canSee(meta.claims)) continue;
        anyVisible = true;
        if (hit) visible.push(meta);
      }
      found = visible.sort(newestFirst);
    }
    if (!anyVisible) throw new VfsError('NO_SUCH_FILE', { path: dir });
    const out = new ChunkedOutput();
    const shown = Math.min(found.length, headLimit);
    for (let i = 0; i < shown; i += LINES_PER_WRITE) {
      const paths = found.slice(i, Math.min(shown, i + LINES_PER_WRITE)).map((meta) => meta.path);
      if (out.write(paths.join('\n'), true)) yield* out.drain();
    }
    if (found.length > shown) {
      const how = headLimit < MAX_FIND_LIMIT ? `raise head_limit (at most ${MAX_FIND_LIMIT}) or narrow` : 'narrow';
      out.write(`[${found.length - shown} more matching files not shown (${found.length} in total); ${how} the pattern or path]\n`);
    }
    yield* out.drain(true);
    return { resultCount: shown };
  } finally {
    snapshot.done();
  }
}
