/**
 * OAuth's rows (migration 016): clients (global), and per account the grants a person approved,
 * their one-use authorization codes, rotating refresh tokens and access tokens (rows of `tokens`
 * carrying the grant's id). Only hashes of codes and tokens are stored. A code or refresh token
 * is taken before its account is known, through SECURITY DEFINER functions that return only the
 * row whose hash the caller holds and mark it used in the same statement.
 */
import { randomBytes } from 'node:crypto';
import { credentialHash, newCredential, newRefreshToken, sameHash } from '../core/credentials.js';
import { INVALIDATE_CHANNEL } from './accounts.js';
import type { Database, Tx } from './database.js';
import { iso } from './rows.js';

/** A registered client (RFC 7591): public, so nothing secret. */
export interface OAuthClient {
  id: string;
  name: string | null;
  redirectUris: string[];
  createdAt: Date;
}

/** Who approved a grant. */
export interface Approver {
  kind: 'management_key' | 'token';
  id: string;
}

/** A grant that is neither revoked nor expired. */
export interface LiveGrant {
  id: string;
  workspaceId: string;
  clientId: string;
  claims: string[];
  scope: string;
  resource: string;
}

/** What the token endpoint answers (RFC 6749 5.1), secrets in plain text: the only time they exist outside the client. */
export interface IssuedTokens {
  accessToken: string;
  refreshToken: string;
  expiresIn: number;
  scope: string;
}

/** A code or refresh token as its taking found it. */
export interface Taken {
  accountId: string;
  grantId: string;
  expired: boolean;
  /** It had been used before: a replay (RFC 9700 4.2.4, 4.14.2). */
  reused: boolean;
}

/** A taken authorization code, with what it was bound to. */
export interface TakenCode extends Taken {
  clientId: string;
  redirectUri: string;
  codeChallenge: string;
  resource: string;
}

/** Registers a public client; its id is random and says nothing. */
export async function registerClient(db: Database, name: string | null, redirectUris: string[]): Promise<OAuthClient> {
  const id = `vfs_client_${randomBytes(16).toString('base64url')}`;
  const { rows } = await db.appStatement<{ created_at: Date }>('INSERT INTO oauth_clients (id, name, redirect_uris) VALUES ($1, $2, $3) RETURNING created_at', [
    id,
    name,
    redirectUris,
  ]);
  return { id, name, redirectUris, createdAt: rows[0].created_at };
}

/** The client with this id, or null. */
export async function findClient(db: Database, id: string): Promise<OAuthClient | null> {
  const { rows } = await db.appStatement<{ id: string; name: string | null; redirect_uris: string[]; created_at: Date }>(
    'SELECT id, name, redirect_uris, created_at FROM oauth_clients WHERE id = $1',
    [id],
  );
  const row = rows[0];
  return row === undefined ? null : { id: row.id, name: row.name, redirectUris: row.redirect_uris, createdAt: row.created_at };
}

/**
 * Keeps the row of a client known by its metadata document (its id is the document's URL), with
 * the name and redirect URIs it has now: grants name their client by a row. Updated at each grant.
 */
export async function saveDocumentClient(tx: Tx, client: OAuthClient): Promise<void> {
  await tx.query(
    `INSERT INTO oauth_clients (id, name, redirect_uris) VALUES ($1, $2, $3)
     ON CONFLICT (id) DO UPDATE SET name = excluded.name, redirect_uris = excluded.redirect_uris`,
    [client.id, client.name, client.redirectUris],
  );
}

/** Rows one statement of the sweep deletes at most per table. */
export const SWEEP_BATCH = 1000;

/**
 * Deletes, in batches of SWEEP_BATCH a table, what OAuth no longer needs once `keepSeconds` have
 * passed (oauth_sweep in migration 017): registered clients that never got a grant, codes past
 * their expiry or use, and refresh tokens past their expiry or use or whose grant was revoked.
 * Stops after `maxBatches` rounds (the next sweep goes on); answers the rows deleted.
 */
export async function sweepOAuth(db: Database, keepSeconds: number, maxBatches = 100): Promise<number> {
  let total = 0;
  for (let round = 0; round < maxBatches; round++) {
    const { rows } = await db.appStatement<{ deleted: number }>('SELECT oauth_sweep($1, $2) AS deleted', [keepSeconds, SWEEP_BATCH]);
    total += rows[0].deleted;
    if (rows[0].deleted === 0) break;
  }
  return total;
}

/** What a grant is made of. */
export interface NewGrant {
  accountId: string;
  workspaceId: string;
  clientId: string;
  claims: string[];
  approvedBy: Approver;
  redirectUri: string;
  scope: string;
  resource: string;
  /** When the approving token expires (the grant ends with it); null for a management key. */
  expiresAt: Date | null;
}

/**
 * Makes a grant and its authorization code, valid `codeSeconds`; returns the code in plain text,
 * or null when the approver was revoked or expired meanwhile (checked in this transaction, its row
 * locked until the commit: a revocation racing with this one sees the grant and revokes it).
 */
export async function createGrant(tx: Tx, grant: NewGrant, codeChallenge: string, codeSeconds: number): Promise<{ grantId: string; code: string } | null> {
  const key = grant.approvedBy.kind === 'management_key' ? grant.approvedBy.id : null;
  const token = grant.approvedBy.kind === 'token' ? grant.approvedBy.id : null;
  if (!(await approverLive(tx, key, token))) return null;
  const { rows } = await tx.query<{ id: string }>(
    `INSERT INTO oauth_grants (account_id, workspace_id, client_id, claims, approved_by_key, approved_by_token, redirect_uri, scope, resource, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
    [grant.accountId, grant.workspaceId, grant.clientId, grant.claims, key, token, grant.redirectUri, grant.scope, grant.resource, grant.expiresAt],
  );
  const grantId = rows[0].id;
  const code = randomBytes(32).toString('base64url');
  await tx.query(
    `INSERT INTO oauth_codes (code_hash, account_id, grant_id, client_id, redirect_uri, code_challenge, resource, expires_at)
     VALUES ($1, $2, $3, $4, $5, $6, $7, now() + make_interval(secs => $8))`,
    [credentialHash(code), grant.accountId, grantId, grant.clientId, grant.redirectUri, codeChallenge, grant.resource, codeSeconds],
  );
  return { grantId, code };
}

/** Takes the authorization code with this hash issued to `clientId` (marking it used), or null for an unknown one or another client's (left unused). */
export async function takeCode(db: Database, hash: Buffer, clientId: string): Promise<TakenCode | null> {
  const { rows } = await db.appStatement<{
    account_id: string;
    grant_id: string;
    client_id: string;
    redirect_uri: string;
    code_challenge: string;
    resource: string;
    expired: boolean;
    reused: boolean;
  }>('SELECT * FROM oauth_take_code($1, $2)', [hash, clientId]);
  const row = rows[0];
  if (row === undefined) return null;
  return {
    accountId: row.account_id,
    grantId: row.grant_id,
    clientId: row.client_id,
    redirectUri: row.redirect_uri,
    codeChallenge: row.code_challenge,
    resource: row.resource,
    expired: row.expired,
    reused: row.reused,
  };
}

/** Takes the refresh token with this hash of a grant of `clientId` (marking it used), or null for an unknown one or another client's (left unused). */
export async function takeRefreshToken(db: Database, hash: Buffer, clientId: string): Promise<Taken | null> {
  const { rows } = await db.appStatement<{ account_id: string; grant_id: string; secret_hash: Buffer; expired: boolean; reused: boolean }>(
    'SELECT * FROM oauth_take_refresh_token($1, $2)',
    [hash, clientId],
  );
  const row = rows[0];
  if (row === undefined || !sameHash(row.secret_hash, hash)) return null;
  return { accountId: row.account_id, grantId: row.grant_id, expired: row.expired, reused: row.reused };
}

/** The account and grant of the OAuth access token with this hash, or null (unknown, or minted by a management key). */
export async function findAccessToken(db: Database, hash: Buffer): Promise<{ tokenId: string; accountId: string; grantId: string } | null> {
  const { rows } = await db.appStatement<{ token_id: string; account_id: string; grant_id: string; secret_hash: Buffer }>(
    'SELECT * FROM oauth_access_token($1)',
    [hash],
  );
  const row = rows[0];
  return row === undefined || !sameHash(row.secret_hash, hash) ? null : { tokenId: row.token_id, accountId: row.account_id, grantId: row.grant_id };
}

/**
 * The account's grant `id` if it is neither revoked nor expired and the credential that approved
 * it still lives; null otherwise. SECURITY: a grant never outlives its approver, whatever a
 * revocation missed (one racing with the grant's making): a grant whose approver is gone is
 * revoked here, with its access tokens, and 'revoked' is answered (the caller commits and clears
 * its credential cache). The approver's row and then the grant's stay locked (FOR SHARE) until
 * the caller's commit: a revocation of the grant waits, and then revokes the tokens issued here.
 */
export async function liveGrant(tx: Tx, id: string): Promise<LiveGrant | 'revoked' | null> {
  const approver = await tx.query<{ approved_by_key: string | null; approved_by_token: string | null }>(
    'SELECT approved_by_key, approved_by_token FROM oauth_grants WHERE id = $1 AND revoked_at IS NULL',
    [id],
  );
  const by = approver.rows[0];
  if (by === undefined) return null;
  if (!(await approverLive(tx, by.approved_by_key, by.approved_by_token))) {
    await revokeGrant(tx, id);
    return 'revoked';
  }
  const { rows } = await tx.query<{ id: string; workspace_id: string; client_id: string; claims: string[]; scope: string; resource: string }>(
    `SELECT id, workspace_id, client_id, claims, scope, resource FROM oauth_grants
      WHERE id = $1 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now()) FOR SHARE`,
    [id],
  );
  const row = rows[0];
  return row === undefined
    ? null
    : { id: row.id, workspaceId: row.workspace_id, clientId: row.client_id, claims: row.claims, scope: row.scope, resource: row.resource };
}

/** Whether the management key or scoped token that approved a grant is unrevoked and unexpired; locks its row FOR SHARE. */
async function approverLive(tx: Tx, keyId: string | null, tokenId: string | null): Promise<boolean> {
  const { rows } = await tx.query<{ live: boolean }>('SELECT oauth_approver_live($1, $2) AS live', [keyId, tokenId]);
  return rows[0].live;
}

/** The client of the account's grant `id` (revoked or not), or null. */
export async function grantClient(tx: Tx, id: string): Promise<string | null> {
  const { rows } = await tx.query<{ client_id: string }>('SELECT client_id FROM oauth_grants WHERE id = $1', [id]);
  return rows[0]?.client_id ?? null;
}

/**
 * Issues an access token (a scoped token of the grant's workspace with its claims, carrying the
 * grant's id) and a refresh token for a live grant; neither outlives the grant's approver.
 */
export async function issueTokens(tx: Tx, accountId: string, grant: LiveGrant, accessSeconds: number, refreshSeconds: number): Promise<IssuedTokens> {
  const accessToken = newCredential('token');
  const refreshToken = newRefreshToken();
  const { rows } = await tx.query<{ expires_in: number }>(
    `INSERT INTO tokens (account_id, workspace_id, secret_hash, claims, expires_at, grant_id)
     SELECT $1, $2, $3, $4, least(now() + make_interval(secs => $5), g.expires_at), g.id FROM oauth_grants g WHERE g.id = $6
     RETURNING floor(extract(epoch FROM expires_at - now()))::int AS expires_in`,
    [accountId, grant.workspaceId, credentialHash(accessToken), grant.claims, accessSeconds, grant.id],
  );
  await tx.query(
    `INSERT INTO oauth_refresh_tokens (account_id, grant_id, secret_hash, expires_at)
     SELECT $1, g.id, $2, least(now() + make_interval(secs => $3), g.expires_at) FROM oauth_grants g WHERE g.id = $4`,
    [accountId, credentialHash(refreshToken), refreshSeconds, grant.id],
  );
  return { accessToken, refreshToken, expiresIn: Math.max(0, rows[0].expires_in), scope: grant.scope };
}

/**
 * Revokes a grant of the account and every access token issued from it (idempotent): 'revoked'
 * when it was live, 'already' when it had been revoked, null when the account has no such grant.
 * Its refresh tokens die with it (a refresh needs a live grant). When something was revoked, the
 * other service processes drop their cached credentials at the commit (NOTIFY); the caller clears
 * this one's.
 */
export async function revokeGrant(tx: Tx, id: string): Promise<'revoked' | 'already' | null> {
  const { rowCount } = await tx.query('UPDATE oauth_grants SET revoked_at = now() WHERE id = $1 AND revoked_at IS NULL', [id]);
  if (rowCount !== 1) return (await grantClient(tx, id)) === null ? null : 'already';
  await tx.query('UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE grant_id = $1', [id]);
  await tx.query(`SELECT pg_notify('${INVALIDATE_CHANNEL}', 'credentials')`);
  return 'revoked';
}

/** Revokes an access token of the account issued through OAuth (RFC 7009 for an access token): that token only. True when it was live. */
export async function revokeAccessToken(tx: Tx, tokenId: string): Promise<boolean> {
  const { rowCount } = await tx.query('UPDATE tokens SET revoked_at = now() WHERE id = $1 AND grant_id IS NOT NULL AND revoked_at IS NULL', [tokenId]);
  if (rowCount !== 1) return false;
  await tx.query(`SELECT pg_notify('${INVALIDATE_CHANNEL}', 'credentials')`);
  return true;
}

/**
 * Revokes the grants a credential approved, and their access tokens: `column` names the kind.
 * Runs in the caller's transaction, where the credential itself is revoked.
 */
export async function revokeGrantsApprovedBy(tx: Tx, column: 'approved_by_key' | 'approved_by_token', id: string): Promise<void> {
  await tx.query(
    `WITH g AS (UPDATE oauth_grants SET revoked_at = now() WHERE ${column} = $1 AND revoked_at IS NULL RETURNING id)
     UPDATE tokens SET revoked_at = coalesce(revoked_at, now()) WHERE grant_id IN (SELECT id FROM g)`,
    [id],
  );
}

/** A grant as GET /v1/workspaces/{ws}/grants lists it. */
export interface ListedGrant {
  id: string;
  clientId: string;
  clientName: string | null;
  /** Where the client is sent back to with its code. */
  redirectUri: string;
  claims: string[];
  approvedBy: Approver;
  createdAt: string;
  /** When the grant ends with the token that approved it; null for a management key's. */
  expiresAt: string | null;
  /** When the client last got an access token (its code redeemed, or a refresh); null before that. */
  lastIssuedAt: string | null;
}

/** Where a page of grants starts: after the grant made at `createdAt` with this `id` (the listing's order). */
export interface GrantPosition {
  createdAt: Date;
  id: string;
}

/** A page of grants, oldest first, and the position of its last one when more follow. */
export interface GrantPage {
  grants: ListedGrant[];
  last: GrantPosition | null;
}

/** The live grants of a workspace of the account, oldest first: at most `limit` after `after`. */
export async function listGrants(tx: Tx, workspaceId: string, q: { after?: GrantPosition; limit: number }): Promise<GrantPage> {
  const { rows } = await tx.query<{
    id: string;
    client_id: string;
    name: string | null;
    redirect_uri: string;
    claims: string[];
    approved_by_key: string | null;
    approved_by_token: string | null;
    created_at: Date;
    expires_at: Date | null;
    last_issued_at: Date | null;
  }>(
    `SELECT g.id, g.client_id, c.name, g.redirect_uri, g.claims, g.approved_by_key, g.approved_by_token, g.created_at, g.expires_at,
            (SELECT max(t.created_at) FROM tokens t WHERE t.grant_id = g.id) AS last_issued_at
       FROM oauth_grants g JOIN oauth_clients c ON c.id = g.client_id
      WHERE g.workspace_id = $1 AND g.revoked_at IS NULL AND (g.expires_at IS NULL OR g.expires_at > now())
        AND ($2::timestamptz IS NULL OR (g.created_at, g.id) > ($2::timestamptz, $3::uuid))
      ORDER BY g.created_at, g.id LIMIT $4`,
    [workspaceId, q.after?.createdAt ?? null, q.after?.id ?? null, q.limit + 1],
  );
  const more = rows.length > q.limit;
  const page = more ? rows.slice(0, q.limit) : rows;
  const grants = page.map(
    (r): ListedGrant => ({
      id: r.id,
      clientId: r.client_id,
      clientName: r.name,
      redirectUri: r.redirect_uri,
      claims: r.claims,
      approvedBy: r.approved_by_key !== null ? { kind: 'management_key', id: r.approved_by_key } : { kind: 'token', id: r.approved_by_token! },
      createdAt: iso(r.created_at),
      expiresAt: r.expires_at === null ? null : iso(r.expires_at),
      lastIssuedAt: r.last_issued_at === null ? null : iso(r.last_issued_at),
    }),
  );
  const tail = page[page.length - 1];
  return { grants, last: more ? { createdAt: tail.created_at, id: tail.id } : null };
}

/** The secret named `name`, the same on every node: `candidate` if none was kept before. */
export async function sharedSecret(db: Database, name: string, candidate: Buffer): Promise<Buffer> {
  const { rows } = await db.appStatement<{ secret: Buffer }>('SELECT oauth_secret($1, $2) AS secret', [name, candidate]);
  return rows[0].secret;
}
