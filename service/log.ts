/**
 * The service's log: one JSON line per event on stderr (pino), at `VFS_LOG_LEVEL`. No line ever
 * holds a credential: every message, error and field passes through `redact`, which replaces
 * the secret part of anything shaped like a management key or a token (a client may put one in
 * a path, a query or a body that ends up in an error).
 */
import { pino } from 'pino';

/** Where the service writes what it has to say. */
export interface Logger {
  info(message: string, fields?: Record<string, unknown>): void;
  error(message: string, error?: unknown, fields?: Record<string, unknown>): void;
  /** Logged only at level debug: one line per request. */
  debug(message: string, fields?: Record<string, unknown>): void;
  /** True when debug lines are written (so that callers can skip building them). */
  readonly debugging: boolean;
}

export type LogLevel = 'debug' | 'info' | 'error' | 'silent';

const CREDENTIAL = /svc_(sk|at)_[A-Za-z0-9_-]+/g;

/** `text` with the secret part of every credential-shaped string replaced. */
export function redact(text: string): string {
  return text.replace(CREDENTIAL, 'svc_$1_[redacted]');
}

function clean(fields: Record<string, unknown> | undefined): Record<string, unknown> {
  if (fields === undefined) return {};
  return JSON.parse(redact(JSON.stringify(fields))) as Record<string, unknown>;
}

function errorText(error: unknown): string {
  return redact(error instanceof Error ? (error.stack ?? error.message) : String(error));
}

/** A logger writing JSON lines to `destination` (stderr by default). */
export function createLogger(level: LogLevel, destination: NodeJS.WritableStream | number = 2): Logger {
  const stream = typeof destination === 'number' ? pino.destination({ dest: destination, sync: true }) : destination;
  const log = pino(
    { level, base: { service: 'agent-vfs' }, timestamp: pino.stdTimeFunctions.isoTime, formatters: { level: (label) => ({ level: label }) } },
    stream,
  );
  return {
    info: (message, fields) => log.info(clean(fields), redact(message)),
    error: (message, error, fields) => log.error({ ...clean(fields), ...(error === undefined ? {} : { error: errorText(error) }) }, redact(message)),
    debug: (message, fields) => log.debug(clean(fields), redact(message)),
    debugging: log.isLevelEnabled('debug'),
  };
}
