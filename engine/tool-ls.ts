/**
 * `ls`: the immediate children of a directory: directories first as `name/`, then files as
 * `name<TAB><text bytes>`, each group in code point order; at most MAX_LS_ENTRIES, then one
 * footer line saying how many more exist. A file path lists that file's own entry.
 *
 * Directories are implied by file paths. The listing is a range scan of the path-ordered
 * `paths` database over the directory's keys; a child directory's subtree is skipped with a
 * new range as soon as one visible file in it is seen.
 *
 * A thread remembers its last directory answers (`listings`), each for one reader, one
 * `docsVersion` of the shard and one set of claims: every later snapshot of that version holds
 * the same records, and what a caller sees depends on its claims alone, so a remembered answer is
 * exact for any caller with the same claims. Without a catalog (the HTTP thread catalogs no
 * shard of more than 5,000 files, reads/read-pool.ts) each listed record costs a cursor step
 * and a decode, about 1 µs: a directory of 230 files held `ls` to 2,750 requests/s.
 */

import { AnswerCopy, AnswerMemory } from '../core/answer-memory.js';
import { VfsError } from '../core/errors.js';
import { dirRange } from './shard-format.js';
import type { ShardSource } from './shard-reader.js';
import type { ShardSnapshot } from './shard-snapshot.js';
import { ChunkedOutput, comparePaths, LINES_PER_WRITE, requestDirPath, type ToolSummary } from './tool-output.js';
import { type Claims, Visibility, viewOf } from './visibility.js';

/** Parameters of `ls` (undefined means the default). */
export interface LsRequest {
  /** Caller's claims: null for a management key. */
  claims: Claims;
  /** Directory (or file) to list; default `/`. */
  path?: string;
}

/** Most entries one listing shows. */
export const MAX_LS_ENTRIES = 1000;

/** One child of a directory. */
export interface DirEntry {
  /** Name inside the directory. */
  name: string;
  /** True for a directory. */
  dir: boolean;
  /** Text bytes of a file (0 for a directory). */
  textBytes: number;
}

/**
 * The visible children of directory `dir` (`/` or `/a/b`) in listing order (directories, then
 * files, each by name), or null when no visible file lies under it.
 */
export function listDirectory(snapshot: ShardSnapshot, dir: string, visibility: Visibility): DirEntry[] | null {
  const { start: prefix, end } = dirRange(dir);
  const dirs: DirEntry[] = [];
  const files: DirEntry[] = [];
  let start = prefix;
  let any = false;
  scan: while (true) {
    for (const meta of snapshot.docsInRange(start, end)) {
      const rest = meta.path.slice(prefix.length);
      const slash = rest.indexOf('/');
      // SECURITY: invisible files neither appear nor reveal their directories.
      if (!visibility.canSee(meta.claims)) continue;
      any = true;
      if (slash < 0) {
        files.push({ name: rest, dir: false, textBytes: meta.textBytes });
        continue;
      }
      const name = rest.slice(0, slash);
      dirs.push({ name, dir: true, textBytes: 0 });
      // Skip the rest of this subdirectory: restart after its key range.
      start = prefix + name + '0';
      continue scan;
    }
    break;
  }
  if (!any) return null;
  // Key order sorts "a-b/x" before "a/x"; names must sort as names.
  dirs.sort((a, b) => comparePaths(a.name, b.name));
  return [...dirs, ...files];
}

/** The directory answers a thread keeps (see the module comment). */
const listings = new AnswerMemory(256, 8 << 20);

/** Runs `ls`. Throws NO_SUCH_FILE when the path is neither a visible file nor a directory of one. */
export function* ls(reader: ShardSource, request: LsRequest): Generator<Buffer, ToolSummary> {
  const path = requestDirPath(request.path);
  const visibility = new Visibility(request.claims);
  const snapshot = reader.snapshot();
  try {
    let entries: DirEntry[] | null = null;
    if (path !== '/') {
      const file = snapshot.docByPath(path);
      // SECURITY: only a visible file is listed as a file.
      if (file !== undefined && visibility.canSee(file.claims)) {
        entries = [{ name: path.slice(path.lastIndexOf('/') + 1), dir: false, textBytes: file.textBytes }];
      }
    }
    // SECURITY: the key holds what the caller sees; an answer is only ever given to callers who see the same files.
    const key = entries === null ? listings.key(reader, snapshot.docsVersion, viewOf(request.claims), path) : null;
    const known = key === null ? undefined : listings.recall(key);
    if (known !== undefined) {
      for (const chunk of known.chunks) yield chunk;
      return { resultCount: known.resultCount };
    }
    entries ??= listDirectory(snapshot, path, visibility);
    if (entries === null) {
      if (path !== '/') throw new VfsError('NO_SUCH_FILE', { path });
      entries = []; // an empty workspace lists nothing
    }
    const out = new ChunkedOutput();
    const copy = key === null ? null : new AnswerCopy(listings.largest);
    const take = (chunks: Generator<Buffer>): Iterable<Buffer> => copy?.through(chunks) ?? chunks;
    const shown = Math.min(entries.length, MAX_LS_ENTRIES);
    for (let i = 0; i < shown; i += LINES_PER_WRITE) {
      let lines = '';
      for (const e of entries.slice(i, Math.min(shown, i + LINES_PER_WRITE))) lines += e.dir ? `${e.name}/\n` : `${e.name}\t${e.textBytes}\n`;
      if (out.write(lines)) yield* take(out.drain());
    }
    if (entries.length > shown) {
      out.write(`[${entries.length - shown} more entries not shown (${entries.length} in total); narrow with find]\n`);
    }
    yield* take(out.drain(true));
    const answer = copy?.answer(shown) ?? null;
    if (key !== null && answer !== null) listings.remember(key, answer);
    return { resultCount: shown };
  } finally {
    snapshot.done();
  }
}
