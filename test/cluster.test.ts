/**
 * Many nodes: three service processes on loopback sharing one PostgreSQL
 * database and one bucket of the run's Swift cluster (npm test's last pass,
 * `npm run test:cluster`). Any node serves any workspace: what one node has
 * shown ready, the others read on the very next request; a copy of a shard
 * deleted under a running node is restored from the snapshot and the kept
 * texts, extracting nothing; a workspace's first warm node snapshots it whole
 * once a bulk upload settles, whichever nodes ingested it; a node stopped with
 * SIGTERM under load answers no 5xx.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rename, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { closeShardReader, openShardReader } from '../engine/index.js';
import { DROP_WAIT_MS } from '../db/nodes.js';
import { WARM_COPIES, warmNodes } from '../service/warm-set.js';
import { type ClusterNode, ServiceCluster } from './helpers/cluster.js';
import { formOf, pkce, postFields, postForm, visit } from './helpers/oauth.js';

const S3 = process.env.VFS_TEST_STORAGE === 's3';
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const PUBLIC_URL = 'http://localhost:8443';

let cluster: ServiceCluster;
let a: ClusterNode;
let b: ClusterNode;
let c: ClusterNode;

/** `count` nodes on the run's PostgreSQL and Swift (the first started alone, then the others together). */
async function startCluster(count: number): Promise<ServiceCluster> {
  const started = await ServiceCluster.create(inject('pgSuperuser'), inject('swift'), `vfs_cluster_${randomBytes(5).toString('hex')}`, {
    VFS_CLUSTER: 'on',
    VFS_AUTH_FAILURES: '1000000',
    VFS_NODE_HEARTBEAT_SECONDS: '0.5',
    VFS_DRAIN_SECONDS: '1',
    // Jobs a killed node had claimed go to another soon.
    VFS_INGEST_LEASE_SECONDS: '3',
    // What clients reach the cluster at (its load balancer), the same on every node: OAuth's
    // issuer and its tokens' resource. The tests below send each request to a node directly.
    VFS_PUBLIC_URL: PUBLIC_URL,
  });
  await started.add();
  await Promise.all(Array.from({ length: count - 1 }, () => started.add()));
  await started.asSuperuser((client) => client.query('UPDATE plans SET read_rate_per_credential = 1000000, read_rate_per_account = 1000000'));
  return started;
}

/** The body of file `i`: a line only it has, and a line all share. */
const body = (i: number): string => `file ${i}\nneedle-${i}-x unique to this file\nshared line\n`;

describe('three nodes on one database and one object store', () => {
  beforeAll(async () => {
    if (!S3) throw new Error("run with VFS_TEST_STORAGE=s3 (npm run test:cluster): the nodes share a bucket on the run's Swift cluster");
    cluster = await startCluster(3);
    [a, b, c] = cluster.nodes;
    const r = await cluster.api(a, 'POST', '/v1/workspaces', JSON.stringify({ name: 'ws' }));
    expect(r.status).toBe(201);
  });
  afterAll(async () => cluster?.stop());

  /** A's listing of the workspace, every page. */
  async function listing(node: ClusterNode, ws = 'ws'): Promise<Map<string, string>> {
    const r = await cluster.api(node, 'GET', `/v1/workspaces/${ws}/files?limit=1000`);
    expect(r.status).toBe(200);
    const json = (await r.json()) as { files: Array<{ path: string; status: string }> };
    return new Map(json.files.map((f) => [f.path, f.status]));
  }

  /** Polls a node's listing until `path` is no longer pending; returns its status. */
  async function shownSettled(node: ClusterNode, path: string): Promise<string> {
    const deadline = Date.now() + 60_000;
    for (;;) {
      const status = (await listing(node)).get(path);
      if (status !== undefined && status !== 'pending') return status;
      if (Date.now() > deadline) throw new Error(`${path} still ${status} on ${node.id}; its log:\n${node.process?.stderr().slice(-3000)}`);
      await sleep(20);
    }
  }

  async function read(node: ClusterNode, tool: string, query: string, ws = 'ws'): Promise<{ status: number; text: string }> {
    const r = await cluster.api(node, 'GET', `/v1/workspaces/${ws}/${tool}?${query}`);
    return { status: r.status, text: await r.text() };
  }

  it('an upload shown ready by one node is listed, read and grepped on the others at the next request, 100 times in a row', { timeout: 300_000 }, async () => {
    for (let i = 0; i < 100; i++) {
      const path = `/ryw/f${i}.txt`;
      const [via, other1, other2] = [cluster.nodes[i % 3], cluster.nodes[(i + 1) % 3], cluster.nodes[(i + 2) % 3]];
      const put = await cluster.api(via, 'PUT', `/v1/workspaces/ws/files${path}`, body(i));
      expect(put.status).toBe(202);
      expect(await shownSettled(via, path)).toBe('ready');
      // No sleep: the next requests go to the two other nodes.
      const cat = await read(other1, 'cat', `path=${encodeURIComponent(path)}`);
      expect(cat.status).toBe(200);
      expect(cat.text).toContain(`needle-${i}-x unique to this file`);
      const grep = await read(other2, 'grep', `pattern=needle-${i}-x&output_mode=files_with_matches`);
      expect(grep.status).toBe(200);
      expect(grep.text.split('\n')).toContain(path);
      expect((await listing(other2)).get(path)).toBe('ready');
    }
    // And all three agree on the whole workspace.
    const counts = await Promise.all(cluster.nodes.map((n) => read(n, 'grep', 'pattern=shared line&output_mode=count')));
    for (const count of counts) {
      expect(count.status).toBe(200);
      expect(count.text.trim().split('\n')).toHaveLength(100);
    }
  });

  it('a file deleted through one node is gone on the others at the next request', async () => {
    const r = await cluster.api(b, 'DELETE', `/v1/workspaces/ws/files${encodeURI('/ryw/f7.txt')}`);
    expect(r.status).toBe(204);
    expect((await read(c, 'cat', 'path=/ryw/f7.txt')).status).toBe(404);
    expect((await read(a, 'grep', 'pattern=needle-7-x')).text).not.toContain('/ryw/f7.txt');
  });

  it('a workspace is snapshotted whole once a bulk upload through every node has settled', { timeout: 120_000 }, async () => {
    const files = 70;
    expect((await cluster.api(a, 'POST', '/v1/workspaces', JSON.stringify({ name: 'snap' }))).status).toBe(201);
    // Uploaded through every node at once: the files are ingested by whichever nodes claim them.
    const puts = await Promise.all(
      Array.from({ length: files }, (_, i) => cluster.api(cluster.nodes[i % 3], 'PUT', `/v1/workspaces/snap/files/s/f${i}.txt`, body(i))),
    );
    expect(puts.map((r) => r.status)).toEqual(puts.map(() => 202));
    const deadline = Date.now() + 60_000;
    let key: string | null = null;
    let id = '';
    while (key === null) {
      if (Date.now() > deadline) throw new Error(`no snapshot of the workspace within 60 s; node a's log:\n${a.process?.stderr().slice(-3000)}`);
      await sleep(200);
      await cluster.asSuperuser(async (su) => {
        const { rows } = await su.query<{ id: string; key: string | null }>("SELECT id, shard_snapshot_key AS key FROM workspaces WHERE name = 'snap'");
        [{ id, key }] = rows;
      });
    }
    expect(key).toMatch(new RegExp(`^shard-snapshots/${id}/`));
    // The snapshot is a shard, holding every file, whichever node ingested it.
    const objects = cluster.objects();
    const dir = await mkdtemp(join(tmpdir(), 'vfs-snapshot-'));
    try {
      const copy = await objects.getFile(key!, dir);
      expect(copy).not.toBeNull();
      await rename(copy!.path, join(dir, 'data.mdb'));
      const snapshot = openShardReader(dir).snapshot();
      try {
        expect(snapshot.countPathsInRange('/', '/\u{10ffff}')).toBe(files);
        expect(snapshot.countPathsInRange('/s/', '/s/\u{10ffff}')).toBe(files);
      } finally {
        snapshot.done();
      }
    } finally {
      closeShardReader(dir);
      objects.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('a node whose copy of the shard is deleted while it runs reads correctly again, extracting nothing', async () => {
    await cluster.asSuperuser(async (su) => {
      const version = async (): Promise<number> => Number((await su.query("SELECT version FROM workspaces WHERE name = 'ws'")).rows[0].version);
      const before = await version();
      const { rows } = await su.query<{ id: string }>("SELECT id FROM workspaces WHERE name = 'ws'");
      await rm(join(c.dataDir, 'shards', rows[0].id), { recursive: true, force: true });
      const grep = await read(c, 'grep', 'pattern=needle-42-x&output_mode=files_with_matches');
      expect(grep).toEqual({ status: 200, text: '/ryw/f42.txt\n' });
      const count = await read(c, 'grep', 'pattern=shared line&output_mode=count');
      expect(count.text.trim().split('\n')).toHaveLength(99);
      // Nothing went back to the ingest queue: no file was extracted again (an ingest moves the version).
      expect(await version()).toBe(before);
      expect((await su.query('SELECT count(*)::int AS n FROM ingest_jobs')).rows[0].n).toBe(0);
    });
  });

  it('a node whose copy is older than the change log compares it whole, and reads correctly', { timeout: 120_000 }, async () => {
    // b sleeps through a change and a trim of the log past it, as after a long pause.
    b.process!.child.kill('SIGSTOP');
    try {
      expect((await cluster.api(a, 'PUT', '/v1/workspaces/ws/files/trim/new.txt', body(500))).status).toBe(202);
      expect(await shownSettled(a, '/trim/new.txt')).toBe('ready');
      expect((await cluster.api(a, 'DELETE', '/v1/workspaces/ws/files/ryw/f8.txt')).status).toBe(204);
      await cluster.asSuperuser((su) => su.query("DELETE FROM workspace_changes; UPDATE workspaces SET changes_from = version WHERE name = 'ws'"));
    } finally {
      b.process!.child.kill('SIGCONT');
    }
    expect((await read(b, 'grep', 'pattern=needle-500-x&output_mode=files_with_matches')).text).toBe('/trim/new.txt\n');
    expect((await read(b, 'cat', 'path=/ryw/f8.txt')).status).toBe(404);
    expect((await read(b, 'grep', 'pattern=shared line&output_mode=count')).text.trim().split('\n')).toHaveLength(99);
  });

  it('a node stopped with SIGTERM under load answers no 5xx, and the clients that follow /readyz lose nothing', { timeout: 120_000 }, async () => {
    // Clients behave as a load balancer does: they send to the nodes whose /readyz said 200 last.
    const ready = new Set(cluster.nodes);
    let probing = true;
    const prober = (async () => {
      while (probing) {
        await Promise.all(
          [...cluster.nodes].map(async (n) => {
            const ok =
              n.process !== null &&
              (await fetch(`${n.process.url}/readyz`).then(
                (r) => r.status === 200,
                () => false,
              ));
            if (ok) ready.add(n);
            else ready.delete(n);
          }),
        );
        await sleep(100);
      }
    })();
    const statuses = new Map<number, number>();
    let refused = 0;
    let stopAt = Date.now() + 6_000;
    const client = async (k: number): Promise<void> => {
      for (let n = 0; Date.now() < stopAt; n++) {
        const nodes = [...ready];
        const node = nodes[(k + n) % nodes.length];
        if (node?.process == null) continue;
        try {
          const r = await read(node, 'grep', `pattern=needle-${(k * 7 + n) % 100}-x`);
          statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
        } catch {
          refused++;
        }
      }
    };
    const clients = Array.from({ length: 8 }, (_, k) => client(k));
    await sleep(1_500);
    const stopping = c.process!;
    const exit = await cluster.signal(c, 'SIGTERM');
    stopAt = Date.now() + 2_000;
    await Promise.all(clients);
    probing = false;
    await prober;
    expect(exit).toBe(0);
    expect([...statuses.keys()].filter((s) => s >= 500)).toEqual([]);
    expect(statuses.get(200)).toBeGreaterThan(100);
    // A client can still meet a connection the node closed as it stopped; never a 5xx.
    expect(refused).toBeLessThan(10);
    // A clean stop: nothing of the node's (its version poll among them) fails as it closes.
    expect(
      stopping
        .stderr()
        .split('\n')
        .filter((line) => line.includes('"level":"error"')),
    ).toEqual([]);
    await cluster.startNode(c);
  });

  it('SIGKILL of a node under reads and uploads loses no acknowledged upload, no read of a live node, no audit event', { timeout: 180_000 }, async () => {
    const acknowledged: string[] = [];
    /** Marker of every read answered in full → the node that answered. */
    const answered: string[] = [];
    const failedLive: string[] = [];
    let lostTwice = 0;
    let killed = false;
    let n = 0;
    const stopAt = Date.now() + 10_000;
    const live = (): ClusterNode[] => cluster.nodes.filter((x) => x.process !== null);
    const readOnce = async (node: ClusterNode, marker: string): Promise<boolean> => {
      const r = await cluster.api(node, 'GET', `/v1/workspaces/ws/grep?pattern=needle-${marker.length % 90}-x&glob=${marker}*`);
      await r.text();
      if (r.status !== 200) throw new Error(`${r.status}`);
      answered.push(marker);
      return true;
    };
    const client = async (k: number): Promise<void> => {
      while (Date.now() < stopAt) {
        const i = n++;
        const nodes = live();
        const node = nodes[(k + i) % nodes.length];
        if (k % 2 === 0) {
          const path = `/kill/k${k}-${i}.txt`;
          try {
            const r = await cluster.api(node, 'PUT', `/v1/workspaces/ws/files${path}`, body(1000 + i));
            if (r.status === 202) acknowledged.push(path);
          } catch {
            // Sent to the node as it died: not acknowledged.
          }
          continue;
        }
        const marker = `m${k}x${i}`;
        const wasLive = node !== c || !killed;
        try {
          await readOnce(node, marker);
        } catch {
          if (node !== c) failedLive.push(`${marker} on ${node.id}`);
          else if (wasLive || killed) {
            // The client retries once on another node.
            const other = live().find((x) => x !== c);
            const retried = other === undefined ? false : await readOnce(other, `${marker}r`).catch(() => false);
            if (!retried) lostTwice++;
          }
        }
      }
    };
    const clients = Array.from({ length: 8 }, (_, k) => client(k));
    await sleep(4_000);
    killed = true;
    await cluster.signal(c, 'SIGKILL');
    await Promise.all(clients);
    expect(failedLive).toEqual([]);
    expect(lostTwice).toBe(0);
    expect(acknowledged.length).toBeGreaterThan(20);

    // Every acknowledged upload becomes ready on the nodes still running (the jobs the killed node
    // held are claimed again after their lease).
    const deadline = Date.now() + 90_000;
    let statuses = await listing(a);
    while (acknowledged.some((p) => statuses.get(p) !== 'ready') && Date.now() < deadline) {
      await sleep(250);
      statuses = await listing(a);
    }
    expect(acknowledged.filter((p) => statuses.get(p) !== 'ready')).toEqual([]);
    // Each is greppable (an upload the killed node stored but never answered may be there too).
    const grep = await read(b, 'grep', 'pattern=unique to this file&glob=/kill/**&output_mode=files_with_matches');
    const found = new Set(grep.text.trim().split('\n'));
    expect(acknowledged.filter((p) => !found.has(p))).toEqual([]);

    // An audit event exactly once for every read answered in full.
    const events = (await cluster.audit(a, 'ws')).filter((e) => e.tool === 'grep' && e.params.glob?.startsWith('m'));
    const seen = new Map<string, number>();
    for (const e of events) {
      const marker = e.params.glob.slice(0, -1);
      seen.set(marker, (seen.get(marker) ?? 0) + 1);
    }
    expect(answered.filter((m) => seen.get(m) !== 1)).toEqual([]);
    expect([...seen.values()].filter((count) => count > 1)).toEqual([]);
    await cluster.startNode(c);
  });

  it('a node joining takes over its share of warm copies while reads go on without a failure', { timeout: 120_000 }, async () => {
    // More workspaces, so that the new node is warm for some.
    for (let w = 0; w < 12; w++) {
      expect((await cluster.api(a, 'POST', '/v1/workspaces', JSON.stringify({ name: `w${w}` }))).status).toBe(201);
      expect((await cluster.api(a, 'PUT', `/v1/workspaces/w${w}/files/a.txt`, body(w))).status).toBe(202);
    }
    for (let w = 0; w < 12; w++) {
      const deadline = Date.now() + 60_000;
      while ((await listing(a, `w${w}`)).get('/a.txt') !== 'ready' && Date.now() < deadline) await sleep(50);
    }
    let stop = false;
    const failures: string[] = [];
    let reads = 0;
    const client = async (k: number): Promise<void> => {
      for (let i = 0; !stop; i++) {
        const nodes = cluster.nodes.filter((x) => x.process !== null);
        const node = nodes[(k + i) % nodes.length];
        const w = (k + i) % 12;
        const r = await cluster.api(node, 'GET', `/v1/workspaces/w${w}/grep?pattern=needle-${w}-x`).catch((e: Error) => e);
        if (r instanceof Error || r.status !== 200 || !(await r.text()).includes('/a.txt'))
          failures.push(`w${w} on ${node.id}: ${r instanceof Error ? r.message : r.status}`);
        reads++;
      }
    };
    const clients = Array.from({ length: 8 }, (_, k) => client(k));
    const d = await cluster.add();
    // The new node fills the copies it is warm for (hydrated ahead of any read sent to it).
    const deadline = Date.now() + 30_000;
    let mine: { copies: number } | undefined;
    for (;;) {
      const nodes = JSON.parse((await cluster.admin(['list-nodes', '--json'])).stdout) as Array<{ id: string; state: string; copies: number }>;
      mine = nodes.find((x) => x.id === d.id);
      if ((mine?.copies ?? 0) >= 1 || Date.now() > deadline) break;
      await sleep(250);
    }
    stop = true;
    await Promise.all(clients);
    expect(failures).toEqual([]);
    expect(reads).toBeGreaterThan(50);
    expect(mine?.copies).toBeGreaterThanOrEqual(1);
  });

  it('a node over its cache budget deletes its cold copies, and reads them again on demand', { timeout: 120_000 }, async () => {
    // Heartbeats every 0.5 s: its copies go cold after 15 s unread (the twelve first reads, each
    // filling a copy, took more than 6 s on a loaded machine).
    const e = await cluster.add({ VFS_SHARD_CACHE_BYTES: '1', VFS_NODE_HEARTBEAT_SECONDS: '0.5' });
    try {
      // Read every workspace once on e: it makes a copy of each.
      for (let w = 0; w < 12; w++) expect((await read(e, 'grep', `pattern=needle-${w}-x`, `w${w}`)).text).toBe('/a.txt\n');
      const copies = async (): Promise<number> => {
        const nodes = JSON.parse((await cluster.admin(['list-nodes', '--json'])).stdout) as Array<{ id: string; copies: number }>;
        return nodes.find((x) => x.id === e.id)!.copies;
      };
      expect(await copies()).toBeGreaterThanOrEqual(12);
      // Unread for 30 heartbeats, the cold ones go; its warm ones stay.
      const deadline = Date.now() + 60_000;
      while ((await copies()) >= 12 && Date.now() < deadline) await sleep(1_000);
      expect(await copies()).toBeLessThan(12);
      for (let w = 0; w < 12; w++) expect((await read(e, 'grep', `pattern=needle-${w}-x`, `w${w}`)).text).toBe('/a.txt\n');
    } finally {
      await cluster.signal(e, 'SIGTERM');
    }
  });

  it('the operator command lists the nodes with their state, copies and lag', async () => {
    const { stdout, stderr } = await cluster.admin(['list-nodes', '--json']);
    expect(stderr).toBe('');
    const nodes = JSON.parse(stdout) as Array<{ id: string; state: string; copies: number; cacheBytes: number; behind: unknown[] }>;
    expect(nodes.map((x) => x.id)).toEqual(['node-a', 'node-b', 'node-c', 'node-d', 'node-e']);
    expect(nodes.map((x) => x.state)).toEqual(['active', 'active', 'active', 'active', 'stopped']);
    expect(nodes.slice(0, 4).every((x) => x.copies >= 1 && x.cacheBytes > 0)).toBe(true);
    const text = (await cluster.admin(['list-nodes'])).stdout;
    expect(text).toMatch(/^node-a\tactive\tseen [\d.]+ s ago\thttp:\/\/127\.0\.0\.1:\d+\tcopies=\d+\tcache=\d+ B\tlag: /m);
  });

  it("GET /v1/status (the console's Health page) shows the account the nodes, their state and its copies, never an address", async () => {
    const r = await cluster.api(b, 'GET', '/v1/status');
    expect(r.status).toBe(200);
    const { nodes } = (await r.json()) as {
      nodes: Array<{ id: string; state: string; alive: boolean; seenAt: string; copies: number; versionsBehind: number }>;
    };
    expect(nodes.map((x) => [x.id, x.state])).toEqual([
      ['node-a', 'active'],
      ['node-b', 'active'],
      ['node-c', 'active'],
      ['node-d', 'active'],
      ['node-e', 'stopped'],
    ]);
    expect(nodes.slice(0, 4).every((x) => x.alive && x.copies >= 1 && x.versionsBehind >= 0)).toBe(true);
    expect(JSON.stringify(nodes)).not.toMatch(/127\.0\.0\.1|http/);
  });

  it('a copy neither warm nor read lately is left behind by changes, and caught up by its next read', { timeout: 120_000 }, async () => {
    // Heartbeats every 0.2 s: a copy unread for 6 s is no longer followed.
    const f = await cluster.add({ VFS_NODE_HEARTBEAT_SECONDS: '0.2' });
    try {
      const { rows } = await cluster.asSuperuser((client) =>
        client.query<{ id: string; name: string }>("SELECT id, name FROM workspaces WHERE name ~ '^w[0-9]+$'"),
      );
      const ids = new Map(rows.map((r) => [r.name, r.id]));
      const live = ['node-a', 'node-b', 'node-c', 'node-d', f.id];
      const name = [...ids.keys()].find((n) => !warmNodes(ids.get(n)!, live).includes(f.id))!;
      const id = ids.get(name)!;
      const warm = warmNodes(id, live);
      const behind = async (): Promise<Map<string, number>> => {
        const nodes = JSON.parse((await cluster.admin(['list-nodes', '--json'])).stdout) as Array<{
          id: string;
          behind: Array<{ workspaceId: string; versions: number }>;
        }>;
        return new Map(nodes.map((n) => [n.id, n.behind.find((x) => x.workspaceId === id)?.versions ?? 0]));
      };
      // f makes a copy on its first read, then nobody reads it there for longer than 30 heartbeats.
      expect((await read(f, 'find', 'pattern=*.txt', name)).text).toContain('/a.txt');
      await sleep(8_000);
      for (let i = 0; i < 3; i++) expect((await cluster.api(a, 'PUT', `/v1/workspaces/${name}/files/late-${i}.txt`, body(200 + i))).status).toBe(202);
      const deadline = Date.now() + 60_000;
      for (let i = 0; i < 3; i++) {
        while ((await listing(a, name)).get(`/late-${i}.txt`) !== 'ready' && Date.now() < deadline) await sleep(50);
      }
      // The warm nodes follow the changes; f's copy stays where it was, heartbeat after heartbeat.
      let lag = await behind();
      while (warm.some((n) => (lag.get(n) ?? 0) > 0) && Date.now() < deadline) {
        await sleep(200);
        lag = await behind();
      }
      expect(warm.map((n) => lag.get(n))).toEqual([0, 0]);
      await sleep(3_000);
      expect((await behind()).get(f.id)).toBeGreaterThanOrEqual(3);
      // Its next read catches it up first, and sees every change.
      const found = (await read(f, 'grep', 'pattern=needle-20[0-2]-x', name)).text.trim().split('\n').sort();
      expect(found).toEqual(['/late-0.txt', '/late-1.txt', '/late-2.txt']);
      lag = await behind();
      while (lag.get(f.id)! > 0 && Date.now() < deadline) {
        await sleep(200);
        lag = await behind();
      }
      expect(lag.get(f.id)).toBe(0);
    } finally {
      await cluster.signal(f, 'SIGTERM');
    }
  });

  it('a workspace deleted through one node is gone on the others at the next request, for a token they had cached too', { timeout: 120_000 }, async () => {
    expect((await cluster.api(a, 'POST', '/v1/workspaces', JSON.stringify({ name: 'gone' }))).status).toBe(201);
    expect((await cluster.api(a, 'PUT', '/v1/workspaces/gone/files/x.txt', body(7))).status).toBe(202);
    const minted = await cluster.api(a, 'POST', '/v1/workspaces/gone/tokens', JSON.stringify({}));
    expect(minted.status).toBe(201);
    const { token } = (await minted.json()) as { token: string };
    const deadline = Date.now() + 60_000;
    let text = '';
    while (!text.includes('/x.txt') && Date.now() < deadline) {
      text = await (await cluster.api(b, 'GET', '/v1/workspaces/gone/grep?pattern=needle-7-x', undefined, token)).text();
    }
    expect(text).toBe('/x.txt\n');
    expect((await cluster.api(c, 'DELETE', '/v1/workspaces/gone')).status).toBe(204);
    const byToken = await cluster.api(b, 'GET', '/v1/workspaces/gone/grep?pattern=needle-7-x', undefined, token);
    expect([401, 404]).toContain(byToken.status);
    expect((await cluster.api(b, 'GET', '/v1/workspaces/gone/grep?pattern=needle-7-x')).status).toBe(404);
  });

  it('a token revoked through one node is refused by the others at the next request, 20 times in a row', { timeout: 120_000 }, async () => {
    const nodes = [a, b, c];
    for (let i = 0; i < 20; i++) {
      const minted = await cluster.api(nodes[i % 3], 'POST', '/v1/workspaces/ws/tokens', JSON.stringify({}));
      expect(minted.status).toBe(201);
      const { id, token } = (await minted.json()) as { id: string; token: string };
      // Each node caches the token with a read.
      for (const node of nodes) expect((await cluster.api(node, 'GET', '/v1/workspaces/ws/ls', undefined, token)).status).toBe(200);
      expect((await cluster.api(nodes[(i + 1) % 3], 'DELETE', `/v1/tokens/${id}`)).status).toBe(204);
      for (const node of nodes)
        expect([i, node.id, (await cluster.api(node, 'GET', '/v1/workspaces/ws/ls', undefined, token)).status]).toEqual([i, node.id, 401]);
    }
  });

  it('a revocation waits at most DROP_WAIT_MS for a live node that does not confirm dropping its cache, and names it', async () => {
    // The row of a live node that never listens (draining, so that no warm copy is given to it).
    await cluster.asSuperuser((client) => client.query("INSERT INTO nodes (id, url, state) VALUES ('node-silent', NULL, 'draining')"));
    try {
      const minted = await cluster.api(a, 'POST', '/v1/workspaces/ws/tokens', JSON.stringify({}));
      const { id, token } = (await minted.json()) as { id: string; token: string };
      const started = Date.now();
      expect((await cluster.api(a, 'DELETE', `/v1/tokens/${id}`)).status).toBe(204);
      expect(Date.now() - started).toBeGreaterThanOrEqual(DROP_WAIT_MS);
      expect(a.process?.stderr()).toContain(`node-silent did not confirm dropping their cached ones within ${DROP_WAIT_MS} ms`);
      for (const node of [b, c]) expect((await cluster.api(node, 'GET', '/v1/workspaces/ws/ls', undefined, token)).status).toBe(401);
    } finally {
      await cluster.asSuperuser((client) => client.query("DELETE FROM nodes WHERE id = 'node-silent'"));
    }
  });

  describe('OAuth across nodes', () => {
    const REDIRECT = 'http://127.0.0.1/callback';
    const resource = `${PUBLIC_URL}/v1/workspaces/oauth/mcp`;

    beforeAll(async () => {
      expect((await cluster.api(a, 'POST', '/v1/workspaces', JSON.stringify({ name: 'oauth' }))).status).toBe(201);
      expect((await cluster.api(a, 'PUT', '/v1/workspaces/oauth/files/x.txt', body(11))).status).toBe(202);
      const deadline = Date.now() + 60_000;
      while (!(await (await cluster.api(b, 'GET', '/v1/workspaces/oauth/grep?pattern=needle-11-x')).text()).includes('/x.txt')) {
        if (Date.now() > deadline) throw new Error('x.txt never became readable');
        await sleep(20);
      }
    });

    /** A client registered through `node`. */
    async function register(node: ClusterNode): Promise<string> {
      const r = await fetch(`${cluster.url(node)}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ client_name: 'cluster test', redirect_uris: [REDIRECT] }),
      });
      expect(r.status).toBe(201);
      return ((await r.json()) as { client_id: string }).client_id;
    }

    /** The person approves on the page `pageNode` serves, posting it to `postNode`: the code and its verifier. */
    async function approve(clientId: string, pageNode: ClusterNode, postNode: ClusterNode): Promise<{ code: string; verifier: string }> {
      const { verifier, challenge } = pkce();
      const query = new URLSearchParams({
        response_type: 'code',
        client_id: clientId,
        redirect_uri: REDIRECT,
        code_challenge: challenge,
        code_challenge_method: 'S256',
        state: 's',
        resource,
      });
      const { page, html, cookie } = await visit(`${cluster.url(pageNode)}/oauth/authorize?${query}`);
      expect(page.status, html).toBe(200);
      const post = await postForm(cluster.url(postNode), { ...formOf(html), key: cluster.key, decision: 'allow' }, cookie);
      expect(post.status, await post.text()).toBe(303);
      const back = new URL(post.headers.get('location') ?? '');
      expect(back.searchParams.get('iss')).toBe(PUBLIC_URL);
      return { code: back.searchParams.get('code') ?? '', verifier };
    }

    /** The token endpoint of `node`. */
    const token = (node: ClusterNode, fields: Record<string, string>) => postFields(`${cluster.url(node)}/oauth/token`, fields);
    const revoke = (node: ClusterNode, fields: Record<string, string>) => postFields(`${cluster.url(node)}/oauth/revoke`, fields);

    /** The status of an MCP ping to `node` with `access`. */
    async function ping(node: ClusterNode, access: string): Promise<number> {
      const r = await fetch(`${cluster.url(node)}/v1/workspaces/oauth/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${access}` },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
      });
      await r.text();
      return r.status;
    }

    it("a grant made through node A reads on B's MCP endpoint and refreshes there; revoked through C, it is refused on A and B at the next request", async () => {
      const clientId = await register(a);
      const { code, verifier } = await approve(clientId, a, a);
      const issued = await token(a, { grant_type: 'authorization_code', code, client_id: clientId, code_verifier: verifier, redirect_uri: REDIRECT });
      expect(issued.status, JSON.stringify(issued.json)).toBe(200);
      // The official client on B, with the token A issued.
      const client = new Client({ name: 'cluster-oauth', version: '1.0.0' });
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${cluster.url(b)}/v1/workspaces/oauth/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${issued.json.access_token}` } },
        }),
      );
      try {
        const grep = (await client.callTool({ name: 'grep', arguments: { pattern: 'needle-11-x' } })) as { content: Array<{ text: string }> };
        expect(grep.content[0].text).toBe('/x.txt\n');
      } finally {
        await client.close();
      }
      const refreshed = await token(b, { grant_type: 'refresh_token', refresh_token: issued.json.refresh_token, client_id: clientId });
      expect(refreshed.status, JSON.stringify(refreshed.json)).toBe(200);
      const access = refreshed.json.access_token;
      // Each node has now seen (and cached) the token.
      for (const node of [a, b]) expect(await ping(node, access)).toBe(200);
      const grants = (await (await cluster.api(c, 'GET', '/v1/workspaces/oauth/grants')).json()) as { grants: Array<{ id: string; clientId: string }> };
      const grant = grants.grants.find((g) => g.clientId === clientId);
      expect(grant).toBeDefined();
      expect((await cluster.api(c, 'DELETE', `/v1/grants/${grant?.id}`)).status).toBe(204);
      for (const node of [a, b]) expect([node.id, await ping(node, access)]).toEqual([node.id, 401]);
      const again = await token(a, { grant_type: 'refresh_token', refresh_token: refreshed.json.refresh_token, client_id: clientId });
      expect([again.status, again.json.error]).toEqual([400, 'invalid_grant']);
    });

    it('a page served by A is posted to B; a revocation at /oauth/revoke on one node holds on the others at the next request', async () => {
      const clientId = await register(b);
      const { code, verifier } = await approve(clientId, a, b);
      const first = await token(c, { grant_type: 'authorization_code', code, client_id: clientId, code_verifier: verifier, redirect_uri: REDIRECT });
      expect(first.status, JSON.stringify(first.json)).toBe(200);
      for (const node of [b, c]) expect(await ping(node, first.json.access_token)).toBe(200);
      // The access token alone, revoked through A: refused by B and C, which had it cached.
      expect((await revoke(a, { token: first.json.access_token, client_id: clientId })).status).toBe(200);
      for (const node of [b, c]) expect([node.id, await ping(node, first.json.access_token)]).toEqual([node.id, 401]);
      // The grant lives on: a refresh through C, then its refresh token revoked through B ends it everywhere.
      const second = await token(c, { grant_type: 'refresh_token', refresh_token: first.json.refresh_token, client_id: clientId });
      expect(second.status, JSON.stringify(second.json)).toBe(200);
      for (const node of [a, c]) expect(await ping(node, second.json.access_token)).toBe(200);
      expect((await revoke(b, { token: second.json.refresh_token, client_id: clientId })).status).toBe(200);
      for (const node of [a, c]) expect([node.id, await ping(node, second.json.access_token)]).toEqual([node.id, 401]);
    });
  });
});

describe('one database, one mode (db/serving-lock.ts)', () => {
  it('refuses a cluster node beside a process without cluster mode, and that process beside cluster nodes, each naming VFS_CLUSTER', {
    timeout: 120_000,
  }, async () => {
    if (!S3) throw new Error("run with VFS_TEST_STORAGE=s3 (npm run test:cluster): cluster nodes need the run's Swift cluster");
    const mixed = await ServiceCluster.create(inject('pgSuperuser'), inject('swift'), `vfs_mixed_${randomBytes(5).toString('hex')}`, {});
    try {
      const alone = await mixed.add({ VFS_CLUSTER: 'off' });
      await expect(mixed.add({ VFS_CLUSTER: 'on' })).rejects.toThrow(/serves this database without cluster mode \(VFS_CLUSTER=off\)/);
      await expect(mixed.add({ VFS_CLUSTER: 'off' })).rejects.toThrow(/another process already serves this database; .* VFS_CLUSTER=on/);
      expect((await mixed.api(alone, 'GET', '/v1/workspaces')).status).toBe(200);

      // Once it has stopped, cluster nodes start, and then a process without cluster mode is refused.
      expect(await mixed.signal(alone, 'SIGTERM')).toBe(0);
      const nodes = [await mixed.add({ VFS_CLUSTER: 'on' }), await mixed.add({ VFS_CLUSTER: 'on' })];
      await expect(mixed.add({ VFS_CLUSTER: 'off' })).rejects.toThrow(/cluster nodes \(VFS_CLUSTER=on\) serve this database/);
      for (const node of nodes) expect((await mixed.api(node, 'GET', '/v1/workspaces')).status).toBe(200);
    } finally {
      await mixed.stop();
    }
  });
});

describe('warm nodes by rendezvous hashing', () => {
  it('a fourth node takes about a quarter of the warm copies, and only from the others', () => {
    const ids = Array.from({ length: 4000 }, (_, i) => `00000000-0000-4000-8000-${i.toString(16).padStart(12, '0')}`);
    const three = ['node-a', 'node-b', 'node-c'];
    const four = [...three, 'node-d'];
    let moved = 0;
    for (const id of ids) {
      const before = warmNodes(id, three);
      const after = warmNodes(id, four);
      expect(after).toHaveLength(WARM_COPIES);
      // A copy only moves to the new node; the others keep theirs.
      for (const n of after) if (n !== 'node-d') expect(before).toContain(n);
      moved += after.filter((n) => !before.includes(n)).length;
    }
    expect(moved / (ids.length * WARM_COPIES)).toBeGreaterThan(0.22);
    expect(moved / (ids.length * WARM_COPIES)).toBeLessThan(0.28);
  });
});
