/**
 * The HTTP plumbing over uWebSockets.js: a request snapshot taken in the
 * synchronous part of the handler (uWS invalidates `req` after it returns),
 * body reading with a byte limit, and corked responses.
 *
 * uWS rules kept here: `onAborted` is attached before any await; every write
 * after an await happens inside `res.cork`; nothing is written to an aborted
 * response.
 */
import type { HttpRequest, HttpResponse } from 'uWebSockets.js';
import { VfsError } from '../core/errors.js';

/** What a handler knows of a request, copied out of uWS's short-lived objects. */
export interface RequestContext {
  readonly res: HttpResponse;
  readonly method: string;
  /** Raw path, still percent-encoded. */
  readonly url: string;
  readonly query: URLSearchParams;
  readonly authorization: string;
  readonly contentType: string;
  readonly contentLength: string;
  readonly forwardedFor: string;
  readonly remoteAddress: string;
  /** Raw (percent-encoded) route parameters in pattern order. */
  readonly params: string[];
  /** Set when the client went away; nothing may be written afterwards. */
  aborted: boolean;
  /** Callbacks run once if the client goes away. */
  readonly onAbort: Array<() => void>;
}

const decoder = new TextDecoder();

/** Takes the request snapshot; must be called synchronously in the uWS handler. */
export function snapshot(res: HttpResponse, req: HttpRequest, paramCount: number): RequestContext {
  const params: string[] = [];
  for (let i = 0; i < paramCount; i++) params.push(req.getParameter(i) ?? '');
  const ctx: RequestContext = {
    res,
    method: req.getMethod().toUpperCase(),
    url: req.getUrl(),
    query: new URLSearchParams(req.getQuery() ?? ''),
    authorization: req.getHeader('authorization'),
    contentType: req.getHeader('content-type'),
    contentLength: req.getHeader('content-length'),
    forwardedFor: req.getHeader('x-forwarded-for'),
    remoteAddress: decoder.decode(res.getRemoteAddressAsText()),
    params,
    aborted: false,
    onAbort: [],
  };
  res.onAborted(() => {
    ctx.aborted = true;
    for (const fn of ctx.onAbort) fn();
  });
  return ctx;
}

/**
 * Reads the whole request body, refusing more than `limit` bytes (413). Must be
 * started synchronously in the uWS handler, before any await.
 */
export function readBody(ctx: RequestContext, limit: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let failed = false;
    ctx.onAbort.push(() => reject(new VfsError('INVALID_BODY', { reason: 'the client closed the connection' })));
    ctx.res.onData((chunk, isLast) => {
      if (failed) return;
      size += chunk.byteLength;
      if (size > limit) {
        failed = true;
        reject(new VfsError('BODY_TOO_LARGE', { limit }));
        return;
      }
      // uWS reuses the chunk's memory after this callback returns: copy it.
      chunks.push(Buffer.from(new Uint8Array(chunk)));
      if (isLast) resolve(Buffer.concat(chunks, size));
    });
  });
}

const STATUS_TEXT: Record<number, string> = {
  200: 'OK',
  201: 'Created',
  202: 'Accepted',
  204: 'No Content',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  409: 'Conflict',
  413: 'Payload Too Large',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
  503: 'Service Unavailable',
};

/** The status line uWS wants, e.g. `201 Created`. */
export function statusLine(status: number): string {
  return `${status} ${STATUS_TEXT[status] ?? ''}`.trimEnd();
}

/** Sends a complete response, corked, unless the client is gone. */
export function send(
  ctx: RequestContext,
  status: number,
  contentType: string | null,
  body: string | Uint8Array,
  headers: Record<string, string> = {},
  closeConnection = false,
): void {
  if (ctx.aborted) return;
  ctx.aborted = true; // a uWS response may be ended only once
  ctx.res.cork(() => {
    ctx.res.writeStatus(statusLine(status));
    if (contentType !== null) ctx.res.writeHeader('content-type', contentType);
    for (const [name, value] of Object.entries(headers)) ctx.res.writeHeader(name, value);
    if (status === 204) ctx.res.endWithoutBody(0, closeConnection);
    else ctx.res.end(body, closeConnection);
  });
}

/** Sends a JSON body. */
export function sendJson(ctx: RequestContext, status: number, body: unknown, headers: Record<string, string> = {}): void {
  send(ctx, status, 'application/json', status === 204 ? '' : JSON.stringify(body), headers);
}

/** Sends a plain-text body (read tools). */
export function sendText(ctx: RequestContext, status: number, body: string | Uint8Array, headers: Record<string, string> = {}): void {
  send(ctx, status, 'text/plain; charset=utf-8', body, headers);
}
