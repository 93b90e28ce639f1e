/**
 * The two routes the operator console needs beyond the public API: GET /v1/whoami (any
 * credential: which kind it is and, for a token, what it may read) and GET /v1/status (management
 * key only: the account at a glance). Both pass the gate as every other route does (the
 * failed-authentication lock, the per-credential rate of the management routes); neither is a
 * read tool, so neither is audited nor counted against the read rates.
 */
import type { TemplatedApp } from 'uWebSockets.js';
import { VfsError } from '../core/errors.js';
import { finishedSince, oldestJobSeconds, workspaceStatus } from '../db/account-status.js';
import type { Database } from '../db/database.js';
import { accountNodes } from '../db/nodes.js';
import { iso } from '../db/rows.js';
import { workspaceName } from '../db/workspaces.js';
import { noQuery } from './contract/query.js';
import { type Principal, requireManagementKey } from './gate/auth.js';
import type { Guard } from './gate/guard.js';
import { sendJson, snapshot } from './http/context.js';
import { type ErrorLog, sendJsonError } from './http/respond.js';
import { type RecentReads, SLOT_MS, SLOTS } from './recent-reads.js';

/** What the console's API routes need. */
export interface ConsoleApiDeps {
  db: Database;
  guard: Guard;
  log: ErrorLog;
  /** The read-tool calls of the last five minutes, per account. */
  recentReads: RecentReads;
  /** On a node of a cluster, how long a node may go unseen before it counts as dead; else null (no nodes to list). */
  nodeDeadMs: number | null;
}

/** Registers GET /v1/whoami and GET /v1/status. */
export function registerConsoleApiRoutes(app: TemplatedApp, deps: ConsoleApiDeps): void {
  const route = (pattern: string, handler: (principal: Principal) => Promise<unknown>): void => {
    app.get(pattern, (res, req) => {
      const ctx = snapshot(res, req, 0);
      void (async () => {
        try {
          const principal = await deps.guard.principal(ctx);
          await deps.guard.admitManagement(principal);
          noQuery.read(ctx.query);
          sendJson(ctx, 200, await handler(principal));
        } catch (error) {
          sendJsonError(ctx, error, deps.log);
        }
      })();
    });
  };
  route('/v1/whoami', (principal) => whoami(deps.db, principal));
  route('/v1/status', (principal) => status(deps, requireManagementKey(principal)));
}

async function whoami(db: Database, principal: Principal): Promise<unknown> {
  if (principal.kind === 'management_key') return { kind: 'management_key' };
  const workspace = await db.inAccount(principal.accountId, (tx) => workspaceName(tx, principal.workspaceId));
  // Its workspace was deleted after the credential was cached: the token went with it.
  if (workspace === null) throw new VfsError('UNAUTHENTICATED', { reason: 'unknown or revoked credential' }, { 'www-authenticate': 'Bearer' });
  return { kind: 'token', id: principal.actorId, workspace, claims: principal.claims, expiresAt: iso(new Date(principal.expiresAt)) };
}

async function status(deps: ConsoleApiDeps, accountId: string): Promise<unknown> {
  // The slots end with the current one; the database's files are counted into the same slots.
  const current = Math.floor(Date.now() / SLOT_MS);
  const first = current - SLOTS + 1;
  const read = await deps.db.inAccount(accountId, async (tx) => ({
    workspaces: await workspaceStatus(tx),
    oldest: await oldestJobSeconds(tx),
    finished: await finishedSince(tx, new Date(first * SLOT_MS), SLOT_MS),
    nodes: deps.nodeDeadMs === null ? [] : await accountNodes(tx, deps.nodeDeadMs / 1000),
  }));
  const finished = new Map(read.finished.map((f) => [f.slot, f]));
  return {
    workspaces: read.workspaces.map(({ id: _, ...workspace }) => workspace),
    ingest: {
      pending: read.workspaces.reduce((sum, w) => sum + w.pending, 0),
      oldestPendingSeconds: Math.round(read.oldest * 1000) / 1000,
      finished: Array.from({ length: SLOTS }, (_, i) => {
        const slot = finished.get(first + i);
        return { at: new Date((first + i) * SLOT_MS).toISOString(), ready: slot?.ready ?? 0, error: slot?.error ?? 0 };
      }),
    },
    reads: { slotSeconds: SLOT_MS / 1000, slots: deps.recentReads.slots(accountId) },
    nodes: read.nodes.map((n) => ({
      id: n.id,
      state: n.state,
      alive: n.alive,
      seenAt: iso(n.seenAt),
      copies: n.copies,
      versionsBehind: n.versionsBehind,
    })),
  };
}
