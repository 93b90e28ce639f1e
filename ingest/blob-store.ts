/**
 * The blob store: uploaded originals, kept so that any shard can be rebuilt.
 *
 * An upload streams into a temp file under `<DATA_DIR>/blobs/tmp` while it is hashed; `seal`
 * fsyncs it; `publish` hands it to the object store (storage/), local directory or S3 bucket,
 * under the key `blobs/<account id>/<sha256[0:2]>/<sha256>`, and resolves once it is durable
 * there, so a blob that a committed file row names is stored for good. Blobs are per account
 * (an account's upload never reveals whether another holds the same bytes), so deciding that a
 * blob is unreferenced needs only that account's rows.
 *
 * Beside each blob the store keeps the text extracted from it (`text/<extractor version>/<account
 * id>/<sha256[0:2]>/<sha256>`): the same bytes are extracted once per extractor version, and a
 * lost shard is rebuilt from the texts without extracting anything again. A text goes with its
 * blob; texts of another extractor version are swept. A text that is its original byte for byte
 * (most text files) is not kept: the original is its text (files.text_is_original).
 *
 * With `handOff` (an S3 store and one node), `publish` of an upload too large for a pack leaves a
 * second name of its sealed temp file in the temp directory (`handoff-<account id>-<sha256>`, a
 * hard link), and the ingest of that node takes it (`open`) instead of fetching the original back
 * from the store. One taker gets it; an upload ingested later, or elsewhere, fetches from the
 * store, and a hand-off nobody took goes with the temp files (an hour untouched, or the next start).
 *
 * Packs: the small originals of one batch of uploads go to the store together, concatenated into
 * one object `packs/<account id>/<id>`, before the batch's transaction opens; the transaction
 * records each blob's place (`blob_packs`), and reads ask PostgreSQL where a blob is (ingest is
 * told with its job), then read that range. A pack goes once no blob is placed in it
 * (ingest/uploads.ts). On S3 an object request costs the store far more than its bytes; on a local
 * directory a file of its own cost a create, writes, two fsyncs and a rename to store, and an
 * open, a stat and a read to ingest. A small upload is held in memory until its pack is put.
 */
import { createHash, randomBytes, type Hash } from 'node:crypto';
import { link, mkdir, open, readdir, readFile, rename, rm, stat, utimes, writeFile, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import pMap from 'p-map';
import type { Database } from '../db/database.js';
import { blobPlace, type PackedAt } from '../db/files.js';
import { writeSynced } from '../storage/local-store.js';
import type { LocalCopy, ObjectStore } from '../storage/object-store.js';
import { EXTRACTOR_VERSION } from './extract/version.js';

/**
 * A blob being received. Where the store packs, a body small enough for a pack is held in memory
 * only (the pack's put makes it durable); a larger one, and every one where the store does not
 * pack, streams into a temp file.
 */
export class BlobUpload {
  private readonly hash: Hash = createHash('sha256');
  /** Bytes received so far. */
  size = 0;
  private sha: string | null = null;
  /** The body while it is small enough for a pack (the store packs); null once too large or not packing. */
  private held: Buffer[] | null;
  /** The temp file, once opened. */
  private file: FileHandle | null = null;
  private temp: string | null = null;

  constructor(private readonly store: BlobStore) {
    this.held = store.packs ? [] : null;
  }

  /** Path of the temp file, where the body is not held (named when first asked). */
  get tempPath(): string {
    this.temp ??= this.store.tempName();
    return this.temp;
  }

  /** Opens the temp file (at `begin` where nothing is held, so that a store out of reach fails before the body is read). */
  async openFile(): Promise<void> {
    this.file = await open(this.tempPath, 'wx', 0o600);
  }

  /** Appends a chunk, which is the upload's from then on (the caller serializes writes). */
  async write(chunk: Buffer): Promise<void> {
    this.hash.update(chunk);
    this.size += chunk.length;
    if (this.held !== null) {
      if (this.size <= PACK_BLOB_MAX) {
        this.held.push(chunk);
        return;
      }
      // Too large for a pack: into the temp file from here on, what was held first.
      const held = this.held;
      this.held = null;
      await this.openFile();
      for (const part of held) await this.writeFile(part);
    }
    await this.writeFile(chunk);
  }

  private async writeFile(chunk: Buffer): Promise<void> {
    let offset = 0;
    while (offset < chunk.length) offset += (await this.file!.write(chunk, offset, chunk.length - offset)).bytesWritten;
  }

  /** The whole body, when it is held for a pack. */
  get heldBytes(): Buffer | null {
    return this.held === null ? null : this.held.length === 1 ? this.held[0] : Buffer.concat(this.held, this.size);
  }

  /** Flushes a temp file to disk and closes it (a held body waits for its pack); returns the SHA-256 (hex). */
  async seal(): Promise<string> {
    if (this.file !== null) {
      await this.file.sync();
      await this.file.close();
    }
    this.sha = this.hash.digest('hex');
    return this.sha;
  }

  /** The SHA-256 of a sealed blob. */
  get sha256(): string {
    if (this.sha === null) throw new Error('the blob is not sealed');
    return this.sha;
  }

  /** Stores the sealed blob in the account's part of the object store (durably); an identical blob already there is kept. */
  async publish(accountId: string): Promise<string> {
    const handOff = await this.leaveHandOff(accountId);
    try {
      await this.store.objects.putFile(blobKey(accountId, this.sha256), this.tempPath);
    } catch (error) {
      if (handOff !== null) await rm(handOff, { force: true });
      throw error;
    }
    return this.sha256;
  }

  /** Leaves this node's ingest a hand-off of the sealed blob, where uploads are handed off; returns its path, or null. */
  private async leaveHandOff(accountId: string): Promise<string | null> {
    if (!this.store.handOff) return null;
    const path = this.store.handOffPath(accountId, this.sha256);
    // EEXIST: an upload of the same bytes has left its hand-off, which serves as well.
    return link(this.tempPath, path).then(
      () => path,
      () => null,
    );
  }

  /** Drops the temp file, if one was opened (refused or abandoned upload, or a packed one). */
  async discard(): Promise<void> {
    if (this.file === null) return;
    await this.file.close().catch(() => {});
    await rm(this.tempPath, { force: true });
  }
}

/** Whether a node hands its uploads to its own ingest: with an S3 store, on a single node (where its ingest takes them). */
export function handsOff(storage: { kind: 'local' | 's3' }, cluster: boolean): boolean {
  return storage.kind === 's3' && !cluster;
}

/** The object key of an account's blob. */
export function blobKey(accountId: string, sha: string): string {
  return `blobs/${accountId}/${sha.slice(0, 2)}/${sha}`;
}

/** The object key of the text this extractor version extracted from an account's blob. */
export function textKey(accountId: string, sha: string, version = EXTRACTOR_VERSION): string {
  return `text/${version}/${accountId}/${sha.slice(0, 2)}/${sha}`;
}

/** Originals: received on local disk, kept in the object store. */
export class BlobStore {
  private readonly tmp: string;

  constructor(
    /** Where uploads are received and fetched blobs are read (`<DATA_DIR>/blobs`). */
    root: string,
    /** Where blobs are kept. */
    readonly objects: ObjectStore,
    /**
     * Uploads are handed off on this node (see above; handsOff): `publish` leaves each for
     * ingest, `open` looks for one. Both threads' stores must say the same.
     */
    readonly handOff = false,
    /** Small originals are packed (see above), their places kept in this database; null: every blob is an object of its own (a store that only sweeps or reads). */
    private readonly packing: Database | null = null,
  ) {
    this.tmp = join(root, 'tmp');
  }

  /** Whether small originals are packed. */
  get packs(): boolean {
    return this.packing !== null;
  }

  /**
   * Stores the sealed blobs of one account's batch that are small enough (PACK_BLOB_MAX) in
   * packs of at most PACK_BYTES, one object request each, durably (each is held in memory, see
   * BlobUpload). Returns each upload's place (null: not packed, to be published on its own) and
   * the packs made.
   */
  async pack(accountId: string, uploads: readonly BlobUpload[]): Promise<{ places: Array<PackedAt | null>; packs: string[] }> {
    const places: Array<PackedAt | null> = uploads.map(() => null);
    const packs: string[] = [];
    let members: number[] = [];
    let bytes = 0;
    const flush = async (): Promise<void> => {
      if (members.length === 0) return;
      const key = `packs/${accountId}/${Date.now().toString(36)}-${randomBytes(8).toString('hex')}`;
      const parts: Buffer[] = [];
      const at = new Map<string, PackedAt>();
      let offset = 0;
      for (const i of members) {
        const upload = uploads[i];
        let place = at.get(upload.sha256);
        if (place === undefined) {
          const part = upload.heldBytes!;
          place = { pack: key, offset, size: part.length };
          at.set(upload.sha256, place);
          parts.push(part);
          offset += part.length;
        }
        places[i] = place;
      }
      await this.objects.put(key, Buffer.concat(parts, offset));
      packs.push(key);
      members = [];
      bytes = 0;
    };
    try {
      for (let i = 0; i < uploads.length; i++) {
        const size = uploads[i].size;
        if (size > PACK_BLOB_MAX) continue;
        if (bytes + size > PACK_BYTES) await flush();
        members.push(i);
        bytes += size;
      }
      await flush();
    } catch (error) {
      // The batch fails whole: the packs put before the failure hold nothing anyone will read (else the sweep takes them).
      await this.objects.deleteMany(packs).catch(() => {});
      throw error;
    }
    return { places, packs };
  }

  /** Where a blob is packed, or null when it is an object of its own. */
  private async place(accountId: string, sha: string): Promise<PackedAt | null> {
    return this.packing === null ? null : this.packing.inAccount(accountId, (tx) => blobPlace(tx, accountId, sha));
  }

  /** A packed blob's bytes, or null when it is not packed (or its pack is gone); `place` when the caller knows it (undefined: asked here). */
  private async readPacked(accountId: string, sha: string, place?: PackedAt | null): Promise<Buffer | null> {
    const at = place === undefined ? await this.place(accountId, sha) : place;
    return at === null ? null : this.objects.readRange(at.pack, at.offset, at.size);
  }

  /**
   * The bytes of blobs packed at `places`, in that order (null where a pack is gone). Blobs of a
   * pack that lie close together are read in one range: a batch's uploads are packed together.
   */
  async readPlaces(places: readonly PackedAt[]): Promise<Array<Buffer | null>> {
    const out: Array<Buffer | null> = places.map(() => null);
    const order = places.map((_, i) => i).sort((a, b) => comparePlaces(places[a], places[b]));
    const runs: Array<{ pack: string; start: number; end: number; members: number[] }> = [];
    for (const i of order) {
      const { pack, offset, size } = places[i];
      const run = runs.at(-1);
      if (run !== undefined && run.pack === pack && offset <= run.end + RANGE_GAP) {
        run.members.push(i);
        run.end = Math.max(run.end, offset + size);
      } else runs.push({ pack, start: offset, end: offset + size, members: [i] });
    }
    await pMap(
      runs,
      async ({ pack, start, end, members }) => {
        const bytes = await this.objects.readRange(pack, start, end - start);
        for (const i of members) out[i] = bytes?.subarray(places[i].offset - start, places[i].offset - start + places[i].size) ?? null;
      },
      { concurrency: RANGE_READS },
    );
    return out;
  }

  /** A new name in the temp directory. */
  tempName(): string {
    return join(this.tmp, randomBytes(12).toString('hex'));
  }

  /** A temp file holding `bytes`, for an extraction process to read. */
  async copyOf(bytes: Buffer): Promise<LocalCopy> {
    const path = this.tempName();
    await writeFile(path, bytes, { flag: 'wx', mode: 0o600 });
    return { path, temporary: true, release: () => rm(path, { force: true }) };
  }

  /** Where a published upload waits for this node's ingest. */
  handOffPath(accountId: string, sha: string): string {
    return join(this.tmp, `handoff-${accountId}-${sha}`);
  }

  /** Creates the temp directory and the store's directory or bucket. */
  async init(): Promise<void> {
    await mkdir(this.tmp, { recursive: true });
    try {
      await this.objects.init();
    } catch (error) {
      throw new Error(`the object store ${this.objects.location} cannot be reached: ${error instanceof Error ? error.message : String(error)}`);
    }
  }

  /** Starts receiving a blob. */
  async begin(): Promise<BlobUpload> {
    const upload = new BlobUpload(this);
    if (!this.packs) await upload.openFile();
    return upload;
  }

  /**
   * A local file holding an account's blob, to read until released: the upload's own hand-off
   * when this node received it and nobody took it yet, else the stored object; null when it is
   * not stored. `place`: where it is packed, when the caller knows (undefined: asked here).
   */
  async open(accountId: string, sha: string, place?: PackedAt | null): Promise<LocalCopy | null> {
    const handOff = await this.takeHandOff(accountId, sha);
    if (handOff !== null) return handOff;
    const packed = await this.readPacked(accountId, sha, place);
    return packed === null ? this.objects.getFile(blobKey(accountId, sha), this.tmp) : this.copyOf(packed);
  }

  /** The upload's hand-off, taken (see above), or null when none is waiting on this node. */
  private async takeHandOff(accountId: string, sha: string): Promise<LocalCopy | null> {
    // Where uploads are not handed off none is ever waiting (and a failed rename costs an error a file).
    if (!this.handOff) return null;
    const taken = this.tempName();
    try {
      // One taker: a rename succeeds once. Touched, so the temp sweep (by age) leaves it while read.
      await rename(this.handOffPath(accountId, sha), taken);
      const now = new Date();
      await utimes(taken, now, now);
      return { path: taken, temporary: true, release: () => rm(taken, { force: true }) };
    } catch {
      // None waiting (the usual ENOENT), or swept as it was taken: the store has it.
      return null;
    }
  }

  /** Drops the upload's hand-off, if this node has one waiting: its text was found kept. */
  async dropHandOff(accountId: string, sha: string): Promise<void> {
    await rm(this.handOffPath(accountId, sha), { force: true });
  }

  /**
   * The text of an account's blob as a shard holds it: the original itself when `isOriginal`,
   * else the text kept beside it; null when that is not stored. `place` as for `open`.
   */
  async text(accountId: string, sha: string, isOriginal: boolean | null, place?: PackedAt | null): Promise<Buffer | null> {
    if (isOriginal !== true) return this.cachedText(accountId, sha);
    const handOff = await this.takeHandOff(accountId, sha);
    if (handOff !== null) return readCopy(handOff);
    return (await this.readPacked(accountId, sha, place)) ?? this.objects.read(blobKey(accountId, sha));
  }

  /** The text this extractor version extracted from the blob before, or null when it was never kept. */
  async cachedText(accountId: string, sha: string): Promise<Buffer | null> {
    return this.objects.read(textKey(accountId, sha));
  }

  /** Keeps the text extracted from a blob, so that the same bytes are never extracted again by this extractor version. */
  async keepText(accountId: string, sha: string, text: Buffer): Promise<void> {
    const path = this.tempName();
    // Synced before it is published: a text cut short by a crash would be served as the whole.
    await writeSynced(path, text);
    try {
      await this.objects.putFile(textKey(accountId, sha), path);
    } catch (error) {
      await rm(path, { force: true });
      throw error;
    }
  }

  /** Removes every temp file: at start, when no upload of this process can own one. */
  async removeTemp(): Promise<number> {
    const names = await readdir(this.tmp).catch(() => [] as string[]);
    for (const name of names) await rm(join(this.tmp, name), { force: true });
    return names.length;
  }

  /** Removes blobs of one account and the texts kept from them (no error for absent ones), in as few requests as the store takes. */
  async remove(accountId: string, shas: readonly string[]): Promise<void> {
    await this.objects.deleteMany(shas.flatMap((sha) => [textKey(accountId, sha), blobKey(accountId, sha)]));
  }

  /**
   * Removes temp files untouched for `tempGraceMs` (an upload still receiving
   * touches its file with every chunk), and hands every stored blob, a chunk of
   * one account's at a time, to `collect`, which removes those no file
   * references (under the lock uploads publish under) and returns how many.
   * Returns how many files were removed; stops early once `signal` aborts.
   */
  async sweep(collect: (accountId: string, shas: string[]) => Promise<number>, tempGraceMs: number, signal?: AbortSignal): Promise<number> {
    const cutoff = Date.now() - tempGraceMs;
    let removed = 0;
    for (const name of await readdir(this.tmp).catch(() => [] as string[])) {
      const path = join(this.tmp, name);
      const mtime = (await stat(path).catch(() => null))?.mtimeMs;
      if (mtime !== undefined && mtime <= cutoff) {
        await rm(path, { force: true });
        removed++;
      }
    }
    const chunks = new Map<string, Set<string>>();
    const add = async (accountId: string, sha: string): Promise<void> => {
      const chunk = chunks.get(accountId) ?? new Set<string>();
      chunk.add(sha);
      chunks.set(accountId, chunk);
      if (chunk.size === SWEEP_BATCH) {
        removed += await collect(accountId, [...chunk]);
        chunks.delete(accountId);
      }
    };
    for await (const { key } of this.objects.list('blobs/')) {
      if (signal?.aborted === true) return removed;
      const parts = /^blobs\/([^/]+)\/[0-9a-f]{2}\/([0-9a-f]{64})$/.exec(key);
      if (parts !== null) await add(parts[1], parts[2]); // else the local store's temp directory
    }
    // Texts whose blob is gone (a crash between the two removals), and every text of another extractor version.
    for await (const { key } of this.objects.list('text/')) {
      if (signal?.aborted === true) return removed;
      const parts = /^text\/([^/]+)\/([^/]+)\/[0-9a-f]{2}\/([0-9a-f]{64})$/.exec(key);
      if (parts === null) continue;
      if (parts[1] === String(EXTRACTOR_VERSION)) await add(parts[2], parts[3]);
      else {
        await this.objects.delete(key);
        removed++;
      }
    }
    for (const [accountId, chunk] of chunks) removed += await collect(accountId, [...chunk]);
    return removed;
  }
}

/** The bytes of a local copy, which it then releases. */
async function readCopy(copy: LocalCopy): Promise<Buffer> {
  try {
    return await readFile(copy.path);
  } finally {
    await copy.release();
  }
}

/** Blobs of one pack at most this far apart are read in one range (readPlaces). */
const RANGE_GAP = 64 * 1024;
/** Ranges read at once. */
const RANGE_READS = 8;

function comparePlaces(a: PackedAt, b: PackedAt): number {
  return a.pack < b.pack ? -1 : a.pack > b.pack ? 1 : a.offset - b.offset;
}

/** Largest original put in a pack; a larger one is an object of its own. */
export const PACK_BLOB_MAX = 1024 * 1024;
/** Most bytes in one pack (held in memory while it is put). */
export const PACK_BYTES = 16 * 1024 * 1024;

/** Blobs checked in one transaction by a sweep (one advisory lock each), and removed in one deletion. */
export const SWEEP_CHUNK = 100;
/** Blobs a sweep hands its `collect` at once: those a file references are passed over in one statement. */
export const SWEEP_BATCH = 5000;
