/**
 * A request body as an async iterator of chunks, with backpressure: the
 * socket is paused while more than `highWater` bytes wait to be consumed, so
 * an upload is never held whole in memory. Must be created synchronously in
 * the uWS handler (uWS delivers body chunks only to a handler attached then).
 */
import { VfsError } from '../../core/errors.js';
import type { RequestContext } from './context.js';

const HIGH_WATER = 1 << 20;

/** The body of one request, consumed once. */
export class BodyStream implements AsyncIterable<Buffer> {
  private readonly queue: Buffer[] = [];
  private queued = 0;
  private ended = false;
  private paused = false;
  private wake: (() => void) | null = null;
  /** True once the last chunk has arrived. */
  get complete(): boolean {
    return this.ended;
  }

  constructor(private readonly ctx: RequestContext) {
    ctx.res.onData((chunk, isLast) => {
      if (chunk.byteLength > 0) {
        // uWS reuses the chunk's memory once this callback returns: copy it.
        const copy = Buffer.from(new Uint8Array(chunk));
        this.queue.push(copy);
        this.queued += copy.length;
      }
      if (isLast) this.ended = true;
      if (!this.ended && this.queued > HIGH_WATER && !this.paused && !ctx.aborted) {
        this.paused = true;
        ctx.res.pause();
      }
      this.notify();
    });
    ctx.onAbort.push(() => this.notify());
  }

  async *[Symbol.asyncIterator](): AsyncIterator<Buffer> {
    for (;;) {
      const chunk = this.queue.shift();
      if (chunk !== undefined) {
        this.queued -= chunk.length;
        if (this.paused && this.queued < HIGH_WATER / 2 && !this.ctx.aborted) {
          this.paused = false;
          this.ctx.res.resume();
        }
        yield chunk;
        continue;
      }
      if (this.ended) return;
      if (this.ctx.aborted) throw new VfsError('INVALID_BODY', { reason: 'the client closed the connection before the body ended' });
      await new Promise<void>((resolve) => (this.wake = resolve));
    }
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}
