/**
 * The interface's schemas, written once in zod: the management plane's query strings and JSON
 * bodies, which the routes validate with, and the JSON bodies the service answers (the read
 * tools' parameters are in read-params.ts). The OpenAPI document (openapi.ts) is made from
 * them, so it cannot drift from what the routes accept.
 */
import { z } from 'zod';
import { FILE_STATUSES } from '../../db/files.js';
import { CLAIM, WORKSPACE_NAME } from './params.js';
import { TOOLS } from './read-params.js';

const MAX = Number.MAX_SAFE_INTEGER;

/** GET /v1/workspaces/{ws}/files: the listing's query. */
export const FILES_QUERY = z.strictObject({
  status: z.enum(FILE_STATUSES).optional().describe('Only files in this ingest state.'),
  cursor: z.string().optional().describe("The previous page's nextCursor."),
  limit: z.int().min(1).max(1000).default(100).describe('Most files on the page.'),
});

/** GET /v1/workspaces/{ws}/grants: the listing's query. */
export const GRANTS_QUERY = z.strictObject({
  cursor: z.string().optional().describe("The previous page's nextCursor."),
  limit: z.int().min(1).max(1000).default(100).describe('Most grants on the page.'),
});

/** GET /v1/workspaces/{ws}/audit: the export's query. */
export const AUDIT_QUERY = z.strictObject({
  after: z.string().optional().describe('Only events strictly after this ISO 8601 date-time with a time zone, e.g. 2026-11-21T22:35:02.787Z.'),
  cursor: z.int().min(0).max(MAX).default(0).describe("The previous page's nextCursor."),
  limit: z.int().min(1).max(1000).default(100).describe('Most events on the page.'),
});

/** PUT /v1/workspaces/{ws}/files/{path}: the upload's query. */
export const UPLOAD_QUERY = z.strictObject({
  visibility: z
    .string()
    .optional()
    .describe('Comma-separated visibility claims, "user:<id>" or "group:<id>" (at most 64); omitted or "*": visible to every token.'),
});

/** Routes that take no query parameter. */
export const NO_QUERY = z.strictObject({});

/** POST /v1/workspaces: the body. */
export const CREATE_WORKSPACE_BODY = z.strictObject({
  name: z.string({ error: 'name must be a string' }).regex(WORKSPACE_NAME, {
    error: 'name must be 1-64 characters of a-z, 0-9, "-" or "_", starting and ending with a letter or digit',
  }),
});

/** POST /v1/workspaces/{ws}/tokens: the body (optional). */
export const MINT_TOKEN_BODY = z.strictObject({
  claims: z
    .array(z.string().regex(CLAIM, { error: 'each claim must be "*", "user:<id>" or "group:<id>" (id: 1-128 of A-Z a-z 0-9 . _ @ -)' }))
    .min(1, { error: 'claims must have 1 to 64 items' })
    .max(64, { error: 'claims must have 1 to 64 items' })
    .optional()
    .describe('Visibility claims of the token; default ["*"] (sees every file).'),
  ttlSeconds: z
    .number({ error: 'ttlSeconds must be an integer' })
    .int({ error: 'ttlSeconds must be an integer' })
    .min(60, { error: 'ttlSeconds must be from 60 to 86400' })
    .max(86400, { error: 'ttlSeconds must be from 60 to 86400' })
    .optional()
    .describe('Lifetime in seconds; default 3600.'),
});

/** The JSON bodies the service answers with. */
export const REPLIES = {
  error: z.strictObject({ error: z.string().describe('What went wrong, in a sentence.') }),
  ready: z.strictObject({ ok: z.boolean() }),
  workspaceCreated: z.strictObject({ name: z.string() }),
  workspaces: z.strictObject({
    workspaces: z.array(z.strictObject({ name: z.string(), version: z.number(), createdAt: z.string() })),
  }),
  uploadAccepted: z.strictObject({ path: z.string(), status: z.enum(FILE_STATUSES) }),
  files: z.strictObject({
    files: z.array(
      z.strictObject({
        path: z.string(),
        status: z.enum(FILE_STATUSES),
        sizeBytes: z.number(),
        contentType: z.string(),
        updatedAt: z.string(),
        errorDetail: z.string().nullable(),
        sha256: z
          .string()
          .regex(/^[0-9a-f]{64}$/)
          .describe("SHA-256 of the original's bytes, hex."),
        visibility: z.array(z.string()).nullable().describe("The upload's visibility claims; null: visible to every token."),
      }),
    ),
    nextCursor: z.string().nullable(),
  }),
  token: z.strictObject({
    id: z.uuid(),
    token: z
      .string()
      .regex(/^svc_at_/)
      .describe('The credential; shown only in this response.'),
    claims: z.array(z.string()),
    expiresAt: z.string(),
  }),
  whoami: z.discriminatedUnion('kind', [
    z.strictObject({ kind: z.literal('management_key') }),
    z.strictObject({
      kind: z.literal('token'),
      id: z.uuid(),
      workspace: z.string().describe('The workspace the token is pinned to.'),
      claims: z.array(z.string()),
      expiresAt: z.string(),
    }),
  ]),
  status: z.strictObject({
    workspaces: z
      .array(
        z.strictObject({
          name: z.string(),
          createdAt: z.string(),
          files: z.number(),
          bytes: z.number().describe('Bytes of the originals, as uploaded.'),
          ready: z.number(),
          pending: z.number(),
          error: z.number(),
        }),
      )
      .describe('Every workspace of the account, by name, with its files counted by ingest status.'),
    ingest: z.strictObject({
      pending: z.number().describe("The account's files waiting for ingest."),
      oldestPendingSeconds: z.number().describe("Age of the account's oldest ingest job waiting or running; 0 when none."),
      finished: z
        .array(z.strictObject({ at: z.string(), ready: z.number(), error: z.number() }))
        .describe('Files whose ingest ended, per slot of 5 seconds over the last 5 minutes, oldest first, empty slots included.'),
    }),
    reads: z.strictObject({
      slotSeconds: z.number(),
      slots: z
        .array(
          z.strictObject({
            at: z.string().describe("The slot's start."),
            tools: z
              .partialRecord(z.enum(TOOLS), z.strictObject({ count: z.number(), p99Ms: z.number() }))
              .describe('Per tool called in the slot: the calls, and the upper bound of the latency bucket holding their 99th percentile.'),
          }),
        )
        .describe("This process's read-tool calls (HTTP and MCP) of the account, oldest slot first, empty slots included."),
    }),
    nodes: z
      .array(
        z.strictObject({
          id: z.string(),
          state: z.enum(['active', 'draining', 'stopped', 'dead']),
          alive: z.boolean(),
          seenAt: z.string(),
          copies: z.number().describe("Copies of the account's workspaces the node holds."),
          versionsBehind: z.number().describe('Versions those copies are behind, summed.'),
        }),
      )
      .describe('The nodes of the cluster; empty unless VFS_CLUSTER=on.'),
  }),
  audit: z.strictObject({
    events: z.array(
      z.strictObject({
        id: z.number(),
        actorType: z.string(),
        actorId: z.string(),
        tool: z.string(),
        params: z.unknown().describe('The call parameters as received.'),
        resultCount: z.number().nullable(),
        latencyMs: z.number().nullable(),
        ts: z.string(),
      }),
    ),
    nextCursor: z.string().nullable(),
  }),
  grants: z.strictObject({
    grants: z.array(
      z.strictObject({
        id: z.uuid(),
        clientId: z.string(),
        clientName: z.string().nullable().describe('The name the client registered with; null if none.'),
        claims: z.array(z.string()).describe("The grant's visibility claims: the approving token's, or those chosen with a management key."),
        redirectUri: z.string().describe('Where the client is sent back to with its authorization code.'),
        approvedBy: z.strictObject({ kind: z.enum(['management_key', 'token']), id: z.uuid() }),
        createdAt: z.string(),
        expiresAt: z.string().nullable().describe("When the grant ends with the scoped token that approved it; null for a management key's."),
        lastIssuedAt: z.string().nullable().describe('When the client last got an access token (its code redeemed, or a refresh); null before that.'),
      }),
    ),
    nextCursor: z.string().nullable().describe('Pass as cursor for the next page; null on the last one.'),
  }),
  protectedResource: z
    .looseObject({
      resource: z.string(),
      authorization_servers: z.array(z.string()),
      scopes_supported: z.array(z.string()),
      bearer_methods_supported: z.array(z.string()),
      resource_name: z.string(),
    })
    .describe('OAuth 2.0 Protected Resource Metadata (RFC 9728).'),
  authorizationServer: z
    .looseObject({
      issuer: z.string(),
      authorization_endpoint: z.string(),
      token_endpoint: z.string(),
      registration_endpoint: z.string(),
      revocation_endpoint: z.string(),
      response_types_supported: z.array(z.string()),
      grant_types_supported: z.array(z.string()),
      code_challenge_methods_supported: z.array(z.string()),
      token_endpoint_auth_methods_supported: z.array(z.string()),
      scopes_supported: z.array(z.string()),
      client_id_metadata_document_supported: z.boolean().optional().describe('A client_id may be the https URL of a Client ID Metadata Document.'),
    })
    .describe('OAuth 2.0 Authorization Server Metadata (RFC 8414).'),
  clientRegistered: z
    .looseObject({ client_id: z.string(), client_id_issued_at: z.number(), redirect_uris: z.array(z.string()), token_endpoint_auth_method: z.literal('none') })
    .describe('The registered client (RFC 7591 3.2.1).'),
  oauthTokens: z.strictObject({
    access_token: z.string().regex(/^svc_at_/),
    token_type: z.literal('Bearer'),
    expires_in: z.number(),
    refresh_token: z.string().regex(/^svc_rt_/),
    scope: z.string(),
  }),
  oauthError: z
    .strictObject({ error: z.string(), error_description: z.string().optional() })
    .describe("An OAuth error (RFC 6749 5.2, RFC 7591 3.2.2): the RFC's code and a sentence; a 413, 429 or 5xx carries `error` only."),
};

/** POST /oauth/token: the form's fields (application/x-www-form-urlencoded). */
export const TOKEN_FORM = z.strictObject({
  grant_type: z.enum(['authorization_code', 'refresh_token']),
  client_id: z.string(),
  code: z.string().optional().describe('authorization_code: the code.'),
  redirect_uri: z.string().optional().describe('authorization_code: the redirect URI of the authorization request.'),
  code_verifier: z.string().optional().describe('authorization_code: the PKCE verifier.'),
  refresh_token: z.string().optional().describe('refresh_token: the refresh token, used once.'),
  resource: z.string().optional().describe("The workspace's MCP endpoint URL the grant is for."),
  scope: z.string().optional().describe('vfs:read, the only scope.'),
});

/** POST /oauth/revoke: the form's fields. */
export const REVOKE_FORM = z.strictObject({
  token: z.string().describe('A refresh token (revokes the grant) or an access token (revokes that token).'),
  token_type_hint: z.string().optional(),
  client_id: z.string(),
});

/** POST /oauth/authorize: the form the authorization page posts. */
export const AUTHORIZE_FORM = z.strictObject({
  response_type: z.literal('code'),
  client_id: z.string(),
  redirect_uri: z.string(),
  code_challenge: z.string(),
  code_challenge_method: z.literal('S256'),
  state: z.string().optional(),
  resource: z.string(),
  scope: z.string(),
  csrf: z.string().describe("The page's CSRF token; the page's cookie must hold its nonce."),
  key: z.string().describe("A management key of the workspace's account or a scoped token of the workspace."),
  claims: z.string().optional().describe('Comma-separated visibility claims, with a management key only; default *.'),
  decision: z.enum(['allow', 'deny']),
});

/** GET /oauth/authorize: the authorization request (OAuth 2.1 4.1.1, RFC 8707). */
export const AUTHORIZE_QUERY = z.object({
  response_type: z.literal('code'),
  client_id: z.string(),
  redirect_uri: z.string(),
  code_challenge: z.string().describe('BASE64URL(SHA-256(code_verifier)).'),
  code_challenge_method: z.literal('S256'),
  state: z.string().optional(),
  resource: z.string().describe("The workspace's MCP endpoint URL."),
  scope: z.string().optional().describe('vfs:read (the default).'),
});

/** POST /oauth/register: the client's metadata (RFC 7591 2); other fields are ignored. */
export const REGISTER_BODY = z.looseObject({
  redirect_uris: z.array(z.string()).min(1).max(10).describe('https, or http on 127.0.0.1, [::1] or localhost (any port at use); no fragment.'),
  client_name: z.string().max(200).optional(),
  token_endpoint_auth_method: z.literal('none').optional(),
  grant_types: z.array(z.enum(['authorization_code', 'refresh_token'])).optional(),
  response_types: z.array(z.literal('code')).optional(),
});
