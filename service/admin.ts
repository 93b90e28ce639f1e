/**
 * The operator command: `npm run admin -- <command> [arguments]`.
 *
 * It connects as the owner role to the same database the service uses (the
 * embedded cluster under DATA_DIR, or DATABASE_URL), so it reads the same
 * environment as `npm start`. Commands that make a key print only that key on
 * stdout; everything else goes to stderr or, for listings, stdout.
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { newCredential } from '../core/credentials.js';
import {
  createAccount,
  issueManagementKey,
  listAccounts,
  listManagementKeys,
  listPlans,
  revokeManagementKey,
  setAccountLimits,
  upsertPlan,
  INVALIDATE_CHANNEL,
} from '../db/accounts.js';
import { Database, type DatabaseTargets, migrate } from '../db/database.js';
import { EmbeddedCluster } from '../db/embedded-postgres.js';
import { LIMIT_COLUMNS, type Limits } from '../db/limits.js';
import { provisionDatabase } from '../db/provision.js';
import { requestShardRebuild } from '../db/shard-repair.js';
import { BlobStore } from '../ingest/blob-store.js';
import { openObjectStore } from '../storage/open-store.js';
import { sweepBlobs } from '../ingest/uploads.js';
import { DROP_WAIT_MS, dropCredentialsEverywhere, listNodes } from '../db/nodes.js';
import { loadConfig } from './config.js';
import { type DataDirLock, DataDirInUse, lockDataDir } from './data-lock.js';
import { EMBEDDED_NAMES } from './service.js';

const USAGE = `usage: npm run admin -- <command> [arguments]

  create-account <name> [--plan <plan>]   create an account and print its first management key
  issue-key <account>                      print a new management key for the account (name or id)
  revoke-key <key-id>                      revoke a management key
  list-keys <account>                      list an account's key ids
  list-accounts [--json]                   accounts with plan, effective limits and counts
  set-limits <account> [--plan <plan>] [--<limit> <n|default>]...
                                           move an account to a plan and/or override its limits
  set-plan <plan> --<limit> <n>...         create or update a plan (every limit required for a new plan)
  list-plans                               plans and their limits
  generate-key                             print a well-formed key without storing it (for VFS_BOOTSTRAP_KEY)
  rebuild-shard <account> <workspace>      rebuild a workspace's shard from its blobs (now if the service runs, else at its start)
  sweep-blobs [--grace-seconds <n>]        remove blobs no file references, and upload temp files untouched for n s (default 3600)
  list-nodes [--json]                      the nodes of a cluster: state, last heartbeat, cache size, lag per workspace

  limits: ${LIMIT_COLUMNS.map(([, col]) => '--' + col.replaceAll('_', '-')).join(', ')}
`;

const limitOptions = Object.fromEntries(LIMIT_COLUMNS.map(([, col]) => [col.replaceAll('_', '-'), { type: 'string' as const }]));

async function main(argv: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      plan: { type: 'string' },
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      'grace-seconds': { type: 'string' },
      ...limitOptions,
    },
  });
  const [command, arg, arg2] = positionals;
  if (command === undefined || values.help === true) {
    process.stderr.write(USAGE);
    return command === undefined && values.help !== true ? 2 : 0;
  }
  if (command === 'generate-key') {
    process.stdout.write(newCredential('management_key') + '\n');
    return 0;
  }
  const needsArg = ['create-account', 'issue-key', 'revoke-key', 'list-keys', 'set-limits', 'set-plan'];
  if (needsArg.includes(command) && arg === undefined) throw new Error(`${command} needs an argument\n\n${USAGE}`);
  if (command === 'rebuild-shard' && arg2 === undefined) throw new Error(`rebuild-shard needs an account and a workspace\n\n${USAGE}`);
  const graceSeconds = values['grace-seconds'] ?? '3600';
  if (!/^\d{1,9}$/.test(graceSeconds)) throw new Error('--grace-seconds must be a non-negative integer');
  const limits = (allowDefault: boolean): Partial<Record<keyof Limits, number | null>> => {
    const out: Partial<Record<keyof Limits, number | null>> = {};
    for (const [key, col] of LIMIT_COLUMNS) {
      const raw = (values as Record<string, unknown>)[col.replaceAll('_', '-')];
      if (typeof raw !== 'string') continue;
      if (allowDefault && raw === 'default') out[key] = null;
      else if (/^\d{1,15}$/.test(raw)) out[key] = Number(raw);
      else throw new Error(`--${col.replaceAll('_', '-')} must be a non-negative integer${allowDefault ? ' or "default"' : ''}`);
    }
    return out;
  };

  const config = loadConfig(process.env);
  let lock: DataDirLock | null = null;
  let cluster: EmbeddedCluster | null = null;
  let db: Database | null = null;
  try {
    let targets: DatabaseTargets;
    let appRole: string;
    if (config.database === null) {
      // With no service running, this command runs the cluster and holds the directory meanwhile,
      // so that a service started now does not adopt a cluster about to be stopped. A running
      // service holds the lock itself, and its cluster is adopted and left running.
      lock = await lockDataDir(config.dataDir).catch((error: unknown) => {
        if (error instanceof DataDirInUse) return null;
        throw error;
      });
      cluster = await EmbeddedCluster.start(config.dataDir);
      targets = await provisionDatabase(cluster.address, EMBEDDED_NAMES);
      appRole = EMBEDDED_NAMES.appRole;
    } else {
      targets = { owner: { connectionString: config.database.ownerUrl }, app: { connectionString: config.database.appUrl } };
      appRole = decodeURIComponent(new URL(config.database.appUrl).username);
    }
    await migrate(targets.owner, appRole);
    db = new Database(targets, () => {});
    switch (command) {
      case 'create-account': {
        await createAccount(db, arg!, values.plan ?? config.defaultPlan);
        process.stdout.write((await issueManagementKey(db, arg!)).key + '\n');
        break;
      }
      case 'issue-key':
        process.stdout.write((await issueManagementKey(db, arg!)).key + '\n');
        break;
      case 'revoke-key':
        if (!(await revokeManagementKey(db, arg!))) throw new Error(`no such key: ${arg}`);
        {
          // Cluster nodes drop the key from their caches before this command returns.
          const behind = await dropCredentialsEverywhere(db, INVALIDATE_CHANNEL, '', config.cluster?.deadMs ?? 10_000);
          if (behind.length > 0)
            process.stderr.write(`nodes that did not confirm dropping cached credentials within ${DROP_WAIT_MS} ms: ${behind.join(', ')}\n`);
        }
        process.stderr.write(`revoked ${arg}\n`);
        break;
      case 'list-keys':
        for (const k of await listManagementKeys(db, arg!)) {
          process.stdout.write(`${k.id}\tcreated ${k.createdAt}\t${k.revokedAt === null ? 'active' : `revoked ${k.revokedAt}`}\n`);
        }
        break;
      case 'list-accounts': {
        const accounts = await listAccounts(db);
        if (values.json === true) process.stdout.write(JSON.stringify(accounts, null, 2) + '\n');
        else {
          for (const a of accounts) {
            const l = LIMIT_COLUMNS.map(([key, col]) => `${col}=${a.limits[key]}`).join(' ');
            process.stdout.write(`${a.name}\t${a.id}\tplan=${a.plan}\tkeys=${a.activeKeys}\tworkspaces=${a.workspaces}\t${l}\n`);
          }
        }
        break;
      }
      case 'set-limits':
        await setAccountLimits(db, arg!, { plan: values.plan, limits: limits(true) });
        process.stderr.write(`updated ${arg}\n`);
        break;
      case 'set-plan': {
        const given = limits(false);
        const existing = (await listPlans(db)).find((p) => p.name === arg);
        const merged = { ...existing, ...given } as Partial<Limits>;
        const missing = LIMIT_COLUMNS.filter(([key]) => typeof merged[key] !== 'number').map(([, col]) => '--' + col.replaceAll('_', '-'));
        if (missing.length > 0) throw new Error(`a new plan needs every limit; missing ${missing.join(', ')}`);
        await upsertPlan(db, arg!, merged as Limits);
        process.stderr.write(`plan ${arg} saved\n`);
        break;
      }
      case 'rebuild-shard':
        if (!(await requestShardRebuild(db, arg!, arg2!))) throw new Error(`no such workspace: ${arg}/${arg2}`);
        process.stderr.write(
          `rebuild of ${arg}/${arg2} requested: a running service starts it now, otherwise the next start does; its files are pending until re-ingested\n`,
        );
        break;
      case 'sweep-blobs': {
        const objects = openObjectStore(config.storage);
        const blobs = new BlobStore(join(config.dataDir, 'blobs'), objects);
        await blobs.init();
        const removed = await sweepBlobs(db, blobs, Number(graceSeconds) * 1000).finally(() => objects.close());
        process.stderr.write(`removed ${removed} unreferenced blobs and stale upload temp files\n`);
        break;
      }
      case 'list-nodes': {
        const nodes = await listNodes(db, (config.cluster?.deadMs ?? 10_000) / 1000);
        if (values.json === true) process.stdout.write(JSON.stringify(nodes, null, 2) + '\n');
        else {
          for (const n of nodes) {
            const seen = Math.max(0, Math.round((Date.now() - n.seenAt.getTime()) / 100) / 10);
            const lag = n.behind.length === 0 ? 'up to date' : n.behind.map((b) => `${b.workspaceId}:-${b.versions}`).join(' ');
            process.stdout.write(`${n.id}	${n.state}	seen ${seen} s ago	${n.url ?? '-'}	copies=${n.copies}	cache=${n.cacheBytes} B	lag: ${lag}\n`);
          }
          if (nodes.length === 0) process.stderr.write('no node has joined a cluster on this database (VFS_CLUSTER=on)\n');
        }
        break;
      }
      case 'list-plans':
        for (const p of await listPlans(db)) {
          process.stdout.write(`${p.name}\t${LIMIT_COLUMNS.map(([key, col]) => `${col}=${p[key]}`).join(' ')}\n`);
        }
        break;
      default:
        throw new Error(`unknown command: ${command}\n\n${USAGE}`);
    }
  } finally {
    await db?.close();
    if (cluster !== null && !cluster.adopted) await cluster.stop();
    await lock?.release();
  }
  return 0;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`admin: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  },
);
