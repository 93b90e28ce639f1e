/**
 * Configuration: read once from the environment at start, validated, frozen
 * and passed down. Nothing below the entry points reads `process.env`.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { z } from 'zod';
import { MIN_MCP_MAX_CHARS } from '../api/mcp/tools.js';
import type { HttpChoice } from '../api/http/uws.js';
import { fileURLToPath } from 'node:url';
import { credentialKind } from '../core/credentials.js';
import { DEFAULT_OPEN_SHARDS } from '../engine/shard-reader.js';
import type { SnapshotOptions } from '../ingest/shards/snapshots.js';
import type { StorageSettings } from '../storage/open-store.js';

const port = z.coerce.number().int().min(0).max(65535);
const positiveInt = z.coerce.number().int().min(1);
/** The name of a top-level claim of a JWT (`groups`, or a namespaced `https://example.com/groups`). */
const claimName = z.string().regex(/^[!-~]{1,200}$/, '1-200 printable ASCII characters without spaces: the name of a top-level claim');

const schema = z
  .object({
    PORT: port.default(8080),
    HOST: z.string().min(1).default('0.0.0.0'),
    DATA_DIR: z.string().min(1).default('./data'),
    DATABASE_URL: z.string().url().optional(),
    DATABASE_APP_URL: z.string().url().optional(),
    VFS_BOOTSTRAP_KEY: z
      .string()
      .refine((v) => credentialKind(v) === 'management_key', 'must be a well-formed svc_sk_ key (see `npm run admin -- generate-key`)')
      .optional(),
    VFS_DEFAULT_PLAN: z.string().min(1).default('default'),
    VFS_AUTH_CACHE_SECONDS: z.coerce.number().min(0).max(300).default(30),
    VFS_MAX_JSON_BYTES: positiveInt.default(65536),
    VFS_TRUST_PROXY: z.enum(['true', 'false', '1', '0']).default('false'),
    VFS_AUTH_FAILURES: positiveInt.max(1_000_000).default(20),
    VFS_AUTH_FAILURE_WINDOW_SECONDS: positiveInt.max(86_400).default(60),
    VFS_MANAGEMENT_RATE: positiveInt.max(1_000_000).default(1000),
    VFS_CLUSTER_LIMITS: z.enum(['on', 'off']).optional(),
    VFS_READ_THREADS: positiveInt.max(64).default(2),
    VFS_OPEN_SHARDS: positiveInt.max(100_000).default(DEFAULT_OPEN_SHARDS),
    VFS_GREP_TIMEOUT_SECONDS: z.coerce.number().min(1).max(600).default(30),
    VFS_GREP_V8: z.enum(['on', 'off']).default('on'),
    VFS_GREP_SPLIT_MIN_BYTES: z.coerce
      .number()
      .int()
      .min(0)
      .max(2 ** 40)
      .default(4 * 1024 * 1024),
    VFS_INGEST_LEASE_SECONDS: z.coerce.number().int().min(1).max(3600).default(120),
    VFS_INGEST_MAX_ATTEMPTS: z.coerce.number().int().min(1).max(100).default(5),
    VFS_EXTRACT_THREADS: positiveInt.max(64).default(2),
    VFS_EXTRACT_TIMEOUT_SECONDS: z.coerce.number().min(1).max(3600).default(30),
    VFS_EXTRACT_MEMORY_MB: z.coerce.number().int().min(128).max(65536).default(512),
    VFS_BLOB_SWEEP_SECONDS: z.coerce.number().int().min(0).max(604_800).default(3600),
    VFS_MALLOC_TRIM_SECONDS: z.coerce.number().min(0).max(3600).default(30),
    VFS_SHUTDOWN_GRACE_SECONDS: z.coerce.number().min(0).max(3600).default(30),
    VFS_HTTP: z.enum(['node', 'native']).default('node'),
    VFS_METRICS_PORT: port.optional(),
    VFS_LOG_LEVEL: z.enum(['debug', 'info', 'error', 'silent']).default('info'),
    VFS_MCP_MAX_CHARS: z.coerce.number().int().min(MIN_MCP_MAX_CHARS).max(10_000_000).default(40_000),
    VFS_CLUSTER: z.enum(['on', 'off']).default('off'),
    VFS_NODE_ID: z
      .string()
      .regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, '1-64 of A-Z a-z 0-9 . _ - (not starting with . _ -)')
      .optional(),
    VFS_NODE_HEARTBEAT_SECONDS: z.coerce.number().min(0.1).max(60).default(2),
    VFS_NODE_DEAD_SECONDS: z.coerce.number().min(1).max(3600).default(10),
    VFS_SYNC_WAIT_SECONDS: z.coerce.number().min(0.1).max(600).default(5),
    VFS_DRAIN_SECONDS: z.coerce.number().min(0).max(600).default(5),
    VFS_SHARD_CACHE_BYTES: z.coerce
      .number()
      .int()
      .min(0)
      .max(2 ** 50)
      .default(0),
    VFS_CHANGES_KEEP_SECONDS: z.coerce.number().int().min(60).max(31_536_000).default(86_400),
    VFS_STORAGE_URL: z
      .string()
      .regex(
        /^(?:file:\/\/\/.*|s3:\/\/[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](?:\/.*)?)$/,
        'file:///absolute/path or s3://bucket/prefix (a bucket name of 3-63 of a-z 0-9 . -)',
      )
      .optional(),
    AWS_ENDPOINT_URL_S3: z.string().url().optional(),
    AWS_ENDPOINT_URL: z.string().url().optional(),
    AWS_REGION: z.string().min(1).default('us-east-1'),
    AWS_ACCESS_KEY_ID: z.string().min(1).optional(),
    AWS_SECRET_ACCESS_KEY: z.string().min(1).optional(),
    VFS_S3_PATH_STYLE: z.enum(['true', 'false', '1', '0']).optional(),
    VFS_S3_TIMEOUT_SECONDS: z.coerce.number().min(1).max(600).default(10),
    VFS_SNAPSHOT_CHANGES: z.coerce.number().int().min(0).max(100_000_000).default(1000),
    VFS_SNAPSHOT_SECONDS: z.coerce.number().int().min(0).max(604_800).default(600),
    VFS_MCP_ALLOWED_ORIGINS: z
      .string()
      .default('')
      .transform((v) =>
        v
          .split(',')
          .map((o) => o.trim())
          .filter((o) => o !== ''),
      )
      .refine((list) => list.every((o) => /^https?:\/\/[^/\s]+$/.test(o)), 'a comma-separated list of origins such as https://app.example.com'),
    VFS_PUBLIC_URL: z
      .string()
      .optional()
      .refine((v) => v === undefined || publicUrl(v) !== null, 'an http:// or https:// URL with no path, query or fragment, such as https://vfs.example.com')
      .refine(
        (v) => v === undefined || publicUrl(v) === null || publicUrl(v)!.startsWith('https:') || isLoopbackHost(new URL(v).hostname),
        'must be https (http only on a loopback host: 127.0.0.1, localhost, [::1]): OAuth tokens and keys travel to it',
      ),
    VFS_OAUTH: z.enum(['on', 'off']).default('on'),
    VFS_OAUTH_ACCESS_TTL_SECONDS: z.coerce.number().int().min(60).max(86_400).default(3600),
    VFS_OAUTH_REFRESH_TTL_SECONDS: z.coerce.number().int().min(60).max(31_536_000).default(2_592_000),
    VFS_OAUTH_ISSUER: z
      .string()
      .optional()
      .refine(
        (v) => v === undefined || issuerUrl(v) !== null,
        'an http:// or https:// URL without query or fragment, exactly as the provider writes its `issuer`',
      )
      .refine(
        (v) => v === undefined || issuerUrl(v) === null || v.startsWith('https:') || isLoopbackHost(new URL(v).hostname),
        'must be https (http only on a loopback host: 127.0.0.1, localhost, [::1]): its keys decide who reads',
      ),
    VFS_OAUTH_ISSUER_ACCOUNT: z.string().min(1).max(200).optional(),
    VFS_OAUTH_ISSUER_WORKSPACES_CLAIM: claimName.default('workspaces'),
    VFS_OAUTH_ISSUER_GROUPS_CLAIM: claimName.default('groups'),
    VFS_OAUTH_CLIENT_FETCH_PRIVATE: z.enum(['refuse', 'allow']).default('refuse'),
    VFS_OAUTH_CLIENT_FETCH_CA: z
      .string()
      .min(1)
      .optional()
      .transform((path, ctx) => {
        if (path === undefined) return undefined;
        const pem = readPem(path);
        if (pem === null) ctx.addIssue({ code: 'custom', message: `${path.slice(0, 200)} is not a readable PEM file holding a CERTIFICATE` });
        return pem ?? undefined;
      }),
    VFS_OAUTH_RETENTION_SECONDS: z.coerce.number().int().min(60).max(31_536_000).default(604_800),
  })
  .refine((env) => env.VFS_OAUTH_ISSUER === undefined || env.VFS_OAUTH_ISSUER_ACCOUNT !== undefined, {
    message: "VFS_OAUTH_ISSUER needs VFS_OAUTH_ISSUER_ACCOUNT: the name of the account whose workspaces the issuer's tokens may read",
    path: ['VFS_OAUTH_ISSUER_ACCOUNT'],
  })
  .refine((env) => env.VFS_OAUTH_ISSUER === undefined || env.VFS_PUBLIC_URL !== undefined || isLoopbackHost(env.HOST), {
    message: "VFS_OAUTH_ISSUER needs VFS_PUBLIC_URL when HOST is not loopback: a token's audience is the MCP endpoint's public URL",
    path: ['VFS_PUBLIC_URL'],
  })
  .refine((env) => (env.AWS_ACCESS_KEY_ID === undefined) === (env.AWS_SECRET_ACCESS_KEY === undefined), {
    message: 'AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be set together',
    path: ['AWS_SECRET_ACCESS_KEY'],
  })
  .refine((env) => env.VFS_CLUSTER === 'off' || env.VFS_STORAGE_URL !== undefined, {
    message: "VFS_CLUSTER=on needs VFS_STORAGE_URL: the object store every node shares (each node's data directory is its own)",
    path: ['VFS_CLUSTER'],
  })
  .refine((env) => (env.DATABASE_URL === undefined) === (env.DATABASE_APP_URL === undefined), {
    message: 'DATABASE_URL (owner role) and DATABASE_APP_URL (application role) must be set together',
    path: ['DATABASE_APP_URL'],
  });

/** The service's settings. */
export interface Config {
  /** TCP port of the HTTP server; 0 picks a free one. */
  port: number;
  /** Address to listen on. */
  host: string;
  /** Absolute directory for the embedded database, blobs and shards. */
  dataDir: string;
  /** External PostgreSQL (owner and application role URLs), or null for the embedded default. */
  database: { ownerUrl: string; appUrl: string } | null;
  /** A management key to make sure exists at start (scripted setups). */
  bootstrapKey: string | undefined;
  /** Plan given to the account made at first start. */
  defaultPlan: string;
  /** How long a verified credential is trusted without asking the database; revocations clear it at once. */
  authCacheMs: number;
  /** Largest JSON request body. */
  maxJsonBytes: number;
  /** Trust X-Forwarded-For (right-most entry) as the client address. */
  trustProxy: boolean;
  /** Failed authentications from one address that lock it for the rest of the window. */
  authFailures: number;
  /** The failed-authentication window. */
  authFailureWindowMs: number;
  /** Management-plane requests per second per credential. */
  managementRate: number;
  /**
   * Hold the rate limits and the failed-authentication lock for all service processes on this
   * database (shared state in PostgreSQL, api/gate/shared-limits.ts) rather than per process.
   */
  clusterLimits: boolean;
  /** Read-tool worker threads. */
  readThreads: number;
  /**
   * Shards each thread keeps open (readers on the HTTP and read threads, readers and writers on
   * the ingest thread); a thread closes its least recently used shard to open one more.
   */
  openShards: number;
  /** Longest a grep searches before answering with what it found. */
  grepTimeoutMs: number;
  /**
   * A grep (in content mode, only without head_limit or offset) whose candidates hold at least
   * this many text bytes is split across the idle read threads (ReadPool.run). A further share
   * costs a task hop and a lookup of its candidates, about a millisecond, the time to verify a
   * few MiB. Fit with bench/grep-http.ts and bench/grep-load.ts (docs/benchmarks.md, "The split
   * across read threads").
   */
  grepSplitMinBytes: number;
  /**
   * Let grep's full scans take V8's regex engine where a trial says it is faster, under a time
   * limit (engine/guarded-scan.ts); RE2 alone when false.
   */
  grepV8: boolean;
  /** How long an ingest worker's claim on a job lasts; a job whose worker died is retried after it. */
  ingestLeaseSeconds: number;
  /** Claims after which a file that keeps failing (or killing its extraction process) ends in `error`. */
  ingestMaxAttempts: number;
  /** Extraction processes (files extracted at once). */
  extractThreads: number;
  /** Wall-time cap for extracting one file. */
  extractTimeoutMs: number;
  /** V8 heap cap of each extraction process, MiB. */
  extractMemoryMb: number;
  /** Interval of the sweep of unreferenced blobs (also run at start); 0: only at start. */
  blobSweepMs: number;
  /** Interval at which the allocator's free pages go back to the system (service/allocator.ts); 0: never. */
  mallocTrimMs: number;
  /** How long a stop waits for the requests in flight. */
  shutdownGraceMs: number;
  /**
   * The HTTP server: `node` (default) our node:http implementation of the uWebSockets.js API,
   * which answers every HTTP/1.x client; `native` the first native uWebSockets.js build that loads
   * for this Node.js and glibc (api/http/uws.ts), faster but answering neither pipelined requests
   * nor HTTP/1.0, so only for use behind a proxy that sends neither (nginx, HAProxy).
   */
  http: HttpChoice;
  /** Lowest level of the JSON log lines written to stderr; `debug` adds a line per request. */
  logLevel: 'debug' | 'info' | 'error' | 'silent';
  /** Port of the Prometheus metrics server (`GET /metrics`, on HOST); null: no metrics. 0 picks a free one. */
  metricsPort: number | null;
  /** The cap on an MCP tool result's characters; past it the result is cut at a line boundary with a footer. */
  mcpMaxChars: number;
  /** When a workspace's shard is copied into the object store (ingest/shards/snapshots.ts). */
  snapshot: SnapshotOptions;
  /** Where originals are kept (storage/): the local directory `<dataDir>` by default, or an S3 bucket. */
  storage: StorageSettings;
  /** Origins whose pages may call the MCP endpoint (a request with another Origin header gets 403). */
  mcpAllowedOrigins: readonly string[];
  /** Age after which change-log entries are forgotten (a copy older than the log is compared whole). */
  keepChangesSeconds: number;
  /** Running as one node of several on one database and object store (docs/many-nodes.md); null: alone. */
  cluster: ClusterSettings | null;
  /**
   * The service's public base URL, without a trailing slash (https://vfs.example.com): the OAuth
   * issuer and the origin of every resource it names. null: the URL printed at start
   * (http://HOST:PORT of the listening socket). Never taken from a request's Host header.
   */
  publicUrl: string | null;
  /**
   * The OAuth authorization server and protected-resource metadata (docs/oauth.md); null: off
   * (404s, bare 401 challenges), by VFS_OAUTH=off or because VFS_PUBLIC_URL is unset while the
   * service listens on a host other than loopback or runs as a cluster node (`oauthNotice` then
   * says so).
   */
  oauth: OAuthSettings | null;
  /** Why OAuth is off although VFS_OAUTH=on, logged at start; null otherwise. */
  oauthNotice: string | null;
  /** The company's OpenID provider whose JWT access tokens the MCP endpoint accepts (docs/oauth.md); null: none. */
  issuer: IssuerSettings | null;
}

/** The company's OpenID provider (VFS_OAUTH_ISSUER and its companions). */
export interface IssuerSettings {
  /** The issuer URL, exactly as its discovery document and its tokens' `iss` write it. */
  url: string;
  /** The name of the one account whose workspaces its tokens may read. */
  account: string;
  /** The claim naming the workspaces a token may read (a string or an array of strings). */
  workspacesClaim: string;
  /** The claim whose values become the token's visibility claims `group:<value>`. */
  groupsClaim: string;
}

/** How the built-in authorization server issues tokens. */
export interface OAuthSettings {
  /** Lifetime of an access token (never past the approving token's expiry). */
  accessTtlSeconds: number;
  /** Lifetime of a refresh token; each use rotates it. */
  refreshTtlSeconds: number;
  /** Client metadata documents may be fetched from loopback, private, CGNAT and unique-local addresses (an intranet deployment). */
  clientFetchPrivate: boolean;
  /** PEM certificates trusted for client metadata documents besides the system's roots; undefined: none. */
  clientFetchCa: string | undefined;
  /** How long expired, used or revoked OAuth rows (and clients never used) are kept before the sweep deletes them. */
  retentionSeconds: number;
}

/** The text of a PEM file holding a certificate, or null. */
function readPem(path: string): string | null {
  try {
    const pem = readFileSync(path, 'utf8');
    return pem.includes('-----BEGIN CERTIFICATE-----') ? pem : null;
  } catch {
    return null;
  }
}

/** True for a loopback host name (127.0.0.0/8, localhost, ::1; an IPv6 literal with or without brackets). */
export function isLoopbackHost(host: string): boolean {
  const h = host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** `raw` as an http or https URL without query, fragment or user; null if it is not one. */
function plainHttpUrl(raw: string): URL | null {
  if (!URL.canParse(raw) || raw.includes('?') || raw.includes('#')) return null;
  const url = new URL(raw);
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return null;
  return url.username === '' && url.password === '' ? url : null;
}

/** A public base URL as VFS_PUBLIC_URL takes it (http or https, no path, query or fragment), without the trailing slash; null if it is not one. */
export function publicUrl(raw: string): string | null {
  const url = plainHttpUrl(raw);
  return url !== null && url.pathname === '/' ? url.origin : null;
}

/** An issuer URL as VFS_OAUTH_ISSUER takes it (http or https, a path allowed, no query, fragment or user), unchanged; null if it is not one. */
export function issuerUrl(raw: string): string | null {
  return plainHttpUrl(raw) === null ? null : raw;
}

/** How a node takes part in a cluster. */
export interface ClusterSettings {
  /** This node's id (VFS_NODE_ID); null: the one generated once and kept in the data directory. */
  nodeId: string | null;
  /** How often the node's row is refreshed. */
  heartbeatMs: number;
  /** A node not seen for this long is dead. */
  deadMs: number;
  /** Bytes of shard copies past which cold ones are deleted (0: no budget). */
  cacheBytes: number;
  /** At SIGTERM, how long the node keeps serving with /readyz at 503 before it closes its socket. */
  drainMs: number;
  /** Longest a read waits for this node's copy of the workspace to catch up before answering 503. */
  syncWaitMs: number;
}

/** VFS_STORAGE_URL and the AWS SDK's standard variables as the object store's settings. */
function storageSettings(e: z.infer<typeof schema>, dataDir: string): StorageSettings {
  const url = e.VFS_STORAGE_URL;
  if (url === undefined) return { kind: 'local', root: dataDir };
  if (url.startsWith('file:')) return { kind: 'local', root: fileURLToPath(url) };
  const { hostname: bucket, pathname } = new URL(url);
  const prefix = pathname.replace(/^\/+/, '');
  const endpoint = e.AWS_ENDPOINT_URL_S3 ?? e.AWS_ENDPOINT_URL ?? null;
  const credentials =
    e.AWS_ACCESS_KEY_ID !== undefined && e.AWS_SECRET_ACCESS_KEY !== undefined
      ? { accessKeyId: e.AWS_ACCESS_KEY_ID, secretAccessKey: e.AWS_SECRET_ACCESS_KEY }
      : null;
  return {
    kind: 's3',
    bucket,
    prefix: prefix === '' || prefix.endsWith('/') ? prefix : `${prefix}/`,
    endpoint,
    region: e.AWS_REGION,
    credentials,
    // Non-AWS stores (MinIO, Swift, Ceph) mostly want the bucket in the path.
    pathStyle: e.VFS_S3_PATH_STYLE === undefined ? endpoint !== null : e.VFS_S3_PATH_STYLE === 'true' || e.VFS_S3_PATH_STYLE === '1',
    timeoutMs: e.VFS_S3_TIMEOUT_SECONDS * 1000,
  };
}

/** Parses the environment into a frozen Config, or throws naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv): Readonly<Config> {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
    throw new Error(`invalid configuration: ${problems}`);
  }
  const e = parsed.data;
  // SECURITY: without VFS_PUBLIC_URL the issuer would be http://HOST:PORT, which no client
  // elsewhere reaches (and is not https); and each node of a cluster would be an issuer of its
  // own, its tokens bound to a resource the other nodes do not serve, so a client sent to
  // another node would be refused. OAuth stays off in either case.
  const oauthNeedsUrl = e.VFS_PUBLIC_URL === undefined && (!isLoopbackHost(e.HOST) || e.VFS_CLUSTER === 'on');
  return Object.freeze({
    port: e.PORT,
    host: e.HOST,
    dataDir: resolve(e.DATA_DIR),
    database: e.DATABASE_URL !== undefined && e.DATABASE_APP_URL !== undefined ? { ownerUrl: e.DATABASE_URL, appUrl: e.DATABASE_APP_URL } : null,
    bootstrapKey: e.VFS_BOOTSTRAP_KEY,
    defaultPlan: e.VFS_DEFAULT_PLAN,
    authCacheMs: e.VFS_AUTH_CACHE_SECONDS * 1000,
    maxJsonBytes: e.VFS_MAX_JSON_BYTES,
    trustProxy: e.VFS_TRUST_PROXY === 'true' || e.VFS_TRUST_PROXY === '1',
    authFailures: e.VFS_AUTH_FAILURES,
    authFailureWindowMs: e.VFS_AUTH_FAILURE_WINDOW_SECONDS * 1000,
    managementRate: e.VFS_MANAGEMENT_RATE,
    // Limits across nodes go with cluster mode unless said otherwise.
    clusterLimits: (e.VFS_CLUSTER_LIMITS ?? e.VFS_CLUSTER) === 'on',
    readThreads: e.VFS_READ_THREADS,
    openShards: e.VFS_OPEN_SHARDS,
    grepTimeoutMs: e.VFS_GREP_TIMEOUT_SECONDS * 1000,
    grepSplitMinBytes: e.VFS_GREP_SPLIT_MIN_BYTES,
    grepV8: e.VFS_GREP_V8 === 'on',
    ingestLeaseSeconds: e.VFS_INGEST_LEASE_SECONDS,
    ingestMaxAttempts: e.VFS_INGEST_MAX_ATTEMPTS,
    extractThreads: e.VFS_EXTRACT_THREADS,
    extractTimeoutMs: e.VFS_EXTRACT_TIMEOUT_SECONDS * 1000,
    extractMemoryMb: e.VFS_EXTRACT_MEMORY_MB,
    blobSweepMs: e.VFS_BLOB_SWEEP_SECONDS * 1000,
    mallocTrimMs: e.VFS_MALLOC_TRIM_SECONDS * 1000,
    shutdownGraceMs: e.VFS_SHUTDOWN_GRACE_SECONDS * 1000,
    http: e.VFS_HTTP,
    logLevel: e.VFS_LOG_LEVEL,
    metricsPort: e.VFS_METRICS_PORT ?? null,
    mcpMaxChars: e.VFS_MCP_MAX_CHARS,
    mcpAllowedOrigins: Object.freeze(e.VFS_MCP_ALLOWED_ORIGINS),
    storage: Object.freeze(storageSettings(e, resolve(e.DATA_DIR))),
    snapshot: Object.freeze({ everyChanges: e.VFS_SNAPSHOT_CHANGES, everyMs: e.VFS_SNAPSHOT_SECONDS * 1000 }),
    keepChangesSeconds: e.VFS_CHANGES_KEEP_SECONDS,
    cluster:
      e.VFS_CLUSTER === 'on'
        ? Object.freeze({
            nodeId: e.VFS_NODE_ID ?? null,
            heartbeatMs: e.VFS_NODE_HEARTBEAT_SECONDS * 1000,
            deadMs: e.VFS_NODE_DEAD_SECONDS * 1000,
            syncWaitMs: e.VFS_SYNC_WAIT_SECONDS * 1000,
            drainMs: e.VFS_DRAIN_SECONDS * 1000,
            cacheBytes: e.VFS_SHARD_CACHE_BYTES,
          })
        : null,
    publicUrl: e.VFS_PUBLIC_URL === undefined ? null : publicUrl(e.VFS_PUBLIC_URL),
    oauth:
      e.VFS_OAUTH === 'on' && !oauthNeedsUrl
        ? Object.freeze({
            accessTtlSeconds: e.VFS_OAUTH_ACCESS_TTL_SECONDS,
            refreshTtlSeconds: e.VFS_OAUTH_REFRESH_TTL_SECONDS,
            clientFetchPrivate: e.VFS_OAUTH_CLIENT_FETCH_PRIVATE === 'allow',
            clientFetchCa: e.VFS_OAUTH_CLIENT_FETCH_CA,
            retentionSeconds: e.VFS_OAUTH_RETENTION_SECONDS,
          })
        : null,
    oauthNotice:
      e.VFS_OAUTH === 'on' && oauthNeedsUrl
        ? e.VFS_CLUSTER === 'on'
          ? 'OAuth is off: set VFS_PUBLIC_URL to the https URL clients reach the cluster at, the same on every node (VFS_CLUSTER=on)'
          : `OAuth is off: set VFS_PUBLIC_URL to the https URL clients reach this service at (HOST is ${e.HOST}, not loopback)`
        : null,
    issuer:
      e.VFS_OAUTH_ISSUER === undefined || e.VFS_OAUTH_ISSUER_ACCOUNT === undefined
        ? null
        : Object.freeze({
            url: e.VFS_OAUTH_ISSUER,
            account: e.VFS_OAUTH_ISSUER_ACCOUNT,
            workspacesClaim: e.VFS_OAUTH_ISSUER_WORKSPACES_CLAIM,
            groupsClaim: e.VFS_OAUTH_ISSUER_GROUPS_CLAIM,
          }),
  });
}
