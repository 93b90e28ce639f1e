/**
 * The database layer's entry point: two connection pools, one per role.
 *
 * - The owner role runs migrations and the operator command; it owns the schema.
 * - The application role runs every request of the service. It owns nothing,
 *   is not superuser, cannot bypass row level security, and sees only the rows
 *   of the account set for its transaction (`inAccount`).
 */
import { readdir, readFile } from 'node:fs/promises';
import pg from 'pg';

const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);
/**
 * A query not answered within this fails (and its connection is dropped), so
 * that a hung server or network makes requests fail (503) in bounded time
 * instead of waiting for ever. Far above any query the service makes.
 */
const QUERY_TIMEOUT_MS = 30_000;
/** How long a pool waits for a new connection. */
const CONNECT_TIMEOUT_MS = 5_000;
// Any fixed number: serializes concurrent migrators on one database.
const MIGRATION_LOCK = 7_261_001;

/** How to reach PostgreSQL as each of the two roles. */
export interface DatabaseTargets {
  owner: pg.PoolConfig;
  app: pg.PoolConfig;
}

/** A client inside a transaction. */
export type Tx = pg.PoolClient;

/** Both pools, with transaction helpers. */
export class Database {
  readonly owner: pg.Pool;
  readonly app: pg.Pool;
  private listener: pg.Client | null = null;
  private closed = false;

  constructor(
    private readonly targets: DatabaseTargets,
    onError: (error: Error) => void,
  ) {
    const bounds = { connectionTimeoutMillis: CONNECT_TIMEOUT_MS, query_timeout: QUERY_TIMEOUT_MS };
    this.owner = new pg.Pool({ max: 4, ...bounds, ...targets.owner });
    this.app = new pg.Pool({ max: 16, ...bounds, ...targets.app });
    // An idle client that loses its server emits here; the pool replaces it on the next checkout.
    this.owner.on('error', onError);
    this.app.on('error', onError);
  }

  /**
   * Runs `fn` in a transaction of the application role with the account set,
   * so row level security confines every statement to that account.
   */
  async inAccount<T>(accountId: string, fn: (tx: Tx) => Promise<T>, settings: Record<string, string> = {}): Promise<T> {
    return transaction(this.app, fn, { 'app.account_id': accountId, ...settings });
  }

  /** Runs `fn` in a transaction of the application role with no account set (sees no tenant rows). */
  async asApp<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return transaction(this.app, fn, {});
  }

  /** Runs one statement as the application role, committed on its own (no account set: for SECURITY DEFINER functions). */
  async appStatement<R extends pg.QueryResultRow>(sql: string, values: unknown[]): Promise<pg.QueryResult<R>> {
    return this.app.query<R>(sql, values);
  }

  /** Runs `fn` in a transaction of the owner role: for the operator command and cross-account jobs only. */
  async asOwner<T>(fn: (tx: Tx) => Promise<T>): Promise<T> {
    return transaction(this.owner, fn, {});
  }

  /** True when both roles can run a query now. */
  async ping(timeoutMs = 2_000): Promise<{ owner: boolean; app: boolean }> {
    const probe = async (pool: pg.Pool): Promise<boolean> => {
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
      const query = pool.query('SELECT 1').then(
        () => true,
        () => false,
      );
      try {
        return await Promise.race([query, timeout]);
      } finally {
        clearTimeout(timer);
      }
    };
    const [owner, app] = await Promise.all([probe(this.owner), probe(this.app)]);
    return { owner, app };
  }

  /**
   * Listens on a notification channel with a dedicated connection of the
   * application role, reconnecting after failures. `onGap` runs whenever
   * notifications may have been missed (before the first connection and after
   * each reconnect), so the caller can drop what it cached. Resolves once the first attempt
   * to connect has listened or failed (and a retry is scheduled), so a service that awaits it
   * serves nothing from a cache that the first connection is about to clear.
   */
  async listen(channel: string, onNotify: (payload: string) => void, onGap: () => void): Promise<void> {
    const connect = async (): Promise<void> => {
      if (this.closed) return;
      const client = new pg.Client({ connectionTimeoutMillis: CONNECT_TIMEOUT_MS, ...this.targets.app });
      const retry = (): void => {
        client.removeAllListeners();
        client.on('error', () => {});
        void client.end().catch(() => {});
        if (this.listener === client) this.listener = null;
        if (!this.closed) setTimeout(() => void connect(), 1_000).unref();
      };
      client.on('error', retry);
      client.on('notification', (n) => onNotify(n.payload ?? ''));
      try {
        await client.connect();
        await client.query(`LISTEN ${client.escapeIdentifier(channel)}`);
        this.listener = client;
        onGap();
      } catch {
        retry();
      }
    };
    onGap();
    await connect();
  }

  /** Closes both pools and any listener. */
  async close(): Promise<void> {
    this.closed = true;
    await this.listener?.end().catch(() => {});
    await Promise.all([this.owner.end(), this.app.end()]);
  }
}

/** The message of pg's error when `query_timeout` passes. */
const QUERY_TIMEOUT_MESSAGE = 'Query read timeout';
const SETTING_NAME = /^app\.[a-z_]+$/;
const SETTING_VALUE = /^(?:[0-9]{1,20}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})$/;

async function transaction<T>(pool: pg.Pool, fn: (tx: Tx) => Promise<T>, settings: Record<string, string>): Promise<T> {
  // BEGIN and the settings go in one round trip, so the values are inlined: only setting names
  // and values of the shapes above (numbers, uuids) are accepted.
  const sets = Object.entries(settings).map(([name, value]) => {
    if (!SETTING_NAME.test(name) || !SETTING_VALUE.test(value)) throw new Error(`refusing transaction setting ${name}`);
    // SECURITY: is_local = true: the settings, the account among them, end with this transaction
    // and never leak into the next one on this pooled connection.
    return `set_config('${name}', '${value}', true)`;
  });
  const client = await pool.connect();
  let broken = false;
  // A checked-out client whose server goes away between two queries emits 'error', and with no
  // listener that would end the process: note it instead (the next query fails, so does `fn`).
  const lost = (): void => {
    broken = true;
  };
  client.on('error', lost);
  try {
    await client.query(sets.length === 0 ? 'BEGIN' : `BEGIN; SELECT ${sets.join(', ')}`);
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    // After a query timeout the connection still waits for that query's answer: drop it.
    if (error instanceof Error && error.message === QUERY_TIMEOUT_MESSAGE) broken = true;
    else if (!broken) {
      try {
        await client.query('ROLLBACK');
      } catch {
        broken = true;
      }
    }
    throw error;
  } finally {
    client.removeListener('error', lost);
    client.release(broken);
  }
}

/** Applies the pending migrations as the owner and grants the application role what it needs. */
export async function migrate(owner: pg.PoolConfig, appRole: string): Promise<void> {
  const client = new pg.Client(owner);
  await client.connect();
  try {
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())');
    const applied = new Set((await client.query<{ name: string }>('SELECT name FROM schema_migrations')).rows.map((r) => r.name));
    const files = (await readdir(MIGRATIONS_DIR)).filter((f) => f.endsWith('.sql')).sort();
    for (const file of files) {
      if (applied.has(file)) continue;
      const sql = await readFile(new URL(file, MIGRATIONS_DIR), 'utf8');
      await client.query('BEGIN');
      try {
        await client.query(sql);
        await client.query('INSERT INTO schema_migrations (name) VALUES ($1)', [file]);
        await client.query('COMMIT');
      } catch (error) {
        await client.query('ROLLBACK');
        throw new Error(`migration ${file} failed: ${(error as Error).message}`);
      }
    }
    await client.query(grantsFor(client.escapeIdentifier(appRole)));
  } finally {
    await client.end();
  }
}

/** What the application role may do: no ownership, no UPDATE or DELETE on the audit log. */
function grantsFor(app: string): string {
  return `
    GRANT USAGE ON SCHEMA public TO ${app};
    GRANT EXECUTE ON FUNCTION take_rate_limits(text[], float8[], float8[], integer[], integer[], integer[], integer[]), count_auth_failures(text[], integer[], integer, float8),
      locked_addresses(integer, integer), sweep_cluster_limits() TO ${app};
    GRANT SELECT ON plans, accounts TO ${app};
    GRANT SELECT, INSERT, UPDATE, DELETE ON workspaces, files, tokens, ingest_jobs, blob_packs TO ${app};
    GRANT SELECT, INSERT ON audit_events TO ${app};
    GRANT USAGE ON SEQUENCE audit_events_id_seq, ingest_jobs_id_seq, file_generations TO ${app};
    GRANT USAGE, SELECT ON SEQUENCE credential_drops TO ${app};
    GRANT SELECT, INSERT, UPDATE ON account_usage TO ${app};
    GRANT SELECT, INSERT ON workspace_changes TO ${app};
    GRANT SELECT, INSERT, UPDATE, DELETE ON nodes TO ${app};
    GRANT SELECT, INSERT, UPDATE ON oauth_clients TO ${app};
    GRANT SELECT, INSERT, UPDATE ON oauth_grants, oauth_codes, oauth_refresh_tokens TO ${app};
    GRANT EXECUTE ON FUNCTION oauth_take_code(bytea, text), oauth_take_refresh_token(bytea, text), oauth_access_token(bytea), oauth_secret(text, bytea), oauth_approver_live(uuid, uuid),
      oauth_sweep(integer, integer) TO ${app};
    GRANT EXECUTE ON FUNCTION auth_management_key(bytea), auth_token(bytea), claim_ingest_jobs(integer, integer), workspace_shards(boolean), ingest_queue_stats(), workspace_versions(uuid[]),
      append_audit_batch(uuid[], uuid[], text[], text[], text[], integer[], jsonb, integer[], integer[]) TO ${app};
  `;
}
