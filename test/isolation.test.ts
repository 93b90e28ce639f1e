/**
 * Two accounts tried against each other (issue "Trust"): every endpoint,
 * tool, id and path of one account, called with the other's management key
 * and scoped tokens. The contract (SPEC.md 4-7, README "Decisions"): a
 * foreign workspace or token id answers 404 exactly like a missing one, a
 * scoped token on a management route answers 403, a token used on a workspace
 * it is not pinned to answers 404, and no answer ever carries the other
 * account's data. Each account's files carry a marker (ACCOUNT_A_SECRET,
 * ACCOUNT_B_SECRET) in their text and in a path, so a leak shows in any body.
 *
 * The last part runs the two tenants' requests interleaved and concurrently
 * over a small HTTP keep-alive pool and a three-connection database pool,
 * aborting some mid-flight, and checks every answer against the one the same
 * request got when run alone.
 */
import { Agent, request } from 'node:http';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createAccount, issueManagementKey, listManagementKeys } from '../db/accounts.js';
import { provisionDatabase } from '../db/provision.js';
import { createLogger } from '../service/log.js';
import { loadConfig } from '../service/config.js';
import { type Service, startWithDatabase } from '../service/service.js';
import { listAll, settled, startTestService, type Reply, type TestService } from './helpers/service.js';
import { seededRandom } from './helpers/random.js';

const BOUND_MS = 5_000;

/** One account with what it owns. */
interface Tenant {
  label: 'a' | 'b';
  account: string;
  key: string;
  /** Text marker in its files; its lower-case form is in a path. */
  marker: string;
  /** Its workspace that the other account has no namesake of. */
  only: string;
  /** Token pinned to its `shared` workspace. */
  sharedToken: { id: string; token: string };
  /** Token pinned to its `only` workspace. */
  onlyToken: { id: string; token: string };
}

/** The files each tenant puts in each of its workspaces. */
function filesOf(x: Pick<Tenant, 'marker' | 'label'>): { shared: Record<string, string>; only: Record<string, string> } {
  return {
    shared: {
      '/secret.txt': `${x.marker}\nline two of ${x.label}\n`,
      [`/dir/${x.marker.toLowerCase()}.md`]: `# notes of ${x.label}\n${x.marker} in markdown\n`,
      '/common/readme.txt': `same path in both accounts, content of ${x.label}: ${x.marker}\n`,
      [`/only-in-${x.label}.txt`]: `a path only account ${x.label} has: ${x.marker}\n`,
    },
    only: { '/private.txt': `${x.marker} private\n` },
  };
}

/** True when `text` carries the tenant's marker in either form. */
const carries = (text: string, x: Tenant) => text.includes(x.marker) || text.includes(x.marker.toLowerCase());

/** Asserts a reply came within the bound and carries nothing of `other`. */
function clean(r: Reply, other: Tenant, label: string): void {
  expect(carries(r.text, other), `${label} leaked ${other.marker}: ${r.text.slice(0, 300)}`).toBe(false);
  for (const [name, value] of r.headers) expect(carries(`${name}: ${value}`, other), `${label} leaked in header ${name}`).toBe(false);
}

let t: TestService;
let A: Tenant;
let B: Tenant;

/** Calls the API with a bound on the time it may take. */
async function call(method: string, path: string, key: string | null, body?: unknown): Promise<Reply> {
  const started = performance.now();
  const r = await t.call(method, path, { key, body });
  expect(performance.now() - started, `${method} ${path} took too long`).toBeLessThan(BOUND_MS);
  return r;
}

async function makeTenant(label: 'a' | 'b', key: string, account: string): Promise<Tenant> {
  const marker = `ACCOUNT_${label.toUpperCase()}_SECRET`;
  const only = `only-${label}`;
  const files = filesOf({ marker, label });
  for (const name of ['shared', only]) expect((await t.call('POST', '/v1/workspaces', { key, body: { name } })).status).toBe(201);
  for (const [path, body] of Object.entries(files.shared)) expect((await t.call('PUT', `/v1/workspaces/shared/files${path}`, { key, body })).status).toBe(202);
  for (const [path, body] of Object.entries(files.only)) expect((await t.call('PUT', `/v1/workspaces/${only}/files${path}`, { key, body })).status).toBe(202);
  await settled(t, 'shared', 30_000, key);
  await settled(t, only, 30_000, key);
  const mint = async (ws: string) => {
    const r = await t.call('POST', `/v1/workspaces/${ws}/tokens`, { key, body: {} });
    expect(r.status).toBe(201);
    return { id: r.json.id as string, token: r.json.token as string };
  };
  return { label, account, key, marker, only, sharedToken: await mint('shared'), onlyToken: await mint(only) };
}

beforeAll(async () => {
  t = await startTestService({ VFS_AUTH_FAILURES: '1000000', VFS_MANAGEMENT_RATE: '1000000' });
  A = await makeTenant('a', t.key, 'default');
  B = await makeTenant('b', await t.newAccount('tenant-b'), 'tenant-b');
});
afterAll(async () => t?.stop());

/** Both directions: the caller and the account it tries to reach. */
const pairs = (): Array<[Tenant, Tenant]> => [
  [A, B],
  [B, A],
];

/** What one tenant's state looks like from its own key: workspaces and, per workspace, file paths and sizes. */
async function ownView(x: Tenant): Promise<string> {
  const workspaces = (await call('GET', '/v1/workspaces', x.key)).json.workspaces.map((w: { name: string; version: number }) => `${w.name}@${w.version}`);
  const files: string[] = [];
  for (const name of ['shared', x.only]) {
    for (const f of await listAll(t, name, x.key)) files.push(`${name}${f.path}:${f.sizeBytes}:${f.status}`);
  }
  return JSON.stringify({ workspaces, files });
}

describe('management routes on the other account', () => {
  const routes = (ws: string): Array<[string, string, unknown?]> => [
    ['GET', `/v1/workspaces/${ws}/files`],
    ['GET', `/v1/workspaces/${ws}/files?status=ready&limit=1000`],
    ['GET', `/v1/workspaces/${ws}/audit`],
    ['GET', `/v1/workspaces/${ws}/audit?after=2000-01-01T00:00:00Z&limit=1000`],
    ['POST', `/v1/workspaces/${ws}/tokens`, {}],
    ['POST', `/v1/workspaces/${ws}/tokens`, { claims: ['*'], ttlSeconds: 86400 }],
    ['PUT', `/v1/workspaces/${ws}/files/private.txt`, 'overwritten by the other account'],
    ['PUT', `/v1/workspaces/${ws}/files/planted.txt`, 'planted by the other account'],
    ['DELETE', `/v1/workspaces/${ws}/files/private.txt`],
    ['DELETE', `/v1/workspaces/${ws}`],
  ];

  it('answer 404 for its workspace, exactly as for a workspace that exists nowhere, and change nothing', async () => {
    for (const [caller, target] of pairs()) {
      const before = await ownView(target);
      for (const [method, path, body] of routes(target.only)) {
        const foreign = await call(method, path, caller.key, body);
        const missing = await call(method, path.replace(target.only, 'nowhere-x'), caller.key, body);
        expect(foreign.status, `${caller.label} ${method} ${path}`).toBe(404);
        expect(foreign.json).toEqual({ error: `no such workspace: ${target.only}` });
        // Existence never leaks: the only difference to a missing workspace is the echoed name.
        expect([missing.status, missing.json.error.replace('nowhere-x', target.only)]).toEqual([404, foreign.json.error]);
        clean(foreign, target, `${caller.label} ${method} ${path}`);
      }
      expect(await ownView(target)).toBe(before);
    }
  });

  it("cannot delete the other account's file through its own workspace of the same name", async () => {
    for (const [caller, target] of pairs()) {
      const before = await ownView(target);
      const path = `/v1/workspaces/shared/files/only-in-${target.label}.txt`;
      const r = await call('DELETE', path, caller.key);
      expect(r.status).toBe(404);
      expect(r.json.error).toMatch(/no such file/);
      expect(await ownView(target)).toBe(before);
    }
  });

  it("revoking the other account's tokens answers 404 and they keep working", async () => {
    for (const [caller, target] of pairs()) {
      for (const { id } of [target.sharedToken, target.onlyToken]) {
        for (const form of [id, id.toUpperCase(), encodeURIComponent(id)]) {
          const r = await call('DELETE', `/v1/tokens/${form}`, caller.key);
          expect(r.status).toBe(404);
          expect(r.json.error).toMatch(/no such token/);
        }
      }
      expect((await call('GET', '/v1/workspaces/shared/ls', target.sharedToken.token)).status).toBe(200);
      expect((await call('GET', `/v1/workspaces/${target.only}/cat?path=/private.txt`, target.onlyToken.token)).text).toContain(target.marker);
    }
  });

  it('lists only its own workspaces', async () => {
    for (const [caller, target] of pairs()) {
      const r = await call('GET', '/v1/workspaces', caller.key);
      expect(r.json.workspaces.map((w: { name: string }) => w.name).sort()).toEqual([caller.only, 'shared'].sort());
      expect(r.text).not.toContain(target.only);
    }
  });

  it('scoped tokens answer 403 on every management route, own or foreign, existing or not, and change nothing', async () => {
    for (const [caller, target] of pairs()) {
      const before = [await ownView(caller), await ownView(target)];
      const attempts: Array<[string, string, unknown?]> = [
        ['GET', '/v1/workspaces'],
        ['POST', '/v1/workspaces', { name: 'by-token' }],
        ...routes('shared'),
        ...routes(target.only),
        ...routes(caller.only),
        ...routes('nowhere-x'),
        ['DELETE', `/v1/tokens/${target.sharedToken.id}`],
        ['DELETE', `/v1/tokens/${caller.onlyToken.id}`],
      ];
      for (const token of [caller.sharedToken.token, caller.onlyToken.token]) {
        for (const [method, path, body] of attempts) {
          const r = await call(method, path, token, body);
          expect(r.status, `${caller.label} token ${method} ${path}`).toBe(403);
          expect(r.json).toEqual({ error: 'a scoped token may only call the read tools (ls, find, cat, grep)' });
        }
      }
      expect([await ownView(caller), await ownView(target)]).toEqual(before);
    }
  });
});

describe('read tools across accounts', () => {
  const reads = (ws: string, other: Tenant): string[] => [
    `/v1/workspaces/${ws}/ls`,
    `/v1/workspaces/${ws}/ls?path=/dir`,
    `/v1/workspaces/${ws}/find?pattern=**`,
    `/v1/workspaces/${ws}/find?pattern=**/*secret*`,
    `/v1/workspaces/${ws}/cat?path=/private.txt`,
    `/v1/workspaces/${ws}/cat?path=/secret.txt`,
    `/v1/workspaces/${ws}/cat?path=/only-in-${other.label}.txt`,
    `/v1/workspaces/${ws}/grep?pattern=SECRET&output_mode=content`,
    `/v1/workspaces/${ws}/grep?pattern=ACCOUNT_&output_mode=count`,
    `/v1/workspaces/${ws}/grep?pattern=.&-i&output_mode=content&-C=5`,
  ];

  it("the other account's workspace answers 404 to the key and to every token, and shows nothing", async () => {
    for (const [caller, target] of pairs()) {
      for (const credential of [caller.key, caller.sharedToken.token, caller.onlyToken.token]) {
        for (const path of reads(target.only, target)) {
          const r = await call('GET', path, credential);
          expect(r.status, `${caller.label} GET ${path}`).toBe(404);
          expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
          expect(r.text).toBe(`no such workspace: ${target.only}\n`);
        }
      }
    }
  });

  it("a workspace of the same name reads as the caller's own, with every credential, never the other's", async () => {
    for (const [caller, target] of pairs()) {
      for (const credential of [caller.key, caller.sharedToken.token]) {
        for (const path of reads('shared', target)) {
          const r = await call('GET', path, credential);
          expect([200, 404]).toContain(r.status);
          clean(r, target, `${caller.label} GET ${path}`);
        }
        const secret = await call('GET', '/v1/workspaces/shared/cat?path=/secret.txt', credential);
        expect(secret.text).toBe(`     1\t${caller.marker}\n     2\tline two of ${caller.label}\n`);
        const common = await call('GET', '/v1/workspaces/shared/cat?path=/common/readme.txt', credential);
        expect(common.text).toContain(`content of ${caller.label}`);
        const grep = await call('GET', '/v1/workspaces/shared/grep?pattern=ACCOUNT_._SECRET&output_mode=count', credential);
        expect(grep.text.trim().split('\n').sort()).toEqual([
          '/common/readme.txt:1',
          `/dir/${caller.marker.toLowerCase()}.md:1`,
          `/only-in-${caller.label}.txt:1`,
          '/secret.txt:1',
        ]);
        const foreignPath = await call('GET', `/v1/workspaces/shared/cat?path=/only-in-${target.label}.txt`, credential);
        expect([foreignPath.status, foreignPath.text]).toEqual([404, `no such file: /only-in-${target.label}.txt\n`]);
      }
    }
  });

  it("a token answers 404 on its own account's workspaces it is not pinned to", async () => {
    for (const [caller] of pairs()) {
      for (const path of reads('shared', caller)) {
        const r = await call('GET', path, caller.onlyToken.token);
        expect([r.status, r.text]).toEqual([404, 'no such workspace: shared\n']);
      }
      for (const path of reads(caller.only, caller)) {
        const r = await call('GET', path, caller.sharedToken.token);
        expect([r.status, r.text]).toEqual([404, `no such workspace: ${caller.only}\n`]);
      }
    }
  });

  it("the management listing of the same-name workspace shows only the caller's files", async () => {
    for (const [caller, target] of pairs()) {
      const files = await listAll(t, 'shared', caller.key);
      expect(files.map((f) => f.path).sort()).toEqual(Object.keys(filesOf(caller).shared).sort());
      const r = await call('GET', '/v1/workspaces/shared/files?limit=1000', caller.key);
      clean(r, target, `${caller.label} listing`);
    }
  });
});

describe('audit export across accounts', () => {
  it("shows only the caller's own events: never the other account's actors, parameters or data", async () => {
    // Reads with parameters that name their account, on the same-name workspace.
    for (const x of [A, B]) {
      for (const credential of [x.key, x.sharedToken.token]) {
        expect((await call('GET', `/v1/workspaces/shared/grep?pattern=probe-from-${x.label}`, credential)).status).toBe(200);
        expect((await call('GET', `/v1/workspaces/shared/cat?path=/probe-from-${x.label}.txt`, credential)).status).toBe(404);
      }
    }
    for (const [caller, target] of pairs()) {
      const targetKeys = (await listManagementKeys(t.service.db, target.account)).map((k) => k.id);
      const foreignActors = new Set([...targetKeys, target.sharedToken.id, target.onlyToken.id]);
      const r = await call('GET', '/v1/workspaces/shared/audit?limit=1000', caller.key);
      expect(r.status).toBe(200);
      const events = r.json.events as Array<{ actorId: string; params: Record<string, string> }>;
      expect(events.length).toBeGreaterThanOrEqual(4);
      for (const e of events) expect(foreignActors.has(e.actorId), `event of ${e.actorId} exported to ${caller.label}`).toBe(false);
      expect(r.text).not.toContain(`probe-from-${target.label}`);
      expect(r.text).toContain(`probe-from-${caller.label}`);
      clean(r, target, `${caller.label} audit`);
      const foreign = await call('GET', `/v1/workspaces/${target.only}/audit`, caller.key);
      expect(foreign.status).toBe(404);
    }
  });
});

describe('same names, separate workspaces', () => {
  it("creating the other account's workspace name makes an empty one of the caller's own; deleting it leaves the other's", async () => {
    for (const [caller, target] of pairs()) {
      const before = await ownView(target);
      expect((await call('POST', '/v1/workspaces', caller.key, { name: target.only })).status).toBe(201);
      const ls = await call('GET', `/v1/workspaces/${target.only}/ls`, caller.key);
      expect([ls.status, ls.text]).toEqual([200, '']);
      expect((await call('GET', `/v1/workspaces/${target.only}/cat?path=/private.txt`, caller.key)).status).toBe(404);
      expect((await call('GET', `/v1/workspaces/${target.only}/files`, caller.key)).json).toEqual({ files: [], nextCursor: null });
      expect((await call('PUT', `/v1/workspaces/${target.only}/files/mine.txt`, caller.key, 'x')).status).toBe(202);
      expect((await call('DELETE', `/v1/workspaces/${target.only}`, caller.key)).status).toBe(204);
      expect(await ownView(target)).toBe(before);
      expect((await call('GET', `/v1/workspaces/${target.only}/cat?path=/private.txt`, target.onlyToken.token)).text).toContain(target.marker);
    }
  });

  it("deleting one account's workspace leaves the other's namesake whole, and only the deleter's tokens stop", async () => {
    const bBefore = await ownView(B);
    expect((await call('DELETE', '/v1/workspaces/shared', A.key)).status).toBe(204);
    expect((await call('GET', '/v1/workspaces/shared/ls', A.sharedToken.token)).status).toBe(401);
    expect(await ownView(B)).toBe(bBefore);
    const r = await call('GET', '/v1/workspaces/shared/cat?path=/secret.txt', B.sharedToken.token);
    expect(r.text).toBe(`     1\t${B.marker}\n     2\tline two of b\n`);
    expect((await call('GET', '/v1/workspaces/shared/ls', A.key)).status).toBe(404);
  });
});

// ---------------------------------------------------------------------------
// Concurrency: interleaved tenants, small pools, aborted requests
// ---------------------------------------------------------------------------

describe('interleaved tenants under concurrency, with aborted requests', () => {
  const APP_POOL = 3;
  let service: Service;
  let dataDir: string;
  let base: string;
  const tenants: Array<{ label: 'a' | 'b'; key: string; marker: string; token: string; files: Record<string, string> }> = [];

  beforeAll(async () => {
    // The service as startTestService makes it, but with the application role's pool cut to three
    // connections (a pool option of the database target) and no authentication cache, so that every
    // request of both tenants goes through the same few connections and row-level-security settings.
    const id = randomBytes(5).toString('hex');
    const names = { database: `t_${id}`, ownerRole: `t_${id}_owner`, appRole: `t_${id}_app` };
    const targets = await provisionDatabase(inject('pgSuperuser'), names);
    dataDir = await mkdtemp(join(tmpdir(), 'vfs-test-data-'));
    const config = loadConfig({
      PORT: '0',
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      VFS_AUTH_CACHE_SECONDS: '0',
      VFS_AUTH_FAILURES: '1000000',
      VFS_MANAGEMENT_RATE: '1000000',
    });
    service = await startWithDatabase(config, createLogger('silent'), { ...targets, app: { ...targets.app, max: APP_POOL } }, names.appRole);
    await service.db.owner.query('UPDATE plans SET read_rate_per_credential = 1000000, read_rate_per_account = 1000000');
    expect(service.db.app.options.max).toBe(APP_POOL);
    base = service.url;
    await createAccount(service.db, 'tenant-b', 'default');
    const keys = { a: service.createdKey!, b: (await issueManagementKey(service.db, 'tenant-b')).key };
    for (const label of ['a', 'b'] as const) {
      const key = keys[label];
      const marker = `ACCOUNT_${label.toUpperCase()}_SECRET`;
      const files: Record<string, string> = {};
      for (let i = 0; i < 6; i++) files[`/f${i}-${marker.toLowerCase()}.txt`] = `${marker} file ${i} of ${label}\n`.repeat(i + 1);
      const h = { authorization: `Bearer ${key}` };
      expect((await fetch(`${base}/v1/workspaces`, { method: 'POST', headers: h, body: JSON.stringify({ name: 'tenant' }) })).status).toBe(201);
      for (const [path, body] of Object.entries(files))
        expect((await fetch(`${base}/v1/workspaces/tenant/files${path}`, { method: 'PUT', headers: h, body })).status).toBe(202);
      for (let i = 0; i < 200; i++) {
        const listing = (await (await fetch(`${base}/v1/workspaces/tenant/files`, { headers: h })).json()) as { files: Array<{ status: string }> };
        if (listing.files.every((f) => f.status === 'ready')) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      const minted = (await (await fetch(`${base}/v1/workspaces/tenant/tokens`, { method: 'POST', headers: h, body: '{}' })).json()) as { token: string };
      tenants.push({ label, key, marker, token: minted.token, files });
    }
  });
  afterAll(async () => {
    await service?.stop();
    if (dataDir !== undefined) await rm(dataDir, { recursive: true, force: true });
  });

  /** The requests each tenant sends: read tools with its key and token, and management reads. */
  function requestsOf(x: (typeof tenants)[number]): Array<{ path: string; key: string; stable: boolean }> {
    const paths = Object.keys(x.files);
    return [
      { path: '/v1/workspaces/tenant/ls', key: x.key, stable: true },
      { path: '/v1/workspaces/tenant/ls', key: x.token, stable: true },
      { path: '/v1/workspaces/tenant/find?pattern=**/*.txt', key: x.token, stable: true },
      ...paths.map((p) => ({ path: `/v1/workspaces/tenant/cat?path=${encodeURIComponent(p)}`, key: x.token, stable: true })),
      ...paths.map((p) => ({ path: `/v1/workspaces/tenant/cat?path=${encodeURIComponent(p)}&offset=2`, key: x.key, stable: true })),
      { path: '/v1/workspaces/tenant/grep?pattern=SECRET&output_mode=content', key: x.key, stable: true },
      { path: '/v1/workspaces/tenant/grep?pattern=file%20[0-9]&output_mode=count', key: x.token, stable: true },
      { path: '/v1/workspaces/tenant/grep?pattern=ACCOUNT_._SECRET', key: x.token, stable: true },
      { path: '/v1/workspaces/tenant/files?limit=3', key: x.key, stable: true },
      { path: '/v1/workspaces', key: x.key, stable: false },
      { path: '/v1/workspaces/tenant/audit?limit=20', key: x.key, stable: false },
    ];
  }

  /** One GET through the shared agent; `abortAfterMs` destroys it mid-flight. */
  function get(agent: Agent, path: string, key: string, abortAfterMs: number | null): Promise<{ status: number; text: string; aborted: boolean; ms: number }> {
    const started = performance.now();
    return new Promise((resolve) => {
      let settledOnce = false;
      const done = (v: { status: number; text: string; aborted: boolean }) => {
        if (settledOnce) return;
        settledOnce = true;
        clearTimeout(bound);
        resolve({ ...v, ms: performance.now() - started });
      };
      const req = request(`${base}${path}`, { agent, headers: { authorization: `Bearer ${key}` } }, (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => done({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8'), aborted: false }));
        res.on('error', () => done({ status: 0, text: Buffer.concat(chunks).toString('utf8'), aborted: true }));
        res.on('close', () => done({ status: 0, text: Buffer.concat(chunks).toString('utf8'), aborted: true }));
      });
      req.on('error', () => done({ status: 0, text: '', aborted: true }));
      // Queued requests wait for one of the pool's sockets: the bound covers the whole batch's queueing.
      const bound = setTimeout(() => {
        req.destroy();
        done({ status: -1, text: '', aborted: false });
      }, 30_000);
      if (abortAfterMs !== null) setTimeout(() => req.destroy(), abortAfterMs);
      req.end();
    });
  }

  it("no answer of one tenant ever carries the other's data, and each equals the answer the request gets alone", async () => {
    const [a, b] = tenants;
    const plan = { a: requestsOf(a), b: requestsOf(b) };
    // The answer of each stable request when it runs alone.
    const golden = new Map<string, string>();
    const agent1 = new Agent({ keepAlive: true, maxSockets: 1 });
    for (const x of [a, b]) {
      for (const q of plan[x.label]) {
        const r = await get(agent1, q.path, q.key, null);
        expect(r.status, `${x.label} ${q.path}`).toBe(200);
        if (q.stable) golden.set(`${q.key} ${q.path}`, r.text);
      }
    }
    agent1.destroy();

    // 400 requests, tenants alternating, over 8 keep-alive sockets (about three per database
    // connection); one in four is aborted 1-30 ms after it starts.
    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    const random = seededRandom(12345);
    const runs = Array.from({ length: 400 }, (_, i) => {
      const x = i % 2 === 0 ? a : b;
      const other = x === a ? b : a;
      const q = plan[x.label][Math.floor(random() * plan[x.label].length)];
      const abortAfter = random() < 0.25 ? 1 + Math.floor(random() * 30) : null;
      return get(agent, q.path, q.key, abortAfter).then((r) => ({ x, other, q, r, abortAfter }));
    });
    // The database pool never grows past its three connections while the batch runs.
    let mostConnections = 0;
    const sampler = setInterval(() => (mostConnections = Math.max(mostConnections, service.db.app.totalCount)), 2);
    const results = await Promise.all(runs);
    clearInterval(sampler);
    agent.destroy();
    expect(mostConnections).toBeLessThanOrEqual(APP_POOL);

    let answered = 0;
    for (const { x, other, q, r, abortAfter } of results) {
      const label = `${x.label} ${q.path}${abortAfter === null ? '' : ` (abort at ${abortAfter} ms)`}`;
      expect(carries2(r.text, other.marker), `${label} leaked ${other.marker}: ${r.text.slice(0, 200)}`).toBe(false);
      expect(r.status, `${label}: no answer within the bound`).not.toBe(-1);
      if (r.aborted) continue;
      expect(r.status, `${label}: ${r.text.slice(0, 200)}`).toBe(200);
      answered++;
      if (q.stable) expect(r.text, label).toBe(golden.get(`${q.key} ${q.path}`));
    }
    expect(answered).toBeGreaterThan(200);
  });

  it('afterwards both tenants still see exactly their own data', async () => {
    for (const x of tenants) {
      const other = tenants.find((y) => y !== x)!;
      const h = { authorization: `Bearer ${x.key}` };
      const ws = (await (await fetch(`${base}/v1/workspaces`, { headers: h })).json()) as { workspaces: Array<{ name: string }> };
      expect(ws.workspaces.map((w) => w.name)).toEqual(['tenant']);
      const listing = (await (await fetch(`${base}/v1/workspaces/tenant/files?limit=1000`, { headers: h })).json()) as {
        files: Array<{ path: string; status: string }>;
      };
      expect(listing.files.map((f) => [f.path, f.status])).toEqual(
        Object.keys(x.files)
          .sort()
          .map((p) => [p, 'ready']),
      );
      for (const [path, body] of Object.entries(x.files)) {
        const r = await fetch(`${base}/v1/workspaces/tenant/cat?path=${encodeURIComponent(path)}`, { headers: { authorization: `Bearer ${x.token}` } });
        const expected = body
          .split('\n')
          .slice(0, -1)
          .map((line, i) => `${String(i + 1).padStart(6)}\t${line}\n`)
          .join('');
        expect(await r.text()).toBe(expected);
      }
      const audit = await (await fetch(`${base}/v1/workspaces/tenant/audit?limit=1000`, { headers: h })).text();
      expect(carries2(audit, other.marker)).toBe(false);
      const events = (JSON.parse(audit) as { events: Array<{ actorId: string }> }).events;
      expect(events.length).toBeGreaterThan(0);
    }
  });
});

function carries2(text: string, marker: string): boolean {
  return text.includes(marker) || text.includes(marker.toLowerCase());
}
