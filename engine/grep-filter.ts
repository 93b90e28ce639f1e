/**
 * grep's file filters on paths, applied before any text is read: the search root (`path`),
 * `glob` with ripgrep's `--glob` semantics and `type` (file-types.ts).
 *
 * `--glob` as ripgrep applies it (gitignore rules, checked against ripgrep 13):
 *  - a glob without `/` is matched against the file name; with a `/` (a leading `/` only
 *    anchors) against the path relative to the search root; `**` crosses directories;
 *  - a glob ending in `/` names directories only;
 *  - `!glob` excludes the files it matches and everything under a directory it matches;
 *    a plain glob includes only the files it matches (a matching directory includes nothing).
 * An explicitly named file (`path` is a file) is searched whatever the glob or type says, as
 * ripgrep does for paths given on its command line.
 */

import picomatch from 'picomatch';
import { invalidParameter } from '../core/errors.js';
import { fileTypeMatcher } from './file-types.js';
import { relativeTo } from './tool-output.js';

/** A compiled glob/type filter over paths under one search root. */
export class GrepFilter {
  private readonly glob: ((subject: string) => boolean) | null = null;
  private readonly negated: boolean = false;
  private readonly anchored: boolean = false;
  private readonly dirOnly: boolean = false;
  private readonly type: ((name: string) => boolean) | null = null;

  /**
   * `root` is the canonical search directory (`/` or `/a/b`); `glob` and `type` are grep's
   * parameters (undefined: no filter). Invalid values are INVALID_PARAMETER naming them.
   */
  constructor(
    readonly root: string,
    glob: string | undefined,
    type: string | undefined,
  ) {
    if (glob !== undefined && glob !== '') {
      let g = glob;
      this.negated = g.startsWith('!');
      if (this.negated) g = g.slice(1);
      this.dirOnly = g.endsWith('/');
      if (this.dirOnly) g = g.slice(0, -1);
      const body = g.startsWith('/') ? g.slice(1) : g;
      this.anchored = g.includes('/');
      if (body === '') throw invalidParameter('glob', 'the glob is empty');
      try {
        this.glob = picomatch(body, { dot: true });
      } catch (error) {
        throw invalidParameter('glob', (error as Error).message);
      }
    }
    if (type !== undefined && type !== '') this.type = fileTypeMatcher(type);
  }

  /** True when the filter lets every file through. */
  get passesAll(): boolean {
    return this.glob === null && this.type === null;
  }

  /** Whether the file at `path` (under the root) is searched. */
  test(path: string): boolean {
    const rel = relativeTo(this.root, path);
    const slash = rel.lastIndexOf('/');
    const name = slash < 0 ? rel : rel.slice(slash + 1);
    if (this.type !== null && !this.type(name)) return false;
    const glob = this.glob;
    if (glob === null) return true;
    const fileHit = !this.dirOnly && glob(this.anchored ? rel : name);
    if (!this.negated) return fileHit;
    if (fileHit) return false;
    // An excluded directory excludes its whole subtree.
    for (let end = rel.indexOf('/'); end >= 0; end = rel.indexOf('/', end + 1)) {
      const dir = rel.slice(0, end);
      if (glob(this.anchored ? dir : dir.slice(dir.lastIndexOf('/') + 1))) return false;
    }
    return true;
  }
}
