/**
 * Composes the service: PostgreSQL (embedded or external), migrations,
 * bootstrap, authentication and the HTTP server. `npm start` and the tests
 * both start the service through `startService`.
 */
import { join } from 'node:path';
import type pg from 'pg';
import { Authenticator } from '../api/auth.js';
import { ReadPool } from '../api/read-pool.js';
import { Guard } from '../api/guard.js';
import { Lookups } from '../api/lookups.js';
import { startServer } from '../api/server.js';
import { bootstrapAccount, INVALIDATE_CHANNEL } from '../db/accounts.js';
import { AuditLog } from '../db/audit.js';
import { Database, type DatabaseTargets, migrate } from '../db/database.js';
import { EmbeddedCluster } from '../db/embedded-postgres.js';
import { provisionDatabase } from '../db/provision.js';
import { BlobStore } from '../ingest/blob-store.js';
import { IngestThread } from '../ingest/ingest-thread.js';
import { shardsRoot } from '../ingest/shards.js';
import { Uploads } from '../ingest/uploads.js';
import type { Config } from './config.js';

/** Where the service writes what it has to say. */
export interface Logger {
  info(message: string): void;
  error(message: string, error?: unknown): void;
}

/** A running service. */
export interface Service {
  /** Base URL, e.g. http://127.0.0.1:8080 */
  url: string;
  port: number;
  db: Database;
  /** A management key made at this start (first start without VFS_BOOTSTRAP_KEY), else null. */
  createdKey: string | null;
  /** Stops the server, closes the databases (and stops the embedded cluster). */
  stop(): Promise<void>;
}

/** Names used in the embedded cluster. */
export const EMBEDDED_NAMES = { database: 'agent_vfs', ownerRole: 'vfs_owner', appRole: 'vfs_app' } as const;

/** Starts the whole service. */
export async function startService(config: Readonly<Config>, log: Logger): Promise<Service> {
  let cluster: EmbeddedCluster | null = null;
  let targets: DatabaseTargets;
  let appRole: string;
  if (config.database === null) {
    cluster = await EmbeddedCluster.start(config.dataDir, (line) => log.info(line));
    targets = await provisionDatabase(cluster.address, EMBEDDED_NAMES);
    appRole = EMBEDDED_NAMES.appRole;
  } else {
    targets = { owner: { connectionString: config.database.ownerUrl }, app: { connectionString: config.database.appUrl } };
    appRole = decodeURIComponent(new URL(config.database.appUrl).username);
  }
  return startWithDatabase(config, log, targets, appRole, cluster);
}

/** Starts the service on a provisioned database (the tests call this with their own cluster). */
export async function startWithDatabase(
  config: Readonly<Config>,
  log: Logger,
  targets: DatabaseTargets,
  appRole: string,
  cluster: EmbeddedCluster | null = null,
): Promise<Service> {
  await migrate(targets.owner as pg.ClientConfig, appRole);
  const db = new Database(targets, (error) => log.error('database connection lost', error));
  const createdKey = await bootstrapAccount(db, config.bootstrapKey, config.defaultPlan);
  const auth = new Authenticator(db, config.authCacheMs);

  const blobs = new BlobStore(join(config.dataDir, 'blobs'));
  await blobs.init();
  const ingest = new IngestThread(
    {
      targets,
      dataDir: config.dataDir,
      extract: { threads: config.extractThreads, timeoutMs: config.extractTimeoutMs, maxMemoryMb: config.extractMemoryMb },
      loop: { leaseSeconds: config.ingestLeaseSeconds, maxAttempts: config.ingestMaxAttempts },
    },
    (message) => log.error(message),
  );
  const uploads = new Uploads(db, blobs, {
    enqueued: () => ingest.poke(),
    deleted: (workspaceId, path) => ingest.remove(workspaceId, path),
  });
  const readPool = new ReadPool(config.readThreads);
  const audit = new AuditLog(db);
  const lookups = new Lookups(db);
  // Another process (the operator command) changed credentials or limits; after a gap in
  // notifications, assume both changed.
  db.listen(
    INVALIDATE_CHANNEL,
    (what) => (what === 'limits' ? lookups.limitsChanged() : auth.clear()),
    () => {
      auth.clear();
      lookups.limitsChanged();
    },
  );

  const server = await startServer(
    {
      db,
      auth,
      guard: new Guard(auth, lookups, {
        trustProxy: config.trustProxy,
        authFailures: config.authFailures,
        authFailureWindowMs: config.authFailureWindowMs,
        managementRate: config.managementRate,
      }),
      uploads,
      log: (message, error) => log.error(message, error),
      maxJsonBytes: config.maxJsonBytes,
      readPool,
      audit,
      lookups,
      shardDir: (workspaceId) => join(shardsRoot(config.dataDir), workspaceId),
      grepTimeoutMs: config.grepTimeoutMs,
      workspaceDeleted: async (workspaceId) => {
        lookups.workspaceDeleted();
        await ingest.drop(workspaceId);
      },
    },
    config.host,
    config.port,
  );
  const shownHost = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  return {
    url: `http://${shownHost}:${server.port}`,
    port: server.port,
    db,
    createdKey,
    stop: async () => {
      server.close();
      await ingest.stop();
      await audit.drain();
      await readPool.close();
      await db.close();
      await cluster?.stop();
    },
  };
}
