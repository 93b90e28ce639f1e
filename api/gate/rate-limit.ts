/**
 * Rate limiting in memory: GCRA buckets (per credential, per account) and a
 * failed-authentication window per client address. Every map is bounded: past
 * `maxKeys` the keys untouched longest are forgotten, which can only make a
 * limit more lenient for those keys, never stall the service.
 */

/** A decision: allowed, or refused with the whole seconds to wait. */
export type Allowance = { ok: true } | { ok: false; retryAfter: number };

/**
 * A bounded map that forgets the keys least recently used: entries live in two generations,
 * and when the young one is full, the old one is dropped and the young one becomes old. A key
 * read from the old generation moves to the young one. So a hit costs one lookup, where an
 * exactly ordered map would move the key on every read (a delete and a set), and the map
 * never holds more than `maxKeys`.
 */
class BoundedMap<V> {
  private young = new Map<string, V>();
  private old = new Map<string, V>();
  private readonly generation: number;

  constructor(maxKeys: number) {
    this.generation = Math.max(1, Math.floor(maxKeys / 2));
  }

  get(key: string): V | undefined {
    const value = this.young.get(key);
    if (value !== undefined) return value;
    const old = this.old.get(key);
    if (old !== undefined) {
      this.old.delete(key);
      this.add(key, old);
    }
    return old;
  }

  set(key: string, value: V): void {
    if (this.young.has(key)) this.young.set(key, value);
    else {
      this.old.delete(key);
      this.add(key, value);
    }
  }

  private add(key: string, value: V): void {
    if (this.young.size >= this.generation) {
      this.old = this.young;
      this.young = new Map();
    }
    this.young.set(key, value);
  }

  get size(): number {
    return this.young.size + this.old.size;
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
  /** Per key, the theoretical arrival time of its next request (updated in place). */
  private readonly tats: BoundedMap<{ tat: number }>;

  constructor(maxKeys = 100_000) {
    this.tats = new BoundedMap(maxKeys);
  }

  /** Checks all limits; takes a slot from each only when every one allows. */
  take(limits: readonly Limit[], now = Date.now()): Allowance {
    let wait = 0;
    for (const limit of limits) {
      const interval = 1000 / limit.ratePerSecond;
      const tat = Math.max(this.tats.get(limit.key)?.tat ?? now, now);
      wait = Math.max(wait, tat - interval * (limit.burst - 1) - now);
    }
    if (wait > 0) return { ok: false, retryAfter: Math.max(1, Math.ceil(wait / 1000)) };
    for (const limit of limits) {
      const interval = 1000 / limit.ratePerSecond;
      const cell = this.tats.get(limit.key);
      if (cell === undefined) this.tats.set(limit.key, { tat: now + interval });
      else cell.tat = Math.max(cell.tat, now) + interval;
    }
    return ALLOWED;
  }

  /** Gives back the slots `take` took from each limit (a check shared with other nodes refused the request). */
  refund(limits: readonly Limit[]): void {
    for (const limit of limits) {
      const cell = this.tats.get(limit.key);
      if (cell !== undefined) cell.tat -= 1000 / limit.ratePerSecond;
    }
  }

  /**
   * Moves a key's TAT up to `aheadMs` past now when it is behind: the shared bucket of the key
   * (which counts every node's requests) was that far ahead. A TAT never moves back, so the
   * requests this node admitted since stay counted.
   */
  adopt(key: string, aheadMs: number, now = Date.now()): void {
    if (aheadMs <= 0) return;
    const cell = this.tats.get(key);
    if (cell === undefined) this.tats.set(key, { tat: now + aheadMs });
    else cell.tat = Math.max(cell.tat, now + aheadMs);
  }

  /** Keys tracked now (for tests of the memory bound). */
  get size(): number {
    return this.tats.size;
  }
}

const ALLOWED: Allowance = { ok: true };

/**
 * Failed authentications per client address in a fixed window: once an
 * address reaches `threshold` failures, it is locked until its window ends.
 */
export class FailureWindow {
  private readonly windows: BoundedMap<{ start: number; failures: number }>;
  private lastFailure = -Infinity;

  constructor(
    private readonly threshold: number,
    private readonly windowMs: number,
    maxKeys = 100_000,
  ) {
    this.windows = new BoundedMap(maxKeys);
  }

  /** True when no address has failed within the window: none is locked, and none is counting. */
  quiet(now = Date.now()): boolean {
    return now - this.lastFailure >= this.windowMs;
  }

  /** Whether the address may try to authenticate now. */
  check(address: string, now = Date.now()): Allowance {
    const w = this.windows.get(address);
    if (w === undefined || now - w.start >= this.windowMs || w.failures < this.threshold) return ALLOWED;
    return { ok: false, retryAfter: Math.max(1, Math.ceil((w.start + this.windowMs - now) / 1000)) };
  }

  /** Counts one failed authentication from the address. */
  fail(address: string, now = Date.now()): void {
    this.lastFailure = now;
    const w = this.windows.get(address);
    if (w === undefined || now - w.start >= this.windowMs) this.windows.set(address, { start: now, failures: 1 });
    else this.windows.set(address, { start: w.start, failures: w.failures + 1 });
  }

  /** Locks the address for `ms` (another node counted its failures to the threshold). */
  lock(address: string, ms: number, now = Date.now()): void {
    const start = now + Math.min(ms, this.windowMs) - this.windowMs;
    const w = this.windows.get(address);
    if (w !== undefined && w.failures >= this.threshold && w.start >= start) return;
    this.windows.set(address, { start, failures: this.threshold });
    this.lastFailure = Math.max(this.lastFailure, start);
  }

  /** Addresses tracked now (for tests of the memory bound). */
  get size(): number {
    return this.windows.size;
  }
}
