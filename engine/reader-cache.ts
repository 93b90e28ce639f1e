/**
 * The shard readers of one thread, by directory. A thread keeps at most readerLimits().maxOpen
 * readers open (each holds three file descriptors and a memory map): opening one more first
 * closes the least recently used reader that has no snapshot in use. Readers in use are never
 * closed, so the bound is exceeded only by as many shards as are being read at that moment.
 *
 * Threads also close their readers of a shard when another thread asks (closeReadersEverywhere):
 * a deleted workspace's, whose disk space is freed only once every handle is closed, and one
 * whose writer closed, whose environment holds the pages of its largest write until the last
 * thread closes it (docs/architecture.md, "What a workspace costs").
 *
 * A small shard that the thread has not open is read from its image (shard-image.ts) instead:
 * the thread keeps as many images as readers, each with its file held open, and drops a
 * shard's image with its reader.
 */

import { closeSync, fstatSync, openSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { BroadcastChannel } from 'node:worker_threads';
import { acquireShardEnv } from './shard-env.js';
import { decodeShardImage, IMAGE_FILE, type ShardImage } from './shard-image.js';
import { readerLimits, ShardReader, type ShardSource } from './shard-reader.js';
import { ShardSnapshot } from './shard-snapshot.js';

const readers = new Map<string, ShardReader>();

/**
 * The images this thread has read, by directory, least recently used first: each with its file
 * held open, so that its inode number cannot be reused while it is here. The writer replaces an
 * image by renaming a new file over it, so a path that still names the same inode names the same
 * image. At most readerLimits().maxOpen of them.
 */
const images = new Map<string, { source: ImageSource; fd: number; ino: number }>();

/** Called by a reader as it closes: it is no longer the one to hand out for its directory. */
function forget(reader: ShardReader): void {
  if (readers.get(reader.shard.dir) === reader) readers.delete(reader.shard.dir);
}

/**
 * What to read the shard in directory `dir` through: this thread's reader of it when one is
 * open; else the shard's image when it is small enough to have one (shard-image.ts), which
 * opens nothing; else a reader, opened once per thread and cached. A missing shard is created
 * empty (a workspace without files has an empty shard).
 */
export function openShardReader(directory: string): ShardSource {
  // Looked up as given first: callers pass the same absolute path on every call.
  const open = readers.get(directory);
  if (open !== undefined) return open;
  const dir = resolve(directory);
  return (readers.has(dir) ? null : imageSource(dir)) ?? openLmdbReader(dir);
}

/** The image of the shard in `dir` (absolute), from this thread's cache while it is current; null without one. */
function imageSource(dir: string): ImageSource | null {
  const path = join(dir, IMAGE_FILE);
  const cached = images.get(dir);
  if (cached !== undefined) {
    images.delete(dir);
    if (statSync(path, { throwIfNoEntry: false })?.ino === cached.ino) {
      images.set(dir, cached); // now the most recently used
      return cached.source;
    }
    closeSync(cached.fd);
  }
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch {
    return null;
  }
  let image: ShardImage | null = null;
  try {
    image = decodeShardImage(readFileSync(fd));
  } finally {
    if (image === null) closeSync(fd);
  }
  if (image === null) return null;
  if (images.size >= readerLimits().maxOpen) forgetImage(images.keys().next().value as string);
  const source = new ImageSource(image);
  images.set(dir, { source, fd, ino: fstatSync(fd).ino });
  return source;
}

/** Drops this thread's cached image of the shard in `dir`, closing its file. */
function forgetImage(dir: string): void {
  const cached = images.get(dir);
  if (cached === undefined) return;
  images.delete(dir);
  closeSync(cached.fd);
}

/** This thread's reader of the shard in `directory`, opened (and cached) if it has none; never an image. */
export function openLmdbReader(directory: string): ShardReader {
  const dir = resolve(directory);
  let reader = readers.get(dir);
  if (reader === undefined) {
    if (readers.size >= readerLimits().maxOpen) closeLeastRecentReader();
    reader = new ShardReader(acquireShardEnv(dir), forget);
    readers.set(dir, reader);
  }
  return reader;
}

/** One version of a small shard, read from its image: every snapshot is of that version. */
class ImageSource implements ShardSource {
  constructor(private readonly image: ShardImage) {}

  snapshot(): ShardSnapshot {
    return new ShardSnapshot(this.image);
  }

  get catalogedDocs(): number {
    return this.image.catalog.docs.length;
  }

  /** openShardReader checks the image at every call: this one stays the version it was. */
  renew(): void {}
}

/**
 * Forgets this thread's reader and image of the shard in `directory` (a deleted workspace's):
 * the reader closes once its snapshots in use end, which frees the shard's disk space and
 * descriptors.
 */
export function closeShardReader(directory: string): void {
  const dir = resolve(directory);
  forgetImage(dir);
  const reader = readers.get(dir);
  if (reader === undefined) return;
  readers.delete(dir);
  reader.closeWhenIdle();
}

/** The channel on which threads ask each other to close their readers of a shard. */
const CLOSE_READERS = 'agent-vfs:close-readers';
let closes: BroadcastChannel | null = null;

/** This thread's end of the channel, set up once; it closes the readers the other threads ask it to. */
function closeChannel(): BroadcastChannel {
  if (closes === null) {
    closes = new BroadcastChannel(CLOSE_READERS);
    closes.onmessage = (event) => closeShardReader((event as { data: string }).data);
    // The channel never keeps a thread alive.
    closes.unref();
  }
  return closes;
}

/** Makes this thread close its readers of a shard when another thread asks (closeReadersEverywhere). */
export function followReaderCloses(): void {
  closeChannel();
}

/**
 * Closes the readers of the shard in `directory` on this thread and asks every thread that
 * follows (followReaderCloses) to close its own; each closes once its snapshots in use end.
 */
export function closeReadersEverywhere(directory: string): void {
  closeShardReader(directory);
  closeChannel().postMessage(resolve(directory));
}

/** Closes the reader that began a snapshot longest ago among those with none in use. */
function closeLeastRecentReader(): void {
  let oldest: ShardReader | null = null;
  for (const reader of readers.values()) if (reader.idle && (oldest === null || reader.lastSnapshot < oldest.lastSnapshot)) oldest = reader;
  // Its map entry goes at once; the environment closes when lmdb-js is done with it.
  oldest?.closeWhenIdle();
}

/** Readers open on this thread (for tests and monitoring). */
export function openReaderCount(): number {
  return readers.size;
}
