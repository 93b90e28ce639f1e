/**
 * `ls|find|cat|grep WORKSPACE ARG [options]`: the four read tools, printing
 * their text exactly as the service serves it, which is what an agent sees.
 * ARG is the path for `ls` and `cat` and the pattern for `find` and `grep`;
 * every other parameter is an option named like the query parameter.
 */
import { z } from 'zod';
import { READ_PARAMS, type Tool } from '../api/contract/read-params.js';
import { type ApiClient, errorText } from './client.js';
import { httpError } from './errors.js';
import type { Output } from './output.js';

export type { Tool } from '../api/contract/read-params.js';

/** One query parameter of a tool, as a command-line option. */
export interface ToolParam {
  /** The query parameter's name, e.g. `head_limit` or `-A`. */
  name: string;
  /** Commander's flags, e.g. `--head-limit <n>` or `-A <n>`. */
  flags: string;
  /** Another spelling of the long flag, e.g. `--head_limit <n>` (the query parameter's own). */
  alias?: string;
  kind: 'string' | 'int' | 'bool';
  description: string;
}

/** A tool on the command line: what it does, its positional argument and its options. */
export interface ToolSpec {
  description: string;
  /** The query parameter the positional argument fills: the pattern where the tool takes one, else the path. */
  arg: { name: string; required: boolean; description: string };
  params: ToolParam[];
}

/** What `--help` says each tool does (its parameters describe themselves in READ_PARAMS). */
const DESCRIPTIONS: Record<Tool, string> = {
  ls: 'list the immediate children of a directory (or one file)',
  find: 'find files by a glob over their paths',
  cat: "read a file's text with line numbers",
  grep: 'search file contents with an RE2 regular expression',
};

/** A parameter as z.toJSONSchema writes it (input side). */
interface JsonParam {
  type?: string;
  description?: string;
}

/** Each tool's positional argument and options, made from its parameters' schema (READ_PARAMS). */
export const TOOLS: Record<Tool, ToolSpec> = Object.fromEntries(
  (Object.keys(DESCRIPTIONS) as Tool[]).map((tool) => {
    const schema = z.toJSONSchema(READ_PARAMS[tool], { io: 'input' }) as { properties: Record<string, JsonParam>; required?: string[] };
    const argName = 'pattern' in schema.properties ? 'pattern' : 'path';
    const arg = { name: argName, required: schema.required?.includes(argName) === true, description: schema.properties[argName].description ?? '' };
    const params = Object.entries(schema.properties)
      .filter(([name]) => name !== argName)
      .map(([name, param]) => toolParam(name, param));
    return [tool, { description: DESCRIPTIONS[tool], arg, params }];
  }),
) as Record<Tool, ToolSpec>;

/** The option of one query parameter: `-A <n>` as it is, `head_limit` as `--head-limit <n>` with `--head_limit <n>` beside it. */
function toolParam(name: string, param: JsonParam): ToolParam {
  const kind = param.type === 'boolean' ? 'bool' : param.type === 'integer' ? 'int' : 'string';
  if (kind === 'string' && param.type !== 'string') throw new Error(`read parameter ${name} has type ${param.type}, which the command line cannot take`);
  const placeholder = kind === 'bool' ? '' : kind === 'int' ? ' <n>' : ` <${name.replaceAll('_', '-')}>`;
  const description = param.description ?? '';
  if (name.startsWith('-')) return { name, flags: `${name}${placeholder}`, kind, description };
  const long = name.replaceAll('_', '-');
  return { name, flags: `--${long}${placeholder}`, alias: long === name ? undefined : `--${name}${placeholder}`, kind, description };
}

/** Calls a read tool with its query parameters and writes its text to stdout (inside `{"text": …}` with --json). */
export async function runTool(client: ApiClient, out: Output, tool: Tool, workspace: string, query: URLSearchParams): Promise<void> {
  const what = `${tool} in ${workspace}`;
  const res = await client.send({ method: 'GET', path: `/v1/workspaces/${encodeURIComponent(workspace)}/${tool}?${query}`, what });
  if (res.status !== 200) throw httpError(res.status, what, await errorText(res));
  if (out.json) {
    out.line(JSON.stringify({ text: await res.text() }));
    return;
  }
  // Streamed as it arrives: a large cat or grep prints its first lines at once and never sits whole in memory.
  for await (const chunk of res.body) await out.raw(chunk as Buffer);
}
