/**
 * Starts the real service for a test: its own database and roles in the
 * run's PostgreSQL cluster, its own data directory, an HTTP server on port 0.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { inject } from 'vitest';
import { createAccount, issueManagementKey } from '../../db/accounts.js';
import type { DatabaseTargets } from '../../db/database.js';
import { provisionDatabase } from '../../db/provision.js';
import { type Config, loadConfig } from '../../service/config.js';
import { createLogger } from '../../service/log.js';
import { type Service, startWithDatabase } from '../../service/service.js';
import { openObjectStore } from '../../storage/open-store.js';
import type { ObjectStore } from '../../storage/object-store.js';
import { swiftStorageEnv } from './swift.js';
import { storedOriginals } from './originals.js';

/** A running service with the default account's key and a client for it. */
export interface TestService {
  service: Service;
  url: string;
  /** The default account's management key. */
  key: string;
  targets: DatabaseTargets;
  names: { database: string; ownerRole: string; appRole: string };
  dataDir: string;
  /** The environment naming its object store (none on the local directory); a node on its database shares it. */
  storage: Record<string, string>;
  /** The service's configuration. */
  config: Readonly<Config>;
  /** A client as the cluster's superuser, for catalog checks and fault injection. */
  superuser(): Promise<pg.Client>;
  /** Makes another account and returns its management key. */
  newAccount(name: string, plan?: string): Promise<string>;
  /** The stored originals (`blobs/…`, or `packs/…#<sha>`: helpers/originals.ts) and the upload temp files (`tmp/<name>`), whichever store the service uses. */
  blobFiles(): Promise<string[]>;
  /** Calls the API. */
  call(method: string, path: string, options?: CallOptions): Promise<Reply>;
  stop(): Promise<void>;
}

/** Options of one API call. */
export interface CallOptions {
  /** Credential; defaults to the default account's key; null sends no Authorization header. */
  key?: string | null;
  /** JSON body (objects are serialized), or raw bytes/string. */
  body?: unknown;
  headers?: Record<string, string>;
}

/** A reply with its body parsed as JSON when it is JSON. */
export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  // biome-ignore lint/suspicious/noExplicitAny: tests read fields of many reply shapes; a cast at each would add nothing
  json: any;
}

/** Options of a test service. */
export interface TestServiceOptions {
  /** Keep the plans' and the environment's rate limits (else lifted). */
  realLimits?: boolean;
  /** Run as another node on this service's database and object store (its own data directory, the same accounts and key). */
  database?: TestService;
}

/**
 * Starts a service for one test file. Unless `realLimits` is set, the rate
 * limits are lifted (plans and env), so that suites which are not about rate
 * limiting can call as fast as they like.
 */
export async function startTestService(env: Record<string, string> = {}, options: TestServiceOptions = {}): Promise<TestService> {
  const superuserAddress = inject('pgSuperuser');
  const id = randomBytes(5).toString('hex');
  const shared = options.database;
  const names = shared?.names ?? { database: `t_${id}`, ownerRole: `t_${id}_owner`, appRole: `t_${id}_app` };
  const targets = shared?.targets ?? (await provisionDatabase(superuserAddress, names));
  const dataDir = await mkdtemp(join(tmpdir(), 'vfs-test-data-'));
  const storage = shared?.storage ?? testStorage(id);
  const lifted = options.realLimits === true ? {} : { VFS_AUTH_FAILURES: '1000000', VFS_MANAGEMENT_RATE: '1000000' };
  // VFS_HTTP=native runs the suite on a native uWebSockets.js build (where one loads).
  const http = process.env.VFS_HTTP === undefined ? {} : { VFS_HTTP: process.env.VFS_HTTP };
  const config: Readonly<Config> = loadConfig({ PORT: '0', HOST: '127.0.0.1', DATA_DIR: dataDir, ...lifted, ...http, ...storage, ...env });
  // The service's errors go to stderr as JSON lines with VFS_TEST_LOG=1 (a 500 in a test logs its cause there).
  const quiet = createLogger(process.env.VFS_TEST_LOG === '1' ? 'error' : 'silent');
  const service = await startWithDatabase(config, quiet, targets, names.appRole).catch(async (error: unknown) => {
    await rm(dataDir, { recursive: true, force: true });
    throw error;
  });
  // A node on an existing database finds its accounts there, and makes no key.
  const key = shared?.key ?? service.createdKey!;
  if (options.realLimits !== true) {
    await service.db.owner.query('UPDATE plans SET read_rate_per_credential = 1000000, read_rate_per_account = 1000000');
  }
  const call = async (method: string, path: string, options: CallOptions = {}): Promise<Reply> => {
    const headers: Record<string, string> = { ...options.headers };
    const credential = options.key === undefined ? key : options.key;
    if (credential !== null) headers.authorization = `Bearer ${credential}`;
    let body: string | Uint8Array | undefined;
    if (typeof options.body === 'string' || options.body instanceof Uint8Array) body = options.body;
    else if (options.body !== undefined) body = JSON.stringify(options.body);
    const res = await fetch(service.url + path, { method, headers, body });
    const text = await res.text();
    let json: unknown;
    if ((res.headers.get('content-type') ?? '').includes('json') && text !== '') json = JSON.parse(text);
    return { status: res.status, headers: res.headers, text, json };
  };
  let inspector: Promise<{ objects: ObjectStore; client: pg.Client }> | undefined;
  return {
    service,
    url: service.url,
    key,
    targets,
    names,
    dataDir,
    storage,
    config,
    superuser: async () => {
      const client = new pg.Client({ ...superuserAddress, database: names.database });
      await client.connect();
      return client;
    },
    newAccount: async (name, plan = 'default') => {
      await createAccount(service.db, name, plan);
      return (await issueManagementKey(service.db, name)).key;
    },
    call,
    blobFiles: async () => {
      // One store and one connection serve every call: suites call this before and after each
      // of hundreds of requests.
      inspector ??= (async () => {
        const client = new pg.Client({ ...superuserAddress, database: names.database });
        await client.connect();
        return { objects: openObjectStore(config.storage), client };
      })();
      const { objects, client } = await inspector;
      const keys = (await storedOriginals(objects, client)).map((o) => o.where);
      const temps = await readdir(join(dataDir, 'blobs', 'tmp')).catch(() => [] as string[]);
      return [...keys, ...temps.map((name) => `tmp/${name}`)];
    },
    stop: async () => {
      if (inspector !== undefined) {
        const { objects, client } = await inspector;
        await client.end();
        objects.close();
      }
      await service.stop();
      await rm(dataDir, { recursive: true, force: true });
    },
  };
}

/** A file listing entry as the API returns it. */
export interface ListedFile {
  path: string;
  status: 'pending' | 'ready' | 'error';
  sizeBytes: number;
  contentType: string;
  updatedAt: string;
  errorDetail: string | null;
  sha256: string;
  visibility: string[] | null;
}

/**
 * With VFS_TEST_STORAGE=s3 (npm test's third pass), each service keeps its originals in a bucket
 * of its own on the run's Swift cluster (test/global-setup.ts); otherwise in its data directory.
 */
export function testStorage(id: string): Record<string, string> {
  if (process.env.VFS_TEST_STORAGE !== 's3') return {};
  return swiftStorageEnv(inject('swift'), `s3://vfs-test-${id}/service`);
}

/** Every file of a workspace, paging through the listing. */
export async function listAll(t: TestService, ws: string, key?: string): Promise<ListedFile[]> {
  const files: ListedFile[] = [];
  let cursor: string | null = null;
  do {
    const r = await t.call('GET', `/v1/workspaces/${ws}/files?limit=1000${cursor === null ? '' : `&cursor=${cursor}`}`, { key });
    if (r.status !== 200) throw new Error(`listing failed: ${r.status} ${r.text}`);
    files.push(...r.json.files);
    cursor = r.json.nextCursor;
  } while (cursor !== null);
  return files;
}

/** Waits until no file of the workspace is pending (or the timeout passes) and returns the listing. */
export async function settled(t: TestService, ws: string, timeoutMs = 30_000, key?: string): Promise<ListedFile[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const files = await listAll(t, ws, key);
    if (files.every((f) => f.status !== 'pending') || Date.now() > deadline) return files;
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Uploads bytes to a path (URL-encoded per segment) and returns the reply. */
export function put(t: TestService, ws: string, path: string, body: string | Uint8Array, headers: Record<string, string> = {}, query = ''): Promise<Reply> {
  const encoded = path.split('/').map(encodeURIComponent).join('/');
  return t.call('PUT', `/v1/workspaces/${ws}/files/${encoded}${query}`, { body, headers });
}
