/**
 * Runs a grep's line matching over many documents with the fastest of its engines, and never
 * lets V8 be what makes it slow.
 *
 * Where the pattern has a way beside RE2 (engine/line-matcher.ts's `ways`: path 4 for a run of
 * one class, class-run-finder.ts; V8 where the pattern has a V8 form, engine/regex/byte-regex.ts),
 * the scan checks which engine is fastest on the documents it is reading: at a check, the engine
 * in place searches a batch of about CHECK_BYTES, timed, and each other engine then searches the
 * same documents again, stopped as soon as it has taken SWITCH_SHARE of the first one's time;
 * one that finished within that takes over if it wins the next batch's check too (a batch can
 * be one document, unlike those after it), and a batch that took the engine in place more than
 * OUTLIER times its usual pace puts the check off to the next one. The first check comes after
 * RE2 has searched FIRST_CHECK bytes alone (a thread's first search pays for cold pages and
 * compiling); there every other engine is tried, and each later check tries one, in turn. The checks come again while the scan
 * goes on, FIRST_INTERVAL bytes apart, the gap doubled each time a check keeps the engine in place
 * (to MAX_INTERVAL) and set back when one changes it: documents are searched in the order they
 * were written, by path, and the engine that wins on one part of a tree (C sources, say) is not
 * always the one that wins on another (generated register headers where RE2 skips to a rare first
 * byte). A check costs at most about SWITCH_SHARE of a batch for each engine that loses it.
 *
 * V8 searches by batches of about BATCH_BYTES, each under a time limit (`vm`'s timeout, which
 * interrupts a regex search in progress): V8 backtracks, and a pattern like `(a+)+$`, or
 * `\S+\s+\S+` on a long line without a space, would take it exponential or quadratic time. A
 * batch may take LIMIT_FACTOR times RE2's time for its bytes (as last measured), plus FIXED_MS;
 * one stopped there leaves its document to RE2, V8 goes on after it, and the next batch is a
 * check. RE2 and path 4 (which never backtracks) go document by document with no limit; in
 * `content` mode each document is then read once, not once to find its hits and again to print
 * them. A search of less than MIN_BYTES takes RE2 alone: the checks and the limit's timer would
 * cost more than they could save. `VFS_GREP_V8=off` (`setV8Scans`) leaves every search to RE2.
 */

import { createContext, Script } from 'node:vm';
import type { BesideWay, LineMatcher } from './line-matcher.js';

/** Text bytes of a check's batch. */
const CHECK_BYTES = 1 << 20;
/** Text bytes of each V8 batch once V8 is chosen. */
const BATCH_BYTES = 2 << 20;
/** At a check, another engine takes over when it took at most this share of the time of the one in place. */
const SWITCH_SHARE = 0.9;
/** A check is put off to the next batch when the engine in place took more than this many times its usual pace. */
const OUTLIER = 2;
/** Text bytes RE2 searches alone before the first check. */
const FIRST_CHECK = 4 * CHECK_BYTES;
/** Text bytes from one check to the next, at first and at most. */
const FIRST_INTERVAL = 16 << 20;
const MAX_INTERVAL = 32 << 20;
/** A V8 batch may take this many times RE2's time for its bytes, plus FIXED_MS. */
const LIMIT_FACTOR = 2;
const FIXED_MS = 2;

/** The smallest search that tries a way beside RE2. */
const MIN_BYTES = 4 * CHECK_BYTES;

/**
 * RE2's nanoseconds a byte assumed where no check measured them (`always`): more than any
 * pattern measured, so that V8's limit stops only a blow-up.
 */
const ASSUMED_RE2_SPEED = 50;

/**
 * `on` (`VFS_GREP_V8=on`, the default): grep checks the engines as the module comment says; `off`: RE2 alone;
 * `always`: every search takes the first way beside RE2 from its first document, whatever its size, with no check
 * (for the tests, which search small corpora).
 */
export type V8Scans = 'on' | 'off' | 'always';
let policy: V8Scans = 'off';

export function setV8Scans(value: V8Scans): void {
  policy = value;
}

/** Documents each engine has scanned in this thread, and searches by V8 or path 4 stopped at their limit. */
export const scanCounts = { v8: 0, re2: 0, stopped: 0 };

/** The context a guarded batch runs in (its `batch` is the batch), and the script that calls it. */
interface Guard {
  context: { batch: (() => void) | null };
  script: Script;
}
let guard: Guard | null = null;

/** Runs `batch` for at most `ms`; false when the limit (or V8's stack) stopped it. */
export function runWithin(batch: () => void, ms: number): boolean {
  guard ??= { context: createContext({ batch: null }) as Guard['context'], script: new Script('batch()') };
  const { context, script } = guard;
  context.batch = batch;
  try {
    script.runInContext(context, { timeout: ms });
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_SCRIPT_EXECUTION_TIMEOUT') return false;
    // V8's backtracking stack overflowed: RE2 searches again (and throws whatever else it was).
    if (error instanceof RangeError) return false;
    throw error;
  } finally {
    context.batch = null;
  }
}

/** What searches a scan's documents: RE2, V8, or path 4 (a run of one class). */
export type Engine = 're2' | BesideWay;

/** Text bytes of `docs` (documents' metadata). */
export function textBytes(docs: readonly { readonly textBytes: number }[]): number {
  let total = 0;
  for (const d of docs) total += d.textBytes;
  return total;
}

/** One grep's scan over `docs` (see the module comment). */
export class GuardedScan {
  private engine_: Engine = 're2';
  /** The engines a check may choose: RE2 and the matcher's ways beside it. */
  private readonly engines: Engine[] = ['re2'];
  /** Nanoseconds a byte RE2 took when last timed. */
  private re2Speed = ASSUMED_RE2_SPEED;
  /** Text bytes before document `cursor`. */
  private cursor = 0;
  private before = 0;
  /** Text bytes before the document where the next check begins; Infinity when there is none. */
  private checkAt = Number.POSITIVE_INFINITY;
  private interval = FIRST_INTERVAL;
  /** Checks made. */
  private checks = 0;
  /** The engine that won the last check, which takes over only if it wins the next one too. */
  private pending: Engine | null = null;
  /** Nanoseconds a byte the engine in place took in its check batches, a moving average; 0 before the first. */
  private pace = 0;

  constructor(
    private readonly matcher: LineMatcher,
    private readonly docs: readonly { readonly textBytes: number }[],
  ) {
    // Asking for the V8 form compiles it: not when V8 will not be tried.
    if (policy === 'off' || (policy === 'on' && textBytes(docs) < MIN_BYTES)) return;
    const ways = matcher.ways;
    if (ways.length === 0) return;
    if (policy === 'always') {
      this.take(ways[0]);
      return;
    }
    for (const way of ways) {
      matcher.takeWay(way);
      matcher.prepareV8();
    }
    this.engines.push(...ways);
    // RE2 alone first: a thread's first megabytes (cold pages, patterns compiled and code not yet
    // optimised) would favour whatever is timed after them.
    this.checkAt = FIRST_CHECK;
  }

  /** The engine in place: 're2', 'v8' or 'runs' (for tests and the benchmarks). */
  get engine(): Engine {
    return this.engine_;
  }

  /**
   * Whether document `index` should go to `run`: V8 searches by batches, or a check begins
   * there. Otherwise the caller may search it with the matcher as the scan set it (RE2, or path 4).
   */
  batchAt(index: number): boolean {
    return this.engine_ === 'v8' || this.bytesBefore(index) >= this.checkAt;
  }

  /**
   * Scans documents from index `from` on (at least one, one batch at most) and returns the index
   * after the last one scanned. `find(k)` searches document k and returns what it found; it may
   * run more than once for a document, and be interrupted midway when an engine reaches its
   * limit, so it must change nothing outside itself. `keep(k, found)` takes each finished
   * document's result, in order, outside the time limit.
   */
  run<T>(from: number, find: (index: number) => T, keep: (index: number, found: T) => void): number {
    if (this.bytesBefore(from) >= this.checkAt) return this.check(from, find, keep);
    if (this.engine_ !== 'v8') {
      keep(from, find(from));
      if (this.engine_ === 're2') scanCounts.re2++;
      else scanCounts.v8++;
      return from + 1;
    }
    const end = this.batchEnd(from, BATCH_BYTES);
    const results: T[] = [];
    const { finished } = this.search(from, end, find, results, this.v8Limit(from, end));
    this.keepAll(from, results, keep);
    scanCounts.v8 += results.length;
    const next = from + results.length;
    if (finished) return next;
    // Stopped at its limit: RE2 searches the document in progress, and a check comes next.
    scanCounts.stopped++;
    this.checkAt = 0;
    this.interval = FIRST_INTERVAL;
    if (next === end) return next;
    keep(next, find(next));
    scanCounts.re2++;
    return next + 1;
  }

  /** A check over a batch from `from` (see the module comment): the engine in place's results are kept. */
  private check<T>(from: number, find: (index: number) => T, keep: (index: number, found: T) => void): number {
    const inPlace = this.engine_;
    const batchEnd = this.batchEnd(from, CHECK_BYTES);
    const results: T[] = [];
    const first = this.search(from, batchEnd, find, results, inPlace === 'v8' ? this.v8Limit(from, batchEnd) : Number.POSITIVE_INFINITY);
    this.keepAll(from, results, keep);
    if (inPlace === 're2') scanCounts.re2 += results.length;
    else scanCounts.v8 += results.length;
    const end = from + results.length;
    const bytes = this.bytesOf(from, end);
    if (inPlace === 're2' && bytes > 0) this.re2Speed = (first.ms * 1e6) / bytes;
    if (!first.finished) {
      // V8 in place, stopped at its limit: RE2 searches the document in progress (if the timer
      // did not fire just after the last one) and takes over.
      scanCounts.stopped++;
      let after = end;
      if (end < batchEnd) {
        keep(end, find(end));
        scanCounts.re2++;
        after++;
      }
      this.settle('re2', after);
      return after;
    }
    if (bytes === 0) {
      this.checkAt = this.bytesBefore(end);
      return end;
    }
    // A batch that took the engine in place far longer than usual is unlike the others, and
    // trying another engine on it would cost as much again: the check moves to the next batch.
    const speed = (first.ms * 1e6) / bytes;
    const usual = this.pace;
    this.pace = usual === 0 ? speed : 0.7 * usual + 0.3 * speed;
    if (usual > 0 && speed > OUTLIER * usual) {
      this.checkAt = this.bytesBefore(end);
      return end;
    }
    let best: Engine = inPlace;
    let bestMs = first.ms;
    // The first check tries every other engine, later ones one each in turn; after a win, the
    // winner again.
    const others = this.engines.filter((e) => e !== inPlace);
    const tries = this.pending !== null ? [this.pending] : this.checks++ === 0 ? others : [others[this.checks % others.length]];
    for (const other of tries) {
      const limit = bestMs * SWITCH_SHARE;
      const tried = this.search(from, end, find, [], Math.max(1, limit), other);
      if (!tried.finished && other !== 're2') scanCounts.stopped++;
      // The timer stops a search only about when it should: the time decides.
      if (!tried.finished || tried.ms > limit) continue;
      if (other === 're2') this.re2Speed = (tried.ms * 1e6) / bytes;
      best = other;
      bestMs = tried.ms;
    }
    if (best !== inPlace && this.pending === null) {
      // A first win: the winner is checked again on the next batch before it takes over.
      this.pending = best;
      this.checkAt = this.bytesBefore(end);
      return end;
    }
    this.settle(best, end, (bestMs * 1e6) / bytes);
    return end;
  }

  /**
   * Puts `engine` in place after a check that ended before document `after`, and sets the next
   * check; `pace` is what the engine took a byte there, when it is new (0: not measured).
   */
  private settle(engine: Engine, after: number, pace = 0): void {
    if (engine === this.engine_) this.interval = Math.min(2 * this.interval, MAX_INTERVAL);
    else {
      this.interval = FIRST_INTERVAL;
      this.pace = pace;
    }
    this.pending = null;
    this.take(engine);
    this.checkAt = this.bytesBefore(after) + this.interval;
  }

  /**
   * Searches documents [from, end) with `engine` (the one in place by default), pushing each
   * finished document's result on `results`, for at most `limitMs` (none when infinite).
   */
  private search<T>(
    from: number,
    end: number,
    find: (index: number) => T,
    results: T[],
    limitMs: number,
    engine: Engine = this.engine_,
  ): { finished: boolean; ms: number } {
    const batch = (): void => {
      for (let k = from + results.length; k < end; k = from + results.length) results.push(find(k));
    };
    if (engine !== 're2') this.matcher.takeWay(engine);
    this.matcher.useV8(engine !== 're2');
    const started = performance.now();
    let finished = true;
    try {
      if (Number.isFinite(limitMs)) finished = runWithin(batch, Math.ceil(limitMs));
      else batch();
    } finally {
      this.take(this.engine_);
    }
    return { finished, ms: performance.now() - started };
  }

  /** Puts `engine` in place: path 4 stays on for every text the matcher begins; V8 only inside its batches. */
  private take(engine: Engine): void {
    this.engine_ = engine;
    if (engine !== 're2') this.matcher.takeWay(engine);
    this.matcher.useV8(engine === 'runs');
  }

  /** Milliseconds V8 may take for documents [from, end): LIMIT_FACTOR times RE2's last pace, plus FIXED_MS. */
  private v8Limit(from: number, end: number): number {
    return FIXED_MS + (this.re2Speed * this.bytesOf(from, end) * LIMIT_FACTOR) / 1e6;
  }

  /** Text bytes of the documents before `index` (read forward from the last call). */
  private bytesBefore(index: number): number {
    if (index < this.cursor) {
      this.cursor = 0;
      this.before = 0;
    }
    while (this.cursor < index) this.before += this.docs[this.cursor++].textBytes;
    return this.before;
  }

  private bytesOf(from: number, end: number): number {
    let bytes = 0;
    for (let k = from; k < end; k++) bytes += this.docs[k].textBytes;
    return bytes;
  }

  /** The index after a batch of about `most` bytes from `from` (at least one document). */
  private batchEnd(from: number, most: number): number {
    let end = from;
    let bytes = 0;
    while (end < this.docs.length && (end === from || bytes < most)) bytes += this.docs[end++].textBytes;
    return end;
  }

  private keepAll<T>(from: number, results: readonly T[], keep: (index: number, found: T) => void): void {
    for (let i = 0; i < results.length; i++) keep(from + i, results[i]);
  }
}
