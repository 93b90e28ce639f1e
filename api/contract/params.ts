/**
 * Query-string and path-parameter parsing, and the formats several routes check. Every reader
 * names the parameter in its error, refuses a parameter given twice, and accepts integers only
 * in plain decimal (no sign, fraction, exponent or leading `+`).
 */
import { invalidParameter, VfsError } from '../../core/errors.js';
import { StrictQuery } from '../http/context.js';

/** Workspace names: 1-64 of [a-z0-9_-], starting and ending with a letter or digit. */
export const WORKSPACE_NAME = /^[a-z0-9](?:[a-z0-9_-]{0,62}[a-z0-9])?$/;

/** Visibility claims (token claims and upload visibility): `*`, `user:<id>` or `group:<id>`. */
export const CLAIM = /^(?:\*|(?:user|group):[A-Za-z0-9._@-]{1,128})$/;

/** A workspace name from the path; one that cannot exist is simply not found (the spec gives these routes no 400). */
export function workspaceParam(raw: string): string {
  const name = decodeURIComponentSafe(raw);
  if (!WORKSPACE_NAME.test(name)) throw new VfsError('NO_SUCH_WORKSPACE', { name: name.slice(0, 100) });
  return name;
}

/** A path parameter percent-decoded, or as given when it does not decode. */
export function decodeURIComponentSafe(raw: string): string {
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

/** The single value of a query parameter, or undefined when absent. */
export function single(query: URLSearchParams, name: string): string | undefined {
  const values = query.getAll(name);
  if (values.length > 1) throw invalidParameter(name, 'given more than once');
  return values[0];
}

/** Parses a plain decimal integer and checks its range. */
export function parseBoundedInt(name: string, raw: string, min: number, max: number): number {
  if (!/^\d{1,16}$/.test(raw)) throw invalidParameter(name, `expected an integer from ${min} to ${max}, got ${quote(raw)}`);
  const value = Number(raw);
  if (value < min || value > max) throw invalidParameter(name, `expected an integer from ${min} to ${max}, got ${quote(raw)}`);
  return value;
}

/**
 * Refuses a parameter that is not valid percent-encoded UTF-8, and parameters
 * outside `allowed`, so a misspelled one is not silently ignored.
 */
export function onlyParams(query: URLSearchParams, allowed: readonly string[]): void {
  if (query instanceof StrictQuery && query.invalid !== null) throw invalidParameter(query.invalid, 'not valid percent-encoded UTF-8');
  for (const name of query.keys()) {
    if (!allowed.includes(name)) throw invalidParameter(name, `unknown parameter; expected one of ${allowed.join(', ')}`);
  }
}

/** Quotes a caller's value for an error message, cut to a readable length. */
export function quote(raw: string): string {
  return JSON.stringify(raw.length > 100 ? raw.slice(0, 100) + '…' : raw);
}
