import { describe, expect, it } from 'vitest';
import { TtlCache } from '../core/ttl-cache.js';

/** A load whose completion the test controls, counting how often it was started. */
function gate<V>() {
  let starts = 0;
  const pending: Array<{ resolve: (v: V) => void; reject: (e: unknown) => void }> = [];
  return {
    load: (): Promise<V> => {
      starts++;
      return new Promise<V>((resolve, reject) => pending.push({ resolve, reject }));
    },
    get starts() {
      return starts;
    },
    resolveAll: (v: V) => {
      for (const p of pending.splice(0)) p.resolve(v);
    },
    rejectAll: (e: unknown) => {
      for (const p of pending.splice(0)) p.reject(e);
    },
  };
}

describe('TtlCache', () => {
  it('loads once for callers that miss together, then serves the value until it expires', async () => {
    const cache = new TtlCache<string>(60_000);
    const g = gate<string>();
    const all = Promise.all(Array.from({ length: 100 }, () => cache.get('k', g.load)));
    expect(g.starts).toBe(1);
    g.resolveAll('v');
    expect(await all).toEqual(Array(100).fill('v'));
    expect(await cache.get('k', g.load)).toBe('v');
    expect(g.starts).toBe(1);
  });

  it('forgets a failed load, so the next caller tries again', async () => {
    const cache = new TtlCache<string>(60_000);
    const g = gate<string>();
    const first = cache.get('k', g.load);
    const second = cache.get('k', g.load);
    g.rejectAll(new Error('down'));
    await expect(first).rejects.toThrow('down');
    await expect(second).rejects.toThrow('down');
    const third = cache.get('k', g.load);
    expect(g.starts).toBe(2);
    g.resolveAll('v');
    expect(await third).toBe('v');
  });

  it('never hands a caller after clear() a value loaded before it', async () => {
    const cache = new TtlCache<string>(60_000);
    const before = gate<string>();
    const early = cache.get('k', before.load);
    cache.clear(); // e.g. a revocation while the lookup was running
    const after = gate<string>();
    const late = cache.get('k', after.load);
    expect(after.starts).toBe(1);
    before.resolveAll('stale');
    after.resolveAll('fresh');
    expect(await early).toBe('stale');
    expect(await late).toBe('fresh');
    expect(await cache.get('k', after.load)).toBe('fresh');
    expect(after.starts).toBe(1);
  });

  it('reloads after the time to live', async () => {
    const cache = new TtlCache<number>(20);
    let n = 0;
    expect(await cache.get('k', async () => ++n)).toBe(1);
    expect(await cache.get('k', async () => ++n)).toBe(1);
    await new Promise((r) => setTimeout(r, 40));
    expect(await cache.get('k', async () => ++n)).toBe(2);
  });

  it('caches nothing with a time to live of zero', async () => {
    const cache = new TtlCache<number>(0);
    let n = 0;
    expect(await cache.get('k', async () => ++n)).toBe(1);
    expect(await cache.get('k', async () => ++n)).toBe(2);
  });

  it('keeps at most maxEntries loaded values, evicting the oldest, and failures evict nothing', async () => {
    const cache = new TtlCache<string>(60_000, 3);
    for (const k of ['a', 'b', 'c']) await cache.get(k, async () => k);
    await cache.get('bad', async () => Promise.reject(new Error('no'))).catch(() => {});
    await new Promise((r) => setTimeout(r, 0));
    let loads = 0;
    const load = (k: string) => async () => {
      loads++;
      return k;
    };
    for (const k of ['a', 'b', 'c']) await cache.get(k, load(k));
    expect(loads).toBe(0);
    await cache.get('d', load('d'));
    await new Promise((r) => setTimeout(r, 0));
    expect(loads).toBe(1);
    await cache.get('a', load('a')); // the oldest went
    expect(loads).toBe(2);
  });
  it('peeks at a loaded value only: not while loading, not after a failure, expiry or clear()', async () => {
    const cache = new TtlCache<string>(30);
    const g = gate<string>();
    const loading = cache.get('k', g.load);
    expect(cache.peek('k')).toBeUndefined();
    g.resolveAll('v');
    await loading;
    expect(cache.peek('k')).toBe('v');
    expect(cache.peek('other')).toBeUndefined();
    cache.clear();
    expect(cache.peek('k')).toBeUndefined();

    const failing = cache.get('k', g.load);
    g.rejectAll(new Error('down'));
    await expect(failing).rejects.toThrow('down');
    expect(cache.peek('k')).toBeUndefined();

    await cache.get('k', async () => 'w');
    expect(cache.peek('k')).toBe('w');
    await new Promise((r) => setTimeout(r, 50));
    expect(cache.peek('k')).toBeUndefined();
  });
});
