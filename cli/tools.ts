/**
 * `ls|find|cat|grep WORKSPACE ARG [options]`: the four read tools, printing
 * their text exactly as the service serves it, which is what an agent sees.
 * ARG is the path for `ls` and `cat` and the pattern for `find` and `grep`;
 * every other parameter is an option named like the query parameter.
 */
import { type ApiClient, errorText } from './client.js';
import { httpError } from './errors.js';
import type { Output } from './output.js';

/** A read tool. */
export type Tool = 'ls' | 'find' | 'cat' | 'grep';

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

/** Each tool's positional argument (the query parameter it fills) and its options. */
export const TOOLS: Record<Tool, { arg: { name: string; required: boolean; description: string }; params: ToolParam[]; description: string }> = {
  ls: {
    description: 'list the immediate children of a directory (or one file)',
    arg: { name: 'path', required: false, description: 'directory or file path (default /)' },
    params: [],
  },
  find: {
    description: 'find files by a glob over their paths',
    arg: { name: 'pattern', required: true, description: 'glob, e.g. "**/*.md"' },
    params: [
      { name: 'path', flags: '--path <dir>', kind: 'string', description: 'directory to search under' },
      { name: 'head_limit', flags: '--head-limit <n>', alias: '--head_limit <n>', kind: 'int', description: 'at most n paths' },
    ],
  },
  cat: {
    description: "read a file's text with line numbers",
    arg: { name: 'path', required: true, description: 'file path' },
    params: [
      { name: 'offset', flags: '--offset <line>', kind: 'int', description: 'first line, 1-based' },
      { name: 'limit', flags: '--limit <lines>', kind: 'int', description: 'at most this many lines' },
    ],
  },
  grep: {
    description: 'search file contents with an RE2 regular expression',
    arg: { name: 'pattern', required: true, description: 'RE2 regular expression' },
    params: [
      { name: 'path', flags: '--path <dir>', kind: 'string', description: 'directory to search under' },
      { name: 'glob', flags: '--glob <glob>', kind: 'string', description: 'file name filter, e.g. "*.md"' },
      { name: 'type', flags: '--type <type>', kind: 'string', description: 'file type filter' },
      {
        name: 'output_mode',
        flags: '--output-mode <mode>',
        alias: '--output_mode <mode>',
        kind: 'string',
        description: 'files_with_matches (default), content or count',
      },
      { name: '-i', flags: '-i', kind: 'bool', description: 'case-insensitive' },
      { name: '-n', flags: '-n', kind: 'bool', description: 'line numbers in content output' },
      { name: '-A', flags: '-A <n>', kind: 'int', description: 'lines of context after each match' },
      { name: '-B', flags: '-B <n>', kind: 'int', description: 'lines of context before each match' },
      { name: '-C', flags: '-C <n>', kind: 'int', description: 'lines of context around each match' },
      { name: 'multiline', flags: '--multiline', kind: 'bool', description: 'let the pattern span lines' },
      { name: 'head_limit', flags: '--head-limit <n>', alias: '--head_limit <n>', kind: 'int', description: 'at most n output lines' },
      { name: 'offset', flags: '--offset <n>', kind: 'int', description: 'skip the first n output lines' },
    ],
  },
};

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
