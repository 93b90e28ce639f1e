/**
 * Which processes serve a database. Each serving process holds one PostgreSQL advisory lock for
 * as long as it runs, on a connection of its own: a cluster node (VFS_CLUSTER=on) holds it
 * shared, a process without cluster mode alone. So a process without cluster mode cannot start
 * beside another process on its database, nor a cluster node beside one: either pair would
 * serve stale answers (each keeps its own copies, with no change log between them) and keep its
 * limits to itself. The second to start is refused with a message naming VFS_CLUSTER.
 *
 * The lock goes with its connection: a process that dies, even by SIGKILL, lets go as soon as
 * PostgreSQL sees its socket close (keepalives find a machine that vanished). The operator
 * command takes no lock: it runs beside a serving process.
 */
import pg from 'pg';

// A key of two int4s: PostgreSQL keeps those apart from the one-bigint keys every other advisory
// lock of the service takes (the migration and bootstrap locks, hashes of names), so none collides.
const SERVING_LOCK = [7_261, 1] as const;
/** How long a start waits for the lock: a process just killed may not have let go yet. */
const START_WAIT_MS = 3_000;
/** How often a held lock whose connection was lost is taken again. */
const RETAKE_MS = 1_000;

/** Holds the serving lock of one database until `release`. */
export class ServingLock {
  private client: pg.Client | null = null;
  private released = false;

  private constructor(
    private readonly target: pg.ClientConfig,
    private readonly clustered: boolean,
    private readonly log: (message: string, error?: unknown) => void,
  ) {}

  /**
   * Takes the lock, waiting up to `waitMs` for a process that just stopped to let go. Refuses,
   * with what holds it, when another process serves the database in the other mode, or when
   * this process runs without cluster mode and any other process serves it.
   */
  static async take(
    target: pg.ClientConfig,
    clustered: boolean,
    log: (message: string, error?: unknown) => void,
    waitMs = START_WAIT_MS,
  ): Promise<ServingLock> {
    const lock = new ServingLock(target, clustered, log);
    const deadline = Date.now() + waitMs;
    for (;;) {
      const held = await lock.attempt();
      if (held === null) return lock;
      if (Date.now() >= deadline) throw new Error(refusal(clustered, held));
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  /** Lets go of the lock (closing its connection). */
  async release(): Promise<void> {
    this.released = true;
    const client = this.client;
    this.client = null;
    await client?.end().catch(() => {});
  }

  /**
   * One try on a new connection: null when taken (the connection kept), else the modes in which
   * other processes hold it.
   */
  private async attempt(): Promise<string[] | null> {
    const client = new pg.Client({ ...this.target, keepAlive: true });
    client.on('error', () => {}); // a lost connection also ends: 'end' below retakes the lock
    await client.connect();
    try {
      const take = this.clustered ? 'pg_try_advisory_lock_shared' : 'pg_try_advisory_lock';
      const { rows } = await client.query<{ held: boolean }>(`SELECT ${take}($1::int, $2::int) AS held`, [...SERVING_LOCK]);
      if (rows[0].held) {
        client.on('end', () => this.lost(client));
        this.client = client;
        return null;
      }
      // pg_locks lists an advisory lock on two int4 keys as classid, objid and objsubid 2.
      const holders = await client.query<{ mode: string }>(
        `SELECT mode FROM pg_locks
         WHERE locktype = 'advisory' AND granted AND pid <> pg_backend_pid() AND classid = $1 AND objid = $2 AND objsubid = 2
           AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
        [...SERVING_LOCK],
      );
      await client.end();
      return holders.rows.map((r) => r.mode);
    } catch (error) {
      await client.end().catch(() => {});
      throw error;
    }
  }

  /** The lock's connection ended without `release` (PostgreSQL restarted, the network failed): takes it again. */
  private lost(client: pg.Client): void {
    if (this.released || this.client !== client) return;
    this.client = null;
    this.log("the connection holding this process's serving lock on the database was lost; taking it again");
    const retake = (): void => {
      if (this.released) return;
      this.attempt().then(
        (held) => {
          if (held === null) this.log('the serving lock is held again');
          else {
            this.log(`the serving lock could not be taken again: ${refusal(this.clustered, held)}`);
            setTimeout(retake, RETAKE_MS).unref();
          }
        },
        () => setTimeout(retake, RETAKE_MS).unref(),
      );
    };
    retake();
  }
}

/** Why a process is refused, from the modes in which others hold the lock. */
function refusal(clustered: boolean, held: string[]): string {
  const alone = held.includes('ExclusiveLock');
  if (clustered) {
    return 'another process serves this database without cluster mode (VFS_CLUSTER=off); stop it and start every process on this database with VFS_CLUSTER=on';
  }
  return alone || held.length === 0
    ? 'another process already serves this database; two processes on one database must both run with VFS_CLUSTER=on (and share VFS_STORAGE_URL), or each have a database of its own'
    : 'cluster nodes (VFS_CLUSTER=on) serve this database; start this process with VFS_CLUSTER=on too, or give it a database of its own';
}
