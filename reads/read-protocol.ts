/**
 * The read pool's protocol between the HTTP thread (read-pool.ts) and its read threads
 * (read-worker.ts).
 *
 * A task carries the shard directory and the validated request, never file bytes. Its output
 * comes back over the task's MessagePort, in order: `chunk` messages (a grep lead's `split`
 * before its first chunk), then one `end` (with the generator's return value, a ToolSummary),
 * `cancelled` or `error`. Flow control is a shared Int32Array: [IN_FLIGHT] counts chunks sent
 * but not yet written to the socket (the worker waits while it reaches WINDOW), [CANCELLED] is
 * set to 1 to cancel (client gone).
 */
import type { MessagePort } from 'node:worker_threads';
import type { GrepLead, GrepShare, GrepSplit } from '../engine/index.js';

/** Chunks (of up to 64 KiB) in flight between the worker and the socket. */
export const WINDOW = 4;
/** Index of the in-flight counter in the control array. */
export const IN_FLIGHT = 0;
/** Index of the cancel flag in the control array. */
export const CANCELLED = 1;

/** The channel on which the HTTP thread names the shard directories of deleted workspaces. */
export const SHARD_DROPS = 'agent-vfs:shard-drops';

/** The channel on which each read thread posts its threadId once its modules have loaded. */
export const THREAD_LOADED = 'agent-vfs:read-thread-loaded';

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
  port: MessagePort;
  control: SharedArrayBuffer;
  /** `grepShare`: where its GrepCollection goes. */
  peer?: MessagePort;
  /** `grepMerge`: where the shares' collections arrive, one port per share. */
  peers?: MessagePort[];
}

/** A GrepShare as a task carries it: a lead comes without `onSplit` (a function does not cross threads) and posts a `split` message instead. */
export type TaskShare = Omit<GrepShare, 'lead'> & { lead?: Omit<GrepLead, 'onSplit'> };

/** Messages on the task's port. */
export type ReadMessage =
  | { type: 'chunk'; data: Uint8Array }
  | { type: 'split'; split: GrepSplit }
  | { type: 'end'; result: unknown }
  | { type: 'cancelled' }
  | { type: 'error'; status: number; message: string };

/** Receives a chunk; calls `release` once the chunk no longer occupies memory (written to the socket). */
export type ChunkSink = (data: Uint8Array, release: () => void) => void;

/** How a read ended. */
export type ReadOutcome = { ok: true; resultCount: number } | { ok: false; status: number; message: string } | { ok: false; status: 0; message: 'cancelled' };

/** A read in progress. */
export interface ReadCall {
  /** Settles when the tool has finished (its last chunk was delivered before this). */
  outcome: Promise<ReadOutcome>;
  /** Stops the tool (client gone). */
  cancel(): void;
}

/** How one task ended: its generator's return value, or a failure. */
export type TaskOutcome = { ok: true; result: unknown } | { ok: false; status: number; message: string };

/** One task in progress. */
export interface TaskCall {
  outcome: Promise<TaskOutcome>;
  cancel(): void;
}

/** What a task may carry besides its request. */
export interface TaskExtras {
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
