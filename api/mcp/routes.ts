/**
 * POST /v1/workspaces/{ws}/mcp: the read tools for MCP clients, over MCP's Streamable HTTP
 * transport, stateless (no session), answered in JSON. The official SDK speaks the protocol,
 * both generations: the 2025 revisions (an `initialize` handshake) through its stateless
 * transport, 2026-07-28 (`server/discover`, the version in every request) through
 * `createMcpHandler`; a fresh SDK server per request is bound to the caller. This module adapts
 * our HTTP layer to the SDK's web-standard Request and Response.
 *
 * Before the SDK sees a request, the endpoint answers what the HTTP tools answer: 401 (with
 * `WWW-Authenticate: Bearer`) without a valid credential, 404 for a workspace the caller cannot
 * see, 429 for the failed-authentication lock and, on `tools/call` and `resources/read`, the
 * read rate limits; also 403 for an `Origin` outside VFS_MCP_ALLOWED_ORIGINS (none by default:
 * browsers' pages are refused, command-line clients send no Origin), 413 past the JSON body
 * limit, 400 for a body that is no JSON or is a JSON-RPC batch, 405 for another method.
 */
import {
  createMcpHandler,
  isLegacyRequest,
  type McpRequestContext,
  ProtocolError,
  ProtocolErrorCode,
  ResourceNotFoundError,
  Server,
  WebStandardStreamableHTTPServerTransport,
} from '@modelcontextprotocol/server';
import type { TemplatedApp } from 'uWebSockets.js';
import { VfsError } from '../../core/errors.js';
import { readBody, type RequestContext, send, snapshot } from '../http/context.js';
import { callTool, instructions, isTool, MCP_TOOLS, resourcePath, resourcePrefix } from './tools.js';
import { admitCaller, type Caller, type ReadRouteDeps } from '../read-routes.js';
import { toVfsError } from '../http/respond.js';
import { decodeURIComponentSafe, WORKSPACE_NAME } from '../contract/params.js';

/** What the endpoint needs. */
export interface McpRouteDeps extends ReadRouteDeps {
  maxJsonBytes: number;
  /** The cap on a tool result's characters. */
  mcpMaxChars: number;
  /** Origins (scheme://host[:port]) whose pages may call the endpoint; requests without Origin always may. */
  mcpAllowedOrigins: readonly string[];
  /**
   * With OAuth on, the `WWW-Authenticate` value of a 401 for a workspace name that is valid
   * (RFC 9728 5.1: where its resource metadata is), given whether a credential was sent; null:
   * OAuth is off, and a 401 carries the bare `Bearer`.
   */
  mcpChallenge: ((workspace: string, credentialSent: boolean) => string) | null;
}

const ROUTE = '/v1/workspaces/:ws/mcp';
const SERVER_INFO = { name: 'agent-vfs', version: '1.0.0' };

/** One admitted request, handed to the server factory through the SDK's pass-through `authInfo`. */
interface McpExchange {
  caller: Caller;
  ctx: RequestContext;
}

type AuthInfo = { token: string; clientId: string; scopes: string[]; extra: { exchange: McpExchange } };

/** Registers the endpoint. */
export function registerMcpRoutes(app: TemplatedApp, deps: McpRouteDeps): void {
  const endpoint = new McpEndpoint(deps);
  app.post(ROUTE, (res, req) => {
    const ctx = snapshot(res, req, 1);
    const headers = new Headers();
    req.forEach((name, value) => {
      headers.append(name, value);
    });
    // The body is read from the start: uWS delivers it only to a reader attached before any await.
    const body = readBody(ctx, deps.maxJsonBytes);
    body.catch(() => {});
    void endpoint.serve(ctx, headers, body);
  });
  app.any(ROUTE, (res, req) => {
    const ctx = snapshot(res, req, 1);
    answerError(ctx, new VfsError('METHOD_NOT_ALLOWED', { method: ctx.method, allow: 'POST' }, { allow: 'POST' }));
  });
}

/** The endpoint: our checks, then the SDK's handler for the request's protocol generation. */
class McpEndpoint {
  /** The SDK server of one request, for its caller. */
  private readonly factory: (context: McpRequestContext) => Server;
  /** The SDK's handler of 2026-07-28 requests. */
  private readonly modern: ReturnType<typeof createMcpHandler>;

  constructor(private readonly deps: McpRouteDeps) {
    this.factory = (context) => serverFor(context.authInfo?.extra?.exchange as McpExchange, deps);
    this.modern = createMcpHandler(this.factory, {
      legacy: 'reject',
      maxRequestBodySize: deps.maxJsonBytes,
      onerror: (error) => deps.log('mcp request rejected', error),
    });
  }

  async serve(ctx: RequestContext, headers: Headers, body: Promise<Buffer>): Promise<void> {
    const deps = this.deps;
    let message: unknown;
    let caller: Caller;
    try {
      // SECURITY: a page of another site must not reach the endpoint through a browser (DNS rebinding).
      const origin = headers.get('origin');
      if (origin !== null && !deps.mcpAllowedOrigins.includes(origin)) throw new VfsError('ORIGIN_FORBIDDEN', { origin: origin.slice(0, 200) });
      caller = await admitCaller(ctx, deps, 'mcp');
      const raw = await body;
      try {
        message = JSON.parse(raw.toString('utf8'));
      } catch {
        answerJsonRpc(ctx, 400, -32700, 'Parse error: the body is not JSON');
        return;
      }
      if (Array.isArray(message)) {
        answerJsonRpc(ctx, 400, -32600, 'Invalid Request: JSON-RPC batches are not supported; send one message per request');
        return;
      }
      // Reads count against the rate limits like the HTTP tools; the handshake, listings and ping do not.
      const method = (message as { method?: unknown } | null)?.method;
      if (method === 'tools/call' || method === 'resources/read') await deps.guard.admitRead(caller.principal);
    } catch (error) {
      answerError(ctx, challenged(ctx, toVfsError(error, deps.log, ctx), deps));
      return;
    }
    // Answers are JSON: a client that accepts only JSON is served too (the SDK's transport wants
    // both types named, for the SSE it may choose and never does here).
    const accept = headers.get('accept') ?? '';
    if (/application\/json|\*\/\*/.test(accept) && !accept.includes('text/event-stream')) headers.set('accept', 'application/json, text/event-stream');
    const authInfo: AuthInfo = { token: '', clientId: caller.principal.actorId, scopes: [], extra: { exchange: { caller, ctx } } };
    // The SDK takes the body parsed (`parsedBody`) and never reads the request's own.
    const request = new Request(`http://localhost${ctx.url}`, { method: 'POST', headers });
    let response: Response;
    try {
      response = (await isLegacyRequest(request, message, { maxRequestBodySize: deps.maxJsonBytes }))
        ? await this.serveLegacy(request, message, authInfo)
        : await this.modern.fetch(request, { authInfo, parsedBody: message });
    } catch (error) {
      answerError(ctx, toVfsError(error, deps.log, ctx));
      return;
    }
    const out: Record<string, string> = {};
    response.headers.forEach((value, name) => {
      if (name !== 'content-type' && name !== 'content-length' && name !== 'connection') out[name] = value;
    });
    send(ctx, response.status, response.headers.get('content-type'), Buffer.from(await response.arrayBuffer()), out);
  }

  /** A 2025-era request, on the SDK's stateless transport with JSON answers (no SSE). */
  private async serveLegacy(request: Request, message: unknown, authInfo: AuthInfo): Promise<Response> {
    const server = this.factory({ era: 'legacy', authInfo, requestInfo: request });
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    // Not closed afterwards: a JSON answer comes once every handler of the request has finished,
    // so the pair holds nothing but memory, and closing builds an error with its stack (25 µs).
    return transport.handleRequest(request, { authInfo, parsedBody: message });
  }
}

/** An SDK server for one request of `exchange`'s caller: the four tools and the workspace's files as resources. */
function serverFor(exchange: McpExchange, deps: McpRouteDeps): Server {
  const { caller, ctx } = exchange;
  const workspace = caller.workspace;
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: {}, resources: {} },
    instructions: instructions(workspace, deps.mcpMaxChars),
  });
  const options = {
    maxChars: deps.mcpMaxChars,
    onAbort: (cancel: () => void) => ctx.onAbort.push(cancel),
    where: `${ctx.method} ${ctx.url}`,
  };
  server.setRequestHandler('tools/list', () => ({ tools: MCP_TOOLS.map((t) => ({ ...t })) }));
  server.setRequestHandler('tools/call', async (request) => {
    const { name, arguments: args } = request.params;
    if (!isTool(name))
      throw new ProtocolError(ProtocolErrorCode.InvalidParams, `unknown tool: ${name}; the tools are ${MCP_TOOLS.map((t) => t.name).join(', ')}`);
    const result = await callTool(deps, caller, name, args ?? {}, options);
    return { content: [{ type: 'text', text: result.text }], isError: result.isError };
  });
  server.setRequestHandler('resources/list', () => ({ resources: [] }));
  server.setRequestHandler('resources/templates/list', () => ({
    resourceTemplates: [
      {
        uriTemplate: `${resourcePrefix(workspace)}{+path}`,
        name: 'file',
        title: `A file of workspace ${workspace}`,
        description: 'A file\'s text (extracted text for PDFs and other documents), without line numbers; path without the leading "/".',
        mimeType: 'text/plain',
      },
    ],
  }));
  server.setRequestHandler('resources/read', async (request) => {
    const { uri } = request.params;
    const path = resourcePath(workspace, uri);
    if (path === null) throw new ResourceNotFoundError(uri);
    const result = await callTool(deps, caller, 'cat', { path }, { ...options, resource: true });
    if (result.isError) throw new ProtocolError(ProtocolErrorCode.ResourceNotFound, result.text, { uri });
    return { contents: [{ uri, mimeType: 'text/plain', text: result.text }] };
  });
  return server;
}

/**
 * A 401 with OAuth's challenge (when OAuth is on and the workspace name is valid): where the
 * resource's metadata is, the scope, and `invalid_token` when a credential was sent (RFC 6750 3.1).
 */
function challenged(ctx: RequestContext, error: VfsError, deps: McpRouteDeps): VfsError {
  if (error.status !== 401 || deps.mcpChallenge === null) return error;
  const workspace = decodeURIComponentSafe(ctx.params[0]);
  if (!WORKSPACE_NAME.test(workspace)) return error;
  const challenge = deps.mcpChallenge(workspace, ctx.authorization !== '');
  return new VfsError(error.code, error.params, { ...error.headers, 'www-authenticate': challenge });
}

/** Answers an HTTP-level error with its status and headers, as a JSON-RPC error MCP clients can read. */
function answerError(ctx: RequestContext, error: VfsError): void {
  answerJsonRpc(ctx, error.status, -32000, error.message, error.headers);
}

function answerJsonRpc(ctx: RequestContext, status: number, code: number, message: string, headers: Record<string, string> = {}): void {
  send(ctx, status, 'application/json', JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }), headers);
}
