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
import { randomUUID } from 'node:crypto';
import { VfsError } from '../../core/errors.js';

/**
 * Query parameters decoded strictly: `+` is a space and percent-escapes must
 * form valid UTF-8. A parameter that does not decode is remembered in
 * `invalid` (and left out), so the route can answer 400 naming it instead of
 * reading a lossy U+FFFD version of it.
 */
export class StrictQuery extends URLSearchParams {
  /** The first parameter whose name or value is not valid percent-encoded UTF-8, or null. */
  invalid: string | null = null;

  constructor(raw: string) {
    super();
    if (raw === '') return;
    for (const part of raw.split('&')) {
      if (part === '') continue;
      const eq = part.indexOf('=');
      const rawName = eq < 0 ? part : part.slice(0, eq);
      const rawValue = eq < 0 ? '' : part.slice(eq + 1);
      const name = decodeComponent(rawName);
      const value = decodeComponent(rawValue);
      if (name === null || value === null) {
        this.invalid ??= name ?? rawName.slice(0, 100);
        continue;
      }
      this.append(name, value);
    }
  }
}

const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * application/x-www-form-urlencoded decoding as WHATWG URLSearchParams does it
 * (`+` is a space, `%XX` a byte, a `%` not followed by two hex digits stays
 * itself), except that bytes which are not valid UTF-8 give null rather than
 * U+FFFD.
 */
function decodeComponent(raw: string): string | null {
  if (!raw.includes('%') && !raw.includes('+')) return raw;
  const bytes = Buffer.from(raw.replaceAll('+', ' '), 'utf8');
  const out = Buffer.allocUnsafe(bytes.length);
  let n = 0;
  for (let i = 0; i < bytes.length; i++) {
    const h = bytes[i + 1];
    const l = bytes[i + 2];
    if (bytes[i] === 0x25 && i + 2 < bytes.length && isHex(h) && isHex(l)) {
      out[n++] = Number.parseInt(String.fromCharCode(h, l), 16);
      i += 2;
    } else out[n++] = bytes[i];
  }
  try {
    return strictUtf8.decode(out.subarray(0, n));
  } catch {
    return null;
  }
}

function isHex(c: number | undefined): boolean {
  return c !== undefined && ((c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x46) || (c >= 0x61 && c <= 0x66));
}

/** What a handler knows of a request, copied out of uWS's short-lived objects. */
export interface RequestContext {
  readonly res: HttpResponse;
  readonly method: string;
  /** Raw path, still percent-encoded. */
  readonly url: string;
  readonly query: StrictQuery;
  /** The Authorization header; the empty string when absent, null when given more than once. */
  readonly authorization: string | null;
  /** True when the request carries Content-Length more than once (a smuggling attempt): refused. */
  readonly ambiguousLength: boolean;
  /** The client asked to close the connection after this response. */
  readonly wantsClose: boolean;
  readonly contentType: string;
  readonly contentLength: string;
  readonly forwardedFor: string;
  /** Raw (percent-encoded) route parameters in pattern order. */
  readonly params: string[];
  /** Set when the client went away; nothing may be written afterwards. */
  aborted: boolean;
  /** Callbacks run once if the client goes away. */
  readonly onAbort: Array<() => void>;
  /** The request's id: its `X-Request-Id` when that is 1-128 of `[A-Za-z0-9._:-]`, else a new UUID; echoed on the response. */
  readonly requestId: string;
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;
const requestIds = new WeakMap<HttpResponse, string>();

/** The id of the request a response answers (see RequestContext.requestId); undefined before its snapshot. */
export function requestIdOf(res: HttpResponse): string | undefined {
  return requestIds.get(res);
}

const decoder = new TextDecoder();

/** Takes the request snapshot; must be called synchronously in the uWS handler. */
export function snapshot(res: HttpResponse, req: HttpRequest, paramCount: number): RequestContext {
  const params: string[] = [];
  for (let i = 0; i < paramCount; i++) params.push(req.getParameter(i) ?? '');
  // One pass over the headers (each getHeader is a call into uWS); the first of repeated ones wins.
  let authorizations = 0;
  let lengths = 0;
  let authorization = '';
  let connection = '';
  let contentType: string | undefined;
  let contentLength = '';
  let forwardedFor: string | undefined;
  let requestId: string | undefined;
  req.forEach((name, value) => {
    if (name === 'authorization') {
      if (authorizations++ === 0) authorization = value;
    } else if (name === 'content-length') {
      if (lengths++ === 0) contentLength = value;
    } else if (name === 'connection') connection ||= value;
    else if (name === 'content-type') contentType ??= value;
    // SECURITY: every line, in order: a proxy may add its own line after the client's, and the
    // right-most address (the one the proxy saw) must be read from the whole list.
    else if (name === 'x-forwarded-for') forwardedFor = forwardedFor === undefined ? value : `${forwardedFor},${value}`;
    else if (name === 'x-request-id') requestId ??= value;
  });
  const id = requestId !== undefined && REQUEST_ID.test(requestId) ? requestId : randomUUID();
  requestIds.set(res, id);
  const ctx: RequestContext = {
    res,
    method: req.getMethod().toUpperCase(),
    url: req.getUrl(),
    query: new StrictQuery(req.getQuery() ?? ''),
    authorization: authorizations > 1 ? null : authorization,
    ambiguousLength: lengths > 1,
    wantsClose: connection !== '' && /(?:^|,)\s*close\s*(?:,|$)/i.test(connection),
    contentType: contentType ?? '',
    contentLength,
    forwardedFor: forwardedFor ?? '',
    params,
    aborted: false,
    onAbort: [],
    requestId: id,
  };
  res.onAborted(() => {
    ctx.aborted = true;
    for (const fn of ctx.onAbort) fn();
  });
  return ctx;
}

/**
 * The client's address as the socket gives it. Read only while the request is unanswered and
 * before its first await: uWS refuses access to a response that was answered or aborted. Not
 * part of the snapshot, since few requests need it and it costs about 1 µs (uWS allocates).
 */
export function remoteAddress(ctx: RequestContext): string {
  return decoder.decode(ctx.res.getRemoteAddressAsText());
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
  302: 'Found',
  303: 'See Other',
  304: 'Not Modified',
  308: 'Permanent Redirect',
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  405: 'Method Not Allowed',
  406: 'Not Acceptable',
  409: 'Conflict',
  413: 'Payload Too Large',
  415: 'Unsupported Media Type',
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
    ctx.res.writeHeader('x-request-id', ctx.requestId);
    for (const [name, value] of Object.entries(headers)) ctx.res.writeHeader(name, value);
    // A HEAD answer describes the body it does not send (RFC 9110 9.3.2). This uWS build does
    // not close after endWithoutBody() even when told to, so a HEAD whose client asked to
    // close ends as an empty response, which it does close. A 304 has no body either: its
    // `Content-Length: 0` (native builds) is a header caches never take from a 304 (RFC 9111
    // 3.2), and given no length @based/uws 6.0.1 wrote `Content-Length: 9223372036854775808`.
    const close = closeConnection || ctx.wantsClose;
    if ((status === 204 || status === 304) && !close) ctx.res.endWithoutBody(0, false);
    else if (ctx.method === 'HEAD' && !close) ctx.res.endWithoutBody(typeof body === 'string' ? Buffer.byteLength(body) : body.length, false);
    else if (ctx.method === 'HEAD' || status === 204 || status === 304) ctx.res.end('', true);
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
