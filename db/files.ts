/** File rows of a workspace: the listing (uploads and ingest state live beside it). */
import { VfsError } from '../core/errors.js';
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
  }>(
    `SELECT path, status, size_bytes, content_type, updated_at, error_detail FROM files
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
 * Records an upload and enqueues its ingest job in the caller's transaction,
 * which must have the account's limits set (`uploadSettings`). Calls
 * `publish` (which moves the blob into place) under a lock on the blob, so a
 * concurrent cleanup cannot remove it before this commits; then writes the row
 * and the job in one statement, during which the usage trigger checks the
 * file-count and storage limits (403). Returns the blob the path referenced
 * before, if it was a different one.
 */
export async function recordUpload(
  tx: Tx,
  up: UploadRecord,
  limits: UploadLimits,
  publish: () => Promise<void>,
): Promise<{ replacedBlob: string | null }> {
  const existing = await tx.query<{ old: string | null }>(
    `SELECT pg_advisory_xact_lock(hashtextextended($3, 1)),
            (SELECT blob_sha256 FROM files WHERE workspace_id = $1 AND path = $2) AS old`,
    [up.workspaceId, up.path, `${up.accountId}/${up.blobSha256}`],
  );
  await publish();
  // From the file row's usage update to the commit, the account's usage row is locked: one
  // statement and the commit, so concurrent uploads of an account wait as little as possible.
  try {
    await tx.query(
      `WITH f AS (
         INSERT INTO files (workspace_id, account_id, path, status, size_bytes, content_type, visibility, blob_sha256)
         VALUES ($1, $2, $3, 'pending', $4, $5, $6, $7)
         ON CONFLICT (workspace_id, path) DO UPDATE SET status = 'pending', size_bytes = excluded.size_bytes,
           content_type = excluded.content_type, visibility = excluded.visibility, blob_sha256 = excluded.blob_sha256,
           generation = files.generation + 1, error_detail = NULL, updated_at = now()
         RETURNING generation)
       INSERT INTO ingest_jobs (account_id, workspace_id, path, generation) SELECT $2, $1, $3, generation FROM f
       ON CONFLICT (workspace_id, path) DO UPDATE SET generation = excluded.generation, attempts = 0,
         run_after = now(), lease_until = NULL, last_error = NULL`,
      [up.workspaceId, up.accountId, up.path, up.sizeBytes, up.contentType, up.visibility, up.blobSha256],
    );
  } catch (error) {
    const code = (error as { code?: string }).code;
    if (code === 'VQ001') throw new VfsError('FILE_QUOTA', { limit: limits.maxFiles });
    if (code === 'VQ002') throw new VfsError('STORAGE_QUOTA', { limit: limits.maxStorageBytes });
    throw error;
  }
  const old = existing.rows[0].old;
  return { replacedBlob: old !== null && old !== up.blobSha256 ? old : null };
}

/** The transaction settings an upload needs: the limits the usage trigger enforces. */
export function uploadSettings(limits: UploadLimits): Record<string, string> {
  return { 'app.max_files': String(limits.maxFiles), 'app.max_storage_bytes': String(limits.maxStorageBytes) };
}

/** A file's ingest status and visibility, or null when there is no such file. */
export async function fileState(tx: Tx, workspaceId: string, path: string): Promise<{ status: FileStatus; visibility: string[] | null } | null> {
  const { rows } = await tx.query<{ status: FileStatus; visibility: string[] | null }>(
    'SELECT status, visibility FROM files WHERE workspace_id = $1 AND path = $2',
    [workspaceId, path],
  );
  return rows[0] ?? null;
}

/** Deletes a file row and its pending job; returns its blob, or null when there was no such file. */
export async function deleteFile(tx: Tx, workspaceId: string, path: string): Promise<string | null> {
  const { rows } = await tx.query<{ blob_sha256: string; status: FileStatus }>(
    'DELETE FROM files WHERE workspace_id = $1 AND path = $2 RETURNING blob_sha256, status',
    [workspaceId, path],
  );
  if (rows.length === 0) return null;
  await tx.query('DELETE FROM ingest_jobs WHERE workspace_id = $1 AND path = $2', [workspaceId, path]);
  await tx.query('UPDATE workspaces SET version = version + 1 WHERE id = $1', [workspaceId]);
  return rows[0].blob_sha256;
}

/** Of the given blobs, those some file of the account still references. */
export async function referencedBlobs(tx: Tx, shas: string[]): Promise<Set<string>> {
  const { rows } = await tx.query<{ blob_sha256: string }>('SELECT DISTINCT blob_sha256 FROM files WHERE blob_sha256 = ANY($1)', [shas]);
  return new Set(rows.map((r) => r.blob_sha256));
}

/** Serializes publishing and removing one blob of one account until the transaction ends. */
export async function lockBlob(tx: Tx, accountId: string, sha: string): Promise<void> {
  await tx.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 1))', [`${accountId}/${sha}`]);
}
