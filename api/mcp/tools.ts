/**
 * The four read tools as MCP tools, and files as MCP resources: the schemas agents see, and a
 * call run through the same parameter checks, read pool, visibility and audit as the HTTP
 * tools (read-routes.ts).
 *
 * A tool's arguments become the HTTP tool's query (each value as its string), so a call
 * answers what the HTTP tool answers for the same arguments, errors included, and its audit
 * event records the same `params`. Its text is capped at a line boundary (McpText): past the
 * cap the call is cancelled, and a footer starting with `[` gives the next call.
 */
import { z } from 'zod';
import { VfsError } from '../../core/errors.js';
import type { CatRequest, GrepRequest } from '../../engine/index.js';
import type { ReadCall } from '../../reads/read-protocol.js';
import { auditCall, type Caller, countGrep, parseReadRequest, type ReadRouteDeps, readCallError, type Tool } from '../read-routes.js';
import { isDatabaseUnavailable } from '../http/respond.js';
import { READ_PARAMS } from '../contract/read-params.js';

/** Room kept under the cap for the footer of a cut result. */
const FOOTER_ROOM = 400;

/** The smallest cap an operator may set: a line (cut at 2,000 characters) with its path and prefix, and the footer. */
export const MIN_MCP_MAX_CHARS = 8192;

/** A JSON value (so that a schema is a plain JSON object to the SDK's types). */
type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** What `tools/list` shows of one tool. */
export interface McpToolSpec {
  name: Tool;
  title: string;
  description: string;
  inputSchema: { type: 'object'; properties?: Record<string, { [key: string]: Json }>; required?: string[]; additionalProperties?: boolean };
  annotations: typeof ANNOTATIONS & { title: string };
}

/** Every tool only reads, the same arguments read the same, and nothing outside the workspace. */
const ANNOTATIONS = { readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false } as const;

/** A tool whose input schema is its parameters' (READ_PARAMS), as JSON Schema. */
function tool(name: Tool, title: string, description: string): McpToolSpec {
  const { $schema: _, ...inputSchema } = z.toJSONSchema(READ_PARAMS[name], { io: 'input' }) as McpToolSpec['inputSchema'] & { $schema: string };
  return { name, title, description, inputSchema: { required: [], ...inputSchema }, annotations: { ...ANNOTATIONS, title } };
}

const PATH_NOTE = 'Paths are absolute from the workspace root and start with /.';

/** The tools, in the order `tools/list` gives them. */
export const MCP_TOOLS: readonly McpToolSpec[] = [
  tool(
    'grep',
    'Search file contents',
    'Search the contents of every file under a directory with an RE2 regular expression (no backreferences, no lookaround), ' +
      'line by line as ripgrep does. output_mode files_with_matches (the default) lists matching paths, densest first; ' +
      'content prints matching lines as path:line:text (context lines as path-line-text); count prints path:N per file. ' +
      `A last line starting with [ says how to continue. ${PATH_NOTE}`,
  ),
  tool('find', 'Find files by name', `Find files whose path matches a glob, most recently updated first, one path per line. ${PATH_NOTE}`),
  tool(
    'cat',
    'Read a file',
    "Read a file's text with line numbers (as cat -n), from line `offset`, at most `limit` lines. A last line starting with [ gives the offset to continue from. " +
      `PDFs and other documents are read as their extracted text; grep's line numbers are cat's. ${PATH_NOTE}`,
  ),
  tool(
    'ls',
    'List a directory',
    `List a directory: subdirectories first (ending in /), then files with their text sizes in bytes; at most 1,000 entries. ${PATH_NOTE}`,
  ),
];

const TOOL_NAMES = new Set<string>(MCP_TOOLS.map((t) => t.name));

/** True for the name of one of the four tools. */
export function isTool(name: string): name is Tool {
  return TOOL_NAMES.has(name);
}

/** The server's `instructions`: what the workspace is and how the tools work together. */
export function instructions(workspace: string, maxChars: number): string {
  return [
    `Workspace "${workspace}" of agent-vfs: a read-only filesystem of documents (text, and text extracted from PDFs), shared with you by its owner.`,
    'Locate, then read: find lists files by glob ("**/*.md"); grep searches contents with an RE2 regex (output_mode "content" gives path:line:text, "-i" ignores case, glob or type narrows the files).',
    'Then cat the file with offset near the line grep reported (line numbers agree) and a limit, rather than the whole file. ls shows one directory.',
    `A result holds at most ${maxChars} characters, cut at a line boundary; a last line starting with [ gives the exact next call (its offset or head_limit). A file can also be attached as the resource ${resourcePrefix(workspace)}<path>.`,
  ].join('\n');
}

/** The URI prefix of a workspace's files as resources: `vfs://<workspace>/`, then the path without its leading `/`. */
export function resourcePrefix(workspace: string): string {
  return `vfs://${workspace}/`;
}

/** The file path a resource URI names in `workspace`, or null when it names none there. */
export function resourcePath(workspace: string, uri: string): string | null {
  const prefix = resourcePrefix(workspace);
  if (!uri.startsWith(prefix)) return null;
  try {
    return '/' + decodeURIComponent(uri.slice(prefix.length));
  } catch {
    return null;
  }
}

/** A tool's arguments as the HTTP tool's query: each value as the string a query would carry. */
export function argumentsQuery(args: Record<string, unknown>): URLSearchParams {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(args)) {
    // undefined is how a JSON client leaves an argument out.
    if (value === undefined) continue;
    query.append(name, typeof value === 'string' ? value : JSON.stringify(value));
  }
  return query;
}

/** A tool result's text, and whether it is an error. */
export interface ToolText {
  text: string;
  isError: boolean;
}

/** What a tool call needs beyond the read routes' dependencies. */
export interface McpCallOptions {
  /** The cap on a result's characters. */
  maxChars: number;
  /** Registers what cancels the call if the client goes away. */
  onAbort: (cancel: () => void) => void;
  /** For the log: the request the call came in. */
  where: string;
}

/**
 * Runs one tool call for an admitted caller and audits it before returning: a VfsError the HTTP
 * tool would answer becomes an error result with its message. `resource` reads a file as an MCP
 * resource (a `cat` without line numbers). Throws UNAVAILABLE when the audit log cannot commit.
 */
export async function callTool(
  deps: ReadRouteDeps,
  caller: Caller,
  tool: Tool,
  args: Record<string, unknown>,
  options: McpCallOptions & { resource?: boolean },
): Promise<ToolText> {
  const started = performance.now();
  const query = argumentsQuery(args);
  const audit = auditCall(deps, caller, tool, query, started);
  const answer = async (text: ToolText, resultCount: number | null): Promise<ToolText> => {
    try {
      await audit(resultCount);
    } catch (error) {
      deps.log('audit append failed', error);
      throw new VfsError('UNAVAILABLE', { what: 'the audit log' });
    }
    return text;
  };

  let request: unknown;
  try {
    request = parseReadRequest(tool, query, caller.principal, deps);
  } catch (error) {
    return answer(errorText(error, deps, options.where), null);
  }
  if (options.resource === true) (request as CatRequest).lineNumbers = false;
  try {
    await deps.freshness?.ensure(caller.workspaceId, caller.principal.accountId, caller.workspace);
  } catch (error) {
    return answer(errorText(error, deps, options.where), null);
  }

  const text = new McpText(options.maxChars);
  let call: ReadCall | undefined;
  let stopped = false;
  // ls, cat and a small find run inline: their chunks arrive before `run` returns.
  call = deps.readPool.run(tool, deps.shardDir(caller.workspaceId), request, (data, release) => {
    const more = text.push(data); // decoded before release lets the chunk's memory be reused
    release();
    if (!more && !stopped) {
      stopped = true;
      call?.cancel();
    }
  });
  if (stopped) call.cancel();
  options.onAbort(call.cancel);
  const outcome = await call.outcome;
  if (text.full) {
    const shown = text.shownEntries(tool);
    return answer({ text: text.cut(cutFooter(tool, request, shown, options)), isError: false }, shown);
  }
  if (outcome.kind === 'done') {
    countGrep(deps, outcome.grep);
    return answer({ text: text.whole(), isError: false }, outcome.resultCount);
  }
  const error = await readCallError(options.where, tool, outcome, false, caller, request, deps);
  return answer({ text: error.message, isError: true }, null);
}

/** The message of what a call threw, as the HTTP tool words it (an unexpected error is logged, and internal). */
function errorText(error: unknown, deps: ReadRouteDeps, where: string): ToolText {
  if (error instanceof VfsError) return { text: error.message, isError: true };
  if (isDatabaseUnavailable(error)) return { text: new VfsError('UNAVAILABLE', { what: 'the database' }).message, isError: true };
  deps.log(`${where} failed`, error);
  return { text: new VfsError('INTERNAL').message, isError: true };
}

/** The footer of a result cut at the cap: how many entries it shows and the call that goes on (from the parsed `request`). */
function cutFooter(tool: Tool, request: unknown, shown: number, options: McpCallOptions & { resource?: boolean }): string {
  const head = `[output cut at the ${options.maxChars}-character limit`;
  if (tool === 'cat') {
    const { path, offset = 1, limit } = request as CatRequest;
    if (options.resource === true) return `${head} after ${shown} lines; read on with the cat tool: path=${path}, offset=${offset + shown}]\n`;
    return `${head} after ${shown} lines; continue with offset=${offset + shown}${limit === undefined ? '' : `, limit=${limit - shown}`}]\n`;
  }
  if (tool === 'grep') {
    const { offset = 0, headLimit } = request as GrepRequest;
    return `${head} after ${shown} entries; continue with offset=${offset + shown}${headLimit === undefined ? '' : `, head_limit=${headLimit - shown}`}]\n`;
  }
  if (tool === 'find') return `${head} after ${shown} paths; narrow the pattern or path to see the rest]\n`;
  return `${head} after ${shown} entries; narrow with find]\n`;
}

/**
 * A tool's output gathered as text up to a cap on its characters (UTF-16 code units, as
 * JavaScript and JSON count them). `push` says when the cap is passed, so that the call can
 * stop; `cut` then keeps the whole lines that fit with room for a footer.
 */
export class McpText {
  private readonly decoder = new TextDecoder();
  private text = '';
  /** True once the output passed the cap. */
  full = false;
  private kept = -1;

  constructor(private readonly maxChars: number) {}

  /** Takes a chunk; false once the cap is passed (later chunks are dropped). */
  push(data: Uint8Array): boolean {
    if (this.full) return false;
    this.text += this.decoder.decode(data, { stream: true });
    if (this.text.length > this.maxChars) this.full = true;
    return !this.full;
  }

  /** The whole output (not full). */
  whole(): string {
    return this.text + this.decoder.decode();
  }

  /** Where the kept lines end: after the last newline that leaves room for the footer (at least one line). */
  private keptEnd(): number {
    if (this.kept < 0) {
      const end = this.text.lastIndexOf('\n', this.maxChars - FOOTER_ROOM - 1) + 1;
      this.kept = end > 0 ? end : this.text.indexOf('\n') + 1 || this.text.length;
    }
    return this.kept;
  }

  /** The entries the kept lines show: lines, less the `--` between groups of grep's content. */
  shownEntries(tool: Tool): number {
    const kept = this.text.slice(0, this.keptEnd());
    let lines = 0;
    for (let at = kept.indexOf('\n'); at !== -1; at = kept.indexOf('\n', at + 1)) lines++;
    if (tool !== 'grep') return lines;
    const separators = kept.startsWith('--\n') ? 1 : 0;
    return lines - separators - (kept.match(/\n--\n/g)?.length ?? 0);
  }

  /** The kept lines and `footer`. */
  cut(footer: string): string {
    return this.text.slice(0, this.keptEnd()) + footer;
  }
}
