/**
 * Short-lived caches of what nearly every request looks up: a workspace's id
 * by account and name, and an account's limits. Entries live a few seconds;
 * deleting a workspace clears the workspace cache at once, so within this
 * process a deleted workspace is never served from it (see TtlCache.clear).
 */
import type { Database } from '../../db/database.js';
import { accountLimits, type Limits } from '../../db/limits.js';
import { requireWorkspace } from '../../db/workspaces.js';
import { TtlCache } from '../../core/ttl-cache.js';

/** Cached lookups shared by the routes. */
export class Lookups {
  private readonly workspaces: TtlCache<string>;
  private readonly limits: TtlCache<Limits>;

  constructor(
    private readonly db: Database,
    ttlMs = 5_000,
  ) {
    this.workspaces = new TtlCache(ttlMs);
    this.limits = new TtlCache(ttlMs);
  }

  /** The id of the account's workspace `name`, or 404. */
  workspaceId(accountId: string, name: string): Promise<string> {
    return this.workspaces.get(`${accountId}/${name}`, () => this.db.inAccount(accountId, async (tx) => (await requireWorkspace(tx, name)).id));
  }

  /** The account's effective limits (a change by the operator applies within seconds). */
  accountLimits(accountId: string): Promise<Limits> {
    return this.limits.get(accountId, () => this.db.inAccount(accountId, (tx) => accountLimits(tx, accountId)));
  }

  /** Forgets cached limits (the operator changed a plan or an account). */
  limitsChanged(): void {
    this.limits.clear();
  }

  /** Forgets cached workspaces (one was deleted). */
  workspaceDeleted(): void {
    this.workspaces.clear();
  }
}
