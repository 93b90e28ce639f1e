/**
 * The read-tool calls this process served in the last five minutes, per account, for the
 * console's status (GET /v1/status): a ring of SLOTS slots of SLOT_MS each, every slot holding
 * per tool a count and a histogram over the latency buckets of metrics.ts. Kept whether or not
 * metrics are on; nothing of it leaves the process but through `slots(accountId)`.
 *
 * Memory is bounded by the accounts that read within the ring's span: a slot is reset when
 * the ring comes round to it, and an account that has not read for a whole span is dropped by
 * a sweep that runs at most once a span, from `record`. The tool is one of the four fixed
 * names (the `Tool` type), never a string from a request.
 */
import type { Tool } from './contract/read-params.js';
import { LATENCY_BUCKETS } from './metrics.js';

/** Slots in the ring. */
export const SLOTS = 60;
/** Length of one slot. */
export const SLOT_MS = 5_000;
/** The ring's span: an account idle this long is dropped. */
const SPAN_MS = SLOTS * SLOT_MS;
/** Each bucket's upper bound in milliseconds, computed once (0.0025 * 1000 is not 2.5 in binary). */
const BOUNDS_MS = LATENCY_BUCKETS.map((seconds) => Math.round(seconds * 1_000_000) / 1_000);

/** One tool's calls in one slot. */
interface ToolCount {
  count: number;
  /** Calls per latency bucket; the last entry counts those above the largest bound. */
  buckets: Uint32Array;
  /** The slowest call, in milliseconds (the 99th percentile when it falls above the largest bound). */
  maxMs: number;
}

/** One slot of an account's ring. */
interface Slot {
  /** The slot's number: its start in ms since the epoch, divided by SLOT_MS. */
  number: number;
  tools: Map<Tool, ToolCount>;
}

/** One account's ring. */
interface Ring {
  slots: Array<Slot | null>;
  /** When the account last read (ms since the epoch). */
  lastMs: number;
}

/** One slot as the status reports it: its start, and per tool that was called in it, the count and p99. */
export interface ReadSlot {
  at: string;
  tools: Partial<Record<Tool, { count: number; p99Ms: number }>>;
}

/** The recent read-tool calls of each account, in this process. */
export class RecentReads {
  private readonly rings = new Map<string, Ring>();
  private nextSweepMs = 0;

  /** `now` gives the time in ms since the epoch (tests move it). */
  constructor(private readonly now: () => number = Date.now) {}

  /** Records one call of `tool` by `accountId` that took `seconds`. */
  record(accountId: string, tool: Tool, seconds: number): void {
    const nowMs = this.now();
    if (nowMs >= this.nextSweepMs) this.sweep(nowMs);
    let ring = this.rings.get(accountId);
    if (ring === undefined) {
      ring = { slots: new Array<Slot | null>(SLOTS).fill(null), lastMs: nowMs };
      this.rings.set(accountId, ring);
    }
    ring.lastMs = nowMs;
    const number = Math.floor(nowMs / SLOT_MS);
    const index = number % SLOTS;
    let slot = ring.slots[index];
    if (slot === null || slot.number !== number) {
      slot = { number, tools: new Map() };
      ring.slots[index] = slot;
    }
    let counts = slot.tools.get(tool);
    if (counts === undefined) {
      counts = { count: 0, buckets: new Uint32Array(BOUNDS_MS.length + 1), maxMs: 0 };
      slot.tools.set(tool, counts);
    }
    const ms = seconds * 1000;
    let bucket = 0;
    while (bucket < BOUNDS_MS.length && ms > BOUNDS_MS[bucket]) bucket++;
    counts.count++;
    counts.buckets[bucket]++;
    if (ms > counts.maxMs) counts.maxMs = ms;
  }

  /** The SLOTS slots ending with the current one, oldest first (empty ones included), of `accountId` only. */
  slots(accountId: string): ReadSlot[] {
    const current = Math.floor(this.now() / SLOT_MS);
    // SECURITY: the ring is looked up by the caller's own account and no other is read, so an
    // account sees only its own calls.
    const ring = this.rings.get(accountId);
    const out: ReadSlot[] = [];
    for (let number = current - SLOTS + 1; number <= current; number++) {
      const slot = ring?.slots[number % SLOTS];
      const tools: ReadSlot['tools'] = {};
      if (slot !== undefined && slot !== null && slot.number === number) {
        for (const [tool, counts] of slot.tools) tools[tool] = { count: counts.count, p99Ms: p99(counts) };
      }
      out.push({ at: new Date(number * SLOT_MS).toISOString(), tools });
    }
    return out;
  }

  /** Accounts holding a ring (for tests of the memory bound). */
  get accounts(): number {
    return this.rings.size;
  }

  /** Drops the accounts that have not read for a whole span. */
  private sweep(nowMs: number): void {
    for (const [accountId, ring] of this.rings) if (nowMs - ring.lastMs > SPAN_MS) this.rings.delete(accountId);
    this.nextSweepMs = nowMs + SPAN_MS;
  }
}

/** The upper bound in ms of the bucket where the 99th percentile of `counts` falls; above the largest bound, the slowest call. */
function p99(counts: ToolCount): number {
  const rank = Math.ceil(counts.count * 0.99);
  let seen = 0;
  for (let bucket = 0; bucket < BOUNDS_MS.length; bucket++) {
    seen += counts.buckets[bucket];
    if (seen >= rank) return BOUNDS_MS[bucket];
  }
  return Math.round(counts.maxMs);
}
