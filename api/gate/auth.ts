/**
 * Bearer authentication. A credential is first checked for form (prefix,
 * length, checksum) without touching the database; a well-formed one is looked
 * up by its SHA-256 hash. A JWT (three base64url parts) is an access token of
 * the company's OpenID provider, verified by the `JwtVerifier` the service hands in
 * (`api/oauth/issuer.ts`) on a workspace's MCP endpoint only. Verified credentials are cached briefly; a
 * revocation through this service, or a NOTIFY from another process (the
 * operator command), clears the cache before the next request.
 */
import { credentialHash, credentialKind } from '../../core/credentials.js';
import { VfsError } from '../../core/errors.js';
import { findManagementKey, findToken } from '../../db/auth.js';
import type { Database } from '../../db/database.js';
import { TtlCache } from '../../core/ttl-cache.js';

/** Who is calling. */
export type Principal =
  | { kind: 'management_key'; accountId: string; actorId: string }
  | {
      kind: 'token';
      accountId: string;
      actorId: string;
      workspaceId: string;
      claims: string[];
      expiresAt: number;
      /** The OAuth grant of an access token issued by /oauth/token; null otherwise. */
      grantId: string | null;
      /**
       * SECURITY: an OAuth access token, the built-in server's or the company issuer's: issued for
       * one resource, its workspace's MCP endpoint (RFC 8707), and accepted there only.
       */
      mcpOnly: boolean;
      /** The subject (`sub`) of the company issuer's access token, its audit actor; null otherwise. */
      subject: string | null;
    };

const MAX_CACHED = 10_000;
/** An `Authorization` header carrying a bearer credential. */
const BEARER = /^Bearer +(\S+) *$/i;
/** A JWS in compact form: three base64url parts (the third empty for `alg: none`, refused by the verifier). */
const JWT = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;
/** Longest JWT looked at: far past any access token, short of a costly one. */
const MAX_JWT_CHARS = 16 * 1024;

/** SECURITY: checked on every request, cached or not, by both ways of authenticating. */
function expired(principal: Principal): boolean {
  return principal.kind === 'token' && principal.expiresAt <= Date.now();
}

/** The account of a management key; a scoped token gets 403 on every management route. */
export function requireManagementKey(principal: Principal): string {
  if (principal.kind !== 'management_key') throw new VfsError('SCOPED_TOKEN_FORBIDDEN');
  return principal.accountId;
}

/** Verifies the company issuer's JWT access tokens for one workspace's MCP endpoint (`api/oauth/issuer.ts`). */
export interface JwtVerifier {
  /** The principal of `token` on `workspace`'s MCP endpoint; a 401 saying why it is refused, or a 503. */
  verify(token: string, workspace: string): Promise<Principal>;
}

/** Verifies bearer credentials, with a bounded cache. */
export class Authenticator {
  private readonly cache: TtlCache<Principal>;
  /** What `revoked` waits for besides this process's cache: the other nodes, in cluster mode. */
  othersDrop: (() => Promise<void>) | null = null;

  /** `issuer`: the company's OpenID provider whose JWTs the MCP endpoint takes (VFS_OAUTH_ISSUER); null: none. */
  constructor(
    private readonly db: Database,
    cacheMs: number,
    private readonly issuer: JwtVerifier | null = null,
  ) {
    this.cache = new TtlCache(cacheMs, MAX_CACHED);
  }

  /**
   * The principal behind an `Authorization` header, or a 401 naming what was wrong. `mcpWorkspace`
   * names the workspace when the route is its MCP endpoint, the only one where a JWT is verified.
   */
  async authenticate(header: string | null, mcpWorkspace: string | null = null): Promise<Principal> {
    if (header === null) throw unauthenticated('ambiguous credential: more than one Authorization header');
    if (header === '') throw unauthenticated('missing credential: send "Authorization: Bearer <svc_sk_ key or svc_at_ token>"');
    const match = BEARER.exec(header);
    if (match === null) throw unauthenticated('malformed Authorization header: expected "Bearer <credential>"');
    const credential = match[1];
    // The cache is keyed by the credential itself (it lives only in this process's memory), so
    // a hit costs no checksum and no hashing; a failed lookup is not kept. A JWT's principal
    // depends on the endpoint's audience too, so its key names the workspace.
    const jwt = this.issuer !== null && JWT.test(credential);
    const principal = jwt
      ? await this.cache.get(jwtKey(credential, mcpWorkspace), () => this.verifyJwt(credential, mcpWorkspace))
      : await this.cache.get(credential, () => this.lookup(credential));
    if (expired(principal)) throw unauthenticated('token expired');
    return principal;
  }

  /**
   * The principal of a well-formed credential that the cache holds and that has not expired,
   * without waiting; undefined otherwise (`authenticate` then says why, or looks it up).
   */
  cached(header: string | null, mcpWorkspace: string | null = null): Principal | undefined {
    const match = header === null ? null : BEARER.exec(header);
    if (match === null) return undefined;
    const credential = match[1];
    const jwt = this.issuer !== null && JWT.test(credential);
    const principal = this.cache.peek(jwt ? jwtKey(credential, mcpWorkspace) : credential);
    return principal === undefined || expired(principal) ? undefined : principal;
  }

  /** Forgets every cached credential (a notification from another process, or a lost channel). */
  clear(): void {
    this.cache.clear();
  }

  /**
   * After a commit that revoked credentials: forgets them here, then waits for the other nodes
   * (`othersDrop`, set in cluster mode) to forget theirs, so the revocation holds everywhere
   * from the next request.
   */
  async revoked(): Promise<void> {
    this.clear();
    await this.othersDrop?.();
  }

  /**
   * SECURITY: a JWT is verified only on a workspace's MCP endpoint, against that endpoint's URL as
   * its audience; anywhere else it is no credential, and is never looked at further.
   */
  private async verifyJwt(credential: string, mcpWorkspace: string | null): Promise<Principal> {
    if (mcpWorkspace === null) throw unauthenticated(MCP_ONLY);
    if (credential.length > MAX_JWT_CHARS) throw unauthenticated(`malformed credential: a JWT of more than ${MAX_JWT_CHARS} characters`);
    return this.issuer!.verify(credential, mcpWorkspace);
  }

  private async lookup(credential: string): Promise<Principal> {
    const kind = credentialKind(credential);
    if (kind === null) throw unauthenticated('malformed credential: not a well-formed svc_sk_ key or svc_at_ token');
    const hash = credentialHash(credential);
    if (kind === 'management_key') {
      const key = await findManagementKey(this.db, hash);
      if (key === null) throw unauthenticated('unknown or revoked credential');
      return { kind, accountId: key.accountId, actorId: key.keyId };
    }
    const token = await findToken(this.db, hash);
    if (token === null) throw unauthenticated('unknown or revoked credential');
    return {
      kind,
      accountId: token.accountId,
      actorId: token.tokenId,
      workspaceId: token.workspaceId,
      claims: token.claims,
      expiresAt: token.expiresAt,
      grantId: token.grantId,
      mcpOnly: token.grantId !== null,
      subject: null,
    };
  }
}

/** A 401 with the bare challenge; the MCP endpoint adds its resource metadata (RFC 9728 5.1). */
export function unauthenticated(reason: string): VfsError {
  return new VfsError('UNAUTHENTICATED', { reason }, { 'www-authenticate': 'Bearer' });
}

const MCP_ONLY = "an OAuth access token is accepted only on its workspace's MCP endpoint";

/** The cache key of a JWT presented on `mcpWorkspace`'s endpoint (a credential never holds a space). */
function jwtKey(credential: string, mcpWorkspace: string | null): string {
  return `${mcpWorkspace ?? ''} ${credential}`;
}

/**
 * SECURITY: audience binding. An access token issued through OAuth (by the built-in server or the
 * company's issuer) was issued for one resource, its workspace's MCP endpoint (RFC 8707); anywhere
 * else it is refused as no credential at all.
 */
export function requireAudience(principal: Principal, mcp: boolean): Principal {
  if (principal.kind === 'token' && principal.mcpOnly && !mcp) throw unauthenticated(MCP_ONLY);
  return principal;
}
