/**
 * What the console's status (GET /v1/status) reads of the transaction's account: its
 * workspaces with their files counted by ingest status, the age of its oldest ingest job, and
 * the files whose ingest ended lately. Row level security confines every query to the account.
 * Each statement reads the account's files once: the cost grows with its files, as the listing's.
 */
import type { Tx } from './database.js';
import { iso } from './rows.js';

/** A workspace with its files counted. */
export interface WorkspaceStatus {
  id: string;
  name: string;
  createdAt: string;
  files: number;
  /** Bytes of its originals, as uploaded. */
  bytes: number;
  ready: number;
  pending: number;
  error: number;
}

/** Every workspace of the account, by name, with its files counted by status (one statement, grouped by workspace). */
export async function workspaceStatus(tx: Tx): Promise<WorkspaceStatus[]> {
  const { rows } = await tx.query<{
    id: string;
    name: string;
    created_at: Date;
    files: number;
    bytes: number;
    ready: number;
    pending: number;
    error: number;
  }>(
    `SELECT w.id, w.name, w.created_at, count(f.path)::int AS files, coalesce(sum(f.size_bytes), 0)::float8 AS bytes,
            count(*) FILTER (WHERE f.status = 'ready')::int AS ready, count(*) FILTER (WHERE f.status = 'pending')::int AS pending,
            count(*) FILTER (WHERE f.status = 'error')::int AS error
       FROM workspaces w LEFT JOIN files f ON f.workspace_id = w.id
      GROUP BY w.id ORDER BY w.name`,
  );
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    createdAt: iso(r.created_at),
    files: r.files,
    bytes: r.bytes,
    ready: r.ready,
    pending: r.pending,
    error: r.error,
  }));
}

/** Age in seconds of the account's oldest ingest job waiting or running (0 when none): `vfs_ingest_oldest_job_seconds` for one account. */
export async function oldestJobSeconds(tx: Tx): Promise<number> {
  const { rows } = await tx.query<{ seconds: number }>('SELECT coalesce(extract(epoch FROM now() - min(created_at)), 0)::float8 AS seconds FROM ingest_jobs');
  return rows[0].seconds;
}

/** Files whose ingest ended in one slot: how many became ready and how many ended in error. */
export interface FinishedSlot {
  /** The slot's number: its start in ms since the epoch, divided by the slot's length. */
  slot: number;
  ready: number;
  error: number;
}

/**
 * The account's files whose ingest ended (ready or error, by `finished_at`) at or after
 * `since`, counted per slot of `slotMs`; slots with none are absent. A file counts once, at
 * its last end.
 */
export async function finishedSince(tx: Tx, since: Date, slotMs: number): Promise<FinishedSlot[]> {
  const { rows } = await tx.query<FinishedSlot>(
    `SELECT floor(extract(epoch FROM finished_at) * 1000 / $2)::float8 AS slot,
            count(*) FILTER (WHERE status = 'ready')::int AS ready, count(*) FILTER (WHERE status = 'error')::int AS error
       FROM files WHERE finished_at >= $1 AND status <> 'pending'
      GROUP BY 1 ORDER BY 1`,
    [since, slotMs],
  );
  return rows;
}
