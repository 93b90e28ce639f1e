/**
 * Read-tool throughput under autocannon, against nginx serving the same text
 * over HTTP in the same run.
 *
 *   node --import tsx bench/read-http.ts [seconds=10] [connections=64] [pipelining=4] [rounds=1]
 *
 * The service gets one workspace with a 100-line file plus a few hundred
 * others; nginx (Debian package, started here on a private config) serves the
 * 100-line file as a static file. Each scenario reports requests/s, latency,
 * the server's CPU seconds per 1,000 requests (from /proc: nginx's master and
 * workers, or the service process), the embedded PostgreSQL's likewise (the
 * audit log's commits), and the ratio to nginx's requests/s.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { cpuOf, cpuSince, postgresPids } from './cpu.js';
import { call, startBenchService } from './lib.js';

const [secondsArg, connectionsArg, pipeliningArg, roundsArg] = process.argv.slice(2);
const duration = Number(secondsArg ?? 10);
const connections = Number(connectionsArg ?? 64);
const pipelining = Number(pipeliningArg ?? 4);
const rounds = Number(roundsArg ?? 1);

const HUNDRED_LINES = Array.from({ length: 100 }, (_, i) => `line ${i + 1}: the quick brown fox jumps over the lazy dog`).join('\n') + '\n';

async function run(label: string, url: string, headers: Record<string, string>, pids: number[], postgres: () => Promise<number[]>) {
  const before = await cpuOf(pids);
  const pgBefore = await cpuOf(await postgres());
  const result = await autocannon({ url, headers, connections, pipelining, duration });
  const cpu = await cpuSince(pids, before);
  const pg = await cpuSince(await postgres(), pgBefore);
  const non2xx = result.non2xx + result.errors;
  const rps = result.requests.average;
  const per1k = (seconds: number): number => +((seconds / result.requests.total) * 1000).toFixed(3);
  return {
    label,
    rps: Math.round(rps),
    p50ms: result.latency.p50,
    p99ms: result.latency.p99,
    serverCpuPer1kReq: per1k(cpu),
    serverCpuCores: +(cpu / duration).toFixed(2),
    postgresCpuPer1kReq: per1k(pg),
    non2xx,
  };
}

// nginx on a private config: two workers (Debian's `auto` on this machine), access log off.
const nginxDir = await mkdtemp(join(tmpdir(), 'vfs-nginx-'));
await writeFile(join(nginxDir, 'file.txt'), HUNDRED_LINES);
await writeFile(
  join(nginxDir, 'nginx.conf'),
  `worker_processes auto;
pid ${nginxDir}/nginx.pid;
error_log ${nginxDir}/error.log;
daemon off;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${nginxDir};
  server { listen 127.0.0.1:18999; location / { root ${nginxDir}; default_type text/plain; } }
}
`,
);
const nginx = spawn('nginx', ['-c', join(nginxDir, 'nginx.conf'), '-p', nginxDir], { stdio: 'inherit' });
await new Promise((r) => setTimeout(r, 500));
// The master and its workers (the workers' command lines do not name the config).
const nginxPids = async (): Promise<number[]> => {
  const { execFileSync } = await import('node:child_process');
  const workers = execFileSync('pgrep', ['-P', String(nginx.pid)])
    .toString()
    .trim()
    .split('\n')
    .map(Number);
  return [nginx.pid!, ...workers];
};

const service = await startBenchService({ VFS_READ_THREADS: '2' });
try {
  const auth = { authorization: `Bearer ${service.key}` };
  await call(service.url, 'POST', '/v1/workspaces', service.key, JSON.stringify({ name: 'bench' }));
  await call(service.url, 'PUT', '/v1/workspaces/bench/files/docs/hundred.txt', service.key, HUNDRED_LINES);
  for (let i = 0; i < 300; i++)
    await call(service.url, 'PUT', `/v1/workspaces/bench/files/src/dir${i % 10}/file${i}.ts`, service.key, `export const v${i} = ${i};\n`);
  for (;;) {
    const r = await call(service.url, 'GET', '/v1/workspaces/bench/files?status=pending&limit=1', service.key);
    if ((JSON.parse(r.body.toString()) as { files: unknown[] }).files.length === 0) break;
    await new Promise((res) => setTimeout(res, 200));
  }
  const servicePid = service.child.pid!;
  const postgres = () => postgresPids(service.dataDir);
  const none = async (): Promise<number[]> => [];
  const scenarios: [string, string, Record<string, string>, number[], () => Promise<number[]>][] = [
    ['nginx static file', 'http://127.0.0.1:18999/file.txt', {}, await nginxPids(), none],
    ['cat 100 lines', `${service.url}/v1/workspaces/bench/cat?path=/docs/hundred.txt`, auth, [servicePid], postgres],
    ['ls /src/dir3', `${service.url}/v1/workspaces/bench/ls?path=/src/dir3`, auth, [servicePid], postgres],
    ['find **/file1*.ts', `${service.url}/v1/workspaces/bench/find?pattern=${encodeURIComponent('**/file1*.ts')}`, auth, [servicePid], postgres],
  ];
  // Each round measures nginx and then the tools, so every ratio compares runs minutes apart at
  // most; on a shared machine the median ratio over rounds is the figure to quote.
  const byRound: (Awaited<ReturnType<typeof run>> & { vsNginx: number })[][] = [];
  for (let round = 0; round < rounds; round++) {
    const results: Awaited<ReturnType<typeof run>>[] = [];
    for (const [label, url, headers, pids, pg] of scenarios) results.push(await run(label, url, headers, pids, pg));
    byRound.push(results.map((r) => ({ ...r, vsNginx: +(r.rps / results[0].rps).toFixed(2) })));
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const summary = scenarios.map(([label], i) => ({
    label,
    medianVsNginx: median(byRound.map((results) => results[i].vsNginx)),
    medianRps: median(byRound.map((results) => results[i].rps)),
  }));
  process.stdout.write(JSON.stringify({ duration, connections, pipelining, rounds, summary, byRound }, null, 2) + '\n');
} finally {
  nginx.kill('SIGTERM');
  await service.stop();
  await rm(nginxDir, { recursive: true, force: true });
}
