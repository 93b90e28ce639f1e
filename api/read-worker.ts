/**
 * The read pool's worker: runs one read tool over a workspace shard that the
 * thread opens itself (readers are cached per thread). It receives the shard
 * directory and the validated request, never file bytes.
 *
 * Output goes back over the task's MessagePort, in order: `chunk` messages,
 * then one `end` (with the generator's return value, a ToolSummary), `cancelled`
 * or `error`. Flow control is a shared Int32Array: [0] counts chunks sent but not
 * yet written to the socket (the worker waits while it reaches WINDOW), [1] is
 * set to 1 to cancel (client gone).
 *
 * A sorted-mode grep split into shares is merged on a read thread, so that the
 * HTTP thread neither receives per-file counts nor sorts them (for a full scan,
 * tens of thousands of files: 30-50 ms during which it served nothing). Each
 * share (`grepShare`) sends its GrepCollection over a port of its own (`peer`);
 * once every share has ended, the HTTP thread starts a `grepMerge` task with the
 * other ends (`peers`), which merges, sorts and prints. No task ever waits for
 * another one to run: with every thread busy, a share waiting for a share still
 * queued behind it would wait forever. A lead that keeps the whole search (no
 * further shares) prints the answer itself.
 */
import { BroadcastChannel, isMainThread, type MessagePort, receiveMessageOnPort, threadId } from 'node:worker_threads';
import { VfsError } from '../core/errors.js';
import {
  cat,
  closeShardReader,
  collectGrepCounts,
  emitGrepCounts,
  find,
  grep,
  type GrepCollection,
  type GrepRequest,
  type GrepSplit,
  ls,
  openShardReader,
  type ShardReader,
  type ToolSummary,
} from '../engine/index.js';

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

// A read thread closes its reader of a deleted workspace's shard, so that the shard's disk space
// is freed now rather than when the reader is evicted or the thread ends.
if (!isMainThread) {
  const drops = new BroadcastChannel(SHARD_DROPS);
  drops.onmessage = (event) => closeShardReader((event as { data: string }).data);
  drops.unref();
  // The imports above have loaded, lmdb's native addon among them. A thread terminated while
  // that addon initialises aborts the whole process ("FATAL ERROR:
  // Error::ThrowAsJavaScriptException napi_throw"), so the pool stops no thread before this.
  const loaded = new BroadcastChannel(THREAD_LOADED);
  loaded.postMessage(threadId);
  loaded.unref();
}

/**
 * The four tools by name; `grepShare` and `grepMerge` serve a sorted-mode grep split into shares
 * (see above). The first share of a grep split across threads comes with a `lead` that lacks
 * `onSplit`: here it posts a `split` message (see read-pool.ts).
 */
const TOOLS = { ls, find, cat, grep } as const;

/** A read task. */
export interface ReadTask {
  tool: keyof typeof TOOLS | 'grepShare' | 'grepMerge';
  shardDir: string;
  request: unknown;
  port: MessagePort;
  control: SharedArrayBuffer;
  /** `grepShare`: where its GrepCollection goes. */
  peer?: MessagePort;
  /** `grepMerge`: where the shares' collections arrive, one port per share. */
  peers?: MessagePort[];
}

/** Messages on the task's port. */
export type ReadMessage =
  | { type: 'chunk'; data: Uint8Array }
  | { type: 'split'; split: GrepSplit }
  | { type: 'end'; result: unknown }
  | { type: 'cancelled' }
  | { type: 'error'; status: number; message: string };

/** Thrown while a merge waits for a collection and the call is cancelled. */
class Cancelled extends Error {}

/** Runs one tool, streaming its output over `task.port`. */
export default function runReadTask(task: ReadTask): void {
  const control = new Int32Array(task.control);
  const port = task.port;
  try {
    const reader = openShardReader(task.shardDir);
    // lmdb-js renews its cached read transaction on a timer, and piscina may run tasks back to
    // back without turning the event loop: start every task from the latest commit explicitly.
    reader.shard.env.resetReadTxn();
    let request = task.request;
    const lead = (request as GrepRequest).lead;
    let alone = false; // a lead that reported no further shares
    if (lead !== undefined) {
      const onSplit = (split: GrepSplit): void => {
        alone = split.shares.length === 0;
        port.postMessage({ type: 'split', split } satisfies ReadMessage);
      };
      request = { ...(request as GrepRequest), lead: { ...lead, onSplit } };
    }
    let output: Generator<Buffer, unknown>;
    if (task.tool === 'grepShare') output = shareCounts(reader, request as GrepRequest, task.peer!, () => alone);
    else if (task.tool === 'grepMerge') output = mergedCounts(request as GrepRequest, task.peers!, control);
    else output = (TOOLS[task.tool] as (r: ShardReader, q: unknown) => Generator<Buffer, unknown>)(reader, request);
    try {
      for (;;) {
        if (Atomics.load(control, CANCELLED) === 1) {
          port.postMessage({ type: 'cancelled' } satisfies ReadMessage);
          return;
        }
        const step = output.next();
        if (step.done === true) {
          port.postMessage({ type: 'end', result: step.value } satisfies ReadMessage);
          return;
        }
        if (step.value.length === 0) continue; // heartbeat: a cancellation point only
        let inFlight = Atomics.load(control, IN_FLIGHT);
        while (inFlight >= WINDOW && Atomics.load(control, CANCELLED) === 0) {
          Atomics.wait(control, IN_FLIGHT, inFlight, 100);
          inFlight = Atomics.load(control, IN_FLIGHT);
        }
        Atomics.add(control, IN_FLIGHT, 1);
        // Copy: the tool may reuse its buffer for the next chunk.
        const data = new Uint8Array(step.value);
        port.postMessage({ type: 'chunk', data } satisfies ReadMessage, [data.buffer]);
      }
    } finally {
      output.return(undefined as never);
    }
  } catch (error) {
    if (error instanceof Cancelled) port.postMessage({ type: 'cancelled' } satisfies ReadMessage);
    else if (error instanceof VfsError) port.postMessage({ type: 'error', status: error.status, message: error.message } satisfies ReadMessage);
    else port.postMessage({ type: 'error', status: 500, message: String(error instanceof Error ? error.stack : error) } satisfies ReadMessage);
  } finally {
    port.close();
  }
}

/**
 * One share of a sorted-mode grep: its counts go to `peer` (the result is then null), except
 * for a lead that kept the whole search, which prints the answer itself (no merge task).
 */
function* shareCounts(reader: ShardReader, request: GrepRequest, peer: MessagePort, alone: () => boolean): Generator<Buffer, ToolSummary | null> {
  try {
    const collection = yield* collectGrepCounts(reader, request);
    if (alone()) return yield* emitGrepCounts(request, [collection]);
    peer.postMessage(collection);
    return null;
  } finally {
    peer.close();
  }
}

/** The shares' counts (all sent before their tasks ended), merged and printed. */
function* mergedCounts(request: GrepRequest, peers: MessagePort[], control: Int32Array): Generator<Buffer, ToolSummary> {
  const collections: GrepCollection[] = [];
  try {
    for (const peer of peers) collections.push(receive(peer, control) as GrepCollection);
  } finally {
    for (const peer of peers) peer.close();
  }
  return yield* emitGrepCounts(request, collections);
}

/**
 * The next message on `port`, waiting for it (in steps of 1 ms) unless the call is cancelled. A
 * message posted before its sender's task ended is normally there at once.
 */
function receive(port: MessagePort, control: Int32Array): unknown {
  for (;;) {
    const received = receiveMessageOnPort(port);
    if (received !== undefined) return received.message;
    if (Atomics.load(control, CANCELLED) === 1) throw new Cancelled();
    Atomics.wait(control, CANCELLED, 0, 1);
  }
}
