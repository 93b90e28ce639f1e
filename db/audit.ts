/** The append-only audit log: export pages, and batched appends. */
import type { Tx } from './database.js';
import { iso } from './rows.js';

/** An audit event as exported (SPEC.md section 2). */
export interface AuditEvent {
  id: number;
  actorType: string;
  actorId: string;
  tool: string;
  params: unknown;
  resultCount: number | null;
  latencyMs: number | null;
  ts: string;
}

/** One export page request; `cursor` is the last id already seen. */
export interface AuditPageQuery {
  after: Date | undefined;
  cursor: number;
  limit: number;
}

/** A page of a workspace's events in ascending id, and the cursor to the next page (null at the end). */
export async function exportAudit(tx: Tx, workspaceId: string, q: AuditPageQuery): Promise<{ events: AuditEvent[]; nextCursor: string | null }> {
  const { rows } = await tx.query<{
    id: string;
    actor_type: string;
    actor_id: string;
    tool: string;
    params: unknown;
    result_count: number | null;
    latency_ms: number | null;
    ts: Date;
  }>(
    `SELECT id, actor_type, actor_id, tool, params, result_count, latency_ms, ts FROM audit_events
      WHERE workspace_id = $1 AND id > $2 AND ($3::timestamptz IS NULL OR ts > $3)
      ORDER BY id LIMIT $4`,
    [workspaceId, q.cursor, q.after ?? null, q.limit + 1],
  );
  const more = rows.length > q.limit;
  const page = more ? rows.slice(0, q.limit) : rows;
  const events = page.map((r) => ({
    id: Number(r.id),
    actorType: r.actor_type,
    actorId: r.actor_id,
    tool: r.tool,
    params: r.params,
    resultCount: r.result_count,
    latencyMs: r.latency_ms,
    ts: iso(r.ts),
  }));
  return { events, nextCursor: more ? String(events[events.length - 1].id) : null };
}
