/**
 * A read tool's answers kept for the callers that ask again: each answer's chunks (copies) and
 * result count, under a key the caller makes exact for it (the shard's reader, the
 * `docsVersion` read, what the caller may see, the request), the least recently used dropped
 * first, within a count and a byte budget. One per thread and tool: nothing here is shared.
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

  /** The answer, or null when it outgrew `most`. */
  answer(resultCount: number): Answer | null {
    return this.bytes > this.most ? null : { chunks: this.chunks, resultCount, bytes: this.bytes };
  }
}

export class AnswerMemory {
  private readonly answers = new Map<string, Answer>();
  private bytes = 0;
  /** A number per owner (a shard's reader), so that one opened anew (a restored shard) never meets the answers of the one before. */
  private readonly owners = new WeakMap<object, number>();
  private owned = 0;

  constructor(
    private readonly maxAnswers: number,
    private readonly maxBytes: number,
  ) {}

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
    const answer = this.answers.get(key);
    if (answer !== undefined) {
      this.answers.delete(key);
      this.answers.set(key, answer);
    }
    return answer;
  }

  /** Keeps `answer` under `key` (not one larger than `largest`), dropping the least recently used to make room. */
  remember(key: string, answer: Answer): void {
    if (answer.bytes > this.largest || this.answers.has(key)) return;
    while (this.answers.size >= this.maxAnswers || this.bytes + answer.bytes > this.maxBytes) {
      const [oldest, dropped] = this.answers.entries().next().value!;
      this.answers.delete(oldest);
      this.bytes -= dropped.bytes;
    }
    this.answers.set(key, answer);
    this.bytes += answer.bytes;
  }
}
