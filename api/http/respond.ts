/**
 * Turns what a handler threw into a response: the catalog's status and
 * message for a `VfsError`, 503 when the database is out of reach, 500
 * otherwise (logged, never shown). Management routes answer JSON
 * `{ error }`; read routes answer plain text.
 */
import { VfsError } from '../../core/errors.js';
import { type RequestContext, sendJson, sendText } from './context.js';

/** Where unexpected errors go. */
export type ErrorLog = (message: string, error: unknown, fields?: Record<string, unknown>) => void;

// Connection failures (class 08), refused logins (class 28), shutdown (57P01-57P03), too many connections (53300), and the client-side ones.
const UNAVAILABLE_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'ETIMEDOUT', 'EPIPE', '57P01', '57P02', '57P03', '53300']);

/** Maps any thrown value to the VfsError the caller sees. */
export function toVfsError(error: unknown, log: ErrorLog, ctx: RequestContext): VfsError {
  if (error instanceof VfsError) return error;
  if (isDatabaseUnavailable(error)) return new VfsError('UNAVAILABLE', { what: 'the database' }, { 'retry-after': '1' });
  log(`${ctx.method} ${ctx.url} failed`, error, { requestId: ctx.requestId });
  return new VfsError('INTERNAL');
}

/** True for errors that mean PostgreSQL cannot be reached right now. */
export function isDatabaseUnavailable(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const { code, syscall } = error as { code?: unknown; syscall?: unknown };
  if (typeof code === 'string' && (UNAVAILABLE_CODES.has(code) || code.startsWith('08') || code.startsWith('28'))) return true;
  // A stopped server's Unix socket is gone: connect fails with ENOENT.
  if (syscall === 'connect') return true;
  return /timeout exceeded when trying to connect|Connection terminated|connection timeout|Client has encountered a connection error|Query read timeout/i.test(
    error.message,
  );
}

/** Sends `{ error }` JSON for a management route. */
export function sendJsonError(ctx: RequestContext, error: unknown, log: ErrorLog): void {
  const e = toVfsError(error, log, ctx);
  sendJson(ctx, e.status, { error: e.message }, e.headers);
}

/** Sends a plain-text error for a read route. */
export function sendTextError(ctx: RequestContext, error: unknown, log: ErrorLog): void {
  const e = toVfsError(error, log, ctx);
  sendText(ctx, e.status, e.message + '\n', e.headers);
}
