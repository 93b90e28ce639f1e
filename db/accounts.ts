/**
 * Operator operations on accounts, plans and management keys. They cross
 * accounts, so they run as the owner role: the operator command and the
 * service's start-up bootstrap use them, never a request.
 */
import { CREDENTIAL_ID, credentialHash, credentialKind, newCredential } from '../core/credentials.js';
import type { Database, Tx } from './database.js';
import { LIMIT_COLUMNS, type Limits } from './limits.js';
import { iso } from './rows.js';

/** An account as the operator command lists it. */
export interface AccountSummary {
  id: string;
  name: string;
  plan: string;
  limits: Limits;
  activeKeys: number;
  workspaces: number;
  createdAt: string;
}

/** Channel on which running services learn that cached credentials or limits are stale (payload `credentials` or `limits`). */
export const INVALIDATE_CHANNEL = 'vfs_invalidate';

/** Name of the account made on a first start. */
export const DEFAULT_ACCOUNT = 'default';

/** Creates an account on a plan and returns its id. */
export async function createAccount(db: Database, name: string, plan: string): Promise<string> {
  return db.asOwner(async (tx) => {
    await requirePlan(tx, plan);
    const { rows } = await tx.query<{ id: string }>('INSERT INTO accounts (name, plan) VALUES ($1, $2) RETURNING id', [name, plan]);
    return rows[0].id;
  });
}

/** Issues a new management key for the account (by name or id); returns the plaintext key and its id. */
export async function issueManagementKey(db: Database, account: string): Promise<{ id: string; key: string }> {
  const key = newCredential('management_key');
  const id = await db.asOwner(async (tx) => insertKey(tx, await resolveAccount(tx, account), key));
  return { id, key };
}

/**
 * Revokes a management key by id, with the OAuth grants it approved and their access tokens (as
 * db/oauth.ts's revokeGrantsApprovedBy does for a token); false when there is no such key. Other
 * processes learn of it by NOTIFY.
 */
export async function revokeManagementKey(db: Database, keyId: string): Promise<boolean> {
  if (!CREDENTIAL_ID.test(keyId)) return false;
  return db.asOwner(async (tx) => {
    const { rowCount } = await tx.query('UPDATE management_keys SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1', [keyId]);
    if (rowCount !== 1) return false;
    await tx.query(
      `WITH g AS (UPDATE oauth_grants SET revoked_at = now() WHERE approved_by_key = $1 AND revoked_at IS NULL RETURNING id)
       UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE grant_id IN (SELECT id FROM g)`,
      [keyId],
    );
    await tx.query(`SELECT pg_notify('${INVALIDATE_CHANNEL}', 'credentials')`);
    return true;
  });
}

/** The management keys of an account (ids and dates; the secrets are not stored). */
export async function listManagementKeys(db: Database, account: string): Promise<Array<{ id: string; createdAt: string; revokedAt: string | null }>> {
  return db.asOwner(async (tx) => {
    const { rows } = await tx.query<{ id: string; created_at: Date; revoked_at: Date | null }>(
      'SELECT id, created_at, revoked_at FROM management_keys WHERE account_id = $1 ORDER BY created_at',
      [await resolveAccount(tx, account)],
    );
    return rows.map((r) => ({ id: r.id, createdAt: iso(r.created_at), revokedAt: r.revoked_at === null ? null : iso(r.revoked_at) }));
  });
}

/** Every account with its effective limits and counts. */
export async function listAccounts(db: Database): Promise<AccountSummary[]> {
  return db.asOwner(async (tx) => {
    const limits = LIMIT_COLUMNS.map(([key, col]) => `'${key}', coalesce(a.${col}, p.${col})`).join(', ');
    const { rows } = await tx.query<{
      id: string;
      name: string;
      plan: string;
      limits: Limits;
      active_keys: number;
      workspaces: number;
      created_at: Date;
    }>(`SELECT a.id, a.name, a.plan, json_build_object(${limits}) AS limits, a.created_at,
          (SELECT count(*)::int FROM management_keys k WHERE k.account_id = a.id AND k.revoked_at IS NULL) AS active_keys,
          (SELECT count(*)::int FROM workspaces w WHERE w.account_id = a.id) AS workspaces
        FROM accounts a JOIN plans p ON p.name = a.plan ORDER BY a.created_at, a.name`);
    return rows.map((r) => ({
      id: r.id,
      name: r.name,
      plan: r.plan,
      limits: r.limits,
      activeKeys: r.active_keys,
      workspaces: r.workspaces,
      createdAt: iso(r.created_at),
    }));
  });
}

/** Moves an account to another plan and/or overrides some of its limits (null clears an override). */
export async function setAccountLimits(
  db: Database,
  account: string,
  change: { plan?: string; limits?: Partial<Record<keyof Limits, number | null>> },
): Promise<void> {
  await db.asOwner(async (tx) => {
    const id = await resolveAccount(tx, account);
    if (change.plan !== undefined) {
      await requirePlan(tx, change.plan);
      await tx.query('UPDATE accounts SET plan = $2 WHERE id = $1', [id, change.plan]);
    }
    for (const [key, col] of LIMIT_COLUMNS) {
      const value = change.limits?.[key];
      if (value !== undefined) await tx.query(`UPDATE accounts SET ${col} = $2 WHERE id = $1`, [id, value]);
    }
    await tx.query(`SELECT pg_notify('${INVALIDATE_CHANNEL}', 'limits')`);
  });
}

/** Creates or updates a named plan with all of its limits. */
export async function upsertPlan(db: Database, name: string, limits: Limits): Promise<void> {
  const cols = LIMIT_COLUMNS.map(([, col]) => col);
  const values = LIMIT_COLUMNS.map(([key]) => limits[key]);
  await db.asOwner(async (tx) => {
    await tx.query(
      `INSERT INTO plans (name, ${cols.join(', ')}) VALUES ($1, ${cols.map((_, i) => `$${i + 2}`).join(', ')})
       ON CONFLICT (name) DO UPDATE SET ${cols.map((c) => `${c} = excluded.${c}`).join(', ')}`,
      [name, ...values],
    );
    await tx.query(`SELECT pg_notify('${INVALIDATE_CHANNEL}', 'limits')`);
  });
}

/** Every plan with its limits. */
export async function listPlans(db: Database): Promise<Array<{ name: string } & Limits>> {
  const select = LIMIT_COLUMNS.map(([key, col]) => `${col}::float8 AS "${key}"`).join(', ');
  const { rows } = await db.owner.query<{ name: string } & Limits>(`SELECT name, ${select} FROM plans ORDER BY name`);
  return rows;
}

/**
 * Start-up bootstrap. With `bootstrapKey`, makes sure that key is a live key of
 * an account (the default account, created when missing). Without it, creates
 * the default account and a first key when no account exists. Returns the new
 * plaintext key when one was made, so the caller can print it once.
 */
export async function bootstrapAccount(db: Database, bootstrapKey: string | undefined, plan: string): Promise<string | null> {
  return db.asOwner(async (tx) => {
    await tx.query('SELECT pg_advisory_xact_lock(7261002)');
    if (bootstrapKey !== undefined) {
      if (credentialKind(bootstrapKey) !== 'management_key') throw new Error('VFS_BOOTSTRAP_KEY is not a well-formed svc_sk_ key');
      const { rows } = await tx.query<{ revoked_at: Date | null }>('SELECT revoked_at FROM management_keys WHERE secret_hash = $1', [
        credentialHash(bootstrapKey),
      ]);
      if (rows.length > 0) {
        if (rows[0].revoked_at !== null) throw new Error('VFS_BOOTSTRAP_KEY has been revoked; set another key');
        return null;
      }
      await insertKey(tx, await ensureDefaultAccount(tx, plan), bootstrapKey);
      return null;
    }
    const { rows } = await tx.query('SELECT 1 FROM accounts LIMIT 1');
    if (rows.length > 0) return null;
    const key = newCredential('management_key');
    await insertKey(tx, await ensureDefaultAccount(tx, plan), key);
    return key;
  });
}

async function ensureDefaultAccount(tx: Tx, plan: string): Promise<string> {
  await requirePlan(tx, plan);
  const { rows } = await tx.query<{ id: string }>(
    `INSERT INTO accounts (name, plan) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id`,
    [DEFAULT_ACCOUNT, plan],
  );
  return rows[0].id;
}

async function insertKey(tx: Tx, accountId: string, key: string): Promise<string> {
  const { rows } = await tx.query<{ id: string }>('INSERT INTO management_keys (account_id, secret_hash) VALUES ($1, $2) RETURNING id', [
    accountId,
    credentialHash(key),
  ]);
  return rows[0].id;
}

/** The id of the account named `name` (accounts.name is unique), or null when there is none. */
export async function accountIdByName(db: Database, name: string): Promise<string | null> {
  return db.asOwner(async (tx) => {
    const { rows } = await tx.query<{ id: string }>('SELECT id FROM accounts WHERE name = $1', [name]);
    return rows[0]?.id ?? null;
  });
}

async function resolveAccount(tx: Tx, account: string): Promise<string> {
  const { rows } = await tx.query<{ id: string }>('SELECT id FROM accounts WHERE name = $1 OR id::text = $1', [account]);
  if (rows.length === 0) throw new Error(`no such account: ${account}`);
  return rows[0].id;
}

async function requirePlan(tx: Tx, plan: string): Promise<void> {
  const { rows } = await tx.query('SELECT 1 FROM plans WHERE name = $1', [plan]);
  if (rows.length === 0) throw new Error(`no such plan: ${plan}`);
}
