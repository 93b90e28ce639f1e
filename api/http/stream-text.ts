/**
 * A read tool's plain-text answer, built from the chunks the read pool delivers, and the rule
 * that a response completes only after its audit event is committed.
 *
 * Output is held until it passes INLINE_BYTES: most answers are sent whole, with a
 * Content-Length, once their audit event is committed; larger ones stream (chunked) with
 * backpressure, and only their end waits for the audit commit. A chunk stays counted (its
 * `release` is not called) until it has gone out on `node:http`, or until backpressure drains on
 * uWS, so the read thread that made it waits.
 */
import { VfsError } from '../../core/errors.js';
import { keptChunk } from '../../core/kept-chunk.js';
import { type RequestContext, sendText, statusLine } from './context.js';
import { type ErrorLog, sendTextError } from './respond.js';
import { NodeHttpResponse } from './uws-node-http.js';

const TEXT = 'text/plain; charset=utf-8';

/** Output up to this size is sent whole; beyond it, streamed. */
const INLINE_BYTES = 256 * 1024;

/** A 200 plain-text answer being written; its end waits for `endAfter` or `failAfter`. */
export class TextStream {
  /** Chunks held while the output is at most INLINE_BYTES; null once it streams. */
  private held: Uint8Array[] | null = [];
  private heldBytes = 0;
  private headersSent = false;

  constructor(private readonly ctx: RequestContext) {}

  /** Whether the status line went out: the answer can no longer be an error. */
  get started(): boolean {
    return this.headersSent;
  }

  /** Takes a chunk of output; calls `release` once it is written to the socket (a ChunkSink). */
  readonly write = (data: Uint8Array, release: () => void): void => {
    if (this.ctx.aborted) {
      release();
      return;
    }
    if (this.held !== null) {
      this.held.push(keptChunk(data));
      this.heldBytes += data.length;
      release();
      if (this.heldBytes <= INLINE_BYTES) return;
      const flush = this.held;
      this.held = null;
      for (const chunk of flush) this.send(chunk, () => {});
      return;
    }
    this.send(data, release);
  };

  /**
   * Writes a chunk to the socket, corked. `release` waits until the chunk has gone out on
   * `node:http`, which keeps the chunk itself until then; uWS copies what it cannot send, and
   * `release` waits for backpressure to drain.
   */
  private send(data: Uint8Array, release: () => void): void {
    const res = this.ctx.res;
    const nodeHttp = res instanceof NodeHttpResponse;
    let ok = true;
    res.cork(() => {
      if (!this.headersSent) {
        this.headersSent = true;
        res.writeStatus(statusLine(200));
        res.writeHeader('content-type', TEXT);
        res.writeHeader('x-request-id', this.ctx.requestId);
      }
      ok = nodeHttp ? res.write(data, release) : res.write(data);
    });
    if (nodeHttp) return;
    if (ok) release();
    // Backpressure: keep the chunk counted until the socket drains.
    else
      res.onWritable(() => {
        release();
        return true;
      });
  }

  /**
   * Completes the answer once `commit` (its audit event) resolves. If it rejects, the answer
   * must not complete as if it had been recorded: 503 when nothing was sent yet, else the
   * connection is cut.
   */
  async endAfter(commit: () => Promise<void>, log: ErrorLog): Promise<void> {
    const ctx = this.ctx;
    try {
      await commit();
    } catch (error) {
      log('audit append failed', error);
      // Nothing sent yet: say so (503) rather than cut the connection.
      if (this.held !== null) sendTextError(ctx, new VfsError('UNAVAILABLE', { what: 'the audit log' }, { 'retry-after': '1' }), log);
      else this.cut();
      return;
    }
    if (ctx.aborted) return;
    if (this.held !== null) {
      sendText(ctx, 200, this.held.length === 1 ? this.held[0] : Buffer.concat(this.held));
      return;
    }
    ctx.aborted = true; // a uWS response may be ended only once
    ctx.res.cork(() => ctx.res.end());
  }

  /**
   * Answers `error` once `commit` (the failed call's audit event) resolves; 503 if it rejects.
   * Once streaming has started the status is gone: the connection is cut, so the client sees an
   * incomplete body.
   */
  async failAfter(error: VfsError, commit: () => Promise<void>, log: ErrorLog): Promise<void> {
    if (this.started) {
      await commit().catch(() => {});
      this.cut();
      return;
    }
    await answerAfter(this.ctx, error, commit, log);
  }

  /** Closes the connection mid-answer, unless the client is gone already. */
  private cut(): void {
    if (!this.ctx.aborted) this.ctx.res.cork(() => this.ctx.res.close());
    this.ctx.aborted = true;
  }
}

/** Answers `error` in plain text once `commit` (the call's audit event) resolves; 503 if it rejects. */
export async function answerAfter(ctx: RequestContext, error: VfsError, commit: () => Promise<void>, log: ErrorLog): Promise<void> {
  try {
    await commit();
  } catch (auditError) {
    log('audit append failed', auditError);
    sendTextError(ctx, new VfsError('UNAVAILABLE', { what: 'the audit log' }), log);
    return;
  }
  sendTextError(ctx, error, log);
}
