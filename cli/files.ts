/**
 * The file listing of a workspace, every page of it: `files list` prints it,
 * `push` compares against it and polls it while ingest runs.
 */
import type { z } from 'zod';
import type { REPLIES } from '../api/contract/schemas.js';
import type { ApiClient } from './client.js';
import type { Output } from './output.js';

/** A file listing entry, as the service returns it (the type of the schema the OpenAPI document states it by). */
export type RemoteFile = z.infer<typeof REPLIES.files>['files'][number];

/** Ingest status of a file. */
export type FileStatus = RemoteFile['status'];

/** The ingest statuses, as the listing's `status` filter accepts them. */
export const FILE_STATUSES: readonly FileStatus[] = ['pending', 'ready', 'error'];

/** The largest page the listing serves: fewest round trips. */
const PAGE = 1000;

/** Yields the workspace's files page by page (sorted by path), following the cursor to the end. */
export async function* listPages(client: ApiClient, workspace: string, status?: FileStatus): AsyncGenerator<RemoteFile[]> {
  let cursor: string | null = null;
  do {
    const query = new URLSearchParams({ limit: String(PAGE) });
    if (status !== undefined) query.set('status', status);
    if (cursor !== null) query.set('cursor', cursor);
    const page: { files: RemoteFile[]; nextCursor: string | null } = await client.json({
      method: 'GET',
      path: `/v1/workspaces/${encodeURIComponent(workspace)}/files?${query}`,
      what: `list the files of ${workspace}`,
    });
    yield page.files;
    cursor = page.nextCursor;
  } while (cursor !== null);
}

/** True when the workspace has at least one file with this status: one row asked for, the cheapest question the listing answers. */
export async function anyWithStatus(client: ApiClient, workspace: string, status: FileStatus): Promise<boolean> {
  const page: { files: RemoteFile[] } = await client.json({
    method: 'GET',
    path: `/v1/workspaces/${encodeURIComponent(workspace)}/files?status=${status}&limit=1`,
    what: `list the files of ${workspace}`,
  });
  return page.files.length > 0;
}

/** Every file of the workspace (with `status`, only those). */
export async function listAll(client: ApiClient, workspace: string, status?: FileStatus): Promise<RemoteFile[]> {
  const files: RemoteFile[] = [];
  for await (const page of listPages(client, workspace, status)) files.push(...page);
  return files;
}

/** `files list WORKSPACE [--status S]`: one line per file (JSON Lines with --json), printed as the pages arrive. */
export async function filesList(client: ApiClient, out: Output, workspace: string, status: FileStatus | undefined): Promise<void> {
  for await (const page of listPages(client, workspace, status)) {
    for (const f of page) {
      if (out.json) out.line(JSON.stringify(f));
      else out.line(`${f.status.padEnd(7)} ${String(f.sizeBytes).padStart(10)}  ${f.path}${f.errorDetail === null ? '' : `  (${f.errorDetail})`}`);
    }
  }
}
