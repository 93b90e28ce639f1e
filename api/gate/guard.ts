/**
 * The gate every /v1 request passes: the client address's failed-
 * authentication lock (429), the credential (401), then the rate limits
 * (429) — read tools per credential and per account, as the plan says; every
 * other /v1 route per credential. Every 429 carries Retry-After in whole
 * seconds. With `shared` set, the limits and the lock hold for all the nodes
 * on that database (shared-limits.ts); this process's own are checked first.
 */
import { VfsError } from '../../core/errors.js';
import type { Database } from '../../db/database.js';
import { type Authenticator, type Principal, requireAudience } from './auth.js';
import { remoteAddress, type RequestContext } from '../http/context.js';
import type { Lookups } from './lookups.js';
import type { Metrics } from '../metrics.js';
import { FailureWindow, type Limit, RateLimiter } from './rate-limit.js';
import { SharedLimits } from './shared-limits.js';

/** Settings of the gate. */
export interface GuardOptions {
  /** Use the right-most X-Forwarded-For address as the client's (only behind a proxy that sets it). */
  trustProxy: boolean;
  /** Failed authentications from one address that lock it. */
  authFailures: number;
  /** Window in which they are counted, and how long the lock lasts. */
  authFailureWindowMs: number;
  /** Requests per second per credential on the management routes (burst: one second's worth). */
  managementRate: number;
  /** The database whose shared state holds the limits for every node on it (VFS_CLUSTER_LIMITS=on); null: this process's own only. */
  shared: Database | null;
}

/** Authentication and rate limits for the routes. */
export class Guard {
  private readonly failures: FailureWindow;
  private readonly limiter = new RateLimiter();
  private readonly shared: SharedLimits | null;

  constructor(
    private readonly auth: Authenticator,
    private readonly lookups: Lookups,
    private readonly options: GuardOptions,
    private readonly metrics: Metrics | null = null,
    log: (message: string, error: unknown) => void = () => {},
  ) {
    this.failures = new FailureWindow(options.authFailures, options.authFailureWindowMs);
    this.shared = options.shared === null ? null : new SharedLimits(options.shared, this.limiter, this.failures, options, metrics, log);
  }

  /** The client's address, for the failed-authentication lock; read before the request's first await. */
  address(ctx: RequestContext): string {
    // SECURITY: X-Forwarded-For is set by whoever sends the request; it is believed only when an
    // operator says a proxy in front of us sets it (its last entry is the one that proxy saw).
    if (this.options.trustProxy && ctx.forwardedFor !== '') {
      const last = ctx.forwardedFor.split(',').at(-1)!.trim();
      if (last !== '') return last;
    }
    return remoteAddress(ctx);
  }

  /**
   * Authenticates the request, counting failures per address. An access token issued through
   * OAuth passes only where `mcpWorkspace` says the route is that workspace's MCP endpoint
   * (requireAudience).
   */
  async principal(ctx: RequestContext, mcpWorkspace: string | null = null): Promise<Principal> {
    // Two Content-Length headers can mean two different bodies to two parsers: act on neither.
    if (ctx.ambiguousLength) throw new VfsError('INVALID_BODY', { reason: 'Content-Length given more than once' });
    const mcp = mcpWorkspace !== null;
    // With no failure within the window no address is locked, and a credential the cache holds
    // cannot fail: the address (a call into uWS that allocates, about 1 µs) is not needed.
    if (this.failures.quiet()) {
      const known = this.auth.cached(ctx.authorization, mcpWorkspace);
      if (known !== undefined) return requireAudience(known, mcp);
    }
    return requireAudience(await this.authenticateAt(this.address(ctx), ctx.authorization, mcpWorkspace), mcp);
  }

  /**
   * Authenticates an `Authorization` header value sent from `address` (read from the request
   * before its first await), under that address's failed-authentication lock, counting a failure.
   * The authorization page checks the key a person pasted here. `mcpWorkspace`: as for `principal`.
   */
  async authenticateAt(address: string, header: string | null, mcpWorkspace: string | null = null): Promise<Principal> {
    const locked = this.failures.check(address);
    if (!locked.ok) {
      this.metrics?.rateLimited.inc({ scope: 'auth_lock' });
      throw tooMany('AUTH_LOCKED', { retryAfter: locked.retryAfter }, locked.retryAfter);
    }
    try {
      return await this.auth.authenticate(header, mcpWorkspace);
    } catch (error) {
      if (error instanceof VfsError && error.code === 'UNAUTHENTICATED') {
        this.failures.fail(address);
        this.metrics?.authFailures.inc();
        // Counted on every node before the 401 goes out: the next try, on any node, sees it.
        if (this.shared !== null) await this.shared.fail(address);
      }
      throw error;
    }
  }

  /** Admits a read-tool call under the plan's per-credential and per-account rates. */
  async admitRead(principal: Principal): Promise<void> {
    const limits = await this.lookups.accountLimits(principal.accountId);
    // The credential's key first: the shared limits group requests by it (shared-limits.ts).
    const taken: Limit[] = [
      { key: `c:${principal.actorId}`, ratePerSecond: limits.readRatePerCredential, burst: limits.readRatePerCredential },
      { key: `a:${principal.accountId}`, ratePerSecond: limits.readRatePerAccount, burst: limits.readRatePerAccount },
    ];
    const decision = this.limiter.take(taken);
    if (!decision.ok) throw this.refused(decision.retryAfter, 'read', 'credential or account');
    if (this.shared !== null) await this.admitShared(taken, 'read', 'credential or account');
  }

  /**
   * Admits one dynamic client registration from `address`: `perMinute` a minute, as a burst, then
   * one every 60/`perMinute` seconds. Registrations are anonymous, so this is what bounds them.
   */
  async admitRegistration(address: string, perMinute: number): Promise<void> {
    await this.admitAddress('r', address, perMinute);
  }

  /** Admits one request to the OAuth token or revocation endpoint from `address`, bounded as registrations are. */
  async admitTokenEndpoint(address: string, perMinute: number): Promise<void> {
    await this.admitAddress('o', address, perMinute);
  }

  /** An anonymous endpoint's bound per address: `perMinute` as a burst, then one every 60/`perMinute` seconds. */
  private async admitAddress(bucket: string, address: string, perMinute: number): Promise<void> {
    const taken: Limit[] = [{ key: `${bucket}:${address}`, ratePerSecond: perMinute / 60, burst: perMinute }];
    const decision = this.limiter.take(taken);
    if (!decision.ok) throw this.refused(decision.retryAfter, 'management', 'address');
    if (this.shared !== null) await this.admitShared(taken, 'management', 'address');
  }

  /** Admits a management-plane call under the per-credential rate. */
  async admitManagement(principal: Principal): Promise<void> {
    const rate = this.options.managementRate;
    const taken: Limit[] = [{ key: `m:${principal.actorId}`, ratePerSecond: rate, burst: rate }];
    const decision = this.limiter.take(taken);
    if (!decision.ok) throw this.refused(decision.retryAfter, 'management', 'credential');
    if (this.shared !== null) await this.admitShared(taken, 'management', 'credential');
  }

  /** Handles a notification of the invalidation channel; false when it is not about the shared limits. */
  notified(payload: string): boolean {
    return this.shared?.notified(payload) ?? false;
  }

  /** After a gap in notifications: locks the addresses the other nodes locked meanwhile. */
  async notificationGap(): Promise<void> {
    await this.shared?.reloadLocks();
  }

  /** Stops the shared limits' background work. */
  close(): void {
    this.shared?.close();
  }

  /** After this node's buckets admitted a request (a request they refuse costs no round trip): the cluster's. */
  private async admitShared(taken: readonly Limit[], metric: 'read' | 'management', scope: string): Promise<void> {
    const decision = await this.shared!.take(taken);
    if (!decision.ok) throw this.refused(decision.retryAfter, metric, scope);
  }

  private refused(retryAfter: number, metric: 'read' | 'management', scope: string): VfsError {
    this.metrics?.rateLimited.inc({ scope: metric });
    return tooMany('RATE_LIMITED', { scope, retryAfter }, retryAfter);
  }
}

function tooMany(code: 'AUTH_LOCKED' | 'RATE_LIMITED', params: Record<string, string | number>, retryAfter: number): VfsError {
  return new VfsError(code, params, { 'retry-after': String(retryAfter) });
}
