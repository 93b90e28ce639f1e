/**
 * What the limits shared by the nodes cost a read: `cat` of 100 lines under autocannon on one
 * service with VFS_CLUSTER_LIMITS=off and on, in the same run.
 *
 *   node --import tsx bench/cluster-limits.ts [seconds=10] [connections=64] [rounds=3]
 *
 * Two services run side by side (each on its own data directory and embedded PostgreSQL), one
 * with the setting off and one with it on, with the rate limits lifted so that every read is
 * admitted (and so, with the setting on, checked against the shared buckets). Each round
 * measures both, in alternating order so that the machine's drift falls on both alike; the
 * median over rounds of on's requests/s divided by off's is the figure to quote. Each
 * measurement also reports the CPU time per 1,000 reads of the service process and of its
 * PostgreSQL (the shared buckets' statements run there), which a busy machine disturbs less
 * than requests/s.
 */
import autocannon from 'autocannon';
import { cpuOf, cpuSince, postgresPids } from './cpu.js';
import { type BenchService, call, startBenchService } from './lib.js';

const [secondsArg, connectionsArg, roundsArg] = process.argv.slice(2);
const duration = Number(secondsArg ?? 10);
const connections = Number(connectionsArg ?? 64);
const rounds = Number(roundsArg ?? 3);

const HUNDRED_LINES = Array.from({ length: 100 }, (_, i) => `line ${i + 1}: the quick brown fox jumps over the lazy dog`).join('\n') + '\n';

/** A service with workspace `bench` holding the 100-line file, ready. */
async function prepared(clusterLimits: 'on' | 'off'): Promise<BenchService> {
  const service = await startBenchService({ VFS_READ_THREADS: '2', VFS_CLUSTER_LIMITS: clusterLimits });
  await call(service.url, 'POST', '/v1/workspaces', service.key, JSON.stringify({ name: 'bench' }));
  await call(service.url, 'PUT', '/v1/workspaces/bench/files/hundred.txt', service.key, HUNDRED_LINES);
  for (;;) {
    const r = await call(service.url, 'GET', '/v1/workspaces/bench/files?status=pending&limit=1', service.key);
    if ((JSON.parse(r.body.toString()) as { files: unknown[] }).files.length === 0) return service;
    await new Promise((res) => setTimeout(res, 200));
  }
}

async function measure(label: string, service: BenchService) {
  const postgres = await postgresPids(service.dataDir);
  const before = await cpuOf([service.child.pid!]);
  const pgBefore = await cpuOf(postgres);
  const result = await autocannon({
    url: `${service.url}/v1/workspaces/bench/cat?path=/hundred.txt`,
    headers: { authorization: `Bearer ${service.key}` },
    connections,
    duration,
  });
  const per1k = (seconds: number): number => +((seconds / result.requests.total) * 1000).toFixed(3);
  return {
    label,
    rps: Math.round(result.requests.average),
    p50ms: result.latency.p50,
    p99ms: result.latency.p99,
    serviceCpuPer1kReq: per1k(await cpuSince([service.child.pid!], before)),
    postgresCpuPer1kReq: per1k(await cpuSince(await postgresPids(service.dataDir), pgBefore)),
    non2xx: result.non2xx + result.errors,
  };
}

const off = await prepared('off');
const on = await prepared('on').catch(async (error: unknown) => {
  await off.stop();
  throw error;
});
try {
  const byRound: Array<{ off: Awaited<ReturnType<typeof measure>>; on: Awaited<ReturnType<typeof measure>>; ratio: number }> = [];
  for (let round = 0; round < rounds; round++) {
    const first = round % 2 === 0 ? await measure('off', off) : await measure('on', on);
    const second = round % 2 === 0 ? await measure('on', on) : await measure('off', off);
    const [a, b] = first.label === 'off' ? [first, second] : [second, first];
    byRound.push({ off: a, on: b, ratio: +(b.rps / a.rps).toFixed(3) });
  }
  const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)];
  const cpu = (m: Awaited<ReturnType<typeof measure>>): number => m.serviceCpuPer1kReq + m.postgresCpuPer1kReq;
  const summary = {
    medianOffRps: median(byRound.map((r) => r.off.rps)),
    medianOnRps: median(byRound.map((r) => r.on.rps)),
    medianOnOverOff: median(byRound.map((r) => r.ratio)),
    // CPU ms per read that the shared limits add (service and PostgreSQL together).
    medianAddedCpuMsPerRead: +median(byRound.map((r) => cpu(r.on) - cpu(r.off))).toFixed(3),
  };
  process.stdout.write(JSON.stringify({ duration, connections, rounds, summary, byRound }, null, 2) + '\n');
} finally {
  await Promise.all([off.stop(), on.stop()]);
}
