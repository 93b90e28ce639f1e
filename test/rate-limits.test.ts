/** Plan limits on reads, the management rate, and the failed-authentication lock. */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setAccountLimits } from '../db/accounts.js';
import { newCredential } from '../core/credentials.js';
import { FailureWindow, RateLimiter } from '../api/gate/rate-limit.js';
import { settled, startTestService, type TestService } from './helpers/service.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A GET from a chosen local address (127.0.0.x), with optional extra headers. */
function getFrom(
  base: string,
  path: string,
  localAddress: string,
  headers: Record<string, string | string[]>,
): Promise<{ status: number; retryAfter: string | undefined; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(base + path, { localAddress, headers }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, retryAfter: res.headers['retry-after'] as string | undefined, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('read rate limits', () => {
  let t: TestService;
  let key: string;
  beforeAll(async () => {
    t = await startTestService({}, { realLimits: true });
    key = await t.newAccount('limited');
    expect((await t.call('POST', '/v1/workspaces', { key, body: { name: 'ws' } })).status).toBe(201);
    expect((await t.call('PUT', '/v1/workspaces/ws/files/a.txt', { key, body: 'a\n' })).status).toBe(202);
    await settled(t, 'ws', 30_000, key);
    await setAccountLimits(t.service.db, 'limited', { limits: { readRatePerCredential: 5, readRatePerAccount: 8 } });
    await sleep(300); // the change reaches the service by NOTIFY
  });
  afterAll(async () => t?.stop());

  it('a burst of B+1 lets exactly B through; a retry after Retry-After succeeds', async () => {
    const replies = await Promise.all(Array.from({ length: 6 }, () => t.call('GET', '/v1/workspaces/ws/ls', { key })));
    expect(replies.filter((r) => r.status === 200)).toHaveLength(5);
    const refused = replies.filter((r) => r.status === 429);
    expect(refused).toHaveLength(1);
    const retryAfter = refused[0].headers.get('retry-after')!;
    expect(retryAfter).toMatch(/^[1-9]\d*$/);
    expect(refused[0].text).toMatch(/rate limit/);
    await sleep(Number(retryAfter) * 1000);
    expect((await t.call('GET', '/v1/workspaces/ws/ls', { key })).status).toBe(200);
  });

  it('the account limit holds across credentials', async () => {
    await sleep(2000); // let both buckets refill
    const tokens = await Promise.all([1, 2].map(async () => (await t.call('POST', '/v1/workspaces/ws/tokens', { key, body: {} })).json.token as string));
    const replies = await Promise.all(Array.from({ length: 10 }, (_, i) => t.call('GET', '/v1/workspaces/ws/ls', { key: tokens[i % 2] })));
    expect(replies.filter((r) => r.status === 200)).toHaveLength(8);
    for (const r of replies.filter((x) => x.status === 429)) expect(r.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
  });
});

describe('management rate limit', () => {
  let t: TestService;
  beforeAll(async () => {
    t = await startTestService({ VFS_MANAGEMENT_RATE: '3' }, { realLimits: true });
  });
  afterAll(async () => t?.stop());

  it('refuses past the per-credential rate with a JSON 429 and Retry-After', async () => {
    const replies = await Promise.all(Array.from({ length: 4 }, () => t.call('GET', '/v1/workspaces')));
    expect(replies.map((r) => r.status).sort()).toEqual([200, 200, 200, 429]);
    const refused = replies.find((r) => r.status === 429)!;
    expect(refused.json).toEqual({ error: expect.stringMatching(/rate limit/) });
    await sleep(Number(refused.headers.get('retry-after')) * 1000);
    expect((await t.call('GET', '/v1/workspaces')).status).toBe(200);
  });
});

describe('failed authentication lock', () => {
  const bad = { authorization: `Bearer ${newCredential('management_key')}` };

  it('locks the failing address only, until the window passes', async () => {
    const t = await startTestService({ VFS_AUTH_FAILURES: '3', VFS_AUTH_FAILURE_WINDOW_SECONDS: '2' }, { realLimits: true });
    try {
      const good = { authorization: `Bearer ${t.key}` };
      // From here the key is in the credential cache: the lock applies to it all the same.
      expect((await getFrom(t.url, '/v1/workspaces', '127.0.0.1', good)).status).toBe(200);
      for (let i = 0; i < 3; i++) expect((await getFrom(t.url, '/v1/workspaces', '127.0.0.1', bad)).status).toBe(401);
      const locked = await getFrom(t.url, '/v1/workspaces', '127.0.0.1', good);
      expect(locked.status).toBe(429);
      expect(locked.retryAfter).toMatch(/^[12]$/);
      expect(JSON.parse(locked.body).error).toMatch(/failed authentication/);
      expect((await getFrom(t.url, '/v1/workspaces/x/ls', '127.0.0.1', good)).status).toBe(429);
      // Probes need no credential and are not locked.
      expect((await getFrom(t.url, '/healthz', '127.0.0.1', {})).status).toBe(200);
      // Another address is unaffected.
      expect((await getFrom(t.url, '/v1/workspaces', '127.0.0.2', good)).status).toBe(200);
      await sleep(Number(locked.retryAfter) * 1000);
      expect((await getFrom(t.url, '/v1/workspaces', '127.0.0.1', good)).status).toBe(200);
    } finally {
      await t.stop();
    }
  });

  it('ignores X-Forwarded-For unless configured: a spoof neither evades nor triggers the lock', async () => {
    const t = await startTestService({ VFS_AUTH_FAILURES: '3', VFS_AUTH_FAILURE_WINDOW_SECONDS: '30' }, { realLimits: true });
    try {
      const good = { authorization: `Bearer ${t.key}` };
      // Failures claiming to come from 127.0.0.9 are charged to the real address, 127.0.0.2.
      for (let i = 0; i < 3; i++) expect((await getFrom(t.url, '/v1/workspaces', '127.0.0.2', { ...bad, 'x-forwarded-for': '127.0.0.9' })).status).toBe(401);
      expect((await getFrom(t.url, '/v1/workspaces', '127.0.0.2', { ...good, 'x-forwarded-for': `10.0.0.${1}` })).status).toBe(429);
      // The spoofed address was not locked: a client really at 127.0.0.3 naming it goes through.
      expect((await getFrom(t.url, '/v1/workspaces', '127.0.0.3', { ...good, 'x-forwarded-for': '127.0.0.9' })).status).toBe(200);
    } finally {
      await t.stop();
    }
  });

  it('uses the right-most X-Forwarded-For address when configured', async () => {
    const t = await startTestService({ VFS_AUTH_FAILURES: '2', VFS_AUTH_FAILURE_WINDOW_SECONDS: '30', VFS_TRUST_PROXY: 'true' }, { realLimits: true });
    try {
      const good = { authorization: `Bearer ${t.key}` };
      for (let i = 0; i < 2; i++)
        expect((await getFrom(t.url, '/v1/workspaces', '127.0.0.1', { ...bad, 'x-forwarded-for': 'spoofed, 192.0.2.7' })).status).toBe(401);
      expect((await getFrom(t.url, '/v1/workspaces', '127.0.0.1', { ...good, 'x-forwarded-for': '192.0.2.7' })).status).toBe(429);
      expect((await getFrom(t.url, '/v1/workspaces', '127.0.0.1', { ...good, 'x-forwarded-for': '192.0.2.8' })).status).toBe(200);
      // A proxy that adds its own header line after the client's: the last line's address counts.
      for (let i = 0; i < 2; i++) {
        const lines = { ...bad, 'x-forwarded-for': ['192.0.2.8', '192.0.2.9'] };
        expect((await getFrom(t.url, '/v1/workspaces', '127.0.0.1', lines)).status).toBe(401);
      }
      expect((await getFrom(t.url, '/v1/workspaces', '127.0.0.1', { ...good, 'x-forwarded-for': '192.0.2.9' })).status).toBe(429);
      expect((await getFrom(t.url, '/v1/workspaces', '127.0.0.1', { ...good, 'x-forwarded-for': '192.0.2.8' })).status).toBe(200);
    } finally {
      await t.stop();
    }
  });
});

describe('limiter memory', () => {
  it('stays bounded whatever the number of keys and addresses', () => {
    const limiter = new RateLimiter(1000);
    const failures = new FailureWindow(5, 60_000, 1000);
    for (let i = 0; i < 50_000; i++) {
      limiter.take([{ key: `k${i}`, ratePerSecond: 10, burst: 10 }]);
      failures.fail(`10.0.${i >> 8}.${i & 255}`);
    }
    expect(limiter.size).toBeLessThanOrEqual(1000);
    expect(failures.size).toBeLessThanOrEqual(1000);
  });

  it('keeps a key in use however many others come and go', () => {
    const limiter = new RateLimiter(1000);
    const hot = [{ key: 'hot', ratePerSecond: 1, burst: 1 }];
    expect(limiter.take(hot, 0).ok).toBe(true);
    for (let i = 0; i < 20_000; i++) {
      limiter.take([{ key: `k${i}`, ratePerSecond: 10, burst: 10 }], 0);
      // Forgotten, it would pass again at once.
      if (i % 100 === 0) expect(limiter.take(hot, 0).ok).toBe(false);
    }
    expect(limiter.size).toBeLessThanOrEqual(1000);
  });

  it('GCRA: a burst of B passes at once, the next waits one interval', () => {
    const limiter = new RateLimiter();
    const limit = [{ key: 'x', ratePerSecond: 4, burst: 4 }];
    for (let i = 0; i < 4; i++) expect(limiter.take(limit, 1000).ok).toBe(true);
    expect(limiter.take(limit, 1000)).toEqual({ ok: false, retryAfter: 1 });
    expect(limiter.take(limit, 1250).ok).toBe(true);
    expect(limiter.take(limit, 1250).ok).toBe(false);
  });
});

describe('limits shared with other nodes (the local side)', () => {
  const limit = [{ key: 'x', ratePerSecond: 4, burst: 4 }];

  it('refund gives back the slots a refused request took', () => {
    const limiter = new RateLimiter();
    for (let i = 0; i < 4; i++) expect(limiter.take(limit, 1000).ok).toBe(true);
    expect(limiter.take(limit, 1000).ok).toBe(false);
    limiter.refund(limit);
    expect(limiter.take(limit, 1000).ok).toBe(true);
  });

  it.each([
    // [ms the shared bucket is ahead, requests admitted at once after adopting it]
    [0, 4],
    [250, 3],
    [750, 1],
    [1000, 0],
  ])('adopting a shared TAT %i ms ahead leaves %i of a burst of 4', (ahead, admitted) => {
    const limiter = new RateLimiter();
    limiter.adopt('x', ahead, 1000);
    let n = 0;
    while (limiter.take(limit, 1000).ok) n++;
    expect(n).toBe(admitted);
  });

  it('adopting never moves a TAT back', () => {
    const limiter = new RateLimiter();
    for (let i = 0; i < 4; i++) limiter.take(limit, 1000);
    limiter.adopt('x', 250, 1000);
    expect(limiter.take(limit, 1000).ok).toBe(false);
  });

  it('a lock announced by another node holds until it lapses, and ends the quiet', () => {
    const failures = new FailureWindow(3, 60_000);
    expect(failures.quiet(1000)).toBe(true);
    failures.lock('10.0.0.1', 2000, 1000);
    expect(failures.check('10.0.0.1', 1000)).toEqual({ ok: false, retryAfter: 2 });
    expect(failures.check('10.0.0.2', 1000).ok).toBe(true);
    expect(failures.quiet(1000)).toBe(false);
    expect(failures.check('10.0.0.1', 3000).ok).toBe(true);
    expect(failures.quiet(3000)).toBe(true);
  });
});
