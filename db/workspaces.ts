/** Workspaces of the transaction's account (row level security confines every query). */
import { VfsError } from '../core/errors.js';
import { CHANGES_CHANNEL } from './changes.js';
import type { Tx } from './database.js';
import { lockUsage } from './files.js';
import { iso } from './rows.js';

/** A workspace as the service uses it internally. */
export interface WorkspaceRow {
  id: string;
  name: string;
  version: number;
}

/** Creates a workspace, refusing a duplicate name (409) or one past the plan's quota (403). */
export async function createWorkspace(tx: Tx, accountId: string, name: string, maxWorkspaces: number): Promise<WorkspaceRow> {
  // Serializes concurrent creations in one account, so the quota check cannot be raced.
  await tx.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [accountId]);
  const { rows } = await tx.query<{ n: string }>('SELECT count(*) AS n FROM workspaces');
  const existing = await tx.query('SELECT 1 FROM workspaces WHERE name = $1', [name]);
  if (existing.rowCount !== 0) throw new VfsError('WORKSPACE_EXISTS', { name });
  if (Number(rows[0].n) >= maxWorkspaces) throw new VfsError('WORKSPACE_QUOTA', { limit: maxWorkspaces });
  const inserted = await tx.query<WorkspaceRow>('INSERT INTO workspaces (account_id, name) VALUES ($1, $2) RETURNING id, name, version::float8 AS version', [
    accountId,
    name,
  ]);
  return inserted.rows[0];
}

/** Every workspace of the account, by name. */
export async function listWorkspaces(tx: Tx): Promise<Array<{ name: string; version: number; createdAt: string }>> {
  const { rows } = await tx.query<{ name: string; version: number; created_at: Date }>(
    'SELECT name, version::float8 AS version, created_at FROM workspaces ORDER BY name',
  );
  return rows.map((r) => ({ name: r.name, version: r.version, createdAt: iso(r.created_at) }));
}

/** The named workspace of the account, or null. */
export async function findWorkspace(tx: Tx, name: string): Promise<WorkspaceRow | null> {
  const { rows } = await tx.query<WorkspaceRow>('SELECT id, name, version::float8 AS version FROM workspaces WHERE name = $1', [name]);
  return rows[0] ?? null;
}

/** The name of the account's workspace `id`, or null (gone, or another account's). */
export async function workspaceName(tx: Tx, id: string): Promise<string | null> {
  const { rows } = await tx.query<{ name: string }>('SELECT name FROM workspaces WHERE id = $1', [id]);
  return rows[0]?.name ?? null;
}

/** The named workspace, or 404. */
export async function requireWorkspace(tx: Tx, name: string): Promise<WorkspaceRow> {
  const ws = await findWorkspace(tx, name);
  if (ws === null) throw new VfsError('NO_SUCH_WORKSPACE', { name });
  return ws;
}

/**
 * Deletes the workspace with its files, tokens and jobs (by cascade); returns its id and the
 * blobs its files named (for the caller to collect once this commits), or null if absent.
 */
export async function deleteWorkspace(tx: Tx, accountId: string, name: string): Promise<{ id: string; blobs: string[] } | null> {
  await lockUsage(tx, accountId, false); // the lock order of lockUsage: the cascade deletes files, which changes usage
  // Read under the usage lock, which every upload takes first: no file of it comes or goes meanwhile.
  const named = await tx.query<{ blob_sha256: string }>(
    'SELECT DISTINCT f.blob_sha256 FROM files f JOIN workspaces w ON w.id = f.workspace_id WHERE w.name = $1',
    [name],
  );
  const { rows } = await tx.query<{ id: string }>('DELETE FROM workspaces WHERE name = $1 RETURNING id', [name]);
  if (rows.length === 0) return null;
  const id = rows[0].id;
  // Every node holding a copy of its shard drops it (ingest/shards/sync.ts).
  await tx.query(`SELECT pg_notify('${CHANGES_CHANNEL}', $1 || ' gone')`, [id]);
  return { id, blobs: named.rows.map((r) => r.blob_sha256) };
}
