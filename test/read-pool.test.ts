/**
 * Stopping the read pool: a thread terminated while lmdb's native addon initialises aborts the
 * whole process ("FATAL ERROR: Error::ThrowAsJavaScriptException napi_throw"; it took down a
 * test process once), so `close` stops no thread before its modules have loaded. A content
 * grep split over two real threads: the later path ranges searched while the first waits for
 * its client, its output in order, what was queued given back, and a share paused once too much
 * is queued. And the queue: tasks start in the order they came. And `find` in a shard too large
 * for the calling thread: a repeated one answered there, per view of the files and commit. And
 * the threads' reply ports: calls take no channel of their own once every thread has given its
 * port, a thread that dies is replaced, and a call waiting on a port keeps the process alive.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { BroadcastChannel } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { find, type FindRequest, grep } from '../engine/index.js';
import { holdAtMost, waitingBytes } from '../reads/grep-split.js';
import { ReadPool } from '../reads/read-pool.js';
import { type ReadCall, THREAD_LOADED } from '../reads/read-protocol.js';
import { buildShard, output, type TestShard } from './helpers/engine-shard.js';

const loaded = new Set<number>();
const channel = new BroadcastChannel(THREAD_LOADED);
channel.onmessage = (event) => loaded.add((event as { data: number }).data);
afterAll(() => channel.close());

/** Resolves once `done()` holds, or after `ms`. */
async function until(done: () => boolean, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
}

/** Resolves once `count` threads have said they loaded, or after `ms`. */
async function loadedReach(count: number, ms: number): Promise<number> {
  await until(() => loaded.size >= count, ms);
  return loaded.size;
}

describe('ReadPool.close', () => {
  it.each([0, 1, 10, 50])('closed %i ms after it starts, its two threads have loaded before they stop', async (delayMs) => {
    const before = loaded.size;
    const pool = new ReadPool(2, 0);
    await new Promise((r) => setTimeout(r, delayMs));
    await pool.close();
    // Posted before each thread stopped; the message may still be on its way here.
    expect(await loadedReach(before + 2, 2_000)).toBe(before + 2);
  });
});

describe('a content grep split across the read threads', () => {
  // 2.4 MB of text in 40 files, split into path ranges (balanced by text bytes):
  // every line matches `.`. The first file, a third of the text, is the lead's range, which
  // prints more than the four unwritten chunks it may have in flight, so while its client
  // waits the ranges after it queue their output.
  const docs = Array.from({ length: 40 }, (_, i) => ({
    path: `/d/f${String(i).padStart(2, '0')}.txt`,
    text: Array.from({ length: i === 0 ? 16_000 : 800 }, (_, j) => `line ${j} of file ${i}: ${'x'.repeat(j % 60)}`).join('\n'),
  }));
  const request = { claims: null, pattern: '.', outputMode: 'content' as const, deadline: Date.now() + 600_000 };

  /** Runs the grep on a pool of two threads; `hold` keeps a chunk unwritten while it returns true. */
  async function splitRun(hold: (data: Uint8Array) => boolean, whileHeld?: (call: ReadCall, writeHeld: () => void) => Promise<void>) {
    const shard = await buildShard(docs);
    const expected = output(grep(shard.reader, request));
    const pool = new ReadPool(2, 0);
    await loadedReach(loaded.size + 2, 10_000);
    const chunks: Buffer[] = [];
    const waiting: Array<() => void> = [];
    try {
      const call = pool.run('grep', shard.dir, request, (data, release) => {
        chunks.push(Buffer.from(data));
        if (hold(data)) waiting.push(release);
        else release();
      });
      const writeHeld = (): void => {
        for (const release of waiting.splice(0)) release();
      };
      await whileHeld?.(call, writeHeld);
      writeHeld();
      return { expected, outcome: await call.outcome, text: Buffer.concat(chunks).toString() };
    } finally {
      await pool.close();
      await shard.close();
    }
  }

  it('while the first range waits for its client, the later ones are searched on; all of it arrives in order', async () => {
    let holding = true;
    let queuedWhileWaiting = 0;
    const r = await splitRun(
      () => holding,
      async () => {
        await until(() => waitingBytes() >= 8 * 64 * 1024, 10_000);
        queuedWhileWaiting = waitingBytes();
        holding = false;
      },
    );
    expect(queuedWhileWaiting).toBeGreaterThanOrEqual(8 * 64 * 1024);
    expect(r.outcome.kind).toBe('done');
    expect(r.text).toBe(r.expected);
    expect(waitingBytes()).toBe(0);
  });

  it('cancelled while later ranges are queued, it holds nothing afterwards', async () => {
    const r = await splitRun(
      () => true,
      async (call) => {
        await until(() => waitingBytes() > 0, 10_000);
        expect(waitingBytes()).toBeGreaterThan(0);
        call.cancel();
      },
    );
    expect(r.outcome.kind).toBe('cancelled');
    expect(waitingBytes()).toBe(0);
  });

  it('past the bytes it may queue, a waiting range is paused until its turn, and all of it arrives in order', async () => {
    const limit = 256 * 1024;
    holdAtMost(limit);
    try {
      let holding = true;
      let queuedAtRest = 0;
      const r = await splitRun(
        () => holding,
        async () => {
          await until(() => waitingBytes() > limit, 10_000);
          // The paused range sends nothing more: the queue stops growing a chunk past the limit.
          let last = -1;
          while (waitingBytes() !== last) {
            last = waitingBytes();
            await new Promise((resolve) => setTimeout(resolve, 300));
          }
          queuedAtRest = waitingBytes();
          holding = false;
        },
      );
      expect(queuedAtRest).toBeGreaterThan(limit);
      // The chunk that crossed it, and one the worker may have sent before it saw the pause.
      expect(queuedAtRest).toBeLessThanOrEqual(limit + 2 * 64 * 1024);
      expect(r.outcome.kind).toBe('done');
      expect(r.text).toBe(r.expected);
      expect(waitingBytes()).toBe(0);
    } finally {
      holdAtMost();
    }
  });
});

describe("a task's chunks in shared memory", () => {
  it('a chunk kept unreleased keeps its bytes while the ones after it pass through the ring and are released first', async () => {
    const text = Array.from({ length: 60_000 }, (_, j) => `line ${j}`).join('\n');
    const shard = await buildShard([{ path: '/a.txt', text }]);
    const request = { claims: null, pattern: 'line', outputMode: 'content' as const, deadline: Date.now() + 600_000 };
    const expected = output(grep(shard.reader, request));
    const pool = new ReadPool(1, Number.MAX_SAFE_INTEGER); // one task: the search is not split
    await loadedReach(loaded.size + 1, 10_000);
    try {
      const received: Uint8Array[] = [];
      let kept: { at: number; data: Uint8Array; release: () => void } | null = null;
      let shared = 0;
      const call = pool.run('grep', shard.dir, request, (data, release) => {
        if (data.buffer instanceof SharedArrayBuffer) shared++;
        if (kept === null && data.buffer instanceof SharedArrayBuffer) {
          kept = { at: received.length, data, release };
          received.push(new Uint8Array(0));
          return;
        }
        received.push(Buffer.from(data));
        release();
      });
      expect((await call.outcome).kind).toBe('done');
      expect(kept).not.toBeNull();
      const { at, data, release } = kept!;
      received[at] = Buffer.from(data);
      release();
      expect(shared).toBeGreaterThan(10); // 1.3 MB of output: the ring carried all but the first chunk
      expect(Buffer.concat(received).toString()).toBe(expected);
    } finally {
      await pool.close();
      await shard.close();
    }
  });
  it('a task cancelled while its output writes into the ring leaves the ring whole for the next task', async () => {
    const text = Array.from({ length: 200_000 }, (_, j) => `line ${j}`).join('\n');
    const shard = await buildShard([{ path: '/a.txt', text }]);
    const request = { claims: null, pattern: 'line', outputMode: 'content' as const, deadline: Date.now() + 600_000 };
    const expected = output(grep(shard.reader, request));
    const pool = new ReadPool(1, Number.MAX_SAFE_INTEGER);
    await loadedReach(loaded.size + 1, 10_000);
    try {
      let ring: Uint8Array | null = null;
      let chunks = 0;
      let call: ReturnType<typeof pool.run> | null = null;
      call = pool.run('grep', shard.dir, request, (data, release) => {
        if (data.buffer instanceof SharedArrayBuffer) ring ??= new Uint8Array(data.buffer);
        if (++chunks === 5) call!.cancel();
        release();
      });
      expect((await call.outcome).kind).toBe('cancelled');
      expect(ring).not.toBeNull();
      // Marked, then looked at once the next task is done: its output is there only if every slot
      // the cancelled output held was given back, so that the thread took this ring again.
      ring!.fill(0xff);
      const received: Buffer[] = [];
      const next = pool.run('grep', shard.dir, request, (data, release) => {
        received.push(Buffer.from(data));
        release();
      });
      expect((await next.outcome).kind).toBe('done');
      expect(Buffer.concat(received).toString()).toBe(expected);
      expect(ring!.every((b) => b === 0xff)).toBe(false);
    } finally {
      await pool.close();
      await shard.close();
    }
  });
});

describe('the read pool queue', () => {
  it('starts queued greps in the order they came', async () => {
    const shard = await buildShard([{ path: '/a.txt', text: 'needle\n'.repeat(2000) }]);
    const pool = new ReadPool(1, Number.MAX_SAFE_INTEGER);
    await loadedReach(loaded.size + 1, 10_000);
    try {
      const ended: number[] = [];
      const calls = Array.from({ length: 30 }, (_, i) => {
        const call = pool.run('grep', shard.dir, { claims: null, pattern: 'needle', outputMode: 'count', deadline: Date.now() + 60_000 }, (_data, release) =>
          release(),
        );
        return call.outcome.then((outcome) => {
          expect(outcome.kind).toBe('done');
          ended.push(i);
        });
      });
      await Promise.all(calls);
      // One thread: they end in the order they start.
      expect(ended).toEqual(Array.from({ length: 30 }, (_, i) => i));
    } finally {
      await pool.close();
      await shard.close();
    }
  });
});

describe('find in a shard too large for the calling thread', () => {
  it('answers a repeated find from the calling thread, each view its own, and anew after a commit', async () => {
    // More files than the calling thread searches itself (5,000), a seventh of them for one team.
    const docs = Array.from({ length: 5_010 }, (_, i) => ({
      path: `/d/f${String(i).padStart(4, '0')}.${i % 3 === 0 ? 'md' : 'txt'}`,
      text: `${i}\n`,
      claims: i % 7 === 0 ? ['team'] : null,
    }));
    const shard = await buildShard(docs);
    const pool = new ReadPool(2, 0);
    try {
      /** The pool's answer, and whether it came before `run` returned (from the calling thread). */
      const viaPool = async (request: FindRequest): Promise<{ text: string; there: boolean }> => {
        const chunks: Buffer[] = [];
        let returned = false;
        let there = false;
        const call = pool.run('find', shard.dir, request, (data, release) => {
          chunks.push(Buffer.from(data));
          if (!returned) there = true;
          release();
        });
        returned = true;
        expect((await call.outcome).kind).toBe('done');
        return { text: Buffer.concat(chunks).toString(), there };
      };
      const requests: FindRequest[] = [
        { claims: null, pattern: '**/*.md' },
        { claims: ['other'], pattern: '**/*.md' },
        { claims: ['team'], pattern: '**/*.md', headLimit: 50 },
        { claims: ['team', 'other'], pattern: '**/*.md', headLimit: 50 },
      ];
      for (const request of requests) {
        const expected = output(find(shard.reader, request));
        expect(await viaPool(request)).toEqual({ text: expected, there: false });
        expect(await viaPool(request)).toEqual({ text: expected, there: true });
      }
      // The views differ: a team's answer is never another view's.
      expect(output(find(shard.reader, requests[1]))).not.toContain('/d/f4998.md');
      expect(output(find(shard.reader, requests[2]))).toContain('/d/f4998.md');
      await shard.write([{ path: '/d/new.md', text: 'new\n', claims: ['team'] }]);
      for (const request of requests) {
        const expected = output(find(shard.reader, request));
        expect(expected.includes('/d/new.md')).toBe(request.claims === null || request.claims.includes('team'));
        expect(await viaPool(request)).toEqual({ text: expected, there: false });
        expect(await viaPool(request)).toEqual({ text: expected, there: true });
      }
    } finally {
      await pool.close();
      await shard.close();
    }
  });
});

describe("the read threads' reply ports", () => {
  // 40 files that each hold `needle` on some lines: a grep is a task on a read thread.
  const docs = Array.from({ length: 40 }, (_, i) => ({
    path: `/d/f${String(i).padStart(2, '0')}.txt`,
    text: Array.from({ length: 50 + i }, (_, j) => (j % (i + 2) === 0 ? `needle ${i} ${j}` : `hay ${j}`)).join('\n'),
  }));
  const requests = [
    { claims: null, pattern: 'needle', outputMode: 'content' as const },
    { claims: null, pattern: 'needle \\d+ 1', outputMode: 'count' as const },
    { claims: null, pattern: 'hay 4\\d', outputMode: 'files_with_matches' as const },
  ];

  /** Asks each request `rounds` times, all at once, and checks every answer against the engine's own. */
  async function askAll(pool: ReadPool, shard: TestShard, rounds: number): Promise<void> {
    const withDeadline = requests.map((request) => ({ ...request, deadline: Date.now() + 60_000 }));
    const expected = withDeadline.map((request) => output(grep(shard.reader, request)));
    const calls = Array.from({ length: rounds }, () => withDeadline).flatMap((batch) =>
      batch.map(async (request) => {
        const chunks: Buffer[] = [];
        const call = pool.run('grep', shard.dir, request, (data, release) => {
          chunks.push(Buffer.from(data));
          release();
        });
        expect((await call.outcome).kind).toBe('done');
        return Buffer.concat(chunks).toString();
      }),
    );
    expect(await Promise.all(calls)).toEqual(Array(rounds).fill(expected).flat());
  }

  /** Asks until both threads have given their ports (each gives it with its first task). */
  async function untilBothReply(pool: ReadPool, shard: TestShard): Promise<void> {
    for (let i = 0; i < 50 && pool.replyThreads < 2; i++) await askAll(pool, shard, 2);
    expect(pool.replyThreads).toBe(2);
  }

  it('once every thread has given its port, calls take no channel of their own, and answer the same', async () => {
    const shard = await buildShard(docs);
    const pool = new ReadPool(2, Number.MAX_SAFE_INTEGER);
    try {
      await untilBothReply(pool, shard);
      const before = pool.ownChannels;
      expect(before).toBeGreaterThan(0);
      await askAll(pool, shard, 10);
      expect(pool.ownChannels).toBe(before);
    } finally {
      await pool.close();
      await shard.close();
    }
  });

  it('a read thread that dies is replaced, and calls go on being answered', async () => {
    const shard = await buildShard(docs);
    const pool = new ReadPool(2, Number.MAX_SAFE_INTEGER);
    try {
      await untilBothReply(pool, shard);
      const threads = (pool as unknown as { piscina: { threads: Array<{ terminate(): Promise<number> }> } }).piscina.threads;
      await threads[0].terminate();
      await until(() => pool.replyThreads === 1, 2_000);
      expect(pool.replyThreads).toBe(1);
      // Calls now come with a channel of their own until the new thread has given its port.
      const before = pool.ownChannels;
      await untilBothReply(pool, shard);
      expect(pool.ownChannels).toBeGreaterThan(before);
      const settled = pool.ownChannels;
      await askAll(pool, shard, 10);
      expect(pool.ownChannels).toBe(settled);
    } finally {
      await pool.close();
      await shard.close();
    }
  });

  // A process that holds nothing else open: while a call waits on a reply port, the port keeps
  // it alive (else the process ends with the call's promise unsettled, exit code 13).
  const ROOT = fileURLToPath(new URL('..', import.meta.url));
  const SCRIPT = `
import { ReadPool } from '${ROOT}reads/read-pool.ts';
import { buildShard } from '${ROOT}test/helpers/engine-shard.ts';
const shard = await buildShard(Array.from({ length: 20 }, (_, i) => ({ path: '/f' + i + '.txt', text: 'alpha ' + i + '\\n' })));
const pool = new ReadPool(2, Number.MAX_SAFE_INTEGER);
let answered = 0;
const one = () => new Promise((resolve) => {
  const call = pool.run('grep', shard.dir, { claims: null, pattern: 'alpha', outputMode: 'count', deadline: Date.now() + 60_000 }, (_data, release) => release());
  void call.outcome.then((outcome) => resolve(outcome.kind === 'done' && answered++));
});
let next = 0;
await Promise.all(Array.from({ length: 4 }, async () => { while (next++ < 3000) await one(); }));
await pool.close();
await shard.close();
process.stdout.write(String(answered));
`;

  it('a call waiting on a reply port keeps a process with nothing else open alive until it is answered', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'pool-calls-'));
    try {
      const script = join(dir, 'calls.mts');
      await writeFile(script, SCRIPT);
      for (let run = 0; run < 3; run++) {
        const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', script], { cwd: ROOT });
        expect(stdout).toBe('3000');
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
