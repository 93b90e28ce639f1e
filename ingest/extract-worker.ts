/**
 * Entry point of an extraction worker thread (piscina loads its default
 * export). It receives a blob's file path, never its bytes, reads the file
 * itself and returns an ExtractResult. It never throws: every failure it can
 * see becomes a result, so a rejected task always means the thread died.
 *
 * The thread has no business on the network: `fetch` is replaced by one that
 * refuses, so a parser bug cannot make it reach out.
 */
import { readFile } from 'node:fs/promises';
import type { MessagePort } from 'node:worker_threads';
import { extractBuffer, type ExtractResult } from './extract.js';

/** The message the pool posts for one file. */
export interface ExtractTask {
  /** Absolute path of the stored original. */
  blobPath: string;
  /** The Content-Type given at upload. */
  contentType: string;
  /** The file's path in the workspace (for messages and the `.pdf` hint). */
  path: string;
  /** Told once, as soon as this thread begins the file: the pool's time cap counts from then. */
  started?: MessagePort;
}

globalThis.fetch = () => Promise.reject(new Error('network access is disabled in extraction workers'));

/** Extracts one stored original; piscina calls it once per task. */
export default async function extractTask(task: ExtractTask): Promise<ExtractResult> {
  if (task.started !== undefined) {
    task.started.postMessage(null);
    task.started.close();
  }
  let bytes: Buffer;
  try {
    bytes = await readFile(task.blobPath);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err));
    return { ok: false, error: `could not read the stored original (${code})`, retryable: true };
  }
  try {
    return await extractBuffer(bytes, task.contentType, task.path);
  } catch (err) {
    // A bug or an unexpected pdfjs failure: report it rather than kill the thread.
    const message = err instanceof Error ? err.message : String(err);
    return { ok: false, error: `extraction failed: ${message}`, retryable: false };
  }
}
