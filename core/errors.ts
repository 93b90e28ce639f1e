/**
 * The one error catalog of the service: every failure a caller can see is a
 * typed code with an HTTP status and a message template. Code below the HTTP
 * layer throws `VfsError`; only `api/` turns it into a response.
 *
 * Templates use `{name}` placeholders filled from the `params` object. An entry of the OAuth
 * endpoints also names the `error` code its RFC gives it (RFC 6749 5.2 and 4.1.2.1, RFC 7591 3.2.2,
 * RFC 8707 2); the OAuth routes answer with that code and the message as `error_description`.
 */
export const ERRORS = {
  INVALID_PARAMETER: { status: 400, template: 'invalid {name}: {reason}' },
  INVALID_BODY: { status: 400, template: 'invalid request body: {reason}' },
  INVALID_PATH: { status: 400, template: 'invalid file path: {reason}' },
  UNAUTHENTICATED: { status: 401, template: '{reason}' },
  OAUTH_INVALID_REQUEST: { status: 400, template: '{reason}', oauth: 'invalid_request' },
  OAUTH_INVALID_GRANT: { status: 400, template: '{reason}', oauth: 'invalid_grant' },
  OAUTH_INVALID_TARGET: { status: 400, template: '{reason}', oauth: 'invalid_target' },
  OAUTH_INVALID_SCOPE: { status: 400, template: 'the only scope is vfs:read, got {scope}', oauth: 'invalid_scope' },
  OAUTH_UNSUPPORTED_GRANT_TYPE: { status: 400, template: 'grant_type must be authorization_code or refresh_token', oauth: 'unsupported_grant_type' },
  OAUTH_UNSUPPORTED_RESPONSE_TYPE: { status: 400, template: 'response_type must be code', oauth: 'unsupported_response_type' },
  OAUTH_INVALID_REDIRECT_URI: { status: 400, template: '{reason}', oauth: 'invalid_redirect_uri' },
  OAUTH_INVALID_CLIENT_METADATA: { status: 400, template: '{reason}', oauth: 'invalid_client_metadata' },
  OAUTH_ACCESS_DENIED: { status: 400, template: 'the person declined to give access', oauth: 'access_denied' },
  OAUTH_INVALID_CLIENT: { status: 401, template: '{reason}', oauth: 'invalid_client' },
  OAUTH_CLIENT_DOCUMENT: { status: 400, template: 'the client metadata document {url} cannot be used: {reason}', oauth: 'invalid_client' },
  OAUTH_WRONG_KEY: { status: 401, template: 'this key cannot give access to workspace {name}: paste a management key of its account or a scoped token of it' },
  OAUTH_CSRF: { status: 403, template: 'the form expired or did not come from this page: go back to the application and start again' },
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
  NO_SUCH_GRANT: { status: 404, template: 'no such grant: {id}' },
  METHOD_NOT_ALLOWED: { status: 405, template: '{method} is not allowed here: the endpoint takes {allow}' },
  WORKSPACE_EXISTS: { status: 409, template: 'workspace already exists: {name}' },
  FILE_TOO_LARGE: { status: 413, template: 'file exceeds the per-file limit of {limit} bytes' },
  BODY_TOO_LARGE: { status: 413, template: 'request body exceeds {limit} bytes' },
  RATE_LIMITED: { status: 429, template: 'rate limit reached for the {scope}; retry after {retryAfter} s' },
  AUTH_LOCKED: { status: 429, template: 'too many failed authentication attempts from this address; retry after {retryAfter} s' },
  UNAVAILABLE: { status: 503, template: '{what} is unavailable; retry' },
  STOPPING: { status: 503, template: 'the service is stopping; retry' },
  INTERNAL: { status: 500, template: 'internal error' },
} as const satisfies Record<string, { status: number; template: string; oauth?: string }>;

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
  /** The OAuth `error` code of an OAuth endpoint's error, else null. */
  readonly oauth: string | null;

  constructor(code: ErrorCode, params: ErrorParams = {}, headers: Record<string, string> = {}) {
    const entry = ERRORS[code];
    super(entry.template.replace(/\{(\w+)\}/g, (_, key: string) => String(params[key] ?? `{${key}}`)));
    this.name = 'VfsError';
    this.code = code;
    this.params = params;
    this.status = entry.status;
    this.headers = headers;
    this.oauth = 'oauth' in entry ? entry.oauth : null;
  }
}

/** Shorthand for the most common error: a named parameter with a reason. */
export function invalidParameter(name: string, reason: string): VfsError {
  return new VfsError('INVALID_PARAMETER', { name, reason });
}
