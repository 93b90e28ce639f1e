/**
 * The originals an object store holds, whichever way it holds them: objects of their own
 * (`blobs/<account>/<sha[0:2]>/<sha>`) and blobs placed in packs (`packs/<account>/<id>`, an
 * S3 store's small originals: ingest/blob-store.ts), a placed blob counting only while its pack
 * is there.
 */
import type pg from 'pg';
import type { ObjectStore } from '../../storage/object-store.js';

/** One stored original: its SHA-256 and where it is (`blobs/…`, or `packs/…#<sha>`). */
export interface StoredOriginal {
  sha: string;
  where: string;
}

/** Every stored original; `db` reads the places of packed blobs (any role that sees every account's rows). */
export async function storedOriginals(objects: ObjectStore, db: pg.Client): Promise<StoredOriginal[]> {
  const found: StoredOriginal[] = [];
  for await (const { key } of objects.list('blobs/')) {
    const sha = /^blobs\/[^/]+\/[0-9a-f]{2}\/([0-9a-f]{64})$/.exec(key)?.[1];
    if (sha !== undefined) found.push({ sha, where: key });
  }
  const packs = new Set<string>();
  for await (const { key } of objects.list('packs/')) packs.add(key);
  const { rows } = await db.query<{ pack: string; sha256: string }>('SELECT pack, sha256 FROM blob_packs ORDER BY pack, sha256');
  for (const { pack, sha256 } of rows) if (packs.has(pack)) found.push({ sha: sha256, where: `${pack}#${sha256}` });
  return found;
}
