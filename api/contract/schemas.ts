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
};
