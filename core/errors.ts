/**
 * The one error catalog of the service: every failure a caller can see is a
 * typed code with an HTTP status and a message template. Code below the HTTP
 * layer throws `VfsError`; only `api/` turns it into a response.
 *
 * Templates use `{name}` placeholders filled from the `params` object.
 */
export const ERRORS = {
  INVALID_PARAMETER: { status: 400, template: 'invalid {name}: {reason}' },
  INVALID_BODY: { status: 400, template: 'invalid request body: {reason}' },
  INVALID_PATH: { status: 400, template: 'invalid file path: {reason}' },
  UNAUTHENTICATED: { status: 401, template: '{reason}' },
  SCOPED_TOKEN_FORBIDDEN: { status: 403, template: 'a scoped token may only call the read tools (ls, find, cat, grep)' },
  WORKSPACE_QUOTA: { status: 403, template: 'workspace quota reached: the plan allows {limit} workspaces' },
  FILE_QUOTA: { status: 403, template: 'file-count limit reached: the plan allows {limit} files' },
  STORAGE_QUOTA: { status: 403, template: 'account storage limit reached: the plan allows {limit} bytes' },
  ORIGIN_FORBIDDEN: { status: 403, template: 'origin {origin} may not call this endpoint: it is not in VFS_MCP_ALLOWED_ORIGINS' },
  NO_SUCH_ROUTE: { status: 404, template: 'no such route: {method} {url}' },
  CONSOLE_NOT_BUILT: { status: 404, template: 'the console is not built: run npm run build (it builds console/ into dist/console/)' },
  NO_SUCH_WORKSPACE: { status: 404, template: 'no such workspace: {name}' },
  NO_SUCH_FILE: { status: 404, template: 'no such file: {path}' },
  FILE_NOT_READY: { status: 404, template: 'file {path} is not readable: its status is {status}' },
  NO_SUCH_TOKEN: { status: 404, template: 'no such token: {id}' },
  METHOD_NOT_ALLOWED: { status: 405, template: '{method} is not allowed here: the endpoint takes {allow}' },
  WORKSPACE_EXISTS: { status: 409, template: 'workspace already exists: {name}' },
  FILE_TOO_LARGE: { status: 413, template: 'file exceeds the per-file limit of {limit} bytes' },
  BODY_TOO_LARGE: { status: 413, template: 'request body exceeds {limit} bytes' },
  RATE_LIMITED: { status: 429, template: 'rate limit reached for the {scope}; retry after {retryAfter} s' },
  AUTH_LOCKED: { status: 429, template: 'too many failed authentication attempts from this address; retry after {retryAfter} s' },
  UNAVAILABLE: { status: 503, template: '{what} is unavailable; retry' },
  STOPPING: { status: 503, template: 'the service is stopping; retry' },
  INTERNAL: { status: 500, template: 'internal error' },
} as const satisfies Record<string, { status: number; template: string }>;

/** A code of the catalog. */
export type ErrorCode = keyof typeof ERRORS;

/** The values of a template's placeholders. */
export type ErrorParams = Record<string, string | number>;

/** The error type every layer throws for a caller-visible failure. */
export class VfsError extends Error {
  readonly code: ErrorCode;
  /** The template's values: with `code`, all it takes to make the error again (across threads). */
  readonly params: ErrorParams;
  readonly status: number;
  /** Extra response headers, e.g. `Retry-After` on 429. */
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, params: ErrorParams = {}, headers: Record<string, string> = {}) {
    const entry = ERRORS[code];
    super(entry.template.replace(/\{(\w+)\}/g, (_, key: string) => String(params[key] ?? `{${key}}`)));
    this.name = 'VfsError';
    this.code = code;
    this.params = params;
    this.status = entry.status;
    this.headers = headers;
  }
}

/** Shorthand for the most common error: a named parameter with a reason. */
export function invalidParameter(name: string, reason: string): VfsError {
  return new VfsError('INVALID_PARAMETER', { name, reason });
}
