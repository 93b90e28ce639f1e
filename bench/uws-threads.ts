/**
 * What more HTTP threads, or another HTTP layer, would buy: a server answering every request
 * with the 100-line text of bench/read-http.ts after `busy` µs of CPU and a batched wait of
 * `wait` ms (standing in for the tool and the audit commit), under the same autocannon load as
 * bench/read-http.ts (256 connections). Per round it prints requests/s and the server's CPU per
 * answer (all its threads), which tells the layers apart even where autocannon caps the rate.
 *
 *   node --import tsx bench/uws-threads.ts [busy-us=40] [seconds=6] [rounds=2] [layer=native] [wait-ms=1]
 *
 * Layers, each on one thread and (but `adapter`) on two:
 * - `native`: a uWebSockets.js app per thread. The threads share the port through SO_REUSEPORT,
 *   which this uWS build sets when it binds. Linux shares only a port named explicitly: a
 *   second bind to the port a `listen(0)` got fails (the server asks the kernel for a free port
 *   through a throwaway socket first).
 * - `node`: Node's own server (`writeHead`, `end`) per thread. Further threads share the first
 *   one's listening socket: each listens on its descriptor (`listen({ fd })`), which works on
 *   Node.js 20, where `reusePort` (22.12) does not exist; the kernel hands each connection to
 *   one of the threads accepting.
 * - `io`: threads that only parse and write (node:http, on one socket as `node`), handing each
 *   request to the main thread, which does every request's work: one message each way a turn.
 * - `adapter`: the service's node:http layer (api/http/uws-node-http.ts) with a handler written
 *   against uWS's API as the service's are (`onAborted`, `forEach`, `cork`), on one thread.
 */
import { spawn } from 'node:child_process';
import { createServer, type Server, type ServerResponse } from 'node:http';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { isMainThread, MessageChannel, type MessagePort, Worker, workerData } from 'node:worker_threads';
import autocannon from 'autocannon';
import { loadUws } from '../api/http/uws.js';
import { nodeHttpUws } from '../api/http/uws-node-http.js';
import { cpuOf, cpuSince } from './cpu.js';
import { freePort } from './lib.js';

const BODY = Buffer.from(
  Array.from({ length: 100 }, (_, i) => `${String(i + 1).padStart(6)}\tline ${i + 1}: the quick brown fox jumps over the lazy dog\n`).join(''),
);

/** This file as a worker's script: it is TypeScript, so a one-line script registers tsx in the new thread, then imports it. */
const TSX = JSON.stringify(pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api')).href);
const THIS_FILE = `import(${TSX}).then((tsx) => { (tsx.register ?? tsx.default.register)(); return import(${JSON.stringify(import.meta.url)}); })`;

/**
 * The stand-in for a request's work, one per thread: `busyUs` µs of CPU, then `answer` with the
 * others that came within the wait (the command's `wait-ms`), as audit events wait for one commit.
 */
function standIn(busyUs: number): (answer: () => void) => void {
  const waitMs = Number(process.env.UWS_THREADS_WAIT_MS ?? 1);
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
    if (timer === null) timer = setTimeout(flush, waitMs);
  };
}

/** One server thread: a uWS app on `port` (`adapter`: our node:http implementation of uWS's API). */
function serve(port: number, busyUs: number, onListening: () => void, adapter = false): void {
  const uws = adapter ? nodeHttpUws : loadUws('native').uws;
  const work = standIn(busyUs);
  const app = uws.App().get('/*', (res, req) => {
    let aborted = false;
    res.onAborted(() => (aborted = true));
    req.getQuery();
    // As the service reads a request's head (api/http/context.ts).
    req.forEach(() => {});
    work(() => {
      if (!aborted) res.cork(() => res.writeStatus('200 OK').writeHeader('content-type', 'text/plain').end(BODY));
    });
  });
  const listening = (socket: unknown): void => {
    if (socket === false) throw new Error(`thread could not listen on ${port}`);
    onListening();
  };
  // The adapter takes the options argument the service passes (api/server.ts); the typings lack it.
  if (adapter)
    (app.listen as unknown as (host: string, port: number, options: number, cb: typeof listening) => void).call(app, '127.0.0.1', port, 0, listening);
  else app.listen('127.0.0.1', port, listening);
}

/** One node:http server thread, on `port` or on the listening descriptor `fd`; calls back with its descriptor. */
function serveNode(on: { port: number } | { fd: number }, busyUs: number, onListening: (fd: number) => void): void {
  const work = standIn(busyUs);
  const server = createServer((req, res) => {
    void req.headers.authorization;
    work(() => res.writeHead(200, { 'content-type': 'text/plain', 'content-length': BODY.length }).end(BODY));
  });
  listenOn(server, on, onListening);
}

/** Listens on `port` or on the listening descriptor `fd`; calls back with the socket's descriptor. */
function listenOn(server: Server, on: { port: number } | { fd: number }, onListening: (fd: number) => void): void {
  server.listen('fd' in on ? { fd: on.fd } : { port: on.port, host: '127.0.0.1' }, () =>
    // The descriptor of the listening socket: not in Node's public API, read from its handle.
    onListening((server as unknown as { _handle: { fd: number } })._handle.fd),
  );
}

/**
 * One I/O thread of the `io` layer: node:http on `port` or on the descriptor `fd`, the requests of
 * a turn handed to the main thread through `channel` in one message, each answer written as it
 * comes back (in messages of a turn's answers).
 */
function serveIo(on: { port: number } | { fd: number }, channel: MessagePort, onListening: (fd: number) => void): void {
  const waiting = new Map<number, ServerResponse>();
  let next = 0;
  const batch: Array<{ id: number; url: string; auth: string }> = [];
  channel.on('message', (answers: Array<{ id: number; body: Uint8Array }>) => {
    for (const { id, body } of answers) {
      const res = waiting.get(id);
      waiting.delete(id);
      res?.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length }).end(body);
    }
  });
  const server = createServer((req, res) => {
    const id = next++;
    waiting.set(id, res);
    if (batch.length === 0) setImmediate(() => channel.postMessage(batch.splice(0)));
    batch.push({ id, url: req.url ?? '', auth: req.headers.authorization ?? '' });
  });
  listenOn(server, on, onListening);
}

/** The `io` layer's main thread: the stand-in's work for each request an I/O thread hands over. */
function workFor(channel: MessagePort, busyUs: number): void {
  const work = standIn(busyUs);
  const answers: Array<{ id: number; body: Uint8Array }> = [];
  channel.on('message', (requests: Array<{ id: number; url: string; auth: string }>) => {
    for (const { id } of requests)
      work(() => {
        if (answers.length === 0) setImmediate(() => channel.postMessage(answers.splice(0)));
        answers.push({ id, body: Buffer.from(BODY) });
      });
  });
}

if (!isMainThread) {
  const { port, fd, busyUs, channel } = workerData as { port: number; fd: number | null; busyUs: number; channel?: MessagePort };
  if (channel !== undefined) serveIo(fd === null ? { port } : { fd }, channel, (own) => channel.postMessage({ fd: own }));
  else if (fd === null) serve(port, busyUs, () => {});
  else serveNode({ fd }, busyUs, () => {});
} else if (process.env.UWS_THREADS_SERVER !== undefined) {
  // The server process: thread 1 here, the others in workers, all on one port.
  const [port, busyUs, threads] = process.env.UWS_THREADS_SERVER.split(',').map(Number);
  const layer = process.env.UWS_THREADS_LAYER ?? 'native';
  const more = (fd: number | null): void => {
    setImmediate(() => {
      for (let i = 1; i < threads; i++) new Worker(THIS_FILE, { eval: true, workerData: { port, fd, busyUs } });
      setTimeout(() => process.stdout.write('ready\n'), 300);
    });
  };
  if (layer === 'io') {
    // Every thread listening is an I/O thread; this one does the work of all of them.
    const start = (fd: number | null): Promise<number> => {
      const { port1, port2 } = new MessageChannel();
      new Worker(THIS_FILE, { eval: true, workerData: { port, fd, busyUs, channel: port2 }, transferList: [port2] });
      return new Promise((resolve) => {
        port1.once('message', (m: { fd: number }) => {
          workFor(port1, busyUs);
          resolve(m.fd);
        });
      });
    };
    const fd = await start(null);
    for (let i = 1; i < threads; i++) await start(fd);
    setTimeout(() => process.stdout.write('ready\n'), 300);
  } else if (layer === 'node') serveNode({ port }, busyUs, more);
  else serve(port, busyUs, () => more(null));
} else {
  const [busyArg, secondsArg, roundsArg, layerArg, waitArg] = process.argv.slice(2);
  const waitMs = Number(waitArg ?? 1);
  const busyUs = Number(busyArg ?? 40);
  const duration = Number(secondsArg ?? 6);
  const rounds = Number(roundsArg ?? 2);
  const layer = layerArg ?? 'native';
  if (!['native', 'node', 'io', 'adapter'].includes(layer)) throw new Error(`layer must be native, node, io or adapter, not ${layer}`);
  const rows = [];
  for (let round = 0; round < rounds; round++) {
    // The adapter is measured on one thread, beside node:http's own one-thread figure.
    for (const threads of layer === 'adapter' ? [1] : [1, 2]) {
      const port = await freePort();
      const child = spawn(process.execPath, [...process.execArgv, new URL(import.meta.url).pathname], {
        env: { ...process.env, UWS_THREADS_SERVER: `${port},${busyUs},${threads}`, UWS_THREADS_LAYER: layer, UWS_THREADS_WAIT_MS: String(waitMs) },
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      await new Promise<void>((resolve) => child.stdout!.once('data', () => resolve()));
      const cpuBefore = await cpuOf([child.pid!]);
      const result = await autocannon({
        url: `http://127.0.0.1:${port}/v1/x?path=/a`,
        headers: { authorization: 'Bearer x' },
        connections: 256,
        pipelining: 1,
        duration,
      });
      // The server's CPU per answer: whether a layer is cheaper even where autocannon caps the rate.
      const cpuUsPerRequest = Math.round(((await cpuSince([child.pid!], cpuBefore)) * 1e6) / result.requests.total);
      child.kill();
      rows.push({
        round,
        threads,
        rps: Math.round(result.requests.average),
        cpuUsPerRequest,
        p50ms: result.latency.p50,
        non2xx: result.non2xx + result.errors,
      });
      process.stderr.write(
        `round ${round}: ${threads} thread(s) ${Math.round(result.requests.average)} requests/s, ${cpuUsPerRequest} µs of the server's CPU each\n`,
      );
    }
  }
  process.stdout.write(JSON.stringify({ layer, busyUs, waitMs, duration, rows }, null, 2) + '\n');
}
