/**
 * `audit export WORKSPACE [--after ISO] [--follow]`: the workspace's audit
 * log as JSON Lines, one event per line, oldest first.
 */
import type { ApiClient } from './client.js';
import type { Output } from './output.js';

/** Options of an export. */
export interface AuditExportOptions {
  /** Only events strictly after this ISO 8601 date-time. */
  after?: string;
  /** Keep polling for new events until interrupted. */
  follow: boolean;
  /** Pause between polls once the log is exhausted, when following; undefined means 2000. */
  intervalMs?: number;
}

/** An audit event; its `id` is the cursor of the next page. */
interface AuditEvent {
  id: number;
  [field: string]: unknown;
}

/** Prints every event (and with `follow`, every new one as it comes) as JSON Lines; `--json` changes nothing, the output is JSON already. */
export async function auditExport(client: ApiClient, out: Output, workspace: string, options: AuditExportOptions): Promise<void> {
  // The cursor is the id of the last event printed: following continues from it, so no event
  // is printed twice and none is skipped, even with events arriving between polls.
  let cursor: number | null = null;
  for (;;) {
    const query = new URLSearchParams({ limit: '1000' });
    if (options.after !== undefined) query.set('after', options.after);
    if (cursor !== null) query.set('cursor', String(cursor));
    const page = await client.json<{ events: AuditEvent[]; nextCursor: string | null }>({
      method: 'GET',
      path: `/v1/workspaces/${encodeURIComponent(workspace)}/audit?${query}`,
      what: `export the audit log of ${workspace}`,
    });
    for (const event of page.events) out.line(JSON.stringify(event));
    if (page.events.length > 0) cursor = page.events[page.events.length - 1].id;
    if (page.nextCursor !== null) continue;
    if (!options.follow) return;
    await new Promise((r) => setTimeout(r, options.intervalMs ?? 2000));
  }
}
