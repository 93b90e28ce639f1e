import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { everyInTurn } from '../core/every-in-turn.js';

/** A task that takes `ms`, recording how many runs overlap and how many have ended. */
function slowTask(ms: number) {
  let inside = 0;
  const seen = { mostAtOnce: 0, ended: 0 };
  const task = async (): Promise<void> => {
    inside++;
    seen.mostAtOnce = Math.max(seen.mostAtOnce, inside);
    await sleep(ms);
    inside--;
    seen.ended++;
  };
  return { task, seen };
}

describe('everyInTurn', () => {
  it('runs at start, then on the timer; a run that outlasts the interval is neither overlapped nor queued behind', async () => {
    const { task, seen } = slowTask(30);
    const stop = everyInTurn(task, 5, true);
    await sleep(200);
    const endedBeforeStop = seen.ended;
    await stop();
    expect(seen.mostAtOnce).toBe(1);
    expect(endedBeforeStop).toBeGreaterThanOrEqual(2);
    // The stop waited for the one run in progress, not for a tick's worth queued behind it.
    expect(seen.ended - endedBeforeStop).toBeLessThanOrEqual(1);
  });

  it('stop waits for the run in progress, and nothing runs after it', async () => {
    const { task, seen } = slowTask(50);
    const stop = everyInTurn(task, 1_000, true);
    await sleep(10);
    await stop();
    expect(seen.ended).toBe(1);
    await sleep(60);
    expect(seen.ended).toBe(1);
  });

  it('with an interval of 0, runs only at start, or never when not asked to', async () => {
    const atStart = slowTask(1);
    await everyInTurn(atStart.task, 0, true)();
    const never = slowTask(1);
    await everyInTurn(never.task, 0, false)();
    await sleep(20);
    expect([atStart.seen.ended, never.seen.ended]).toEqual([1, 0]);
  });
});
