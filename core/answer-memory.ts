/**
 * A read tool's answers kept for the callers that ask again: each answer's chunks (copies) and
 * result count, under a key the caller makes exact for it (the shard's reader, the
 * `docsVersion` read, what the caller may see, the request), the least recently used dropped
 * first, within a count and a byte budget. One per thread and tool: nothing here is shared.
 * Under it, `SizedLru`, which a shard catalog's remembered `find` matches use too.
 */

/** An answer as a tool gave it. */
export interface Answer {
  chunks: Buffer[];
  resultCount: number;
  bytes: number;
}

/** Takes copies of an answer's chunks as they go out, up to `most` bytes (then none: too large to keep). */
export class AnswerCopy {
  private readonly chunks: Buffer[] = [];
  private bytes = 0;

  constructor(private readonly most: number) {}

  take(chunk: Uint8Array): void {
    if (this.bytes > this.most) return;
    this.bytes += chunk.length;
    if (this.bytes <= this.most) this.chunks.push(Buffer.from(chunk));
  }

  /** Yields `chunks` as they come, taking each. */
  *through(chunks: Iterable<Buffer>): Generator<Buffer> {
    for (const chunk of chunks) {
      this.take(chunk);
      yield chunk;
    }
  }

  /** The answer, or null when it outgrew `most`. */
  answer(resultCount: number): Answer | null {
    return this.bytes > this.most ? null : { chunks: this.chunks, resultCount, bytes: this.bytes };
  }
}

/**
 * Values by key, at most `maxEntries` of them and `maxSize` in all (each value's size by
 * `sizeOf`), the least recently used dropped first to make room.
 */
export class SizedLru<V> {
  private readonly entries = new Map<string, V>();
  private size = 0;

  constructor(
    private readonly maxEntries: number,
    private readonly maxSize: number,
    private readonly sizeOf: (value: V) => number,
  ) {}

  /** The value under `key`, made the most recently used; or undefined. */
  get(key: string): V | undefined {
    const value = this.entries.get(key);
    if (value !== undefined) {
      this.entries.delete(key);
      this.entries.set(key, value);
    }
    return value;
  }

  /** Keeps `value` under `key`, unless its size is over `largest` or the key holds one already (the first stays). */
  set(key: string, value: V, largest = this.maxSize): void {
    const size = this.sizeOf(value);
    if (size > Math.min(largest, this.maxSize) || this.entries.has(key)) return;
    while (this.entries.size >= this.maxEntries || this.size + size > this.maxSize) {
      const [oldest, dropped] = this.entries.entries().next().value!;
      this.entries.delete(oldest);
      this.size -= this.sizeOf(dropped);
    }
    this.entries.set(key, value);
    this.size += size;
  }
}

/** Answers by key (see the module comment). */
export class AnswerMemory {
  private readonly answers: SizedLru<Answer>;
  /** A number per owner (a shard's reader), so that one opened anew (a restored shard) never meets the answers of the one before. */
  private readonly owners = new WeakMap<object, number>();
  private owned = 0;

  constructor(
    maxAnswers: number,
    private readonly maxBytes: number,
  ) {
    this.answers = new SizedLru(maxAnswers, maxBytes, (answer) => answer.bytes);
  }

  /** The most bytes one answer may hold to be kept. */
  get largest(): number {
    return Math.floor(this.maxBytes / 16);
  }

  /** The key of an answer of `owner` for `parts` (compared as JSON). */
  key(owner: object, ...parts: unknown[]): string {
    let id = this.owners.get(owner);
    if (id === undefined) {
      id = ++this.owned;
      this.owners.set(owner, id);
    }
    return JSON.stringify([id, ...parts]);
  }

  /** The answer kept under `key`, made the most recently used; or undefined. */
  recall(key: string): Answer | undefined {
    return this.answers.get(key);
  }

  /** Keeps `answer` under `key` (not one larger than `largest`), dropping the least recently used to make room. */
  remember(key: string, answer: Answer): void {
    this.answers.set(key, answer, this.largest);
  }
}
