/**
 * Query strings read through zod schemas. A route declares its parameters once, as a zod object
 * of integers, booleans, enums and strings; the same schema is what the OpenAPI document and the
 * MCP tools publish, and what the route validates with here.
 *
 * A query string holds only text, so each value is first read as the type its schema declares,
 * with the rules of params.ts (plain decimal integers, `true`/`false`/`1`/`0` or a bare flag,
 * one value per parameter) and messages that name the parameter; then the schema itself parses
 * the result.
 */
import { z } from 'zod';
import { invalidParameter } from '../../core/errors.js';
import { onlyParams, parseBoundedInt, quote, single } from './params.js';
import { NO_QUERY } from './schemas.js';

/** What one parameter's JSON Schema says about it: enough to read its text. */
interface ParamShape {
  type: 'integer' | 'boolean' | 'string';
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  enum?: string[];
}

/** A query-string reader made from a schema. */
export interface QueryReader<T> {
  /** Reads a query string: INVALID_PARAMETER naming the first bad or unknown parameter. */
  read(query: URLSearchParams): T;
}

/** A reader for the query strings `schema` describes; `schema` is a strict zod object of scalar parameters. */
export function queryReader<S extends z.ZodObject>(schema: S): QueryReader<z.output<S>> {
  const json = z.toJSONSchema(schema, { io: 'input' }) as { properties?: Record<string, ParamShape>; required?: string[] };
  const shapes = Object.entries(json.properties ?? {});
  const required = new Set(json.required ?? []);
  const names = shapes.map(([name]) => name);
  return {
    read(query) {
      onlyParams(query, names);
      const values: Record<string, unknown> = {};
      for (const [name, shape] of shapes) {
        const raw = single(query, name);
        if (raw === undefined) {
          if (required.has(name)) throw invalidParameter(name, 'required, at least 1 character');
          continue;
        }
        values[name] = readValue(name, raw, shape, required.has(name));
      }
      const parsed = schema.safeParse(values);
      if (parsed.success) return parsed.data as z.output<S>;
      const issue = parsed.error.issues[0];
      throw invalidParameter(String(issue.path[0] ?? 'query'), issue.message);
    },
  };
}

function readValue(name: string, raw: string, shape: ParamShape, isRequired: boolean): unknown {
  if (shape.type === 'integer') return parseBoundedInt(name, raw, shape.minimum ?? 0, shape.maximum ?? Number.MAX_SAFE_INTEGER);
  if (shape.type === 'boolean') {
    if (raw === '' || raw === 'true' || raw === '1') return true;
    if (raw === 'false' || raw === '0') return false;
    throw invalidParameter(name, `expected true, false, 1 or 0, got ${quote(raw)}`);
  }
  if (shape.enum !== undefined && !shape.enum.includes(raw)) throw invalidParameter(name, `expected one of ${shape.enum.join(', ')}, got ${quote(raw)}`);
  if (raw === '' && (shape.minLength ?? 0) > 0) throw invalidParameter(name, isRequired ? 'required, at least 1 character' : 'must not be empty');
  if (shape.maxLength !== undefined && raw.length > shape.maxLength) throw invalidParameter(name, `longer than ${shape.maxLength} characters`);
  return raw;
}

/** The reader of routes that take no query parameter: any parameter is refused, naming it. */
export const noQuery = queryReader(NO_QUERY);
