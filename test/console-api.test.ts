/**
 * The console's two routes: GET /v1/whoami for a management key and for a scoped token (not
 * audited, not counted against the read rates), and GET /v1/status (management key only): the
 * workspaces' files by ingest status, the files ingest finished lately, this process's read-tool
 * calls over HTTP and MCP with their p99, each account seeing only its own; the nodes' query
 * counts only the account's copies. Also the ring of recent reads itself, on a clock the test
 * moves.
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RecentReads, SLOT_MS, SLOTS } from '../api/recent-reads.js';
import { accountNodes } from '../db/nodes.js';
import { put, settled, startTestService, type TestService } from './helpers/service.js';

const CORRUPT_PDF = Buffer.from('%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 9 0 R >>\nendobj\ntrailer garbage');
const FILES: Record<string, Array<[string, string | Buffer, string]>> = {
  alpha: [
    ['notes/a.txt', 'alpha one\nTODO: first\n', 'text/plain'],
    ['notes/b.md', '# b\nTODO: second\n', 'text/markdown'],
    ['broken.pdf', CORRUPT_PDF, 'application/pdf'],
  ],
  beta: [['c.txt', 'beta\n', 'text/plain']],
};
/** Every latency bucket's upper bound in ms (api/metrics.ts), and the slowest call's own value above the last. */
const BOUNDS_MS = [1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000];

let t: TestService;
let token: { id: string; token: string; claims: string[]; expiresAt: string };
let uploadedFrom: number;

beforeAll(async () => {
  t = await startTestService();
  uploadedFrom = Date.now();
  for (const [ws, files] of Object.entries(FILES)) {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: ws } })).status).toBe(201);
    for (const [path, body, type] of files) expect((await put(t, ws, path, body, { 'content-type': type })).status).toBe(202);
  }
  for (const ws of Object.keys(FILES)) await settled(t, ws);
  const minted = await t.call('POST', '/v1/workspaces/alpha/tokens', { body: { claims: ['group:eng', 'user:ann'], ttlSeconds: 600 } });
  expect(minted.status).toBe(201);
  token = minted.json;
});
afterAll(async () => t?.stop());

/** The events of a workspace's audit log. */
async function auditEvents(ws: string): Promise<number> {
  return (await t.call('GET', `/v1/workspaces/${ws}/audit?limit=1000`)).json.events.length;
}

describe('GET /v1/whoami', () => {
  it('names a management key', async () => {
    const r = await t.call('GET', '/v1/whoami');
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ kind: 'management_key' });
  });

  it('names a token: its id, pinned workspace, claims and expiry', async () => {
    const r = await t.call('GET', '/v1/whoami', { key: token.token });
    expect(r.status).toBe(200);
    expect(r.json).toEqual({ kind: 'token', id: token.id, workspace: 'alpha', claims: ['group:eng', 'user:ann'], expiresAt: token.expiresAt });
  });

  it.each([
    ['no credential', null],
    ['a malformed one', 'nonsense'],
    ['an unknown key', `svc_sk_${'A'.repeat(43)}`],
  ])('401 for %s', async (_, key) => {
    const r = await t.call('GET', '/v1/whoami', { key });
    expect(r.status).toBe(401);
    expect(r.json).toEqual({ error: expect.any(String) });
    expect(r.headers.get('www-authenticate')).toBe('Bearer');
  });

  it('takes no query parameter', async () => {
    const r = await t.call('GET', '/v1/whoami?x=1');
    expect(r.status).toBe(400);
    expect(r.json.error).toContain('x');
  });

  it('is not audited', async () => {
    const before = await auditEvents('alpha');
    for (let i = 0; i < 3; i++) expect((await t.call('GET', '/v1/whoami', { key: token.token })).status).toBe(200);
    expect(await auditEvents('alpha')).toBe(before);
  });

  it("does not take from the read rates: an account allowed one read a second still reads once after whoami's", async () => {
    const key = await t.newAccount('one-read', 'default');
    await t.service.db.owner.query("UPDATE accounts SET read_rate_per_credential = 1, read_rate_per_account = 1 WHERE name = 'one-read'");
    expect((await t.call('POST', '/v1/workspaces', { key, body: { name: 'w' } })).status).toBe(201);
    for (let i = 0; i < 5; i++) expect((await t.call('GET', '/v1/whoami', { key })).status).toBe(200);
    expect((await t.call('GET', '/v1/workspaces/w/ls', { key })).status).toBe(200);
    expect((await t.call('GET', '/v1/workspaces/w/ls', { key })).status).toBe(429);
  });
});

describe('GET /v1/status', () => {
  it('refuses a token as every management route does, and no credential with 401', async () => {
    const byToken = await t.call('GET', '/v1/status', { key: token.token });
    expect(byToken.status).toBe(403);
    expect(byToken.json).toEqual({ error: 'a scoped token may only call the read tools (ls, find, cat, grep)' });
    expect((await t.call('GET', '/v1/status', { key: null })).status).toBe(401);
    expect((await t.call('GET', '/v1/status?verbose=1')).status).toBe(400);
  });

  it("counts each workspace's files by status", async () => {
    const r = await t.call('GET', '/v1/status');
    expect(r.status).toBe(200);
    const size = (ws: string): number => FILES[ws].reduce((sum, [, body]) => sum + Buffer.byteLength(body), 0);
    expect(r.json.workspaces).toEqual([
      { name: 'alpha', createdAt: expect.any(String), files: 3, bytes: size('alpha'), ready: 2, pending: 0, error: 1 },
      { name: 'beta', createdAt: expect.any(String), files: 1, bytes: size('beta'), ready: 1, pending: 0, error: 0 },
    ]);
    expect(r.json.ingest).toMatchObject({ pending: 0, oldestPendingSeconds: 0 });
    expect(r.json.nodes).toEqual([]);
  });

  it('counts the files whose ingest ended, per 5-second slot over the last five minutes', async () => {
    const { finished } = (await t.call('GET', '/v1/status')).json.ingest as { finished: Array<{ at: string; ready: number; error: number }> };
    expectSlots(finished.map((s) => s.at));
    expect(finished.reduce((sum, s) => sum + s.ready, 0)).toBe(3);
    expect(finished.reduce((sum, s) => sum + s.error, 0)).toBe(1);
    // Each in a slot at or after the upload began.
    for (const slot of finished) if (slot.ready + slot.error > 0) expect(Date.parse(slot.at)).toBeGreaterThanOrEqual(uploadedFrom - SLOT_MS);
  });

  it('shows the read-tool calls just made, over HTTP and MCP, with their p99', async () => {
    for (const path of ['/notes/a.txt', '/notes/b.md']) expect((await t.call('GET', `/v1/workspaces/alpha/cat?path=${path}`)).status).toBe(200);
    expect((await t.call('GET', '/v1/workspaces/alpha/grep?pattern=TODO', { key: token.token })).status).toBe(200);
    const client = new Client({ name: 'status-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${t.url}/v1/workspaces/beta/mcp`), { requestInit: { headers: { authorization: `Bearer ${t.key}` } } }),
    );
    try {
      await client.callTool({ name: 'ls', arguments: {} });
    } finally {
      await client.close();
    }
    const { reads } = (await t.call('GET', '/v1/status')).json;
    expect(reads.slotSeconds).toBe(5);
    expectSlots(reads.slots.map((s: { at: string }) => s.at));
    const total: Record<string, number> = {};
    for (const slot of reads.slots) {
      for (const [tool, { count, p99Ms }] of Object.entries(slot.tools as Record<string, { count: number; p99Ms: number }>)) {
        total[tool] = (total[tool] ?? 0) + count;
        expect(count).toBeGreaterThan(0);
        expect(BOUNDS_MS.includes(p99Ms) || p99Ms > 30000, `${tool} p99 ${p99Ms}`).toBe(true);
      }
    }
    // The whoami calls above are not reads; the one-read account's ls is that account's.
    expect(total).toEqual({ cat: 2, grep: 1, ls: 1 });
  });

  it('shows a second account none of the first: its own workspaces, no finished files, no reads', async () => {
    const other = await t.newAccount('other');
    expect((await t.call('POST', '/v1/workspaces', { key: other, body: { name: 'alpha' } })).status).toBe(201);
    const r = await t.call('GET', '/v1/status', { key: other });
    expect(r.status).toBe(200);
    expect(r.json.workspaces).toEqual([{ name: 'alpha', createdAt: expect.any(String), files: 0, bytes: 0, ready: 0, pending: 0, error: 0 }]);
    expect(r.json.ingest.finished.every((s: { ready: number; error: number }) => s.ready === 0 && s.error === 0)).toBe(true);
    expect(r.json.reads.slots.every((s: { tools: object }) => Object.keys(s.tools).length === 0)).toBe(true);
    expect((await t.call('GET', '/v1/whoami', { key: other })).json).toEqual({ kind: 'management_key' });
  });
});

/** 60 slot starts, 5 s apart, oldest first, the last the current slot. */
function expectSlots(starts: string[]): void {
  expect(starts).toHaveLength(SLOTS);
  const times = starts.map((s) => Date.parse(s));
  for (let i = 1; i < times.length; i++) expect(times[i] - times[i - 1]).toBe(SLOT_MS);
  expect(times[0] % SLOT_MS).toBe(0);
  expect(Date.now() - times.at(-1)!).toBeLessThan(2 * SLOT_MS);
}

describe("the nodes' query", () => {
  it("counts only the account's copies and versions behind, and names no address", async () => {
    const client = await t.superuser();
    try {
      const { rows } = await client.query<{ id: string; name: string; account: string }>(
        'SELECT w.id, w.name, a.name AS account FROM workspaces w JOIN accounts a ON a.id = w.account_id',
      );
      const id = (account: string, name: string): string => rows.find((r) => r.account === account && r.name === name)!.id;
      await client.query('UPDATE workspaces SET version = 10 WHERE id IN ($1, $2, $3)', [id('default', 'alpha'), id('default', 'beta'), id('other', 'alpha')]);
      // Node n1 holds both of the first account's workspaces, 3 and 0 versions behind, and the
      // other account's, 7 behind; n2 holds only the other account's and was last seen long ago.
      await client.query(
        `INSERT INTO nodes (id, url, state, seen_at, applied) VALUES
           ('n1', 'http://10.0.0.1:8080', 'active', now(), $1), ('n2', 'http://10.0.0.2:8080', 'active', now() - interval '1 hour', $2)`,
        [
          JSON.stringify({ [id('default', 'alpha')]: 7, [id('default', 'beta')]: 10, [id('other', 'alpha')]: 3 }),
          JSON.stringify({ [id('other', 'alpha')]: 10 }),
        ],
      );
      const accountId = (await client.query("SELECT id FROM accounts WHERE name = 'default'")).rows[0].id as string;
      const nodes = await t.service.db.inAccount(accountId, (tx) => accountNodes(tx, 10));
      expect(nodes).toEqual([
        { id: 'n1', state: 'active', alive: true, seenAt: expect.any(Date), copies: 2, versionsBehind: 3 },
        { id: 'n2', state: 'dead', alive: false, seenAt: expect.any(Date), copies: 0, versionsBehind: 0 },
      ]);
      expect(JSON.stringify(nodes)).not.toContain('10.0.0');
    } finally {
      await client.query('DELETE FROM nodes');
      await client.end();
    }
  });
});

describe('RecentReads', () => {
  /** A ring on a clock the test sets, starting at a slot's start. */
  function ring(): { reads: RecentReads; at: (ms: number) => void } {
    let now = 1_000 * SLOT_MS;
    return { reads: new RecentReads(() => now), at: (ms) => (now = 1_000 * SLOT_MS + ms) };
  }

  it.each([
    ['one call of 0.3 ms', [0.0003], 1],
    ['one call of exactly 1 ms', [0.001], 1],
    ['one call of 1.2 ms', [0.0012], 2.5],
    ['99 fast, 1 slow: the 99th percentile is fast', [...Array(99).fill(0.002), 3], 2.5],
    ['98 fast, 2 slow: the 99th percentile is slow', [...Array(98).fill(0.002), 3, 3], 5000],
    ['above the largest bound: the slowest call', [45.2], 45200],
  ] as Array<[string, number[], number]>)('%s -> p99 %s ms', (_, seconds, p99) => {
    const { reads } = ring();
    for (const s of seconds) reads.record('a', 'cat', s);
    const last = reads.slots('a').at(-1)!;
    expect(last.tools).toEqual({ cat: { count: seconds.length, p99Ms: p99 } });
  });

  it('puts each call in the slot of its time, drops what the ring has come round over, and keeps accounts apart', () => {
    const { reads, at } = ring();
    reads.record('a', 'cat', 0.001);
    at(SLOT_MS - 1);
    reads.record('a', 'grep', 0.001);
    at(SLOT_MS);
    reads.record('a', 'grep', 0.001);
    reads.record('b', 'ls', 0.001);
    let slots = reads.slots('a');
    expect(slots.map((s) => s.tools).slice(-2)).toEqual([{ cat: { count: 1, p99Ms: 1 }, grep: { count: 1, p99Ms: 1 } }, { grep: { count: 1, p99Ms: 1 } }]);
    expect(slots.at(-1)!.at).toBe(new Date(1_001 * SLOT_MS).toISOString());
    // SECURITY: another account's calls never show, and an account never seen has only empty slots.
    expect(reads.slots('b').flatMap((s) => Object.keys(s.tools))).toEqual(['ls']);
    expect(reads.slots('c').every((s) => Object.keys(s.tools).length === 0)).toBe(true);
    // A whole ring later, the same index holds the new slot only.
    at(SLOTS * SLOT_MS);
    reads.record('a', 'find', 0.001);
    slots = reads.slots('a');
    expect(slots.flatMap((s) => Object.keys(s.tools))).toEqual(['grep', 'find']);
  });

  it('forgets an account idle for longer than the ring spans', () => {
    const { reads, at } = ring();
    reads.record('idle', 'cat', 0.001);
    reads.record('busy', 'cat', 0.001);
    for (let ms = SLOT_MS; ms <= 3 * SLOTS * SLOT_MS; ms += SLOT_MS) {
      at(ms);
      reads.record('busy', 'cat', 0.001);
    }
    expect(reads.accounts).toBe(1);
    expect(reads.slots('idle').every((s) => Object.keys(s.tools).length === 0)).toBe(true);
  });
});
