/**
 * A small shard's image: every live record and text of one `docsVersion` in one file, `image`,
 * beside the shard's LMDB files (shard-format.ts). A read of a shard its thread has not open
 * reads the image instead of opening the environment: one file read against about 1.6 ms to
 * open and close an environment, which is what a read costs when reads spread over more
 * workspaces than a thread keeps open (docs/architecture.md, "What a workspace costs"). Threads
 * keep the images they read while the file is current (reader-cache.ts).
 *
 * The writer keeps it exact: before each transaction that changes documents it removes the
 * image (and syncs the directory, so a crash cannot bring it back), and after the commit it
 * writes the new one under another name and renames it into place, when the shard holds at most
 * IMAGE_MAX_DOCS documents and IMAGE_MAX_TEXT_BYTES of text. So an image, when there is one, is
 * the latest committed version; without one, readers open LMDB. The image has no trigram lists:
 * a grep verifies every document of so small a shard.
 *
 * Layout: IMAGE_MAGIC (8 bytes) ‖ header length (u32 LE) ‖ header, JSON: { docsVersion, state
 * (ShardState), records (DocRecord[] in path order), valueBytes (the length of each record's
 * `text` value) } ‖ the `text` values in the records' order ‖ CRC-32 of everything before (u32
 * LE). A file that is short, of another magic or of another checksum (a torn write) is not
 * an image: the reader opens LMDB.
 *
 * Builds before images do not keep them: before running one on a data directory this build has
 * written, remove every image (`find DATA_DIR/shards -name image -delete`); else, back on this
 * build, reads would serve the versions that build has since replaced.
 */

import { closeSync, fsyncSync, openSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32 } from 'node:zlib';
import { ShardCatalog } from './shard-catalog.js';
import { fromRecord, type DocRecord, type ShardState } from './shard-format.js';

/** The image's file name in the shard's directory. */
export const IMAGE_FILE = 'image';
/** Most live documents a shard with an image holds. */
export const IMAGE_MAX_DOCS = 64;
/** Most text bytes a shard with an image holds. */
export const IMAGE_MAX_TEXT_BYTES = 64 * 1024;

const IMAGE_MAGIC = Buffer.from('vfsimg01', 'latin1');

/** One version of a shard, read from its image. */
export interface ShardImage {
  docsVersion: number;
  state: ShardState;
  /** Every live document, in path order. */
  catalog: ShardCatalog;
  /** Each live document's `text` value, by doc id. */
  values: Map<number, Buffer>;
}

interface ImageHeader {
  docsVersion: number;
  state: ShardState;
  records: DocRecord[];
  valueBytes: number[];
}

/** Whether a shard of this state gets an image. */
export function wantsImage(state: ShardState): boolean {
  return state.liveDocs <= IMAGE_MAX_DOCS && state.textBytes <= IMAGE_MAX_TEXT_BYTES;
}

/** The image in `bytes` (an image file's content), or null when they are not one whole. */
export function decodeShardImage(bytes: Buffer): ShardImage | null {
  const end = bytes.length - 4;
  if (end < IMAGE_MAGIC.length + 4 || !bytes.subarray(0, IMAGE_MAGIC.length).equals(IMAGE_MAGIC)) return null;
  if (crc32(bytes.subarray(0, end)) !== bytes.readUInt32LE(end)) return null;
  const headerAt = IMAGE_MAGIC.length + 4;
  const valuesAt = headerAt + bytes.readUInt32LE(IMAGE_MAGIC.length);
  const header = JSON.parse(bytes.toString('utf8', headerAt, valuesAt)) as ImageHeader;
  const values = new Map<number, Buffer>();
  let at = valuesAt;
  for (let i = 0; i < header.records.length; i++) {
    values.set(header.records[i][0], bytes.subarray(at, at + header.valueBytes[i]));
    at += header.valueBytes[i];
  }
  if (at !== end) return null;
  return { docsVersion: header.docsVersion, state: header.state, catalog: new ShardCatalog(header.docsVersion, header.records.map(fromRecord)), values };
}

/**
 * Writes the image of one committed version: `records` in path order, `values` their `text`
 * values in the same order. Under another name first, then renamed into place.
 */
export function writeShardImage(dir: string, docsVersion: number, state: ShardState, records: DocRecord[], values: Buffer[]): void {
  const header = Buffer.from(JSON.stringify({ docsVersion, state, records, valueBytes: values.map((v) => v.length) } satisfies ImageHeader));
  const length = Buffer.alloc(4);
  length.writeUInt32LE(header.length);
  const body = Buffer.concat([IMAGE_MAGIC, length, header, ...values]);
  const sum = Buffer.alloc(4);
  sum.writeUInt32LE(crc32(body));
  const partial = join(dir, `${IMAGE_FILE}.partial`);
  writeFileSync(partial, Buffer.concat([body, sum]));
  renameSync(partial, join(dir, IMAGE_FILE));
}

/**
 * Removes the shard's image, if it has one, durably: the directory is synced, so that after a
 * crash the removal holds whenever the commit that follows it does.
 */
export function dropShardImage(dir: string): void {
  try {
    unlinkSync(join(dir, IMAGE_FILE));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw error;
  }
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
