/** Scoped read-only tokens of the transaction's account. */
import { credentialHash, newCredential } from '../core/credentials.js';
import { INVALIDATE_CHANNEL } from './accounts.js';
import { revokeGrantsApprovedBy } from './oauth.js';
import type { Tx } from './database.js';
import { iso } from './rows.js';

/** The mint response: the only time the plaintext token exists outside the caller. */
export interface MintedToken {
  id: string;
  token: string;
  claims: string[];
  expiresAt: string;
}

/** Mints a token pinned to one workspace. */
export async function mintToken(tx: Tx, accountId: string, workspaceId: string, claims: string[], ttlSeconds: number): Promise<MintedToken> {
  const token = newCredential('token');
  const { rows } = await tx.query<{ id: string; expires_at: Date }>(
    `INSERT INTO tokens (account_id, workspace_id, secret_hash, claims, expires_at)
     VALUES ($1, $2, $3, $4, now() + make_interval(secs => $5)) RETURNING id, expires_at`,
    [accountId, workspaceId, credentialHash(token), claims, ttlSeconds],
  );
  return { id: rows[0].id, token, claims, expiresAt: iso(rows[0].expires_at) };
}

/**
 * Revokes a token of the account (idempotent), with the OAuth grants it approved and their access
 * tokens; false when the account has no such token. The other service processes on this database
 * drop their cached credentials at the commit (NOTIFY).
 */
export async function revokeToken(tx: Tx, id: string): Promise<boolean> {
  const { rowCount } = await tx.query('UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1', [id]);
  if (rowCount !== 1) return false;
  await revokeGrantsApprovedBy(tx, 'approved_by_token', id);
  await tx.query(`SELECT pg_notify('${INVALIDATE_CHANNEL}', 'credentials')`);
  return true;
}
