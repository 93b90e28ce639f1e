/**
 * The read tools over HTTP against nginx serving the same bytes, on both HTTP layers, with and
 * without pipelining, in one run:
 *
 *   node --import tsx bench/read-http.ts <corpus-dir> [files=20000] [seconds=8] [connections=256] [rounds=3]
 *
 * The service gets the first `files` files of the corpus in one workspace. Each scenario is the
 * `agent-vfs bench` scenario of that name (cli/bench.ts: `cat` of 100 lines, `ls`, `find`,
 * `grep-selective`), run through that command's code with a scoped token; nginx (Debian's, two
 * workers, on a private config) serves each scenario's answer as a static file. Every round
 * measures, at pipelining 1 and then 10: nginx, then the service restarted on the same data
 * directory with each layer (VFS_HTTP=node, the default, and VFS_HTTP=native). Prints one JSON
 * document: each round's requests/s and the ratios to nginx, and their medians.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import autocannon from 'autocannon';
import { bench, failedScenarios, type ScenarioName, scenarioInputs, scenarioRequests } from '../cli/bench.js';
import { ApiClient } from '../cli/client.js';
import { progressBars } from '../cli/progress.js';
import { call, type BenchService, startBenchService, uploadAll, waitReady, walk } from './lib.js';

const [corpus, filesArg, secondsArg, connectionsArg, roundsArg] = process.argv.slice(2);
if (corpus === undefined) {
  process.stderr.write('usage: node --import tsx bench/read-http.ts <corpus-dir> [files=20000] [seconds=8] [connections=256] [rounds=3]\n');
  process.exit(2);
}
const fileCount = Number(filesArg ?? 20_000);
const duration = Number(secondsArg ?? 8);
const connections = Number(connectionsArg ?? 256);
const rounds = Number(roundsArg ?? 3);
const SCENARIOS: ScenarioName[] = ['cat', 'ls', 'find', 'grep-selective'];
const LAYERS = ['node', 'native'] as const;
const PIPELINING = [1, 10];
const NGINX_PORT = 18999;

const dataDir = await mkdtemp(join(tmpdir(), 'vfs-read-http-'));
const nginxDir = await mkdtemp(join(tmpdir(), 'vfs-nginx-'));
let service: BenchService | null = null;

/** Starts the service on the run's data directory with one HTTP layer. */
function startLayer(layer: (typeof LAYERS)[number]): Promise<BenchService> {
  return startBenchService({ DATA_DIR: dataDir, VFS_HTTP: layer });
}

/** What one scenario got from the service at one pipelining depth. */
async function measure(s: BenchService, scenario: ScenarioName, pipelining: number): Promise<number> {
  const client = new ApiClient({ baseUrl: s.url, key: s.key });
  try {
    const report = await bench(client, { json: true, line: () => {}, raw: async () => {} }, s.key, {
      workspace: 'bench',
      scenarios: [scenario],
      connections,
      pipelining,
      durationSeconds: duration,
      bars: progressBars(process.stderr, false),
      progress: false,
      note: (text) => process.stderr.write(`${text}\n`),
    });
    const [r] = report.scenarios;
    if (failedScenarios(report).length > 0)
      process.stderr.write(`${scenario} p${pipelining}: ${JSON.stringify(r.statuses)}, ${r.errors} errors, ${r.timeouts} timeouts\n`);
    return r.requestsPerSecond;
  } finally {
    client.close();
  }
}

/** nginx's requests/s serving one scenario's answer as a static file. */
async function measureNginx(scenario: ScenarioName, pipelining: number): Promise<number> {
  const result = await autocannon({ url: `http://127.0.0.1:${NGINX_PORT}/${scenario}.txt`, connections, pipelining, duration });
  if (result.non2xx + result.errors + result.timeouts > 0) process.stderr.write(`nginx ${scenario}: ${result.non2xx} non-2xx, ${result.errors} errors\n`);
  return Math.round(result.requests.average);
}

let nginx: ReturnType<typeof spawn> | null = null;
try {
  // The corpus: its first files by path, in one workspace.
  service = await startLayer('node');
  await call(service.url, 'POST', '/v1/workspaces', service.key, JSON.stringify({ name: 'bench' }));
  const files = (await walk(corpus)).slice(0, fileCount);
  process.stderr.write(`uploading ${files.length} files\n`);
  await uploadAll(service, 'bench', files, 48);
  await waitReady(service, 'bench', 3_600_000);

  // nginx serves each scenario's answer as the service gives it (to the management key, which
  // sees what the benchmark's `*` token sees), for the scenario's request as bench makes it.
  const client = new ApiClient({ baseUrl: service.url, key: service.key });
  const inputs = await scenarioInputs(client, 'bench');
  client.close();
  for (const scenario of SCENARIOS) {
    const [first] = scenarioRequests(scenario, '/v1/workspaces/bench', inputs);
    const answer = await call(service.url, first.method ?? 'GET', first.path, service.key);
    await writeFile(join(nginxDir, `${scenario}.txt`), answer.body);
  }
  await service.stop();
  service = null;

  await writeFile(
    join(nginxDir, 'nginx.conf'),
    `worker_processes 2;
pid ${nginxDir}/nginx.pid;
error_log ${nginxDir}/error.log;
daemon off;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path ${nginxDir};
  keepalive_requests 1000000;
  server { listen 127.0.0.1:${NGINX_PORT}; location / { root ${nginxDir}; default_type text/plain; } }
}
`,
  );
  nginx = spawn('nginx', ['-c', join(nginxDir, 'nginx.conf'), '-p', nginxDir], { stdio: 'inherit' });
  await new Promise((r) => setTimeout(r, 500));

  type Row = { round: number; pipelining: number; scenario: ScenarioName; nginx: number } & Record<(typeof LAYERS)[number], number>;
  const rows: Row[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const pipelining of PIPELINING) {
      const byScenario = new Map<ScenarioName, Row>();
      for (const scenario of SCENARIOS)
        byScenario.set(scenario, { round, pipelining, scenario, nginx: await measureNginx(scenario, pipelining), node: 0, native: 0 });
      for (const layer of LAYERS) {
        service = await startLayer(layer);
        for (const scenario of SCENARIOS) byScenario.get(scenario)![layer] = await measure(service, scenario, pipelining);
        await service.stop();
        service = null;
      }
      for (const row of byScenario.values()) {
        rows.push(row);
        process.stderr.write(`${JSON.stringify(row)}\n`);
      }
    }
  }
  const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  const summary = PIPELINING.flatMap((pipelining) =>
    SCENARIOS.map((scenario) => {
      const mine = rows.filter((r) => r.pipelining === pipelining && r.scenario === scenario);
      const ratio = (layer: (typeof LAYERS)[number]) => median(mine.map((r) => +(r[layer] / r.nginx).toFixed(2)));
      return {
        pipelining,
        scenario,
        nginx: median(mine.map((r) => r.nginx)),
        node: median(mine.map((r) => r.node)),
        native: median(mine.map((r) => r.native)),
        nodeVsNginx: ratio('node'),
        nativeVsNginx: ratio('native'),
      };
    }),
  );
  const machine = { cpus: execFileSync('nproc').toString().trim(), node: process.versions.node };
  process.stdout.write(`${JSON.stringify({ files: fileCount, duration, connections, rounds, machine, summary, rows }, null, 2)}\n`);
} finally {
  nginx?.kill('SIGTERM');
  await service?.stop();
  await rm(dataDir, { recursive: true, force: true });
  await rm(nginxDir, { recursive: true, force: true });
}
