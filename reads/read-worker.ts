/**
 * The read pool's worker: runs one read task over a workspace shard that the thread opens
 * itself (readers are cached per thread), streaming its output over the task's port with flow
 * control (read-protocol.ts). Grep tasks of a split search are grep-split.ts's.
 */
import { BroadcastChannel, isMainThread, MessageChannel, type MessagePort, threadId, workerData } from 'node:worker_threads';
import { Piscina } from 'piscina';
import {
  cat,
  find,
  followReaderCloses,
  ls,
  openReaderCount,
  openShardReader,
  recycleChunk,
  type ShardSource,
  setReaderLimits,
  setV8Scans,
  sharesMemory,
} from '../engine/index.js';
import { reportThreadStats } from '../core/thread-stats.js';
import { grepTaskOutput, TaskCancelled } from './grep-split.js';
import {
  CANCELLED,
  errorMessage,
  IN_FLIGHT,
  PAUSED,
  type ReadMessage,
  type ReadTask,
  type ReadThreadData,
  SLOT_BUSY,
  SLOT_BYTES,
  THREAD_LOADED,
} from './read-protocol.js';

// A read thread closes its reader of a shard when another thread asks (a deleted workspace's, or
// one whose writer closed: engine/reader-cache.ts), rather than when it is evicted or the thread ends.
if (!isMainThread) {
  const data = workerData as ReadThreadData;
  setReaderLimits({ maxOpen: data.openShards });
  setV8Scans(data.grepV8 ? 'on' : 'off');
  followReaderCloses();
  reportThreadStats('read', openReaderCount);
  // The imports above have loaded, lmdb's native addon among them. A thread terminated while
  // that addon initialises aborts the whole process ("FATAL ERROR:
  // Error::ThrowAsJavaScriptException napi_throw"), so the pool stops no thread before this.
  // Told on the next turn: piscina require()s this module, and Node makes the module's require
  // facade after its body ran; a thread terminated in between aborts too ("Assertion failed:
  // facade->InstantiateModule").
  const loaded = new BroadcastChannel(THREAD_LOADED);
  loaded.unref();
  setImmediate(() => loaded.postMessage(threadId));
}

/** The tools that run as they are; the grep tasks are grep-split.ts's. */
const TOOLS = { ls, find, cat } as const;

/**
 * This thread's own channel to the HTTP thread (read-protocol.ts, "The reply port"): `port2`
 * stays here, `port1` is given once, as the result of the first task that came with a port of
 * its own or that came without one.
 */
const replies = new MessageChannel();
let repliesGiven = false;

/** Where a task's messages go: its own port, or this thread's reply port under the task's call number. */
class Outbox {
  constructor(
    private readonly port: MessagePort,
    private readonly call: number | undefined,
  ) {}

  post(message: ReadMessage, transfer?: ArrayBuffer[]): void {
    if (this.call !== undefined) message.call = this.call;
    this.port.postMessage(message, transfer);
  }
}

/**
 * Runs one task, streaming its output over its port, or over this thread's reply port when it
 * came without one. Returns this thread's reply port the first time it can: then a task that
 * came without a port was not run (the HTTP thread runs it again).
 */
export default function runReadTask(task: ReadTask): ReturnType<typeof Piscina.move> | undefined {
  if (task.port !== undefined || repliesGiven) serve(task);
  if (repliesGiven) return undefined;
  repliesGiven = true;
  return Piscina.move(replies.port1);
}

/** Runs one task (see `runReadTask`). */
function serve(task: ReadTask): void {
  const control = new Int32Array(task.control);
  const port = new Outbox(task.port ?? replies.port2, task.port === undefined ? task.call : undefined);
  try {
    const reader = openShardReader(task.shardDir);
    // lmdb-js renews its cached read transaction on a timer, and piscina may run tasks back to
    // back without turning the event loop: start every task from the latest commit explicitly.
    reader.renew();
    const output =
      task.tool === 'ls' || task.tool === 'find' || task.tool === 'cat'
        ? (TOOLS[task.tool] as (r: ShardSource, q: unknown) => Generator<Buffer, unknown>)(reader, task.request)
        : grepTaskOutput(task, reader, control, (split) => port.post({ type: 'split', split }));
    pump(output, control, port);
  } catch (error) {
    port.post(error instanceof TaskCancelled ? { type: 'cancelled' } : errorMessage(error));
  } finally {
    task.port?.close();
  }
}

/**
 * Rings this thread made, each with the control array of the task that used it last; a ring
 * is free again once that task's slots were all released. At most KEPT_RINGS are kept, and none
 * once the thread has made no ring for RING_IDLE_MS: an idle thread holds no ring's memory.
 */
const kept: Array<{ ring: SharedArrayBuffer; control: Int32Array }> = [];
const KEPT_RINGS = 3;
const RING_IDLE_MS = 30_000;
let dropKept: NodeJS.Timeout | undefined;

/** A ring of `window` slots for the task of `control`: a free kept one, or a new one. */
function ringFor(window: number, control: Int32Array): SharedArrayBuffer {
  clearTimeout(dropKept);
  dropKept = setTimeout(() => kept.splice(0), RING_IDLE_MS).unref();
  const bytes = window * SLOT_BYTES;
  const free = kept.find((k) => k.ring.byteLength === bytes && allReleased(k.control));
  if (free !== undefined) {
    free.control = control;
    return free.ring;
  }
  const ring = new SharedArrayBuffer(bytes);
  const spare = kept.findIndex((k) => allReleased(k.control)); // free, but of the other size
  if (kept.length < KEPT_RINGS) kept.push({ ring, control });
  else if (spare !== -1) kept[spare] = { ring, control };
  return ring;
}

function allReleased(control: Int32Array): boolean {
  for (let i = SLOT_BUSY; i < control.length; i++) if (Atomics.load(control, i) !== 0) return false;
  return true;
}

/**
 * Sends `output`'s chunks, at most the task's window unreleased at a time, then its end; stops
 * when cancelled. From the second chunk on, a chunk goes through the task's ring (read-protocol.ts).
 */
function pump(output: Generator<Buffer, unknown>, control: Int32Array, port: Outbox): void {
  let sent = 0;
  let ring: Uint8Array | null = null;
  try {
    for (;;) {
      if (Atomics.load(control, CANCELLED) === 1) {
        port.post({ type: 'cancelled' });
        return;
      }
      const step = output.next();
      if (step.done === true) {
        port.post({ type: 'end', result: step.value });
        return;
      }
      const chunk = step.value;
      if (chunk.length === 0) continue; // heartbeat: a cancellation point only
      const window = control.length - SLOT_BUSY;
      let inFlight = Atomics.load(control, IN_FLIGHT);
      while ((inFlight >= window || Atomics.load(control, PAUSED) === 1) && Atomics.load(control, CANCELLED) === 0) {
        Atomics.wait(control, IN_FLIGHT, inFlight, 100);
        inFlight = Atomics.load(control, IN_FLIGHT);
      }
      Atomics.add(control, IN_FLIGHT, 1);
      if (sent++ > 0 && chunk.length <= SLOT_BYTES) {
        if (ring === null) {
          const shared = ringFor(window, control);
          ring = new Uint8Array(shared);
          port.post({ type: 'ring', ring: shared });
        }
        // Fewer than `window` chunks are unreleased, so a slot is free (released ones in any order).
        let slot = 0;
        while (Atomics.load(control, SLOT_BUSY + slot) === 1) slot++;
        Atomics.store(control, SLOT_BUSY + slot, 1);
        ring.set(chunk, slot * SLOT_BYTES);
        recycleChunk(chunk);
        port.post({ type: 'slot', slot, length: chunk.length });
      } else {
        // A chunk with memory of its own moves to the HTTP thread as it is; one cut from a block
        // shared with other output is copied.
        const data = sharesMemory(chunk) ? new Uint8Array(chunk) : chunk;
        port.post({ type: 'chunk', data }, [data.buffer as ArrayBuffer]);
      }
    }
  } finally {
    output.return(undefined as never);
  }
}
