import { describe, expect, it } from 'vitest';
import { paced } from '../core/paced.js';

describe('paced', () => {
  it('measures again only once factor times the last duration has passed, and gives the last value between', async () => {
    let clock = 0;
    let runs = 0;
    // Each measurement takes 10 ms of the clock and returns how many have run.
    const measure = paced(
      async () => {
        clock += 10;
        return ++runs;
      },
      50,
      () => clock,
    );
    expect(await measure()).toBe(1);
    clock = 499;
    expect(await measure()).toBe(1);
    clock = 500;
    expect(await measure()).toBe(2);
    // That one started at 500 and took 10: the next at 1,000.
    clock = 999;
    expect(await measure()).toBe(2);
    expect(runs).toBe(2);
    clock = 1000;
    expect(await measure()).toBe(3);
  });

  it('measures at every call when the measurement takes no time', async () => {
    let runs = 0;
    const measure = paced(
      async () => ++runs,
      50,
      () => 0,
    );
    expect([await measure(), await measure(), await measure()]).toEqual([1, 2, 3]);
  });

  it('a failed measurement is tried again at the next call', async () => {
    let runs = 0;
    const measure = paced(
      async () => {
        if (++runs === 1) throw new Error('gone');
        return runs;
      },
      50,
      () => 0,
    );
    await expect(measure()).rejects.toThrow('gone');
    expect(await measure()).toBe(2);
  });
});
