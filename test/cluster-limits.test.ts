/**
 * Limits across nodes: three services on one database. With VFS_CLUSTER_LIMITS=on the read
 * rate, the management rate and the failed-authentication lock hold for the three together
 * (api/gate/shared-limits.ts); with it off each node limits alone, which lets three times through.
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setAccountLimits } from '../db/accounts.js';
import { takeSharedLimits } from '../db/cluster-limits.js';
import { Coalescer } from '../core/coalescer.js';
import { newCredential } from '../core/credentials.js';
import { startTestService, type TestService } from './helpers/service.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Credential rate (and burst) of the accounts under test; their account rate is far above. */
const RATE = 20;
/** A rate at which a node takes slots ahead for its next requests (a lease: a quarter of the burst at most). */
const LEASED_RATE = 100;
/** How long a burst lasts. */
const BURST_MS = 3000;

/** Three cluster nodes on one new database, each with its own data directory. */
async function startNodes(limits: Record<string, string>): Promise<TestService[]> {
  const env = { VFS_CLUSTER: 'on', ...limits };
  const first = await startTestService(env, { realLimits: true });
  const others = await Promise.all([1, 2].map(() => startTestService(env, { realLimits: true, database: first })));
  return [first, ...others];
}

/** A GET from a chosen local address (127.0.0.x): its status, and whether it was refused by the failed-authentication lock. */
function getFrom(base: string, path: string, localAddress: string, headers: Record<string, string>): Promise<{ status: number; locked: boolean }> {
  return new Promise((resolve, reject) => {
    const req = request(base + path, { localAddress, headers }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, locked: res.statusCode === 429 && /failed authentication/.test(body) }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Polls until `check` holds or a second passes (what "reaches every node within a second" allows). */
async function withinASecond(check: () => Promise<boolean>): Promise<boolean> {
  const deadline = Date.now() + 1000;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await sleep(20);
  }
}

/**
 * One token reads as fast as it can from every node for BURST_MS: the reads admitted (anything
 * but 429), and what a limit of RATE per second with a burst of RATE admits over the time from
 * the first request sent to the last.
 */
async function burst(nodes: TestService[], token: string, rate = RATE): Promise<{ admitted: number; expected: number }> {
  let admitted = 0;
  let first = Infinity;
  let last = 0;
  const end = Date.now() + BURST_MS;
  const worker = async (node: TestService): Promise<void> => {
    while (Date.now() < end) {
      const sent = Date.now();
      first = Math.min(first, sent);
      last = Math.max(last, sent);
      const r = await node.call('GET', '/v1/workspaces/ws/ls', { key: token });
      if (r.status !== 429) admitted++;
    }
  };
  // Six clients per node: several times the rate even when the machine is busy.
  await Promise.all(nodes.flatMap((node) => Array.from({ length: 6 }, () => worker(node))));
  return { admitted, expected: rate + (rate * (last - first)) / 1000 };
}

/** A new account limited to RATE reads per second per credential, with a workspace and a token. */
async function limitedToken(nodes: TestService[], account: string, rate = RATE): Promise<string> {
  const key = await nodes[0].newAccount(account);
  expect((await nodes[0].call('POST', '/v1/workspaces', { key, body: { name: 'ws' } })).status).toBe(201);
  const token = (await nodes[0].call('POST', '/v1/workspaces/ws/tokens', { key, body: {} })).json.token as string;
  await setAccountLimits(nodes[0].service.db, account, { limits: { readRatePerCredential: rate, readRatePerAccount: 100_000 } });
  await sleep(300); // the change reaches every node by NOTIFY
  // Each node has the token cached and the limits loaded, so the burst measures the limit only.
  for (const node of nodes) expect((await node.call('GET', '/v1/workspaces/ws/ls', { key: token })).status).toBe(200);
  await sleep(1500); // the buckets refill
  return token;
}

describe('limits shared by three nodes (VFS_CLUSTER_LIMITS=on)', () => {
  let nodes: TestService[] = [];
  beforeAll(async () => {
    nodes = await startNodes({ VFS_CLUSTER_LIMITS: 'on', VFS_AUTH_FAILURES: '3', VFS_AUTH_FAILURE_WINDOW_SECONDS: '30', VFS_MANAGEMENT_RATE: '5' });
  });
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
  });

  it.each([RATE, LEASED_RATE])('holds one token bursting across the nodes to its rate (%i/s) plus burst, within 10%', async (rate) => {
    const token = await limitedToken(nodes, `burst-on-${rate}`, rate);
    const { admitted, expected } = await burst(nodes, token, rate);
    expect(Math.abs(admitted - expected) / expected, `${admitted} admitted, ${expected.toFixed(1)} expected`).toBeLessThan(0.1);
  });

  it('holds the management rate across the nodes', async () => {
    await sleep(1200); // the key's bucket refills from the set-up calls
    const replies = await Promise.all(nodes.flatMap((node) => Array.from({ length: 5 }, () => node.call('GET', '/v1/workspaces'))));
    const admitted = replies.filter((r) => r.status === 200).length;
    // A burst of 5 at once; the requests take some ms, in which at most one more slot comes.
    expect(admitted).toBeGreaterThanOrEqual(5);
    expect(admitted).toBeLessThanOrEqual(6);
    for (const r of replies.filter((x) => x.status === 429)) expect(r.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
  });

  it('locks an address on every node once its failures, spread over the nodes, reach the threshold', async () => {
    const bad = { authorization: `Bearer ${newCredential('management_key')}` };
    const good = { authorization: `Bearer ${nodes[0].key}` };
    await sleep(1200); // the management bucket refills
    for (const node of nodes) expect((await getFrom(node.url, '/v1/workspaces', '127.0.0.5', good)).status).toBe(200);
    // One failure per node: no node alone reaches the threshold of three.
    for (const node of nodes) expect((await getFrom(node.url, '/v1/workspaces', '127.0.0.5', bad)).status).toBe(401);
    for (const node of nodes) expect(await withinASecond(async () => (await getFrom(node.url, '/v1/workspaces', '127.0.0.5', good)).locked)).toBe(true);
    // Another address is not locked.
    await sleep(1200); // the management bucket refills
    for (const node of nodes) expect((await getFrom(node.url, '/v1/workspaces', '127.0.0.6', good)).status).toBe(200);
  });

  it('a token revoked through one node is refused by the others within a second', async () => {
    await sleep(1200);
    expect((await nodes[0].call('POST', '/v1/workspaces', { body: { name: 'ws' } })).status).toBe(201);
    const token = (await nodes[0].call('POST', '/v1/workspaces/ws/tokens', { body: {} })).json as { id: string; token: string };
    for (const node of nodes.slice(1)) expect((await node.call('GET', '/v1/workspaces/ws/ls', { key: token.token })).status).toBe(200);
    expect((await nodes[0].call('DELETE', `/v1/tokens/${token.id}`)).status).toBe(204);
    for (const node of nodes.slice(1)) {
      expect(await withinASecond(async () => (await node.call('GET', '/v1/workspaces/ws/ls', { key: token.token })).status === 401)).toBe(true);
    }
  });

  it('sweeps buckets whose time has passed, so the table stays bounded', async () => {
    await sleep(1100); // every bucket of the tests above is full again
    const su = await nodes[0].superuser();
    try {
      expect(Number((await su.query('SELECT count(*) FROM rate_buckets')).rows[0].count)).toBeGreaterThan(0);
      expect((await nodes[1].service.db.appStatement<{ swept: number }>('SELECT sweep_cluster_limits() AS swept', [])).rows[0].swept).toBeGreaterThan(0);
      expect(Number((await su.query('SELECT count(*) FROM rate_buckets')).rows[0].count)).toBe(0);
    } finally {
      await su.end();
    }
  });

  it('takes back slots a node took and never used, but never past a full bucket', async () => {
    // One key at 1 a minute with a burst of 10: no slot comes back by time during the test.
    const take = async (count: number, returns: number): Promise<number> => {
      const batch = { keys: ['give-back'], intervals: [60_000], tolerances: [540_000], members: [1], ends: [1], counts: [count], returns: [returns] };
      return (await takeSharedLimits(nodes[2].service.db, batch)).admitted[0];
    };
    expect(await take(10, 0)).toBe(10);
    expect(await take(1, 0)).toBe(0);
    expect(await take(4, 3)).toBe(3);
    expect(await take(1, 0)).toBe(0);
    // A hundred given back fill the bucket, no more.
    expect(await take(20, 100)).toBe(10);
  });
});

describe('limits per node (VFS_CLUSTER_LIMITS=off)', () => {
  let nodes: TestService[] = [];
  beforeAll(async () => {
    nodes = await startNodes({ VFS_CLUSTER_LIMITS: 'off' });
  });
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
  });

  it('lets about three times the rate through: each node limits alone', async () => {
    const token = await limitedToken(nodes, 'burst-off');
    const { admitted, expected } = await burst(nodes, token);
    expect(admitted / expected, `${admitted} admitted, ${expected.toFixed(1)} expected of one node`).toBeGreaterThan(2.5);
  });
});

describe('coalescing', () => {
  it('sends what waits during a round trip in the next one, one round trip at a time', async () => {
    const batches: number[][] = [];
    let inFlight = 0;
    const coalescer = new Coalescer<number, number>(async (items) => {
      expect(++inFlight).toBe(1);
      batches.push(items);
      await sleep(20);
      inFlight--;
      return items.map((i) => i * 2);
    });
    const first = coalescer.submit(0);
    await sleep(5); // the first round trip is under way
    const rest = Array.from({ length: 50 }, (_, i) => coalescer.submit(i + 1));
    expect(await Promise.all([first, ...rest])).toEqual(Array.from({ length: 51 }, (_, i) => i * 2));
    expect(batches.map((b) => b.length)).toEqual([1, 50]);
  });
});
