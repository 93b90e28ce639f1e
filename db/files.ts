/** File rows of a workspace: the listing (uploads and ingest state live beside it). */
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
