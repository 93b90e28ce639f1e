/** File rows of a workspace: the listing (uploads and ingest state live beside it). */
import pMap from 'p-map';
import { VfsError } from '../core/errors.js';
import { recordChanges } from './changes.js';
import type { Tx } from './database.js';
import { iso } from './rows.js';

/** The ingest states of a file. */
export const FILE_STATUSES = ['pending', 'ready', 'error'] as const;
export type FileStatus = (typeof FILE_STATUSES)[number];

/** A file listing entry (SPEC.md section 2). */
export interface FileEntry {
  path: string;
  status: FileStatus;
  sizeBytes: number;
  contentType: string;
  updatedAt: string;
  errorDetail: string | null;
  /** SHA-256 of the original's bytes, hex: a client compares it to tell a changed file from an unchanged one. */
  sha256: string;
  /** The upload's visibility claims, or null when every token sees the file. */
  visibility: string[] | null;
}

/** One listing page request; `after` is the last path already seen. */
export interface FilePageQuery {
  status: FileStatus | undefined;
  after: string | undefined;
  limit: number;
}

/** A page of files in ascending path order, and the last path of the page when more follow. */
export async function listFiles(tx: Tx, workspaceId: string, q: FilePageQuery): Promise<{ files: FileEntry[]; lastPath: string | null }> {
  const { rows } = await tx.query<{
    path: string;
    status: FileStatus;
    size_bytes: string;
    content_type: string;
    updated_at: Date;
    error_detail: string | null;
    blob_sha256: string;
    visibility: string[] | null;
  }>(
    `SELECT path, status, size_bytes, content_type, updated_at, error_detail, blob_sha256, visibility FROM files
      WHERE workspace_id = $1 AND ($2::text IS NULL OR status = $2) AND ($3::text IS NULL OR path COLLATE "C" > $3)
      ORDER BY path COLLATE "C" LIMIT $4`,
    [workspaceId, q.status ?? null, q.after ?? null, q.limit + 1],
  );
  const more = rows.length > q.limit;
  const files = (more ? rows.slice(0, q.limit) : rows).map((r) => ({
    path: r.path,
    status: r.status,
    sizeBytes: Number(r.size_bytes),
    contentType: r.content_type,
    updatedAt: iso(r.updated_at),
    errorDetail: r.error_detail,
    sha256: r.blob_sha256,
    visibility: r.visibility,
  }));
  return { files, lastPath: more ? files[files.length - 1].path : null };
}

/** What an accepted upload records. */
export interface UploadRecord {
  accountId: string;
  workspaceId: string;
  path: string;
  sizeBytes: number;
  contentType: string;
  /** Visibility claims, or null for "visible to every token". */
  visibility: string[] | null;
  blobSha256: string;
}

/** Limits an upload is checked against. */
export interface UploadLimits {
  maxFiles: number;
  maxStorageBytes: number;
}

/**
 * Blobs of one batch put into the store at once: a batch holds up to 256 uploads, and each put of
 * a large file on S3 holds up to two 8 MiB parts in memory.
 */
const PUBLISH_CONCURRENCY = 8;

/** Where a packed blob's bytes are: a part of one object of the store (ingest/blob-store.ts, "packs"). */
export interface PackedAt {
  pack: string;
  offset: number;
  size: number;
}

/** How one upload of a batch ended: recorded (with the blob it replaced, if another), or refused. */
export type UploadOutcome = { ok: true; replacedBlob: string | null } | { ok: false; error: VfsError };

/**
 * Records a batch of one account's uploads, with their ingest jobs, in the
 * caller's transaction (group commit: one lock on the account's usage and one
 * WAL flush for the whole batch). Uploads are decided in order against the
 * file-count and storage limits, a replaced file's old size counting back;
 * refused ones get FILE_QUOTA or STORAGE_QUOTA (403) and are not written. For
 * the accepted ones, under the batch's blob locks (so a concurrent cleanup cannot
 * remove a blob before this commits), `publish` moves each blob into place,
 * and then one statement writes the rows, the jobs and the place of each blob
 * stored in a pack (`packed[index]`) unless the blob already has one. A batch
 * names each path at most once. Returns each upload's outcome and the packs
 * that a blob's place now names.
 */
export async function recordUploads(
  tx: Tx,
  accountId: string,
  uploads: readonly UploadRecord[],
  limits: UploadLimits,
  publish: (index: number) => Promise<void>,
  packed: ReadonlyArray<PackedAt | null> = [],
): Promise<{ outcomes: UploadOutcome[]; packs: Set<string> }> {
  // One round trip takes every lock of the batch, in the order of lockUsage: the account's usage
  // row (made if need be), the rows that get replaced (in key order), then the blob locks of all
  // the batch's blobs (a refused upload's too: held a moment longer, they change nothing). Each
  // step waits for the one before it: `existing` reads `usage`, `blobs` reads `existing`.
  const { rows: locked } = await tx.query<{ files: string; bytes: string; existing: ExistingRow[] | null }>(
    `WITH usage AS (
       ${MAKE_AND_LOCK_USAGE}),
     existing AS (
       SELECT f.workspace_id, f.path, f.size_bytes, f.blob_sha256
         FROM files f JOIN unnest($2::uuid[], $3::text[]) AS u(ws, path) ON f.workspace_id = u.ws AND f.path = u.path
        WHERE EXISTS (SELECT FROM usage)
        ORDER BY f.workspace_id, f.path FOR UPDATE OF f),
     blobs AS (
       SELECT ${BLOB_LOCK} FROM unnest($4::text[]) AS k
        WHERE (SELECT count(*) FROM existing) >= 0 ORDER BY k)
     SELECT files, bytes, (SELECT count(*) FROM blobs) AS blobs,
            (SELECT json_agg(existing) FROM existing) AS existing
       FROM usage`,
    [
      accountId,
      uploads.map((u) => u.workspaceId),
      uploads.map((u) => u.path),
      blobKeys(
        accountId,
        uploads.map((u) => u.blobSha256),
      ),
    ],
  );
  const old = new Map((locked[0].existing ?? []).map((r) => [`${r.workspace_id}/${r.path}`, r]));
  let files = Number(locked[0].files);
  let bytes = Number(locked[0].bytes);
  const outcomes: UploadOutcome[] = [];
  const accepted: number[] = [];
  uploads.forEach((up, i) => {
    const before = old.get(`${up.workspaceId}/${up.path}`);
    const nextFiles = files + (before === undefined ? 1 : 0);
    const nextBytes = bytes - Number(before?.size_bytes ?? 0) + up.sizeBytes;
    if (nextFiles > limits.maxFiles) outcomes.push({ ok: false, error: new VfsError('FILE_QUOTA', { limit: limits.maxFiles }) });
    else if (nextBytes > limits.maxStorageBytes) outcomes.push({ ok: false, error: new VfsError('STORAGE_QUOTA', { limit: limits.maxStorageBytes }) });
    else {
      files = nextFiles;
      bytes = nextBytes;
      accepted.push(i);
      outcomes.push({ ok: true, replacedBlob: before !== undefined && before.blob_sha256 !== up.blobSha256 ? before.blob_sha256 : null });
    }
  });
  if (accepted.length === 0) return { outcomes, packs: new Set() };
  const rows = accepted.map((i) => uploads[i]);
  await pMap(
    accepted.filter((i) => (packed[i] ?? null) === null),
    (i) => publish(i),
    { concurrency: PUBLISH_CONCURRENCY },
  );
  const places = new Map<string, PackedAt>();
  for (const i of accepted) if ((packed[i] ?? null) !== null) places.set(uploads[i].blobSha256, packed[i]!);
  // With the rows, each packed blob's place. A blob stored before keeps its place: a place is only
  // ever removed with its blob (under the blob's lock, which this holds), so the pack it names is there.
  const { rows: placed } = await tx.query<{ pack: string }>(
    `WITH u AS (
       SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::text[])
         AS u(ws, path, size, content_type, visibility, blob)),
     p AS (
       INSERT INTO blob_packs (account_id, sha256, pack, byte_offset, size_bytes)
       SELECT $7, * FROM unnest($8::text[], $9::text[], $10::bigint[], $11::bigint[])
       ON CONFLICT (account_id, sha256) DO NOTHING RETURNING pack),
     f AS (
       INSERT INTO files (workspace_id, account_id, path, status, size_bytes, content_type, visibility, blob_sha256)
       SELECT ws, $7, path, 'pending', size, content_type, string_to_array(visibility, ','), blob FROM u
       ON CONFLICT (workspace_id, path) DO UPDATE SET status = 'pending', size_bytes = excluded.size_bytes,
         content_type = excluded.content_type, visibility = excluded.visibility, blob_sha256 = excluded.blob_sha256,
         generation = nextval('file_generations'), error_detail = NULL, text_is_original = NULL, updated_at = now()
       RETURNING workspace_id, path, generation),
     j AS (
       INSERT INTO ingest_jobs (account_id, workspace_id, path, generation) SELECT $7, workspace_id, path, generation FROM f
       ON CONFLICT (workspace_id, path) DO UPDATE SET generation = excluded.generation, attempts = 0,
         run_after = now(), lease_until = NULL, last_error = NULL)
     SELECT DISTINCT pack FROM p`,
    [
      rows.map((up) => up.workspaceId),
      rows.map((up) => up.path),
      rows.map((up) => up.sizeBytes),
      rows.map((up) => up.contentType),
      // Claims never contain a comma (their shape is checked at upload), so they travel joined; NULL stays NULL.
      rows.map((up) => (up.visibility === null ? null : up.visibility.join(','))),
      rows.map((up) => up.blobSha256),
      accountId,
      [...places.keys()],
      [...places.values()].map((p) => p.pack),
      [...places.values()].map((p) => p.offset),
      [...places.values()].map((p) => p.size),
    ],
  );
  const packs = new Set(placed.map((r) => r.pack));
  return { outcomes, packs };
}

/** A file's ingest status and visibility, or null when there is no such file. */
export async function fileState(tx: Tx, workspaceId: string, path: string): Promise<{ status: FileStatus; visibility: string[] | null } | null> {
  const { rows } = await tx.query<{ status: FileStatus; visibility: string[] | null }>(
    'SELECT status, visibility FROM files WHERE workspace_id = $1 AND path = $2',
    [workspaceId, path],
  );
  return rows[0] ?? null;
}

/** Makes account $1's usage row if need be, locks it and returns its counts (lockUsage). */
const MAKE_AND_LOCK_USAGE = `INSERT INTO account_usage AS a (account_id) VALUES ($1)
  ON CONFLICT (account_id) DO UPDATE SET files = a.files RETURNING files, bytes`;

/**
 * Locks the account's usage row (creating it unless `create` is false) and returns it.
 *
 * Lock order. Every transaction that changes files takes its row locks in the
 * same order, so that two of them never wait on each other in a cycle (which
 * PostgreSQL would end by failing one of them): the account's usage row, then
 * workspace rows (by id), then file rows (by workspace and path), then jobs.
 * Uploads and deletions start here; finishing jobs changes no usage and
 * starts at the workspaces.
 */
export async function lockUsage(tx: Tx, accountId: string, create = true): Promise<{ files: string; bytes: string } | undefined> {
  // Deletions pass create = false: an account without a usage row has no files to delete, and a
  // refused request must not write one. Else one statement makes the row if need be and locks it.
  const { rows } = await tx.query<{ files: string; bytes: string }>(
    create ? MAKE_AND_LOCK_USAGE : 'SELECT files, bytes FROM account_usage WHERE account_id = $1 FOR UPDATE',
    [accountId],
  );
  return rows[0];
}

/** Deletes a file row and its pending job; returns its blob, or null when there was no such file. */
export async function deleteFile(tx: Tx, accountId: string, workspaceId: string, path: string): Promise<string | null> {
  await lockUsage(tx, accountId, false);
  await tx.query('SELECT 1 FROM workspaces WHERE id = $1 FOR NO KEY UPDATE', [workspaceId]);
  const { rows } = await tx.query<{ blob_sha256: string; status: FileStatus }>(
    'DELETE FROM files WHERE workspace_id = $1 AND path = $2 RETURNING blob_sha256, status',
    [workspaceId, path],
  );
  if (rows.length === 0) return null;
  await tx.query('DELETE FROM ingest_jobs WHERE workspace_id = $1 AND path = $2', [workspaceId, path]);
  await recordChanges(tx, workspaceId, 1, [path]);
  return rows[0].blob_sha256;
}

/** Of the given blobs, those some file of the account still references. */
export async function referencedBlobs(tx: Tx, shas: string[]): Promise<Set<string>> {
  const { rows } = await tx.query<{ blob_sha256: string }>('SELECT DISTINCT blob_sha256 FROM files WHERE blob_sha256 = ANY($1)', [shas]);
  return new Set(rows.map((r) => r.blob_sha256));
}

/**
 * Of the given blobs of an account, those no file references now. No lock is taken: a caller
 * removing them checks again under their blob locks (a sweep passes over thousands this way in
 * one statement, where the locked check costs a transaction a hundred).
 */
export async function unreferencedBlobs(tx: Tx, accountId: string, shas: readonly string[]): Promise<string[]> {
  const { rows } = await tx.query<{ sha: string }>(
    'SELECT sha FROM unnest($2::text[]) AS sha WHERE NOT EXISTS (SELECT 1 FROM files WHERE account_id = $1 AND blob_sha256 = sha)',
    [accountId, [...shas]],
  );
  return rows.map((r) => r.sha);
}

/** Where an account's blob is packed, or null when it is an object of its own (or not stored). */
export async function blobPlace(tx: Tx, accountId: string, sha: string): Promise<PackedAt | null> {
  const { rows } = await tx.query<{ pack: string; byte_offset: string; size_bytes: string }>(
    'SELECT pack, byte_offset, size_bytes FROM blob_packs WHERE account_id = $1 AND sha256 = $2',
    [accountId, sha],
  );
  return rows.length === 0 ? null : { pack: rows[0].pack, offset: Number(rows[0].byte_offset), size: Number(rows[0].size_bytes) };
}

/**
 * Forgets where the given blobs of an account are packed (the caller holds their blob locks and
 * removes them); returns the packs that then hold no blob, for the caller to remove once this
 * commits (no place names them again: a new place always names a new pack).
 */
export async function unpackBlobs(tx: Tx, accountId: string, shas: readonly string[]): Promise<string[]> {
  const { rows } = await tx.query<{ pack: string }>('DELETE FROM blob_packs WHERE account_id = $1 AND sha256 = ANY($2) RETURNING pack', [accountId, [...shas]]);
  return emptyPacks(tx, accountId, [...new Set(rows.map((r) => r.pack))]);
}

/** Of an account's packs, those no blob is placed in any more, each locked until the transaction ends. */
export async function emptyPacks(tx: Tx, accountId: string, packs: readonly string[]): Promise<string[]> {
  if (packs.length === 0) return [];
  await tx.query('SELECT pg_advisory_xact_lock(hashtextextended(k, 2)) FROM unnest($1::text[]) AS k ORDER BY k', [[...packs]]);
  const { rows } = await tx.query<{ pack: string }>('SELECT DISTINCT pack FROM blob_packs WHERE account_id = $1 AND pack = ANY($2)', [accountId, [...packs]]);
  const used = new Set(rows.map((r) => r.pack));
  return packs.filter((p) => !used.has(p));
}

/**
 * Of some of an account's packs: those that hold a place, and the blobs placed in them that no
 * file references now (no lock taken, as in unreferencedBlobs).
 */
export async function packContents(tx: Tx, accountId: string, packs: readonly string[]): Promise<{ placed: Set<string>; unreferenced: string[] }> {
  const placed = await tx.query<{ pack: string }>('SELECT DISTINCT pack FROM blob_packs WHERE account_id = $1 AND pack = ANY($2)', [accountId, [...packs]]);
  const unreferenced = await tx.query<{ sha256: string }>(
    `SELECT sha256 FROM blob_packs p WHERE account_id = $1 AND pack = ANY($2)
       AND NOT EXISTS (SELECT 1 FROM files WHERE account_id = $1 AND blob_sha256 = p.sha256)`,
    [accountId, [...packs]],
  );
  return { placed: new Set(placed.rows.map((r) => r.pack)), unreferenced: unreferenced.rows.map((r) => r.sha256) };
}

/** Serializes publishing and removing each of an account's blobs until the transaction ends: locks taken in one order everywhere (no deadlock between takers). */
export async function lockBlobs(tx: Tx, accountId: string, shas: string[]): Promise<void> {
  await tx.query(`SELECT ${BLOB_LOCK} FROM unnest($1::text[]) AS k ORDER BY k`, [blobKeys(accountId, shas)]);
}

/** A blob's lock (lockBlobs), on its key `k` (blobKeys): in statements that take them in key order. */
const BLOB_LOCK = 'pg_advisory_xact_lock(hashtextextended(k, 1))';

/** The keys of an account's blob locks (lockBlobs), each once. */
function blobKeys(accountId: string, shas: readonly string[]): string[] {
  return [...new Set(shas.map((sha) => `${accountId}/${sha}`))];
}

/** A file row an upload replaces, as recordUploads locks it. */
interface ExistingRow {
  workspace_id: string;
  path: string;
  size_bytes: number;
  blob_sha256: string;
}
