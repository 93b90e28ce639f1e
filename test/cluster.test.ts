/**
 * Many nodes: three service processes on loopback sharing one PostgreSQL
 * database and one bucket of the run's Swift cluster (npm test's S3 pass and
 * `npm run test:cluster`). Any node serves any workspace: what one node has
 * shown ready, the others read on the very next request; a copy of a shard
 * deleted under a running node is restored from the snapshot and the kept
 * texts, extracting nothing; a node stopped with SIGTERM under load answers
 * no 5xx.
 */
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type ClusterNode, TestCluster } from './helpers/cluster.js';

const S3 = process.env.VFS_TEST_STORAGE === 's3';
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

let cluster: TestCluster;
let a: ClusterNode;
let b: ClusterNode;
let c: ClusterNode;

/** The body of file `i`: a line only it has, and a line all share. */
const body = (i: number): string => `file ${i}\nneedle-${i}-x unique to this file\nshared line\n`;

describe('three nodes on one database and one object store', () => {
  beforeAll(async () => {
    if (!S3) throw new Error("run with VFS_TEST_STORAGE=s3 (npm run test:cluster): the nodes share a bucket on the run's Swift cluster");
    cluster = await TestCluster.start(3);
    [a, b, c] = cluster.nodes;
    const r = await cluster.api(a, 'POST', '/v1/workspaces', JSON.stringify({ name: 'ws' }));
    expect(r.status).toBe(201);
  });
  afterAll(async () => cluster?.stop());

  /** A's listing of the workspace, every page. */
  async function listing(node: ClusterNode): Promise<Map<string, string>> {
    const r = await cluster.api(node, 'GET', '/v1/workspaces/ws/files?limit=1000');
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

  async function read(node: ClusterNode, tool: string, query: string): Promise<{ status: number; text: string }> {
    const r = await cluster.api(node, 'GET', `/v1/workspaces/ws/${tool}?${query}`);
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

  it('a node whose copy of the shard is deleted while it runs reads correctly again, extracting nothing', async () => {
    const su = await cluster.superuser();
    try {
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
    } finally {
      await su.end();
    }
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
    await cluster.startNode(c);
  });
});
