/**
 * The catalogs (shard-catalog.ts) that the readers of one thread hold, counted against one
 * budget of live documents: when a reader takes a catalog, the least recently used catalogs
 * of the other readers are dropped until the thread is within the budget again. ShardReader
 * decides when a shard has earned a catalog; this file keeps the thread's account.
 */

/** A reader holding a catalog, as the thread's account sees it. */
export interface CatalogHolder {
  /** When the holder last began a snapshot (which used its catalog), in the thread's snapshot count. */
  readonly lastSnapshot: number;
  /** Drops the holder's catalog; it calls releaseCatalog. */
  dropCatalog(): void;
}

/** The live documents of each holder's catalog, in the order they were taken. */
const held = new Map<CatalogHolder, number>();
let heldDocs = 0;

/**
 * Counts the catalog of `docs` live documents that `holder` now holds (in place of any it held),
 * then drops the least recently used catalogs of other holders while the thread holds more than
 * `budget` documents.
 */
export function holdCatalog(holder: CatalogHolder, docs: number, budget: number): void {
  releaseCatalog(holder);
  held.set(holder, docs);
  heldDocs += docs;
  while (heldDocs > budget) {
    let oldest: CatalogHolder | null = null;
    for (const other of held.keys()) if (other !== holder && (oldest === null || other.lastSnapshot < oldest.lastSnapshot)) oldest = other;
    if (oldest === null) break;
    oldest.dropCatalog();
  }
}

/** Stops counting the catalog of `holder`, if it holds one. */
export function releaseCatalog(holder: CatalogHolder): void {
  const docs = held.get(holder);
  if (docs === undefined) return;
  held.delete(holder);
  heldDocs -= docs;
}
