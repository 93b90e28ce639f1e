/**
 * The HTTP client of the command line: Node's fetch with the bearer key, the
 * retries the service asks for (429 and 503 after `Retry-After`, a bounded
 * number of times), and errors that name their cause.
 */
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

/** One request: its body is made per attempt, so that a retried upload reopens its file. */
export interface RequestSpec {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** Path and query under the base address, starting with `/`. */
  path: string;
  /** What the request does, for error messages ("upload /a/b.txt"). */
  what: string;
  headers?: Record<string, string>;
  /** Makes the body of one attempt. */
  body?: () => NonNullable<RequestInit['body']>;
}

const DEFAULT_RETRIES = 6;
/** A `Retry-After` longer than this is not waited for: the operator is told instead. */
const MAX_WAIT_SECONDS = 120;
/** Statuses after which the service asks to send the same request again. */
const RETRIED = new Set([429, 503]);
/** A connection the server closed under a request (e.g. an idle keep-alive socket) is worth another try. */
const DROPPED = new Set(['ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CLOSED']);

/** A client of one service with one credential. */
export class ApiClient {
  readonly baseUrl: string;
  private readonly key: string;
  private readonly retries: number;

  constructor(options: ClientOptions) {
    this.baseUrl = options.baseUrl.replace(/\/+$/, '');
    this.key = options.key;
    this.retries = options.retries ?? DEFAULT_RETRIES;
  }

  /**
   * Sends a request, retrying 429 and 503 after `Retry-After` (and, for methods that may be
   * repeated, a dropped connection), and returns the final response whatever its status.
   * Throws when the host cannot be reached or the retries run out.
   */
  async send(spec: RequestSpec): Promise<Response> {
    // Only a method that may be repeated is sent again after a dropped connection: a POST
    // may have taken effect (a workspace made, a token minted) before the connection went.
    const repeatable = spec.method !== 'POST';
    for (let attempt = 0; ; attempt++) {
      let res: Response;
      try {
        const body = spec.body?.();
        res = await fetch(this.baseUrl + spec.path, {
          method: spec.method,
          headers: { authorization: `Bearer ${this.key}`, ...spec.headers },
          body,
          // A stream body needs half duplex; it is harmless for the others.
          ...(body === undefined ? {} : { duplex: 'half' }),
        } as RequestInit);
      } catch (error) {
        if (isUnreachable(error)) throw unreachableError(this.baseUrl, error);
        const code = networkReason(error);
        if (!repeatable || !DROPPED.has(code)) throw new CliError(`${spec.what}: the request failed (${code})`);
        if (attempt >= this.retries) throw new CliError(`${spec.what}: gave up after ${attempt + 1} attempts: the connection dropped each time (${code})`);
        await sleep(backoff(attempt));
        continue;
      }
      if (!RETRIED.has(res.status)) return res;
      const message = await errorText(res);
      const wait = retryAfterSeconds(res.headers.get('retry-after')) ?? backoff(attempt) / 1000;
      if (attempt >= this.retries) {
        throw new CliError(`${spec.what}: gave up after ${attempt + 1} attempts: the service answered ${res.status} each time (${message})`);
      }
      if (wait > MAX_WAIT_SECONDS) {
        throw new CliError(
          `${spec.what}: the service answered ${res.status} and asks to retry after ${wait} s, longer than ${MAX_WAIT_SECONDS} s (${message})`,
        );
      }
      await sleep(wait * 1000);
    }
  }

  /** Sends a request and returns its JSON body (null for 204); any other status than 2xx throws a named error. */
  async json<T>(spec: RequestSpec): Promise<T> {
    const res = await this.send(spec);
    if (!res.ok) throw httpError(res.status, spec.what, await errorText(res));
    if (res.status === 204) return null as T;
    return (await res.json()) as T;
  }

  /** Sends a JSON body and returns the JSON answer. */
  postJson<T>(path: string, what: string, body: unknown): Promise<T> {
    const text = JSON.stringify(body);
    return this.json<T>({ method: 'POST', path, what, headers: { 'content-type': 'application/json' }, body: () => text });
  }
}

/**
 * The error text of a response: the `error` field of a JSON body (management routes), else
 * the plain text (read routes), trimmed.
 */
export async function errorText(res: Response): Promise<string> {
  const text = await res.text().catch(() => '');
  if ((res.headers.get('content-type') ?? '').includes('json')) {
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
