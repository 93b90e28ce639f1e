/**
 * Runs a grep's line matching over many documents with the faster of two engines, and never
 * lets V8 be what makes it slow.
 *
 * Where the pattern has a V8 form (engine/regex/byte-regex.ts), the documents are scanned in
 * batches of about BATCH_BYTES: the first with V8, the second with RE2, each timed, and the
 * rest with the one that took fewer nanoseconds a byte. Every V8 batch runs under a time limit
 * (`vm`'s timeout, which interrupts a regex search in progress): V8 backtracks, and a pattern
 * like `(a+)+$` or `\S+\s+\S+` on a long line without a space would take it exponential or
 * quadratic time. When the limit is reached the batch stops where it was, and RE2 searches the
 * document in progress and everything after it. A search smaller than two batches takes RE2
 * alone: the trial and the limit's timer would cost more than they could save.
 */

import { createContext, Script } from 'node:vm';
import type { LineMatcher } from './line-matcher.js';

/** Text bytes scanned between two choices or checks. */
const BATCH_BYTES = 2 << 20;
/**
 * A V8 batch's time limit: FIXED_MS plus this many nanoseconds a byte, about four times the
 * slowest V8 scan measured on patterns it wins on (with the copy into a string).
 */
const LIMIT_NS_PER_BYTE = 20;
const FIXED_MS = 20;

/** The smallest search that tries V8: two batches. */
const MIN_BYTES = 2 * BATCH_BYTES;

let enabled = true;
let minBytes = MIN_BYTES;

/**
 * Whether grep may use V8 at all (`VFS_GREP_V8`; RE2 alone when off), and from how many text
 * bytes a search tries it (the tests lower it to make small searches take V8 from the start).
 */
export function setV8Scans(on: boolean, smallest = MIN_BYTES): void {
  enabled = on;
  minBytes = smallest;
}

/** Documents each engine has scanned in this thread, and V8 batches stopped by their limit. */
export const scanCounts = { v8: 0, re2: 0, stopped: 0 };

/** The context a guarded batch runs in (its `batch` is the batch), and the script that calls it. */
interface Guard {
  context: { batch: (() => void) | null };
  script: Script;
}
let guard: Guard | null = null;

/** Runs `batch` for at most `ms`; false when the limit stopped it. */
function runWithin(batch: () => void, ms: number): boolean {
  guard ??= { context: createContext({ batch: null }) as Guard['context'], script: new Script('batch()') };
  const { context, script } = guard;
  context.batch = batch;
  try {
    script.runInContext(context, { timeout: ms });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') return false;
    throw error;
  } finally {
    context.batch = null;
  }
}

type Mode = 'try-v8' | 'try-re2' | 'v8' | 're2';

/** One grep's scan over `docs` (see the module comment). */
export class GuardedScan {
  private mode: Mode;
  /** Nanoseconds a byte of the V8 trial batch. */
  private v8Speed = 0;

  constructor(
    private readonly matcher: LineMatcher,
    private readonly docs: readonly { readonly textBytes: number }[],
  ) {
    let total = 0;
    for (const d of docs) total += d.textBytes;
    this.mode = enabled && matcher.hasV8Form && total >= minBytes ? 'try-v8' : 're2';
  }

  /** What the scan settled on, for tests and the benchmarks: 'v8', 're2', or a trial still on. */
  get engine(): Mode {
    return this.mode;
  }

  /**
   * Scans documents from index `from` on with `scanOne` (at least one, one batch at most) and
   * returns the index after the last one scanned. `scanOne` must leave no trace of a document
   * it did not finish: a V8 batch stopped by its limit is interrupted inside it.
   */
  run(from: number, scanOne: (index: number) => void): number {
    if (this.mode === 're2') {
      scanOne(from);
      scanCounts.re2++;
      return from + 1;
    }
    let end = from;
    let bytes = 0;
    while (end < this.docs.length && (end === from || bytes < BATCH_BYTES)) bytes += this.docs[end++].textBytes;
    const v8 = this.mode !== 'try-re2';
    let next = from;
    const batch = (): void => {
      for (; next < end; next++) scanOne(next);
    };
    const started = performance.now();
    this.matcher.useV8(v8);
    let finished = true;
    try {
      if (v8) finished = runWithin(batch, Math.ceil(FIXED_MS + (bytes * LIMIT_NS_PER_BYTE) / 1e6));
      else batch();
    } finally {
      this.matcher.useV8(false);
    }
    if (!finished) {
      scanCounts.stopped++;
      this.mode = 're2';
      return next;
    }
    scanCounts[v8 ? 'v8' : 're2'] += end - from;
    const nsPerByte = ((performance.now() - started) * 1e6) / Math.max(1, bytes);
    if (this.mode === 'try-v8') {
      this.v8Speed = nsPerByte;
      this.mode = 'try-re2';
    } else if (this.mode === 'try-re2') this.mode = this.v8Speed < nsPerByte ? 'v8' : 're2';
    return end;
  }
}
