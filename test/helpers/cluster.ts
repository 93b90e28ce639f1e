/**
 * Service processes (as `npm start` runs them) on one database and one bucket,
 * each with its own data directory and node id: a test's cluster on the run's
 * PostgreSQL and Swift, or a benchmark's deployment on servers of its own.
 * Free of vitest, so the benchmarks can load it.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { newCredential } from '../../core/credentials.js';
import { INVALIDATE_CHANNEL } from '../../db/accounts.js';
import { provisionDatabase } from '../../db/provision.js';
import { loadConfig } from '../../service/config.js';
import type { ObjectStore } from '../../storage/object-store.js';
import { openObjectStore } from '../../storage/open-store.js';
import { exportAudit } from './audit-export.js';
import { type ServiceProcess, runAdmin, startServiceProcess } from './process.js';
import { type SwiftAddress, swiftStorageEnv } from './swift.js';

/** One node of a test cluster. */
export interface ClusterNode {
  id: string;
  dataDir: string;
  /** The running process, or null while stopped. */
  process: ServiceProcess | null;
  /** What this node's environment adds to the cluster's. */
  env: Record<string, string>;
}

/** Several service processes sharing a database and a bucket: a test's cluster or a benchmark's deployment. */
export class ServiceCluster {
  /** The management key of the default account (VFS_BOOTSTRAP_KEY). */
  readonly key = newCredential('management_key');
  readonly nodes: ClusterNode[] = [];

  private constructor(
    private readonly env: Record<string, string>,
    private readonly superuserUrl: string,
  ) {}

  /**
   * Provisions database `<name>` on the PostgreSQL server at `superuser` and bucket `<name>` (its
   * `_` as `-`) on the S3 server at `swift`; starts no node. Every node's environment is `env`
   * over unlimited management requests, error-level logs and that database and bucket.
   */
  static async create(
    superuser: { host: string; port: number; user: string },
    swift: SwiftAddress,
    name: string,
    env: Record<string, string>,
  ): Promise<ServiceCluster> {
    const names = { database: name, ownerRole: `${name}_owner`, appRole: `${name}_app` };
    await provisionDatabase(superuser, names);
    // The embedded cluster listens on a Unix socket: its directory goes in the query.
    const url = (user: string): string => `postgres://${user}@localhost/${name}?host=${encodeURIComponent(superuser.host)}&port=${superuser.port}`;
    const cluster = new ServiceCluster(
      {
        DATABASE_URL: url(names.ownerRole),
        DATABASE_APP_URL: url(names.appRole),
        VFS_MANAGEMENT_RATE: '1000000',
        VFS_LOG_LEVEL: 'error',
        ...swiftStorageEnv(swift, `s3://${name.replaceAll('_', '-')}/svc`),
        ...env,
      },
      url(superuser.user),
    );
    cluster.env.VFS_BOOTSTRAP_KEY = cluster.key;
    return cluster;
  }

  /** Starts one more node (its environment adding `env` to the cluster's) and waits until it listens. */
  async add(env: Record<string, string> = {}): Promise<ClusterNode> {
    // Named and listed before the first await: nodes added together get distinct ids.
    const node: ClusterNode = { id: `node-${String.fromCharCode(97 + this.nodes.length)}`, dataDir: '', process: null, env };
    this.nodes.push(node);
    node.dataDir = await mkdtemp(join(tmpdir(), 'vfs-node-'));
    await this.startNode(node);
    return node;
  }

  /** Starts a stopped node again on its data directory (its environment adding `env`, by default what it last added). */
  async startNode(node: ClusterNode, env = node.env): Promise<void> {
    if (node.process !== null) throw new Error(`${node.id} is already running`);
    node.env = env;
    node.process = await startServiceProcess({ ...this.env, ...env, DATA_DIR: node.dataDir, VFS_NODE_ID: node.id }).listening;
  }

  /** The base URL of a running node. */
  url(node: ClusterNode): string {
    if (node.process === null) throw new Error(`${node.id} is not running`);
    return node.process.url;
  }

  /** Calls a node's API with the management key (or `key`). */
  api(node: ClusterNode, method: string, path: string, body?: string | Uint8Array, key = this.key): Promise<Response> {
    return fetch(this.url(node) + path, { method, headers: { authorization: `Bearer ${key}` }, body, signal: AbortSignal.timeout(30_000) });
  }

  /** Sends `signal` to a node and waits for its exit; resolves with its exit code or signal. */
  async signal(node: ClusterNode, signal: 'SIGTERM' | 'SIGKILL'): Promise<number | string> {
    const p = node.process;
    node.process = null;
    if (p === null) return 0;
    p.child.kill(signal);
    return p.exited;
  }

  /** Runs the operator command against the cluster's database. */
  admin(args: string[]): Promise<{ stdout: string; stderr: string }> {
    return runAdmin({ ...this.env, DATA_DIR: this.nodes[0].dataDir }, args);
  }

  /** Every audit event of a workspace, through `node`. */
  audit(node: ClusterNode, ws: string): Promise<Array<{ tool: string; params: Record<string, string> }>> {
    return exportAudit({ api: (method: string, path: string) => this.api(node, method, path) }, ws);
  }

  /** The cluster's object store (its bucket under the nodes' prefix), opened as a node opens it; the caller closes it. */
  objects(): ObjectStore {
    return openObjectStore(loadConfig({ ...this.env, DATA_DIR: this.nodes[0].dataDir }).storage);
  }

  /** Runs `work` with a client of the cluster's database as the superuser, closed after. */
  async asSuperuser<T>(work: (client: pg.Client) => Promise<T>): Promise<T> {
    const client = new pg.Client({ connectionString: this.superuserUrl });
    await client.connect();
    try {
      return await work(client);
    } finally {
      await client.end();
    }
  }

  /**
   * Lifts every limit of every plan (a benchmark measures speed, not the plans) and tells the
   * running nodes, as `npm run admin -- set-plan` does. Needs a node started (its migrations).
   */
  async liftLimits(): Promise<void> {
    await this.asSuperuser(async (client) => {
      await client.query(
        `UPDATE plans SET max_workspaces = 1000, max_files = 100000000, max_storage_bytes = 1e13, max_file_bytes = 1e10,
           read_rate_per_credential = 1000000, read_rate_per_account = 1000000`,
      );
      await client.query(`SELECT pg_notify('${INVALIDATE_CHANNEL}', 'limits')`);
    });
  }

  /**
   * Transactions committed and rolled back in the cluster's database so far (pg_stat_database).
   * A backend reports its counts within about a second of going idle: read this a second or two
   * after the load stops.
   */
  async transactions(): Promise<number> {
    return this.asSuperuser(async (client) => {
      const r = await client.query<{ n: string }>('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()');
      return Number(r.rows[0].n);
    });
  }

  /** Stops every node and removes their data directories. */
  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => this.signal(n, 'SIGTERM')));
    await Promise.all(this.nodes.map((n) => rm(n.dataDir, { recursive: true, force: true })));
  }
}
