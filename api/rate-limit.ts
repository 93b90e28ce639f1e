/**
 * Rate limiting in memory: GCRA buckets (per credential, per account) and a
 * failed-authentication window per client address. Every map is bounded: past
 * `maxKeys` the least recently touched key is forgotten, which can only make a
 * limit more lenient for that key, never stall the service.
 */

/** A decision: allowed, or refused with the whole seconds to wait. */
export type Allowance = { ok: true } | { ok: false; retryAfter: number };

/** A bounded map that keeps recently used keys. */
class BoundedMap<V> {
  private readonly map = new Map<string, V>();

  constructor(private readonly maxKeys: number) {}

  get(key: string): V | undefined {
    const value = this.map.get(key);
    if (value !== undefined) {
      this.map.delete(key);
      this.map.set(key, value);
    }
    return value;
  }

  set(key: string, value: V): void {
    this.map.delete(key);
    if (this.map.size >= this.maxKeys) this.map.delete(this.map.keys().next().value!);
    this.map.set(key, value);
  }

  get size(): number {
    return this.map.size;
  }
}

/** One GCRA limit to check: a key, a steady rate per second and a burst. */
export interface Limit {
  key: string;
  ratePerSecond: number;
  burst: number;
}

/**
 * Generic cell rate algorithm: per key, the theoretical arrival time (TAT) of
 * the next request. A request at `now` is allowed when TAT - now does not
 * exceed the burst tolerance; a burst of `burst` requests passes at once, the
 * next one waits one emission interval.
 */
export class RateLimiter {
  private readonly tats: BoundedMap<number>;

  constructor(maxKeys = 100_000) {
    this.tats = new BoundedMap(maxKeys);
  }

  /** Checks all limits; takes a slot from each only when every one allows. */
  take(limits: readonly Limit[], now = Date.now()): Allowance {
    let wait = 0;
    const next: number[] = [];
    for (const limit of limits) {
      const interval = 1000 / limit.ratePerSecond;
      const tolerance = interval * (limit.burst - 1);
      const tat = Math.max(this.tats.get(limit.key) ?? now, now);
      if (tat - now > tolerance) wait = Math.max(wait, tat - tolerance - now);
      next.push(tat + interval);
    }
    if (wait > 0) return { ok: false, retryAfter: Math.max(1, Math.ceil(wait / 1000)) };
    limits.forEach((limit, i) => this.tats.set(limit.key, next[i]));
    return { ok: true };
  }

  /** Keys tracked now (for tests of the memory bound). */
  get size(): number {
    return this.tats.size;
  }
}

/**
 * Failed authentications per client address in a fixed window: once an
 * address reaches `threshold` failures, it is locked until its window ends.
 */
export class FailureWindow {
  private readonly windows: BoundedMap<{ start: number; failures: number }>;

  constructor(
    private readonly threshold: number,
    private readonly windowMs: number,
    maxKeys = 100_000,
  ) {
    this.windows = new BoundedMap(maxKeys);
  }

  /** Whether the address may try to authenticate now. */
  check(address: string, now = Date.now()): Allowance {
    const w = this.windows.get(address);
    if (w === undefined || now - w.start >= this.windowMs || w.failures < this.threshold) return { ok: true };
    return { ok: false, retryAfter: Math.max(1, Math.ceil((w.start + this.windowMs - now) / 1000)) };
  }

  /** Counts one failed authentication from the address. */
  fail(address: string, now = Date.now()): void {
    const w = this.windows.get(address);
    if (w === undefined || now - w.start >= this.windowMs) this.windows.set(address, { start: now, failures: 1 });
    else this.windows.set(address, { start: w.start, failures: w.failures + 1 });
  }

  /** Addresses tracked now (for tests of the memory bound). */
  get size(): number {
    return this.windows.size;
  }
}
