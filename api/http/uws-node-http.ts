/**
 * The part of uWebSockets.js's API that the service uses, on `node:http`: the default HTTP
 * layer (every HTTP/1.x client is answered), and the one `VFS_HTTP=native` falls back to where no
 * native build loads (see uws.ts). trufflesuite's own `node:http` implementation cannot serve the
 * service: it throws "Not implemented" from `HttpRequest.forEach`, `HttpResponse.onWritable`,
 * `tryEnd` and the remote address.
 *
 * What is kept of uWS's behaviour:
 * - routes match by specificity, not by the order they were registered: segment by segment a
 *   static segment beats a `:parameter`, which beats `*`; a method's own route beats `any`. A
 *   HEAD request with no HEAD route takes the GET route (the handlers answer it without a body);
 * - `getUrl` is the raw path and `getQuery` the raw query without `?`; parameters are raw;
 *   `getMethod` is lower case; `forEach` gives every header line, lower-cased, repeats included;
 * - `onData` gets each body chunk as an ArrayBuffer, then an empty last one; `onAborted` runs
 *   when the client goes away before the response has ended; `write` returns false when more
 *   than HIGH_WATER bytes wait to go out, and `onWritable` handlers run once they have.
 * - header values are read as UTF-8 (Node's parser gives their bytes as Latin-1); a request of
 *   more than MAX_HEADERS header lines is refused (431), as uWS refuses it;
 * - closing the listening socket leaves open connections be: a request on one is answered
 *   (503 while the service stops), where Node's `close()` would also close the idle ones.
 * What is not: uWS's limits and quirks (see README, "Known limitations"). Node's HTTP parser
 * answers malformed requests itself (400), refuses bytes outside ASCII in the request line
 * (400, as RFC 9112 allows; uWS takes them as UTF-8), and takes HTTP/1.0 and pipelined requests
 * (answered in order; safe ones run side by side, an unsafe one alone: see `admit`) and heads of
 * up to MAX_HEAD_BYTES.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';

type Handler = (res: NodeHttpResponse, req: NodeHttpRequest) => void;

/** Header lines a request may carry (uWS's own limit). */
const MAX_HEADERS = 100;
/** Bytes of a response that may wait in the process before `write` says to hold back. */
const HIGH_WATER = 64 * 1024;
/** Bytes of a request line and headers (Node's default, 16 KiB, refused 40 KB grep patterns); the native builds get it too (uws.ts). */
export const MAX_HEAD_BYTES = 128 * 1024;

/** A header value as Node's parser gives it (one character per byte) read as UTF-8. */
function utf8(text: string): string {
  return /[\x80-\uffff]/.test(text) ? Buffer.from(text, 'latin1').toString('utf8') : text;
}

/** A segment's rank: a static segment beats a parameter, which beats a wildcard. */
const STATIC = 3;
const PARAMETER = 2;
const WILDCARD = 1;

interface Route {
  method: string;
  segments: string[];
  ranks: number[];
  handler: Handler;
}

class NodeHttpRequest {
  constructor(
    private readonly message: IncomingMessage,
    private readonly path: string,
    private readonly query: string,
    private readonly params: string[],
  ) {}

  getUrl(): string {
    return this.path;
  }

  getQuery(): string {
    return this.query;
  }

  getMethod(): string {
    return (this.message.method ?? '').toLowerCase();
  }

  getParameter(index: number): string {
    return this.params[index] ?? '';
  }

  forEach(cb: (name: string, value: string) => void): void {
    const raw = this.message.rawHeaders;
    for (let i = 0; i + 1 < raw.length; i += 2) cb(raw[i].toLowerCase(), utf8(raw[i + 1]));
  }
}

export class NodeHttpResponse {
  private readonly writable: Array<(offset: number) => boolean> = [];
  private written = 0;
  /** Bytes written that the socket has not yet handed to the kernel. */
  private unsent = 0;

  constructor(
    private readonly message: IncomingMessage,
    private readonly response: ServerResponse,
  ) {}

  cork(cb: () => void): this {
    this.response.cork();
    try {
      cb();
    } finally {
      this.response.uncork();
    }
    return this;
  }

  writeStatus(status: string): this {
    const space = status.indexOf(' ');
    this.response.statusCode = Number(space < 0 ? status : status.slice(0, space));
    if (space >= 0) this.response.statusMessage = status.slice(space + 1);
    return this;
  }

  writeHeader(name: string, value: string): this {
    this.response.appendHeader(name, value);
    return this;
  }

  /**
   * False once more than HIGH_WATER bytes wait in the process; `onWritable` handlers run when
   * they have gone out. Counted from each write's callback: on Node.js 22, `write` returned true
   * while 23 MB waited for a client that had stopped reading, and no 'drain' came. Node keeps
   * the chunk itself, not a copy, until it has gone out: then `written` runs (uWS copies what it
   * cannot send at once, and has no such callback).
   */
  write(chunk: string | Uint8Array, written?: () => void): boolean {
    const bytes = typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.byteLength;
    this.written += bytes;
    this.unsent += bytes;
    this.response.write(chunk, () => {
      written?.();
      this.unsent -= bytes;
      if (this.unsent <= HIGH_WATER && this.writable.length > 0) {
        for (const handler of this.writable.splice(0)) handler(this.written);
      }
    });
    return this.unsent <= HIGH_WATER;
  }

  onWritable(handler: (offset: number) => boolean): this {
    this.writable.push(handler);
    return this;
  }

  end(body: string | Uint8Array = '', closeConnection = false): this {
    if (closeConnection) this.response.setHeader('connection', 'close');
    // A whole answer says its length: Node sends none to an HTTP/1.0 client by itself, and
    // would then close a connection the client asked to keep.
    if (this.written === 0 && !this.response.headersSent && !this.response.hasHeader('content-length')) {
      this.response.setHeader('content-length', typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength);
    }
    this.response.end(body);
    return this;
  }

  endWithoutBody(reportedContentLength?: number, closeConnection = false): this {
    // The length a GET would have had, for a HEAD (Node sends no body for HEAD).
    if (this.message.method === 'HEAD' && reportedContentLength !== undefined && this.response.statusCode !== 204) {
      this.response.setHeader('content-length', reportedContentLength);
    }
    if (closeConnection) this.response.setHeader('connection', 'close');
    this.response.end();
    return this;
  }

  close(): this {
    this.response.socket?.destroy();
    return this;
  }

  onAborted(handler: () => void): this {
    this.response.on('close', () => {
      if (!this.response.writableFinished) handler();
    });
    return this;
  }

  onData(handler: (chunk: ArrayBuffer, isLast: boolean) => void): this {
    this.message.on('data', (chunk: Buffer) => handler(chunk.buffer.slice(chunk.byteOffset, chunk.byteOffset + chunk.byteLength) as ArrayBuffer, false));
    this.message.on('end', () => handler(new ArrayBuffer(0), true));
    return this;
  }

  pause(): void {
    this.message.pause();
  }

  resume(): void {
    this.message.resume();
  }

  getRemoteAddressAsText(): ArrayBuffer {
    const address = this.message.socket.remoteAddress ?? '';
    // An IPv4 client of a dual-stack socket, as uWS gives it.
    const bytes = new TextEncoder().encode(address.startsWith('::ffff:') ? address.slice(7) : address);
    return bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength) as ArrayBuffer;
  }
}

/** Methods RFC 9110 calls safe: pipelined requests of these alone may run side by side. */
const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS', 'TRACE']);

/** A connection's requests: how many run, whether one of them is unsafe, and those waiting in order. */
interface Turn {
  running: number;
  unsafe: boolean;
  waiting: Array<{ safe: boolean; run: () => void }>;
}

const turns = new WeakMap<object, Turn>();

/** Starts the waiting requests that may run now, in order. */
function next(turn: Turn): void {
  while (turn.waiting.length > 0) {
    const first = turn.waiting[0];
    if (turn.running > 0 && !(first.safe && !turn.unsafe)) return;
    turn.waiting.shift();
    first.run();
  }
}

class NodeHttpApp {
  private readonly routes: Route[] = [];

  get(pattern: string, handler: Handler): this {
    return this.add('get', pattern, handler);
  }
  head(pattern: string, handler: Handler): this {
    return this.add('head', pattern, handler);
  }
  post(pattern: string, handler: Handler): this {
    return this.add('post', pattern, handler);
  }
  put(pattern: string, handler: Handler): this {
    return this.add('put', pattern, handler);
  }
  del(pattern: string, handler: Handler): this {
    return this.add('delete', pattern, handler);
  }
  any(pattern: string, handler: Handler): this {
    return this.add('any', pattern, handler);
  }

  listen(host: string, port: number, _options: number, cb: (socket: Server | false) => void): void {
    const server = createServer({ maxHeaderSize: MAX_HEAD_BYTES }, (message, response) => this.admit(message, response));
    server.once('error', () => cb(false));
    // exclusive: the port is not shared with another process (uWS's LIBUS_LISTEN_EXCLUSIVE_PORT).
    server.listen({ host, port, exclusive: true }, () => cb(server));
  }

  private add(method: string, pattern: string, handler: Handler): this {
    const segments = pattern.split('/').slice(1);
    const ranks = segments.map((s) => (s === '*' ? WILDCARD : s.startsWith(':') ? PARAMETER : STATIC));
    this.routes.push({ method, segments, ranks, handler });
    return this;
  }

  /**
   * Runs a request once its connection allows it. Node hands over pipelined requests as soon as
   * they are parsed (and sends the answers in order); RFC 9112 9.3.2 lets a server work on them
   * at once only when they are all safe. So a request runs at once when nothing runs on its
   * connection, or when it and everything running are safe; otherwise it waits its turn.
   */
  private admit(message: IncomingMessage, response: ServerResponse): void {
    const socket = message.socket;
    const safe = SAFE_METHODS.has(message.method ?? '');
    let turn = turns.get(socket);
    if (turn === undefined) {
      turn = { running: 0, unsafe: false, waiting: [] };
      turns.set(socket, turn);
    }
    const state = turn;
    const run = (): void => {
      state.running++;
      state.unsafe ||= !safe;
      let done = false;
      const finish = (): void => {
        if (done) return;
        done = true;
        state.running--;
        if (state.running === 0) state.unsafe = false;
        next(state);
      };
      response.once('finish', finish);
      response.once('close', finish);
      this.dispatch(message, response);
    };
    if (state.waiting.length === 0 && (state.running === 0 || (safe && !state.unsafe))) run();
    else state.waiting.push({ safe, run });
  }

  private dispatch(message: IncomingMessage, response: ServerResponse): void {
    if (message.rawHeaders.length > 2 * MAX_HEADERS) {
      response.writeHead(431, { connection: 'close' }).end();
      return;
    }
    const target = message.url ?? '/';
    const q = target.indexOf('?');
    const path = q < 0 ? target : target.slice(0, q);
    const query = q < 0 ? '' : target.slice(q + 1);
    const method = (message.method ?? '').toLowerCase();
    const parts = path.split('/').slice(1);
    let best: Route | null = null;
    let bestParams: string[] = [];
    for (const route of this.routes) {
      const ownMethod = route.method === method || (method === 'head' && route.method === 'get');
      if (!ownMethod && route.method !== 'any') continue;
      const params = matchRoute(route, parts);
      if (params === null) continue;
      if (best === null || beats(route, best, method)) {
        best = route;
        bestParams = params;
      }
    }
    const res = new NodeHttpResponse(message, response);
    if (best === null) {
      res.writeStatus('404 Not Found').end();
      return;
    }
    best.handler(res, new NodeHttpRequest(message, path, query, bestParams));
  }
}

/** The raw parameters of `parts` under `route`, or null when it does not match. */
function matchRoute(route: Route, parts: string[]): string[] | null {
  const params: string[] = [];
  for (let i = 0; i < route.segments.length; i++) {
    if (i >= parts.length) return null;
    if (route.ranks[i] === WILDCARD) return params;
    if (route.ranks[i] === PARAMETER) {
      if (parts[i] === '') return null;
      params.push(parts[i]);
    } else if (parts[i] !== route.segments[i]) return null;
  }
  return parts.length === route.segments.length ? params : null;
}

/** Whether `a` is a better match than `b` for a request of `method`. */
function beats(a: Route, b: Route, method: string): boolean {
  for (let i = 0; i < Math.max(a.ranks.length, b.ranks.length); i++) {
    const x = a.ranks[i] ?? 0;
    const y = b.ranks[i] ?? 0;
    if (x !== y) return x > y;
  }
  // The same shape: the method's own route, then (for HEAD) a HEAD route over a GET one.
  const rank = (r: Route): number => (r.method === method ? 2 : r.method === 'any' ? 0 : 1);
  return rank(a) > rank(b);
}

/** The module `api/http/uws.ts` loads by default, and for `native` where no native build loads. */
export const nodeHttpUws = {
  App: (): TemplatedApp => new NodeHttpApp() as unknown as TemplatedApp,
  us_socket_local_port: (socket: us_listen_socket): number => {
    const address = (socket as unknown as Server).address();
    return typeof address === 'object' && address !== null ? address.port : 0;
  },
  us_listen_socket_close: (socket: us_listen_socket): void => {
    const server = socket as unknown as Server;
    server.closeIdleConnections = () => {}; // see the module comment
    server.close();
  },
};
