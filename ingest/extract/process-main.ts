/**
 * Entry point of an extraction process (pool.ts starts it with an IPC
 * channel). For each task it receives a blob's file path, never its bytes,
 * reads the file itself, tells the pool it has begun and replies with an
 * ExtractResult. It never throws: every failure it can see becomes a result,
 * so a process that ends while it has a file has died.
 *
 * The process has no business on the network: `fetch` is replaced by one that
 * refuses, so a parser bug cannot make it reach out. It exits once its parent
 * is gone.
 */
import { readFile } from 'node:fs/promises';
import { extractBuffer } from './dispatch.js';
import { preparePdf } from './pdf.js';
import { findPdfHeader } from './text.js';
import type { ExtractReply, ExtractResult, ExtractTask } from './types.js';

/**
 * Extracts one stored original. `started` is called once the file is read and the parser it
 * needs is loaded: neither is the file's doing, so neither counts against its time cap.
 */
async function extractTask(task: ExtractTask, started: () => void): Promise<ExtractResult> {
  let bytes: Buffer;
  try {
    bytes = await readFile(task.blobPath);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? (err instanceof Error ? err.message : String(err));
    return { ok: false, error: `could not read the stored original (${code})`, retryable: true };
  }
  // Should pdfjs fail to load, extracting the PDF fails below with its own message.
  if (findPdfHeader(bytes) !== -1) await preparePdf().catch(() => undefined);
  started();
  try {
    return await extractBuffer(bytes, task.contentType, task.path);
  } catch (err) {
    // A bug or an unexpected pdfjs failure: report it rather than end the process.
    const message = err instanceof Error ? err.message : String(err);
    return { ok: false, error: `extraction failed: ${message}`, retryable: false };
  }
}

if (process.send !== undefined) {
  globalThis.fetch = () => Promise.reject(new Error('network access is disabled in extraction processes'));
  const reply = (message: ExtractReply): void => {
    process.send!(message);
  };
  process.on('message', (task: ExtractTask) => {
    void extractTask(task, () => reply({ started: true })).then((result) => reply({ started: false, result }));
  });
  process.on('disconnect', () => process.exit(0));
}
