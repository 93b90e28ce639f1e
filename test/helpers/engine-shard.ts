/**
 * Test helpers for engine/: build a real shard in a temp dir from documents written inline,
 * and run a tool generator to completion.
 */

import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { openLmdbReader, openShardWriter, ShardReader, type DocInput, type ShardWriter, type ToolSummary } from '../../engine/index.js';
import { acquireShardEnv } from '../../engine/shard-env.js';

/** A document as tests write it: only `path` and `text` are required. */
export interface DocSpec {
  path: string;
  text: string | Buffer;
  claims?: string[] | null;
  updatedAt?: number;
  contentType?: string;
  sizeBytes?: number;
  version?: string;
}

/** A shard in a temp dir with its writer and (cached) reader. */
export interface TestShard {
  dir: string;
  writer: ShardWriter;
  reader: ShardReader;
  /** Writes documents in one batch. */
  write(docs: DocSpec[]): Promise<void>;
  /** Closes the writer and reader and deletes the directory. */
  close(): Promise<void>;
}

let clock = 1_700_000_000_000;

/** The DocInput for a spec (version defaults to the text itself, so equal text = equal version). */
export function toInput(spec: DocSpec): DocInput {
  const text = typeof spec.text === 'string' ? Buffer.from(spec.text, 'utf8') : spec.text;
  return {
    path: spec.path,
    text,
    sizeBytes: spec.sizeBytes ?? text.length,
    contentType: spec.contentType ?? 'text/plain',
    updatedAt: spec.updatedAt ?? clock++,
    visibility: spec.claims ?? null,
    version: spec.version ?? text.toString('base64'),
  };
}

/** Creates a shard holding `docs` (written in one batch when non-empty). */
export async function buildShard(docs: DocSpec[] = []): Promise<TestShard> {
  const dir = mkdtempSync(join(tmpdir(), 'engine-test-'));
  const writer = openShardWriter(dir);
  const reader = openLmdbReader(dir);
  const shard: TestShard = {
    dir,
    writer,
    reader,
    async write(more) {
      await writer.writeBatch(more.map(toInput));
    },
    async close() {
      await writer.close();
      await reader.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  if (docs.length > 0) await shard.write(docs);
  return shard;
}

/** Pulls every chunk of a tool generator; returns the text and the summary. */
export function run(gen: Generator<Buffer, ToolSummary>): { text: string; resultCount: number; chunks: number } {
  const parts: Buffer[] = [];
  for (;;) {
    const r = gen.next();
    if (r.done === true) {
      return { text: Buffer.concat(parts).toString('utf8'), resultCount: r.value.resultCount, chunks: parts.length };
    }
    if (r.value.length > 0) parts.push(r.value);
  }
}

/** The text of a tool's output (see `run`). */
export function output(gen: Generator<Buffer, ToolSummary>): string {
  return run(gen).text;
}

/** The error a tool throws (on its first chunk), or undefined. */
export function toolError(gen: Generator<Buffer, ToolSummary>): (Error & { code?: string }) | undefined {
  try {
    run(gen);
    return undefined;
  } catch (error) {
    return error as Error & { code?: string };
  }
}

/**
 * Another reader of the shard at `dir` (same LMDB environment): one that builds a catalog at its
 * first snapshot (`catalogs`), or one that never does and reads every record from LMDB.
 */
export function readerOf(dir: string, catalogs: boolean): ShardReader {
  const reader = new ShardReader(acquireShardEnv(dir));
  reader.catalogAfter = catalogs ? 0 : Infinity;
  return reader;
}
