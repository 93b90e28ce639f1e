/** The append-only audit log: export pages, and batched appends. */
import type { Database, Tx } from './database.js';
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

/** One read-tool call to record. */
export interface AuditRecord {
  accountId: string;
  workspaceId: string;
  actorType: 'management_key' | 'token' | 'oauth_grant' | 'oidc_subject';
  actorId: string;
  tool: string;
  params: Record<string, string>;
  resultCount: number | null;
  latencyMs: number | null;
}

interface Pending {
  record: AuditRecord;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/**
 * Group commit for audit events: `append` resolves once the event is
 * committed. Events that arrive while batches are being written go into the
 * next batch, so under load one transaction carries many events, and when idle
 * an event waits for no timer. By default one batch commits at a time: each
 * batch costs the HTTP thread a socket write and a reply to parse, so fewer,
 * larger batches serve more reads. Measure with bench/read-http.ts
 * (docs/benchmarks.md, "Where a `cat` waits").
 */
export class AuditLog {
  private queue: Pending[] = [];
  private inFlight = 0;

  constructor(
    private readonly db: Database,
    /** Largest batch in one transaction. */
    private readonly maxBatch = 1000,
    /** Batches committing at once. */
    private readonly maxInFlight = 1,
    /** Told of each batch committed: its events and the seconds it took (metrics). */
    private readonly onCommit: ((events: number, seconds: number) => void) | null = null,
  ) {}

  /** Records an event; resolves when it is committed. */
  append(record: AuditRecord): Promise<void> {
    return new Promise((resolve, reject) => {
      this.queue.push({ record, resolve, reject });
      if (this.inFlight < this.maxInFlight) void this.flush();
    });
  }

  /** Resolves when every event appended so far is committed (or failed). */
  async drain(): Promise<void> {
    while (this.inFlight > 0 || this.queue.length > 0) {
      if (this.inFlight === 0) void this.flush();
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  private async flush(): Promise<void> {
    this.inFlight++;
    try {
      while (this.queue.length > 0) {
        const batch = this.queue.splice(0, this.maxBatch);
        try {
          const started = performance.now();
          await this.write(batch.map((p) => p.record));
          this.onCommit?.(batch.length, (performance.now() - started) / 1000);
          for (const p of batch) p.resolve();
        } catch (error) {
          if (batch.length > 1 && refusedForItsData(error)) {
            // One event PostgreSQL refuses must not fail the others' requests, of any tenant:
            // each is tried on its own (when the database itself fails, none is).
            for (const p of batch) await this.write([p.record]).then(p.resolve, p.reject);
          } else {
            for (const p of batch) p.reject(error);
          }
        }
      }
    } finally {
      this.inFlight--;
    }
  }

  /**
   * Commits a batch in one round trip (migration 007: append_audit_batch checks each caller's
   * workspace against its account). Each distinct caller is sent once.
   */
  private async write(records: AuditRecord[]): Promise<void> {
    const callerIndex = new Map<string, number>();
    const accountIds: string[] = [];
    const workspaceIds: string[] = [];
    const actorTypes: string[] = [];
    const actorIds: string[] = [];
    const tools: string[] = [];
    const callers: number[] = [];
    const params: string[] = [];
    const resultCounts: (number | null)[] = [];
    const latencies: (number | null)[] = [];
    for (const r of records) {
      const key = `${r.accountId} ${r.workspaceId} ${r.actorType} ${r.tool} ${r.actorId}`;
      let caller = callerIndex.get(key);
      if (caller === undefined) {
        caller = accountIds.push(r.accountId); // 1-based, as SQL arrays
        workspaceIds.push(r.workspaceId);
        actorTypes.push(r.actorType);
        actorIds.push(r.actorId);
        tools.push(r.tool);
        callerIndex.set(key, caller);
      }
      callers.push(caller);
      params.push(JSON.stringify(r.params));
      resultCounts.push(r.resultCount);
      latencies.push(r.latencyMs);
    }
    await this.db.appStatement('SELECT append_audit_batch($1, $2, $3, $4, $5, $6, $7, $8, $9)', [
      accountIds,
      workspaceIds,
      actorTypes,
      actorIds,
      tools,
      callers,
      `[${params.join(',')}]`,
      resultCounts,
      latencies,
    ]);
  }
}

/**
 * Whether PostgreSQL refused a batch for what it holds (a data exception, a constraint, the
 * function's own account check), not because the database or the connection failed.
 */
function refusedForItsData(error: unknown): boolean {
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && (code.startsWith('22') || code.startsWith('23') || code === 'P0001');
}
