/**
 * Short-lived caches of what nearly every request looks up: a workspace's id
 * by account and name, and an account's limits. Entries live a few seconds;
 * deleting a workspace clears the workspace cache at once, so within this
 * process a deleted workspace is never served from it.
 */
import type { Database } from '../db/database.js';
import { accountLimits, type Limits } from '../db/limits.js';
import { requireWorkspace } from '../db/workspaces.js';

/** A bounded map whose entries expire. */
class TtlCache<V> {
  private readonly entries = new Map<string, { value: V; until: number }>();

  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries = 10_000,
  ) {}

  async get(key: string, load: () => Promise<V>): Promise<V> {
    const hit = this.entries.get(key);
    if (hit !== undefined && hit.until > Date.now()) return hit.value;
    const value = await load();
    if (this.entries.size >= this.maxEntries) this.entries.delete(this.entries.keys().next().value!);
    this.entries.set(key, { value, until: Date.now() + this.ttlMs });
    return value;
  }

  clear(): void {
    this.entries.clear();
  }
}

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
