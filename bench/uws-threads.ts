/**
 * What a second HTTP thread would buy: a uWebSockets.js server answering every request with the
 * 100-line text of bench/read-http.ts after `busy` µs of CPU and a 1 ms batched wait (standing
 * in for the tool and the audit commit), on one thread and then on two that listen on the
 * same port, under the same autocannon load as bench/read-http.ts.
 *
 *   node --import tsx bench/uws-threads.ts [busy-us=40] [seconds=6] [rounds=2] [layer=native|node]
 *
 * The native threads share the port through SO_REUSEPORT, which this uWS build sets when it
 * binds. Linux shares only a port named explicitly: a second bind to the port a `listen(0)` got
 * fails (the server below asks the kernel for a free port through a throwaway socket first).
 * node:http threads share the first thread's listening socket itself: each further thread
 * listens on its descriptor (`listen({ fd })`), which works on Node.js 20, where `reusePort`
 * (22.12) does not exist; the kernel hands each connection to one of the threads accepting.
 */
import { spawn } from 'node:child_process';
import { createServer } from 'node:http';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { isMainThread, Worker, workerData } from 'node:worker_threads';
import autocannon from 'autocannon';
import { loadUws } from '../api/http/uws.js';
import { freePort } from './lib.js';

const BODY = Buffer.from(
  Array.from({ length: 100 }, (_, i) => `${String(i + 1).padStart(6)}\tline ${i + 1}: the quick brown fox jumps over the lazy dog\n`).join(''),
);

/**
 * The stand-in for a request's work, one per thread: `busyUs` µs of CPU, then `answer` with the
 * others of the same millisecond (as audit events wait for one commit).
 */
function standIn(busyUs: number): (answer: () => void) => void {
  const waiting: Array<() => void> = [];
  let timer: NodeJS.Timeout | null = null;
  const flush = (): void => {
    timer = null;
    for (const answer of waiting.splice(0)) answer();
  };
  return (answer) => {
    const until = process.hrtime.bigint() + BigInt(busyUs * 1000);
    while (process.hrtime.bigint() < until);
    waiting.push(answer);
    if (timer === null) timer = setTimeout(flush, 1);
  };
}

/** One server thread: a uWS app on `port`. */
function serve(port: number, busyUs: number, onListening: () => void): void {
  const { uws } = loadUws('native');
  const work = standIn(busyUs);
  uws
    .App()
    .get('/*', (res, req) => {
      let aborted = false;
      res.onAborted(() => (aborted = true));
      req.getQuery();
      req.getHeader('authorization');
      work(() => {
        if (!aborted) res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'text/plain').end(BODY));
      });
    })
    .listen('127.0.0.1', port, (socket) => {
      if (socket === false) throw new Error(`thread could not listen on ${port}`);
      onListening();
    });
}

/** One node:http server thread, on `port` or on the listening descriptor `fd`; calls back with its descriptor. */
function serveNode(on: { port: number } | { fd: number }, busyUs: number, onListening: (fd: number) => void): void {
  const work = standIn(busyUs);
  const server = createServer((req, res) => {
    void req.headers.authorization;
    work(() => res.writeHead(200, { 'content-type': 'text/plain', 'content-length': BODY.length }).end(BODY));
  });
  server.listen('fd' in on ? { fd: on.fd } : { port: on.port, host: '127.0.0.1' }, () =>
    // The descriptor of the listening socket: not in Node's public API, read from its handle.
    onListening((server as unknown as { _handle: { fd: number } })._handle.fd),
  );
}

if (!isMainThread) {
  const { port, fd, busyUs } = workerData as { port: number; fd: number | null; busyUs: number };
  if (fd === null) serve(port, busyUs, () => {});
  else serveNode({ fd }, busyUs, () => {});
} else if (process.env.UWS_THREADS_SERVER !== undefined) {
  // The server process: thread 1 here, the others in workers, all on one port.
  const [port, busyUs, threads] = process.env.UWS_THREADS_SERVER.split(',').map(Number);
  const layer = process.env.UWS_THREADS_LAYER ?? 'native';
  const more = (fd: number | null): void => {
    setImmediate(() => {
      // This file is TypeScript: a one-line script registers tsx in the new thread, then imports it.
      const tsx = JSON.stringify(pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api')).href);
      const code = `import(${tsx}).then((tsx) => { (tsx.register ?? tsx.default.register)(); return import(${JSON.stringify(import.meta.url)}); })`;
      for (let i = 1; i < threads; i++) new Worker(code, { eval: true, workerData: { port, fd, busyUs } });
      setTimeout(() => process.stdout.write('ready\n'), 300);
    });
  };
  if (layer === 'node') serveNode({ port }, busyUs, more);
  else serve(port, busyUs, () => more(null));
} else {
  const [busyArg, secondsArg, roundsArg, layerArg] = process.argv.slice(2);
  const busyUs = Number(busyArg ?? 40);
  const duration = Number(secondsArg ?? 6);
  const rounds = Number(roundsArg ?? 2);
  const layer = layerArg ?? 'native';
  if (layer !== 'native' && layer !== 'node') throw new Error(`layer must be native or node, not ${layer}`);
  const rows = [];
  for (let round = 0; round < rounds; round++) {
    for (const threads of [1, 2]) {
      const port = await freePort();
      const child = spawn(process.execPath, [...process.execArgv, new URL(import.meta.url).pathname], {
        env: { ...process.env, UWS_THREADS_SERVER: `${port},${busyUs},${threads}`, UWS_THREADS_LAYER: layer },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()));
      const result = await autocannon({
        url: `http://127.0.0.1:${port}/v1/x?path=/a`,
        headers: { authorization: 'Bearer x' },
        connections: 256,
        pipelining: 1,
        duration,
      });
      child.kill();
      rows.push({ round, threads, rps: Math.round(result.requests.average), p50ms: result.latency.p50, non2xx: result.non2xx + result.errors });
      process.stderr.write(`round ${round}: ${threads} thread(s) ${Math.round(result.requests.average)} requests/s\n`);
    }
  }
  process.stdout.write(JSON.stringify({ layer, busyUs, duration, rows }, null, 2) + '\n');
}
