/**
 * The failures the command-line client reports: each names its cause in words
 * an operator can act on (which host, which key, which file, which limit).
 * Commands throw `CliError`; only cli/main.ts prints it and sets the exit code.
 */

/** Exit status of a command that failed (usage errors exit 2, through commander). */
export const EXIT_FAILURE = 1;

/** Exit status of a usage error: commander's, and ours for a missing URL or key. */
export const EXIT_USAGE = 2;

/** A failure with its message for the operator and the process's exit status. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT_FAILURE,
  ) {
    super(message);
    this.name = 'CliError';
  }
}

/** The failure of a usage rule commander cannot check (a flag or variable that is missing). */
export function usageError(message: string): CliError {
  return new CliError(message, EXIT_USAGE);
}

/** Connection-level error codes that say the host cannot be reached at all (retrying will not help soon). */
const UNREACHABLE: Record<string, string> = {
  ECONNREFUSED: 'connection refused',
  ENOTFOUND: 'host not found',
  EAI_AGAIN: 'host name lookup failed',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'connection timed out',
};

/** The errno-style code of a failed request (on the error itself, or on an address's error when several were tried), or null. */
export function networkCode(error: unknown): string | null {
  let e: unknown = error;
  // AggregateError (several addresses tried) and nested causes both carry the code further down.
  for (let depth = 0; depth < 4 && e !== null && typeof e === 'object'; depth++) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    const errors = (e as { errors?: unknown }).errors;
    e = Array.isArray(errors) && errors.length > 0 ? errors[0] : (e as { cause?: unknown }).cause;
  }
  return null;
}

/** Words for a failed request: its errno-style code, else the message of its innermost cause. */
export function networkReason(error: unknown): string {
  const code = networkCode(error);
  if (code !== null) return code;
  let e: unknown = error;
  while (e instanceof Error && e.cause instanceof Error) e = e.cause;
  return e instanceof Error ? e.message : String(e);
}

/** True when a request failed because the host cannot be reached (as opposed to a dropped connection). */
export function isUnreachable(error: unknown): boolean {
  const code = networkCode(error);
  return code !== null && code in UNREACHABLE;
}

/** The message for a host that cannot be reached, naming the URL and the cause. */
export function unreachableError(baseUrl: string, error: unknown): CliError {
  const code = networkCode(error) ?? 'unknown';
  return new CliError(`cannot reach the service at ${baseUrl}: ${UNREACHABLE[code] ?? 'network error'} (${code}); check --url or AGENT_VFS_URL`);
}

/**
 * The message for an HTTP error answer. `what` names the operation (and the file, for an
 * upload); `serverMessage` is the service's own text, which already names limits and parameters.
 */
export function httpError(status: number, what: string, serverMessage: string): CliError {
  const said = serverMessage === '' ? '' : `: ${serverMessage}`;
  switch (status) {
    case 401:
      return new CliError(`${what}: the service refused the key (401${said}); check --key or AGENT_VFS_KEY`);
    case 403:
      return new CliError(`${what}: forbidden (403${said})`);
    case 404:
      return new CliError(`${what}: not found (404${said})`);
    case 413:
      return new CliError(`${what}: too large (413${said})`);
    default:
      return new CliError(`${what}: the service answered ${status}${said}`);
  }
}
