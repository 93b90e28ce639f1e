/**
 * A cluster for a test: service processes (as `npm start` runs them) on one
 * database of the run's PostgreSQL and one bucket of the run's Swift cluster,
 * each with its own data directory and node id.
 */
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { inject } from 'vitest';
import { newCredential } from '../../core/credentials.js';
import { provisionDatabase } from '../../db/provision.js';
import { exportAudit } from './faults.js';
import { type ServiceProcess, runAdmin, startServiceProcess } from './process.js';
import { swiftStorageEnv } from './swift.js';

/** One node of a test cluster. */
export interface ClusterNode {
  id: string;
  dataDir: string;
  /** The running process, or null while stopped. */
  process: ServiceProcess | null;
  /** What this node's environment adds to the cluster's. */
  env: Record<string, string>;
}

/** Several service processes sharing a database and a bucket. */
export class TestCluster {
  /** The management key of the default account (VFS_BOOTSTRAP_KEY). */
  readonly key = newCredential('management_key');
  readonly nodes: ClusterNode[] = [];

  private constructor(
    private readonly env: Record<string, string>,
    private readonly superuserUrl: string,
  ) {}

  /** Provisions the database and bucket and starts `count` nodes (the first alone, then the rest together). */
  static async start(count: number, env: Record<string, string> = {}): Promise<TestCluster> {
    const superuser = inject('pgSuperuser');
    const id = randomBytes(5).toString('hex');
    const names = { database: `c_${id}`, ownerRole: `c_${id}_owner`, appRole: `c_${id}_app` };
    await provisionDatabase(superuser, names);
    // The run's cluster listens on a Unix socket: its directory goes in the query.
    const url = (user: string): string => `postgres://${user}@localhost/${names.database}?host=${encodeURIComponent(superuser.host)}&port=${superuser.port}`;
    const cluster = new TestCluster(
      {
        DATABASE_URL: url(names.ownerRole),
        DATABASE_APP_URL: url(names.appRole),
        VFS_CLUSTER: 'on',
        VFS_MANAGEMENT_RATE: '1000000',
        VFS_AUTH_FAILURES: '1000000',
        VFS_NODE_HEARTBEAT_SECONDS: '0.5',
        VFS_DRAIN_SECONDS: '1',
        // Jobs a killed node had claimed go to another soon.
        VFS_INGEST_LEASE_SECONDS: '3',
        VFS_LOG_LEVEL: 'error',
        ...swiftStorageEnv(inject('swift'), `s3://vfs-cluster-${id}/svc`),
        ...env,
      },
      url(superuser.user),
    );
    cluster.env.VFS_BOOTSTRAP_KEY = cluster.key;
    await cluster.add();
    await Promise.all(Array.from({ length: count - 1 }, () => cluster.add()));
    const client = await cluster.superuser();
    try {
      await client.query('UPDATE plans SET read_rate_per_credential = 1000000, read_rate_per_account = 1000000');
    } finally {
      await client.end();
    }
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

  /** Starts a stopped node again on its data directory. */
  async startNode(node: ClusterNode): Promise<void> {
    node.process = await startServiceProcess({ ...this.env, ...node.env, DATA_DIR: node.dataDir, VFS_NODE_ID: node.id }).listening;
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

  /** A client of the database as the superuser. */
  async superuser(): Promise<pg.Client> {
    const client = new pg.Client({ connectionString: this.superuserUrl });
    await client.connect();
    return client;
  }

  /** Stops every node and removes their data directories. */
  async stop(): Promise<void> {
    await Promise.all(this.nodes.map((n) => this.signal(n, 'SIGTERM')));
    await Promise.all(this.nodes.map((n) => rm(n.dataDir, { recursive: true, force: true })));
  }
}
