/**
 * What the extraction pool, the extraction process and the extractors share: a file's outcome,
 * the messages between pool and process, and the characters every extractor removes. It imports
 * nothing, so each of them imports it without importing the others.
 */

/**
 * The outcome of extracting one upload: UTF-8 text to index, or an error sentence for the file's
 * `errorDetail`. `retryable` failures are tried again, up to the ingest's attempts; `capped` ones
 * (the file hit the time or memory cap, as a file built to hang or exhaust the extractor does)
 * at most once more.
 */
export type ExtractResult =
  | { ok: true; text: Buffer /* UTF-8 */; kind: 'text' | 'pdf' | 'document' /** The text is the file's bytes unchanged. */; original?: true }
  | { ok: false; error: string; retryable: boolean; capped?: true };

/** The message the pool sends for one file. */
export interface ExtractTask {
  /** Absolute path of the stored original. */
  blobPath: string;
  /** The Content-Type given at upload. */
  contentType: string;
  /** The file's path in the workspace (for messages and the `.pdf` hint). */
  path: string;
}

/** What the process sends back for a task: first that it has begun (the pool's time cap counts from then), then its result. */
export type ExtractReply = { started: true } | { started: false; result: ExtractResult };

/**
 * C0 controls except TAB, plus DEL and C1 controls, which the PDF and document extractors remove:
 * never useful in extracted text, and NUL would make the text look binary to every grep.
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: these are the characters removed
export const CONTROL_CHARS = /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/g;
