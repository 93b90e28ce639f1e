/**
 * Raw HTTP exchanges for the suites that send bytes the HTTP clients would
 * refuse to: write pieces to a fresh connection, read until the server closes
 * it or a bound passes, and parse what came back.
 */
import { connect } from 'node:net';

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
  const headers: Record<string, string> = {};
  for (const line of headText.split('\r\n').slice(1)) {
    const colon = line.indexOf(':');
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    headers[name] = headers[name] === undefined ? value : `${headers[name]}, ${value}`;
  }
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
