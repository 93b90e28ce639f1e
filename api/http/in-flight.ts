/**
 * Requests in flight, for a graceful stop. Every handler registered through
 * `wrap` is counted from its start until its response ends (`end`,
 * `endWithoutBody`, `close`) or its client goes away. `drain` refuses new requests from then on (503, connection closed:
 * they can only come over connections already open, the listen socket being
 * closed first) and waits until the count reaches zero.
 *
 * The count hooks the methods of each request's own HttpResponse object (uWS
 * makes one per request), so the routes need to know nothing of it.
 */
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { VfsError } from '../../core/errors.js';
import { requestIdOf, statusLine } from './context.js';

type Handler = (res: HttpResponse, req: HttpRequest) => void | Promise<void>;

const ROUTE_METHODS = new Set(['get', 'post', 'put', 'del', 'patch', 'options', 'head', 'connect', 'trace', 'any']);
const READ_TOOL = /\/v1\/workspaces\/[^/]+\/(?:ls|find|cat|grep)$/;

/**
 * Told of every response that ended: its method, route pattern, status (`aborted` when the
 * client went away first), milliseconds since the request came, and request id.
 */
export type RequestObserver = (method: string, route: string, status: string, ms: number, requestId: string) => void;

/** Counts the requests being served and waits for them at stop. */
export class InFlight {
  private open = 0;
  private closing = false;
  private readonly idle: Array<() => void> = [];

  constructor(private readonly observe: RequestObserver | null = null) {}

  /** Requests being served now. */
  get count(): number {
    return this.open;
  }

  /** The app, with every handler registered through it from now on counted. */
  wrap(app: TemplatedApp): TemplatedApp {
    const proxy: TemplatedApp = new Proxy(app, {
      get: (target, prop, receiver) => {
        const value = Reflect.get(target, prop, receiver) as unknown;
        if (typeof value !== 'function') return value;
        if (typeof prop === 'string' && ROUTE_METHODS.has(prop)) {
          return (pattern: string, handler: Handler) => {
            (value as (p: string, h: Handler) => TemplatedApp).call(target, pattern, this.track(pattern, handler));
            return proxy;
          };
        }
        return (value as (...args: unknown[]) => unknown).bind(target);
      },
    });
    return proxy;
  }

  /**
   * Refuses new requests from now on and resolves once none is in flight, or
   * after `timeoutMs`; resolves to the number still in flight then.
   */
  async drain(timeoutMs: number): Promise<number> {
    this.closing = true;
    if (this.open === 0) return 0;
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([new Promise<void>((resolve) => this.idle.push(resolve)), new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
    return this.open;
  }

  private track(pattern: string, handler: Handler): Handler {
    return (res, req) => {
      if (this.closing) {
        refuse(res, req);
        return;
      }
      this.open++;
      let done = false;
      const method = this.observe === null ? '' : req.getMethod().toUpperCase();
      const started = this.observe === null ? 0 : performance.now();
      let status = '200'; // uWS's status when none is written
      const finish = (aborted = false): void => {
        if (done) return;
        done = true;
        this.observe?.(method, pattern, aborted ? 'aborted' : status, Math.round((performance.now() - started) * 100) / 100, requestIdOf(res) ?? '');
        if (--this.open === 0) for (const wake of this.idle.splice(0)) wake();
      };
      hook(res, finish, (line) => {
        status = line.slice(0, 3);
      });
      try {
        return handler(res, req);
      } catch (error) {
        finish();
        throw error;
      }
    };
  }
}

/**
 * Makes the response call `finish` once it has ended (`end`, `endWithoutBody`,
 * `close`; the routes use no `tryEnd`) or its client has gone (the abort
 * handler every asynchronous route attaches, as uWS requires), and tell
 * `onStatus` its status line.
 */
function hook(res: HttpResponse, finish: (aborted?: boolean) => void, onStatus: (line: string) => void): void {
  const r = res as unknown as Record<string, (...args: unknown[]) => unknown>;
  const { end, endWithoutBody, close, onAborted, writeStatus } = r;
  r.writeStatus = (line) => {
    onStatus(line as string);
    return writeStatus.call(res, line);
  };
  r.end = (...args) => {
    const result = end.apply(res, args);
    finish();
    return result;
  };
  r.endWithoutBody = (...args) => {
    const result = endWithoutBody.apply(res, args);
    finish();
    return result;
  };
  r.close = (...args) => {
    const result = close.apply(res, args);
    finish();
    return result;
  };
  r.onAborted = (handler) =>
    onAborted.call(res, () => {
      finish(true);
      (handler as () => void)();
    });
}

/** 503 for a request that arrives while the service stops, in the route's own format. */
function refuse(res: HttpResponse, req: HttpRequest): void {
  const url = req.getUrl();
  const error = new VfsError('STOPPING', {}, { 'retry-after': '1' });
  let type = 'application/json';
  let body = JSON.stringify({ error: error.message });
  if (url === '/readyz') body = '{"ok":false}';
  else if (url === '/healthz' || READ_TOOL.test(url)) {
    type = 'text/plain; charset=utf-8';
    body = error.message + '\n';
  }
  res.cork(() => {
    res.writeStatus(statusLine(error.status)).writeHeader('content-type', type);
    for (const [name, value] of Object.entries(error.headers)) res.writeHeader(name, value);
    res.end(body, true);
  });
}
