/**
 * The extraction pool: runs extract-worker.ts in piscina worker threads so that
 * a hostile upload can neither hang nor exhaust the service.
 *
 * - Each worker's V8 heap is capped (`resourceLimits`); a worker that hits the
 *   cap, crashes or exits is replaced, and its file gets a retryable error.
 * - Each file has a wall-time cap. When it passes, the task's AbortSignal
 *   fires and piscina terminates the thread running it (`Worker.terminate()`,
 *   which stops even a busy synchronous loop), then starts a replacement.
 * - The pool hands out at most `threads` files at a time and queues the rest
 *   itself. A file's clock starts when the worker tells (over a MessagePort
 *   sent with the task) that it has begun the file: neither waiting behind
 *   other files nor a replacement thread's start-up (about half a second with
 *   tsx) is charged to it.
 * - The heap cap does not cover memory outside the V8 heap: a PDF whose
 *   content stream is a deflate bomb (1 MB inflating to gigabytes) grows
 *   ArrayBuffers without limit. A watchdog therefore samples the process's
 *   anonymous resident memory (`RssAnon` in /proc/self/status, which leaves out
 *   file-backed maps such as LMDB shards; plain RSS elsewhere) every 100 ms
 *   while files run, and terminates a file's thread once that memory has grown
 *   by more than `maxRssGrowthMb` since the file started.
 * - Workers get the blob's path, never its bytes, and read the file themselves.
 *
 * Run from source, the threads load tsx through `execArgv` (core/run-mode.ts).
 */
import { readFileSync } from 'node:fs';
import { MessageChannel } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { siblingModule, workerExecArgv } from '../core/run-mode.js';
import type { ExtractResult } from './extract.js';
import type { ExtractTask } from './extract-worker.js';

/** Tuning of an ExtractPool; every field is optional. */
export interface ExtractPoolOptions {
  /** worker threads (default 1) */
  threads?: number;
  /** wall-time cap per file in ms (default 30000) */
  timeoutMs?: number;
  /** V8 old-generation cap per worker in MiB (default 512) */
  maxMemoryMb?: number;
  /**
   * Growth of the process's anonymous resident memory allowed while a file is
   * extracted, in MiB; catches memory outside the V8 heap such as inflated PDF
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

const MEMORY_SAMPLE_MS = 100;
const RSS_ANON = /^RssAnon:\s+(\d+)\s+kB/m;

/** The process's anonymous resident memory in bytes (plain RSS where /proc is missing). */
function anonymousRss(): number {
  try {
    const match = RSS_ANON.exec(readFileSync('/proc/self/status', 'latin1'));
    if (match !== null) return Number(match[1]) * 1024;
  } catch {
    // not Linux: fall through
  }
  return process.memoryUsage.rss();
}

/** Why a running file's signal was aborted. */
type StopReason = { kind: 'timeout' } | { kind: 'no-start' } | { kind: 'memory'; alone: boolean } | { kind: 'closed' };

/** How long a file may wait for a thread to start it, beyond its time cap. */
const WORKER_START_GRACE_MS = 30_000;

/** A file on a thread: its abort switch and the memory level when it started. */
interface Running {
  controller: AbortController;
  rssAtStart: number;
}

function formatSeconds(ms: number): string {
  const s = ms / 1000;
  return Number.isInteger(s) ? String(s) : s.toFixed(1);
}

/** A pool of extraction worker threads with per-file time and memory caps. */
export class ExtractPool {
  readonly #options: Required<ExtractPoolOptions>;
  readonly #piscina: Piscina<ExtractTask, ExtractResult>;
  /** Files waiting for a free thread, first in first out. */
  readonly #waiting: Array<() => void> = [];
  /** The files handed to a thread now. */
  readonly #running = new Set<Running>();
  /** Samples memory while #running is not empty. */
  #watchdog: NodeJS.Timeout | null = null;
  /** Threads taken; a finishing file hands its thread straight to the next waiter. */
  #busy = 0;
  #closed = false;

  constructor(options: ExtractPoolOptions = {}) {
    this.#options = withDefaults(options);
    this.#piscina = new Piscina<ExtractTask, ExtractResult>({
      filename: siblingModule('extract-worker', import.meta.url).href,
      minThreads: this.#options.threads,
      maxThreads: this.#options.threads,
      concurrentTasksPerWorker: 1,
      // Message-port delivery keeps each worker's event loop running between
      // tasks (pdfjs finishes its clean-up asynchronously).
      atomics: 'disabled',
      recordTiming: false,
      execArgv: workerExecArgv(true),
      resourceLimits: { maxOldGenerationSizeMb: this.#options.maxMemoryMb },
    });
    // A worker that dies while idle is reported here rather than to a task;
    // piscina replaces it on demand, so there is nothing more to do, but an
    // unhandled 'error' event would take the whole process down.
    this.#piscina.on('error', () => {});
  }

  /** Extracts the text of the stored original at `blobPath`, never rejecting. */
  async extract(blobPath: string, contentType: string, path: string): Promise<ExtractResult> {
    if (this.#closed) return closedResult();
    if (this.#busy < this.#options.threads) {
      this.#busy++;
    } else {
      await new Promise<void>((resolve) => this.#waiting.push(resolve));
      if (this.#closed) return closedResult();
    }
    const controller = new AbortController();
    // Not counted by the watchdog until the worker starts on it.
    const running: Running = { controller, rssAtStart: Infinity };
    this.#running.add(running);
    this.#watchdog ??= setInterval(() => this.#checkMemory(), MEMORY_SAMPLE_MS).unref();
    // The worker says when it begins the file; the time cap counts from there,
    // so that starting a replacement thread after a kill is not charged to the
    // next file. The backstop ends the wait if no thread ever starts.
    const { port1: started, port2: startedPort } = new MessageChannel();
    let timer = setTimeout(() => controller.abort({ kind: 'no-start' } satisfies StopReason), this.#options.timeoutMs + WORKER_START_GRACE_MS);
    started.once('message', () => {
      running.rssAtStart = anonymousRss();
      clearTimeout(timer);
      timer = setTimeout(() => controller.abort({ kind: 'timeout' } satisfies StopReason), this.#options.timeoutMs);
    });
    try {
      const task: ExtractTask = { blobPath, contentType, path, started: startedPort };
      const result = await this.#piscina.run(task, { signal: controller.signal, transferList: [startedPort] });
      // Structured cloning turns the worker's Buffer into a plain Uint8Array.
      if (result.ok) return { ...result, text: Buffer.from(result.text.buffer, result.text.byteOffset, result.text.byteLength) };
      return result;
    } catch (err) {
      const stop = controller.signal.aborted ? (controller.signal.reason as StopReason) : null;
      // A cap is tried once more (capped): a busy machine or another file's memory may have
      // pushed an innocent file over it, while a file built to hang or exhaust the extractor
      // then ends in error after two runs.
      if (stop?.kind === 'timeout') {
        return { ok: false, error: `extraction exceeded the ${formatSeconds(this.#options.timeoutMs)} s time limit`, retryable: true, capped: true };
      }
      if (stop?.kind === 'memory') {
        return {
          ok: false,
          error: `extraction exceeded the memory limit (process memory grew by more than ${this.#options.maxRssGrowthMb} MiB)`,
          retryable: true,
          capped: true,
        };
      }
      if ((err as NodeJS.ErrnoException | null)?.code === 'ERR_WORKER_OUT_OF_MEMORY') {
        return {
          ok: false,
          error: `extraction exceeded the memory limit (a worker's heap is capped at ${this.#options.maxMemoryMb} MiB)`,
          retryable: true,
          capped: true,
        };
      }
      if (stop?.kind === 'no-start') {
        return { ok: false, error: `no extraction worker started within ${formatSeconds(WORKER_START_GRACE_MS)} s`, retryable: true };
      }
      if (stop?.kind === 'closed' || this.#closed) return closedResult();
      const message = err instanceof Error ? err.message : String(err);
      return { ok: false, error: `extraction worker crashed: ${message}`, retryable: true };
    } finally {
      clearTimeout(timer);
      started.close();
      this.#running.delete(running);
      if (this.#running.size === 0 && this.#watchdog !== null) {
        clearInterval(this.#watchdog);
        this.#watchdog = null;
      }
      const next = this.#waiting.shift();
      if (next !== undefined) next();
      else this.#busy--;
    }
  }

  /** Terminates the file(s) whose start preceded more memory growth than allowed. */
  #checkMemory(): void {
    const now = anonymousRss();
    const limit = this.#options.maxRssGrowthMb * 1024 * 1024;
    let started = 0;
    for (const r of this.#running) if (r.rssAtStart !== Infinity) started++;
    const alone = started === 1;
    for (const r of this.#running) {
      if (now - r.rssAtStart > limit && !r.controller.signal.aborted) {
        r.controller.abort({ kind: 'memory', alone } satisfies StopReason);
      }
    }
  }

  /** Stops the pool: queued and running files end with a retryable error, and the threads are terminated. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const wake of this.#waiting.splice(0)) wake();
    for (const r of this.#running) r.controller.abort({ kind: 'closed' } satisfies StopReason);
    await this.#piscina.destroy();
  }
}

function closedResult(): ExtractResult {
  return { ok: false, error: 'extraction pool is shut down', retryable: true };
}
