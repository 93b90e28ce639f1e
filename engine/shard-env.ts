/**
 * Opening and closing shard environments (format: shard-format.ts). lmdb-js opens an
 * environment once per process and shares it between threads; within a thread one ShardEnv per
 * directory is shared by the reader and a writer, reference-counted, and closed with its last
 * user.
 */

import { basename, extname, resolve } from 'node:path';
import * as lmdb from 'lmdb';
import { ABORT, open, type Database, type Key, type RootDatabase, type Transaction } from 'lmdb';
import { checkFormat, openShardDatabases, PAGE_BYTES, type ShardDatabases } from './shard-format.js';

/** The databases of one open environment. */
export interface ShardEnv extends ShardDatabases {
  /** Absolute directory of the shard. */
  dir: string;
  /** The LMDB environment, for transactions. */
  env: RootDatabase;
}

interface CachedEnv {
  shard: ShardEnv;
  refs: number;
}

const envs = new Map<string, CachedEnv>();

/**
 * Opens (or shares) the environment of the shard in `dir`, creating it if missing. Readers and
 * the writer use the same options: lmdb-js refuses to open an environment read-write in a
 * process where it is already open read-only. A shard of another format is refused.
 */
export function acquireShardEnv(directory: string): ShardEnv {
  const dir = resolve(directory);
  const cached = envs.get(dir);
  if (cached !== undefined) {
    cached.refs++;
    return cached.shard;
  }
  const env = open({
    path: dir,
    noSubdir: false,
    maxDbs: 10,
    maxReaders: 1024,
    pageSize: PAGE_BYTES,
    // Commits return only once fsynced, so a visible document is a durable one.
    overlappingSync: false,
  });
  // lmdb-js opens each named database in a write transaction of its own: one for all eight
  // takes about a fifth off a cold open.
  const shard: ShardEnv = { dir, env, ...env.transactionSync(() => openShardDatabases(env)) };
  try {
    checkFormat(dir, shard.info);
  } catch (error) {
    void env.close();
    throw error;
  }
  envs.set(dir, { shard, refs: 1 });
  return shard;
}

/** Releases a reference taken by acquireShardEnv; the last one closes the environment. */
export async function releaseShardEnv(shard: ShardEnv): Promise<void> {
  const cached = envs.get(shard.dir);
  if (cached === undefined || cached.shard !== shard) return;
  if (--cached.refs > 0) return;
  envs.delete(shard.dir);
  closeKeptCursors(shard);
  await shard.env.close();
  forgetStores(shard);
}

/**
 * Lets go of the free-page list the environment's write transactions keep between them. The LMDB
 * of lmdb-js keeps the pages it reclaimed from the free list in memory from one write transaction
 * to the next, frees that list when a transaction aborts, but not when the environment closes:
 * each shard written and closed left it behind (1-4 KB for a shard of small files, once per
 * writer opened), in the writing thread's allocator arena (docs/architecture.md, "What a
 * workspace costs"). A writer calls this once its last transaction is done, before it releases
 * the environment: an empty write transaction, aborted.
 */
export function dropFreePageList(shard: ShardEnv): void {
  shard.env.transactionSync(() => ABORT);
}

/** What lmdb-js keeps on a database's native handle (`db`, undeclared in its types). */
export interface KeptCursor {
  db?: { availableCursor?: { close(): void } | null };
}

/**
 * A range read on a thread's shared read transaction leaves its cursor on the database's native
 * handle for the next one (`availableCursor`). lmdb-js frees a cursor only when it is closed,
 * not when it is collected nor when its environment closes: each shard written and closed left
 * about 400 bytes per database it had ranged over, scattered through the thread's allocator
 * arena (docs/architecture.md, "What a workspace costs").
 */
function closeKeptCursors(shard: ShardEnv): void {
  // Its root and its named databases: every field but `dir`.
  for (const [key, store] of Object.entries(shard)) {
    const db = key === 'dir' ? undefined : (store as KeptCursor).db;
    const cursor = db?.availableCursor;
    if (db === undefined || cursor === undefined || cursor === null) continue;
    db.availableCursor = null;
    cursor.close();
  }
}

/**
 * lmdb-js keeps every database it opens in a module-level map by name (`allDbs`, undeclared in
 * its types) and never removes one on close, so every environment a thread had ever opened
 * stayed reachable: its 64 KB write buffer and the closures of its methods, about 150 KB a
 * shard per thread (docs/architecture.md, "What a workspace costs"). Its entries go with it.
 */
function forgetStores(shard: ShardEnv): void {
  const stores = (lmdb as unknown as { allDbs?: Map<string, { env?: unknown }> }).allDbs;
  if (stores === undefined) return;
  const native = (shard.env as unknown as { env: unknown }).env;
  // Keyed as lmdb-js names them: the path's base name, then `-` and each named database's name
  // (ShardDatabases's keys are those names). Looked up, not searched: a search of the whole map
  // at every close was a tenth of a read thread's time when reads spread over many workspaces.
  const name = basename(shard.dir, extname(shard.dir));
  const databases = Object.keys(shard).filter((key) => key !== 'dir' && key !== 'env');
  for (const key of [name, ...databases.map((db) => `${name}-${db}`)]) if (stores.get(key)?.env === native) stores.delete(key);
}

type FastGet<K> = (key: K, options?: { transaction: Transaction }) => Uint8Array | undefined;

/**
 * `db.getBinaryFast` (typed: lmdb-js's declaration lacks the options). The result is a view of
 * the reused read buffer, exactly the value's length: valid only until the next read on the
 * thread.
 */
export function readFast<K extends Key>(db: Database<Buffer, K>, key: K, options?: { transaction: Transaction }): Buffer | undefined {
  const raw = (db.getBinaryFast as unknown as FastGet<K>).call(db, key, options);
  if (raw === undefined) return undefined;
  // lmdb-js sets `length` to the value size; the underlying memory may be larger.
  return Buffer.from(raw.buffer, raw.byteOffset, (raw as { length: number }).length);
}
