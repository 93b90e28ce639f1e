/**
 * What a benchmark of several nodes runs on: one real PostgreSQL (the embedded cluster, in a temp
 * directory of its own) and one Swift cluster with its S3 API (the tests' server), and on them
 * deployments: one database and one bucket each, with service processes (`npm start`'s command)
 * on data directories of their own, as test/helpers/cluster.ts starts them for the tests.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { newCredential } from '../core/credentials.js';
import { INVALIDATE_CHANNEL } from '../db/accounts.js';
import { type ClusterAddress, EmbeddedCluster } from '../db/embedded-postgres.js';
import { provisionDatabase } from '../db/provision.js';
import { type ServiceProcess, startServiceProcess } from '../test/helpers/process.js';
import { type SwiftCluster, startSwift, swiftStorageEnv } from '../test/helpers/swift.js';

/** One PostgreSQL server and one S3 server, shared by every deployment of a run. */
export class Backends {
  private constructor(
    /** The PostgreSQL's directory (its cluster is `<pgDir>/pg`, as bench/cpu.ts's postgresPids expects). */
    readonly pgDir: string,
    private readonly postgres: EmbeddedCluster,
    readonly swift: SwiftCluster,
  ) {}

  /** Starts both servers; on failure stops whichever had started. */
  static async start(): Promise<Backends> {
    const pgDir = await mkdtemp(join(tmpdir(), 'vfs-bench-pg-'));
    let postgres: EmbeddedCluster | null = null;
    try {
      postgres = await EmbeddedCluster.start(pgDir);
      return new Backends(pgDir, postgres, await startSwift());
    } catch (error) {
      await postgres?.stop().catch(() => {});
      await rm(pgDir, { recursive: true, force: true });
      throw error;
    }
  }

  /** Where PostgreSQL's superuser connects. */
  get superuser(): ClusterAddress {
    return this.postgres.address;
  }

  /** Stops both servers and removes their directories. */
  async stop(): Promise<void> {
    await this.swift.stop();
    await this.postgres.stop();
    await rm(this.pgDir, { recursive: true, force: true });
  }
}

/** One service process of a deployment, on its own data directory. */
export interface BenchNode {
  id: string;
  dataDir: string;
  /** The running process, or null while stopped. */
  process: ServiceProcess | null;
  /** The environment it was last started with, beyond the deployment's. */
  env: Record<string, string>;
}

/**
 * A database and a bucket of the backends, with the nodes running on them. Every node shares the
 * deployment's environment; `VFS_CLUSTER` in it says whether they form a cluster.
 */
export class Deployment {
  /** The management key of the default account (VFS_BOOTSTRAP_KEY of every node). */
  readonly key = newCredential('management_key');
  readonly nodes: BenchNode[] = [];

  private constructor(
    private readonly env: Record<string, string>,
    private readonly superuserUrl: string,
  ) {}

  /** Provisions database `vfs_bench_<name>` (its bucket: `vfs-bench-<name>`); starts no node yet. */
  static async create(backends: Backends, name: string, env: Record<string, string>): Promise<Deployment> {
    const names = { database: `vfs_bench_${name}`, ownerRole: `vfs_bench_${name}_owner`, appRole: `vfs_bench_${name}_app` };
    const superuser = backends.superuser;
    await provisionDatabase(superuser, names);
    // The embedded cluster listens on a Unix socket only: its directory goes in the query.
    const url = (user: string): string => `postgres://${user}@localhost/${names.database}?host=${encodeURIComponent(superuser.host)}&port=${superuser.port}`;
    const deployment = new Deployment(
      {
        DATABASE_URL: url(names.ownerRole),
        DATABASE_APP_URL: url(names.appRole),
        // Uploads are management calls: a corpus goes in far above the default rate.
        VFS_MANAGEMENT_RATE: '1000000',
        VFS_LOG_LEVEL: 'error',
        VFS_DRAIN_SECONDS: '0',
        ...swiftStorageEnv(backends.swift, `s3://vfs-bench-${name.replaceAll('_', '-')}/svc`),
        ...env,
      },
      url(superuser.user),
    );
    deployment.env.VFS_BOOTSTRAP_KEY = deployment.key;
    return deployment;
  }

  /** Starts one more node (with `env` beyond the deployment's) and waits until it listens. */
  async add(env: Record<string, string> = {}): Promise<BenchNode> {
    const node: BenchNode = {
      id: `node-${this.nodes.length + 1}`,
      dataDir: await mkdtemp(join(tmpdir(), 'vfs-bench-node-')),
      process: null,
      env,
    };
    this.nodes.push(node);
    await this.start(node, env);
    return node;
  }

  /** Starts a stopped node again on its data directory, with `env` beyond the deployment's. */
  async start(node: BenchNode, env: Record<string, string>): Promise<void> {
    if (node.process !== null) throw new Error(`${node.id} is already running`);
    node.env = env;
    node.process = await startServiceProcess({ ...this.env, ...env, DATA_DIR: node.dataDir, VFS_NODE_ID: node.id }).listening;
  }

  /** Stops a node with SIGTERM and waits for its exit. */
  async stopNode(node: BenchNode): Promise<void> {
    const p = node.process;
    node.process = null;
    if (p === null) return;
    p.child.kill('SIGTERM');
    await p.exited;
  }

  /** The base URL of a running node. */
  url(node: BenchNode): string {
    if (node.process === null) throw new Error(`${node.id} is not running`);
    return node.process.url;
  }

  /**
   * Lifts every limit of every plan (a benchmark measures speed, not the plans) and tells the
   * running nodes, as `npm run admin -- set-plan` does. Needs a node started (its migrations).
   */
  async liftLimits(): Promise<void> {
    const client = new pg.Client({ connectionString: this.superuserUrl });
    await client.connect();
    try {
      await client.query(
        `UPDATE plans SET max_workspaces = 1000, max_files = 100000000, max_storage_bytes = 1e13, max_file_bytes = 1e10,
           read_rate_per_credential = 1000000, read_rate_per_account = 1000000`,
      );
      await client.query(`SELECT pg_notify('${INVALIDATE_CHANNEL}', 'limits')`);
    } finally {
      await client.end();
    }
  }

  /**
   * Transactions committed and rolled back in the deployment's database so far (pg_stat_database).
   * A backend reports its counts within about a second of going idle: read this a second or two
   * after the load stops.
   */
  async transactions(): Promise<number> {
    const client = new pg.Client({ connectionString: this.superuserUrl });
    await client.connect();
    try {
      const r = await client.query<{ n: string }>('SELECT xact_commit + xact_rollback AS n FROM pg_stat_database WHERE datname = current_database()');
      return Number(r.rows[0].n);
    } finally {
      await client.end();
    }
  }

  /** Stops every node and removes their data directories. */
  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => this.stopNode(n)));
    await Promise.all(this.nodes.map((n) => rm(n.dataDir, { recursive: true, force: true })));
  }
}
