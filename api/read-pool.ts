/**
 * The read pool: piscina threads running the read tools (read-worker.ts).
 * Each call gets a MessagePort for its output and a shared control array for
 * flow control and cancellation, so a large output streams with bounded
 * memory and stops when the client goes away.
 */
import { BroadcastChannel, MessageChannel, type MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { VfsError } from '../core/errors.js';
import { siblingModule, workerExecArgv } from '../core/run-mode.js';
import {
  cat,
  closeShardReader,
  find,
  type GrepContentSummary,
  grepContentFooter,
  type GrepRequest,
  type GrepSplit,
  ls,
  openShardReader,
  ShardReader,
  type ToolSummary,
} from '../engine/index.js';
import { CANCELLED, IN_FLIGHT, type ReadMessage, type ReadTask, SHARD_DROPS, THREAD_LOADED } from './read-worker.js';

/** How a read ended. */
export type ReadOutcome = { ok: true; resultCount: number } | { ok: false; status: number; message: string } | { ok: false; status: 0; message: 'cancelled' };

/** A read in progress. */
export interface ReadCall {
  /** Settles when the tool has finished (its last chunk was delivered before this). */
  outcome: Promise<ReadOutcome>;
  /** Stops the tool (client gone). */
  cancel(): void;
}

/**
 * `ls` and `cat` run on the calling thread. Their work is bounded and small
 * (one directory's entries; at most 2,000 lines or 256 KiB of one file, read
 * through stored line offsets), smaller than handing a task to a thread and
 * its output back: measured with bench/read-http.ts, the hop cost more than
 * the tool. So does `find` in a shard of at most INLINE_FIND_DOCS files (it
 * tests every path under its directory, about 0.3 µs each).
 */
const INLINE_TOOLS = { ls, cat, find } as const;

/** `find` runs on the calling thread in shards with at most this many files. */
const INLINE_FIND_DOCS = 5000;

/** The thread's reader of a shard, renewed to the latest commit. */
function currentReader(shardDir: string): ShardReader {
  const reader = openShardReader(shardDir);
  // lmdb-js renews its cached read transaction lazily: begin from the latest commit.
  reader.shard.env.resetReadTxn();
  return reader;
}

/** Whether `find` over this shard is small enough to run on the calling thread. */
function smallShard(reader: ShardReader): boolean {
  // A catalog's size is recent enough to decide by, and costs no snapshot.
  const cataloged = reader.catalogedDocs;
  if (cataloged !== null) return cataloged <= INLINE_FIND_DOCS;
  const snapshot = reader.snapshot();
  try {
    return snapshot.state().liveDocs <= INLINE_FIND_DOCS;
  } finally {
    snapshot.done();
  }
}

/** Runs a tool on the calling thread, delivering its chunks before the outcome settles. */
function runInline(tool: 'ls' | 'cat' | 'find', reader: ShardReader, request: unknown, sink: ChunkSink): ReadCall {
  let outcome: ReadOutcome;
  try {
    const output = INLINE_TOOLS[tool](reader, request as never);
    let step = output.next();
    for (; step.done !== true; step = output.next()) if (step.value.length > 0) sink(step.value, () => {});
    outcome = { ok: true, resultCount: step.value.resultCount };
  } catch (error) {
    outcome = error instanceof VfsError ? { ok: false, status: error.status, message: error.message } : { ok: false, status: 500, message: String(error) };
  }
  return { outcome: Promise.resolve(outcome), cancel: () => {} };
}

/**
 * Whether a grep is split across threads: the sorted modes must see every
 * match anyway, and so must content without `head_limit`. A content search
 * with `head_limit` or `offset` runs whole in one thread, which stops as soon
 * as it has enough lines (and counts entries across all files).
 */
function splitPays(request: GrepRequest): boolean {
  if ((request.outputMode ?? 'files_with_matches') !== 'content') return true;
  return request.headLimit === undefined && (request.offset ?? 0) === 0;
}

/** Longest `close` waits for a starting thread to load its modules. */
const LOAD_WAIT_MS = 10_000;

/** Put between two content shares' output when context lines are on. */
const SEPARATOR = Buffer.from('--\n');

/** How one task ended: its generator's return value, or a failure. */
type TaskOutcome = { ok: true; result: unknown } | { ok: false; status: number; message: string };

/** One task in progress. */
interface TaskCall {
  outcome: Promise<TaskOutcome>;
  cancel(): void;
}

/** What a task may carry besides its request (read-worker.ts). */
interface TaskExtras {
  /** The lead of a split grep: receives the split. */
  onSplit?: (split: GrepSplit) => void;
  /** `grepShare`: the port its counts go to. */
  peer?: MessagePort;
  /** `grepMerge`: the ports the shares' counts arrive on. */
  peers?: MessagePort[];
}

/** Receives a chunk; calls `release` once the chunk no longer occupies memory (written to the socket). */
export type ChunkSink = (data: Uint8Array, release: () => void) => void;

/** Pool of read threads. */
export class ReadPool {
  private readonly piscina: Piscina<ReadTask, void>;
  private readonly drops = new BroadcastChannel(SHARD_DROPS);
  /** The threadIds of the read threads (of every pool in the process) whose modules have loaded. */
  private readonly loaded = new Set<number>();
  private readonly loadedChannel = new BroadcastChannel(THREAD_LOADED);
  /** Tasks handed to the threads that have not finished (running or queued). */
  private running = 0;

  constructor(
    private readonly threads: number,
    /** A grep whose candidates hold fewer text bytes is searched by one thread (Config.grepSplitMinBytes). */
    private readonly splitMinBytes: number,
  ) {
    // The calling (HTTP) thread catalogs only shards it may scan inline: building the catalog of
    // a larger one would hold every other request for its duration. Read threads catalog any.
    ShardReader.largestCatalog = INLINE_FIND_DOCS;
    this.drops.unref();
    this.loadedChannel.onmessage = (event) => this.loaded.add((event as { data: number }).data);
    this.loadedChannel.unref();
    this.piscina = new Piscina<ReadTask, void>({
      filename: siblingModule('read-worker', import.meta.url).href,
      minThreads: threads,
      maxThreads: threads,
      // Tasks mostly wait on nothing: each thread serves one tool call at a time.
      concurrentTasksPerWorker: 1,
      // An idle thread waits for tasks without blocking its event loop, so that it receives the
      // shard drops (read-worker.ts) while no task comes.
      atomics: 'async',
      execArgv: workerExecArgv(true),
      recordTiming: false,
    });
  }

  /** Runs a tool; chunks go to `sink` in order, then `outcome` settles. */
  run(tool: ReadTask['tool'], shardDir: string, request: unknown, sink: ChunkSink): ReadCall {
    if (tool === 'ls' || tool === 'cat' || tool === 'find') {
      let reader: ShardReader;
      try {
        reader = currentReader(shardDir);
      } catch (error) {
        return { outcome: Promise.resolve({ ok: false, status: 500, message: String(error) }), cancel: () => {} };
      }
      if (tool !== 'find' || smallShard(reader)) return runInline(tool, reader, request, sink);
    }
    // A split pays only on threads that would otherwise wait: with every thread busy, its
    // further shares queue behind other calls and its hops and merge are pure cost.
    const idle = this.threads - this.running;
    if (tool === 'grep' && idle > 1 && splitPays(request as GrepRequest)) {
      const grep = request as GrepRequest;
      return (grep.outputMode ?? 'files_with_matches') === 'content' ? this.parallelContent(shardDir, grep, sink, idle) : this.parallelCounts(shardDir, grep, sink, idle);
    }
    const call = this.task(tool, shardDir, request, sink);
    return {
      outcome: call.outcome.then((o) => (o.ok ? { ok: true, resultCount: (o.result as ToolSummary).resultCount } : o)),
      cancel: call.cancel,
    };
  }

  /**
   * Starts a grep split into shares (engine/tool-grep.ts): a lead share finds
   * the candidates and reports the split, then each further share starts
   * with the lead's candidates. `shares` resolves to the tasks in output
   * order; `cancel` stops every task started and starts no more.
   */
  private split(
    tool: 'grep' | 'grepShare',
    shardDir: string,
    request: GrepRequest,
    sinkFor: (share: number) => ChunkSink,
    count: number,
  ): { shares: Promise<TaskCall[]>; cancel(): void; counts: MessagePort[] } {
    let cancelled = false;
    let onSplit!: (split: GrepSplit) => void;
    const reported = new Promise<GrepSplit>((resolve) => (onSplit = resolve));
    // `grepShare`: each share sends its counts over a port of its own; these are the other ends.
    const counts: MessagePort[] = [];
    const peer = (): MessagePort | undefined => {
      if (tool !== 'grepShare') return undefined;
      const channel = new MessageChannel();
      counts.push(channel.port1);
      return channel.port2;
    };
    const lead = this.task(tool, shardDir, { ...request, lead: { count, minBytes: this.splitMinBytes } }, sinkFor(0), { onSplit, peer: peer() });
    // The tasks started, in output order: what `shares` resolves to and what `cancel` stops.
    const calls: TaskCall[] = [lead];
    const shares = (async (): Promise<TaskCall[]> => {
      // The lead reports its split before its first chunk, or fails without one.
      const split = await Promise.race([reported, lead.outcome.then(() => null)]);
      for (const [k, share] of (split?.shares ?? []).entries()) {
        if (cancelled) break;
        calls.push(this.task(tool, shardDir, { ...request, ...share }, sinkFor(k + 1), { peer: peer() }));
      }
      return calls;
    })();
    return {
      shares,
      counts,
      cancel: () => {
        cancelled = true;
        calls.forEach((c) => c.cancel());
      },
    };
  }

  /**
   * A sorted-mode grep split into hash classes of paths. Each share sends its per-file counts to
   * a port of its own; once all have ended, a `grepMerge` task merges, sorts and prints them
   * (read-worker.ts), so the HTTP thread only forwards text. A lead that keeps the whole search
   * prints the answer itself.
   */
  private parallelCounts(shardDir: string, request: GrepRequest, sink: ChunkSink, count: number): ReadCall {
    // Only a lead that keeps the whole search prints; the other shares yield no text.
    const split = this.split('grepShare', shardDir, request, () => sink, count);
    let merge: TaskCall | null = null;
    let cancelled = false;
    const outcome = (async (): Promise<ReadOutcome> => {
      try {
        const outcomes = (await split.shares).map((s) => s.outcome);
        // A share that fails makes the others' work useless: stop them.
        for (const o of outcomes) void o.then((r) => r.ok || split.cancel());
        const results = await Promise.all(outcomes);
        // The cause, rather than the cancellations it led to.
        const failed = results.find((r) => !r.ok && r.status !== 0) ?? results.find((r) => !r.ok);
        if (failed !== undefined && !failed.ok) return failed;
        // A lead that kept the whole search has printed the answer.
        const printed = (results[0] as { ok: true; result: ToolSummary | null }).result;
        if (printed !== null) return { ok: true, resultCount: printed.resultCount };
        if (cancelled) return { ok: false, status: 0, message: 'cancelled' };
        merge = this.task('grepMerge', shardDir, request, sink, { peers: split.counts.splice(0) });
        const merged = await merge.outcome;
        return merged.ok ? { ok: true, resultCount: (merged.result as ToolSummary).resultCount } : merged;
      } finally {
        // Ports not handed to a merge (a share failed, or the call was cancelled).
        for (const port of split.counts) port.close();
      }
    })();
    return {
      outcome,
      cancel: () => {
        cancelled = true;
        split.cancel();
        merge?.cancel();
      },
    };
  }

  /**
   * A content-mode grep split into path ranges: the lead streams its range to
   * the client at once; each further share waits with its first chunks
   * queued (its worker blocks once its flow-control window is full) until
   * those before it have ended.
   */
  private parallelContent(shardDir: string, request: GrepRequest, sink: ChunkSink, count: number): ReadCall {
    const context = (request.before ?? request.context ?? 0) > 0 || (request.after ?? request.context ?? 0) > 0;
    let current = 0; // the share whose output goes to the client
    let printed = -1; // the last share that sent the client something
    const queued: Array<Array<[Uint8Array, () => void]>> = [];
    const forward = (i: number, data: Uint8Array, release: () => void): void => {
      // `--` separates the last group of one share from the first of the next, as within one.
      if (printed !== i && printed !== -1 && context) sink(SEPARATOR, () => {});
      printed = i;
      sink(data, release);
    };
    const split = this.split('grep', shardDir, request, (i) => {
      queued[i] = [];
      return (data, release) => {
        if (i === current) forward(i, data, release);
        else queued[i].push([data, release]);
      };
    }, count);
    const outcome = (async (): Promise<ReadOutcome> => {
      const shares = await split.shares;
      const summaries: GrepContentSummary[] = [];
      for (const [i, share] of shares.entries()) {
        // Share i's output follows once the shares before it have ended.
        current = i;
        for (const [data, release] of queued[i].splice(0)) forward(i, data, release);
        const result = await share.outcome;
        if (!result.ok) {
          shares.forEach((s) => s.cancel());
          return result;
        }
        summaries.push(result.result as GrepContentSummary);
      }
      const footer = grepContentFooter(summaries);
      if (footer !== null) sink(Buffer.from(footer), () => {});
      return { ok: true, resultCount: summaries.reduce((n, s) => n + s.resultCount, 0) };
    })();
    return { outcome, cancel: split.cancel };
  }

  /** Runs one task on a thread; its port delivers chunks, then its result. */
  private task(tool: ReadTask['tool'], shardDir: string, request: unknown, sink: ChunkSink, extras: TaskExtras = {}): TaskCall {
    const { onSplit, peer, peers } = extras;
    const { port1, port2 } = new MessageChannel();
    const shared = new SharedArrayBuffer(8);
    const control = new Int32Array(shared);
    const release = (): void => {
      Atomics.sub(control, IN_FLIGHT, 1);
      Atomics.notify(control, IN_FLIGHT);
    };
    let settle!: (outcome: TaskOutcome) => void;
    const outcome = new Promise<TaskOutcome>((resolve) => (settle = resolve));
    port1.on('message', (message: ReadMessage) => {
      if (message.type === 'chunk') sink(message.data, release);
      else if (message.type === 'split') onSplit?.(message.split);
      else if (message.type === 'end') settle({ ok: true, result: message.result });
      else if (message.type === 'cancelled') settle({ ok: false, status: 0, message: 'cancelled' });
      else settle({ ok: false, status: message.status, message: message.message });
    });
    // The worker closes its end after its last message; a close without one means it died.
    port1.on('close', () => settle({ ok: false, status: 500, message: 'the read worker stopped without an answer' }));
    const task: ReadTask = { tool, shardDir, request, port: port2, control: shared, peer, peers };
    const transferList = [port2, ...(peer === undefined ? [] : [peer]), ...(peers ?? [])];
    this.running++;
    this.piscina.run(task, { transferList }).then(
      () => this.running--,
      (error: unknown) => {
        this.running--;
        settle({ ok: false, status: 500, message: String(error) });
      },
    );
    void outcome.then(() => port1.close());
    return {
      outcome,
      cancel: () => {
        Atomics.store(control, CANCELLED, 1);
        Atomics.notify(control, IN_FLIGHT);
      },
    };
  }

  /** Closes every thread's reader of a deleted workspace's shard (see read-worker.ts). */
  shardDropped(shardDir: string): void {
    closeShardReader(shardDir);
    this.drops.postMessage(shardDir);
  }

  /**
   * Stops the threads, once each has loaded its modules (for at most LOAD_WAIT_MS): one
   * terminated while lmdb's native addon initialises aborts the whole process (read-worker.ts).
   */
  async close(): Promise<void> {
    this.drops.close();
    const deadline = Date.now() + LOAD_WAIT_MS;
    while (this.piscina.threads.some((t) => !this.loaded.has(t.threadId)) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    this.loadedChannel.close();
    await this.piscina.destroy();
  }
}
