/**
 * Composes the service: PostgreSQL (embedded or external), migrations,
 * bootstrap, authentication and the HTTP server. `npm start` and the tests
 * both start the service through `startService`.
 *
 * Start and stop, as faults need them (README, "Crashes, outages and stops"):
 * - at start, before anything opens a shard, shards that cannot be opened are
 *   deleted (probed in a child process) and upload temp files of dead
 *   processes removed; the ingest thread then checks every shard against
 *   PostgreSQL before its first claim (ingest/shards/repair.ts), and a sweep of
 *   unreferenced blobs runs in the background, then every `blobSweepMs`;
 * - `stop` closes the listen socket, lets the requests in flight finish (up
 *   to `shutdownGraceMs`), then closes what the start made, last made first
 *   (the blob sweep, the audit log once flushed, the read pool, the ingest
 *   thread, the shard check, the databases), and stops the embedded cluster. A start that fails
 *   part way closes what it had made the same way.
 */
import { randomBytes } from 'node:crypto';
import { readdir, stat } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import type pg from 'pg';
import { Authenticator } from '../api/gate/auth.js';
import { ReadPool } from '../reads/read-pool.js';
import { trimAllocatorEvery } from './allocator.js';
import { everyInTurn } from '../core/every-in-turn.js';
import { Freshness } from '../api/freshness.js';
import { Guard } from '../api/gate/guard.js';
import { Lookups } from '../api/gate/lookups.js';
import { Metrics, type MetricsServer, startMetricsServer } from '../api/metrics.js';
import { RecentReads } from '../api/recent-reads.js';
import { startServer } from '../api/server.js';
import { ClientDocuments } from '../api/oauth/client-documents.js';
import { CsrfTokens } from '../api/oauth/csrf.js';
import { mcpChallenge, resourceUrl } from '../api/oauth/metadata.js';
import { IssuerTokens } from '../api/oauth/issuer.js';
import { sharedSecret, sweepOAuth } from '../db/oauth.js';
import { paced } from '../core/paced.js';
import { threadStat, ThreadStatsListener } from '../core/thread-stats.js';
import { accountIdByName, bootstrapAccount, INVALIDATE_CHANNEL } from '../db/accounts.js';
import { AuditLog } from '../db/audit.js';
import { trimChanges, workspaceVersions } from '../db/changes.js';
import { Database, type DatabaseTargets, migrate } from '../db/database.js';
import { EmbeddedCluster } from '../db/embedded-postgres.js';
import { ingestQueueStats } from '../db/ingest-jobs.js';
import { provisionDatabase } from '../db/provision.js';
import { ServingLock } from '../db/serving-lock.js';
import { openReaderCount } from '../engine/index.js';
import { BlobStore, handsOff } from '../ingest/blob-store.js';
import { restoreMissingShards, SNAPSHOTS } from '../ingest/shards/snapshots.js';
import { openObjectStore } from '../storage/open-store.js';
import { IngestThread } from '../ingest/ingest-thread.js';
import { dropDamagedShards } from '../ingest/shards/repair.js';
import { shardsRoot } from '../ingest/shards/writers.js';
import { Uploads } from '../ingest/uploads.js';
import type { Config, IssuerSettings } from './config.js';
import type { Logger } from './log.js';
import { type DataDirLock, lockDataDir } from './data-lock.js';
import { Membership, nodeId } from './membership.js';
import { DROP_WAIT_MS, acknowledgeDrop, credentialDropNumber, dropCredentialsEverywhere, lastCredentialDrop } from '../db/nodes.js';
import { WarmSet } from './warm-set.js';

export type { Logger } from './log.js';

/** A running service. */
export interface Service {
  /** Base URL, e.g. http://127.0.0.1:8080 */
  url: string;
  port: number;
  db: Database;
  /** A management key made at this start (first start without VFS_BOOTSTRAP_KEY), else null. */
  createdKey: string | null;
  /** The metrics URL when VFS_METRICS_PORT is set, else null. */
  metricsUrl: string | null;
  /** The operator console's URL, e.g. http://127.0.0.1:8080/console/; null when it was not built. */
  consoleUrl: string | null;
  /** Stops accepting requests, finishes those in flight, closes the databases (and stops the embedded cluster). */
  stop(): Promise<void>;
}

/** Interval of the sweep of OAuth rows past their retention (also run at start). */
const OAUTH_SWEEP_MS = 3600_000;

/** Upload temp files untouched this long are removed by the periodic sweep (an upload in progress touches its file with every chunk). */
const TEMP_GRACE_MS = 3600_000;

/** Names used in the embedded cluster. */
export const EMBEDDED_NAMES = { database: 'agent_vfs', ownerRole: 'vfs_owner', appRole: 'vfs_app' } as const;

/** Starts the whole service. */
export async function startService(config: Readonly<Config>, log: Logger): Promise<Service> {
  if (config.database !== null) {
    const targets = { owner: { connectionString: config.database.ownerUrl }, app: { connectionString: config.database.appUrl } };
    return startWithDatabase(config, log, targets, decodeURIComponent(new URL(config.database.appUrl).username), null);
  }
  // Before the cluster: a second service on this directory must not even adopt it.
  const lock = await lockDataDir(config.dataDir);
  let cluster: EmbeddedCluster | null = null;
  try {
    cluster = await EmbeddedCluster.start(config.dataDir, (line) => log.info(line));
    const targets = await provisionDatabase(cluster.address, EMBEDDED_NAMES);
    return await startWithDatabase(config, log, targets, EMBEDDED_NAMES.appRole, cluster, lock);
  } catch (error) {
    // A start that fails once the embedded cluster runs (the port is taken, say) stops the cluster
    // it started: the process is about to exit, and the cluster is a process of its own. One it
    // adopted was left by a process that died, and a later start adopts it again.
    if (cluster !== null && !cluster.adopted) await cluster.stop().catch((stopError: unknown) => log.error('the embedded PostgreSQL did not stop', stopError));
    await lock.release();
    throw error;
  }
}

/** Starts the service on a provisioned database (the tests call this with their own cluster). */
export async function startWithDatabase(
  config: Readonly<Config>,
  log: Logger,
  targets: DatabaseTargets,
  appRole: string,
  cluster: EmbeddedCluster | null = null,
  /** The data directory's lock, when the caller took it; else it is taken here. */
  lock: DataDirLock | null = null,
): Promise<Service> {
  const held = lock ?? (await lockDataDir(config.dataDir));
  try {
    return await startLocked(config, log, targets, appRole, cluster, held);
  } catch (error) {
    if (lock === null) await held.release();
    throw error;
  }
}

/** Closes one part that a start made. */
type Closer = () => Promise<void>;

async function startLocked(
  config: Readonly<Config>,
  log: Logger,
  targets: DatabaseTargets,
  appRole: string,
  cluster: EmbeddedCluster | null,
  lock: DataDirLock,
): Promise<Service> {
  await migrate(targets.owner as pg.ClientConfig, appRole);
  const made: Closer[] = [];
  try {
    return await startParts(config, log, targets, cluster, lock, made);
  } catch (error) {
    // A step failed: what the earlier ones made is closed now, the database connections before
    // the caller stops the embedded cluster (else each one left would be logged as lost).
    await closeAll(made).catch((closeError: unknown) => log.error('closing the parts of a failed start', closeError));
    throw error;
  }
}

/** Closes the parts made, last made first, and forgets them. */
async function closeAll(made: Closer[]): Promise<void> {
  for (const close of made.splice(0).reverse()) await close();
}

/** The start's steps; each part made is pushed on `made`, which `stop` closes. */
async function startParts(
  config: Readonly<Config>,
  log: Logger,
  targets: DatabaseTargets,
  cluster: EmbeddedCluster | null,
  lock: DataDirLock,
  made: Closer[],
): Promise<Service> {
  const db = new Database(targets, (error) => log.error('database connection lost', error));
  made.push(() => db.close());
  // One database, one mode: a process without cluster mode serves it alone (serving-lock.ts).
  const serving = await ServingLock.take(targets.app, config.cluster !== null, (message, error) => log.error(message, error));
  made.push(() => serving.release());
  // A damaged shard crashes the process that opens it: those are deleted (to be rebuilt) before
  // the ingest thread or the read pool may open one. The probe runs in a child process, while
  // the rest of the start goes on.
  // Absolute and normalized, so that the read pool's per-thread reader cache finds it as given.
  const shards = resolve(shardsRoot(config.dataDir));
  const objects = openObjectStore(config.storage);
  made.push(async () => objects.close());
  // Then shards missing now (a new machine, a lost disk, or just deleted as damaged) are restored
  // from their snapshots in the object store, still before anything opens them.
  // On a node of a cluster, a shard missing here is filled on its first read instead.
  const shardDir = (workspaceId: string): string => `${shards}/${workspaceId}`; // per request: no join()
  const shardsChecked = dropDamagedShards(db, shards, (message) => log.error(message)).then(async () => {
    if (config.cluster === null) await restoreMissingShards(db, objects, shards, join(config.dataDir, 'snapshots-tmp'), log);
  });
  made.push(() => shardsChecked.catch(() => {}));
  const createdKey = await bootstrapAccount(db, config.bootstrapKey, config.defaultPlan);
  const lookups = new Lookups(db);
  // The public URL is the configured one, else the one printed below, known once the server
  // listens; the OAuth routes and the issuer's audience read it per request.
  let publicUrl = config.publicUrl ?? '';
  const issuer = config.issuer === null ? null : await issuerTokens(config.issuer, db, lookups, () => publicUrl, log);
  const auth = new Authenticator(db, config.authCacheMs, issuer);

  // On an S3 store and one node, this node's ingest takes each upload's own file; small originals
  // go in packs (blob-store.ts).
  const blobs = new BlobStore(join(config.dataDir, 'blobs'), objects, handsOff(config.storage, config.cluster !== null), db);
  await blobs.init();
  log.info(`originals are kept in ${objects.location}`);
  // One service per data directory (data-lock.ts): every temp file left now is an upload of a
  // process that died.
  const temps = await blobs.removeTemp();
  if (temps > 0) log.info(`removed ${temps} upload temp files left by a previous run`);
  await shardsChecked;
  const threads = config.metricsPort === null ? null : new ThreadStatsListener();
  if (threads !== null) made.push(async () => threads.close());
  const metrics =
    threads === null
      ? null
      : new Metrics({
          ingestQueue: () => ingestQueueStats(db),
          shardBytes: () => directoryBytes(shards),
          threads: () => [threadStat('http', openReaderCount()), ...threads.stats()],
        });
  const ingest = new IngestThread(
    {
      targets,
      dataDir: config.dataDir,
      openShards: config.openShards,
      storage: config.storage,
      snapshot: config.snapshot,
      extract: { threads: config.extractThreads, timeoutMs: config.extractTimeoutMs, maxMemoryMb: config.extractMemoryMb },
      loop: { leaseSeconds: config.ingestLeaseSeconds, maxAttempts: config.ingestMaxAttempts },
      reportExtractions: metrics !== null,
      cluster: config.cluster !== null,
    },
    (message) => log.error(message),
    metrics === null ? null : (type, outcome, seconds) => metrics.extractions.observe({ type, outcome }, seconds),
    (event) => {
      if (event.type === 'applied') freshness?.reached(event.workspaceId, event.version);
      else {
        // Deleted through another node: its tokens and name go from this node's caches too.
        freshness?.forget(event.workspaceId);
        lookups.workspaceDeleted();
        auth.clear();
        readPool.shardDropped(shardDir(event.workspaceId));
      }
    },
  );
  made.push(() => ingest.stop());
  const uploads = new Uploads(db, blobs, {
    enqueued: () => ingest.poke(),
    deleted: (workspaceId, path) => ingest.remove(workspaceId, path),
  });
  const readPool = new ReadPool(config.readThreads, config.grepSplitMinBytes, config.openShards, config.grepV8);
  made.push(() => readPool.close());
  const freshness =
    config.cluster === null
      ? null
      : new Freshness({
          versions: (ids) => workspaceVersions(db, ids),
          catchUp: (workspaceId, accountId, version, lost) => ingest.catchUp(workspaceId, accountId, version, lost),
          shardDir,
          shardLost: (workspaceId) => readPool.shardDropped(shardDir(workspaceId)),
          failed: (workspaceId, error) => log.error(`bringing this node's copy of workspace ${workspaceId} up to date failed`, error),
          waitMs: config.cluster.syncWaitMs,
        });
  const audit = new AuditLog(
    db,
    undefined,
    undefined,
    metrics === null
      ? null
      : (events, seconds) => {
          metrics.auditBatch.observe(events);
          metrics.auditCommit.observe(seconds);
        },
  );
  made.push(() => audit.drain());
  let membership: Membership | null = null;
  const guard = new Guard(
    auth,
    lookups,
    {
      trustProxy: config.trustProxy,
      authFailures: config.authFailures,
      authFailureWindowMs: config.authFailureWindowMs,
      managementRate: config.managementRate,
      shared: config.clusterLimits ? db : null,
    },
    metrics,
    (message, error) => log.error(message, error),
  );
  made.push(async () => guard.close());
  // Another process (the operator command, another node) changed credentials or limits, asked
  // for a shard rebuild, or locked an address; after a gap in notifications, assume the first two
  // changed and look for the others.
  await db.listen(
    INVALIDATE_CHANNEL,
    (what) => {
      if (guard.notified(what)) return;
      if (what === 'limits') lookups.limitsChanged();
      else if (what === 'shards') ingest.checkShards();
      else {
        auth.clear();
        const n = credentialDropNumber(what);
        if (n !== null && membership !== null) {
          void acknowledgeDrop(db, membership.id, n).catch((error: unknown) => log.error('recording a credential drop failed', error));
        }
      }
    },
    () => {
      auth.clear();
      // Every drop asked before the number read is done once the cache is cleared after reading it.
      const member = membership;
      if (member !== null) {
        void lastCredentialDrop(db)
          .then((n) => {
            auth.clear();
            return acknowledgeDrop(db, member.id, n);
          })
          .catch((error: unknown) => log.error('recording a credential drop failed', error));
      }
      lookups.limitsChanged();
      ingest.checkShards();
      void guard.notificationGap();
    },
  );

  // Blobs whose upload never committed (killed, or the database went away) are swept at start
  // and then periodically; the sweep is safe beside running uploads (see ingest/uploads.ts).
  const sweepStop = new AbortController();
  const sweep = async (): Promise<void> => {
    try {
      const removed = await uploads.sweep(TEMP_GRACE_MS, sweepStop.signal);
      if (removed > 0) log.info(`blob sweep: removed ${removed} unreferenced files`);
    } catch (error) {
      if (!sweepStop.signal.aborted) log.error('blob sweep failed (tried again at the next one)', error);
    }
  };
  const stopSweeps = everyInTurn(sweep, config.blobSweepMs, true);
  made.push(() => {
    sweepStop.abort();
    return stopSweeps();
  });
  if (config.oauthNotice !== null) log.info(config.oauthNotice);
  const oauth =
    config.oauth === null
      ? null
      : {
          publicUrl: () => publicUrl,
          options: config.oauth,
          csrf: new CsrfTokens(await sharedSecret(db, 'csrf', randomBytes(32))),
          documents: new ClientDocuments({ allowPrivate: config.oauth.clientFetchPrivate, ca: config.oauth.clientFetchCa }),
        };
  const server = await startServer(
    {
      db,
      auth,
      guard,
      metrics,
      recentReads: new RecentReads(),
      nodeDeadMs: config.cluster?.deadMs ?? null,
      uploads,
      log: (message, error, fields) => log.error(message, error, fields),
      requestLog: log.debugging ? (fields) => log.debug('request', fields) : null,
      maxJsonBytes: config.maxJsonBytes,
      readPool,
      audit,
      lookups,
      shardDir,
      grepTimeoutMs: config.grepTimeoutMs,
      mcpMaxChars: config.mcpMaxChars,
      mcpAllowedOrigins: config.mcpAllowedOrigins,
      mcpChallenge: oauth === null && issuer === null ? null : (workspace, sent) => mcpChallenge(publicUrl, workspace, sent),
      oauth,
      protectedResource:
        oauth === null && issuer === null
          ? null
          : {
              publicUrl: () => publicUrl,
              // The company's issuer first: a client that takes the first server signs in there.
              authorizationServers: () => [...(config.issuer === null ? [] : [config.issuer.url]), ...(oauth === null ? [] : [publicUrl])],
            },
      freshness,
      ready: () => membership === null || membership.ready,
      workspaceDeleted: async (accountId, workspaceId, blobs) => {
        lookups.workspaceDeleted();
        await ingest.drop(workspaceId);
        readPool.shardDropped(shardDir(workspaceId));
        // Its shard snapshots (the row that named them is gone) and the originals no other file
        // names, in batches; what fails here is left to the sweep.
        try {
          const snapshots: string[] = [];
          for await (const { key } of objects.list(`${SNAPSHOTS}/${workspaceId}/`)) snapshots.push(key);
          await objects.deleteMany(snapshots);
          await uploads.collectMany(accountId, blobs);
        } catch (error) {
          log.error(`removing the stored objects of deleted workspace ${workspaceId} failed`, error);
        }
      },
    },
    config.host,
    config.port,
    config.http,
  );
  log.info(`HTTP: ${server.http}`);
  const shownHost = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;
  if (config.publicUrl === null) publicUrl = `http://${shownHost}:${server.port}`;
  if (!server.console) log.info('the console is not built (npm run build builds it): /console/ answers 404');
  // The change log is kept VFS_CHANGES_KEEP_SECONDS (every node trims it; trimming twice is harmless).
  made.push(
    everyInTurn(
      () =>
        trimChanges(db, config.keepChangesSeconds).then(
          () => {},
          (error: unknown) => log.error('trimming the change log failed', error),
        ),
      Math.max(60_000, config.keepChangesSeconds * 100),
      false,
    ),
  );
  made.push(trimAllocatorEvery(config.mallocTrimMs, (error: unknown) => log.error('giving free memory back failed', error)));
  // OAuth rows past their use are deleted after VFS_OAUTH_RETENTION_SECONDS, at start and then
  // hourly, by every node (deleting twice is harmless), in bounded batches.
  if (config.oauth !== null) {
    const retention = config.oauth.retentionSeconds;
    const sweepOAuthRows = (): Promise<void> =>
      sweepOAuth(db, retention)
        .then((deleted) => void (deleted > 0 && log.info(`OAuth sweep: deleted ${deleted} rows`)))
        .catch((error: unknown) => log.error('sweeping OAuth rows failed (tried again at the next one)', error));
    made.push(everyInTurn(sweepOAuthRows, OAUTH_SWEEP_MS, true));
  }
  if (config.cluster !== null) {
    const id = await nodeId(config.dataDir, config.cluster.nodeId);
    membership = new Membership(
      id,
      `http://${shownHost}:${server.port}`,
      db,
      objects,
      // Walking every copy's directory costs about 0.2 ms a copy: paced to about 2% of the time.
      { cacheBytes: paced(() => directoryBytes(shards), 50), applied: () => freshness?.held() ?? {} },
      config.cluster.heartbeatMs,
      (message, error) => log.error(message, error),
    );
    await membership.start();
    // A revocation answers once every live node has dropped its cached credentials. One that
    // has not within DROP_WAIT_MS (its notification connection lost) drops them when it is back.
    const deadMs = config.cluster.deadMs;
    auth.othersDrop = async () => {
      try {
        const behind = await dropCredentialsEverywhere(db, INVALIDATE_CHANNEL, id, deadMs);
        if (behind.length > 0) log.error(`revoked credentials: ${behind.join(', ')} did not confirm dropping their cached ones within ${DROP_WAIT_MS} ms`);
      } catch (error) {
        log.error('asking the other nodes to drop cached credentials failed (the revocation stands)', error);
      }
    };
    made.push(() => membership!.stop());
    const warm = new WarmSet({
      db,
      nodeId: id,
      deadMs: config.cluster.deadMs,
      held: () => freshness?.held() ?? {},
      lastRead: (workspaceId) => freshness?.lastRead(workspaceId),
      fill: (workspaceId, accountId) => ingest.catchUp(workspaceId, accountId, 0, false),
      bytes: (workspaceId) => directoryBytes(shardDir(workspaceId)),
      evict: async (workspaceId) => {
        freshness?.forget(workspaceId);
        await ingest.evict(workspaceId);
        readPool.shardDropped(shardDir(workspaceId));
      },
      follow: (workspaceIds, snapshotted) => ingest.follow(workspaceIds, snapshotted),
      budgetBytes: config.cluster.cacheBytes,
      // Unread for 30 heartbeats (a minute by default).
      idleMs: 30 * config.cluster.heartbeatMs,
      log: (message, error) => log.error(message, error),
    });
    warm.tick();
    const warming = setInterval(() => warm.tick(), config.cluster.heartbeatMs).unref();
    made.push(async () => {
      clearInterval(warming);
      warm.stop();
    });
    log.info(`node ${id} of a cluster: shards are copies kept up to date from the change log`);
  }
  let metricsServer: MetricsServer | null = null;
  if (metrics !== null && config.metricsPort !== null) {
    metricsServer = await startMetricsServer(metrics, config.host, config.metricsPort);
    log.info(`metrics on http://${shownHost}:${metricsServer.port}/metrics`);
  }
  return {
    url: `http://${shownHost}:${server.port}`,
    port: server.port,
    metricsUrl: metricsServer === null ? null : `http://${shownHost}:${metricsServer.port}/metrics`,
    consoleUrl: server.console ? `http://${shownHost}:${server.port}/console/` : null,
    db,
    createdKey,
    stop: async () => {
      if (membership !== null) {
        // Draining: /readyz says 503 while requests are still served, so that a load balancer
        // checking it moves new requests to the other nodes before the socket closes.
        await membership.drain();
        await new Promise((resolve) => setTimeout(resolve, config.cluster!.drainMs));
      }
      await metricsServer?.close();
      const cut = await server.close(config.shutdownGraceMs);
      if (cut > 0) log.error(`stopping with ${cut} requests still in flight after ${config.shutdownGraceMs / 1000} s`);
      await closeAll(made);
      await cluster?.stop();
      await lock.release();
    },
  };
}

/** Bytes of the regular files under `dir` (0 when it is missing). */
/**
 * The verifier of the company issuer's tokens, its discovery started (not awaited: the provider
 * may be down). Its account must exist: a start with a name that matches none fails, naming it.
 */
async function issuerTokens(settings: IssuerSettings, db: Database, lookups: Lookups, publicUrl: () => string, log: Logger): Promise<IssuerTokens> {
  const accountId = await accountIdByName(db, settings.account);
  if (accountId === null) {
    throw new Error(
      `invalid configuration: VFS_OAUTH_ISSUER_ACCOUNT: no account is named ${JSON.stringify(settings.account)} (npm run admin -- list-accounts lists them)`,
    );
  }
  const issuer = new IssuerTokens({ ...settings, accountId, audience: (workspace) => resourceUrl(publicUrl(), workspace), log }, lookups);
  issuer.start();
  return issuer;
}

export async function directoryBytes(dir: string): Promise<number> {
  let total = 0;
  try {
    for (const entry of await readdir(dir, { recursive: true, withFileTypes: true })) {
      if (!entry.isFile()) continue;
      // A shard deleted meanwhile is simply not counted.
      total += await stat(join(entry.parentPath, entry.name)).then(
        (s) => s.size,
        () => 0,
      );
    }
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
  }
  return total;
}
