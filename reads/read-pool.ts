/**
 * The read pool: piscina threads running the read tools (read-worker.ts), with the protocol of
 * read-protocol.ts. Each call's output comes back over its thread's reply port (a MessagePort of
 * its own until every thread has given one), with a shared control array for flow control and
 * cancellation, so a large output streams with bounded memory and stops when the client goes
 * away. A grep may be split across idle threads (grep-split.ts).
 */
import { BroadcastChannel, MessageChannel, MessagePort } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { AnswerCopy, AnswerMemory } from '../core/answer-memory.js';
import { siblingModule, workerExecArgv, workerResourceLimits } from '../core/run-mode.js';
import {
  cat,
  closeReadersEverywhere,
  DEFAULT_OPEN_SHARDS,
  find,
  type FindRequest,
  followReaderCloses,
  type GrepRequest,
  ls,
  openShardReader,
  type ShardSource,
  setReaderLimits,
  type ToolSummary,
  viewOf,
} from '../engine/index.js';
import { splitGrep, splitPays } from './grep-split.js';
import {
  CANCELLED,
  controlBytes,
  doneWith,
  type ChunkSink,
  errorOf,
  failure,
  IN_FLIGHT,
  PAUSED,
  type ReadCall,
  type ReadMessage,
  type ReadOutcome,
  type ReadTask,
  type ReadThreadData,
  type ReadTool,
  SHARE_WINDOW,
  SLOT_BUSY,
  SLOT_BYTES,
  type TaskCall,
  type TaskExtras,
  type TaskOutcome,
  THREAD_LOADED,
  WINDOW,
} from './read-protocol.js';

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

/** What to read a shard through, renewed to the latest commit. */
function currentReader(shardDir: string): ShardSource {
  const reader = openShardReader(shardDir);
  reader.renew();
  return reader;
}

/**
 * `find`'s answers in shards too large to search on the calling thread, kept there for the
 * callers that ask again (agents repeat their globs): one answered by a read thread is kept
 * under the `docsVersion` the calling thread read before and after the call, so only when no
 * commit came between (versions only grow, so the read thread read it too).
 */
const finds = new AnswerMemory(256, 8 << 20);

/**
 * Where `find` over this shard runs: on the calling thread when the shard is small enough
 * (`inline`), else on a read thread; `docsVersion` is the latest commit's when a snapshot was
 * taken to decide, else -1.
 */
function findPlace(reader: ShardSource): { inline: boolean; docsVersion: number } {
  // A catalog's size is recent enough to decide by, and costs no snapshot.
  const cataloged = reader.catalogedDocs;
  if (cataloged !== null && cataloged <= INLINE_FIND_DOCS) return { inline: true, docsVersion: -1 };
  const snapshot = reader.snapshot();
  try {
    return { inline: snapshot.state().liveDocs <= INLINE_FIND_DOCS, docsVersion: snapshot.docsVersion };
  } finally {
    snapshot.done();
  }
}

/** The `docsVersion` of the shard's latest commit, or -1 when its reader cannot be had. */
function latestDocsVersion(shardDir: string): number {
  try {
    const snapshot = currentReader(shardDir).snapshot();
    try {
      return snapshot.docsVersion;
    } finally {
      snapshot.done();
    }
  } catch {
    return -1;
  }
}

/** Runs a tool on the calling thread, delivering its chunks before the outcome settles. */
function runInline(tool: 'ls' | 'cat' | 'find', reader: ShardSource, request: unknown, sink: ChunkSink): ReadCall {
  let outcome: ReadOutcome;
  try {
    const output = INLINE_TOOLS[tool](reader, request as never);
    let step = output.next();
    for (; step.done !== true; step = output.next()) if (step.value.length > 0) sink(step.value, () => {});
    outcome = { kind: 'done', resultCount: step.value.resultCount };
  } catch (error) {
    outcome = failure(error);
  }
  return { outcome: Promise.resolve(outcome), cancel: () => {} };
}

/** Longest `close` waits for a starting thread to load its modules. */
const LOAD_WAIT_MS = 10_000;

/** Pool of read threads. */
export class ReadPool {
  private readonly piscina: Piscina<ReadTask, void>;
  /** The threadIds of the read threads (of every pool in the process) whose modules have loaded. */
  private readonly loaded = new Set<number>();
  private readonly loadedChannel = new BroadcastChannel(THREAD_LOADED);
  /** Tasks handed to the threads that have not finished (running or queued). */
  private running = 0;
  /** Set by `close`: a task it stops is cancelled, not failed. */
  private closing = false;
  /** The read threads' reply ports (read-protocol.ts, "The reply port"). */
  private readonly replyPorts = new Set<MessagePort>();
  /** The tasks running without a port of their own, by call number: where their messages go. */
  private readonly calls = new Map<number, (message: ReadMessage) => void>();
  private lastCall = 0;
  /** Tasks given a channel of their own (see `ownChannels`). */
  private channels = 0;

  constructor(
    private readonly threads: number,
    /** A grep whose candidates hold fewer text bytes is searched by one thread (Config.grepSplitMinBytes). */
    private readonly splitMinBytes: number,
    /** Shards each thread (this one and every read thread) keeps open (Config.openShards). */
    openShards = DEFAULT_OPEN_SHARDS,
    /** Whether grep may take V8's regex engine (Config.grepV8). */
    grepV8 = false,
  ) {
    // The calling (HTTP) thread catalogs only shards it may scan inline: building the catalog of
    // a larger one would hold every other request for its duration. Read threads catalog any.
    setReaderLimits({ largestCatalog: INLINE_FIND_DOCS, maxOpen: openShards });
    followReaderCloses();
    this.loadedChannel.onmessage = (event) => this.loaded.add((event as { data: number }).data);
    this.loadedChannel.unref();
    this.piscina = new Piscina<ReadTask, void>({
      filename: siblingModule('read-worker', import.meta.url).href,
      minThreads: threads,
      maxThreads: threads,
      // Tasks mostly wait on nothing: each thread serves one tool call at a time.
      concurrentTasksPerWorker: 1,
      // Queued tasks start in the order they came. Without it, each task that ends sends the
      // next one in the queue to its back: half of a deep queue waited twice, and pipelined
      // greps, whose answers go out in their connection's order, were answered at a tenth of
      // the unpipelined rate (docs/benchmarks.md, "Read tools over HTTP").
      stricterFIFO: true,
      // An idle thread waits for tasks without blocking its event loop, so that it receives the
      // shard drops (read-worker.ts) while no task comes.
      atomics: 'async',
      execArgv: workerExecArgv(true),
      resourceLimits: workerResourceLimits(),
      recordTiming: false,
      workerData: { openShards, grepV8 } satisfies ReadThreadData,
    });
  }

  /** Runs a tool; chunks go to `sink` in order, then `outcome` settles. */
  run(tool: 'ls' | 'find' | 'cat' | 'grep', shardDir: string, request: unknown, sink: ChunkSink): ReadCall {
    if (tool === 'ls' || tool === 'cat' || tool === 'find') {
      let reader: ShardSource;
      try {
        reader = currentReader(shardDir);
      } catch (error) {
        return { outcome: Promise.resolve(failure(error)), cancel: () => {} };
      }
      if (tool !== 'find') return runInline(tool, reader, request, sink);
      const place = findPlace(reader);
      if (place.inline) return runInline(tool, reader, request, sink);
      return this.findOnThread(reader, shardDir, place.docsVersion, request as FindRequest, sink);
    }
    // A split pays only on threads that would otherwise wait: with every thread busy, its
    // further shares queue behind other calls and its hops and merge are pure cost.
    const idle = this.threads - this.running;
    if (tool === 'grep' && idle > 1 && splitPays(request as GrepRequest)) {
      return splitGrep((...task) => this.task(...task), shardDir, request as GrepRequest, sink, idle, this.splitMinBytes);
    }
    const call = this.task(tool, shardDir, request, sink);
    return {
      outcome: call.outcome.then((o) => (o.kind === 'done' ? doneWith(o.result as ToolSummary) : o)),
      cancel: call.cancel,
    };
  }

  /** `find` in a shard of `docsVersion` too large for the calling thread: its kept answer, else a read thread's, then kept (see `finds`). */
  private findOnThread(reader: ShardSource, shardDir: string, docsVersion: number, request: FindRequest, sink: ChunkSink): ReadCall {
    // SECURITY: the key holds what the caller sees; an answer is only ever given to callers who see the same files.
    const key = finds.key(reader, docsVersion, viewOf(request.claims), request.pattern, request.path ?? null, request.headLimit ?? null);
    const known = finds.recall(key);
    if (known !== undefined) {
      for (const chunk of known.chunks) sink(chunk, () => {});
      return { outcome: Promise.resolve({ kind: 'done', resultCount: known.resultCount }), cancel: () => {} };
    }
    const copy = new AnswerCopy(finds.largest);
    const call = this.task('find', shardDir, request, (chunk, release) => {
      copy.take(chunk);
      sink(chunk, release);
    });
    return {
      outcome: call.outcome.then((o) => {
        if (o.kind !== 'done') return o;
        const summary = o.result as ToolSummary;
        const answer = copy.answer(summary.resultCount);
        if (answer !== null && latestDocsVersion(shardDir) === docsVersion) finds.remember(key, answer);
        return doneWith(summary);
      }),
      cancel: call.cancel,
    };
  }

  /** Tasks given a channel of their own so far: those that started before every thread's reply port was known, and the shares of split searches. */
  get ownChannels(): number {
    return this.channels;
  }

  /** Read threads whose reply port this pool holds. */
  get replyThreads(): number {
    return this.replyPorts.size;
  }

  /** Takes a read thread's reply port (read-protocol.ts, "The reply port"). */
  private adopt(port: MessagePort): void {
    this.replyPorts.add(port);
    port.on('message', (message: ReadMessage) => this.calls.get(message.call!)?.(message));
    // A thread that ended (it died; the pool is closing) takes its port's other end with it.
    port.on('close', () => this.replyPorts.delete(port));
    if (this.calls.size === 0) port.unref();
  }

  /** Keeps the reply ports from holding the process open, but while a call waits on them (`ref`). */
  private holdPorts(ref: boolean): void {
    for (const port of this.replyPorts) {
      if (ref) port.ref();
      else port.unref();
    }
  }

  /** Runs one task on a thread; its messages deliver chunks, then its result. */
  private task(tool: ReadTool, shardDir: string, request: unknown, sink: ChunkSink, extras: TaskExtras = {}): TaskCall {
    const { share, onSplit, peer, peers, waits } = extras;
    const shared = new SharedArrayBuffer(controlBytes(waits === true ? SHARE_WINDOW : WINDOW));
    const control = new Int32Array(shared);
    const release = (): void => {
      Atomics.sub(control, IN_FLIGHT, 1);
      Atomics.notify(control, IN_FLIGHT);
    };
    let ring: Uint8Array | null = null;
    let settled = false;
    let settle!: (outcome: TaskOutcome) => void;
    const outcome = new Promise<TaskOutcome>((resolve) => {
      settle = (o) => {
        settled = true;
        resolve(o);
      };
    });
    const receive = (message: ReadMessage): void => {
      if (message.type === 'slot') {
        const slot = message.slot;
        const at = slot * SLOT_BYTES;
        sink(ring!.subarray(at, at + message.length), () => {
          Atomics.store(control, SLOT_BUSY + slot, 0);
          release();
        });
      } else if (message.type === 'chunk') sink(message.data, release);
      else if (message.type === 'ring') ring = new Uint8Array(message.ring);
      else if (message.type === 'split') onSplit?.(message.split);
      else if (message.type === 'end') settle({ kind: 'done', result: message.result });
      else if (message.type === 'cancelled') settle({ kind: 'cancelled' });
      else settle(errorOf(message));
    };
    const task: ReadTask = { tool, shardDir, request, share, control: shared, peer, peers };
    const transferList: Array<MessagePort> = [...(peer === undefined ? [] : [peer]), ...(peers ?? [])];
    // Ports of a split search would be lost with a task that a thread returns unrun: it has one of its own.
    if (this.replyPorts.size >= this.threads && transferList.length === 0) {
      const call = ++this.lastCall;
      task.call = call;
      if (this.calls.size === 0) this.holdPorts(true);
      this.calls.set(call, receive);
      void outcome.then(() => {
        this.calls.delete(call);
        if (this.calls.size === 0) this.holdPorts(false);
      });
    } else {
      const { port1, port2 } = new MessageChannel();
      this.channels++;
      task.port = port2;
      transferList.push(port2);
      port1.on('message', receive);
      // The worker closes its end after its last message; a close without one means it died, or
      // that the pool is closing (it terminates its threads). Every call's port closes (below), and
      // an error made per call only to be dropped cost the HTTP thread 2% of a `find`.
      port1.on('close', () => {
        if (!settled) settle(this.closing ? { kind: 'cancelled' } : failure('the read worker stopped without an answer'));
      });
      void outcome.then(() => port1.close());
    }
    const run = (): void => {
      this.running++;
      this.piscina.run(task, { transferList }).then(
        (result: unknown) => {
          this.running--;
          if (!(result instanceof MessagePort)) return;
          this.adopt(result);
          // A thread gives its port for a task without one instead of running it: run it again.
          if (task.port === undefined) run();
        },
        (error: unknown) => {
          this.running--;
          settle(this.closing ? { kind: 'cancelled' } : failure(error));
        },
      );
    };
    run();
    return {
      outcome,
      cancel: () => {
        Atomics.store(control, CANCELLED, 1);
        Atomics.notify(control, IN_FLIGHT);
      },
      pause: (on) => {
        Atomics.store(control, PAUSED, on ? 1 : 0);
        if (!on) Atomics.notify(control, IN_FLIGHT);
      },
    };
  }

  /** Closes every thread's reader of a deleted workspace's shard, which frees its disk space. */
  shardDropped(shardDir: string): void {
    closeReadersEverywhere(shardDir);
  }

  /**
   * Stops the threads, once each has loaded its modules (for at most LOAD_WAIT_MS): one
   * terminated while lmdb's native addon initialises aborts the whole process (read-worker.ts).
   */
  async close(): Promise<void> {
    this.closing = true;
    const deadline = Date.now() + LOAD_WAIT_MS;
    while (this.piscina.threads.some((t) => !this.loaded.has(t.threadId)) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    this.loadedChannel.close();
    await this.piscina.destroy();
  }
}
