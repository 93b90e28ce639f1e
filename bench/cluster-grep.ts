/**
 * Many nodes on one machine: grep throughput with the load spread over one, two and three nodes
 * of a cluster (VFS_CLUSTER=on), and what the per-read freshness check costs one node, in one run.
 *
 *   node --import tsx bench/cluster-grep.ts [corpusDir|generated] [files=3000] [seconds=10] [rounds=3]
 *
 * Starts a PostgreSQL (the embedded cluster, in a temp directory) and a Swift cluster with its S3
 * API (the tests' server), provisions a database, and starts three service processes (compiled,
 * as `npm start` runs them) on it with VFS_CLUSTER=on, each on its own data directory, all sharing
 * one bucket; plan limits lifted. The corpus is the first `files` files (by path) of `corpusDir`
 * (default: the Linux tree that bench/corpus.sh unpacks, if present; else, or with `generated`,
 * C-like files written here), uploaded into one workspace through node 1; once every file is
 * ready each node answers the grep mix once (its copy caught up) and takes it unmeasured for 5 s,
 * then each pattern alone is timed on node 1 (median of three).
 *
 * 0. What the three nodes cost idle for `seconds`: CPU of the nodes and of PostgreSQL, and the
 *    database's transactions, per second.
 * 1. Throughput, VFS_CLUSTER_LIMITS=off (so that it measures the read path): autocannon at 16
 *    connections cycling through a fixed mix of selective and broad greps (MIX), all 16 on node 1,
 *    8+8 on nodes 1-2, or 6+5+5 on nodes 1-3, one autocannon per node at once. Each round runs
 *    the three spreads, in alternating order; reported: requests/s (median and per round), the
 *    CPU per request of the three node processes (idle ones included) and of PostgreSQL, the
 *    database's transactions per request, and the ratios 2 nodes / 1 and 3 nodes / 1 per round
 *    and their median. On a machine of 2 cores more nodes add no cores: the ratios show what
 *    the cluster machinery costs, not how it scales.
 * 2. The freshness check (api/freshness.ts, one committed-version query per round trip): nodes 2
 *    and 3 stopped, node 1 alone against one service with VFS_CLUSTER=off on a database and bucket
 *    of its own holding the same corpus; `cat` of a 100-line file at 16 connections, alternating
 *    rounds; requests/s, CPU per read of the service and of PostgreSQL, and the transactions per
 *    read in the service's database, on / off.
 * 3. One round of (1) with VFS_CLUSTER_LIMITS=on (the default with VFS_CLUSTER=on), every node
 *    restarted with it.
 *
 * Progress goes to stderr, the figures as JSON to stdout. Every process started here is stopped
 * and every temp directory removed at the end, on failure, and on SIGINT or SIGTERM.
 */
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import autocannon from 'autocannon';
import { buildService } from '../service/script-args.js';
import type { ClusterNode, ServiceCluster } from '../test/helpers/cluster.js';
import { Backends, deploy } from './bench-cluster.js';
import { cpuOf, cpuSince, postgresPids } from './cpu.js';
import { call, median, uploadAll, waitReady, walk } from './lib.js';

const DEFAULT_CORPUS = '/var/tmp/agent-vfs-corpus/linux-source-6.1';
const [corpusArg, filesArg, secondsArg, roundsArg] = process.argv.slice(2);
const fileCount = Number(filesArg ?? 3000);
const duration = Number(secondsArg ?? 10);
const rounds = Number(roundsArg ?? 3);
const CONNECTIONS = 16;
const UPLOADS_IN_FLIGHT = 48;
/** Unmeasured load before measuring a process (see warm()). */
const WARM_SECONDS = 5;
const WORKSPACE = 'bench';
/** Beside the corpus in both workspaces: the file the freshness check's `cat` reads. */
const SMALL_PATH = '/_bench/hundred.txt';
const HUNDRED_LINES = Array.from({ length: 100 }, (_, i) => `line ${i + 1}: the quick brown fox jumps over the lazy dog`).join('\n') + '\n';

/**
 * The grep mix each connection cycles through: a rare identifier, a macro in a few percent of the
 * files, a regex with a required literal at each end, `-i` variants, and broad patterns (half
 * the files and more) capped by head_limit. On the first 3,000 files of drivers/net of Linux 6.1
 * rg finds them in 8, 57, 322, 211, 121 and 1,323 files.
 */
const MIX: Array<Record<string, string>> = [
  { pattern: 'mdiobus_alloc_size', output_mode: 'files_with_matches' },
  { pattern: 'EXPORT_SYMBOL_GPL', output_mode: 'files_with_matches' },
  { pattern: 'EXPORT_SYMBOL_GPL', output_mode: 'count' },
  { pattern: 'netif_\\w+_queue', output_mode: 'files_with_matches', head_limit: '50' },
  { pattern: 'SPIN_LOCK_IRQSAVE', '-i': 'true', output_mode: 'files_with_matches', head_limit: '50' },
  { pattern: 'dma_bit_mask', '-i': 'true', output_mode: 'count', head_limit: '50' },
  { pattern: 'static int', output_mode: 'files_with_matches', head_limit: '50' },
  { pattern: 'static int', output_mode: 'count', head_limit: '50' },
];
const CAT_PATH = `/v1/workspaces/${WORKSPACE}/cat?path=${encodeURIComponent(SMALL_PATH)}`;
const grepPath = (query: Record<string, string>): string => `/v1/workspaces/${WORKSPACE}/grep?${new URLSearchParams(query)}`;

const log = (line: string): void => void process.stderr.write(line + '\n');
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** What has to be undone, last made first: run by `cleanUp` once, whatever ends the run. */
const closers: Array<() => Promise<void>> = [];
let cleaning: Promise<void> | null = null;
function cleanUp(): Promise<void> {
  cleaning ??= (async () => {
    for (const close of closers.reverse()) await close().catch((error: unknown) => log(`cleaning up: ${String(error)}`));
  })();
  return cleaning;
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void cleanUp().finally(() => process.exit(130)));
}

/**
 * C-like files for a machine without the Linux tree: every pattern of MIX matches some, from
 * 1 in 500 files (the rare identifier) to every file (`static int`).
 */
async function generateCorpus(dir: string, count: number): Promise<void> {
  const words = ['buffer', 'queue', 'device', 'packet', 'lock', 'state', 'ring', 'stats', 'link', 'phy', 'irq', 'reset'];
  for (let i = 0; i < count; i++) {
    const lines = [`// SPDX-License-Identifier: GPL-2.0`, `/* generated file ${i} */`, '#include <linux/netdevice.h>', ''];
    for (let f = 0; f < 12; f++) {
      const name = `drv${i}_${words[(i + f) % words.length]}_${f}`;
      lines.push(`static int ${name}(struct net_device *dev)`, '{', '\tunsigned long flags;', '');
      if ((i + f) % 7 === 0) lines.push('\tspin_lock_irqsave(&priv->lock, flags);');
      if ((i + f) % 9 === 0) lines.push(`\tnetif_${f % 2 === 0 ? 'stop' : 'wake'}_queue(dev);`);
      if (f === 0 && i % 20 === 0) lines.push('\tdma_set_mask(dev, DMA_BIT_MASK(64));');
      if (f === 0 && i % 500 === 0) lines.push('\tbus = mdiobus_alloc_size(sizeof(*priv));');
      for (let k = 0; k < 20; k++)
        lines.push(`\tpriv->${words[(i * 7 + f * 3 + k) % words.length]}[${k}] = ${words[(i + k) % words.length]}_${(i * k) % 97}(dev, ${k});`);
      lines.push('\treturn 0;', '}', '');
      if (f === 0 && i % 40 === 0) lines.push(`EXPORT_SYMBOL_GPL(${name});`, '');
    }
    const path = join(dir, `drivers/gen${i % 30}/file${i}.c`);
    await mkdir(dirname(path), { recursive: true });
    await writeFile(path, lines.join('\n'));
  }
}

/** A GET answered 200; a node still catching up answers 503 (Retry-After), so ask again. */
async function readUntilOk(url: string, key: string, path: string): Promise<number> {
  const deadline = Date.now() + 300_000;
  for (;;) {
    const t0 = performance.now();
    const r = await call(url, 'GET', path, key);
    if (r.status === 200) return performance.now() - t0;
    if (r.status !== 503 || Date.now() > deadline) throw new Error(`GET ${path} on ${url}: ${r.status} ${r.body.toString().slice(0, 300)}`);
    await sleep(500);
  }
}

/** Uploads the corpus and the 100-line file into a new workspace through `url`; waits until every file is ready. */
async function loadWorkspace(url: string, key: string, files: Array<[string, string]>, smallFile: string): Promise<{ seconds: number; errors: number }> {
  const t0 = performance.now();
  const r = await call(url, 'POST', '/v1/workspaces', key, JSON.stringify({ name: WORKSPACE }));
  if (r.status !== 201) throw new Error(`creating the workspace: ${r.status} ${r.body.toString()}`);
  const { refused } = await uploadAll({ url, key }, WORKSPACE, [...files, [smallFile, SMALL_PATH.slice(1)]], UPLOADS_IN_FLIGHT);
  if (refused.length > 0) throw new Error(`${refused.length} uploads refused, the first: ${JSON.stringify(refused[0])}`);
  const errors = await waitReady({ url, key }, WORKSPACE, 3_600_000);
  return { seconds: +((performance.now() - t0) / 1000).toFixed(1), errors };
}

/** How long PostgreSQL's backends may take to report their transaction counts once idle (with a margin). */
const STATS_LAG_MS = 1500;

/**
 * Runs `measure` and counts what it cost: CPU seconds of the node processes `pids` and of
 * PostgreSQL (over the load alone), and transactions in the deployment's database (read once its
 * backends reported them).
 */
async function metered<T>(
  pgDir: string,
  deployment: ServiceCluster,
  pids: number[],
  measure: () => Promise<T>,
): Promise<{ result: T; service: number; postgres: number; transactions: number }> {
  await sleep(STATS_LAG_MS);
  const txBefore = await deployment.transactions();
  const before = await cpuOf(pids);
  const pgBefore = await cpuOf(await postgresPids(pgDir));
  const result = await measure();
  const service = await cpuSince(pids, before);
  const postgres = await cpuSince(await postgresPids(pgDir), pgBefore);
  await sleep(STATS_LAG_MS);
  return { result, service, postgres, transactions: (await deployment.transactions()) - txBefore };
}

/** One load of `seconds`: autocannon instances at once, `connections[i]` of them to `urls[i]`, each cycling through `requests`. */
async function load(urls: string[], connections: number[], key: string, requests: autocannon.Request[], seconds = duration) {
  const results = await Promise.all(
    urls.map((url, i) =>
      autocannon({
        url,
        headers: { authorization: `Bearer ${key}` },
        connections: connections[i],
        duration: seconds,
        requests: requests.map((r) => ({ ...r })),
      }),
    ),
  );
  const total = results.reduce((sum, r) => sum + r.requests.total, 0);
  return {
    rps: Math.round(results.reduce((sum, r) => sum + r.requests.average, 0)),
    total,
    p50ms: median(results.map((r) => r.latency.p50)),
    p99ms: Math.max(...results.map((r) => r.latency.p99)),
    non2xx: results.reduce((sum, r) => sum + r.non2xx + r.errors, 0),
  };
}

/** `total` split into `parts` near-equal shares, the larger first (16 into 3: 6, 5, 5). */
function spread(total: number, parts: number): number[] {
  return Array.from({ length: parts }, (_, i) => Math.floor(total / parts) + (i < total % parts ? 1 : 0));
}

/** The processes of the running nodes. */
const pids = (deployment: ServiceCluster): number[] => deployment.nodes.flatMap((n) => (n.process === null ? [] : [n.process.child.pid!]));

/** The grep mix on the first `count` nodes of the cluster, CPU counted over all three and PostgreSQL. */
async function measureGrep(backends: Backends, cluster: ServiceCluster, count: number) {
  const nodes = cluster.nodes.slice(0, count);
  const { result, service, postgres, transactions } = await metered(backends.pgDir, cluster, pids(cluster), () =>
    load(
      nodes.map((n) => cluster.url(n)),
      spread(CONNECTIONS, count),
      cluster.key,
      MIX.map((query) => ({ method: 'GET', path: grepPath(query) })),
    ),
  );
  const perRequestMs = (seconds: number): number => +((seconds / result.total) * 1000).toFixed(3);
  return {
    nodes: count,
    ...result,
    nodesCpuMsPerReq: perRequestMs(service),
    postgresCpuMsPerReq: perRequestMs(postgres),
    pgTransactionsPerReq: +(transactions / result.total).toFixed(3),
  };
}

type GrepRun = Awaited<ReturnType<typeof measureGrep>>;

/** One round: 1, 2 and 3 nodes in the order given; the ratios to one node. */
async function grepRound(backends: Backends, cluster: ServiceCluster, order: number[]) {
  const runs = new Map<number, GrepRun>();
  for (const count of order) {
    const run = await measureGrep(backends, cluster, count);
    runs.set(count, run);
    log(`  ${count} node(s): ${run.rps} req/s, ${run.nodesCpuMsPerReq} ms CPU/req, non-2xx ${run.non2xx}`);
  }
  const one = runs.get(1)!;
  return {
    order,
    byNodes: [1, 2, 3].map((n) => runs.get(n)!),
    twoOverOne: +(runs.get(2)!.rps / one.rps).toFixed(3),
    threeOverOne: +(runs.get(3)!.rps / one.rps).toFixed(3),
  };
}

/** `cat` of the 100-line file on one service; CPU of its process and of PostgreSQL. */
async function measureCat(backends: Backends, label: 'on' | 'off', deployment: ServiceCluster, node: ClusterNode) {
  const { result, service, postgres, transactions } = await metered(backends.pgDir, deployment, [node.process!.child.pid!], () =>
    load([deployment.url(node)], [CONNECTIONS], deployment.key, [{ method: 'GET', path: CAT_PATH }]),
  );
  const perRequestUs = (seconds: number): number => Math.round((seconds / result.total) * 1e6);
  return {
    cluster: label,
    ...result,
    serviceCpuUsPerReq: perRequestUs(service),
    postgresCpuUsPerReq: perRequestUs(postgres),
    pgTransactionsPerReq: +(transactions / result.total).toFixed(3),
  };
}

type CatRun = Awaited<ReturnType<typeof measureCat>>;

/**
 * Each node of the cluster answers the whole mix once (its copy caught up), then takes the mix
 * unmeasured for a few seconds: a process just started runs its code unoptimized at first.
 */
async function warm(cluster: ServiceCluster): Promise<void> {
  for (const node of cluster.nodes) {
    for (const query of MIX) await readUntilOk(cluster.url(node), cluster.key, grepPath(query));
  }
  const requests = MIX.map((query) => ({ method: 'GET' as const, path: grepPath(query) }));
  await load(
    cluster.nodes.map((n) => cluster.url(n)),
    spread(CONNECTIONS, cluster.nodes.length),
    cluster.key,
    requests,
    WARM_SECONDS,
  );
}

const loadAtStart = loadavg().map((x) => +x.toFixed(1));
try {
  buildService();
  const scratch = await mkdtemp(join(tmpdir(), 'vfs-bench-corpus-'));
  closers.push(() => rm(scratch, { recursive: true, force: true }));
  const corpusDir = corpusArg === 'generated' || (corpusArg === undefined && !existsSync(DEFAULT_CORPUS)) ? null : (corpusArg ?? DEFAULT_CORPUS);
  if (corpusDir === null) await generateCorpus(join(scratch, 'corpus'), fileCount);
  const files = (await walk(corpusDir ?? join(scratch, 'corpus'))).slice(0, fileCount);
  const smallFile = join(scratch, 'hundred.txt');
  await writeFile(smallFile, HUNDRED_LINES);
  log(`corpus: ${corpusDir ?? 'generated'}, ${files.length} files`);

  const backends = await Backends.start();
  closers.push(() => backends.stop());
  const limitsOff = { VFS_CLUSTER_LIMITS: 'off' };
  const cluster = await deploy(backends, 'cluster', { VFS_CLUSTER: 'on' });
  closers.push(() => cluster.stop());
  // The first node alone makes the schema; then the other two together.
  await cluster.add(limitsOff);
  await Promise.all([cluster.add(limitsOff), cluster.add(limitsOff)]);
  await cluster.liftLimits();
  const [node1, node2, node3] = cluster.nodes;
  const ingest = await loadWorkspace(cluster.url(node1), cluster.key, files, smallFile);
  log(`ingest through node 1: ${ingest.seconds} s, ${ingest.errors} files in error`);
  await warm(cluster);
  // Each pattern alone on node 1, median of three: what a request of the mix costs.
  const patternMs: Array<Record<string, string | number>> = [];
  for (const query of MIX) {
    const times: number[] = [];
    for (let i = 0; i < 3; i++) times.push(await readUntilOk(cluster.url(node1), cluster.key, grepPath(query)));
    patternMs.push({ ...query, ms: +median(times).toFixed(1) });
  }
  log(`each pattern alone: ${JSON.stringify(patternMs.map((p) => p.ms))} ms`);

  // What three idle nodes cost (heartbeats, the change log's polling), to read the CPU per request against.
  const quiet = await metered(backends.pgDir, cluster, pids(cluster), () => sleep(duration * 1000));
  const idle = {
    nodesCpuMsPerSecond: +((quiet.service / duration) * 1000).toFixed(1),
    postgresCpuMsPerSecond: +((quiet.postgres / duration) * 1000).toFixed(1),
    transactionsPerSecond: +(quiet.transactions / duration).toFixed(1),
  };
  log(`three idle nodes: ${JSON.stringify(idle)}`);

  // 1. Throughput over 1, 2 and 3 nodes, limits across nodes off.
  const grepRounds: Array<Awaited<ReturnType<typeof grepRound>>> = [];
  for (let round = 0; round < rounds; round++) {
    log(`grep round ${round}`);
    grepRounds.push(await grepRound(backends, cluster, round % 2 === 0 ? [1, 2, 3] : [3, 2, 1]));
  }

  // 2. The freshness check: node 1 alone against one service not in a cluster.
  await Promise.all([cluster.signal(node2, 'SIGTERM'), cluster.signal(node3, 'SIGTERM')]);
  const single = await deploy(backends, 'single', { VFS_CLUSTER: 'off' });
  closers.push(() => single.stop());
  const alone = await single.add();
  await single.liftLimits();
  const singleIngest = await loadWorkspace(single.url(alone), single.key, files, smallFile);
  log(`ingest into the single service: ${singleIngest.seconds} s, ${singleIngest.errors} files in error`);
  for (const [deployment, node] of [
    [cluster, node1],
    [single, alone],
  ] as const) {
    await readUntilOk(deployment.url(node), deployment.key, CAT_PATH);
    await load([deployment.url(node)], [CONNECTIONS], deployment.key, [{ method: 'GET', path: CAT_PATH }], WARM_SECONDS);
  }
  const catRounds: Array<{ on: CatRun; off: CatRun; onOverOff: number }> = [];
  for (let round = 0; round < rounds; round++) {
    const measureOn = () => measureCat(backends, 'on', cluster, node1);
    const measureOff = () => measureCat(backends, 'off', single, alone);
    let on: CatRun;
    let off: CatRun;
    if (round % 2 === 0) {
      on = await measureOn();
      off = await measureOff();
    } else {
      off = await measureOff();
      on = await measureOn();
    }
    log(
      `cat round ${round}: on ${on.rps} req/s ${on.serviceCpuUsPerReq}+${on.postgresCpuUsPerReq} µs CPU; off ${off.rps} req/s ${off.serviceCpuUsPerReq}+${off.postgresCpuUsPerReq} µs CPU`,
    );
    catRounds.push({ on, off, onOverOff: +(on.rps / off.rps).toFixed(3) });
  }
  await single.stop();

  // 3. One round with the limits shared by the nodes on, every node restarted with it.
  await cluster.signal(node1, 'SIGTERM');
  const limitsOn = { VFS_CLUSTER_LIMITS: 'on' };
  await Promise.all(cluster.nodes.map((n) => cluster.startNode(n, limitsOn)));
  await warm(cluster);
  log('grep round with VFS_CLUSTER_LIMITS=on');
  const limitsOnRound = await grepRound(backends, cluster, [1, 2, 3]);

  const cpu = (m: CatRun): number => m.serviceCpuUsPerReq + m.postgresCpuUsPerReq;
  const summary = {
    grep: {
      medianRps: [1, 2, 3].map((n) => median(grepRounds.map((r) => r.byNodes[n - 1].rps))),
      medianTwoOverOne: median(grepRounds.map((r) => r.twoOverOne)),
      medianThreeOverOne: median(grepRounds.map((r) => r.threeOverOne)),
      medianNodesCpuMsPerReq: [1, 2, 3].map((n) => median(grepRounds.map((r) => r.byNodes[n - 1].nodesCpuMsPerReq))),
      medianPostgresCpuMsPerReq: [1, 2, 3].map((n) => median(grepRounds.map((r) => r.byNodes[n - 1].postgresCpuMsPerReq))),
    },
    grepLimitsOn: { rps: limitsOnRound.byNodes.map((r) => r.rps), twoOverOne: limitsOnRound.twoOverOne, threeOverOne: limitsOnRound.threeOverOne },
    freshness: {
      medianOnRps: median(catRounds.map((r) => r.on.rps)),
      medianOffRps: median(catRounds.map((r) => r.off.rps)),
      medianOnOverOff: median(catRounds.map((r) => r.onOverOff)),
      // CPU µs per read the cluster's check adds (service and PostgreSQL together).
      medianAddedCpuUsPerRead: median(catRounds.map((r) => cpu(r.on) - cpu(r.off))),
      // PostgreSQL transactions per read: the audit log's batches, plus with the check its queries.
      medianOnTransactionsPerRead: median(catRounds.map((r) => r.on.pgTransactionsPerReq)),
      medianOffTransactionsPerRead: median(catRounds.map((r) => r.off.pgTransactionsPerReq)),
    },
  };
  process.stdout.write(
    JSON.stringify(
      {
        corpus: corpusDir ?? 'generated',
        files: files.length,
        duration,
        rounds,
        connections: CONNECTIONS,
        // The machine is shared: its load average (1, 5, 15 minutes) at the start and the end.
        loadAverage: { start: loadAtStart, end: loadavg().map((x) => +x.toFixed(1)) },
        ingest,
        singleIngest,
        patternMs,
        idle,
        summary,
        grepRounds,
        limitsOnRound,
        catRounds,
      },
      null,
      2,
    ) + '\n',
  );
} finally {
  await cleanUp();
}
