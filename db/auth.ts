/**
 * Credential lookups by hash. They run before the account is known, through
 * SECURITY DEFINER functions that return only the row whose hash the caller
 * holds; the hash comparison is repeated here in constant time.
 */
import { sameHash } from '../core/credentials.js';
import type { Database } from './database.js';

/** A live management key. */
export interface KeyGrant {
  keyId: string;
  accountId: string;
}

/** A live (not revoked) scoped token; expiry is checked by the caller on every use. */
export interface TokenGrant {
  tokenId: string;
  accountId: string;
  workspaceId: string;
  claims: string[];
  expiresAt: number;
  /** The OAuth grant of an access token issued by the token endpoint; null for a minted token. */
  grantId: string | null;
}

/** The unrevoked management key with this hash, or null. */
export async function findManagementKey(db: Database, hash: Buffer): Promise<KeyGrant | null> {
  const { rows } = await db.app.query<{ key_id: string; account_id: string; secret_hash: Buffer }>(
    'SELECT key_id, account_id, secret_hash FROM auth_management_key($1)',
    [hash],
  );
  const row = rows[0];
  return row !== undefined && sameHash(row.secret_hash, hash) ? { keyId: row.key_id, accountId: row.account_id } : null;
}

/** The unrevoked token with this hash, or null. */
export async function findToken(db: Database, hash: Buffer): Promise<TokenGrant | null> {
  const { rows } = await db.app.query<{
    token_id: string;
    account_id: string;
    workspace_id: string;
    secret_hash: Buffer;
    claims: string[];
    expires_at: Date;
    grant_id: string | null;
  }>('SELECT token_id, account_id, workspace_id, secret_hash, claims, expires_at, grant_id FROM auth_token($1)', [hash]);
  const row = rows[0];
  if (row === undefined || !sameHash(row.secret_hash, hash)) return null;
  return {
    tokenId: row.token_id,
    accountId: row.account_id,
    workspaceId: row.workspace_id,
    claims: row.claims,
    expiresAt: row.expires_at.getTime(),
    grantId: row.grant_id,
  };
}
