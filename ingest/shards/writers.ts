/**
 * The shard writers of the process: one per workspace, opened on first use
 * under `<DATA_DIR>/shards/<workspace id>`, closed when idle the longest once
 * more than `maxOpen` are open, and closed after WRITER_IDLE_MS without a
 * write. All writes of a workspace go through its one writer, which
 * serializes them.
 *
 * An environment that was written keeps the pages of its largest write
 * transaction in memory (LMDB reuses them) until every thread has closed it,
 * megabytes for a shard of small files: so once a writer closes, every
 * thread is asked to close its readers of that shard (they reopen on the
 * next read), and the memory goes (docs/architecture.md, "What a workspace
 * costs").
 */
import { rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { JobFile } from '../../db/file-rows.js';
import { closeReadersEverywhere, openLmdbReader } from '../../engine/reader-cache.js';
import { acquireShardEnv, releaseShardEnv } from '../../engine/shard-env.js';
import type { DocMeta } from '../../engine/shard-format.js';
import { type DocInput, type ShardWriter, openShardWriter } from '../../engine/shard-writer.js';

/** A writer unused this long is closed (see the module comment). */
export const WRITER_IDLE_MS = 10_000;

/** The directory holding every workspace shard of a data directory. */
export function shardsRoot(dataDir: string): string {
  return join(dataDir, 'shards');
}

/** A document handed to a shard. */
export type ShardDoc = DocInput;

/** The document of a ready file's row with its text: the version is the blob's hash (same blob, same text). */
export function shardDoc(file: JobFile, text: Buffer): ShardDoc {
  return {
    path: file.path,
    text,
    sizeBytes: file.sizeBytes,
    contentType: file.contentType,
    updatedAt: file.updatedAt,
    visibility: file.visibility,
    version: file.blobSha256,
  };
}

/**
 * Where shards live and how to write them. The operations on one workspace
 * run one after another, so that dropping a shard waits for a write in
 * progress; a write for a workspace dropped meanwhile (its batch was read
 * before the deletion) is skipped rather than recreating the directory.
 */
export class Shards {
  /** Open writers, least recently used first. */
  private readonly writers = new Map<string, ShardWriter>();
  /** When each open writer was last used (ms, performance.now()). */
  private readonly used = new Map<string, number>();
  private readonly idleTimer: NodeJS.Timeout;
  /** The last operation queued per workspace. */
  private readonly queued = new Map<string, Promise<void>>();
  /** Workspaces dropped in this process (ids are never reused: one entry per deletion). */
  private readonly dropped = new Set<string>();
  /** Workspaces written since their shard's level 0 was last merged by `mergeWritten`. */
  private readonly written = new Set<string>();

  constructor(
    /** The directory holding one sub-directory per workspace. */
    readonly root: string,
    private readonly maxOpen = 64,
    private readonly idleMs = WRITER_IDLE_MS,
  ) {
    this.idleTimer = setInterval(() => this.closeIdle(), Math.max(100, idleMs / 4));
    this.idleTimer.unref();
  }

  /** Closes the writers unused for idleMs, each in its workspace's turn. */
  private closeIdle(): void {
    const before = performance.now() - this.idleMs;
    for (const [workspaceId, at] of this.used) {
      if (at <= before && !this.queued.has(workspaceId)) void this.release(workspaceId).catch(() => {});
    }
  }

  /** Writers open now (for tests and monitoring). */
  get openWriters(): number {
    return this.writers.size;
  }

  /** The directory of a workspace's shard. */
  dir(workspaceId: string): string {
    return join(this.root, workspaceId);
  }

  /** Writes a batch of documents durably (one LMDB transaction), compacting postings when due. */
  write(workspaceId: string, docs: ShardDoc[]): Promise<void> {
    return this.inTurn(workspaceId, async () => {
      const writer = this.writer(workspaceId);
      await writer.writeBatch(docs);
      this.written.add(workspaceId);
      await writer.compactIfNeeded();
    });
  }

  /**
   * Merges the level-0 segments of every shard written since the last call into its level-1
   * lists (ShardWriter.flush), one shard after another. Worth it once ingest goes idle: each
   * list a grep reads is looked up once more per segment left (docs/benchmarks.md,
   * "Quadgrams": the query of bench/engine-phases.ts before and after a merge).
   */
  async mergeWritten(): Promise<void> {
    const written = [...this.written];
    this.written.clear();
    for (const workspaceId of written) await this.inTurn(workspaceId, () => this.writer(workspaceId).flush());
  }

  /**
   * Writes a consistent copy of a workspace's shard (LMDB's own copy, `data.mdb`) into the empty
   * directory `target`, between two writes; false when the workspace has no shard.
   */
  async backup(workspaceId: string, target: string): Promise<boolean> {
    let copied = false;
    await this.inTurn(workspaceId, async () => {
      if ((await stat(this.dir(workspaceId)).catch(() => null)) === null) return;
      const shard = acquireShardEnv(this.dir(workspaceId));
      try {
        await shard.env.backup(target, false);
        copied = true;
      } finally {
        await releaseShardEnv(shard);
      }
    });
    return copied;
  }

  /** What a workspace's shard holds for `path` (opening the shard, empty if it was missing). */
  lookup(workspaceId: string, path: string): DocMeta | undefined {
    return this.writer(workspaceId).lookup(path);
  }

  /** True when the workspace's shard is on disk. */
  async exists(workspaceId: string): Promise<boolean> {
    return (await stat(join(this.dir(workspaceId), 'data.mdb')).catch(() => null)) !== null;
  }

  /**
   * Closes the workspace's writer once the operations queued before have ended, without
   * forgetting the workspace (its shard directory went missing, and is restored in its place).
   */
  release(workspaceId: string): Promise<void> {
    return this.inTurn(workspaceId, () => this.closeWriter(workspaceId));
  }

  /**
   * Closes the workspace's writer and deletes its shard, without forgetting the workspace (a copy
   * dropped to keep a node's cache under its budget, filled again on its next read).
   */
  evict(workspaceId: string): Promise<void> {
    return this.inTurn(workspaceId, () => this.deleteShard(workspaceId));
  }

  /** Removes one path from a workspace's shard. */
  remove(workspaceId: string, path: string): Promise<void> {
    return this.inTurn(workspaceId, async () => {
      await this.writer(workspaceId).deleteDocument(path);
    });
  }

  /**
   * What a workspace's shard holds: path → version (the blob's SHA-256) of
   * every live document; null when the shard does not exist. Throws when the
   * shard cannot be opened or read.
   */
  async contents(workspaceId: string): Promise<Map<string, string> | null> {
    if (!(await this.exists(workspaceId))) return null;
    const reader = openLmdbReader(this.dir(workspaceId));
    try {
      const snapshot = reader.snapshot();
      try {
        const out = new Map<string, string>();
        for (const doc of snapshot.docsInRange('/', '0')) out.set(doc.path, doc.version);
        return out;
      } finally {
        snapshot.done();
      }
    } finally {
      await reader.close();
    }
  }

  /**
   * Empties a workspace's shard in place, one document at a time: the read
   * threads may hold the same LMDB environment open, and must see the shard
   * empty, then refilled, rather than keep reading a deleted file.
   */
  clear(workspaceId: string): Promise<void> {
    return this.inTurn(workspaceId, async () => {
      const paths = await this.contents(workspaceId);
      if (paths === null) return;
      const writer = this.writer(workspaceId);
      for (const path of paths.keys()) await writer.deleteDocument(path);
      await writer.compactIfNeeded();
    });
  }

  /** Closes and deletes a workspace's shard, once the operations queued before have ended. */
  drop(workspaceId: string): Promise<void> {
    this.dropped.add(workspaceId);
    return this.inTurn(workspaceId, () => this.deleteShard(workspaceId), true);
  }

  /** Closes the workspace's writer, if open. */
  private async closeWriter(workspaceId: string): Promise<void> {
    const writer = this.writers.get(workspaceId);
    this.writers.delete(workspaceId);
    this.used.delete(workspaceId);
    if (writer !== undefined) await this.closed(writer, workspaceId);
  }

  /** Closes `writer`, then asks every thread to close its readers of the shard (see the module comment). */
  private async closed(writer: ShardWriter, workspaceId: string): Promise<void> {
    await writer.close();
    closeReadersEverywhere(this.dir(workspaceId));
  }

  /** Closes the workspace's writer and deletes its shard directory. */
  private async deleteShard(workspaceId: string): Promise<void> {
    await this.closeWriter(workspaceId);
    await rm(this.dir(workspaceId), { recursive: true, force: true });
  }

  /** Closes every writer. */
  async close(): Promise<void> {
    clearInterval(this.idleTimer);
    const writers = [...this.writers.values()];
    this.writers.clear();
    this.used.clear();
    await Promise.all(writers.map((w) => w.close()));
  }

  /** Runs `op` after the workspace's queued operations; unless `evenDropped`, skips it if the workspace was dropped. */
  private inTurn(workspaceId: string, op: () => Promise<void>, evenDropped = false): Promise<void> {
    const run = (): Promise<void> => (this.dropped.has(workspaceId) && !evenDropped ? Promise.resolve() : op());
    const done = (this.queued.get(workspaceId) ?? Promise.resolve()).then(run, run);
    this.queued.set(workspaceId, done);
    const forget = (): void => {
      if (this.queued.get(workspaceId) === done) this.queued.delete(workspaceId);
    };
    done.then(forget, forget);
    return done;
  }

  private writer(workspaceId: string): ShardWriter {
    this.used.set(workspaceId, performance.now());
    let writer = this.writers.get(workspaceId);
    if (writer !== undefined) {
      // Most recently used last.
      this.writers.delete(workspaceId);
      this.writers.set(workspaceId, writer);
      return writer;
    }
    if (this.writers.size >= this.maxOpen) {
      const [oldestId, oldest] = this.writers.entries().next().value!;
      this.writers.delete(oldestId);
      this.used.delete(oldestId);
      void this.closed(oldest, oldestId).catch(() => {});
    }
    writer = openShardWriter(this.dir(workspaceId));
    this.writers.set(workspaceId, writer);
    return writer;
  }
}
