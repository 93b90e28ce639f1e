/**
 * The read pool's protocol between the HTTP thread (read-pool.ts) and its read threads
 * (read-worker.ts).
 *
 * A task carries the shard directory and the validated request, never file bytes. Its output
 * comes back over the task's MessagePort, in order: chunks (a grep lead's `split` before its
 * first), then one `end` (with the generator's return value, a ToolSummary), `cancelled` or
 * `error`. Flow control is a shared Int32Array: [IN_FLIGHT] counts chunks sent but not yet
 * released (the worker waits while it reaches the task's window), [CANCELLED] is set to 1 to
 * cancel (client gone), [PAUSED] is 1 while the worker is to wait whatever its window, and
 * [SLOT_BUSY + i] is 1 while slot i of the task's ring holds a chunk not yet released. The
 * window is the number of slots: WINDOW for a task whose chunks go to the socket as they come,
 * SHARE_WINDOW for a content share whose chunks may wait for the shares before it
 * (grep-split.ts).
 *
 * The reply port. A channel made per task cost the HTTP thread 25-31 µs, and sending its port 7
 * more, where a plain message costs 3 (docs/benchmarks.md, "Read tools over HTTP"). So each read
 * thread makes one channel of its own and gives its other end to the HTTP thread as the result
 * of its first task. Once every thread has given its port, tasks come without a port, with a call
 * number instead, and their messages carry that number over the thread's port. A thread that has
 * not given its port yet (a new one, after a thread died) returns it for a task without a port
 * instead of running it, and the HTTP thread runs that task again. Tasks that carry ports of a
 * split search (`peer`, `peers`) always come with a port of their own, so that none is lost that
 * way.
 *
 * A task's first chunk crosses as a `chunk` message with bytes of its own. A longer output then
 * goes through a ring of slots in memory shared with the HTTP thread (one `ring` message, then a
 * `slot` message a chunk): a chunk an ArrayBuffer of its own, hundreds of MB of them, kept the
 * collectors of the HTTP thread and of V8's helper threads busy. A read thread reuses a ring once
 * every slot of it was released (read-worker.ts). A sink's `release` so means that the chunk's
 * memory may be reused: a sink that keeps a chunk after releasing it keeps a copy
 * (core/kept-chunk.ts).
 *
 * An error crosses as a code of the error catalog with its params (an Error object loses its
 * class on the way), and is made a VfsError again on the HTTP thread: `errorMessage` and
 * `errorOf`. A failure that is no VfsError crosses as INTERNAL with its text, for the log only.
 * Cancellation (client gone, pool closing) is an outcome of its own, not an error.
 */
import type { MessagePort } from 'node:worker_threads';
import { type ErrorCode, type ErrorParams, VfsError } from '../core/errors.js';
import { CHUNK_BYTES, type GrepLead, type GrepShare, type GrepSplit, type GrepStats, type ToolSummary } from '../engine/index.js';

/** Chunks (of up to 64 KiB) in flight between the worker and the socket; also the slots of a task's ring. */
export const WINDOW = 4;
/**
 * The window and ring slots of a content share that may wait its turn: it searches on while its
 * output fits (16 MiB), which is about one of its path ranges' output in a dense answer. A ring
 * this size cost nothing new per call, where a chunk of its own each did (docs/benchmarks.md,
 * "content shares in rings").
 */
export const SHARE_WINDOW = 256;
/** Index of the in-flight counter in the control array. */
export const IN_FLIGHT = 0;
/** Index of the cancel flag in the control array. */
export const CANCELLED = 1;
/** Index of the flag that pauses the worker (a content share past the held budget, grep-split.ts). */
export const PAUSED = 2;
/** Index of the first slot's busy flag in the control array. */
export const SLOT_BUSY = 3;
/** Bytes of the control array of a task with `window` slots. */
export function controlBytes(window: number): number {
  return (SLOT_BUSY + window) * 4;
}
/** Bytes of a ring slot: a chunk (CHUNK_BYTES at most but for a single longer write) that does not fit crosses on its own. */
export const SLOT_BYTES = CHUNK_BYTES;

/** The channel on which each read thread posts its threadId once its modules have loaded. */
export const THREAD_LOADED = 'agent-vfs:read-thread-loaded';

/** What every read thread starts with (its workerData). */
export interface ReadThreadData {
  /** Shards the thread keeps open. */
  openShards: number;
  /** Whether grep may take V8's regex engine (Config.grepV8). */
  grepV8: boolean;
}

/**
 * What a task runs: a read tool, or one of the two parts of a sorted-mode grep split into
 * shares (grep-split.ts).
 */
export type ReadTool = 'ls' | 'find' | 'cat' | 'grep' | 'grepShare' | 'grepMerge';

/** A read task. */
export interface ReadTask {
  tool: ReadTool;
  shardDir: string;
  request: unknown;
  /** `grep` and `grepShare`: the share of a split search it searches; default the whole search. */
  share?: TaskShare;
  /** The task's own port for its messages; absent, they go over the thread's reply port under `call`. */
  port?: MessagePort;
  /** Without `port`: the number that tells this task's messages apart on the reply port. */
  call?: number;
  control: SharedArrayBuffer;
  /** `grepShare`: where its GrepCollection goes. */
  peer?: MessagePort;
  /** `grepMerge`: where the shares' collections arrive, one port per share. */
  peers?: MessagePort[];
}

/** A GrepShare as a task carries it: a lead comes without `onSplit` (a function does not cross threads) and posts a `split` message instead. */
export type TaskShare = Omit<GrepShare, 'lead'> & { lead?: Omit<GrepLead, 'onSplit'> };

/** Messages on the task's port (or the reply port, with the task's `call`). */
export type ReadMessage = (
  | { type: 'chunk'; data: Uint8Array }
  | { type: 'ring'; ring: SharedArrayBuffer }
  | { type: 'slot'; slot: number; length: number }
  | { type: 'split'; split: GrepSplit }
  | { type: 'end'; result: unknown }
  | { type: 'cancelled' }
  | ErrorMessage
) & { call?: number };

/** A task's error as it crosses: a code of the catalog and its params; `detail` is for the log. */
export interface ErrorMessage {
  type: 'error';
  code: ErrorCode;
  params: ErrorParams;
  /** The text of a failure that was no VfsError (`code` is then INTERNAL). */
  detail?: string;
}

/** The `error` message for what a task threw. */
export function errorMessage(error: unknown): ErrorMessage {
  if (error instanceof VfsError) return { type: 'error', code: error.code, params: error.params };
  return { type: 'error', code: 'INTERNAL', params: {}, detail: String(error instanceof Error ? error.stack : error) };
}

/** The outcome of a call that ended with `summary` (a grep's stats kept for the metrics). */
export function doneWith(summary: ToolSummary): ReadOutcome {
  return summary.grep === undefined
    ? { kind: 'done', resultCount: summary.resultCount }
    : { kind: 'done', resultCount: summary.resultCount, grep: summary.grep };
}

/** The failure for what was thrown on the HTTP thread: by a tool run there, or by a task that could not run. */
export function failure(error: unknown): Failure {
  return error instanceof VfsError ? { kind: 'failed', error } : { kind: 'failed', error: new VfsError('INTERNAL'), detail: String(error) };
}

/** The failure an `error` message reports, its VfsError made again. */
export function errorOf(message: ErrorMessage): Failure {
  return { kind: 'failed', error: new VfsError(message.code, message.params), detail: message.detail };
}

/**
 * Receives a chunk; calls `release` once the chunk is written to the socket, after which its
 * memory may be reused (a sink that keeps it longer keeps a copy).
 */
export type ChunkSink = (data: Uint8Array, release: () => void) => void;

/**
 * A read or task that failed: `error` is what the caller sees; `detail`, the text of a failure
 * that was no VfsError (`error` is then INTERNAL), is for the log only.
 */
export interface Failure {
  kind: 'failed';
  error: VfsError;
  detail?: string;
}

/** A read or task stopped before its end: its client went away, or the pool is closing. */
export interface Cancelled {
  kind: 'cancelled';
}

/** How a read ended. */
export type ReadOutcome = { kind: 'done'; resultCount: number; grep?: GrepStats } | Failure | Cancelled;

/** A read in progress. */
export interface ReadCall {
  /** Settles when the tool has finished (its last chunk was delivered before this). */
  outcome: Promise<ReadOutcome>;
  /** Stops the tool (client gone). */
  cancel(): void;
}

/** How one task ended: its generator's return value, a failure, or cancelled. */
export type TaskOutcome = { kind: 'done'; result: unknown } | Failure | Cancelled;

/** One task in progress. */
export interface TaskCall {
  outcome: Promise<TaskOutcome>;
  cancel(): void;
  /** Makes the worker wait before its next chunk, or go on (read-protocol's [PAUSED]). */
  pause(on: boolean): void;
}

/** What a task may carry besides its request. */
export interface TaskExtras {
  /** A content share whose output may wait for the shares before it: its window is SHARE_WINDOW. */
  waits?: boolean;
  /** The share of a split grep it searches. */
  share?: TaskShare;
  /** The lead of a split grep: receives the split. */
  onSplit?: (split: GrepSplit) => void;
  /** `grepShare`: the port its counts go to. */
  peer?: MessagePort;
  /** `grepMerge`: the ports the shares' counts arrive on. */
  peers?: MessagePort[];
}

/** Runs one task on a read thread: chunks go to `sink` in order, then `outcome` settles. */
export type RunTask = (tool: ReadTool, shardDir: string, request: unknown, sink: ChunkSink, extras?: TaskExtras) => TaskCall;
