/**
 * What a benchmark of several nodes runs on: one real PostgreSQL (the embedded cluster, in a temp
 * directory of its own) and one Swift cluster with its S3 API (the tests' server). Deployments on
 * them (a database, a bucket and service processes each) are test/helpers/cluster.ts's
 * ServiceCluster, made with `deploy`.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { type ClusterAddress, EmbeddedCluster } from '../db/embedded-postgres.js';
import { ServiceCluster } from '../test/helpers/cluster.js';
import { type SwiftCluster, startSwift } from '../test/helpers/swift.js';

/** One PostgreSQL server and one S3 server, shared by every deployment of a run. */
export class Backends {
  private constructor(
    /** The PostgreSQL's directory (its cluster is `<pgDir>/pg`, as bench/cpu.ts's postgresPids expects). */
    readonly pgDir: string,
    private postgres: EmbeddedCluster,
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

  /**
   * Restarts PostgreSQL with pg_stat_statements loaded (its statements counted per database:
   * `CREATE EXTENSION pg_stat_statements` in a database to read them there).
   */
  async trackStatements(): Promise<void> {
    const client = new pg.Client({ host: this.superuser.host, port: this.superuser.port, user: this.superuser.user, database: 'postgres' });
    await client.connect();
    try {
      await client.query("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'");
    } finally {
      await client.end();
    }
    await this.postgres.stop();
    this.postgres = await EmbeddedCluster.start(this.pgDir);
  }

  /** Stops both servers and removes their directories. */
  async stop(): Promise<void> {
    await this.swift.stop();
    await this.postgres.stop();
    await rm(this.pgDir, { recursive: true, force: true });
  }
}

/**
 * A deployment on the backends: database `vfs_bench_<name>` and its bucket, every node with `env`
 * (`VFS_CLUSTER` in it says whether they form a cluster) and stopping at once on SIGTERM; starts
 * no node yet.
 */
export function deploy(backends: Backends, name: string, env: Record<string, string>): Promise<ServiceCluster> {
  return ServiceCluster.create(backends.superuser, backends.swift, `vfs_bench_${name}`, { VFS_DRAIN_SECONDS: '0', ...env });
}
