/**
 * The rate limits and the failed-authentication lock held for all service
 * nodes on one database (VFS_CLUSTER_LIMITS=on), on top of each node's own
 * (rate-limit.ts), which stay the first check:
 *
 * - a request the node's buckets refuse never reaches PostgreSQL; one they
 *   admit waits for the shared buckets, where all the checks waiting on this
 *   node go in one statement per round trip (core/coalescer.ts), computed on the
 *   database's clock. The answer also tells how far each shared bucket is
 *   ahead, and the node's bucket moves up to it, so that once the other nodes
 *   have used a credential's rate this node refuses it without asking. A busy
 *   credential's round trip also takes slots ahead (a lease, see LEASE_MS), so
 *   its next requests on this node cost no round trip;
 * - only failed authentications go to PostgreSQL (also coalesced). An address
 *   that reaches the threshold is announced by NOTIFY, and every node locks it
 *   in its own window, so the lock check stays in memory;
 * - if PostgreSQL cannot answer, the node's own limits decide alone (and the
 *   error is counted and logged): reads then fail on their audit commit anyway.
 */
import {
  type BucketAnswer,
  type BucketBatch,
  countSharedFailures,
  parseLockNotice,
  sharedLocks,
  sweepSharedLimits,
  takeSharedLimits,
} from '../../db/cluster-limits.js';
import type { Database } from '../../db/database.js';
import { Coalescer } from '../../core/coalescer.js';
import type { Metrics } from '../metrics.js';
import type { Allowance, FailureWindow, Limit, RateLimiter } from './rate-limit.js';

/**
 * Least ms between the starts of two round trips of one node's rate-limit checks (Coalescer):
 * under load, larger batches for fewer statements; a read after a quiet spell waits for none.
 * From bench/cluster-limits.ts (docs/benchmarks.md, "Limits across nodes").
 */
const ROUND_TRIP_INTERVAL_MS = 1;
/** How often each node deletes the shared buckets and windows whose time has passed. */
const SWEEP_MS = 60_000;
/** The most locks loaded after a gap in notifications (the node's window holds 100,000 addresses). */
const MAX_LOCKS_LOADED = 10_000;
/** At most one log line per this interval while the shared limits fail. */
const ERROR_LOG_MS = 60_000;

/**
 * A node asks for the slots its waiting requests need plus as many as the same credential used
 * in this many ms before (its lease), less what it still holds, so that at a steady rate most
 * requests find a slot granted ahead and cost no round trip. A lease never exceeds a quarter of
 * any of its keys' burst, so the other nodes find room, and what a node holds lapses
 * LEASE_EXPIRY_MS after its last grant: a slot used late counts against the window in which it
 * was granted, so over any window the nodes admit at most rate × window + burst + what they held
 * at its start (a quarter of the burst each). Slots that lapse unused are given back with the
 * credential's next round trip, so the nodes together still admit the whole rate.
 */
const LEASE_MS = 50;
const LEASE_EXPIRY_MS = 100;
/** The largest lease, in requests. */
const MAX_LEASE = 1000;
/** Leases kept at most (one per credential in use); past it they are all dropped. */
const MAX_LEASES = 10_000;

const ALLOWED: Allowance = { ok: true };

/** Requests that use the same keys (one credential's), and what this node holds for them. */
interface Lease {
  /** Slots granted ahead and not used yet. */
  slots: number;
  /** When (performance.now()) the slots lapse. */
  expires: number;
  /** Slots that lapsed unused, to give back with the next round trip. */
  lapsed: number;
  /** Requests of this group since `since` (for the size of the next lease). */
  seen: number;
  since: number;
}

/** One check waiting for a round trip. */
interface Check {
  limits: readonly Limit[];
  /** Its first key: requests with equal signatures form one group. */
  signature: string;
}

/** What the shared failed-authentication lock needs to know. */
export interface SharedLockOptions {
  /** Failed authentications from one address that lock it. */
  authFailures: number;
  /** Window in which they are counted, and how long the lock lasts. */
  authFailureWindowMs: number;
}

/** This node's side of the limits shared by the nodes. */
export class SharedLimits {
  private readonly buckets: Coalescer<Check, Allowance>;
  private readonly leases = new Map<string, Lease>();
  private readonly failures: Coalescer<string, undefined>;
  private readonly sweeper: NodeJS.Timeout;
  private lastErrorLog = -Infinity;

  constructor(
    private readonly db: Database,
    /** The node's own buckets: refunded and moved up after each answer. */
    private readonly limiter: RateLimiter,
    /** The node's own failure windows: announced locks go there. */
    private readonly window: FailureWindow,
    private readonly options: SharedLockOptions,
    private readonly metrics: Metrics | null,
    private readonly log: (message: string, error: unknown) => void,
  ) {
    this.buckets = new Coalescer((requests) => this.takeBatch(requests), ROUND_TRIP_INTERVAL_MS);
    this.failures = new Coalescer((addresses) => this.failBatch(addresses));
    this.sweeper = setInterval(() => {
      sweepSharedLimits(db).catch((error: unknown) => this.report('sweeping the shared rate limits failed', error));
    }, SWEEP_MS).unref();
  }

  /** Checks a request that the node's own buckets admitted against the shared buckets. */
  take(limits: readonly Limit[]): Allowance | Promise<Allowance> {
    // The first key names the group: the guard puts the credential first, and it determines the
    // others (its account).
    const signature = limits[0].key;
    const lease = this.leases.get(signature);
    if (lease !== undefined) {
      lease.seen++;
      if (lease.slots > 0) {
        if (lease.expires > performance.now()) {
          lease.slots--;
          return ALLOWED;
        }
        lease.lapsed += lease.slots;
        lease.slots = 0;
      }
    }
    return this.buckets.submit({ limits, signature });
  }

  /** Counts a failed authentication from the address; resolves once counted (and locked here, if that locks it). */
  fail(address: string): Promise<undefined> {
    return this.failures.submit(address);
  }

  /** Handles a notification of the invalidation channel; false when it is not a lock announcement. */
  notified(payload: string): boolean {
    const lock = parseLockNotice(payload);
    if (lock === null) return false;
    this.window.lock(lock.address, lock.lastsMs);
    return true;
  }

  /** Locks here every address locked in the shared windows (announcements may have been missed). */
  async reloadLocks(): Promise<void> {
    try {
      const now = Date.now();
      for (const lock of await sharedLocks(this.db, this.options.authFailures, MAX_LOCKS_LOADED)) this.window.lock(lock.address, lock.lastsMs, now);
    } catch (error) {
      this.report('loading the shared failed-authentication locks failed', error);
    }
  }

  /** Stops the periodic sweep. */
  close(): void {
    clearInterval(this.sweeper);
  }

  private async takeBatch(checks: readonly Check[]): Promise<Allowance[]> {
    // Requests with the same keys (one credential's) go as one group: the database's work is
    // per group, not per request. The keys go sorted: the database locks them in this order.
    const groups = new Map<string, { limits: readonly Limit[]; checks: number[]; lease: number; returns: number }>();
    const distinct = new Map<string, Limit>();
    for (let c = 0; c < checks.length; c++) {
      const { limits, signature } = checks[c];
      const group = groups.get(signature);
      if (group !== undefined) group.checks.push(c);
      else {
        groups.set(signature, { limits, checks: [c], lease: 0, returns: 0 });
        for (const limit of limits) if (!distinct.has(limit.key)) distinct.set(limit.key, limit);
      }
    }
    const batch: BucketBatch = { keys: [...distinct.keys()].sort(), intervals: [], tolerances: [], members: [], ends: [], counts: [], returns: [] };
    const positions = new Map<string, number>();
    for (const key of batch.keys) {
      const { ratePerSecond, burst } = distinct.get(key)!;
      batch.intervals.push(1000 / ratePerSecond);
      batch.tolerances.push((1000 / ratePerSecond) * (burst - 1));
      positions.set(key, positions.size + 1);
    }
    const asked = performance.now();
    for (const [signature, group] of groups) {
      group.lease = this.leaseSize(signature, group.limits, asked);
      const lease = this.leases.get(signature);
      if (lease !== undefined) {
        group.returns = lease.lapsed;
        lease.lapsed = 0;
      }
      for (const limit of group.limits) batch.members.push(positions.get(limit.key)!);
      batch.ends.push(batch.members.length);
      batch.counts.push(group.checks.length + group.lease);
      batch.returns.push(group.returns);
    }
    const started = performance.now();
    let answer: BucketAnswer;
    try {
      answer = await takeSharedLimits(this.db, batch);
    } catch (error) {
      this.report('the shared rate limits failed (each node limits alone meanwhile)', error);
      // Nothing was given back: the next round trip tries again.
      for (const [signature, group] of groups) {
        const lease = this.leases.get(signature);
        if (lease !== undefined) lease.lapsed += group.returns;
      }
      return checks.map(() => ALLOWED);
    }
    const now = performance.now();
    this.metrics?.sharedLimitSeconds.observe((now - started) / 1000);
    this.metrics?.sharedLimitBatch.observe(checks.length);
    if (this.leases.size > MAX_LEASES) this.leases.clear();
    const decisions: Allowance[] = new Array(checks.length);
    // Per key, the slots this node holds granted ahead: its own buckets take them as they are used.
    const held = new Array<number>(batch.keys.length).fill(0);
    let g = 0;
    for (const [signature, group] of groups) {
      const admitted = answer.admitted[g];
      const refused: Allowance = { ok: false, retryAfter: Math.max(1, Math.ceil(answer.waits[g] / 1000)) };
      for (let i = 0; i < group.checks.length; i++) {
        const c = group.checks[i];
        if (i < admitted) decisions[c] = ALLOWED;
        else {
          decisions[c] = refused;
          this.limiter.refund(checks[c].limits);
        }
      }
      const ahead = Math.max(0, admitted - group.checks.length);
      const lease = this.leases.get(signature);
      if (lease !== undefined) {
        // Slots granted before and not used yet stay: this round trip asked only for what they lacked.
        if (lease.expires <= now) {
          lease.lapsed += lease.slots;
          lease.slots = 0;
        }
        if (ahead > 0) {
          lease.slots += ahead;
          lease.expires = now + LEASE_EXPIRY_MS;
        }
        // The rate for the next lease is measured from this round trip on.
        lease.seen = 0;
        lease.since = asked;
        if (lease.slots > 0) for (const limit of group.limits) held[positions.get(limit.key)! - 1] += lease.slots;
      }
      g++;
    }
    // After the refunds: a bucket moved up to the shared one must not then drop below it.
    const wall = Date.now();
    for (let k = 0; k < batch.keys.length; k++) this.limiter.adopt(batch.keys[k], answer.ahead[k] - held[k] * batch.intervals[k], wall);
    return decisions;
  }

  /** The slots to ask for ahead for a group: its recent rate over LEASE_MS, within the bounds above. */
  private leaseSize(signature: string, limits: readonly Limit[], now: number): number {
    const lease = this.leases.get(signature);
    let size = MAX_LEASE;
    for (const limit of limits) size = Math.min(size, Math.floor(limit.burst / 4));
    // One slot ahead saves a round trip at most, and could keep a small burst's last slot from
    // a request waiting on another node.
    if (size < 2) return 0;
    if (lease === undefined) {
      // A group seen for the first time gets a lease record, and a lease once it is busy.
      this.leases.set(signature, { slots: 0, expires: 0, lapsed: 0, seen: 0, since: now });
      return 0;
    }
    const rate = lease.seen / Math.max(1, now - lease.since);
    const held = lease.expires > now ? lease.slots : 0;
    return Math.max(0, Math.min(size, Math.floor(rate * LEASE_MS)) - held);
  }

  private async failBatch(addresses: readonly string[]): Promise<undefined[]> {
    const counts = new Map<string, number>();
    for (const address of addresses) counts.set(address, (counts.get(address) ?? 0) + 1);
    try {
      const { authFailures, authFailureWindowMs } = this.options;
      const locks = await countSharedFailures(this.db, [...counts.keys()], [...counts.values()], authFailures, authFailureWindowMs);
      const now = Date.now();
      for (const lock of locks) this.window.lock(lock.address, lock.lastsMs, now);
    } catch (error) {
      this.report('counting failed authentications in the shared windows failed', error);
    }
    return addresses.map(() => undefined);
  }

  private report(message: string, error: unknown): void {
    this.metrics?.sharedLimitErrors.inc();
    const now = Date.now();
    if (now - this.lastErrorLog < ERROR_LOG_MS) return;
    this.lastErrorLog = now;
    this.log(message, error);
  }
}
