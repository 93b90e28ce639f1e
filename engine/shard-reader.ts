/**
 * A shard opened for reading (format: shard-format.ts): it hands out snapshots
 * (shard-snapshot.ts), one per tool call, and serves them from an in-memory catalog of the
 * live records (shard-catalog.ts) once the shard has earned one. Readers are opened and kept
 * per thread by reader-cache.ts; the thread's catalogs share one budget (catalog-cache.ts).
 */

import { holdCatalog, releaseCatalog, type CatalogHolder } from './catalog-cache.js';
import type { ShardCatalog } from './shard-catalog.js';
import { releaseShardEnv, type ShardEnv } from './shard-env.js';
import { ShardSnapshot } from './shard-snapshot.js';

/** Live documents the catalogs of one thread may hold in all (about 470 bytes each on the Linux tree, so about 94 MB; docs/benchmarks.md, "The catalog"). */
export const CATALOG_BUDGET_DOCS = 200_000;

/**
 * Readers a thread keeps open by default (reader-cache.ts; the service's VFS_OPEN_SHARDS): each
 * holds three file descriptors, a memory map and 90-230 KB (docs/architecture.md, "What a
 * workspace costs").
 */
export const DEFAULT_OPEN_SHARDS = 128;

/** Limits of one thread's shard readers (setReaderLimits); undefined means the default. */
export interface ReaderLimits {
  /** Readers the thread keeps open (see openShardReader); default DEFAULT_OPEN_SHARDS. */
  maxOpen?: number;
  /** Live documents the catalogs of the thread may hold in all; default CATALOG_BUDGET_DOCS. */
  catalogBudget?: number;
  /**
   * Live documents of the largest shard the thread catalogs: building one reads them all in one
   * go (about 1 µs each), so a thread that must answer others meanwhile sets it lower; default
   * CATALOG_BUDGET_DOCS.
   */
  largestCatalog?: number;
}

/** The limits of this thread's readers, defaults applied. */
let limits: Readonly<Required<ReaderLimits>> = readerLimitsWithDefaults({});

/** A copy of `given` with every default applied. */
function readerLimitsWithDefaults(given: ReaderLimits): Readonly<Required<ReaderLimits>> {
  return Object.freeze({
    maxOpen: given.maxOpen ?? DEFAULT_OPEN_SHARDS,
    catalogBudget: given.catalogBudget ?? CATALOG_BUDGET_DOCS,
    largestCatalog: given.largestCatalog ?? CATALOG_BUDGET_DOCS,
  });
}

/**
 * Sets the limits of this thread's readers (those not given: their defaults), for the readers
 * open and those opened later. Readers are cached per thread, so their limits are the thread's.
 */
export function setReaderLimits(given: ReaderLimits): void {
  limits = readerLimitsWithDefaults(given);
}

/** The limits of this thread's readers. */
export function readerLimits(): Readonly<Required<ReaderLimits>> {
  return limits;
}

/**
 * What the tools read a shard through: an open ShardReader, or a small shard's image
 * (reader-cache.ts, openShardReader).
 */
export interface ShardSource {
  /** Begins a snapshot; call its `done()` when finished. */
  snapshot(): ShardSnapshot;
  /** Live documents of the last cataloged version, or null without a catalog (a hint). */
  readonly catalogedDocs: number | null;
  /** Makes the next snapshot begin from the latest commit. */
  renew(): void;
}

/** A shard opened for reading: hands out snapshots. Cheap to keep open per thread. */
export class ShardReader implements CatalogHolder, ShardSource {
  private closed = false;
  /** The catalog of the newest version seen that earned one (shard-catalog.ts). */
  private catalog: ShardCatalog | null = null;
  /** Records that snapshots of `spentVersion` read from LMDB, and its live documents. */
  private spent = 0;
  private spentVersion = -1;
  private spentVersionDocs = 0;
  private static tick = 0;
  /** Snapshots begun and not yet done: while any is, the reader is not closed to make room. */
  private inUse = 0;
  /**
   * When the reader last began a snapshot (ShardReader.tick). A reader holding a catalog used it
   * in that snapshot (one of a newer version drops it), so this also orders the catalogs.
   */
  private touched = 0;
  /** Set by closeWhenIdle while snapshots are in use: the last one to end closes the reader. */
  private closeWhenDone = false;
  private readonly account = (snapshot: ShardSnapshot, recordsRead: number): void => {
    if (--this.inUse === 0 && this.closeWhenDone) void this.close().catch(() => {});
    if (snapshot.docsVersion === this.spentVersion) this.spent += recordsRead;
  };

  /**
   * A catalog is built once snapshots of one version have read this many times its live
   * documents' records from LMDB (1: the ski-rental rule; 0: at once; Infinity: never).
   */
  catalogAfter = 1;

  /** `onClose` is told when the reader closes (reader-cache.ts forgets it then). */
  constructor(
    readonly shard: ShardEnv,
    private readonly onClose: (reader: ShardReader) => void = () => {},
  ) {}

  /** lmdb-js renews its cached read transaction lazily: the next snapshot begins from the latest commit. */
  renew(): void {
    this.shard.env.resetReadTxn();
  }

  /** Begins a snapshot of the latest committed state. */
  snapshot(): ShardSnapshot {
    if (this.closed) throw new Error(`shard reader for ${this.shard.dir} is closed`);
    const snapshot = new ShardSnapshot(this.shard, this.account);
    this.inUse++;
    this.touched = ++ShardReader.tick;
    try {
      this.serveFromCatalog(snapshot);
    } catch (error) {
      snapshot.done();
      throw error;
    }
    return snapshot;
  }

  /** Lets `snapshot` use the catalog of its version, built first if it has been earned. */
  private serveFromCatalog(snapshot: ShardSnapshot): void {
    const version = snapshot.docsVersion;
    if (this.catalog?.version !== version) {
      // Versions only grow: a catalog of an older one serves no later snapshot.
      if (this.catalog !== null) this.dropCatalog();
      if (this.spentVersion !== version) {
        this.spentVersion = version;
        this.spent = 0;
        // Read once per version: a shard that never earns a catalog must not pay for it per snapshot.
        this.spentVersionDocs = snapshot.state().liveDocs;
      }
      const live = this.spentVersionDocs;
      if (this.spent >= this.catalogAfter * Math.max(1, live) && live <= Math.min(readerLimits().largestCatalog, readerLimits().catalogBudget)) {
        this.keepCatalog(snapshot.buildCatalog());
      }
    }
    if (this.catalog?.version === version) snapshot.useCatalog(this.catalog);
  }

  /** True when no snapshot of this reader is in use. */
  get idle(): boolean {
    return this.inUse === 0;
  }

  /** When the reader last began a snapshot, as a count of the thread's snapshots. */
  get lastSnapshot(): number {
    return this.touched;
  }

  /** Keeps `catalog` as this reader's, dropping the least recently used ones of the thread over budget. */
  private keepCatalog(catalog: ShardCatalog): void {
    this.dropCatalog();
    this.catalog = catalog;
    holdCatalog(this, catalog.docs.length, readerLimits().catalogBudget);
  }

  /** Live documents of the last cataloged version, or null without a catalog (a hint: the shard may have changed since). */
  get catalogedDocs(): number | null {
    return this.catalog === null ? null : this.catalog.docs.length;
  }

  /** Drops the catalog; the next snapshots read LMDB until one is earned again. */
  dropCatalog(): void {
    if (this.catalog !== null) releaseCatalog(this);
    this.catalog = null;
    this.spent = 0;
  }

  /** Closes the reader now if no snapshot is in use, else when the last one ends. */
  closeWhenIdle(): void {
    if (this.inUse === 0) void this.close().catch(() => {});
    else this.closeWhenDone = true;
  }

  /** Closes the reader (and the environment once no writer uses it on this thread). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.dropCatalog();
    this.onClose(this);
    await releaseShardEnv(this.shard);
  }
}
