/**
 * Shared pieces of the benchmarks: a service started as a child process on a
 * fresh data directory (embedded PostgreSQL), a keep-alive HTTP client, a
 * directory walker and an uploader.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { mkdtemp, readdir, readFile, rm, stat } from 'node:fs/promises';
import { Agent, request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { newCredential } from '../core/credentials.js';
import { buildService, ROOT, scriptCommand } from '../service/script-args.js';

/** A service under benchmark. */
export interface BenchService {
  url: string;
  key: string;
  dataDir: string;
  child: ChildProcess;
  /** Peak resident memory of the service process seen so far, in bytes (sampled). */
  peakRss(): number;
  stop(): Promise<void>;
}

let built = false;

/**
 * Starts the service with a bootstrap key, on `env.DATA_DIR` or else a new data directory that
 * `stop()` removes. The first call of a run builds the service, which `npm start` runs compiled.
 */
export async function startBenchService(env: Record<string, string> = {}): Promise<BenchService> {
  if (!built) buildService();
  built = true;
  const temporary = env.DATA_DIR === undefined;
  const dataDir = env.DATA_DIR ?? (await mkdtemp(join(tmpdir(), 'vfs-bench-')));
  const key = newCredential('management_key');
  // BENCH_NODE_ARGS adds flags to the service's node (e.g. --cpu-prof) for profiling a run.
  const extra = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');
  const start = scriptCommand('start');
  const child = spawn(process.execPath, [...extra, ...start.args], {
    cwd: ROOT,
    env: { ...process.env, ...start.env, PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, VFS_BOOTSTRAP_KEY: key, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m !== null) resolve(m[1]);
    });
    child.on('exit', (code) => reject(new Error(`service exited with ${code}`)));
  }).catch(async (error: unknown) => {
    // A service that never listened would leave its new data directory behind.
    if (temporary) await rm(dataDir, { recursive: true, force: true });
    throw error;
  });
  // Benchmarks measure speed, not the plan's rate limits: lift them for the default account.
  const admin = (args: string[]) =>
    new Promise<void>((resolve, reject) => {
      const command = scriptCommand('admin');
      const p = spawn(process.execPath, [...command.args, ...args], { cwd: ROOT, env: { ...process.env, ...command.env, DATA_DIR: dataDir }, stdio: 'ignore' });
      p.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`admin ${args[0]} exited with ${code}`))));
    });
  const high = ['--max-workspaces', '1000000', '--max-files', '10000000', '--max-storage-bytes', String(1e13), '--max-file-bytes', String(1e10)];
  await admin(['set-plan', 'bench', ...high, '--read-rate-per-credential', '1000000', '--read-rate-per-account', '1000000']);
  await admin(['set-limits', 'default', '--plan', 'bench']);
  let peak = 0;
  const sampler = setInterval(() => {
    void readFile(`/proc/${child.pid}/status`, 'utf8')
      .then((s) => {
        const kb = Number(/VmRSS:\s+(\d+)/.exec(s)?.[1] ?? 0);
        peak = Math.max(peak, kb * 1024);
      })
      .catch(() => {});
  }, 200);
  return {
    url,
    key,
    dataDir,
    child,
    peakRss: () => peak,
    stop: async () => {
      clearInterval(sampler);
      const exited = new Promise((r) => child.on('exit', r));
      child.kill('SIGTERM');
      await exited;
      if (temporary) await rm(dataDir, { recursive: true, force: true });
    },
  };
}

const MAX_SOCKETS = 64;
const agent = new Agent({ keepAlive: true, maxSockets: MAX_SOCKETS });

/**
 * One HTTP call with a keep-alive agent; resolves with status and body. A
 * request sent on a kept-alive socket that the server closed meanwhile (idle
 * for 10 s with uWS, 5 s with node:http; a benchmark that runs rg synchronously,
 * or a machine too busy to run the client's timers, can leave a socket that long
 * without reading the close) is sent again, as Node's documentation advises
 * (`request.reusedSocket`).
 */
export async function call(
  base: string,
  method: string,
  path: string,
  key: string,
  body?: Buffer | string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: Buffer }> {
  // Several sockets can have gone stale together (a server busy for seconds closes them at once):
  // each retry may take another from the pool, until one is fresh.
  for (let attempt = 1; ; attempt++) {
    try {
      return await callOnce(base, method, path, key, body, headers);
    } catch (error) {
      if ((error as { reused?: boolean }).reused !== true || attempt === MAX_SOCKETS) throw error;
    }
  }
}

function callOnce(
  base: string,
  method: string,
  path: string,
  key: string,
  body: Buffer | string | undefined,
  headers: Record<string, string>,
): Promise<{ status: number; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const req = request(
      base + path,
      {
        method,
        agent,
        headers: { authorization: `Bearer ${key}`, ...headers, ...(body === undefined ? {} : { 'content-length': String(Buffer.byteLength(body)) }) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('error', (error: NodeJS.ErrnoException) => {
      reject(req.reusedSocket && error.code === 'ECONNRESET' ? Object.assign(error, { reused: true }) : error);
    });
    req.end(body);
  });
}

/** The middle value of `xs` (the upper one of the two middles for an even count). */
export function median(xs: readonly number[]): number {
  return [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
}

/** Every regular file under `dir` (symbolic links skipped), as [absolute path, path relative to dir]. */
export async function walk(dir: string): Promise<Array<[string, string]>> {
  const out: Array<[string, string]> = [];
  const visit = async (d: string): Promise<void> => {
    for (const entry of await readdir(d, { withFileTypes: true })) {
      const full = join(d, entry.name);
      if (entry.isDirectory()) await visit(full);
      else if (entry.isFile()) out.push([full, relative(dir, full)]);
    }
  };
  await visit(dir);
  return out.sort((a, b) => (a[1] < b[1] ? -1 : 1));
}

/** Uploads files with `concurrency` requests in flight; returns bytes sent and the non-202 answers. */
export async function uploadAll(
  service: { url: string; key: string },
  workspace: string,
  files: Array<[string, string]>,
  concurrency: number,
): Promise<{ bytes: number; refused: Array<[string, number, string]> }> {
  let next = 0;
  let bytes = 0;
  const refused: Array<[string, number, string]> = [];
  const worker = async (): Promise<void> => {
    while (next < files.length) {
      const [full, rel] = files[next++];
      // Read at once (one open, read and close, no hops through the thread pool): the client
      // shares the machine's cores with the service it measures, so it spends as little as it can.
      const body = readFileSync(full);
      bytes += body.length;
      const path = rel.split('/').map(encodeURIComponent).join('/');
      let r = await call(service.url, 'PUT', `/v1/workspaces/${workspace}/files/${path}`, service.key, body);
      // The credential's rate limit: wait as a client would, then send it again.
      for (let tries = 0; r.status === 429 && tries < 30; tries++) {
        await new Promise((res) => setTimeout(res, 1000));
        r = await call(service.url, 'PUT', `/v1/workspaces/${workspace}/files/${path}`, service.key, body);
      }
      if (r.status !== 202) refused.push([rel, r.status, r.body.toString()]);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { bytes, refused };
}

/** Uploads every file of `corpus` into a new workspace `bench` and waits until each is ready or in error. */
export async function uploadCorpus(service: { url: string; key: string }, corpus: string): Promise<void> {
  await call(service.url, 'POST', '/v1/workspaces', service.key, JSON.stringify({ name: 'bench' }));
  await uploadAll(service, 'bench', await walk(corpus), 48);
  await waitReady(service, 'bench', 3_600_000);
}

/** Waits until no file of the workspace is pending; returns the number of files in `error`. */
export async function waitReady(service: { url: string; key: string }, workspace: string, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await call(service.url, 'GET', `/v1/workspaces/${workspace}/files?status=pending&limit=1`, service.key);
    if ((JSON.parse(r.body.toString()) as { files: unknown[] }).files.length === 0) break;
    if (Date.now() > deadline) throw new Error('files still pending at the deadline');
    await new Promise((res) => setTimeout(res, 250));
  }
  let errors = 0;
  let cursor: string | null = null;
  do {
    const r = await call(
      service.url,
      'GET',
      `/v1/workspaces/${workspace}/files?status=error&limit=1000${cursor === null ? '' : `&cursor=${cursor}`}`,
      service.key,
    );
    const page = JSON.parse(r.body.toString()) as { files: Array<{ path: string; errorDetail: string | null }>; nextCursor: string | null };
    // The first few, so that a run's errors can be told apart from the files' own faults.
    for (const file of page.files.slice(0, Math.max(0, 5 - errors))) process.stderr.write(`error: ${file.path}: ${file.errorDetail}\n`);
    errors += page.files.length;
    cursor = page.nextCursor;
  } while (cursor !== null);
  return errors;
}

/** Total size of the files under a directory. */
export async function duBytes(dir: string): Promise<number> {
  let total = 0;
  for (const entry of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (entry.isFile()) total += (await stat(join(entry.parentPath, entry.name))).size;
  }
  return total;
}

/** A process's resident and anonymous memory in MB, from /proc (zeros once it has ended). */
export async function memoryMB(pid: number): Promise<{ rss: number; anon: number }> {
  const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8').catch(() => '');
  const mb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(rollup)?.[1] ?? 0) / 1024;
  return { rss: mb('Rss'), anon: mb('Anonymous') };
}

/** A TCP port free on 127.0.0.1 now (for a server the benchmark starts, such as a metrics port). */
export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

/** A per-thread metric's values by kind of thread (`http`, `read`, `ingest`), from the service's Prometheus text. */
export function threadSeries(metrics: string, name: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of metrics.matchAll(new RegExp(`^${name}\\{thread="([^"]+)"\\} (\\S+)$`, 'gm'))) out[m[1]] = Number(m[2]);
  return out;
}
