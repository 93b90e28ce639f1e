/** Which snapshot of a workspace's shard is the latest (ingest/shards/snapshots.ts). */
import type { Tx } from './database.js';

/** The object key of the workspace's latest shard snapshot, or null when it has none (or no such workspace). */
export async function shardSnapshot(tx: Tx, workspaceId: string): Promise<string | null> {
  const { rows } = await tx.query<{ key: string | null }>('SELECT shard_snapshot_key AS key FROM workspaces WHERE id = $1', [workspaceId]);
  return rows[0]?.key ?? null;
}

/**
 * Makes `key` the workspace's latest snapshot; returns the key it replaces (null: none), or
 * undefined when the workspace no longer exists.
 */
export async function setShardSnapshot(tx: Tx, workspaceId: string, key: string): Promise<string | null | undefined> {
  const { rows } = await tx.query<{ previous: string | null }>(
    `UPDATE workspaces w SET shard_snapshot_key = $2, shard_snapshot_at = now()
       FROM (SELECT id, shard_snapshot_key FROM workspaces WHERE id = $1 FOR UPDATE) old
      WHERE w.id = old.id
      RETURNING old.shard_snapshot_key AS previous`,
    [workspaceId, key],
  );
  return rows.length === 0 ? undefined : rows[0].previous;
}

/** The snapshot keys the given workspaces' rows name (ids that are not valid uuids name none). */
export async function namedSnapshots(tx: Tx, workspaceIds: string[]): Promise<Set<string>> {
  const ids = workspaceIds.filter((id) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/.test(id));
  const { rows } = await tx.query<{ key: string }>(
    'SELECT shard_snapshot_key AS key FROM workspaces WHERE id = ANY($1::uuid[]) AND shard_snapshot_key IS NOT NULL',
    [ids],
  );
  return new Set(rows.map((r) => r.key));
}
