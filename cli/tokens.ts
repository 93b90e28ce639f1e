/**
 * `tokens mint|revoke`: scoped read-only tokens. There is no list: the service
 * shows a token's plaintext once, at mint.
 */
import type { ApiClient } from './client.js';
import type { Output } from './output.js';

/** A minted token, as the service returns it. */
export interface MintedToken {
  id: string;
  token: string;
  claims: string[];
  expiresAt: string;
}

/** `tokens mint WORKSPACE [--claims a,b] [--ttl SECONDS]`: prints the token first, alone on its line, so `| head -1` gets it. */
export async function tokensMint(
  client: ApiClient,
  out: Output,
  workspace: string,
  claims: string[] | undefined,
  ttlSeconds: number | undefined,
): Promise<void> {
  const body: { claims?: string[]; ttlSeconds?: number } = {};
  if (claims !== undefined) body.claims = claims;
  if (ttlSeconds !== undefined) body.ttlSeconds = ttlSeconds;
  const minted = await client.postJson<MintedToken>(`/v1/workspaces/${encodeURIComponent(workspace)}/tokens`, `mint a token for ${workspace}`, body);
  if (out.json) out.line(JSON.stringify(minted));
  else out.line(`${minted.token}\nid: ${minted.id}\nclaims: ${minted.claims.join(',')}\nexpires: ${minted.expiresAt}`);
}

/** `tokens revoke ID` (revoking twice succeeds too). */
export async function tokensRevoke(client: ApiClient, out: Output, id: string): Promise<void> {
  await client.json({ method: 'DELETE', path: `/v1/tokens/${encodeURIComponent(id)}`, what: `revoke token ${id}` });
  out.line(out.json ? JSON.stringify({ revoked: id }) : `revoked token ${id}`);
}
