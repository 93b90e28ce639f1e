/**
 * `push DIR WORKSPACE`: makes the workspace hold the directory's files.
 *
 * Phases, each resumable by running the command again:
 * 1. Compare: list the remote files, then hash (local-tree.ts) the local
 *    files the workspace holds already; a new file needs no hash. A file is
 *    uploaded when it is new, its SHA-256 differs, its visibility differs
 *    from what `--visibility` asks, or (with `--retry-errors`) its last
 *    ingest failed. Everything else is unchanged, so a second push of the
 *    same tree uploads nothing.
 * 2. Delete (only with `--delete`) remote files that are not in the tree,
 *    before the uploads, so that the freed file count and storage are there
 *    for them under a plan's limits.
 * 3. Upload with `concurrency` requests in flight, each file as soon as its
 *    hash is known (hashing runs ahead), streaming large files from disk. A
 *    refusal that concerns one file (400, 413) is recorded and the rest go
 *    on; one that concerns them all (401, 403 quota, 404 workspace) stops new
 *    uploads and fails the push.
 * 4. Wait for ingest by polling the listing's pending files until every
 *    file of the tree is ready or in error, then summarize.
 */
import { readFile, stat } from 'node:fs/promises';
import { type ApiClient, type Body, errorText, type Reply } from './client.js';
import { forEachLimited } from './concurrency.js';
import { contentTypeOf } from '../core/content-types.js';
import { CliError, httpError } from './errors.js';
import { anyWithStatus, listAll, type RemoteFile } from './files.js';
import { hashBuffer, hashFile, type LocalFile, type Skipped, walkTree } from './local-tree.js';
import type { StartBar } from './progress.js';

/** What to push and how; undefined fields take the defaults below. */
export interface PushOptions {
  /** The local directory. */
  dir: string;
  /** The workspace, which must exist. */
  workspace: string;
  /** Visibility claims every pushed file gets (sorted, without duplicates); null: visible to every token. */
  visibility: string[] | null;
  /** Delete remote files that are not in the directory. */
  delete: boolean;
  /** Uploads in flight; undefined means 16. */
  concurrency?: number;
  /** Upload again the files whose last ingest ended in error, though unchanged. */
  retryErrors: boolean;
  /** Wait for ingest before summarizing. */
  wait: boolean;
  /** Starts a progress bar (drawing nothing when stderr is not a terminal). */
  bars: StartBar;
}

/** What a push did and where the tree's files ended. */
export interface PushSummary {
  workspace: string;
  /** Files in the local tree. */
  files: number;
  uploaded: number;
  unchanged: number;
  deleted: number;
  /** Files of the tree ready to read. */
  ready: number;
  /** Files of the tree still pending (only without waiting). */
  pending: number;
  /** Files of the tree whose ingest ended in error, with the service's reason. */
  errors: Array<{ path: string; errorDetail: string | null }>;
  /** Uploads the service refused for that file alone (an invalid name, over the per-file limit). */
  refused: Array<{ path: string; status: number; message: string }>;
  /** Local entries left out (see local-tree.ts). */
  skipped: Skipped[];
}

/**
 * Uploads up to this size are read into memory and sent in one piece (fast for the many small
 * files of a source tree); larger ones stream from disk with a Content-Length, so memory stays
 * bounded by concurrency × this.
 */
const WHOLE_FILE_BYTES = 1024 * 1024;
/** A file's SHA-256 (hex) and size. */
type Hashed = { sha256: string; size: number };

/** Files hashed at once: enough to keep the disk and one core busy. */
const HASH_CONCURRENCY = 8;
/** Pause between two checks for pending files while ingest runs. */
const POLL_MS = 250;
/** Pause between two full listings of the pending files, which move the ingest bar. */
const SCAN_MS = 2000;
/** The default number of uploads in flight (measured with bench/push.ts; see docs/cli.md). */
export const DEFAULT_CONCURRENCY = 16;

/** Pushes a directory into a workspace; throws CliError when the push cannot go on (the summary then is not reached). */
export async function push(client: ApiClient, options: PushOptions): Promise<PushSummary> {
  const concurrency = options.concurrency ?? DEFAULT_CONCURRENCY;
  const tree = await walkTree(options.dir).catch((error: NodeJS.ErrnoException) => {
    throw new CliError(`cannot read the directory ${options.dir}: ${error.code === 'ENOENT' ? 'it does not exist' : error.message}`);
  });
  let fatal: CliError | null = null;
  const remoteFiles = await listAll(client, options.workspace);
  const remote = new Map(remoteFiles.map((f) => [f.path, f]));
  // Only a file the workspace holds already is hashed: a new one is uploaded whatever its hash
  // (a first push reads each file once). Hashing runs ahead of the uploads, which take each file
  // as soon as its hash is known, so the disk and the network work side by side.
  const hashes = hashAhead(
    tree.files,
    (file) => remote.has(file.remote),
    () => fatal !== null,
  );
  const local = new Set(tree.files.map((f) => f.remote));
  const doomed = options.delete ? remoteFiles.filter((f) => !local.has(f.path)).map((f) => f.path) : [];

  let deleted = 0;
  if (doomed.length > 0) {
    const bar = options.bars('deleting', doomed.length);
    try {
      await forEachLimited(doomed, concurrency, async (path) => {
        const res = await client.send({ method: 'DELETE', path: filePath(options.workspace, path), what: `delete ${path}` });
        // 404: gone already (another push, or a workspace member deleting too): the goal is met.
        if (res.status !== 204 && res.status !== 404) throw httpError(res.status, `delete ${path}`, await errorText(res));
        await res.discard();
        deleted++;
        bar.increment();
      });
    } finally {
      bar.stop();
    }
  }

  const refused: PushSummary['refused'] = [];
  const accepted: string[] = [];
  const unchanged: RemoteFile[] = [];
  const query = options.visibility === null ? '' : `?visibility=${encodeURIComponent(options.visibility.join(','))}`;
  // One bar over every file of the tree, unchanged ones included: how many uploads there will
  // be is known only once the last file the workspace holds is hashed, near the end.
  const bar = options.bars('uploading', tree.files.length);
  try {
    await forEachLimited(
      tree.files.map((_, i) => i),
      concurrency,
      async (i) => {
        const file = tree.files[i];
        const there = remote.get(file.remote);
        let size: number | null = null;
        if (there !== undefined) {
          const hashed = await hashes[i]!;
          size = hashed.size;
          const same = there.sha256 === hashed.sha256 && sameClaims(there.visibility, options.visibility) && !(options.retryErrors && there.status === 'error');
          if (same) {
            unchanged.push(there);
            bar.increment();
            return;
          }
        }
        const res = await upload(client, options.workspace, file, size, query);
        if (res.status === 202) {
          await res.discard();
          accepted.push(file.remote);
        } else if (res.status === 400 || res.status === 413 || res.status >= 500) {
          refused.push({ path: file.remote, status: res.status, message: await errorText(res) });
        } else {
          // 401, 403 (file-count or storage limit), 404 (no such workspace): every other upload would fail alike.
          fatal ??= httpError(res.status, `upload ${file.remote}`, await errorText(res));
        }
        bar.increment(1, `, ${accepted.length} uploaded`);
      },
      () => fatal !== null,
    );
  } finally {
    bar.stop();
  }
  if (fatal !== null) {
    throw new CliError(`${(fatal as CliError).message}\n${accepted.length} uploads were accepted before it; run the push again to resume`);
  }

  // The tree's files whose ingest is not over: this push's uploads and earlier ones still pending.
  const watch = new Set([...accepted, ...unchanged.filter((f) => f.status === 'pending').map((f) => f.path)]);
  const pending = options.wait ? await waitIngest(client, options.workspace, watch, options.bars) : watch;
  // The tree's files the workspace holds now; a refused file's older version is not one of them.
  const held = new Set([...accepted, ...unchanged.map((f) => f.path)]);
  const errorFiles = (await listAll(client, options.workspace, 'error')).filter((f) => held.has(f.path) && !pending.has(f.path));
  return {
    workspace: options.workspace,
    files: tree.files.length,
    uploaded: accepted.length,
    unchanged: unchanged.length,
    deleted,
    ready: held.size - errorFiles.length - pending.size,
    pending: pending.size,
    errors: errorFiles.map((f) => ({ path: f.path, errorDetail: f.errorDetail })).sort((a, b) => (a.path < b.path ? -1 : 1)),
    refused: refused.sort((a, b) => (a.path < b.path ? -1 : 1)),
    skipped: tree.skipped,
  };
}

/** True when a push makes the summary's exit status 1: a file in error or refused. */
export function pushFailed(summary: PushSummary): boolean {
  return summary.errors.length > 0 || summary.refused.length > 0;
}

/** The summary for people: counts, then one line per file in error, refused or skipped. */
export function formatSummary(s: PushSummary): string {
  const lines = [
    `uploaded: ${s.uploaded}  unchanged: ${s.unchanged}  deleted: ${s.deleted}  skipped: ${s.skipped.length}`,
    `ready: ${s.ready}  in error: ${s.errors.length}  refused: ${s.refused.length}${s.pending > 0 ? `  pending: ${s.pending}` : ''}`,
  ];
  for (const e of s.errors) lines.push(`error ${e.path}: ${e.errorDetail ?? '(no detail)'}`);
  for (const r of s.refused) lines.push(`refused ${r.path} (${r.status}): ${r.message}`);
  for (const k of s.skipped) lines.push(`skipped ${k.path} (${k.reason})`);
  return lines.join('\n');
}

/**
 * Starts hashing the files `wanted` picks, `HASH_CONCURRENCY` at a time in the files' order,
 * and returns one promise per file (null for a file not wanted). Once `stopped()` is true the
 * files not yet started are not read.
 */
function hashAhead(files: readonly LocalFile[], wanted: (file: LocalFile) => boolean, stopped: () => boolean): Array<Promise<Hashed> | null> {
  const settle = new Map<number, { resolve: (h: Hashed) => void; reject: (e: unknown) => void }>();
  const promises = files.map((file, i) => {
    if (!wanted(file)) return null;
    const p = new Promise<Hashed>((resolve, reject) => settle.set(i, { resolve, reject }));
    // A hash nobody waits for any more (the push stopped) must not fail the process as unhandled.
    p.catch(() => {});
    return p;
  });
  const buffers: Buffer[] = [];
  void forEachLimited(
    [...settle.keys()],
    HASH_CONCURRENCY,
    async (i) => {
      const buffer = buffers.pop() ?? hashBuffer();
      try {
        settle.get(i)!.resolve(await hashFile(files[i].absolute, buffer));
      } catch (error) {
        settle.get(i)!.reject(new CliError(`cannot read ${files[i].absolute}: ${(error as Error).message}`));
      } finally {
        buffers.push(buffer);
      }
    },
    stopped,
  );
  return promises;
}

/** Sends one file (`size` when known from hashing): read whole when small, else streamed from disk (reopened for a retried attempt). */
async function upload(client: ApiClient, workspace: string, file: LocalFile, size: number | null, query: string): Promise<Reply> {
  const headers = { 'content-type': contentTypeOf(file.remote) };
  let body: Body;
  try {
    const bytes = size ?? (await stat(file.absolute)).size;
    // A streamed upload declares its length too: the service refuses a file over the plan's limit before reading it.
    body = bytes <= WHOLE_FILE_BYTES ? await readFile(file.absolute) : { file: file.absolute, size: bytes };
  } catch (error) {
    throw new CliError(`cannot read ${file.absolute}: ${(error as Error).message}`);
  }
  return client.send({ method: 'PUT', path: filePath(workspace, file.remote) + query, what: `upload ${file.remote}`, headers, body });
}

/** The URL path of a file: each segment percent-encoded on its own, so that `/` stays the separator. */
function filePath(workspace: string, remote: string): string {
  return `/v1/workspaces/${encodeURIComponent(workspace)}/files/${remote.slice(1).split('/').map(encodeURIComponent).join('/')}`;
}

function sameClaims(a: readonly string[] | null, b: readonly string[] | null): boolean {
  if (a === null || b === null) return a === b;
  return a.length === b.length && a.every((claim, i) => claim === b[i]);
}

/**
 * Waits until no file of `watch` is pending. Every `POLL_MS` one row of the pending files is
 * asked for (none left in the workspace: done); every `SCAN_MS` all of them are listed, which
 * moves the bar and sees this push's files done while another client's are still pending.
 * Listing thousands of rows four times a second would take CPU from the ingest it waits for.
 */
async function waitIngest(client: ApiClient, workspace: string, watch: Set<string>, bars: StartBar): Promise<Set<string>> {
  const bar = bars('ingesting', watch.size);
  let pending = watch;
  let scanned = Date.now();
  try {
    while (pending.size > 0) {
      await new Promise((r) => setTimeout(r, POLL_MS));
      if (!(await anyWithStatus(client, workspace, 'pending'))) {
        pending = new Set();
      } else if (Date.now() - scanned >= SCAN_MS) {
        const now = new Set<string>();
        for (const f of await listAll(client, workspace, 'pending')) if (pending.has(f.path)) now.add(f.path);
        pending = now;
        scanned = Date.now();
      }
      bar.update(watch.size - pending.size);
    }
  } finally {
    bar.stop();
  }
  return pending;
}
