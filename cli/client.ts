/**
 * The HTTP client of the command line: the bearer key, the retries the
 * service asks for (429 and 503 after `Retry-After`, a bounded number of
 * times), and errors that name their cause.
 *
 * It speaks HTTP through node:http with a keep-alive agent rather than the
 * global fetch: a push sends one request per file, and fetch spent about
 * 0.8 ms more CPU per upload (2.1-3.2 s against 0.9-1.2 s for the 2,639 files
 * of linux-source-6.1/sound), CPU the service needs for the same uploads when
 * both run on one machine; that made `push` 20-50% slower than the
 * benchmark's uploader. See bench/push.ts.
 */
import { createReadStream } from 'node:fs';
import { Agent as HttpAgent, type IncomingMessage, request as httpRequest } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { CliError, httpError, isUnreachable, networkReason, unreachableError } from './errors.js';

/** Where and as whom the client calls. */
export interface ClientOptions {
  /** Base address of the service, e.g. `http://127.0.0.1:8080` (a trailing `/` is ignored). */
  baseUrl: string;
  /** Management key (`svc_sk_…`) or scoped token (`svc_at_…`). */
  key: string;
  /** Retries of one request after a 429, a 503 or a dropped connection; undefined means 6. */
  retries?: number;
}

/** A request body: bytes, or a file streamed from disk (reopened for each attempt). */
export type Body = string | Buffer | { file: string; size: number };

/** One request. */
export interface RequestSpec {
  /** Only a POST is never sent again after a dropped connection (it may have taken effect). */
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Path and query under the base address, starting with `/`. */
  path: string;
  /** What the request does, for error messages ("upload /a/b.txt"). */
  what: string;
  /** Headers besides Authorization and Content-Length, which the client sets. */
  headers?: Record<string, string>;
  /** No body when undefined. */
  body?: Body;
}

/** A response whose body has not been read yet. */
export interface Reply {
  status: number;
  /** A response header (lower-case name), or undefined. */
  header(name: string): string | undefined;
  /** The body as it arrives. */
  body: IncomingMessage;
  /** The whole body as UTF-8 text. */
  text(): Promise<string>;
  /**
   * Reads and drops the body. A reply must be read or discarded: until then its connection is
   * neither reused nor released, and would keep the process alive until the server closes it.
   */
  discard(): Promise<void>;
}

const DEFAULT_RETRIES = 6;
/** A `Retry-After` longer than this is not waited for: the operator is told instead. */
const MAX_WAIT_SECONDS = 120;
/** Statuses after which the service asks to send the same request again. */
const RETRIED = new Set([429, 503]);
/** A connection the server closed under a request (e.g. an idle keep-alive socket) is worth another try. */
const DROPPED = new Set(['ECONNRESET', 'EPIPE']);

/** A client of one service with one credential. */
export class ApiClient {
  readonly baseUrl: string;
  private readonly key: string;
  private readonly retries: number;
  private readonly https: boolean;
  // Keep-alive: a push's thousands of requests reuse a handful of connections.
  private readonly agent: HttpAgent;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.key = options.key;
    this.retries = options.retries ?? DEFAULT_RETRIES;
    this.https = this.baseUrl.startsWith('https:');
    this.agent = this.https ? new HttpsAgent({ keepAlive: true }) : new HttpAgent({ keepAlive: true });
  }

  /**
   * Sends a request, retrying 429 and 503 after `Retry-After` (and, for methods that may be
   * repeated, a dropped connection), and returns the final response whatever its status.
   * Throws when the host cannot be reached or the retries run out.
   */
  async send(spec: RequestSpec): Promise<Reply> {
    for (let attempt = 0; ; attempt++) {
      let reply: Reply;
      try {
        reply = await this.once(spec);
      } catch (error) {
        if (isUnreachable(error)) throw unreachableError(this.baseUrl, error);
        const reason = networkReason(error);
        // A POST is sent again only when it never reached the server (a kept-alive socket the
        // server had closed): otherwise it may have taken effect (a workspace made, a token minted).
        const repeatable = spec.method !== 'POST' || (error as { reused?: boolean }).reused === true;
        if (!repeatable || !DROPPED.has(reason)) throw new CliError(`${spec.what}: the request failed (${reason})`);
        if (attempt >= this.retries) throw new CliError(`${spec.what}: gave up after ${attempt + 1} attempts: the connection dropped each time (${reason})`);
        await sleep(backoff(attempt));
        continue;
      }
      if (!RETRIED.has(reply.status)) return reply;
      const message = await errorText(reply);
      const wait = retryAfterSeconds(reply.header('retry-after') ?? null) ?? backoff(attempt) / 1000;
      if (attempt >= this.retries) {
        throw new CliError(`${spec.what}: gave up after ${attempt + 1} attempts: the service answered ${reply.status} each time (${message})`);
      }
      if (wait > MAX_WAIT_SECONDS) {
        throw new CliError(
          `${spec.what}: the service answered ${reply.status} and asks to retry after ${wait} s, longer than ${MAX_WAIT_SECONDS} s (${message})`,
        );
      }
      await sleep(wait * 1000);
    }
  }

  /** Sends a request and returns its JSON body (null for 204); any other status than 2xx throws a named error. */
  async json<T>(spec: RequestSpec): Promise<T> {
    const reply = await this.send(spec);
    if (reply.status < 200 || reply.status > 299) throw httpError(reply.status, spec.what, await errorText(reply));
    const text = await reply.text();
    return (text === '' ? null : JSON.parse(text)) as T;
  }

  /** Sends a JSON body and returns the JSON answer. */
  postJson<T>(path: string, what: string, body: unknown): Promise<T> {
    return this.json<T>({ method: 'POST', path, what, headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  }

  /** Closes the kept-alive connections, so that the process can end without waiting for the server to close them. */
  close(): void {
    this.agent.destroy();
  }

  /** One attempt: resolves with the response as soon as its head arrives. */
  private once(spec: RequestSpec): Promise<Reply> {
    const headers: Record<string, string> = { authorization: `Bearer ${this.key}`, ...spec.headers };
    const body = spec.body;
    if (body !== undefined)
      headers['content-length'] = String(typeof body === 'string' ? Buffer.byteLength(body) : Buffer.isBuffer(body) ? body.length : body.size);
    const request = this.https ? httpsRequest : httpRequest;
    return new Promise((resolve, reject) => {
      let answered = false;
      const req = request(this.baseUrl + spec.path, { method: spec.method, headers, agent: this.agent }, (res) => {
        answered = true;
        resolve(reply(res));
      });
      req.on('error', (error: NodeJS.ErrnoException) => {
        // The service may answer (413, 403) and close before the whole body is sent: the answer
        // stands, and the write that failed after it is of no interest.
        if (answered) return;
        reject(req.reusedSocket && error.code === 'ECONNRESET' ? Object.assign(error, { reused: true }) : error);
      });
      if (body === undefined || typeof body === 'string' || Buffer.isBuffer(body)) {
        req.end(body);
      } else {
        const file = createReadStream(body.file);
        file.on('error', (error) => req.destroy(error));
        req.on('close', () => file.destroy());
        file.pipe(req);
      }
    });
  }
}

function reply(res: IncomingMessage): Reply {
  const text = async (): Promise<string> => {
    const chunks: Buffer[] = [];
    for await (const chunk of res) chunks.push(chunk as Buffer);
    return Buffer.concat(chunks).toString('utf8');
  };
  return {
    status: res.statusCode ?? 0,
    header: (name) => {
      const value = res.headers[name];
      return Array.isArray(value) ? value.join(', ') : value;
    },
    body: res,
    text,
    discard: async () => {
      res.resume();
      await new Promise<void>((resolve) => {
        if (res.complete) resolve();
        else res.once('end', resolve).once('close', resolve);
      });
    },
  };
}

/**
 * The error text of a response: the `error` field of a JSON body (management routes), else
 * the plain text (read routes), trimmed.
 */
export async function errorText(reply: Reply): Promise<string> {
  const text = await reply.text().catch(() => '');
  if ((reply.header('content-type') ?? '').includes('json')) {
    try {
      const error = (JSON.parse(text) as { error?: unknown }).error;
      if (typeof error === 'string') return error;
    } catch {
      // Not JSON after all: the text itself is the best message there is.
    }
  }
  return text.trim();
}

/** Seconds to wait from a `Retry-After` header (delta-seconds or an HTTP date), or null without one. */
export function retryAfterSeconds(header: string | null): number | null {
  if (header === null || header.trim() === '') return null;
  const seconds = Number(header);
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const date = Date.parse(header);
  return Number.isNaN(date) ? null : Math.max(0, Math.ceil((date - Date.now()) / 1000));
}

/** Milliseconds before retry `attempt` (0-based) when the service gave no `Retry-After`: 0.5 s doubling, at most 30 s. */
function backoff(attempt: number): number {
  return Math.min(30_000, 500 * 2 ** attempt);
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
