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
import { dirRange, type DocMeta, type ShardReader } from './shard-reader.js';
import { ChunkedOutput, HEARTBEAT, relativeTo, requestDirPath, type ToolSummary } from './tool-output.js';
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

/** Paths printed when `headLimit` is not given. */
export const DEFAULT_FIND_LIMIT = 100;
/** Largest accepted `headLimit`. */
export const MAX_FIND_LIMIT = 1000;

/** Compiled globs by pattern, least recently used first: agents repeat their patterns. */
const globs = new Map<string, (path: string) => boolean>();
const MAX_GLOBS = 256;

/** The matcher of a glob; INVALID_PARAMETER naming `pattern` when picomatch refuses it. */
function compiledGlob(pattern: string): (path: string) => boolean {
  let isMatch = globs.get(pattern);
  if (isMatch !== undefined) globs.delete(pattern);
  else {
    try {
      // The bare regular expression: picomatch's own matcher allocates a result per path.
      const re = picomatch.makeRe(pattern, { dot: true });
      isMatch = (path) => re.test(path);
    } catch (error) {
      throw invalidParameter('pattern', (error as Error).message);
    }
    if (globs.size >= MAX_GLOBS) globs.delete(globs.keys().next().value!);
  }
  globs.set(pattern, isMatch);
  return isMatch;
}

/** Runs `find`. Throws NO_SUCH_FILE when `path` is not a directory with a visible file. */
export function* find(reader: ShardReader, request: FindRequest): Generator<Buffer, ToolSummary> {
  const dir = requestDirPath(request.path);
  const headLimit = Math.min(request.headLimit ?? DEFAULT_FIND_LIMIT, MAX_FIND_LIMIT);
  if (request.pattern.length === 0) throw invalidParameter('pattern', 'the pattern is empty');
  const absolute = request.pattern.startsWith('/');
  const isMatch = compiledGlob(request.pattern);
  const visibility = new Visibility(request.claims);
  const snapshot = reader.snapshot();
  try {
    const { start, end } = dirRange(dir);
    const found: DocMeta[] = [];
    let anyVisible = dir === '/';
    const range = snapshot.catalogRange(start, end);
    if (range !== null) {
      // From a catalog the records are at hand.
      const { docs, to } = range;
      for (let i = range.from; i < to; i++) {
        if (((i - range.from) & 8191) === 8191) yield HEARTBEAT;
        const meta = docs[i];
        const subject = absolute ? meta.path : relativeTo(dir, meta.path);
        const matches = subject === request.pattern || isMatch(subject);
        // SECURITY: invisible files are neither listed nor prove that `path` exists.
        if ((!matches && anyVisible) || !visibility.canSee(meta.claims)) continue;
        anyVisible = true;
        if (matches) found.push(meta);
      }
    } else {
      // From LMDB only the keys are read, and a record only for a path that matches (or while
      // no visible file has shown the directory exists).
      let scanned = 0;
      for (const path of snapshot.pathsInRange(start, end)) {
        if (++scanned % 8192 === 0) yield HEARTBEAT;
        const subject = absolute ? path : relativeTo(dir, path);
        const matches = subject === request.pattern || isMatch(subject);
        if (!matches && anyVisible) continue;
        const meta = snapshot.docByPath(path);
        if (meta === undefined || !visibility.canSee(meta.claims)) continue;
        anyVisible = true;
        if (matches) found.push(meta);
      }
    }
    if (!anyVisible) throw new VfsError('NO_SUCH_FILE', { path: dir });
    // Found in path order, so a stable sort by time leaves ties by path.
    found.sort((a, b) => b.updatedAt - a.updatedAt);
    const out = new ChunkedOutput();
    const shown = Math.min(found.length, headLimit);
    for (let i = 0; i < shown; i++) {
      if (out.write(found[i].path, true)) yield* out.drain();
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
