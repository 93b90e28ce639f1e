/**
 * The gate every /v1 request passes: the client address's failed-
 * authentication lock (429), the credential (401), then the rate limits
 * (429) — read tools per credential and per account, as the plan says; every
 * other /v1 route per credential. Every 429 carries Retry-After in whole
 * seconds.
 */
import { VfsError } from '../core/errors.js';
import type { Authenticator, Principal } from './auth.js';
import { remoteAddress, type RequestContext } from './http.js';
import type { Lookups } from './lookups.js';
import type { Metrics } from './metrics.js';
import { FailureWindow, RateLimiter } from './rate-limit.js';

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
}

/** Authentication and rate limits for the routes. */
export class Guard {
  private readonly failures: FailureWindow;
  private readonly limiter = new RateLimiter();

  constructor(
    private readonly auth: Authenticator,
    private readonly lookups: Lookups,
    private readonly options: GuardOptions,
    private readonly metrics: Metrics | null = null,
  ) {
    this.failures = new FailureWindow(options.authFailures, options.authFailureWindowMs);
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

  /** Authenticates the request, counting failures per address. */
  async principal(ctx: RequestContext): Promise<Principal> {
    // Two Content-Length headers can mean two different bodies to two parsers: act on neither.
    if (ctx.ambiguousLength) throw new VfsError('INVALID_BODY', { reason: 'Content-Length given more than once' });
    // With no failure within the window no address is locked, and a credential the cache holds
    // cannot fail: the address (a call into uWS that allocates, about 1 µs) is not needed.
    if (this.failures.quiet()) {
      const known = this.auth.cached(ctx.authorization);
      if (known !== undefined) return known;
    }
    const address = this.address(ctx);
    const locked = this.failures.check(address);
    if (!locked.ok) {
      this.metrics?.rateLimited.inc({ scope: 'auth_lock' });
      throw tooMany('AUTH_LOCKED', { retryAfter: locked.retryAfter }, locked.retryAfter);
    }
    try {
      return await this.auth.authenticate(ctx.authorization);
    } catch (error) {
      if (error instanceof VfsError && error.code === 'UNAUTHENTICATED') {
        this.failures.fail(address);
        this.metrics?.authFailures.inc();
      }
      throw error;
    }
  }

  /** Admits a read-tool call under the plan's per-credential and per-account rates. */
  async admitRead(principal: Principal): Promise<void> {
    const limits = await this.lookups.accountLimits(principal.accountId);
    const decision = this.limiter.take([
      { key: `c:${principal.actorId}`, ratePerSecond: limits.readRatePerCredential, burst: limits.readRatePerCredential },
      { key: `a:${principal.accountId}`, ratePerSecond: limits.readRatePerAccount, burst: limits.readRatePerAccount },
    ]);
    if (!decision.ok) {
      this.metrics?.rateLimited.inc({ scope: 'read' });
      throw tooMany('RATE_LIMITED', { scope: 'credential or account', retryAfter: decision.retryAfter }, decision.retryAfter);
    }
  }

  /** Admits a management-plane call under the per-credential rate. */
  admitManagement(principal: Principal): void {
    const rate = this.options.managementRate;
    const decision = this.limiter.take([{ key: `m:${principal.actorId}`, ratePerSecond: rate, burst: rate }]);
    if (!decision.ok) {
      this.metrics?.rateLimited.inc({ scope: 'management' });
      throw tooMany('RATE_LIMITED', { scope: 'credential', retryAfter: decision.retryAfter }, decision.retryAfter);
    }
  }
}

function tooMany(code: 'AUTH_LOCKED' | 'RATE_LIMITED', params: Record<string, string | number>, retryAfter: number): VfsError {
  return new VfsError(code, params, { 'retry-after': String(retryAfter) });
}
