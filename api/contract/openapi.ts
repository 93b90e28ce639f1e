/**
 * The OpenAPI 3.1 description of the service, served at GET /v1/openapi.json. It is made at
 * start from the zod schemas the routes validate with (schemas.ts); this file only says which
 * route takes which schema and answers which statuses (SPEC.md sections 4 and 7).
 */
import { z } from 'zod';
import { MAX_PATH_BYTES } from '../../core/paths.js';
import { READ_PARAMS, type Tool } from './read-params.js';
import {
  AUDIT_QUERY,
  AUTHORIZE_FORM,
  AUTHORIZE_QUERY,
  CREATE_WORKSPACE_BODY,
  FILES_QUERY,
  GRANTS_QUERY,
  MINT_TOKEN_BODY,
  NO_QUERY,
  REGISTER_BODY,
  REPLIES,
  REVOKE_FORM,
  TOKEN_FORM,
  UPLOAD_QUERY,
} from './schemas.js';
import { WORKSPACE_NAME } from './params.js';

/** A JSON Schema object. */
type JsonSchema = Record<string, unknown>;

/** What a route answers with one status. */
interface Reply {
  description: string;
  /** A JSON body of this schema; `error` for the management error body. */
  json?: z.ZodType | 'error';
  /** A plain-text body. */
  text?: true;
  /** An HTML page. */
  html?: true;
  /** Headers the answer carries. */
  headers?: string[];
}

/** Who may call a route: `credential` is any management key or scoped token, answering JSON. */
type Access = 'management' | 'credential' | 'read' | 'mcp' | 'public';

/** One operation of the document. */
interface Route {
  method: 'get' | 'post' | 'put' | 'delete';
  path: string;
  id: string;
  summary: string;
  access: Access;
  query?: z.ZodObject;
  body?: { json: z.ZodType; required: boolean } | { form: z.ZodObject } | 'bytes' | 'json-rpc';
  replies: Record<number, Reply>;
}

const error = (description: string, headers?: string[]): Reply => ({ description, json: 'error', headers });
const text = (description: string, headers?: string[]): Reply => ({ description, text: true, headers });
const jsonRpc = (description: string, headers?: string[]): Reply => ({ description, json: JSON_RPC, headers });
const oauthError = (description: string, headers?: string[]): Reply => ({ description, json: REPLIES.oauthError, headers });
const page = (description: string, headers?: string[]): Reply => ({ description, html: true, headers });

/** The answer of every OAuth route when VFS_OAUTH=off: the JSON 404 of an unknown route. */
const OAUTH_OFF: Reply = error('OAuth is off (VFS_OAUTH=off).');

/** The answers of the JSON OAuth endpoints beside their own. */
const OAUTH_ERRORS: Record<number, Reply> = {
  400: oauthError('An invalid request: `error` is the RFC 6749 5.2 code.'),
  404: OAUTH_OFF,
  413: oauthError('The body is over 16 KiB.'),
  500: oauthError('Internal error.'),
  503: oauthError('A database is unavailable, or the service is stopping; retry.', ['Retry-After']),
};

/** A JSON-RPC 2.0 message: a result or an error (MCP's own schemas define what is inside). */
const JSON_RPC = z.looseObject({ jsonrpc: z.literal('2.0') }).describe('A JSON-RPC 2.0 response, as the MCP specification defines.');

/** The answers every management route may give beside its own. */
const MANAGEMENT_ERRORS: Record<number, Reply> = {
  401: error('Missing, malformed or unrecognized bearer credential.'),
  403: error('A scoped token was used on a management route, or a plan quota is reached.'),
  429: error('Too many failed authentication attempts from the address.', ['Retry-After']),
  500: error('Internal error.'),
  503: error('A database or blob storage is unavailable, or the service is stopping; retry.', ['Retry-After']),
};

/** The answers every route open to any credential may give beside its own. */
const CREDENTIAL_ERRORS: Record<number, Reply> = {
  401: error('Missing, malformed or unrecognized bearer credential.', ['WWW-Authenticate']),
  429: error('Too many requests for the credential, or too many failed authentication attempts from the address.', ['Retry-After']),
  500: error('Internal error.'),
  503: error('A database is unavailable, or the service is stopping; retry.', ['Retry-After']),
};

/** The answers every read tool may give beside its own. */
const READ_ERRORS: Record<number, Reply> = {
  400: text('Invalid query parameter; the message names it.'),
  401: text('Missing, malformed or unrecognized bearer credential.', ['WWW-Authenticate']),
  404: text('No such workspace, the token is pinned to another one, or (cat) no such file.'),
  429: text('Read rate limit reached for the credential or account, or too many failed authentication attempts.', ['Retry-After']),
  500: text('Internal error.'),
  503: text('A database is unavailable or the service is stopping; retry.', ['Retry-After']),
};

const TOOL_SUMMARIES: Record<Tool, string> = {
  ls: 'List the immediate children of a directory (directories first), with text sizes; at most 1000 entries.',
  find: 'Find files by glob over their paths, most recently updated first.',
  cat: "Read a file's text with line numbers, from `offset`, at most `limit` lines.",
  grep: 'Search file contents with an RE2 regular expression.',
};

const ROUTES: Route[] = [
  {
    method: 'get',
    path: '/healthz',
    id: 'healthz',
    summary: 'Liveness probe.',
    access: 'public',
    replies: { 200: text('The process answers: `ok`.') },
  },
  {
    method: 'get',
    path: '/readyz',
    id: 'readyz',
    summary: 'Readiness probe: both database connections are available.',
    access: 'public',
    replies: { 200: { description: 'Ready.', json: REPLIES.ready }, 503: { description: 'A database connection is unavailable.', json: REPLIES.ready } },
  },
  {
    method: 'get',
    path: '/v1/openapi.json',
    id: 'openapi',
    summary: 'This document.',
    access: 'public',
    replies: { 200: { description: 'The OpenAPI 3.1 document.', json: z.looseObject({ openapi: z.string() }) } },
  },
  {
    method: 'post',
    path: '/v1/workspaces',
    id: 'createWorkspace',
    summary: 'Create a workspace.',
    access: 'management',
    body: { json: CREATE_WORKSPACE_BODY, required: true },
    replies: {
      201: { description: 'Created.', json: REPLIES.workspaceCreated },
      400: error('Missing or malformed name, or a body that is not that JSON object.'),
      403: error('Workspace quota reached for the plan, or a scoped token was used.'),
      409: error('A workspace of that name exists.'),
      413: error('The JSON body is too large.'),
    },
  },
  {
    method: 'get',
    path: '/v1/workspaces',
    id: 'listWorkspaces',
    summary: "List the account's workspaces.",
    access: 'management',
    query: NO_QUERY,
    replies: { 200: { description: 'The workspaces.', json: REPLIES.workspaces }, 400: error('A query parameter was given.') },
  },
  {
    method: 'delete',
    path: '/v1/workspaces/{ws}',
    id: 'deleteWorkspace',
    summary: 'Delete a workspace, its files and tokens.',
    access: 'management',
    replies: { 204: { description: 'Deleted.' }, 404: error('No such workspace.') },
  },
  {
    method: 'put',
    path: '/v1/workspaces/{ws}/files/{path}',
    id: 'uploadFile',
    summary: 'Upload (or replace) a file; ingest is asynchronous.',
    access: 'management',
    query: UPLOAD_QUERY,
    body: 'bytes',
    replies: {
      202: { description: 'Accepted; ingestion is enqueued.', json: REPLIES.uploadAccepted },
      400: error('Undecodable or invalid path, or a malformed visibility.'),
      403: error('File-count or account-storage limit reached, or a scoped token was used.'),
      404: error('No such workspace.'),
      413: error("The file exceeds the plan's per-file byte limit."),
    },
  },
  {
    method: 'delete',
    path: '/v1/workspaces/{ws}/files/{path}',
    id: 'deleteFile',
    summary: 'Delete a file.',
    access: 'management',
    query: NO_QUERY,
    replies: { 204: { description: 'Deleted.' }, 400: error('Undecodable or invalid path.'), 404: error('No such workspace or file.') },
  },
  {
    method: 'get',
    path: '/v1/workspaces/{ws}/files',
    id: 'listFiles',
    summary: 'List files with their ingest status, by path, keyset-paginated.',
    access: 'management',
    query: FILES_QUERY,
    replies: {
      200: { description: 'A page of files.', json: REPLIES.files },
      400: error('Invalid status filter, cursor, limit or unknown parameter.'),
      404: error('No such workspace.'),
    },
  },
  {
    method: 'post',
    path: '/v1/workspaces/{ws}/tokens',
    id: 'mintToken',
    summary: 'Mint a scoped read-only token pinned to the workspace.',
    access: 'management',
    body: { json: MINT_TOKEN_BODY, required: false },
    replies: {
      201: { description: 'Minted; the token appears only here.', json: REPLIES.token },
      400: error('Malformed claims or ttlSeconds.'),
      404: error('No such workspace.'),
      413: error('The JSON body is too large.'),
    },
  },
  {
    method: 'delete',
    path: '/v1/tokens/{id}',
    id: 'revokeToken',
    summary: 'Revoke a token (idempotent).',
    access: 'management',
    replies: { 204: { description: 'Revoked.' }, 404: error('Unknown, foreign or malformed token id.') },
  },
  {
    method: 'get',
    path: '/v1/workspaces/{ws}/audit',
    id: 'exportAudit',
    summary: "Export the workspace's audit log, keyset-paginated.",
    access: 'management',
    query: AUDIT_QUERY,
    replies: {
      200: { description: 'A page of events.', json: REPLIES.audit },
      400: error('Invalid after, cursor, limit or unknown parameter.'),
      404: error('No such workspace.'),
    },
  },
  {
    method: 'get',
    path: '/v1/whoami',
    id: 'whoami',
    summary: 'Who the credential is: a management key, or a scoped token with its workspace, claims and expiry.',
    access: 'credential',
    query: NO_QUERY,
    replies: { 200: { description: 'The caller.', json: REPLIES.whoami }, 400: error('A query parameter was given.') },
  },
  {
    method: 'get',
    path: '/v1/status',
    id: 'status',
    summary:
      "The account at a glance: its workspaces' files by ingest status, the ingest queue and what it finished lately, this process's recent read-tool calls, and the nodes of a cluster.",
    access: 'management',
    query: NO_QUERY,
    replies: { 200: { description: 'The status.', json: REPLIES.status }, 400: error('A query parameter was given.') },
  },
  ...(['ls', 'find', 'cat', 'grep'] as const).map(
    (tool): Route => ({
      method: 'get',
      path: `/v1/workspaces/{ws}/${tool}`,
      id: tool,
      summary: TOOL_SUMMARIES[tool],
      access: 'read',
      query: READ_PARAMS[tool],
      replies: { 200: text('The tool\'s output; a last line starting with "[" says how to continue a cut one.') },
    }),
  ),
  {
    method: 'post',
    path: '/v1/workspaces/{ws}/mcp',
    id: 'mcp',
    summary: 'MCP endpoint (Streamable HTTP, stateless, JSON answers): the four read tools and the files as resources.',
    access: 'mcp',
    body: 'json-rpc',
    replies: {
      200: jsonRpc('The JSON-RPC response.'),
      202: { description: 'A notification or response was accepted; no body.' },
      400: jsonRpc('No JSON, a JSON-RPC batch, or a request the protocol refuses.'),
      401: jsonRpc(
        'Missing, malformed or unrecognized bearer credential, or an OAuth access token of another workspace. With OAuth on, WWW-Authenticate names the resource metadata (RFC 9728).',
        ['WWW-Authenticate'],
      ),
      403: jsonRpc('The Origin header is not allowed.'),
      404: jsonRpc('No such workspace, or the token is pinned to another one.'),
      406: jsonRpc('The Accept header allows no JSON.'),
      413: jsonRpc('The JSON body is too large.'),
      415: jsonRpc('The body is not application/json.'),
      429: jsonRpc('Read rate limit reached (tools/call, resources/read), or too many failed authentication attempts.', ['Retry-After']),
      500: jsonRpc('Internal error.'),
      503: jsonRpc('A database is unavailable or the service is stopping; retry.', ['Retry-After']),
    },
  },
  {
    method: 'get',
    path: '/v1/workspaces/{ws}/grants',
    id: 'listGrants',
    summary: "The workspace's live OAuth grants, oldest first, keyset-paginated: which client, with which claims, approved by which credential.",
    access: 'management',
    query: GRANTS_QUERY,
    replies: {
      200: { description: 'A page of grants.', json: REPLIES.grants },
      400: error('Invalid cursor, limit or unknown parameter.'),
      404: error('No such workspace.'),
    },
  },
  {
    method: 'delete',
    path: '/v1/grants/{id}',
    id: 'revokeGrant',
    summary: 'Revoke an OAuth grant with its refresh and access tokens, effective on the next request on every node (idempotent).',
    access: 'management',
    replies: { 204: { description: 'Revoked.' }, 404: error('Unknown, foreign or malformed grant id.') },
  },
  {
    method: 'get',
    path: '/.well-known/oauth-protected-resource/v1/workspaces/{ws}/mcp',
    id: 'protectedResourceMetadata',
    summary:
      "The MCP endpoint's OAuth protected-resource metadata (RFC 9728), for any valid workspace name; its authorization_servers name the company's issuer (VFS_OAUTH_ISSUER) first, then the built-in server.",
    access: 'public',
    replies: {
      200: { description: 'The metadata.', json: REPLIES.protectedResource },
      404: error('An invalid workspace name, or neither VFS_OAUTH=on nor VFS_OAUTH_ISSUER.'),
    },
  },
  {
    method: 'get',
    path: '/.well-known/oauth-authorization-server',
    id: 'authorizationServerMetadata',
    summary: "The built-in authorization server's metadata (RFC 8414).",
    access: 'public',
    replies: { 200: { description: 'The metadata.', json: REPLIES.authorizationServer }, 404: OAUTH_OFF },
  },
  {
    method: 'post',
    path: '/oauth/register',
    id: 'registerClient',
    summary: 'Dynamic client registration (RFC 7591) of a public client.',
    access: 'public',
    body: { json: REGISTER_BODY, required: true },
    replies: {
      ...OAUTH_ERRORS,
      201: { description: 'Registered.', json: REPLIES.clientRegistered },
      400: oauthError('invalid_redirect_uri or invalid_client_metadata.'),
      429: oauthError('Too many registrations from the address.', ['Retry-After']),
    },
  },
  {
    method: 'get',
    path: '/oauth/authorize',
    id: 'authorize',
    summary: 'The authorization page: a person approves the client with an access key of the workspace.',
    access: 'public',
    query: AUTHORIZE_QUERY,
    replies: {
      200: page('The page, with its CSRF cookie.', ['Set-Cookie', 'Content-Security-Policy']),
      400: page(
        'Any error of the request (its RFC 6749 code on the page): shown, never redirected. A client metadata document (an https client_id) that cannot be fetched or is invalid: invalid_client.',
      ),
      404: OAUTH_OFF,
      500: page('Internal error.'),
      503: page('A database is unavailable; retry.', ['Retry-After']),
    },
  },
  {
    method: 'post',
    path: '/oauth/authorize',
    id: 'authorizeDecision',
    summary: "The page's form: allow (with the key) or deny.",
    access: 'public',
    body: { form: AUTHORIZE_FORM },
    replies: {
      303: { description: 'Back to the redirect URI: code, state and iss; or error=access_denied.', headers: ['Location'] },
      400: page('A malformed form, or malformed claims (the page again).'),
      401: page('The key cannot give access to the workspace: the page again, nothing issued.'),
      403: page('No valid CSRF token and cookie: nothing issued.'),
      404: OAUTH_OFF,
      413: page('The form is over 16 KiB.'),
      429: page('Too many failed authentication attempts from the address.', ['Retry-After']),
      500: page('Internal error.'),
      503: page('A database is unavailable; retry.', ['Retry-After']),
    },
  },
  {
    method: 'post',
    path: '/oauth/token',
    id: 'token',
    summary: 'The token endpoint: an authorization code or a refresh token for an access token and a new refresh token.',
    access: 'public',
    body: { form: TOKEN_FORM },
    replies: {
      ...OAUTH_ERRORS,
      200: { description: 'The tokens.', json: REPLIES.oauthTokens, headers: ['Cache-Control'] },
      401: oauthError('invalid_client: an unknown client_id, or a client metadata document that cannot be fetched or is invalid.'),
      429: oauthError('Too many token and revocation requests from the address.', ['Retry-After']),
    },
  },
  {
    method: 'post',
    path: '/oauth/revoke',
    id: 'revoke',
    summary: 'Token revocation (RFC 7009): a refresh token revokes its grant, an access token itself.',
    access: 'public',
    body: { form: REVOKE_FORM },
    replies: {
      ...OAUTH_ERRORS,
      200: { description: 'Revoked, or not a token of this client: the same answer.' },
      401: oauthError('invalid_client: an unknown client_id, or a client metadata document that cannot be fetched or is invalid.'),
      429: oauthError('Too many token and revocation requests from the address.', ['Retry-After']),
    },
  },
];

/** The document, made once. */
let document: JsonSchema | null = null;

/** The OpenAPI 3.1 document of every route (SPEC.md section 9: version 1.0.0). */
export function openApiDocument(): JsonSchema {
  document ??= build();
  return document;
}

function build(): JsonSchema {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const route of ROUTES) {
    paths[route.path] ??= {};
    paths[route.path][route.method] = operation(route);
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'agent-vfs',
      version: '1.0.0',
      description:
        'A hosted, multi-tenant, read-only virtual filesystem for AI agents. Operators manage workspaces, files, scoped tokens and the audit log with a management key (svc_sk_...); agents call the read tools ls, find, cat and grep (plain text) with the key or a scoped token (svc_at_...).',
    },
    servers: [{ url: '/' }],
    paths,
    components: {
      schemas: { Error: schema(REPLIES.error) },
      securitySchemes: {
        managementKey: { type: 'http', scheme: 'bearer', description: 'A management key, svc_sk_...: the whole account.' },
        scopedToken: {
          type: 'http',
          scheme: 'bearer',
          description: 'A scoped read-only token, svc_at_...: the read tools of one workspace, and GET /v1/whoami.',
        },
        oauth: {
          type: 'oauth2',
          description:
            "OAuth 2.1 with PKCE (S256) and resource indicators, for MCP clients: the access token (svc_at_...) is accepted on its workspace's MCP endpoint only.",
          flows: {
            authorizationCode: {
              authorizationUrl: '/oauth/authorize',
              tokenUrl: '/oauth/token',
              refreshUrl: '/oauth/token',
              scopes: { 'vfs:read': "Read the workspace's files through the MCP tools." },
            },
          },
        },
      },
    },
  };
}

const SECURITY: Record<Access, unknown[]> = {
  management: [{ managementKey: [] }],
  credential: [{ managementKey: [] }, { scopedToken: [] }],
  read: [{ managementKey: [] }, { scopedToken: [] }],
  mcp: [{ managementKey: [] }, { scopedToken: [] }, { oauth: ['vfs:read'] }],
  public: [],
};

function operation(route: Route): Record<string, unknown> {
  const parameters = [...pathParameters(route.path), ...queryParameters(route.query)];
  const errors: Record<number, Reply> = { management: MANAGEMENT_ERRORS, credential: CREDENTIAL_ERRORS, read: READ_ERRORS, mcp: {}, public: {} }[route.access];
  const replies = { ...errors, ...route.replies };
  const responses: Record<string, unknown> = {};
  for (const status of Object.keys(replies).sort()) responses[status] = response(replies[Number(status)]);
  return {
    operationId: route.id,
    summary: route.summary,
    security: SECURITY[route.access],
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(route.body === undefined ? {} : { requestBody: requestBody(route.body) }),
    responses,
  };
}

function pathParameters(path: string): unknown[] {
  const id = path.startsWith('/v1/grants/') ? 'The grant id, as the grant listing gives it.' : 'The token id returned at mint.';
  const described: Record<string, { description: string; schema: JsonSchema }> = {
    ws: { description: 'Workspace name.', schema: { type: 'string', pattern: WORKSPACE_NAME.source } },
    path: {
      description: `File path inside the workspace, at most ${MAX_PATH_BYTES} bytes of UTF-8; it may contain "/" (the whole trailing part of the URL), percent-encoded.`,
      schema: { type: 'string', minLength: 1 },
    },
    id: { description: id, schema: { type: 'string', format: 'uuid' } },
  };
  return [...path.matchAll(/\{(\w+)\}/g)].map(([, name]) => ({ name, in: 'path', required: true, ...described[name] }));
}

function queryParameters(query: z.ZodObject | undefined): unknown[] {
  if (query === undefined) return [];
  const json = schema(query, 'input') as { properties?: Record<string, JsonSchema>; required?: string[] };
  return Object.entries(json.properties ?? {}).map(([name, property]) => {
    const { description, ...rest } = property;
    return { name, in: 'query', required: json.required?.includes(name) ?? false, description, schema: rest };
  });
}

function requestBody(body: NonNullable<Route['body']>): unknown {
  if (body === 'bytes') {
    return {
      required: true,
      description: 'The file as raw bytes; its Content-Type is stored and echoed on reads (default application/octet-stream).',
      content: { '*/*': { schema: { type: 'string', contentMediaType: 'application/octet-stream' } } },
    };
  }
  if (typeof body === 'object' && 'form' in body) {
    return { required: true, content: { 'application/x-www-form-urlencoded': { schema: schema(body.form, 'input') } } };
  }
  if (body === 'json-rpc') {
    return { required: true, content: { 'application/json': { schema: schema(z.looseObject({ jsonrpc: z.literal('2.0'), method: z.string() })) } } };
  }
  return { required: body.required, content: { 'application/json': { schema: schema(body.json, 'input') } } };
}

function response(reply: Reply): unknown {
  const headers = reply.headers === undefined ? undefined : Object.fromEntries(reply.headers.map((name) => [name, { schema: { type: 'string' } }]));
  let content: unknown;
  if (reply.json === 'error') content = { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } };
  else if (reply.json !== undefined) content = { 'application/json': { schema: schema(reply.json) } };
  else if (reply.text) content = { 'text/plain': { schema: { type: 'string' } } };
  else if (reply.html) content = { 'text/html': { schema: { type: 'string' } } };
  return { description: reply.description, ...(headers === undefined ? {} : { headers }), ...(content === undefined ? {} : { content }) };
}

/** A zod schema as JSON Schema 2020-12 (OpenAPI 3.1's dialect), without its `$schema`. */
function schema(type: z.ZodType, io: 'input' | 'output' = 'output'): JsonSchema {
  const { $schema: _, ...rest } = z.toJSONSchema(type, { io, unrepresentable: 'any' }) as JsonSchema;
  return rest;
}
