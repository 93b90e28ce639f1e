/**
 * The extraction pool: runs process-main.ts in child processes so that a
 * hostile upload can neither hang, exhaust nor crash the service.
 *
 * - Each process's V8 heap is capped (`--max-old-space-size`). V8 aborts a
 *   process that meets its cap; in a worker thread that abort could take the
 *   whole service with it (Node.js issue 47224), in a process of its own it
 *   ends only that process, and writes no core dump (`prlimit --core=0`). A
 *   process that dies is replaced, and its file gets a retryable error; one
 *   that dies before it began its file (not the file's doing) has the file
 *   tried once more on a new one.
 * - Each file has a wall-time cap. When it passes, the process running it is
 *   killed (which stops even a busy synchronous loop) and replaced.
 * - The heap cap does not cover memory outside the V8 heap: a PDF whose
 *   content stream is a deflate bomb (1 MB inflating to gigabytes) grows
 *   ArrayBuffers without limit. A watchdog therefore samples each busy
 *   process's anonymous memory (`RssAnon` and `VmSwap` in /proc/<pid>/status)
 *   every 100 ms and kills a process once it has grown by more than
 *   `maxRssGrowthMb` since its file started. Should memory run out anyway,
 *   the kernel's OOM killer picks an extraction process first
 *   (`oom_score_adj` 1000).
 * - The pool runs at most `threads` files at a time and queues the rest
 *   itself. A file's clock starts when its process tells that it has begun the
 *   file: neither waiting behind other files nor a replacement process's
 *   start-up is charged to it. Processes start on first need and stay.
 * - A file of at most INLINE_TEXT_BYTES that is plainly text (text.ts,
 *   `plainText`: no zip, no PDF header, no NUL) is read and checked in the
 *   calling thread instead: nothing in it can hang or grow, and the round trip
 *   to a process cost more than the file (docs/benchmarks.md, "Ingest").
 *   Anything else, and any such file that turns out not to be text, goes to
 *   a process as below, so the result is the same either way.
 * - Processes get the blob's path, never its bytes, and read the file
 *   themselves; they are handed no environment (though, running as the same
 *   user, they could still read the service's in /proc), and the kernel kills them when
 *   the thread that started them ends (`setpriv --pdeathsig`; without it, one
 *   whose parent is gone exits once it is idle).
 *
 * Run from source, the processes load tsx through `execArgv` (core/run-mode.ts).
 */
import { type ChildProcess, fork } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { readFile } from 'node:fs/promises';
import { childExecArgv, siblingModule } from '../../core/run-mode.js';
import { plainText } from './text.js';
import type { ExtractReply, ExtractResult, ExtractTask } from './types.js';

/** Tuning of an ExtractPool; every field is optional. */
export interface ExtractPoolOptions {
  /** processes, so files extracted at once (default 1) */
  threads?: number;
  /** wall-time cap per file in ms (default 30000) */
  timeoutMs?: number;
  /** V8 old-generation cap per process in MiB (default 512) */
  maxMemoryMb?: number;
  /**
   * Growth of a process's anonymous resident memory allowed while it extracts
   * a file, in MiB; catches memory outside the V8 heap such as inflated PDF
   * streams (default 4 × maxMemoryMb)
   */
  maxRssGrowthMb?: number;
}

function withDefaults(options: ExtractPoolOptions): Required<ExtractPoolOptions> {
  const o = { threads: 1, timeoutMs: 30_000, maxMemoryMb: 512, maxRssGrowthMb: 0 };
  if (options.threads !== undefined) o.threads = options.threads;
  if (options.timeoutMs !== undefined) o.timeoutMs = options.timeoutMs;
  if (options.maxMemoryMb !== undefined) o.maxMemoryMb = options.maxMemoryMb;
  o.maxRssGrowthMb = options.maxRssGrowthMb ?? 4 * o.maxMemoryMb;
  if (!Number.isInteger(o.threads) || o.threads < 1) throw new RangeError(`threads must be a positive integer, got ${o.threads}`);
  if (!(o.timeoutMs > 0)) throw new RangeError(`timeoutMs must be positive, got ${o.timeoutMs}`);
  if (!(o.maxMemoryMb >= 16)) throw new RangeError(`maxMemoryMb must be at least 16, got ${o.maxMemoryMb}`);
  if (!(o.maxRssGrowthMb > 0)) throw new RangeError(`maxRssGrowthMb must be positive, got ${o.maxRssGrowthMb}`);
  return o;
}

/** Files up to this size that are plainly text are read in the calling thread (see above). */
export const INLINE_TEXT_BYTES = 256 * 1024;

/** The text of bytes small enough to read in the calling thread and plainly text, or null: they go to a process. */
export function inlineText(bytes: Buffer): ExtractResult | null {
  return bytes.length <= INLINE_TEXT_BYTES ? plainText(bytes) : null;
}
const MEMORY_SAMPLE_MS = 100;
const RSS_ANON = /^RssAnon:\s+(\d+)\s+kB/m;
const VM_SWAP = /^VmSwap:\s+(\d+)\s+kB/m;
/** How long a file may wait for its process to start it, beyond its time cap. */
const PROCESS_START_GRACE_MS = 30_000;
/** The end of a process's standard error kept, to tell why it died. */
const STDERR_KEPT = 4096;
/** What V8 prints when a heap meets its cap ("Reached heap limit", "JavaScript heap out of memory"). */
const HEAP_LIMIT = /heap limit|heap out of memory/i;

/**
 * util-linux's prlimit and setpriv (in every Debian), or null where either is missing: the
 * process runs as `prlimit --core=0 setpriv --pdeathsig KILL node …`, each exec'ing the next,
 * so that V8's abort at the heap cap writes no core dump (of up to the heap's size, at each try of
 * a hostile file) and the kernel kills the process when the thread that started it ends.
 */
const WRAPPERS = existsSync('/usr/bin/prlimit') && existsSync('/usr/bin/setpriv') ? ['/usr/bin/prlimit', '/usr/bin/setpriv'] : null;

/** A process's anonymous memory in bytes, resident or swapped out; NaN where /proc cannot tell (the watchdog then stays out). */
function anonymousMemory(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'latin1');
    const resident = RSS_ANON.exec(status);
    if (resident !== null) return (Number(resident[1]) + Number(VM_SWAP.exec(status)?.[1] ?? 0)) * 1024;
  } catch {
    // not Linux, or the process just ended
  }
  return NaN;
}

function formatSeconds(ms: number): string {
  const s = ms / 1000;
  return Number.isInteger(s) ? String(s) : s.toFixed(1);
}

/** A log line: what happened, and what explains it. */
type PoolLog = (message: string, detail: unknown) => void;

/** Why a process was killed while it had a file. */
type StopReason = 'timeout' | 'no-start' | 'memory' | 'closed';

/**
 * How a file's run ends: its result, and whether the process died before it began the file (the
 * file cannot have caused that: the pool tries it once more on a new process).
 */
type Settle = (result: ExtractResult, beforeStart: boolean) => void;

/** The file a process has now: how to settle it, and the memory level when it started. */
interface Job {
  settle: Settle;
  timer: NodeJS.Timeout;
  rssAtStart: number;
  stop: StopReason | null;
}

/** One extraction process, started on first need, its file if any, and the tail of its standard error. */
class ExtractProcess {
  readonly child: ChildProcess;
  job: Job | null = null;
  exited = false;
  private stderr = '';

  constructor(
    private readonly options: Required<ExtractPoolOptions>,
    private readonly log: PoolLog,
    /** Called once the process has exited (and its file, if any, is settled). */
    onExit: (gone: ExtractProcess) => void,
  ) {
    const nodeArgs = [...childExecArgv(), `--max-old-space-size=${options.maxMemoryMb}`];
    this.child = fork(fileURLToPath(siblingModule('process-main', import.meta.url)), [], {
      ...(WRAPPERS === null
        ? { execArgv: nodeArgs }
        : { execPath: WRAPPERS[0], execArgv: ['--core=0', WRAPPERS[1], '--pdeathsig', 'KILL', process.execPath, ...nodeArgs] }),
      env: {},
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'pipe', 'ipc'],
    });
    // A process that cannot be started (or signalled) reports it here; 'close' follows or has come.
    this.child.on('error', () => {});
    this.child.on('message', (reply: ExtractReply) => this.replied(reply));
    // Without stdio when the start failed (no file descriptors left, for one).
    this.child.stderr?.setEncoding('utf8');
    this.child.stderr?.on('data', (chunk: string) => (this.stderr = (this.stderr + chunk).slice(-STDERR_KEPT)));
    // Should memory run out, the kernel's OOM killer takes this process before the service.
    if (this.child.pid !== undefined) {
      try {
        writeFileSync(`/proc/${this.child.pid}/oom_score_adj`, '1000');
      } catch {
        // not Linux, or already gone
      }
    }
    // 'close', not 'exit': only then has all of its standard error (V8's last words) been read.
    this.child.on('close', (code, signal) => {
      this.exited = true;
      const job = this.job;
      this.job = null;
      if (job !== null) {
        clearTimeout(job.timer);
        job.settle(this.deathResult(job.stop, code, signal), job.stop === null && Number.isNaN(job.rssAtStart));
      }
      onExit(this);
    });
  }

  /** Whether the process can take a file (it may have died before its 'close' was handled). */
  get alive(): boolean {
    return !this.exited && this.child.connected && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Hands the process a file; `settle` is called once with its result. */
  run(task: ExtractTask, settle: Settle): void {
    const job: Job = { settle, timer: setTimeout(() => this.kill('no-start'), this.options.timeoutMs + PROCESS_START_GRACE_MS), rssAtStart: NaN, stop: null };
    this.job = job;
    this.child.send(task, (error) => {
      // The process is gone or going: its 'close' settles the file as not begun.
      if (error !== null && this.job === job) this.child.kill('SIGKILL');
    });
  }

  /** Kills the process for `reason`; its file is settled when it has exited. */
  kill(reason: StopReason): void {
    if (this.job !== null && this.job.stop === null) this.job.stop = reason;
    this.child.kill('SIGKILL');
  }

  /** Kills the process if it has grown past the cap since its file started. */
  checkMemory(): void {
    const job = this.job;
    if (job === null || job.stop !== null || Number.isNaN(job.rssAtStart)) return;
    if (anonymousMemory(this.child.pid!) - job.rssAtStart > this.options.maxRssGrowthMb * 1024 * 1024) this.kill('memory');
  }

  private replied(reply: ExtractReply): void {
    const job = this.job;
    if (job === null || job.stop !== null) return;
    if (reply.started) {
      job.rssAtStart = anonymousMemory(this.child.pid!);
      clearTimeout(job.timer);
      job.timer = setTimeout(() => this.kill('timeout'), this.options.timeoutMs);
      return;
    }
    clearTimeout(job.timer);
    this.job = null;
    const result = reply.result;
    // The advanced serialization delivers the process's Buffer as a plain Uint8Array.
    job.settle(result.ok ? { ...result, text: Buffer.from(result.text.buffer, result.text.byteOffset, result.text.byteLength) } : result, false);
  }

  /** The result of a file whose process died. A cap is tried once more (`capped`): a busy machine may have pushed an innocent file over it. */
  private deathResult(stop: StopReason | null, code: number | null, signal: NodeJS.Signals | null): ExtractResult {
    const { timeoutMs, maxMemoryMb, maxRssGrowthMb } = this.options;
    if (stop === 'timeout') return { ok: false, error: `extraction exceeded the ${formatSeconds(timeoutMs)} s time limit`, retryable: true, capped: true };
    if (stop === 'memory') {
      return { ok: false, error: `extraction exceeded the memory limit (its process grew by more than ${maxRssGrowthMb} MiB)`, retryable: true, capped: true };
    }
    if (stop === 'no-start') {
      return { ok: false, error: `no extraction process began the file within ${formatSeconds(timeoutMs + PROCESS_START_GRACE_MS)} s`, retryable: true };
    }
    if (stop === 'closed') return closedResult();
    if (HEAP_LIMIT.test(this.stderr)) {
      return { ok: false, error: `extraction exceeded the memory limit (its process's heap is capped at ${maxMemoryMb} MiB)`, retryable: true, capped: true };
    }
    const crashed = `extraction process crashed (${signal ?? `exit code ${code}`})`;
    // Its last words, for the operator (the file's error names only the signal or code).
    this.log(`an ${crashed}`, this.stderr.trim() === '' ? 'nothing on its standard error' : this.stderr.trim().slice(-1000));
    return { ok: false, error: crashed, retryable: true };
  }
}

/** A pool of extraction processes with per-file time and memory caps. */
export class ExtractPool {
  readonly #options: Required<ExtractPoolOptions>;
  readonly #log: PoolLog;
  /** Processes without a file, ready for the next. */
  readonly #idle: ExtractProcess[] = [];
  /** Every live process. */
  readonly #processes = new Set<ExtractProcess>();
  /** Files waiting for a free slot, first in first out. */
  readonly #waiting: Array<() => void> = [];
  /** Samples memory while a file runs. */
  #watchdog: NodeJS.Timeout | null = null;
  /** Slots taken; a finishing file hands its slot straight to the next waiter. */
  #busy = 0;
  #closed = false;

  /** `log` hears of each process that crashed, with the end of its standard error. */
  constructor(options: ExtractPoolOptions = {}, log: PoolLog = () => {}) {
    this.#options = withDefaults(options);
    this.#log = log;
  }

  /** Extracts the text of the stored original at `blobPath` (`sizeBytes` long, when known), never rejecting. */
  async extract(blobPath: string, contentType: string, path: string, sizeBytes = Number.POSITIVE_INFINITY): Promise<ExtractResult> {
    if (this.#closed) return closedResult();
    if (sizeBytes <= INLINE_TEXT_BYTES) {
      // Unreadable here: the process reports why.
      const bytes = await readFile(blobPath).catch(() => null);
      const text = bytes === null ? null : inlineText(bytes);
      if (text !== null) return text;
    }
    if (this.#busy < this.#options.threads) {
      this.#busy++;
    } else {
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
      if (this.#closed) return closedResult();
    }
    this.#watchdog ??= setInterval(() => {
      for (const p of this.#processes) p.checkMemory();
    }, MEMORY_SAMPLE_MS).unref();
    try {
      for (let attempt = 1; ; attempt++) {
        const worker = this.#takeIdle() ?? this.#start();
        const { result, beforeStart } = await new Promise<{ result: ExtractResult; beforeStart: boolean }>((resolve) =>
          worker.run({ blobPath, contentType, path }, (result, beforeStart) => resolve({ result, beforeStart })),
        );
        if (!worker.exited && !this.#closed) this.#idle.push(worker);
        if (!beforeStart || attempt === 2 || this.#closed) return this.#closed && beforeStart ? closedResult() : result;
      }
    } finally {
      const next = this.#waiting.shift();
      if (next !== undefined) next();
      else {
        this.#busy--;
        if (this.#busy === 0 && this.#watchdog !== null) {
          clearInterval(this.#watchdog);
          this.#watchdog = null;
        }
      }
    }
  }

  /** An idle process that is still alive, if any. */
  #takeIdle(): ExtractProcess | undefined {
    for (let worker = this.#idle.pop(); worker !== undefined; worker = this.#idle.pop()) if (worker.alive) return worker;
    return undefined;
  }

  #start(): ExtractProcess {
    const worker = new ExtractProcess(this.#options, this.#log, (gone) => {
      this.#processes.delete(gone);
      const at = this.#idle.indexOf(gone);
      if (at !== -1) this.#idle.splice(at, 1);
    });
    this.#processes.add(worker);
    return worker;
  }

  /** Stops the pool: queued and running files end with a retryable error, and the processes are killed. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const wake of this.#waiting.splice(0)) wake();
    const exits = [...this.#processes].map((p) => new Promise((resolve) => (p.exited ? resolve(null) : p.child.once('close', resolve))));
    for (const p of this.#processes) p.kill('closed');
    this.#idle.length = 0;
    await Promise.all(exits);
  }
}

function closedResult(): ExtractResult {
  return { ok: false, error: 'extraction pool is shut down', retryable: true };
}
