/**
 * Membership of a cluster (migration 010): one row per service node with its
 * heartbeat, its state, the bytes of its shard copies and the version of each
 * copy it holds. No tenant data lives here: the application role reads and
 * writes it, and the operator command lists it.
 */
import type { Database, Tx } from './database.js';

/** A node's state as it reports it; a node not seen for the dead time is `dead` whatever its row says. */
export type NodeState = 'active' | 'draining' | 'stopped';

/** What a node reports at each heartbeat. */
export interface NodeBeat {
  id: string;
  url: string;
  state: NodeState;
  cacheBytes: number;
  /** Workspace id → the version its copy of the shard holds. */
  applied: Record<string, number>;
}

/** Writes the node's row (creating it at the first beat); a new start resets its start time. */
export async function heartbeat(db: Database, beat: NodeBeat, starting = false): Promise<void> {
  await db.appStatement(
    `INSERT INTO nodes (id, url, state, cache_bytes, applied) VALUES ($1, $2, $3, $4, $5)
     ON CONFLICT (id) DO UPDATE SET url = $2, state = $3, cache_bytes = $4, applied = $5, seen_at = now(),
       started_at = CASE WHEN $6 THEN now() ELSE nodes.started_at END`,
    [beat.id, beat.url, beat.state, beat.cacheBytes, JSON.stringify(beat.applied), starting],
  );
}

/** A node as the operator command lists it. */
export interface NodeRow {
  id: string;
  url: string | null;
  state: NodeState | 'dead';
  startedAt: Date;
  seenAt: Date;
  cacheBytes: number;
  /** Workspaces whose copy is behind their committed version, with how many versions. */
  behind: Array<{ workspaceId: string; versions: number }>;
  /** Copies held. */
  copies: number;
}

/** Every node with its state (dead once unseen for `deadSeconds`) and its lag per workspace (owner role). */
export async function listNodes(db: Database, deadSeconds: number): Promise<NodeRow[]> {
  return db.asOwner(async (tx) => {
    const { rows } = await tx.query<{
      id: string;
      url: string | null;
      state: NodeState;
      dead: boolean;
      started_at: Date;
      seen_at: Date;
      cache_bytes: string;
      copies: number;
      behind: Array<{ workspace_id: string; versions: number }> | null;
    }>(
      `SELECT n.id, n.url, n.state, n.seen_at < now() - make_interval(secs => $1) AS dead, n.started_at, n.seen_at, n.cache_bytes,
              (SELECT count(*)::int FROM jsonb_object_keys(n.applied)) AS copies,
              (SELECT jsonb_agg(jsonb_build_object('workspace_id', w.id, 'versions', w.version - a.value::bigint) ORDER BY w.version - a.value::bigint DESC)
                 FROM jsonb_each_text(n.applied) a JOIN workspaces w ON w.id = a.key::uuid
                WHERE w.version > a.value::bigint) AS behind
         FROM nodes n ORDER BY n.id`,
      [deadSeconds],
    );
    return rows.map((r) => ({
      id: r.id,
      url: r.url,
      state: r.dead && r.state !== 'stopped' ? 'dead' : r.state,
      startedAt: r.started_at,
      seenAt: r.seen_at,
      cacheBytes: Number(r.cache_bytes),
      copies: r.copies,
      behind: (r.behind ?? []).map((b) => ({ workspaceId: b.workspace_id, versions: Number(b.versions) })),
    }));
  });
}

/** A node as one account sees it: no address, and only the copies of its own workspaces. */
export interface AccountNode {
  id: string;
  state: NodeState | 'dead';
  /** Seen within the dead time. */
  alive: boolean;
  seenAt: Date;
  /** Copies of the account's workspaces the node holds. */
  copies: number;
  /** Versions those copies are behind their workspaces', summed. */
  versionsBehind: number;
}

/**
 * Every node (dead once unseen for `deadSeconds`) with the copies it holds of the transaction's
 * account's workspaces and how far behind they are, summed; run inside the account.
 */
export async function accountNodes(tx: Tx, deadSeconds: number): Promise<AccountNode[]> {
  // SECURITY: the join with workspaces runs under row level security, so only the account's own
  // workspaces are counted; a node's address and the copies of other accounts stay out.
  const { rows } = await tx.query<{ id: string; state: NodeState; dead: boolean; seen_at: Date; copies: number; behind: number }>(
    `SELECT n.id, n.state, n.seen_at < now() - make_interval(secs => $1) AS dead, n.seen_at, count(w.id)::int AS copies,
            coalesce(sum(greatest(w.version - a.value::bigint, 0)), 0)::float8 AS behind
       FROM nodes n LEFT JOIN LATERAL jsonb_each_text(n.applied) a ON true LEFT JOIN workspaces w ON w.id = a.key::uuid
      GROUP BY n.id ORDER BY n.id`,
    [deadSeconds],
  );
  return rows.map((r) => ({
    id: r.id,
    state: r.dead && r.state !== 'stopped' ? 'dead' : r.state,
    alive: !r.dead,
    seenAt: r.seen_at,
    copies: r.copies,
    versionsBehind: r.behind,
  }));
}

/** The ids of the active nodes seen within `deadMs`. */
export async function liveNodes(db: Database, deadMs: number): Promise<string[]> {
  const { rows } = await db.appStatement<{ id: string }>(
    "SELECT id FROM nodes WHERE state = 'active' AND seen_at > now() - make_interval(secs => $1) ORDER BY id",
    [deadMs / 1000],
  );
  return rows.map((r) => r.id);
}
