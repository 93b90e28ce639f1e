/**
 * `cat`: a file's text with line numbers, exactly like `cat -n` (number right-aligned in six
 * columns, a TAB, the line), from line `offset` for at most `limit` lines and at most
 * MAX_CAT_BYTES of output. Lines over MAX_LINE_CHARS characters are cut with a marker. When
 * lines remain after the last one printed, a footer line starting with `[` gives the offset to
 * continue from. Only the printed lines are decoded: the stored line starts locate them.
 * With `lineNumbers: false` (an MCP resource, api/mcp/tools.ts) the lines are printed bare.
 */

import { AnswerCopy, AnswerMemory } from '../core/answer-memory.js';
import { VfsError } from '../core/errors.js';
import { lineEndOf, lineStartsOf } from './doc-text.js';
import type { ShardSource } from './shard-reader.js';
import { digitsOf } from './line-printer.js';
import { CHUNK_BYTES, ChunkedOutput, formatLine, MAX_LINE_CHARS, requestFilePath, type ToolSummary } from './tool-output.js';
import { Visibility, type Claims } from './visibility.js';

/** Parameters of `cat` (already validated by the HTTP layer; undefined means the default). */
export interface CatRequest {
  /** Caller's claims: null for a management key. */
  claims: Claims;
  /** File path, with or without the leading `/`. */
  path: string;
  /** 1-based first line to print; default 1. */
  offset?: number;
  /** Maximum number of lines to print; default DEFAULT_CAT_LIMIT. */
  limit?: number;
  /** False prints the lines bare, without numbers (an MCP resource); default true. */
  lineNumbers?: boolean;
}

const TAB = 0x09;
/** cat's lines carry no prefix. */
const NO_PREFIX = new Uint8Array(0);

/** Lines printed when `limit` is not given. */
export const DEFAULT_CAT_LIMIT = 2000;
/** Output beyond this many bytes is cut at a line boundary. */
export const MAX_CAT_BYTES = 256 * 1024;

/**
 * The answers a thread keeps: the same lines of the same file asked again (an agent reading a
 * file anew, agents on one workspace reading its main files) are answered from their copy,
 * without reading the document again. Keyed by reader, `docsVersion` and the request; whether
 * the caller sees the file is checked each time, before.
 */
const pages = new AnswerMemory(256, 8 << 20);

/** Runs `cat`. Throws NO_SUCH_FILE for a missing or invisible file. */
export function* cat(reader: ShardSource, request: CatRequest): Generator<Buffer, ToolSummary> {
  const path = requestFilePath(request.path);
  const offset = request.offset ?? 1;
  const limit = request.limit ?? DEFAULT_CAT_LIMIT;
  const width = request.lineNumbers === false ? 0 : 6; // of the line number; 0: none
  const snapshot = reader.snapshot();
  try {
    const meta = snapshot.docByPath(path);
    // SECURITY: an invisible file answers exactly like a missing one.
    if (meta === undefined || !new Visibility(request.claims).canSee(meta.claims)) {
      throw new VfsError('NO_SUCH_FILE', { path });
    }
    const key = pages.key(reader, snapshot.docsVersion, path, offset, limit, width);
    const known = pages.recall(key);
    if (known !== undefined) {
      for (const chunk of known.chunks) yield chunk;
      return { resultCount: known.resultCount };
    }
    const copy = new AnswerCopy(pages.largest);
    const out = new ChunkedOutput();
    const total = meta.lines;
    if (offset > total) {
      out.write(total === 0 ? '[the file is empty: 0 lines]\n' : `[offset ${offset} is past the end of the file: it has ${total} lines]\n`);
      return yield* answer(out, copy, key, 0);
    }
    const last = Math.min(total, offset - 1 + limit); // 1-based, inclusive
    let line = offset;
    // The whole output is at most MAX_CAT_BYTES plus one line, so it is built while the
    // (reused) read buffer is valid and yielded afterwards.
    const value = snapshot.docValue(meta);
    const text = value.subarray(0, meta.textBytes);
    const starts = lineStartsOf(value, meta.textBytes, meta.lines);
    let full = false;
    while (line <= last && !full) {
      // A run of lines short enough to need no cut is copied in one piece; runs stop near half a
      // chunk, so that none makes a chunk outgrow CHUNK_BYTES.
      let runEnd = line;
      let runBytes = 0;
      while (runEnd <= last && runBytes < CHUNK_BYTES / 2) {
        const bytes = lineEndOf(text, starts, runEnd - 1) - starts[runEnd - 1];
        // No more bytes than the character limit, so no cut: copy the bytes, decode nothing.
        if (bytes > MAX_LINE_CHARS) break;
        const entry = (width === 0 ? 0 : Math.max(width, digitsOf(runEnd)) + 1) + bytes + 1;
        if (out.total + runBytes > 0 && out.total + runBytes + entry > MAX_CAT_BYTES) {
          full = true;
          break;
        }
        runBytes += entry;
        runEnd++;
      }
      if (runEnd > line) {
        out.writeLines(text, starts, line - 1, runEnd - line, NO_PREFIX, width === 0 ? -1 : width, TAB);
        line = runEnd;
        continue;
      }
      if (full) break;
      const entry = `${width === 0 ? '' : `${String(line).padStart(width)}\t`}${formatLine(text, starts[line - 1], lineEndOf(text, starts, line - 1))}\n`;
      if (out.total > 0 && out.total + Buffer.byteLength(entry) > MAX_CAT_BYTES) break;
      out.write(entry);
      line++;
    }
    const printed = line - offset;
    if (line <= total) {
      out.write(`[... ${total - line + 1} more lines (the file has ${total}); continue with offset=${line}]\n`);
    }
    return yield* answer(out, copy, key, printed);
  } finally {
    snapshot.done();
  }
}

/** Yields the built answer's chunks, keeping a copy under `key`. */
function* answer(out: ChunkedOutput, copy: AnswerCopy, key: string, resultCount: number): Generator<Buffer, ToolSummary> {
  yield* copy.through(out.drain(true));
  const kept = copy.answer(resultCount);
  if (kept !== null) pages.remember(key, kept);
  return { resultCount };
}
