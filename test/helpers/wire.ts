/**
 * Raw HTTP exchanges for the suites that send bytes the HTTP clients would
 * refuse to: write pieces to a fresh connection, read until the server closes
 * it or a bound passes, and parse what came back.
 */
import { connect, type Socket } from 'node:net';

/** What came back on the wire. */
export interface Wire {
  /** `answered`: a status line and head arrived; `closed`: the server hung up without one; `timeout`: the bound passed first. */
  outcome: 'answered' | 'closed' | 'timeout';
  status: number;
  headers: Record<string, string>;
  text: string;
  /** Bytes after the head as they arrived (on HEAD there must be none). */
  bodyBytes: number;
  /** Everything received, for the cases that look at raw framing. */
  raw: Buffer;
  ms: number;
}

/**
 * Writes `pieces` to a fresh connection to `port` (waiting `pieceDelayMs`
 * between them) and reads until the server closes it, or `timeoutMs` passes.
 * With `head`, the answer is to a HEAD request and has no text.
 */
export function exchange(port: number, pieces: Buffer[], options: { timeoutMs: number; pieceDelayMs?: number; head?: boolean }): Promise<Wire> {
  const started = performance.now();
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (timedOut: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve(parseWire(Buffer.concat(chunks), timedOut, options.head === true, performance.now() - started));
    };
    const timer = setTimeout(() => finish(true), options.timeoutMs);
    socket.on('data', (d: Buffer) => chunks.push(d));
    socket.on('error', () => finish(false));
    socket.on('close', () => finish(false));
    void (async () => {
      for (const [i, piece] of pieces.entries()) {
        if (i > 0 && options.pieceDelayMs !== undefined) await new Promise((resolve) => setTimeout(resolve, options.pieceDelayMs));
        if (done || socket.destroyed) return;
        socket.write(piece);
      }
    })();
  });
}

/** Parses an answer as it arrived: status, headers, the body de-chunked. */
export function parseWire(buf: Buffer, timedOut: boolean, head: boolean, ms: number): Wire {
  const end = buf.indexOf('\r\n\r\n');
  const headText = end < 0 ? '' : buf.subarray(0, end).toString('latin1');
  const m = /^HTTP\/1\.[01] (\d{3})/.exec(headText);
  if (m === null) return { outcome: timedOut ? 'timeout' : 'closed', status: 0, headers: {}, text: '', bodyBytes: 0, raw: buf, ms };
  const headers = headerFields(headText);
  const rest = buf.subarray(end + 4);
  let body = rest;
  if (/chunked/i.test(headers['transfer-encoding'] ?? '')) body = dechunk(rest);
  else if (headers['content-length'] !== undefined) body = rest.subarray(0, Number(headers['content-length']));
  return {
    outcome: timedOut ? 'timeout' : 'answered',
    status: Number(m[1]),
    headers,
    text: head ? '' : body.toString('utf8'),
    bodyBytes: rest.length,
    raw: buf,
    ms,
  };
}

/** The header fields of a response head (status line first), by lower-case name; repeated ones joined with `, `. */
function headerFields(headText: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const line of headText.split('\r\n').slice(1)) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
  return headers;
}

function dechunk(buf: Buffer): Buffer {
  const out: Buffer[] = [];
  let at = 0;
  for (;;) {
    const eol = buf.indexOf('\r\n', at);
    if (eol < 0) break;
    const size = parseInt(buf.subarray(at, eol).toString('latin1'), 16);
    if (!(size > 0)) break;
    out.push(buf.subarray(eol + 2, eol + 2 + size));
    at = eol + 2 + size + 2;
  }
  return Buffer.concat(out);
}

/** One response of those a connection carried, in the order they came. */
export interface Answer {
  status: number;
  /** The status line's protocol, e.g. `HTTP/1.1`. */
  version: string;
  headers: Record<string, string>;
  /** The body, de-chunked. */
  text: string;
}

/**
 * A raw connection that may carry several requests, pipelined or one after another: `send`
 * writes bytes as they are, `answers` waits for that many complete responses (or the server
 * closing, or the bound), in order of arrival.
 */
export class Connection {
  private readonly socket: Socket;
  private buffered = Buffer.alloc(0);
  private readonly parsed: Answer[] = [];
  private waiters: Array<() => void> = [];
  /** Whether the server has closed the connection (or it failed). */
  closed = false;

  constructor(port: number) {
    this.socket = connect(port, '127.0.0.1');
    this.socket.on('data', (d: Buffer) => {
      this.buffered = Buffer.concat([this.buffered, d]);
      this.parse(false);
      this.wake();
    });
    const end = (): void => {
      this.closed = true;
      this.parse(true);
      this.wake();
    };
    this.socket.on('end', end);
    this.socket.on('close', end);
    this.socket.on('error', end);
  }

  send(bytes: string | Buffer): void {
    this.socket.write(bytes);
  }

  /** Waits for `count` responses in all (or the close, or `timeoutMs`); returns those received so far. */
  async answers(count: number, timeoutMs: number): Promise<Answer[]> {
    const deadline = Date.now() + timeoutMs;
    while (this.parsed.length < count && !this.closed && Date.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, deadline - Date.now());
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    return [...this.parsed];
  }

  /** Waits until the server closes the connection or `timeoutMs` passes; true if it closed. */
  async closes(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (!this.closed && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    return this.closed;
  }

  destroy(): void {
    this.socket.destroy();
  }

  private wake(): void {
    for (const waiter of this.waiters.splice(0)) waiter();
  }

  /** Takes every complete response off the front of what has arrived. */
  private parse(ended: boolean): void {
    for (;;) {
      const end = this.buffered.indexOf('\r\n\r\n');
      if (end < 0) return;
      const headText = this.buffered.subarray(0, end).toString('latin1');
      const m = /^(HTTP\/1\.[01]) (\d{3})/.exec(headText);
      if (m === null) return;
      const headers = headerFields(headText);
      const rest = this.buffered.subarray(end + 4);
      let body: Buffer;
      let used: number;
      const status = Number(m[2]);
      if (status === 204 || status === 304 || (status >= 100 && status < 200)) {
        body = Buffer.alloc(0);
        used = 0;
      } else if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
        const last = rest.indexOf('\r\n0\r\n\r\n');
        const first = rest.subarray(0, 5).toString('latin1') === '0\r\n\r\n' ? 0 : -1;
        if (last < 0 && first < 0) return;
        used = first === 0 ? 5 : last + 7;
        body = dechunk(rest.subarray(0, used));
      } else if (headers['content-length'] !== undefined) {
        const length = Number(headers['content-length']);
        if (rest.length < length) return;
        body = rest.subarray(0, length);
        used = length;
      } else {
        // Delimited by the close (HTTP/1.0 without a length).
        if (!ended) return;
        body = rest;
        used = rest.length;
      }
      this.parsed.push({ status, version: m[1], headers, text: body.toString('utf8') });
      this.buffered = this.buffered.subarray(end + 4 + used);
    }
  }
}
