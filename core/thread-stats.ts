/**
 * What each thread of the service holds and has used, for the metrics: every worker thread (read
 * threads, the ingest thread) posts its heap, its open shards and its CPU time on a
 * BroadcastChannel every second, and the HTTP thread keeps the latest of each
 * (ThreadStatsListener) to add its own when scraped.
 */
import { readFileSync } from 'node:fs';
import { getHeapStatistics } from 'node:v8';
import { BroadcastChannel, threadId } from 'node:worker_threads';

const CHANNEL = 'agent-vfs:thread-stats';
/** How often a worker thread reports. */
const REPORT_MS = 1000;
/**
 * A thread not heard from for this long has ended: longer than a grep may run (it reports only
 * between tasks' chunks) and than a start-up check of every shard.
 */
const STALE_MS = 120_000;

/** One thread's state. */
export interface ThreadStat {
  /** What the thread does: `http`, `read` or `ingest` (a metric label: never a workspace). */
  kind: string;
  heapUsedBytes: number;
  heapTotalBytes: number;
  /** Memory outside the V8 heap held by the thread's objects: Buffers' and ArrayBuffers' contents. */
  externalBytes: number;
  /** Shards the thread holds open (readers and writers). */
  openShards: number;
  /** CPU time the thread has used since it started, in seconds; null where the system does not say (Linux does). */
  cpuSeconds: number | null;
}

/**
 * The calling thread's CPU time in seconds, from Linux's per-thread scheduler statistics
 * (nanoseconds on the CPU); null elsewhere. Node.js 20 has no per-thread figure of its own
 * (`process.cpuUsage()` is the whole process's).
 */
export function threadCpuSeconds(): number | null {
  try {
    return Number(readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ')[0]) / 1e9;
  } catch {
    return null;
  }
}

/** This thread's state now. */
export function threadStat(kind: string, openShards: number): ThreadStat {
  const heap = getHeapStatistics();
  return {
    kind,
    heapUsedBytes: heap.used_heap_size,
    heapTotalBytes: heap.total_heap_size,
    externalBytes: heap.external_memory,
    openShards,
    cpuSeconds: threadCpuSeconds(),
  };
}

/** Makes this worker thread report its state every REPORT_MS, without keeping it alive. */
export function reportThreadStats(kind: string, openShards: () => number): void {
  const channel = new BroadcastChannel(CHANNEL);
  channel.unref();
  const timer = setInterval(() => channel.postMessage({ id: threadId, at: Date.now(), stat: threadStat(kind, openShards()) }), REPORT_MS);
  timer.unref();
}

/** The latest state of every worker thread that reports, as the HTTP thread hears it. */
export class ThreadStatsListener {
  private readonly channel = new BroadcastChannel(CHANNEL);
  private readonly latest = new Map<number, { at: number; stat: ThreadStat }>();

  constructor() {
    this.channel.onmessage = (event) => {
      const { id, at, stat } = (event as { data: { id: number; at: number; stat: ThreadStat } }).data;
      this.latest.set(id, { at, stat });
    };
    this.channel.unref();
  }

  /** The states heard within STALE_MS. */
  stats(): ThreadStat[] {
    const since = Date.now() - STALE_MS;
    for (const [id, entry] of this.latest) if (entry.at < since) this.latest.delete(id);
    return [...this.latest.values()].map((entry) => entry.stat);
  }

  close(): void {
    this.channel.close();
  }
}
