/**
 * What shard repair reads and writes in PostgreSQL: the workspaces to check
 * (all at start, or those the operator asked to rebuild), a workspace's files
 * as the shard should hold them, and re-queuing the files a shard lacks.
 * Files re-queued go back to `pending` (their text is not readable until the
 * shard has it again) with an ingest job at their current generation.
 */
import { INVALIDATE_CHANNEL } from './accounts.js';
import type { Database, Tx } from './database.js';

/** A workspace whose shard is to be checked. */
export interface ShardWorkspace {
  id: string;
  accountId: string;
  /** When the operator asked for a rebuild, or null (check only). */
  rebuildRequestedAt: Date | null;
}

/** A file row as shard repair compares it with the shard. */
export interface ShardFile {
  path: string;
  status: 'pending' | 'ready' | 'error';
  blobSha256: string;
  /** True when an ingest job for the path is queued. */
  hasJob: boolean;
}

/** Every workspace (at start), or only those with a rebuild request; runs across accounts. */
export async function workspaceShards(db: Database, onlyRequested: boolean): Promise<ShardWorkspace[]> {
  const { rows } = await db.app.query<{ id: string; account_id: string; rebuild_requested_at: Date | null }>('SELECT * FROM workspace_shards($1)', [
    onlyRequested,
  ]);
  return rows.map((r) => ({ id: r.id, accountId: r.account_id, rebuildRequestedAt: r.rebuild_requested_at }));
}

/** The files of a workspace, with whether each has a queued job. */
export async function shardFiles(tx: Tx, workspaceId: string): Promise<ShardFile[]> {
  const { rows } = await tx.query<{ path: string; status: ShardFile['status']; blob_sha256: string; has_job: boolean }>(
    `SELECT f.path, f.status, f.blob_sha256, j.id IS NOT NULL AS has_job
       FROM files f LEFT JOIN ingest_jobs j ON j.workspace_id = f.workspace_id AND j.path = f.path
      WHERE f.workspace_id = $1`,
    [workspaceId],
  );
  return rows.map((r) => ({ path: r.path, status: r.status, blobSha256: r.blob_sha256, hasJob: r.has_job }));
}

/**
 * Puts files back in the queue: `ready` or `pending` ones become `pending`
 * with a job at their current generation (a queued job, e.g. of a newer
 * upload, is kept as it is). Returns how many jobs were added.
 */
export async function requeueFiles(tx: Tx, workspaceId: string, paths: string[]): Promise<number> {
  if (paths.length === 0) return 0;
  const { rowCount } = await tx.query(
    `WITH f AS (
       UPDATE files SET status = 'pending', error_detail = NULL
        WHERE workspace_id = $1 AND path = ANY($2::text[]) AND status IN ('ready', 'pending')
       RETURNING account_id, workspace_id, path, generation)
     INSERT INTO ingest_jobs (account_id, workspace_id, path, generation) SELECT * FROM f
     ON CONFLICT (workspace_id, path) DO NOTHING`,
    [workspaceId, paths],
  );
  return rowCount ?? 0;
}

/** Clears a rebuild request that is done (a newer request, made meanwhile, stays). */
export async function clearRebuildRequest(tx: Tx, workspaceId: string, requestedAt: Date): Promise<void> {
  await tx.query('UPDATE workspaces SET shard_rebuild_requested_at = NULL WHERE id = $1 AND shard_rebuild_requested_at <= $2', [workspaceId, requestedAt]);
}

/**
 * Asks for a workspace's shard to be rebuilt (operator command, owner role)
 * and tells a running service; false when there is no such workspace.
 */
export async function requestShardRebuild(db: Database, account: string, workspace: string): Promise<boolean> {
  return db.asOwner(async (tx) => {
    const { rowCount } = await tx.query(
      `UPDATE workspaces w SET shard_rebuild_requested_at = now() FROM accounts a
        WHERE a.id = w.account_id AND (a.name = $1 OR a.id::text = $1) AND w.name = $2`,
      [account, workspace],
    );
    if (rowCount !== 1) return false;
    await tx.query(`SELECT pg_notify('${INVALIDATE_CHANNEL}', 'shards')`);
    return true;
  });
}
