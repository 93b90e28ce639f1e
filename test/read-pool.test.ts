/**
 * Stopping the read pool: a thread terminated while lmdb's native addon initialises aborts the
 * whole process ("FATAL ERROR: Error::ThrowAsJavaScriptException napi_throw"; it took down a
 * test process once), so `close` stops no thread before its modules have loaded.
 */
import { BroadcastChannel } from 'node:worker_threads';
import { afterAll, describe, expect, it } from 'vitest';
import { ReadPool } from '../reads/read-pool.js';
import { THREAD_LOADED } from '../reads/read-protocol.js';

const loaded = new Set<number>();
const channel = new BroadcastChannel(THREAD_LOADED);
channel.onmessage = (event) => loaded.add((event as { data: number }).data);
afterAll(() => channel.close());

/** Resolves once `count` threads have said they loaded, or after `ms`. */
async function loadedReach(count: number, ms: number): Promise<number> {
  const deadline = Date.now() + ms;
  while (loaded.size < count && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
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
