/**
 * Membership of a cluster (migration 010): one row per service node with its
 * heartbeat, its state, the bytes of its shard copies and the version of each
 * copy it holds. No tenant data lives here: the application role reads and
 * writes it, and the operator command lists it.
 */
import { setTimeout as sleep } from 'node:timers/promises';
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

/** The number of the last drop of cached credentials asked for (0 before the first). */
const LAST_DROP = `(SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM credential_drops)`;

/** The payload of the notification asking every node to drop its cached credentials, numbered `n`. */
const DROP_PAYLOAD = /^credentials ([0-9]{1,19})$/;

/**
 * Writes the node's row (creating it at the first beat); a new start resets its start time and,
 * as a process starts with no cached credential, counts every drop asked so far as done.
 */
export async function heartbeat(db: Database, beat: NodeBeat, starting = false): Promise<void> {
  await db.appStatement(
    `INSERT INTO nodes (id, url, state, cache_bytes, applied, credentials_dropped) VALUES ($1, $2, $3, $4, $5, ${LAST_DROP})
     ON CONFLICT (id) DO UPDATE SET url = $2, state = $3, cache_bytes = $4, applied = $5, seen_at = now(),
       started_at = CASE WHEN $6 THEN now() ELSE nodes.started_at END,
       credentials_dropped = CASE WHEN $6 THEN ${LAST_DROP} ELSE nodes.credentials_dropped END`,
    [beat.id, beat.url, beat.state, beat.cacheBytes, JSON.stringify(beat.applied), starting],
  );
}

/**
 * Asks every process listening on `channel` to drop its cached credentials, and returns the
 * request's number: a node that acknowledges it (acknowledgeDrop) dropped them after every commit
 * made before this call.
 */
async function askCredentialDrop(db: Database, channel: string): Promise<number> {
  const { rows } = await db.appStatement<{ n: string }>(`SELECT n, pg_notify($1, 'credentials ' || n) FROM (SELECT nextval('credential_drops') AS n) s`, [
    channel,
  ]);
  return Number(rows[0].n);
}

/** The number in a drop request's payload, or null for any other payload. */
export function credentialDropNumber(payload: string): number | null {
  const m = DROP_PAYLOAD.exec(payload);
  return m === null ? null : Number(m[1]);
}

/** The number of the last drop asked for: read before a node drops everything, it is then acknowledged. */
export async function lastCredentialDrop(db: Database): Promise<number> {
  const { rows } = await db.appStatement<{ n: string }>(`SELECT ${LAST_DROP} AS n`, []);
  return Number(rows[0].n);
}

/** Records that node `id` dropped its cached credentials after drop request `n`. */
export async function acknowledgeDrop(db: Database, id: string, n: number): Promise<void> {
  await db.appStatement('UPDATE nodes SET credentials_dropped = greatest(credentials_dropped, $2) WHERE id = $1', [id, n]);
}

/** How long a revocation waits for the nodes to drop their cached credentials. */
export const DROP_WAIT_MS = 2_000;

/**
 * After a commit that revoked credentials: asks every node to drop its cached ones and waits until
 * each live node (seen in the last `deadMs`, not stopped) other than `self` has, polling every
 * 5 ms, or `DROP_WAIT_MS`; returns the nodes that had not by then.
 */
export async function dropCredentialsEverywhere(db: Database, channel: string, self: string, deadMs: number): Promise<string[]> {
  const n = await askCredentialDrop(db, channel);
  const deadline = Date.now() + DROP_WAIT_MS;
  for (;;) {
    const { rows } = await db.appStatement<{ id: string }>(
      `SELECT id FROM nodes WHERE id <> $1 AND state <> 'stopped' AND seen_at > now() - make_interval(secs => $3) AND credentials_dropped < $2`,
      [self, n, deadMs / 1000],
    );
    if (rows.length === 0 || Date.now() >= deadline) return rows.map((r) => r.id);
    await sleep(5);
  }
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
