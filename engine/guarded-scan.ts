/**
 * Runs a grep's line matching over many documents with the faster of two engines, and never
 * lets V8 be what makes it slow.
 *
 * Where the pattern has a V8 form (engine/regex/byte-regex.ts), the documents are scanned in
 * batches: a first of about TRIAL_BYTES with RE2, timed; a second with V8, stopped as soon as it
 * takes longer than RE2 took for as many bytes (TRIAL_MARGIN); if V8 finished it faster, the rest
 * goes to V8 in batches of about BATCH_BYTES, else to RE2 (for a while: below). Every V8 batch
 * runs under a time limit (`vm`'s timeout, which interrupts a regex search in progress): V8
 * backtracks, and a pattern like `(a+)+$`, or `\S+\s+\S+` on a long line without a space, would
 * take it exponential or quadratic time. When the trial's limit is reached, RE2 searches the
 * document in progress and the documents after it. Past the trial a batch may take LIMIT_FACTOR
 * times RE2's time for its bytes; one stopped there leaves its document to RE2 and V8 goes on
 * after it. V8 keeps an account against RE2's pace: each batch adds what RE2 would have taken for
 * its bytes and takes off what V8 took, and once V8 is more than one batch of RE2's time behind,
 * RE2 takes over (until the next round of trials, below): the first megabyte is not always like
 * the others, but one slow batch (a collection of the heap landing in it) does not undo a lead. A
 * search so costs at most about a trial and two batches a round of trials (below) more than RE2
 * alone. For a pattern that is a run of one class (perhaps then one code point of another), the
 * line matcher's path 4 (class-run-finder.ts) is tried first: it never backtracks, so it needs no
 * limit, and its trial takes documents in turn with RE2 (each document to the one that has
 * searched fewer bytes), both timed, until each has searched RUNS_TRIAL_BYTES: two batches one
 * after the other compared different documents, and the first megabytes of a tree are not like the
 * rest (the first Documentation/ files of the Linux tree put path 4 behind RE2 in one batch and
 * 1.5 times ahead in the next). Path 4 takes half RE2's time or less where matches are dense or a
 * class is ASCII alone, but where matches are rare RE2 and V8 skip faster. When it wins, it
 * searches the rest document by document (in `content` mode each document is then read once, not
 * once to find its hits and again to print them); when it loses, V8 has its trial.
 *
 * When every way has lost, RE2 searches RETRY_BYTES, then each way has a trial again, and the
 * wait doubles after each such round (up to RETRY_MOST_BYTES). A trial sees one stretch of the
 * tree: `\([^)]*\)` and `;\s*$` tie on the Linux tree's first Documentation/ files, where RE2
 * is kept, and V8 from the first document takes two thirds of RE2's time over the whole tree.
 * And path 4 is JavaScript: in a read thread's first searches V8 may still be making its code
 * (its compiler threads wait for the cores the searches fill); it lost such a trial at 10-25 ns
 * a byte against RE2's 6-10, and won the next at 1.3-2 against 3-5. A round lost again costs
 * little: V8 is stopped at TRIAL_MARGIN times RE2's time for its batch, and path 4's turns cost
 * the difference of the two speeds. Once V8 is chosen, RE2's speed from the trial is taken as
 * its pace for the rest of the scan; after CHECK_BYTES of V8 (then twice as many after each
 * check), RE2 searches one batch again, timed, and V8 goes on only if it was faster since the
 * last check: `<[^>]+>` won its trial on the Linux tree's first files and then took twice RE2's
 * time for the whole tree, which RE2's old pace never showed. But a `content` grep is many scans
 * (16 path ranges a read thread, or one for each 10 MiB of text), and a pattern V8 backtracks on (`(\w+,\s*){6}`: 22 s with V8 alone over the tree,
 * 2.5 with RE2) lost two rounds in each. So where V8 was stopped before half its trial batch, a
 * scan that follows in the same thread for the same search (within CARRY_MS, no way having won
 * since) begins with RE2 and the wait of the round after. Only then: `\([^)]*\)`, which V8
 * loses by a little on some stretches and wins by a third on others, went from 1.1-1.2 times
 * rg to 1.4-1.6 when every lost round was carried. A way that won is carried too, within one
 * shard: the next scan of the same search over the same shard in the thread (within CARRY_MS)
 * takes it from its first document, with no trial, and V8 still under its limits: over the
 * whole Linux tree, a trial in each range took a fifth more of a read thread's time
 * (reads/grep-split.ts, RANGE_BYTES).
 *
 * A search of less than MIN_BYTES takes RE2 alone: the trial and the limit's timer would cost
 * more than they could save. `VFS_GREP_V8=off` (`setV8Scans`) leaves every search to RE2.
 */

import { createContext, Script } from 'node:vm';
import type { BesideWay, LineMatcher } from './line-matcher.js';

/** Text bytes of each of the two trial batches. */
const TRIAL_BYTES = 1 << 20;
/** Text bytes of each V8 batch once V8 is chosen. */
const BATCH_BYTES = 2 << 20;
/** The V8 trial batch may take this many times RE2's time for as many bytes. */
const TRIAL_MARGIN = 1.1;
/** Past the trial, a V8 batch may take this many times RE2's time for its bytes, plus FIXED_MS. */
const LIMIT_FACTOR = 2;
const FIXED_MS = 2;

/**
 * Text bytes V8 searches once chosen before RE2 is timed again on one batch (`check-re2`), doubled
 * after each check V8 passes: RE2's speed from the trial may not hold further on (see the module
 * comment).
 */
const CHECK_BYTES = 64 * TRIAL_BYTES;

/** Text bytes RE2 searches after every way lost a round of trials, before the next round; doubled after each round, up to RETRY_MOST_BYTES. */
const RETRY_BYTES = 8 * TRIAL_BYTES;
const RETRY_MOST_BYTES = 256 * TRIAL_BYTES;
/**
 * A scan that begins within this many milliseconds of one in the same thread that lost rounds
 * for the same search goes on from its rounds (see the module comment).
 */
const CARRY_MS = 5000;
/**
 * Text bytes each of path 4 and RE2 searches in path 4's trial. Neither backtracks, so a longer
 * trial costs only the difference of their speeds, and one document slowed by the machine (the
 * HTTP thread or the other read thread taking the core) weighs less.
 */
const RUNS_TRIAL_BYTES = 2 * TRIAL_BYTES;
/**
 * Path 4's trial ends early, once each side has searched a quarter of RUNS_TRIAL_BYTES, when one
 * is this many times faster: a `content` grep is split into many ranges, each a scan with its own
 * trial, and a dense class run (`\D{10}`) takes half RE2's time.
 */
const CLEAR_LEAD = 1.5;

/** The smallest search that tries V8. */
const MIN_BYTES = 4 * TRIAL_BYTES;

/**
 * RE2's nanoseconds a byte assumed where no trial measured them (`always`): more than any
 * pattern measured, so that V8's limit stops only a blow-up.
 */
const ASSUMED_RE2_SPEED = 50;

/**
 * `on` (`VFS_GREP_V8=on`, the default): grep tries V8 as the module comment says; `off`: RE2 alone;
 * `always`: every search takes V8 from its first document, whatever its size, without a trial
 * (for the tests, which search small corpora).
 */
export type V8Scans = 'on' | 'off' | 'always';
let policy: V8Scans = 'off';

export function setV8Scans(value: V8Scans): void {
  policy = value;
}

/** The search whose scan in this thread last lost a hopeless round of trials (no way having won for it since), its rounds, and when. */
let lastLost: { key: string; rounds: number; at: number } | null = null;

/**
 * The search whose scan in this thread last chose a way beside RE2, the shard it searched, the
 * way, its account, and when: a scan of the same search over the same shard within CARRY_MS
 * takes that way with no trial (see the module comment).
 */
let lastWon: { key: string; shard: object; way: BesideWay; account: V8Account; at: number } | null = null;

/**
 * The pace a way chosen beside RE2 keeps: RE2's nanoseconds a byte when last timed (the trial,
 * or a check), and for V8 its text bytes and milliseconds since it was chosen or last checked,
 * and the bytes due before the next check.
 */
interface V8Account {
  re2Speed: number;
  bytes: number;
  ms: number;
  checkAfter: number;
}

function newAccount(re2Speed: number): V8Account {
  return { re2Speed, bytes: 0, ms: 0, checkAfter: CHECK_BYTES };
}

/** Documents each engine has scanned in this thread, and V8 batches stopped by their limit. */
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

/**
 * Path 4's trial, in turn with RE2; the V8 trial's two steps; RE2 until the next round of
 * trials; V8 chosen (batches under a limit); RE2 alone; path 4 chosen, which never backtracks and
 * so goes document by document like RE2, with no limit.
 */
type Mode = 'try-runs' | 'try-re2' | 'try-v8' | 'wait' | 'v8' | 're2' | 'runs' | 'check-re2';

/** One grep's scan over `docs` (see the module comment). */
/** Text bytes of `docs` (documents' metadata). */
export function textBytes(docs: readonly { readonly textBytes: number }[]): number {
  let total = 0;
  for (const d of docs) total += d.textBytes;
  return total;
}

export class GuardedScan {
  private mode: Mode;
  /** Nanoseconds a byte RE2 took in its trial batch. */
  private re2Speed = 0;
  /** Milliseconds V8's batches past the trial are ahead of RE2's pace (behind when negative). */
  private lead = 0;
  /** The ways beside RE2 to try (the line matcher's `ways`), and which is on trial or chosen. */
  private ways: BesideWay[] = [];
  private tried = 0;
  /** Path 4's trial: text bytes each side has searched, and its milliseconds. */
  private readonly turns = { runsBytes: 0, runsMs: 0, re2Bytes: 0, re2Ms: 0 };
  /** Rounds of trials every way lost; RE2's text bytes since the last. */
  private rounds = 0;
  private waited = 0;
  /** V8's account since it was chosen (see `V8Account`); shared with the scans it is carried to. */
  private account = newAccount(0);

  constructor(
    private readonly matcher: LineMatcher,
    private readonly docs: readonly { readonly textBytes: number }[],
    /** What the documents are read through (a shard's reader): a way won is carried within one shard only. */
    private readonly shard: object,
  ) {
    // Asking for the V8 form compiles it: not when V8 will not be tried.
    if (policy === 'off' || (policy === 'on' && textBytes(docs) < MIN_BYTES)) this.mode = 're2';
    else {
      this.ways = matcher.ways;
      if (this.ways.length === 0) this.mode = 're2';
      else if (policy === 'always') {
        matcher.takeWay(this.ways[0]);
        this.mode = this.settle(this.ways[0]);
        this.re2Speed = ASSUMED_RE2_SPEED;
      } else {
        const carried = lastLost?.key === matcher.key && performance.now() - lastLost.at < CARRY_MS ? lastLost.rounds : 0;
        const won = lastWon?.key === matcher.key && lastWon.shard === shard && performance.now() - lastWon.at < CARRY_MS ? lastWon : null;
        if (won !== null) {
          matcher.takeWay(won.way);
          matcher.prepareV8();
          this.re2Speed = won.account.re2Speed;
          this.mode = this.settle(won.way, won.account);
        } else if (carried > 0) {
          this.rounds = carried;
          this.mode = 'wait';
        } else this.mode = this.firstTrial();
      }
    }
  }

  /** True while the scan goes by batches (a trial, or V8 chosen); false while RE2 or path 4 goes alone, document by document. */
  get batches(): boolean {
    return this.mode !== 're2' && this.mode !== 'runs' && this.mode !== 'wait';
  }

  /**
   * For a caller that searched document `index` itself while `batches` was false (`content` mode
   * prints as it finds), and for `run`: while the scan waits, RE2's document counts toward the
   * next round of trials, which begins once the round's wait is searched.
   */
  searchedAlone(index: number): void {
    if (this.mode !== 'wait') return;
    scanCounts.re2++;
    this.waited += this.docs[index].textBytes;
    if (this.waited >= Math.min(RETRY_BYTES * 2 ** (this.rounds - 1), RETRY_MOST_BYTES)) this.mode = this.firstTrial();
  }

  /** What the scan settled on, for tests and the benchmarks: 'v8', 'runs', 're2', or a trial still on. */
  get engine(): Mode {
    return this.mode;
  }

  /**
   * Scans documents from index `from` on (at least one, one batch at most) and returns the index
   * after the last one scanned. `find(k)` searches document k and returns what it found; it may
   * be interrupted midway when V8 reaches its limit, so it must change nothing outside itself.
   * `keep(k, found)` takes each finished document's result, in order, outside the time limit.
   */
  run<T>(from: number, find: (index: number) => T, keep: (index: number, found: T) => void): number {
    const mode = this.mode;
    if (!this.batches) {
      keep(from, find(from));
      if (mode === 're2') scanCounts.re2++;
      else if (mode === 'runs') scanCounts.v8++;
      else this.searchedAlone(from);
      return from + 1;
    }
    if (mode === 'try-runs') return this.runInTurn(from, find, keep);
    const most = mode === 'v8' ? BATCH_BYTES : TRIAL_BYTES;
    let end = from;
    let bytes = 0;
    while (end < this.docs.length && (end === from || bytes < most)) bytes += this.docs[end++].textBytes;
    // One push a finished document: an interrupted batch has found exactly `results.length`.
    const results: T[] = [];
    const batch = (): void => {
      for (let k = from + results.length; k < end; k = from + results.length) results.push(find(k));
    };
    const started = performance.now();
    if (mode === 'try-re2' || mode === 'check-re2') {
      batch();
      this.keepAll(from, results, keep);
      scanCounts.re2 += results.length;
      this.re2Speed = ((performance.now() - started) * 1e6) / Math.max(1, bytes);
      if (mode === 'try-re2') this.mode = 'try-v8';
      else this.checked();
      return end;
    }
    const re2Ms = (this.re2Speed * bytes) / 1e6;
    const limit = mode === 'try-v8' ? Math.max(1, Math.ceil(re2Ms * TRIAL_MARGIN)) : Math.ceil(FIXED_MS + re2Ms * LIMIT_FACTOR);
    this.matcher.useV8(true);
    let finished: boolean;
    try {
      finished = runWithin(batch, limit);
    } finally {
      this.matcher.useV8(false);
    }
    const ms = performance.now() - started;
    this.keepAll(from, results, keep);
    scanCounts.v8 += results.length;
    let next = from + results.length;
    if (!finished) scanCounts.stopped++;
    if (mode === 'try-v8') {
      if (finished && ms < re2Ms) this.mode = this.settle(this.ways[this.tried]);
      else this.nextWay(!finished && textBytes(this.docs.slice(from, next)) < bytes / 2);
      return next;
    }
    // Past the trial V8 must keep RE2's pace on the whole (see the module comment). A batch
    // stopped at its limit leaves its document to RE2, and V8 goes on after it.
    this.lead += re2Ms - ms;
    this.account.bytes += textBytes(this.docs.slice(from, next));
    this.account.ms += ms;
    if (!finished && next < end) {
      keep(next, find(next));
      scanCounts.re2++;
      next++;
    }
    if (this.lead < -re2Ms) this.waitForRound();
    else if (this.account.bytes >= this.account.checkAfter) this.mode = 'check-re2';
    return next;
  }

  /**
   * After RE2 was timed again (`check-re2`): V8 goes on if it searched faster since it was chosen
   * or last checked, against RE2's new speed, and the next check waits twice as long; else RE2
   * searches until the next round of trials.
   */
  private checked(): void {
    const account = this.account;
    const v8Speed = (account.ms * 1e6) / Math.max(1, account.bytes);
    account.bytes = 0;
    account.ms = 0;
    this.lead = 0;
    if (v8Speed < this.re2Speed) {
      account.checkAfter *= 2;
      account.re2Speed = this.re2Speed;
      this.mode = 'v8';
    } else this.waitForRound();
  }

  /** Path 4's trial: document `from` searched by path 4 or RE2, whichever has searched fewer bytes (see the module comment). */
  private runInTurn<T>(from: number, find: (index: number) => T, keep: (index: number, found: T) => void): number {
    const t = this.turns;
    const byRuns = t.runsBytes < t.re2Bytes;
    this.matcher.useV8(byRuns);
    const started = performance.now();
    let found: T;
    try {
      found = find(from);
    } finally {
      this.matcher.useV8(false);
    }
    const ms = performance.now() - started;
    keep(from, found);
    const bytes = this.docs[from].textBytes;
    if (byRuns) {
      t.runsBytes += bytes;
      t.runsMs += ms;
      scanCounts.v8++;
    } else {
      t.re2Bytes += bytes;
      t.re2Ms += ms;
      scanCounts.re2++;
    }
    const least = Math.min(t.runsBytes, t.re2Bytes);
    const runsMsAByte = t.runsMs / t.runsBytes;
    const re2MsAByte = t.re2Ms / t.re2Bytes;
    const clear = least >= RUNS_TRIAL_BYTES / 4 && Math.max(runsMsAByte / re2MsAByte, re2MsAByte / runsMsAByte) >= CLEAR_LEAD;
    if (least >= RUNS_TRIAL_BYTES || clear) {
      this.re2Speed = re2MsAByte * 1e6;
      if (runsMsAByte < re2MsAByte) this.mode = this.settle('runs');
      else this.nextWay();
    }
    return from + 1;
  }

  /** The first way's trial (the matcher takes the way), at the start and at each new round. */
  private firstTrial(): Mode {
    this.tried = 0;
    this.matcher.takeWay(this.ways[0]);
    this.matcher.prepareV8();
    Object.assign(this.turns, { runsBytes: 0, runsMs: 0, re2Bytes: 0, re2Ms: 0 });
    return this.ways[0] === 'runs' ? 'try-runs' : 'try-re2';
  }

  /** After a way lost its trial: the next one has its trial on the next batch, or RE2 searches until the next round. */
  private nextWay(hopeless = false): void {
    if (++this.tried < this.ways.length) {
      this.matcher.takeWay(this.ways[this.tried]);
      this.matcher.prepareV8();
      this.mode = 'try-v8';
    } else this.waitForRound(hopeless);
  }

  /**
   * RE2 searches until the next round of trials. A round is `hopeless` when V8, the last way,
   * was stopped before half its trial batch: the thread's next scan of the search goes on from it.
   */
  private waitForRound(hopeless = false): void {
    if (lastWon?.key === this.matcher.key) lastWon = null;
    this.rounds++;
    this.waited = 0;
    this.mode = 'wait';
    if (hopeless) lastLost = { key: this.matcher.key, rounds: this.rounds, at: performance.now() };
  }

  /** The mode in which the scan goes on with `way` (the matcher has taken it): V8 by limited batches, path 4 document by document. */
  private settle(way: BesideWay, account = newAccount(this.re2Speed)): Mode {
    if (lastLost?.key === this.matcher.key) lastLost = null;
    this.account = account;
    lastWon = { key: this.matcher.key, shard: this.shard, way, account, at: performance.now() };
    if (way === 'v8') return 'v8';
    // Path 4 stays on for every text the matcher begins from now on.
    this.matcher.useV8(true);
    return 'runs';
  }

  private keepAll<T>(from: number, results: readonly T[], keep: (index: number, found: T) => void): void {
    for (let i = 0; i < results.length; i++) keep(from + i, results[i]);
  }
}
