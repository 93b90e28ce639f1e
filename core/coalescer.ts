/**
 * Turns many calls that each need a round trip into one round trip for all
 * that are waiting: at most one flush is in flight, and the items submitted
 * meanwhile make the next one. Under load a flush carries every item that
 * arrived during the previous round trip, so the round trips per second stay
 * bounded by the round-trip time, not by the request rate.
 */

/** Items waiting for the next flush, with what to settle once it answers. */
interface Waiting<I, O> {
  item: I;
  resolve: (out: O) => void;
  reject: (error: unknown) => void;
}

/** A coalescer of items into batches; `flush` answers each item of a batch, in order. */
export class Coalescer<I, O> {
  private waiting: Waiting<I, O>[] = [];
  private running = false;
  private lastStart = -Infinity;

  constructor(
    private readonly flush: (items: I[]) => Promise<O[]>,
    /**
     * Least time from the start of one flush to the start of the next: under load it caps the
     * flushes per second (and so their cost) and makes the batches larger; an item submitted
     * after a quiet spell of at least this long goes at once.
     */
    private readonly minIntervalMs = 0,
    /** Most items in one flush (the rest wait for the next). */
    private readonly maxItems = 1000,
  ) {}

  /** Queues an item for the next flush and resolves with its answer. */
  submit(item: I): Promise<O> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (!this.running) {
        this.running = true;
        void this.run();
      }
    });
  }

  /** Items waiting now (for tests). */
  get pending(): number {
    return this.waiting.length;
  }

  private async run(): Promise<void> {
    while (this.waiting.length > 0) {
      // At least the end of this turn of the event loop, so that the requests that arrived
      // together travel together.
      const wait = this.lastStart + this.minIntervalMs - performance.now();
      await new Promise((resolve) => (wait > 0 ? setTimeout(resolve, wait) : setImmediate(resolve)));
      this.lastStart = performance.now();
      const batch = this.waiting.length <= this.maxItems ? this.waiting : this.waiting.slice(0, this.maxItems);
      this.waiting = batch === this.waiting ? [] : this.waiting.slice(this.maxItems);
      try {
        const out = await this.flush(batch.map((w) => w.item));
        for (let i = 0; i < batch.length; i++) batch[i].resolve(out[i]);
      } catch (error) {
        for (const w of batch) w.reject(error);
      }
    }
    this.running = false;
  }
}
