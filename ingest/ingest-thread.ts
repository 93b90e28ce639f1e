/**
 * The HTTP thread's handle on the ingest thread (ingest-thread-main.ts):
 * starts it, wakes it when a job is enqueued, and asks it for the shard
 * changes that must go through its writers (deleting a file, dropping a
 * workspace's shard).
 */
import { Worker } from 'node:worker_threads';
import { FROM_SOURCE, siblingModule, tsxUrl, workerExecArgv, workerResourceLimits } from '../core/run-mode.js';
import type { DatabaseTargets } from '../db/database.js';
import type { StorageSettings } from '../storage/open-store.js';
import type { SnapshotOptions } from './shards/snapshots.js';
import type { ExtractPoolOptions } from './extract/pool.js';
import type { IngestOptions } from './ingest-loop.js';

/** What the ingest thread starts from. */
export interface IngestThreadData {
  targets: DatabaseTargets;
  dataDir: string;
  /** Shards the thread keeps open (Config.openShards): writers, and readers apart. */
  openShards: number;
  /** Where originals are kept (the thread makes its own client). */
  storage: StorageSettings;
  /** When shards are snapshotted into the object store. */
  snapshot: SnapshotOptions;
  extract: ExtractPoolOptions;
  loop: IngestOptions;
  /** Report each extraction (metrics are on). */
  reportExtractions: boolean;
  /** One node of a cluster: shards are copies kept up to date from the change log (shards/sync.ts). */
  cluster: boolean;
}

/** Requests to the ingest thread. */
export type IngestThreadRequest = { id: number } & (
  | { type: 'poke' }
  | { type: 'checkShards' }
  | { type: 'remove'; workspaceId: string; path: string }
  | { type: 'drop'; workspaceId: string }
  | { type: 'catchUp'; workspaceId: string; accountId: string; version: number; lost: boolean }
  | { type: 'evict'; workspaceId: string }
  | { type: 'follow'; workspaceIds: string[]; snapshotted: string[] }
  | { type: 'stop' }
);

/** Messages from the ingest thread. */
export type IngestThreadReply =
  | { type: 'done'; id: number }
  | { type: 'failed'; id: number; message: string }
  | { type: 'log'; message: string }
  | { type: 'extracted'; fileType: string; outcome: 'ok' | 'error' | 'capped'; seconds: number }
  | ShardEvent;

/** A copy of a shard reached a version, or was dropped (its workspace deleted on another node). */
export type ShardEvent = { type: 'applied'; workspaceId: string; version: number } | { type: 'dropped'; workspaceId: string };

/** Told of each extraction the ingest thread ran (metrics). */
export type ExtractionObserver = (fileType: string, outcome: 'ok' | 'error' | 'capped', seconds: number) => void;

type Body<T> = T extends unknown ? Omit<T, 'id'> : never;

/** The running ingest thread. */
export class IngestThread {
  private readonly worker: Worker;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: () => void; reject: (error: Error) => void }>();

  constructor(
    data: IngestThreadData,
    log: (message: string) => void,
    onExtracted: ExtractionObserver | null = null,
    onShard: ((event: ShardEvent) => void) | null = null,
  ) {
    const entry = siblingModule('ingest-thread-main', import.meta.url);
    // From source, a one-line script registers tsx in the new thread, then imports the entry.
    const source = `import(${JSON.stringify(tsxUrl('tsx/esm/api'))}).then((tsx) => { (tsx.register ?? tsx.default.register)(); return import(${JSON.stringify(entry.href)}); })`;
    this.worker = new Worker(FROM_SOURCE ? source : entry, {
      eval: FROM_SOURCE,
      // tsx, when needed, is registered by the script above.
      execArgv: workerExecArgv(false),
      resourceLimits: workerResourceLimits(),
      workerData: data,
    });
    this.worker.on('message', (reply: IngestThreadReply) => {
      if (reply.type === 'log') {
        log(reply.message);
        return;
      }
      if (reply.type === 'extracted') {
        onExtracted?.(reply.fileType, reply.outcome, reply.seconds);
        return;
      }
      if (reply.type === 'applied' || reply.type === 'dropped') {
        onShard?.(reply);
        return;
      }
      const waiter = this.pending.get(reply.id);
      this.pending.delete(reply.id);
      if (reply.type === 'done') waiter?.resolve();
      else waiter?.reject(new Error(reply.message));
    });
    this.worker.on('error', (error) => log(`ingest thread failed: ${error.stack ?? error.message}`));
    this.worker.on('exit', () => {
      for (const waiter of this.pending.values()) waiter.reject(new Error('the ingest thread has stopped'));
      this.pending.clear();
    });
  }

  /** Wakes the loop: a job was enqueued. */
  poke(): void {
    void this.request({ type: 'poke' }).catch(() => {});
  }

  /** Rebuilds the shards the operator asked for (see ingest/shards/repair.ts); failures are logged there. */
  checkShards(): void {
    void this.request({ type: 'checkShards' }).catch(() => {});
  }

  /** Removes a deleted file from its workspace shard. */
  remove(workspaceId: string, path: string): Promise<void> {
    return this.request({ type: 'remove', workspaceId, path });
  }

  /** Closes and deletes a workspace's shard. */
  drop(workspaceId: string): Promise<void> {
    return this.request({ type: 'drop', workspaceId });
  }

  /**
   * Brings this node's copy of a workspace's shard to at least `version` (cluster mode);
   * `lost`: its directory went missing, and is restored first.
   */
  catchUp(workspaceId: string, accountId: string, version: number, lost: boolean): Promise<void> {
    return this.request({ type: 'catchUp', workspaceId, accountId, version, lost });
  }

  /** Deletes this node's copy of a workspace's shard (cluster mode: a cold copy over the cache budget). */
  evict(workspaceId: string): Promise<void> {
    return this.request({ type: 'evict', workspaceId });
  }

  /**
   * The copies this node keeps up to date as changes are committed (cluster mode): its warm ones
   * and those read lately. Any other copy catches up at its next read. `snapshotted`: the
   * workspaces whose shards this node snapshots (those it is the first warm node of).
   */
  follow(workspaceIds: string[], snapshotted: string[]): void {
    void this.request({ type: 'follow', workspaceIds, snapshotted }).catch(() => {});
  }

  /** Finishes the batch in hand, closes everything and ends the thread. */
  async stop(): Promise<void> {
    await this.request({ type: 'stop' }).catch(() => {});
    await this.worker.terminate();
  }

  private request(body: Body<IngestThreadRequest>): Promise<void> {
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.worker.postMessage({ ...body, id });
    });
  }
}
