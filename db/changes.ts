/**
 * The change log of workspaces (migration 010): every change that moves a
 * workspace's readable content is written in the transaction that bumps the
 * workspace's version, and announced on CHANGES_CHANNEL once committed. A node
 * holding a copy of the shard reads, for the versions it has not applied, the
 * changed paths with their rows as they are now (ingest/shards/sync.ts).
 */
import type { Database, Tx } from './database.js';
import { FILE_ROW_COLUMNS, type FileRow, fileRow, type JobFile } from './file-rows.js';

/** The channel on which committed changes are announced: `<workspace id> <version> <account id>`, or `<workspace id> gone`. */
export const CHANGES_CHANNEL = 'vfs_changes';

/**
 * Bumps a workspace's version by `count` and logs `paths` as changed at the new version; returns
 * it. Call with the workspace's row locked (the lock order of lockUsage, files.ts).
 */
export async function recordChanges(tx: Tx, workspaceId: string, count: number, paths: readonly string[]): Promise<number> {
  const { rows } = await tx.query<{ version: string }>(
    `WITH w AS (UPDATE workspaces SET version = version + $2 WHERE id = $1 RETURNING account_id, version),
          logged AS (INSERT INTO workspace_changes (workspace_id, account_id, version, path)
                     SELECT $1, w.account_id, w.version, p FROM w, unnest($3::text[]) AS p)
     SELECT version, pg_notify('${CHANGES_CHANNEL}', $1 || ' ' || version || ' ' || account_id) FROM w`,
    [workspaceId, count, paths],
  );
  return Number(rows[0].version);
}

/** A workspace's changes since a version, read in one snapshot. */
export interface ChangesSince {
  /** The workspace's committed version; null when the workspace is gone. */
  version: number | null;
  /**
   * The changed paths, each with its row now when it is `ready`, else null (deleted, or not
   * readable yet: a copy leaves such a path as it is unless the row is gone); null when the log no
   * longer reaches back to the version asked for.
   */
  paths: Array<{ path: string; file: JobFile | null; exists: boolean }> | null;
}

/** A row of the queries below: a file's columns (null where the path has no row) and its status. */
type Row = FileRow & { status: string | null };

const FILE_COLUMNS = `${FILE_ROW_COLUMNS}, f.status`;

/** The row's file when it is `ready`, else null. */
function readyFile(r: Row): JobFile | null {
  return r.status === 'ready' ? fileRow(r) : null;
}

/** The paths of a workspace changed after version `from`, with their rows now (one statement, one snapshot). */
export async function changesSince(tx: Tx, workspaceId: string, from: number): Promise<ChangesSince> {
  const { rows } = await tx.query<Row & { version: string; changes_from: string; changed: string | null }>(
    `WITH w AS (SELECT version, changes_from FROM workspaces WHERE id = $1),
          p AS (SELECT DISTINCT path FROM workspace_changes WHERE workspace_id = $1 AND version > $2)
     SELECT w.version, w.changes_from, p.path AS changed, ${FILE_COLUMNS}
       FROM w LEFT JOIN (p LEFT JOIN files f ON f.workspace_id = $1 AND f.path = p.path) ON true`,
    [workspaceId, from],
  );
  if (rows.length === 0) return { version: null, paths: null };
  const version = Number(rows[0].version);
  if (Number(rows[0].changes_from) > from) return { version, paths: null };
  const paths = rows.filter((r) => r.changed !== null).map((r) => ({ path: r.changed!, file: readyFile(r), exists: r.status !== null }));
  return { version, paths };
}

/** Every file of a workspace with its row when `ready`, and the version they make (one statement, one snapshot). */
export async function workspaceState(tx: Tx, workspaceId: string): Promise<{ version: number | null; files: Array<{ path: string; file: JobFile | null }> }> {
  const { rows } = await tx.query<Row & { version: string }>(
    `SELECT w.version, ${FILE_COLUMNS}
       FROM workspaces w LEFT JOIN files f ON f.workspace_id = w.id WHERE w.id = $1`,
    [workspaceId],
  );
  if (rows.length === 0) return { version: null, files: [] };
  return {
    version: Number(rows[0].version),
    files: rows.filter((r) => r.path !== null).map((r) => ({ path: r.path, file: readyFile(r) })),
  };
}

/** The committed versions of the workspaces named (across accounts); a workspace gone has none. */
export async function workspaceVersions(db: Database, ids: readonly string[]): Promise<Map<string, number>> {
  // Named, so that each connection parses and plans it once: it runs before every read of a node.
  const { rows } = await db.app.query<{ id: string; version: string }>({
    name: 'vfs-workspace-versions',
    text: 'SELECT id, version FROM workspace_versions($1::uuid[])',
    values: [ids],
  });
  return new Map(rows.map((r) => [r.id, Number(r.version)]));
}

/**
 * Forgets changes older than `maxAgeSeconds`, moving each workspace's `changes_from` past them
 * (runs as the owner, across accounts); returns how many entries went.
 */
export async function trimChanges(db: Database, maxAgeSeconds: number): Promise<number> {
  return db.asOwner(async (tx) => {
    const { rows } = await tx.query<{ n: string }>(
      `WITH gone AS (DELETE FROM workspace_changes WHERE made_at < now() - make_interval(secs => $1) RETURNING workspace_id, version),
            moved AS (UPDATE workspaces w SET changes_from = greatest(w.changes_from, g.top)
                        FROM (SELECT workspace_id, max(version) AS top FROM gone GROUP BY workspace_id) g WHERE w.id = g.workspace_id)
       SELECT count(*) AS n FROM gone`,
      [maxAgeSeconds],
    );
    return Number(rows[0].n);
  });
}
