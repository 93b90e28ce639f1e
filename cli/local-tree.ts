/**
 * The local side of `push`: which files of a directory are pushed, under which
 * remote path, and their SHA-256 (read in chunks, never whole).
 *
 * What is pushed, and why:
 * - Regular files, at the path relative to the directory, `/`-separated, NFC
 *   (the service stores NFC, so a name written NFD on disk compares equal).
 * - Directories whose name begins with a dot are skipped (`.git`, `.svn`,
 *   `.venv`, `.cache`…): they hold tooling state, not documents, and `.git`
 *   alone can be larger than the tree. A file named `.git` (a submodule's
 *   pointer) is skipped too. Other hidden files (`.env.example`) are pushed.
 * - A symbolic link to a file inside the directory is pushed with its
 *   target's content under the link's path. A link that leads outside the
 *   directory, a broken link and a link to a directory are skipped: the
 *   first two would publish or fail on something the operator did not choose,
 *   the last could loop or push a subtree twice.
 * - Sockets, FIFOs and devices are skipped.
 */
import { createHash } from 'node:crypto';
import { open, readdir, realpath, stat } from 'node:fs/promises';
import { join, relative, sep } from 'node:path';

/** A file of the local tree. */
export interface LocalFile {
  /** Where it is read from. */
  absolute: string;
  /** Its path in the workspace: leading `/`, `/`-separated, NFC. */
  remote: string;
}

/** Why a local entry was left out, with its path relative to the directory. */
export interface Skipped {
  path: string;
  reason: 'dot-directory' | 'git-file' | 'symlink-outside' | 'symlink-broken' | 'symlink-directory' | 'special-file' | 'same-path-as-another';
}

/** The files to push, sorted by remote path, and what was left out. */
export interface LocalTree {
  files: LocalFile[];
  skipped: Skipped[];
}

/** Walks `root` and returns what `push` sends, by the rules at the top of this file. */
export async function walkTree(root: string): Promise<LocalTree> {
  const rootReal = await realpath(root);
  const files: LocalFile[] = [];
  const skipped: Skipped[] = [];
  const inside = (target: string) => target.startsWith(rootReal + sep);
  const visit = async (dir: string): Promise<void> => {
    const entries = await readdir(dir, { withFileTypes: true });
    for (const entry of entries) {
      const full = join(dir, entry.name);
      const rel = relative(root, full);
      if (entry.isDirectory()) {
        if (entry.name.startsWith('.')) skipped.push({ path: rel, reason: 'dot-directory' });
        else await visit(full);
      } else if (entry.name === '.git') {
        skipped.push({ path: rel, reason: 'git-file' });
      } else if (entry.isFile()) {
        files.push({ absolute: full, remote: remotePath(rel) });
      } else if (entry.isSymbolicLink()) {
        const target = await realpath(full).catch(() => null);
        const kind = target === null ? null : await stat(target).catch(() => null);
        if (target === null || kind === null) skipped.push({ path: rel, reason: 'symlink-broken' });
        else if (!inside(target)) skipped.push({ path: rel, reason: 'symlink-outside' });
        else if (kind.isDirectory()) skipped.push({ path: rel, reason: 'symlink-directory' });
        else if (kind.isFile()) files.push({ absolute: full, remote: remotePath(rel) });
        else skipped.push({ path: rel, reason: 'special-file' });
      } else {
        skipped.push({ path: rel, reason: 'special-file' });
      }
    }
  };
  await visit(root);
  files.sort((a, b) => (a.remote < b.remote ? -1 : a.remote > b.remote ? 1 : 0));
  // Two names that differ only in Unicode normalization land on one remote path: the first wins.
  const unique: LocalFile[] = [];
  for (const file of files) {
    if (unique.length > 0 && unique[unique.length - 1].remote === file.remote)
      skipped.push({ path: relative(root, file.absolute), reason: 'same-path-as-another' });
    else unique.push(file);
  }
  return { files: unique, skipped };
}

/** The workspace path of a path relative to the pushed directory. */
export function remotePath(relativePath: string): string {
  return '/' + relativePath.split(sep).join('/').normalize('NFC');
}

/** Bytes read per call while hashing: large enough that a syscall per chunk costs nothing, small enough to keep per worker. */
const CHUNK_BYTES = 256 * 1024;

/** A file's SHA-256 (hex) and size, read in chunks into `buffer` (reused by the caller across files). */
export async function hashFile(path: string, buffer: Buffer = Buffer.allocUnsafe(CHUNK_BYTES)): Promise<{ sha256: string; size: number }> {
  const hash = createHash('sha256');
  const handle = await open(path, 'r');
  let size = 0;
  try {
    for (;;) {
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) break;
      hash.update(buffer.subarray(0, bytesRead));
      size += bytesRead;
    }
  } finally {
    await handle.close();
  }
  return { sha256: hash.digest('hex'), size };
}

/** A buffer of the size `hashFile` reads in, for one hashing worker. */
export function hashBuffer(): Buffer {
  return Buffer.allocUnsafe(CHUNK_BYTES);
}
