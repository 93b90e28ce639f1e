/**
 * The grep split: one grep searched by several read threads at once (engine/tool-grep.ts
 * describes shares, the lead and its split).
 *
 * On the HTTP thread (`splitGrep`): a lead task finds the candidates and reports the split, then
 * each further share starts as a task of its own with the lead's candidates.
 * - Content mode splits into path ranges: the lead streams its range to the client at once;
 *   each further share waits with its first chunks queued (its worker blocks once its
 *   flow-control window is full) until those before it have ended.
 * - The sorted modes split into hash classes of paths, and are merged on a read thread, so that
 *   the HTTP thread neither receives per-file counts nor sorts them (for a full scan, tens of
 *   thousands of files: tens of milliseconds during which it would serve nothing). Each share (`grepShare`)
 *   sends its GrepCollection over a port of its own (`peer`); once every share has ended, a
 *   `grepMerge` task gets the other ends (`peers`), and merges, sorts and prints. No task ever
 *   waits for another one to run: with every thread busy, a share waiting for a share still
 *   queued behind it would wait forever. A lead that keeps the whole search (no further
 *   shares) prints the answer itself.
 *
 * On a read thread (`grepTaskOutput`): runs a `grep`, `grepShare` or `grepMerge` task. A lead
 * comes without `onSplit` (a function does not cross threads): its split goes back as a `split`
 * message.
 */
import { MessageChannel, type MessagePort, receiveMessageOnPort } from 'node:worker_threads';
import {
  collectGrepCounts,
  emitGrepCounts,
  grep,
  type GrepCollection,
  type GrepContentSummary,
  grepContentFooter,
  type GrepRequest,
  type GrepSettings,
  type GrepShare,
  type GrepSplit,
  grepWithDefaults,
  type ShardSource,
  type ToolSummary,
} from '../engine/index.js';
import { CANCELLED, type ChunkSink, doneWith, type ReadCall, type ReadOutcome, type ReadTask, type RunTask, type TaskCall } from './read-protocol.js';

/**
 * Whether a grep is split across threads: the sorted modes must see every
 * match anyway, and so must content without `head_limit`. A content search
 * with `head_limit` or `offset` runs whole in one thread, which stops as soon
 * as it has enough lines (and counts entries across all files).
 */
export function splitPays(request: GrepRequest): boolean {
  const s = grepWithDefaults(request);
  if (s.outputMode !== 'content') return true;
  return s.headLimit === Infinity && s.offset === 0;
}

/**
 * Runs a grep split into at most `count` shares (content: RANGES_PER_THREAD times as many path
 * ranges, or one for each RANGE_BYTES of text where that is more), each a task started by
 * `runTask`; candidates holding fewer than `minBytes` text bytes are searched by the lead alone.
 */
export function splitGrep(runTask: RunTask, shardDir: string, request: GrepRequest, sink: ChunkSink, count: number, minBytes: number): ReadCall {
  const settings = grepWithDefaults(request);
  const content = settings.outputMode === 'content';
  const split: Splitter = {
    runTask,
    shardDir,
    request,
    settings,
    count: content ? count * RANGES_PER_THREAD : count,
    minBytes,
    rangeBytes: content ? RANGE_BYTES : undefined,
  };
  return content ? parallelContent(split, sink) : parallelCounts(split, sink);
}

/**
 * Path ranges of a content grep per thread (each of at least `minBytes` of text), and at least
 * one for each RANGE_BYTES of text. The ranges queue in path order and each thread takes the
 * next one as it ends one, so a range that must wait for the ones before it to be written waits
 * for about one range's output, not for half of the whole (which, past its ring, stops its
 * thread): both threads keep searching through an output of gigabytes. A range should print no
 * more than a share's ring holds (16 MiB), and a dense answer prints up to twice its text: at 16
 * a thread, the whole Linux tree's ranges of `\S+\s+\S+` (40 MB of text) printed 71 MB each,
 * and a thread whose range waited stopped once its ring was full, 1.1-1.5 s of a core idle in a
 * 4.5-s answer; at 64 a thread, 0.3 s, and the answer 10% sooner. But each range costs its
 * thread too: on the 20,000-file sample (346 MB of text, whose 32 ranges each fit a ring) 86
 * ranges made dense answers 10-13% slower (docs/benchmarks.md, "content ranges sized by the ring").
 */
const RANGES_PER_THREAD = 16;
const RANGE_BYTES = 10 << 20;

/** Put between two content shares' output when context lines are on. */
const SEPARATOR = Buffer.from('--\n');

/** One grep to split, and how. */
interface Splitter {
  runTask: RunTask;
  shardDir: string;
  request: GrepRequest;
  /** `request` with its defaults applied. */
  settings: GrepSettings;
  /** Shares wanted. */
  count: number;
  /** Candidates with fewer text bytes than this are searched by the lead alone. */
  minBytes: number;
  /** Content: a path range at least for each this many text bytes. */
  rangeBytes?: number;
}

/** The tasks of a split grep as they start. */
interface Shares {
  /** The tasks in output order, once the lead has reported its split. */
  shares: Promise<TaskCall[]>;
  /** The tasks started so far, in output order. */
  started: readonly TaskCall[];
  /** Stops every task started and starts no more. */
  cancel(): void;
  /** `grepShare`: the ports the shares' counts arrive on. */
  counts: MessagePort[];
}

/**
 * Starts a grep split into shares: a lead share finds the candidates and reports the split, then
 * each further share starts with the lead's candidates.
 */
function startShares(s: Splitter, tool: 'grep' | 'grepShare', sinkFor: (share: number) => ChunkSink): Shares {
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
  const lead = s.runTask(tool, s.shardDir, s.request, sinkFor(0), {
    share: { lead: { count: s.count, minBytes: s.minBytes, rangeBytes: s.rangeBytes } },
    onSplit,
    peer: peer(),
  });
  // The tasks started, in output order: what `shares` resolves to and what `cancel` stops.
  const calls: TaskCall[] = [lead];
  const shares = (async (): Promise<TaskCall[]> => {
    // The lead reports its split before its first chunk, or fails without one.
    const split = await Promise.race([reported, lead.outcome.then(() => null)]);
    for (const [k, share] of (split?.shares ?? []).entries()) {
      if (cancelled) break;
      // A content share waits for the ones before it, its chunks held (parallelContent).
      calls.push(s.runTask(tool, s.shardDir, s.request, sinkFor(k + 1), { share, peer: peer(), waits: tool === 'grep' }));
    }
    return calls;
  })();
  return {
    shares,
    started: calls,
    counts,
    cancel: () => {
      cancelled = true;
      for (const c of calls) c.cancel();
    },
  };
}

/**
 * A sorted-mode grep split into hash classes of paths, merged by a `grepMerge` task once every
 * share has ended; a lead that keeps the whole search prints the answer itself.
 */
function parallelCounts(s: Splitter, sink: ChunkSink): ReadCall {
  // Only a lead that keeps the whole search prints; the other shares yield no text.
  const split = startShares(s, 'grepShare', () => sink);
  let merge: TaskCall | null = null;
  let cancelled = false;
  const outcome = (async (): Promise<ReadOutcome> => {
    try {
      const outcomes = (await split.shares).map((t) => t.outcome);
      // A share that fails makes the others' work useless: stop them.
      for (const o of outcomes) void o.then((r) => r.kind === 'done' || split.cancel());
      const results = await Promise.all(outcomes);
      // The cause, rather than the cancellations it led to.
      const ended = results.find((r) => r.kind === 'failed') ?? results.find((r) => r.kind === 'cancelled');
      if (ended !== undefined) return ended;
      // A lead that kept the whole search has printed the answer.
      const printed = (results[0] as { kind: 'done'; result: ToolSummary | null }).result;
      if (printed !== null) return doneWith(printed);
      if (cancelled) return { kind: 'cancelled' };
      merge = s.runTask('grepMerge', s.shardDir, s.request, sink, { peers: split.counts.splice(0) });
      const merged = await merge.outcome;
      return merged.kind === 'done' ? doneWith(merged.result as ToolSummary) : merged;
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
 * Output of content shares that wait for the shares before them, queued at once over all calls.
 * Each share's thread searches on while its ring has room; past this, the shares after the
 * current one of the call that crossed it are paused until their turn, so that a slow client
 * holds about this much in the HTTP thread, whatever the answer's size.
 */
const HELD_BYTES = 64 * 1024 * 1024;
let heldBytes = HELD_BYTES;
let queuedBytes = 0;

/** Bytes of content shares' output queued now, waiting for the shares before them (for tests). */
export function waitingBytes(): number {
  return queuedBytes;
}

/** Sets the bytes queued before a waiting share is paused; HELD_BYTES without an argument (for tests). */
export function holdAtMost(bytes = HELD_BYTES): void {
  heldBytes = bytes;
}

/**
 * A content-mode grep split into path ranges: the lead streams its range to the client at once;
 * each further share's chunks queue until the shares before it have ended, its thread searching
 * on until its ring (SHARE_WINDOW chunks, read-protocol.ts) is full or HELD_BYTES are queued.
 */
function parallelContent(s: Splitter, sink: ChunkSink): ReadCall {
  const context = s.settings.before > 0 || s.settings.after > 0;
  let current = 0; // the share whose output goes to the client
  let printed = -1; // the last share that sent the client something
  const queued: Array<Array<[Uint8Array, () => void]>> = [];
  const forward = (i: number, data: Uint8Array, release: () => void): void => {
    // `--` separates the last group of one share from the first of the next, as within one.
    if (printed !== i && printed !== -1 && context) sink(SEPARATOR, () => {});
    printed = i;
    sink(data, release);
  };
  /** Share i's queued chunks, taken out of the count. */
  const dequeue = (i: number): Array<[Uint8Array, () => void]> => {
    const chunks = queued[i]?.splice(0) ?? [];
    for (const [data] of chunks) queuedBytes -= data.length;
    return chunks;
  };
  let finished = false;
  let paused = false;
  const split = startShares(s, 'grep', (i) => {
    queued[i] = [];
    return (data, release) => {
      // After the call ended, a cancelled share's last chunk: nobody will send it.
      if (finished) release();
      else if (i === current) forward(i, data, release);
      else {
        queued[i].push([data, release]);
        queuedBytes += data.length;
        // Every share after the current one, so that one not yet started sends nothing either.
        if (queuedBytes > heldBytes && !paused) {
          paused = true;
          for (const share of split.started.slice(current + 1)) share.pause(true);
        }
      }
    };
  });
  const inOrder = async (): Promise<ReadOutcome> => {
    const shares = await split.shares;
    const summaries: GrepContentSummary[] = [];
    for (const [i, share] of shares.entries()) {
      // Share i's output follows once the shares before it have ended.
      current = i;
      share.pause(false);
      for (const [data, release] of dequeue(i)) forward(i, data, release);
      const result = await share.outcome;
      if (result.kind !== 'done') {
        for (const t of shares) t.cancel();
        return result;
      }
      summaries.push(result.result as GrepContentSummary);
    }
    const footer = grepContentFooter(summaries);
    if (footer !== null) sink(Buffer.from(footer), () => {});
    return {
      kind: 'done',
      resultCount: summaries.reduce((n, r) => n + r.resultCount, 0),
      grep: { candidates: summaries.reduce((n, r) => n + r.candidates, 0), verifiedBytes: summaries.reduce((n, r) => n + r.verifiedBytes, 0) },
    };
  };
  const outcome = (async (): Promise<ReadOutcome> => {
    try {
      return await inOrder();
    } finally {
      // A cancelled or failed call leaves chunks that will never be sent.
      finished = true;
      for (let i = 0; i < queued.length; i++) for (const [, release] of dequeue(i)) release();
    }
  })();
  return { outcome, cancel: split.cancel };
}

/** Thrown on a read thread while a merge waits for a collection and the call is cancelled. */
export class TaskCancelled extends Error {}

/**
 * The output of a `grep`, `grepShare` or `grepMerge` task on a read thread; a lead's split goes
 * to `report`.
 */
export function grepTaskOutput(task: ReadTask, reader: ShardSource, control: Int32Array, report: (split: GrepSplit) => void): Generator<Buffer, unknown> {
  const request = task.request as GrepRequest;
  const { lead, ...rest } = task.share ?? {};
  let alone = false; // a lead that reported no further shares
  const onSplit = (split: GrepSplit): void => {
    alone = split.shares.length === 0;
    report(split);
  };
  const share: GrepShare = lead === undefined ? rest : { ...rest, lead: { ...lead, onSplit } };
  if (task.tool === 'grepShare') return shareCounts(reader, request, share, task.peer!, () => alone);
  if (task.tool === 'grepMerge') return mergedCounts(request, task.peers!, control);
  return grep(reader, request, share);
}

/**
 * One share of a sorted-mode grep: its counts go to `peer` (the result is then null), except
 * for a lead that kept the whole search, which prints the answer itself (no merge task).
 */
function* shareCounts(
  reader: ShardSource,
  request: GrepRequest,
  share: GrepShare,
  peer: MessagePort,
  alone: () => boolean,
): Generator<Buffer, ToolSummary | null> {
  try {
    const collection = yield* collectGrepCounts(reader, request, share);
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
    if (Atomics.load(control, CANCELLED) === 1) throw new TaskCancelled();
    Atomics.wait(control, CANCELLED, 0, 1);
  }
}
