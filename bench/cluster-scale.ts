/**
 * Scale out, with CPUs of their own: what 1, 2, 3, 4 nodes of a cluster serve when each node has
 * the same CPU quota, through nginx hashing on the workspace, and what a node killed under load
 * costs the clients.
 *
 *   node --import tsx bench/cluster-scale.ts [corpusDir] [seconds=20] [quota=0.25] [nodes=4,3,2,1] [rounds=2]
 *
 * Needs root and cgroups (v1 `cpu` + `cpuacct`, or v2), and Debian's nginx. Every process gets a
 * CPU group of its own: each node a quota of `quota` CPUs, PostgreSQL, the S3 server (Swift),
 * nginx and this process (the load generator) groups without a quota, so that what N nodes serve
 * is bounded by their own quota and not by what the others take; every group's CPU is read from
 * its cgroup. PostgreSQL runs with pg_stat_statements, to count the statements of each read.
 *
 * Setup: a database, a bucket and up to max(nodes) service processes (compiled, as `npm start`
 * runs them) with VFS_CLUSTER=on (shared limits on, as deployed), one read thread each, plan
 * limits lifted; 64 workspaces of 100 files each, consecutive slices of the C files under
 * `corpusDir/drivers` (default: the Linux tree bench/corpus.sh unpacks), uploaded through nginx,
 * and a scoped token per workspace.
 *
 * Each phase: N nodes running (the others stopped), nginx (deploy/nginx.conf with the N nodes)
 * in front; every workspace read once, then load until a round of 5 s passes with no node
 * answering 503 (its copies caught up) and serves under 5% more than the round before (a node
 * just started warming up), then no load until every node uses under a fifth of its
 * quota (copies a node has just taken on, filled; at most 5 minutes), then `seconds` measured:
 * autocannon at 96 connections through nginx, each request the next of a shuffled list of every
 * workspace's agent reads (`find`, a selective `grep`, a `grep -C 2`, `cat` at three offsets, with
 * that workspace's token), and a trickle of uploads (one new small file a second, round-robin
 * over the workspaces) with the management key. Reported per phase: requests/s, p50/p99, the CPU
 * of each group per request, the CPU each node used idle and under load against its quota and
 * how often it was throttled, PostgreSQL's statements, execution time and transactions per
 * request, and each node's share of the requests. Phases run N in the given order `rounds`
 * times (by default from most nodes down, so that within a round no node restarts, only stops);
 * the ratio to one node is taken per round; the means over the rounds are reported and drawn.
 *
 * Then a node killed under load: max(nodes) nodes, load as above for 2 × `seconds` with the
 * uploads retried until acknowledged, node 2 killed (SIGKILL) after a third of it and started
 * again after two thirds; reported: what the clients got (statuses, errors, timeouts). Then
 * every acknowledged upload of the whole run must be ready and found by `grep`.
 *
 * Figures as JSON on stdout, progress on stderr, the chart at docs/cluster-scale.svg. Every
 * process, cgroup and temp directory is removed at the end, on failure and on SIGINT/SIGTERM.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Inputs, scenarioInputs, scenarioRequests, start as startAutocannon } from '../cli/bench.js';
import { ApiClient } from '../cli/client.js';
import type { ClusterNode, ServiceCluster } from '../test/helpers/cluster.js';
import { seededRandom } from '../test/helpers/random.js';
import { Backends, deploy } from './bench-cluster.js';
import { CpuGroup, removeParent } from './cgroups.js';
import { writeChart } from './charts.js';
import { descendants, postgresPids } from './cpu.js';
import { call, freePort, threadSeries, uploadAll, waitReady, walk } from './lib.js';
import { type Balancer, requestsByNode, startNginx, unavailableAnswers, unavailableByOrigin } from './nginx.js';

const DEFAULT_CORPUS = '/var/tmp/agent-vfs-corpus/linux-source-6.1';
const [corpusArg, secondsArg, quotaArg, nodesArg, roundsArg] = process.argv.slice(2);
const corpus = corpusArg || DEFAULT_CORPUS;
const seconds = Number(secondsArg ?? 20);
const quota = Number(quotaArg ?? 0.25);
const nodeCounts = (nodesArg ?? '4,3,2,1').split(',').map(Number);
const rounds = Number(roundsArg ?? 2);
const maxNodes = Math.max(...nodeCounts);
if (!(seconds > 0) || !(quota > 0) || nodeCounts.some((n) => !Number.isInteger(n) || n < 1) || !(rounds >= 1)) {
  throw new Error('usage: cluster-scale.ts [corpusDir] [seconds>0] [quota>0 CPUs] [nodes, e.g. 4,3,2,1] [rounds>=1]');
}

const WORKSPACES = 64;
const FILES_PER_WORKSPACE = 100;
const CONNECTIONS = 96;
const WARM_SECONDS = 5;
/** Warming ends once a round serves less than this much more than the one before (and no 503). */
const WARM_GAIN = 0.05;
const WARM_ROUNDS = 24;
/** Settling after the warm-up: CPU sampled over this long, for at most SETTLE_LIMIT_MS. */
const SETTLE_SAMPLE_MS = 3000;
/** nginx writes its buffered access log every second. */
const LOG_FLUSH_MS = 1100;
const SETTLE_LIMIT_MS = 300_000;
/** Longest autocannon waits for an answer: far past any answer of a working cluster, so that a timeout is a lost request. */
const TIMEOUT_SECONDS = 60;
/** Uploads a second during a measured phase, each a new small file. */
const TRICKLE_PER_SECOND = 1;
const GROUP_PARENT = 'agent-vfs-bench';
const CHART = fileURLToPath(new URL('../docs/cluster-scale.svg', import.meta.url));

const log = (line: string): void => void process.stderr.write(`${line}\n`);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
const round = (x: number, digits = 2): number => Number(x.toFixed(digits));
const mean = (xs: number[]): number => xs.reduce((a, b) => a + b, 0) / xs.length;

/** What has to be undone, last made first: run once, whatever ends the run. */
const closers: Array<() => Promise<void>> = [];
/** The run's CPU groups: emptied before anything stops (a node stopping at its quota would be slow) and removed last. */
const cpuGroups: CpuGroup[] = [];
let cleaning: Promise<void> | null = null;
function cleanUp(): Promise<void> {
  const report = (error: unknown): void => log(`cleaning up: ${String(error)}`);
  cleaning ??= (async () => {
    for (const group of cpuGroups) await group.release().catch(report);
    for (const close of closers.reverse()) await close().catch(report);
    for (const group of cpuGroups) await group.remove().catch(report);
    if (cpuGroups.length > 0) await removeParent(GROUP_PARENT).catch(report);
  })();
  return cleaning;
}
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void cleanUp().finally(() => process.exit(130)));
}

/** One workspace of the run: its name, scoped token, read inputs and the uploads acknowledged in it. */
interface Workspace {
  name: string;
  token: string;
  inputs: Inputs;
  acknowledged: string[];
}

/** The CPU groups of the run. */
interface Groups {
  load: CpuGroup;
  postgres: CpuGroup;
  swift: CpuGroup;
  nginx: CpuGroup;
  nodes: CpuGroup[];
}

async function makeGroups(): Promise<Groups> {
  const make = async (name: string, cpus: number | null): Promise<CpuGroup> => {
    const group = await CpuGroup.create(GROUP_PARENT, name, cpus);
    cpuGroups.push(group);
    return group;
  };
  const groups: Groups = {
    load: await make('load', null),
    postgres: await make('postgres', null),
    swift: await make('swift', null),
    nginx: await make('nginx', null),
    nodes: [],
  };
  for (let i = 0; i < maxNodes; i++) groups.nodes.push(await make(`node-${i + 1}`, quota));
  return groups;
}

/** Every group's CPU seconds so far, and each node group's throttling. */
async function cpuSnapshot(groups: Groups) {
  const all = { load: groups.load, postgres: groups.postgres, swift: groups.swift, nginx: groups.nginx };
  const usage: Record<string, number> = {};
  for (const [name, group] of Object.entries(all)) usage[name] = await group.usageSeconds();
  const nodes = await Promise.all(groups.nodes.map((g) => g.usageSeconds()));
  const throttling = await Promise.all(groups.nodes.map((g) => g.throttling()));
  return { usage, nodes, throttling };
}

/** PostgreSQL's statements in the deployment's database since the last reset: calls, execution ms, and the most called. */
async function statements(
  deployment: ServiceCluster,
): Promise<{ calls: number; execMs: number; top: Array<{ query: string; calls: number; meanMs: number }> }> {
  return deployment.asSuperuser(async (client) => {
    const where = 'WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())';
    const total = await client.query<{ calls: string | null; ms: number | null }>(
      `SELECT sum(calls) AS calls, sum(total_exec_time) AS ms FROM pg_stat_statements ${where}`,
    );
    const top = await client.query<{ query: string; calls: string; ms: number }>(
      `SELECT query, calls, mean_exec_time AS ms FROM pg_stat_statements ${where} ORDER BY calls DESC LIMIT 8`,
    );
    return {
      calls: Number(total.rows[0].calls ?? 0),
      execMs: total.rows[0].ms ?? 0,
      top: top.rows.map((r) => ({ query: r.query.replace(/\s+/g, ' ').slice(0, 120), calls: Number(r.calls), meanMs: round(r.ms, 3) })),
    };
  });
}

async function resetStatements(deployment: ServiceCluster): Promise<void> {
  await deployment.asSuperuser((client) => client.query('SELECT pg_stat_statements_reset()'));
}

/** Every workspace's reads, shuffled (a fixed seed: every phase sends the same sequence). */
function readRequests(workspaces: Workspace[]): Array<{ method: 'GET'; path: string; headers: Record<string, string> }> {
  const all = workspaces.flatMap((w) => {
    const ws = `/v1/workspaces/${w.name}`;
    const headers = { authorization: `Bearer ${w.token}` };
    return [...scenarioRequests('agent-mix', ws, w.inputs), ...scenarioRequests('grep-selective', ws, w.inputs)].map((r) => ({
      method: 'GET' as const,
      path: r.path,
      headers,
    }));
  });
  const random = seededRandom(7261);
  for (let i = all.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [all[i], all[j]] = [all[j], all[i]];
  }
  return all;
}

/** Autocannon through `url` for `duration` s: every request the next of `requests`, whichever connection sends it. */
async function load(url: string, requests: ReturnType<typeof readRequests>, duration: number) {
  let next = 0;
  const statuses: Record<string, number> = {};
  const { instance, done } = startAutocannon({
    url,
    connections: CONNECTIONS,
    timeout: TIMEOUT_SECONDS,
    duration,
    requests: [{ setupRequest: (req) => ({ ...req, ...requests[next++ % requests.length] }) }],
  });
  instance.on('response', (_client, status) => {
    statuses[status] = (statuses[status] ?? 0) + 1;
  });
  const result = await done;
  return {
    requests: result.requests.total,
    rps: round(result.requests.total / duration, 1),
    p50ms: result.latency.p50,
    p99ms: result.latency.p99,
    statuses,
    non2xx: result.non2xx,
    errors: result.errors,
    timeouts: result.timeouts,
  };
}

/**
 * Uploads a new small file every 1/TRICKLE_PER_SECOND s, round-robin over the workspaces, until
 * stopped; an upload not acknowledged (202) is sent again (a node killed under it, nginx's 503),
 * for up to two minutes; one refused with a 4xx other than 429 fails the run.
 */
function trickle(url: string, key: string, workspaces: Workspace[], counter: { n: number }) {
  let stopping = false;
  let failures = 0;
  const upload = async (): Promise<void> => {
    const n = counter.n++;
    const w = workspaces[n % workspaces.length];
    const path = `trickle/upload-${n}.txt`;
    const body = `trickle_mark_${n} ${randomBytes(8).toString('hex')}\n`.repeat(20);
    for (let attempt = 1; ; attempt++) {
      const r = await call(url, 'PUT', `/v1/workspaces/${w.name}/files/${path}`, key, body).catch(() => null);
      if (r?.status === 202) {
        w.acknowledged.push(`/${path}`);
        return;
      }
      // Refused for what it is (not a node gone or busy), or no node took it for two minutes: the run is broken.
      const refused = r !== null && r.status >= 400 && r.status < 500 && r.status !== 429;
      if (refused || attempt === 600) throw new Error(`upload ${path} to ${w.name}: ${r === null ? 'no answer' : `${r.status} ${r.body.toString()}`}`);
      failures++;
      await sleep(200);
    }
  };
  const inFlight: Array<Promise<void>> = [];
  const timer = setInterval(() => {
    if (stopping) return;
    const sent = upload();
    sent.catch(() => {}); // reported by stop()
    inFlight.push(sent);
  }, 1000 / TRICKLE_PER_SECOND);
  return {
    async stop(): Promise<{ uploads: number; retries: number }> {
      stopping = true;
      clearInterval(timer);
      await Promise.all(inFlight);
      return { uploads: inFlight.length, retries: failures };
    },
  };
}

/** Runs exactly the first `n` nodes, each in its CPU group; returns the indexes of the nodes it started. */
async function runNodes(deployment: ServiceCluster, groups: Groups, n: number): Promise<number[]> {
  const started: number[] = [];
  for (const [i, node] of deployment.nodes.entries()) {
    if (i >= n && node.process !== null) await deployment.signal(node, 'SIGTERM');
    if (i < n && node.process === null) {
      await startNode(deployment, node, groups.nodes[i]);
      started.push(i);
    }
  }
  return started;
}

/** Starts a stopped node again, on the ports it was added with, in its CPU group. */
async function startNode(deployment: ServiceCluster, node: ClusterNode, group: CpuGroup): Promise<void> {
  await deployment.startNode(node);
  await group.addTree(node.process!.child.pid!);
}

/** The parts of a node's CPU time, in seconds: its threads (from its metrics), its other threads, its child processes. */
interface CpuParts {
  http: number;
  read: number;
  ingest: number;
  /** The process's threads other than these: garbage collection, compilation, the I/O pool. */
  otherThreads: number;
  /** Its child processes (extraction): the node's CPU group less the process. */
  children: number;
}

/** The round trips a node's reads share: audit commits and shared-limit checks, so far. */
interface Batches {
  audit: number;
  limits: number;
}

/**
 * Each of the first `n` nodes' CPU time so far, by part, and its batches so far; `groupCpu`: each
 * node group's CPU seconds read just before (cpuSnapshot), of which its children are the rest.
 */
async function scrapeNodes(ctx: Context, n: number, groupCpu: number[]): Promise<Array<{ parts: CpuParts; batches: Batches }>> {
  return Promise.all(
    ctx.metricsPorts.slice(0, n).map(async (port, i) => {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      const value = (series: string): number => Number(new RegExp(`^${series} (\\S+)$`, 'm').exec(text)?.[1] ?? 0);
      const threads = threadSeries(text, 'vfs_thread_cpu_seconds');
      const processCpu = value('vfs_process_cpu_seconds_total');
      const [http, read, ingest] = [threads.http ?? 0, threads.read ?? 0, threads.ingest ?? 0];
      return {
        parts: { http, read, ingest, otherThreads: processCpu - http - read - ingest, children: groupCpu[i] - processCpu },
        batches: { audit: value('vfs_audit_batch_events_count'), limits: value('vfs_shared_limit_batch_checks_count') },
      };
    }),
  );
}

/** Reads every workspace once through `url` until each answers 200 (a copy catching up answers 503 meanwhile). */
async function readEach(url: string, workspaces: Workspace[]): Promise<void> {
  await Promise.all(
    workspaces.map(async (w) => {
      for (const r of scenarioRequests('agent-mix', `/v1/workspaces/${w.name}`, w.inputs)) {
        for (let attempt = 0; ; attempt++) {
          const reply = await call(url, 'GET', r.path, w.token);
          if (reply.status === 200) break;
          if (attempt === 600) throw new Error(`GET ${r.path}: ${reply.status} ${reply.body.toString().slice(0, 200)}`);
          await sleep(500);
        }
      }
    }),
  );
}

/**
 * Brings the nodes behind `balancer` to steady state: every workspace read once, then rounds of
 * WARM_SECONDS of load until a round has no node answering 503 (each node's copies caught up) and
 * serves less than WARM_GAIN more requests than the round before. A node just started spends more
 * CPU a request for a while (compiling its code, starting its extraction process:
 * docs/benchmarks.md), which at a small quota lasts tens of seconds.
 */
async function warm(balancer: Balancer, workspaces: Workspace[], requests: ReturnType<typeof readRequests>): Promise<void> {
  await readEach(balancer.url, workspaces);
  let before = 0;
  for (let i = 1; ; i++) {
    const unavailableBefore = unavailableAnswers(await balancer.accessLog());
    const { rps } = await load(balancer.url, requests, WARM_SECONDS);
    await sleep(LOG_FLUSH_MS);
    const unavailable = unavailableAnswers(await balancer.accessLog()) - unavailableBefore;
    if (unavailable === 0 && i > 1 && rps < before * (1 + WARM_GAIN)) return;
    if (i === WARM_ROUNDS) {
      if (unavailable > 0) throw new Error(`the nodes still answered 503 after ${i * WARM_SECONDS} s of load`);
      log(`warming: still ${round((rps / before - 1) * 100, 0)}% faster than the round before after ${i * WARM_SECONDS} s of load; measuring anyway`);
      return;
    }
    log(`warming: ${rps} requests/s${unavailable > 0 ? `, ${unavailable} answers 503 (copies catching up)` : ''}`);
    before = rps;
  }
}

/**
 * Waits, without load, until each of the first `n` nodes uses under a fifth of its quota over
 * SETTLE_SAMPLE_MS (copies a node has just started to keep, filled; its catch-up done), at most
 * SETTLE_LIMIT_MS; returns the CPUs each node and PostgreSQL used over the last sample.
 */
async function settle(groups: Groups, n: number): Promise<{ nodes: number[]; postgres: number }> {
  const deadline = Date.now() + SETTLE_LIMIT_MS;
  const measured = [...groups.nodes.slice(0, n), groups.postgres];
  for (;;) {
    const before = await Promise.all(measured.map((g) => g.usageSeconds()));
    await sleep(SETTLE_SAMPLE_MS);
    const after = await Promise.all(measured.map((g) => g.usageSeconds()));
    const cpus = after.map((cpu, i) => (cpu - before[i]) / (SETTLE_SAMPLE_MS / 1000));
    const idle = { nodes: cpus.slice(0, n), postgres: cpus[n] };
    if (idle.nodes.every((cpu) => cpu < quota / 5)) return idle;
    if (Date.now() > deadline) {
      log(`nodes still busy without load after ${SETTLE_LIMIT_MS / 1000} s: ${idle.nodes.map((c) => c.toFixed(2)).join('/')} CPUs`);
      return idle;
    }
  }
}

const uploadCounter = { n: 0 };

/** One measured phase with the first `n` nodes. */
async function phase(ctx: Context, n: number, roundNo: number) {
  const { deployment, groups, ports, workspaces, dir, key } = ctx;
  const restarted = await runNodes(deployment, groups, n);
  const balancer = await startNginx(dir, ctx.nginxPort, ports.slice(0, n), groups.nginx);
  try {
    await warm(balancer, workspaces, ctx.requests);
    const idle = await settle(groups, n);
    await sleep(LOG_FLUSH_MS);
    const logStart = (await balancer.accessLog()).length;
    await resetStatements(deployment);
    const before = await cpuSnapshot(groups);
    const scrapedBefore = await scrapeNodes(ctx, n, before.nodes);
    const t0 = performance.now();
    const txBefore = await deployment.transactions();
    const uploads = trickle(balancer.url, key, workspaces, uploadCounter);
    const result = await load(balancer.url, ctx.requests, seconds);
    const trickled = await uploads.stop();
    const after = await cpuSnapshot(groups);
    const scrapedAfter = await scrapeNodes(ctx, n, after.nodes);
    const elapsed = (performance.now() - t0) / 1000;
    const pg = await statements(deployment);
    await sleep(1500); // PostgreSQL's backends report their transaction counts within about a second of going idle
    const transactions = (await deployment.transactions()) - txBefore;
    const perRequestMs = (cpu: number): number => round((cpu * 1000) / result.requests, 3);
    const nodeCpu = after.nodes.map((cpu, i) => cpu - before.nodes[i]).slice(0, n);
    const cpu: Record<string, number> = { nodes: perRequestMs(nodeCpu.reduce((a, b) => a + b, 0)) };
    for (const name of Object.keys(after.usage)) cpu[name] = perRequestMs(after.usage[name] - before.usage[name]);
    await balancer.stop();
    const measured = (await balancer.accessLog()).slice(logStart);
    const byNode = requestsByNode(measured);
    const answered = [...byNode.values()].reduce((a, b) => a + b, 0);
    const requestsOf = ports.slice(0, n).map((p) => byNode.get(`127.0.0.1:${p}`) ?? 0);
    const row = {
      nodes: n,
      round: roundNo,
      /** Nodes (1-based) started for this phase; the others ran through the phase before. */
      restarted: restarted.map((i) => i + 1),
      ...result,
      /** CPUs each node used without load once settled: the cost of being a node. */
      idleCpus: idle.nodes.map((c) => round(c, 3)),
      uploads: trickled.uploads,
      cpuMsPerRequest: cpu,
      /** CPUs each node used from the load's start until its uploads were acknowledged, against its quota. */
      nodeCpus: nodeCpu.map((c) => round(c / elapsed)),
      /** Share of each node's CFS periods in which it ran out of quota. */
      nodeThrottled: after.throttling
        .slice(0, n)
        .map((t, i) => round((t.throttled - before.throttling[i].throttled) / Math.max(1, t.periods - before.throttling[i].periods))),
      /**
       * Each node's CPU milliseconds a request it answered, by part: its HTTP, read and ingest threads,
       * its other threads (garbage collection, compilation, the I/O pool), its child processes.
       */
      nodeCpuMsPerRequestByPart: scrapedAfter.map(({ parts }, i) =>
        Object.fromEntries(
          Object.entries(parts).map(([part, cpu]) => [
            part,
            round(((cpu - scrapedBefore[i].parts[part as keyof CpuParts]) * 1000) / Math.max(1, requestsOf[i]), 2),
          ]),
        ),
      ),
      /** Each node's audit commits and shared-limit round trips a request it answered. */
      nodeBatchesPerRequest: scrapedAfter.map(({ batches }, i) => ({
        audit: round((batches.audit - scrapedBefore[i].batches.audit) / Math.max(1, requestsOf[i]), 3),
        limits: round((batches.limits - scrapedBefore[i].batches.limits) / Math.max(1, requestsOf[i]), 3),
      })),
      /** Each node's share of the requests answered under the measured load (uploads included). */
      nodeShare: requestsOf.map((r) => round(r / Math.max(1, answered))),
      /** Answers 503 from a node under the measured load, each passed on by nginx to the next node. */
      unavailable: unavailableAnswers(measured),
      postgres: {
        /** PostgreSQL's CPU without load (heartbeats, polls), and its CPU a request above that. */
        idleCpus: round(idle.postgres, 3),
        cpuMsPerRequestAboveIdle: perRequestMs(after.usage.postgres - before.usage.postgres - idle.postgres * elapsed),
        statementsPerRequest: round(pg.calls / result.requests),
        execMsPerRequest: round(pg.execMs / result.requests, 3),
        transactionsPerRequest: round(transactions / result.requests),
        top: pg.top,
      },
    };
    log(
      `${n} node(s), round ${roundNo}: ${row.rps} requests/s, p50 ${row.p50ms} ms, p99 ${row.p99ms} ms, node CPUs ${row.nodeCpus.join('/')} of ${quota} each (idle ${row.idleCpus.join('/')}), ` +
        `throttled ${row.nodeThrottled.join('/')}, restarted ${row.restarted.join('/') || 'none'}, ` +
        `node CPU ms a request by part ${JSON.stringify(row.nodeCpuMsPerRequestByPart)}, batches a request ${JSON.stringify(row.nodeBatchesPerRequest)}, share ${row.nodeShare.join('/')}, 503 passed on ${row.unavailable}, non-2xx ${row.non2xx}, errors ${row.errors}; ` +
        `CPU ms/request ${JSON.stringify(cpu)}; PostgreSQL ${row.postgres.statementsPerRequest} statements, ${row.postgres.transactionsPerRequest} transactions, ` +
        `${row.postgres.cpuMsPerRequestAboveIdle} ms of CPU above its idle ${row.postgres.idleCpus} CPU a request`,
    );
    return row;
  } finally {
    await balancer.stop();
  }
}

/** A node killed and restarted under load through nginx. */
async function killPhase(ctx: Context) {
  const { deployment, groups, ports, workspaces, dir, key } = ctx;
  const n = maxNodes;
  await runNodes(deployment, groups, n);
  const balancer = await startNginx(dir, ctx.nginxPort, ports.slice(0, n), groups.nginx);
  try {
    await warm(balancer, workspaces, ctx.requests);
    const victim = deployment.nodes[1];
    const duration = 2 * seconds;
    await sleep(LOG_FLUSH_MS);
    const logStart = (await balancer.accessLog()).length;
    const uploads = trickle(balancer.url, key, workspaces, uploadCounter);
    const events = (async () => {
      await sleep((duration * 1000) / 3);
      log(`killing ${victim.id} (SIGKILL) under load`);
      await deployment.signal(victim, 'SIGKILL');
      await sleep((duration * 1000) / 3);
      log(`starting ${victim.id} again`);
      await startNode(deployment, victim, groups.nodes[1]);
    })();
    const result = await load(balancer.url, ctx.requests, duration);
    await events;
    const trickled = await uploads.stop();
    await sleep(LOG_FLUSH_MS);
    const unavailable = unavailableByOrigin((await balancer.accessLog()).slice(logStart));
    log(
      `node killed: ${result.rps} requests/s, statuses ${JSON.stringify(result.statuses)}, errors ${result.errors}, timeouts ${result.timeouts}; uploads ${trickled.uploads}, sent again ${trickled.retries}; ` +
        `503 from nodes ${unavailable.fromNodes}, from nginx ${unavailable.fromNginx}, answered by each node ${JSON.stringify(unavailable.byNode)} (the killed node: 127.0.0.1:${ports[1]})`,
    );
    return { nodes: n, ...result, uploads: trickled.uploads, uploadRetries: trickled.retries, unavailable };
  } finally {
    await balancer.stop();
  }
}

/** Every acknowledged upload of the run is ready and found by grep in its workspace. */
async function checkAcknowledged(ctx: Context): Promise<{ acknowledged: number; missing: string[] }> {
  const balancer = await startNginx(ctx.dir, ctx.nginxPort, ctx.ports.slice(0, maxNodes), ctx.groups.nginx);
  const missing: string[] = [];
  let acknowledged = 0;
  try {
    for (const w of ctx.workspaces) {
      acknowledged += w.acknowledged.length;
      const errors = await waitReady({ url: balancer.url, key: ctx.key }, w.name, 600_000);
      if (errors > 0) missing.push(`${w.name}: ${errors} files in error`);
      const query = new URLSearchParams({ pattern: 'trickle_mark_\\d+', output_mode: 'files_with_matches' });
      const r = await call(balancer.url, 'GET', `/v1/workspaces/${w.name}/grep?${query}`, w.token);
      const found = new Set(r.body.toString().split('\n'));
      for (const path of w.acknowledged) if (!found.has(path)) missing.push(`${w.name}${path}`);
    }
  } finally {
    await balancer.stop();
  }
  return { acknowledged, missing };
}

interface Context {
  deployment: ServiceCluster;
  groups: Groups;
  ports: number[];
  /** Each node's metrics port (VFS_METRICS_PORT). */
  metricsPorts: number[];
  nginxPort: number;
  workspaces: Workspace[];
  requests: ReturnType<typeof readRequests>;
  dir: string;
  key: string;
}

/** Creates the workspaces through `url`, fills each with its slice of the corpus, and mints their tokens. */
async function fill(url: string, key: string, files: Array<[string, string]>): Promise<Workspace[]> {
  const t0 = performance.now();
  const names = Array.from({ length: WORKSPACES }, (_, i) => `scale-${String(i).padStart(2, '0')}`);
  for (const name of names) {
    const r = await call(url, 'POST', '/v1/workspaces', key, JSON.stringify({ name }));
    if (r.status !== 201) throw new Error(`create ${name}: ${r.status} ${r.body.toString()}`);
  }
  let next = 0;
  await Promise.all(
    Array.from({ length: 8 }, async () => {
      while (next < names.length) {
        const i = next++;
        const { refused } = await uploadAll({ url, key }, names[i], files.slice(i * FILES_PER_WORKSPACE, (i + 1) * FILES_PER_WORKSPACE), 6);
        if (refused.length > 0) throw new Error(`${refused.length} uploads refused in ${names[i]}, the first: ${JSON.stringify(refused[0])}`);
      }
    }),
  );
  for (const name of names) {
    const errors = await waitReady({ url, key }, name, 1_800_000);
    if (errors > 0) log(`${name}: ${errors} files in error`);
  }
  log(`${WORKSPACES} workspaces of ${FILES_PER_WORKSPACE} files ready in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  const client = new ApiClient({ baseUrl: url, key });
  const workspaces: Workspace[] = [];
  for (const name of names) {
    const r = await call(url, 'POST', `/v1/workspaces/${name}/tokens`, key, JSON.stringify({ ttlSeconds: 86_400 }));
    if (r.status !== 201) throw new Error(`mint a token for ${name}: ${r.status} ${r.body.toString()}`);
    const token = (JSON.parse(r.body.toString()) as { token: string }).token;
    workspaces.push({ name, token, inputs: await scenarioInputs(client, name), acknowledged: [] });
  }
  return workspaces;
}

async function main(): Promise<void> {
  const files = (await walk(join(corpus, 'drivers'))).filter(([, rel]) => /\.[ch]$/.test(rel));
  if (files.length < WORKSPACES * FILES_PER_WORKSPACE)
    throw new Error(`${corpus}/drivers has ${files.length} C files, fewer than ${WORKSPACES * FILES_PER_WORKSPACE}`);
  const groups = await makeGroups();
  await groups.load.add(process.pid);
  log('starting PostgreSQL (with pg_stat_statements) and the S3 server');
  const backends = await Backends.start();
  closers.push(() => backends.stop());
  await backends.trackStatements();
  for (const pid of await postgresPids(backends.pgDir)) await groups.postgres.addTree(pid);
  // Every process this one has started so far is the S3 server's (PostgreSQL's postmaster is detached).
  for (const pid of await descendants(process.pid)) await groups.swift.add(pid);

  const deployment = await deploy(backends, 'scale', { VFS_CLUSTER: 'on', VFS_READ_THREADS: '1', VFS_TRUST_PROXY: 'true' });
  closers.push(() => deployment.stop());
  const ports: number[] = [];
  const metricsPorts: number[] = [];
  for (let i = 0; i < maxNodes; i++) {
    ports.push(await freePort());
    metricsPorts.push(await freePort());
  }
  for (let i = 0; i < maxNodes; i++) {
    const node = await deployment.add({ PORT: String(ports[i]), VFS_METRICS_PORT: String(metricsPorts[i]) });
    await groups.nodes[i].addTree(node.process!.child.pid!);
  }
  await deployment.liftLimits();
  await deployment.asSuperuser((client) => client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements'));
  const dir = await mkdtemp(join(tmpdir(), 'vfs-scale-'));
  closers.push(() => rm(dir, { recursive: true, force: true }));
  const nginxPort = await freePort();

  log(`filling ${WORKSPACES} workspaces through nginx in front of ${maxNodes} nodes`);
  // Ingest is not what is measured: the nodes take it without their quota.
  for (const group of groups.nodes) await group.setQuota(null);
  const setup = await startNginx(dir, nginxPort, ports, groups.nginx);
  let workspaces: Workspace[];
  try {
    workspaces = await fill(setup.url, deployment.key, files);
  } finally {
    await setup.stop();
  }
  for (const group of groups.nodes) await group.setQuota(quota);
  const ctx: Context = { deployment, groups, ports, metricsPorts, nginxPort, workspaces, requests: readRequests(workspaces), dir, key: deployment.key };

  const rows: Array<Awaited<ReturnType<typeof phase>>> = [];
  for (let r = 1; r <= rounds; r++) for (const n of nodeCounts) rows.push(await phase(ctx, n, r));
  const killed = await killPhase(ctx);
  const check = await checkAcknowledged(ctx);
  log(`acknowledged uploads: ${check.acknowledged}, missing or unreadable: ${check.missing.length}`);

  const byN = nodeCounts.map((n) => {
    const mine = rows.filter((row) => row.nodes === n);
    const ratios = nodeCounts.includes(1) ? mine.map((row) => row.rps / rows.find((o) => o.round === row.round && o.nodes === 1)!.rps) : [];
    return {
      nodes: n,
      rps: round(mean(mine.map((row) => row.rps)), 1),
      p50ms: round(mean(mine.map((row) => row.p50ms)), 0),
      p99ms: round(mean(mine.map((row) => row.p99ms)), 0),
      ratioToOne: nodeCounts.includes(1) ? round(mean(ratios)) : null,
      ratios: ratios.map((x) => round(x)),
    };
  });
  const xs = [...nodeCounts].sort((a, b) => a - b);
  const inRound = (n: number, r: number) => rows.find((row) => row.nodes === n && row.round === r);
  await writeChart(CHART, {
    title: `Requests/s by nodes, each with ${quota} CPU of its own`,
    x: xs,
    xName: 'nodes',
    yName: 'requests/s',
    rightName: 'p99 ms',
    lines: [
      ...Array.from({ length: rounds }, (_, i) => ({ name: `round ${i + 1}`, values: xs.map((n) => inRound(n, i + 1)?.rps ?? null) })),
      ...(nodeCounts.includes(1) ? [{ name: 'linear (N × one node, round 1)', values: xs.map((n) => round(n * inRound(1, 1)!.rps, 1)) }] : []),
      { name: 'p99 ms, round 1', values: xs.map((n) => inRound(n, 1)?.p99ms ?? null), right: true },
    ],
  });
  log(`chart: ${CHART}`);
  process.stdout.write(`${JSON.stringify({ quota, seconds, connections: CONNECTIONS, byN, rows, killed, acknowledged: check }, null, 2)}\n`);
  if (check.missing.length > 0) throw new Error(`acknowledged uploads missing: ${check.missing.slice(0, 10).join(', ')}`);
}

try {
  await main();
} finally {
  await cleanUp();
}
