/**
 * The state of the rate limits and of the failed-authentication lock that the
 * service nodes on one database share (migration 011-cluster-limits.sql). Each
 * call is one statement of the application role, committed on its own.
 */
import type { Database } from './database.js';

/** A batch of rate-limit checks: distinct keys, and groups of requests that use the same keys. */
export interface BucketBatch {
  /** Distinct and sorted (by UTF-16 code units, as every node sorts them): the order the rows are locked in. */
  keys: string[];
  /** Per key, ms between two requests at the steady rate. */
  intervals: number[];
  /** Per key, how far (ms) its TAT may run ahead of now: interval × (burst - 1). */
  tolerances: number[];
  /** The keys of every group one after another, as 1-based positions in `keys`. */
  members: number[];
  /** Per group, the position in `members` of its last key. */
  ends: number[];
  /** Per group, its requests. */
  counts: number[];
  /** Per group, the slots it took earlier and gives back unused. */
  returns: number[];
}

/** What the database decided for a batch. */
export interface BucketAnswer {
  /** Per group, how many of its requests are admitted. */
  admitted: number[];
  /** Per group, the ms its other requests must wait (0 when all are admitted). */
  waits: number[];
  /** Per key, the ms its TAT is ahead of the database's now after the batch. */
  ahead: number[];
}

/** Admits what the shared buckets allow of each group, in order. */
export async function takeSharedLimits(db: Database, batch: BucketBatch): Promise<BucketAnswer> {
  const { rows } = await db.appStatement<BucketAnswer>('SELECT admitted, waits, ahead FROM take_rate_limits($1, $2, $3, $4, $5, $6, $7)', [
    batch.keys,
    batch.intervals,
    batch.tolerances,
    batch.members,
    batch.ends,
    batch.counts,
    batch.returns,
  ]);
  return rows[0];
}

/** An address locked by the failed-authentication lock, and for how many ms more. */
export interface AddressLock {
  address: string;
  lastsMs: number;
}

/** Counts failed authentications per address (distinct); returns the addresses locked now. */
export async function countSharedFailures(db: Database, addresses: string[], counts: number[], threshold: number, windowMs: number): Promise<AddressLock[]> {
  const { rows } = await db.appStatement<{ locked: string; lasts_ms: number }>('SELECT locked, lasts_ms FROM count_auth_failures($1, $2, $3, $4)', [
    addresses,
    counts,
    threshold,
    windowMs,
  ]);
  return rows.map((r) => ({ address: r.locked, lastsMs: r.lasts_ms }));
}

/** The addresses locked now, at most `maxRows` of them. */
export async function sharedLocks(db: Database, threshold: number, maxRows: number): Promise<AddressLock[]> {
  const { rows } = await db.appStatement<{ locked: string; lasts_ms: number }>('SELECT locked, lasts_ms FROM locked_addresses($1, $2)', [threshold, maxRows]);
  return rows.map((r) => ({ address: r.locked, lastsMs: r.lasts_ms }));
}

/** Deletes the buckets and failure windows whose time has passed; returns how many. */
export async function sweepSharedLimits(db: Database): Promise<number> {
  const { rows } = await db.appStatement<{ swept: number }>('SELECT sweep_cluster_limits() AS swept', []);
  return rows[0].swept;
}

/** How the database announces a newly locked address on the invalidation channel (migration 011): `auth-lock <ms> <address>`. */
const LOCK_NOTICE = /^auth-lock (\d+) (\S+)$/;

/** The lock a notification announces, or null when it announces something else. */
export function parseLockNotice(payload: string): AddressLock | null {
  const match = LOCK_NOTICE.exec(payload);
  return match === null ? null : { address: match[2], lastsMs: Number(match[1]) };
}
