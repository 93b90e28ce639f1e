/**
 * The read pool: piscina threads running the read tools (read-worker.ts).
 * Each call gets a MessagePort for its output and a shared control array for
 * flow control and cancellation, so a large output streams with bounded
 * memory and stops when the client goes away.
 */
import { MessageChannel } from 'node:worker_threads';
import { Piscina } from 'piscina';
import { CANCELLED, IN_FLIGHT, type ReadMessage, type ReadTask } from './read-worker.js';

/** How a read ended. */
export type ReadOutcome = { ok: true; resultCount: number } | { ok: false; status: number; message: string } | { ok: false; status: 0; message: 'cancelled' };

/** A read in progress. */
export interface ReadCall {
  /** Settles when the tool has finished (its last chunk was delivered before this). */
  outcome: Promise<ReadOutcome>;
  /** Stops the tool (client gone). */
  cancel(): void;
}

/** Receives a chunk; calls `release` once the chunk no longer occupies memory (written to the socket). */
export type ChunkSink = (data: Uint8Array, release: () => void) => void;

/** Pool of read threads. */
export class ReadPool {
  private readonly piscina: Piscina<ReadTask, void>;

  constructor(threads: number) {
    const needsTsx = !process.execArgv.some((a) => a.includes('tsx'));
    this.piscina = new Piscina<ReadTask, void>({
      filename: new URL('./read-worker.ts', import.meta.url).href,
      minThreads: threads,
      maxThreads: threads,
      // Tasks mostly wait on nothing: each thread serves one tool call at a time.
      concurrentTasksPerWorker: 1,
      execArgv: needsTsx ? [...process.execArgv, '--import', 'tsx'] : process.execArgv,
      recordTiming: false,
    });
  }

  /** Runs a tool; chunks go to `sink` in order, then `outcome` settles. */
  run(tool: ReadTask['tool'], shardDir: string, request: unknown, sink: ChunkSink): ReadCall {
    const { port1, port2 } = new MessageChannel();
    const shared = new SharedArrayBuffer(8);
    const control = new Int32Array(shared);
    const release = (): void => {
      Atomics.sub(control, IN_FLIGHT, 1);
      Atomics.notify(control, IN_FLIGHT);
    };
    let settle!: (outcome: ReadOutcome) => void;
    const outcome = new Promise<ReadOutcome>((resolve) => (settle = resolve));
    port1.on('message', (message: ReadMessage) => {
      if (message.type === 'chunk') sink(message.data, release);
      else if (message.type === 'end') settle({ ok: true, resultCount: message.resultCount });
      else if (message.type === 'cancelled') settle({ ok: false, status: 0, message: 'cancelled' });
      else settle({ ok: false, status: message.status, message: message.message });
    });
    // The worker closes its end after its last message; a close without one means it died.
    port1.on('close', () => settle({ ok: false, status: 500, message: 'the read worker stopped without an answer' }));
    this.piscina.run({ tool, shardDir, request, port: port2, control: shared }, { transferList: [port2] }).then(
      () => {},
      (error: unknown) => settle({ ok: false, status: 500, message: String(error) }),
    );
    void outcome.then(() => port1.close());
    return {
      outcome,
      cancel: () => {
        Atomics.store(control, CANCELLED, 1);
        Atomics.notify(control, IN_FLIGHT);
      },
    };
  }

  /** Stops the threads. */
  async close(): Promise<void> {
    await this.piscina.destroy();
  }
}
