/**
 * Fault scenarios against the real service run as a child process (as
 * `npm start` runs it) on its own data directory, with its own embedded
 * PostgreSQL: SIGKILLs at random moments under concurrent uploads or reads,
 * restarts on the same directory, and the checks that nothing acknowledged
 * was lost. Used by the fault tests (few kills) and bench/faults.ts (many).
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import pg from 'pg';
import { newCredential } from '../../core/credentials.js';
import { clusterAddress } from '../../db/embedded-postgres.js';
import { loadConfig } from '../../service/config.js';
import { EMBEDDED_NAMES } from '../../service/service.js';
import { openObjectStore } from '../../storage/open-store.js';
import { storedOriginals } from './originals.js';
import { type ServiceProcess, runAdmin, startServiceProcess } from './process.js';
import { exportAudit } from './audit-export.js';
import { seededRandom } from './random.js';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));
/** How long an upload round waits for its first acknowledged upload before it kills anyway. */
const FIRST_UPLOAD_WAIT_MS = 20_000;

/** The service on one data directory, started, killed and restarted at will. */
export class FaultService {
  /** The management key of the default account (VFS_BOOTSTRAP_KEY). */
  readonly key = newCredential('management_key');
  /** The running process, or null between a kill and the next start. */
  current: ServiceProcess | null = null;

  private constructor(
    readonly dataDir: string,
    private readonly env: Record<string, string>,
  ) {}

  /**
   * A fresh data directory; `env` adds to the service's environment. Under npm test's S3 pass
   * the originals go to a bucket of the run's Swift cluster; that helper needs vitest, which the
   * fault bench runs without, so it is loaded only then.
   */
  static async create(env: Record<string, string> = {}): Promise<FaultService> {
    const dataDir = await mkdtemp(join(tmpdir(), 'vfs-faults-'));
    const storage =
      process.env.VFS_TEST_STORAGE === 's3' ? (await import('./service.js')).testStorage(basename(dataDir).slice('vfs-faults-'.length).toLowerCase()) : {};
    return new FaultService(dataDir, { ...storage, ...env });
  }

  /** The environment the service and the operator command run with. */
  get environment(): Record<string, string> {
    return {
      DATA_DIR: this.dataDir,
      VFS_BOOTSTRAP_KEY: this.key,
      VFS_MANAGEMENT_RATE: '1000000',
      VFS_AUTH_FAILURES: '1000000',
      ...this.env,
    };
  }

  /** Starts the service and waits until it listens. */
  async start(): Promise<ServiceProcess> {
    this.current = await startServiceProcess(this.environment).listening;
    return this.current;
  }

  /** Starts the service and kills it `afterMs` later, listening or not (a kill during start). */
  async startAndKill(afterMs: number): Promise<void> {
    const starting = startServiceProcess(this.environment);
    await Promise.race([sleep(afterMs), starting.exited]);
    starting.child.kill('SIGKILL');
    await starting.exited;
  }

  /** SIGKILL, and waits for the process to be gone. */
  async kill(): Promise<void> {
    const p = this.current;
    this.current = null;
    if (p === null) return;
    p.child.kill('SIGKILL');
    await p.exited;
  }

  /**
   * SIGTERM; resolves with 0 after a clean exit, else with the exit code or signal followed by
   * the end of the process's stderr, so that a test expecting 0 shows why it did not get it.
   */
  async stop(): Promise<number | string> {
    const p = this.current;
    this.current = null;
    if (p === null) return 0;
    p.child.kill('SIGTERM');
    const code = await p.exited;
    return code === 0 ? 0 : `${code}\n${p.stderr().slice(-4000)}`;
  }

  /** Calls the API of the running service with the management key (or `key`). */
  async api(method: string, path: string, body?: string | Uint8Array, key = this.key): Promise<Response> {
    if (this.current === null) throw new Error('the service is not running');
    return fetch(this.current.url + path, { method, headers: { authorization: `Bearer ${key}` }, body, signal: AbortSignal.timeout(30_000) });
  }

  /** A client of the service's embedded PostgreSQL as its superuser, on the service's database (the service runs). */
  async database(): Promise<pg.Client> {
    const client = new pg.Client({ ...clusterAddress(this.dataDir), database: EMBEDDED_NAMES.database });
    await client.connect();
    return client;
  }

  /** Runs the operator command on this data directory. */
  admin(args: string[]): Promise<{ stdout: string; stderr: string }> {
    return runAdmin(this.environment, args);
  }

  /** Stops the service if it runs and removes the data directory. */
  async dispose(): Promise<void> {
    if (this.current !== null) await this.stop();
    await rm(this.dataDir, { recursive: true, force: true });
  }
}

/** A file listing entry. */
export interface Listed {
  path: string;
  status: 'pending' | 'ready' | 'error';
  errorDetail: string | null;
}

/** Every file of a workspace (pages through the listing). */
export async function listFiles(svc: FaultService, ws: string): Promise<Listed[]> {
  const out: Listed[] = [];
  let cursor: string | null = null;
  do {
    const r = await svc.api('GET', `/v1/workspaces/${ws}/files?limit=1000${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`);
    if (r.status !== 200) throw new Error(`listing: ${r.status} ${await r.text()}`);
    const page = (await r.json()) as { files: Listed[]; nextCursor: string | null };
    out.push(...page.files);
    cursor = page.nextCursor;
  } while (cursor !== null);
  return out;
}

/** Waits until no file of the workspace is pending; returns the listing. */
export async function settled(svc: FaultService, ws: string, timeoutMs = 120_000): Promise<Listed[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const files = await listFiles(svc, ws);
    if (files.every((f) => f.status !== 'pending')) return files;
    if (Date.now() > deadline) throw new Error(`${files.filter((f) => f.status === 'pending').length} files still pending`);
    await sleep(200);
  }
}

/** Options of a kill scenario. */
export interface KillOptions {
  /** SIGKILLs to survive. */
  kills: number;
  /** Concurrent clients. */
  clients: number;
  /** Longest a round of load lasts before its kill (each round lasts a random part of it). */
  roundMs: number;
  /** Seed of the random moments and sizes. */
  seed: number;
  /** Progress lines (the bench prints them). */
  log?: (line: string) => void;
}

/** What the upload scenario sent and was told. */
export interface UploadRun {
  kills: number;
  /** Every upload sent: path → its index (the body is `uploadBody(path, index)`). */
  sent: Map<string, number>;
  /** Paths answered 202. */
  acknowledged: Set<string>;
  /** Rounds that ran uploads (the others killed the service while it started). */
  uploadRounds: number;
  /** Upload rounds whose first acknowledgement never came before the kill. */
  roundsWithoutUploads: number;
  /** Upload temp files and unreferenced blobs the restarted services said they removed. */
  cleaned: { tempFiles: number; blobs: number };
}

/** What a service's log says its start-up clean-up removed. */
function cleanedBy(stderr: string): { tempFiles: number; blobs: number } {
  const sum = (re: RegExp): number => [...stderr.matchAll(re)].reduce((n, m) => n + Number(m[1]), 0);
  return { tempFiles: sum(/removed (\d+) upload temp files/g), blobs: sum(/blob sweep: removed (\d+)/g) };
}

/** The body uploaded at index `i`: `needle` on 1 + i % 5 lines, every 16th one about 256 KiB. */
export function uploadBody(path: string, i: number): string {
  const needles = `needle ${path}\n`.repeat(1 + (i % 5));
  const filler = i % 16 === 0 ? `filler line of ${path} ${'x'.repeat(200)}\n`.repeat(1200) : `filler of ${path}\n`;
  return needles + filler;
}

/** How many lines of `uploadBody(path, i)` contain `needle`. */
export function needleCount(i: number): number {
  return 1 + (i % 5);
}

/**
 * Uploads from `clients` concurrent clients into workspace `ws` (created if
 * missing) and SIGKILLs the service at a random moment of each round,
 * restarting it on the same data directory; about one round in five is
 * killed while the service is still starting instead. Leaves the service
 * stopped.
 */
export async function uploadsUnderKills(svc: FaultService, ws: string, o: KillOptions): Promise<UploadRun> {
  const rnd = seededRandom(o.seed);
  const sent = new Map<string, number>();
  const acknowledged = new Set<string>();
  const cleaned = { tempFiles: 0, blobs: 0 };
  let next = 0;
  let kills = 0;
  let uploadRounds = 0;
  let roundsWithoutUploads = 0;
  await svc.start();
  const created = await svc.api('POST', '/v1/workspaces', JSON.stringify({ name: ws }));
  if (created.status !== 201 && created.status !== 409) throw new Error(`create workspace: ${created.status}`);
  for (let round = 0; round < o.kills; round++) {
    if (round > 0 && rnd() < 0.2) {
      await svc.startAndKill(rnd() * 1500);
      kills++;
      continue;
    }
    const proc = svc.current ?? (await svc.start());
    uploadRounds++;
    let stop = false;
    let acknowledgedOne!: () => void;
    const firstAck = new Promise<void>((resolve) => (acknowledgedOne = resolve));
    const client = async (): Promise<void> => {
      while (!stop) {
        const i = next++;
        const path = `/k${round}/c${i % o.clients}/f${i}.txt`;
        const body = uploadBody(path, i);
        sent.set(path, i);
        try {
          const r = await fetch(`${proc.url}/v1/workspaces/${ws}/files${path}`, {
            method: 'PUT',
            headers: { authorization: `Bearer ${svc.key}`, 'content-type': 'text/plain' },
            body,
          });
          await r.text();
          if (r.status === 202) {
            acknowledged.add(path);
            acknowledgedOne();
          } else if (r.status !== 503) throw new Error(`upload ${path}: unexpected ${r.status}`);
        } catch (error) {
          if (error instanceof Error && error.message.startsWith('upload')) throw error;
          return; // the connection broke: the service is gone
        }
      }
    };
    const clients = Array.from({ length: o.clients }, client);
    // The kill's moment is counted from the round's first acknowledged upload, so that every round
    // kills a service in the middle of taking uploads however slowly this machine takes them.
    if (!(await Promise.race([firstAck.then(() => true), sleep(FIRST_UPLOAD_WAIT_MS).then(() => false)]))) roundsWithoutUploads++;
    await sleep(50 + rnd() * o.roundMs);
    await svc.kill();
    const c = cleanedBy(proc.stderr());
    cleaned.tempFiles += c.tempFiles;
    cleaned.blobs += c.blobs;
    kills++;
    stop = true;
    await Promise.all(clients);
    o.log?.(`kill ${kills}: ${acknowledged.size} uploads acknowledged of ${sent.size} sent`);
  }
  return { kills, sent, acknowledged, uploadRounds, roundsWithoutUploads, cleaned };
}

/** What was found after an upload run. */
export interface UploadCheck {
  /** Acknowledged uploads present and `ready`. */
  found: number;
  /** Acknowledged uploads missing or not ready. */
  lost: string[];
  /** Listed files that were never sent (must be none). */
  phantoms: string[];
  /** Paths `find` lists more than once, or a listed ready file `find` does not list. */
  findProblems: string[];
  /** Files whose grep count is wrong, missing, or listed twice. */
  grepProblems: string[];
  /** Blobs on disk no file references, after the sweep. */
  orphanBlobs: number;
  /** Blobs files reference that are not on disk. */
  missingBlobs: number;
  /** Upload temp files left right after the start. */
  tempFiles: number;
  /** What the operator command's sweep said it removed. */
  sweep: string;
}

/**
 * Restarts the service, waits for ingest to settle, then compares what the
 * service has with what was sent and acknowledged: listing, `find` per
 * round directory, `grep` counts, and the blob store after the operator
 * command's sweep. Leaves the service running.
 */
export async function checkUploads(svc: FaultService, ws: string, run: UploadRun): Promise<UploadCheck> {
  await svc.start();
  const tempFiles = (await readdir(join(svc.dataDir, 'blobs', 'tmp'))).length;
  await liftReadLimits(svc);
  const files = await settled(svc, ws);
  const listed = new Map(files.map((f) => [f.path, f]));
  const lost = [...run.acknowledged].filter((p) => listed.get(p)?.status !== 'ready').sort();
  const phantoms = files.filter((f) => !run.sent.has(f.path)).map((f) => f.path);
  const ready = files.filter((f) => f.status === 'ready');

  const findProblems: string[] = [];
  const dirs = new Set(ready.map((f) => f.path.split('/').slice(0, 3).join('/')));
  for (const dir of dirs) {
    const r = await svc.api('GET', `/v1/workspaces/${ws}/find?pattern=${encodeURIComponent('**/*')}&path=${encodeURIComponent(dir)}&head_limit=1000`);
    const lines = (await r.text()).split('\n').filter((l) => l !== '');
    if (r.status !== 200 || lines.some((l) => l.startsWith('['))) findProblems.push(`${dir}: status ${r.status} or truncated`);
    const seen = new Set<string>();
    for (const line of lines) {
      if (seen.has(line)) findProblems.push(`${line} listed twice`);
      seen.add(line);
    }
    for (const f of ready) if (f.path.startsWith(dir + '/') && !seen.has(f.path)) findProblems.push(`${f.path} not found`);
  }

  const grepProblems: string[] = [];
  const r = await svc.api('GET', `/v1/workspaces/${ws}/grep?pattern=needle&output_mode=count&head_limit=10000000`);
  const counts = new Map<string, number>();
  for (const line of (await r.text()).split('\n')) {
    if (line === '') continue;
    const cut = line.lastIndexOf(':');
    const path = line.slice(0, cut);
    if (counts.has(path)) grepProblems.push(`${path} counted twice`);
    counts.set(path, Number(line.slice(cut + 1)));
  }
  for (const f of ready) {
    const i = Number(/\/f(\d+)\.txt$/.exec(f.path)![1]);
    if (counts.get(f.path) !== needleCount(i)) grepProblems.push(`${f.path}: grep count ${counts.get(f.path)}, expected ${needleCount(i)}`);
  }
  if (counts.size !== ready.length) grepProblems.push(`grep counts ${counts.size} files, ${ready.length} are ready`);

  const sweep = (await svc.admin(['sweep-blobs', '--grace-seconds', '0'])).stderr.trim();
  const c = cleanedBy(svc.current!.stderr());
  run.cleaned.tempFiles += c.tempFiles;
  run.cleaned.blobs += c.blobs;
  const expected = new Set(
    files.map((f) =>
      createHash('sha256')
        .update(uploadBody(f.path, run.sent.get(f.path) ?? -1))
        .digest('hex'),
    ),
  );
  const objects = openObjectStore(loadConfig(svc.environment).storage);
  const db = await svc.database();
  let onDisk: Set<string>;
  try {
    onDisk = new Set((await storedOriginals(objects, db)).map((o) => o.sha));
  } finally {
    await db.end();
    objects.close();
  }
  return {
    found: run.acknowledged.size - lost.length,
    lost,
    phantoms,
    findProblems,
    grepProblems,
    orphanBlobs: [...onDisk].filter((sha) => !expected.has(sha)).length,
    missingBlobs: [...expected].filter((sha) => !onDisk.has(sha)).length,
    tempFiles,
    sweep,
  };
}

/** One read sent by the read scenario. */
export interface SentRead {
  tool: 'ls' | 'find' | 'cat' | 'grep';
  /** The unique value that identifies the call in the audit log. */
  marker: string;
  /** The status, when the full response (status and complete body) arrived; else null. */
  status: number | null;
}

/** What the read scenario sent. */
export interface ReadRun {
  kills: number;
  reads: SentRead[];
}

/** Reads are rate limited per credential and account; these scenarios are about faults, not limits. */
export async function liftReadLimits(svc: FaultService): Promise<void> {
  await svc.admin(['set-limits', 'default', '--read-rate-per-credential', '1000000', '--read-rate-per-account', '1000000']);
}

/** Files the read scenario reads: 40 small text files under /d0../d3. */
export async function seedReadWorkspace(svc: FaultService, ws: string): Promise<string> {
  const created = await svc.api('POST', '/v1/workspaces', JSON.stringify({ name: ws }));
  if (created.status !== 201) throw new Error(`create workspace: ${created.status}`);
  for (let i = 0; i < 40; i++) {
    const r = await svc.api('PUT', `/v1/workspaces/${ws}/files/d${i % 4}/f${i}.txt`, `needle ${i}\n`.repeat(3) + 'hay\n'.repeat(20));
    if (r.status !== 202) throw new Error(`upload: ${r.status}`);
  }
  await settled(svc, ws);
  await liftReadLimits(svc);
  const minted = await svc.api('POST', `/v1/workspaces/${ws}/tokens`, JSON.stringify({ ttlSeconds: 86400 }));
  if (minted.status !== 201) throw new Error(`mint: ${minted.status}`);
  return ((await minted.json()) as { token: string }).token;
}

/** The query of read `n`, carrying its unique marker in a parameter the audit log records. */
function readQuery(n: number): { tool: SentRead['tool']; marker: string; query: string } {
  const marker = `zq${n}x`;
  switch (n % 4) {
    case 0:
      return { tool: 'grep', marker: `needle|${marker}`, query: `pattern=${encodeURIComponent(`needle|${marker}`)}&output_mode=count` };
    case 1:
      return { tool: 'find', marker: `{**/*.txt,${marker}}`, query: `pattern=${encodeURIComponent(`{**/*.txt,${marker}}`)}` };
    case 2:
      return { tool: 'cat', marker: String(1_000_000 + n), query: `path=/d2/f${2 + 4 * (n % 10)}.txt&limit=${1_000_000 + n}` };
    default:
      // A path that does not exist: a 404, audited like any call on an existing workspace.
      return { tool: 'ls', marker: `/${marker}`, query: `path=${encodeURIComponent(`/${marker}`)}` };
  }
}

/** The marker an audit event carries (the parameter readQuery put it in). */
export function eventMarker(event: { tool: string; params: Record<string, string> }): string | undefined {
  if (event.tool === 'grep' || event.tool === 'find') return event.params.pattern;
  if (event.tool === 'cat') return event.params.limit;
  return event.params.path;
}

/**
 * Reads from `clients` concurrent clients, alternating the management key and
 * a scoped token, and SIGKILLs the service at a random moment of each round,
 * restarting it. Records, per call, whether its full response arrived.
 * Leaves the service stopped.
 */
export async function readsUnderKills(svc: FaultService, ws: string, token: string, o: KillOptions): Promise<ReadRun> {
  const rnd = seededRandom(o.seed);
  const reads: SentRead[] = [];
  let next = 0;
  for (let round = 0; round < o.kills; round++) {
    const proc = svc.current ?? (await svc.start());
    let stop = false;
    let answered!: () => void;
    const firstAnswer = new Promise<void>((resolve) => (answered = resolve));
    const client = async (): Promise<void> => {
      while (!stop) {
        const n = next++;
        const { tool, marker, query } = readQuery(n);
        const read: SentRead = { tool, marker, status: null };
        reads.push(read);
        try {
          const r = await fetch(`${proc.url}/v1/workspaces/${ws}/${tool}?${query}`, {
            headers: { authorization: `Bearer ${n % 2 === 0 ? svc.key : token}` },
          });
          await r.arrayBuffer(); // rejects if the body is cut short
          read.status = r.status;
          if (tool === 'grep' || tool === 'find') answered();
        } catch {
          return; // the service is gone
        }
      }
    };
    const clients = Array.from({ length: o.clients }, client);
    // The read threads start after the service listens (about a second): the random moment is
    // counted from the first answer they give, so that every round kills the service under load.
    await Promise.race([firstAnswer, sleep(10_000)]);
    await sleep(rnd() * o.roundMs);
    await svc.kill();
    stop = true;
    await Promise.all(clients);
    o.log?.(`kill ${round + 1}: ${reads.filter((r) => r.status !== null).length} full responses of ${reads.length} reads`);
  }
  return { kills: o.kills, reads };
}

/** What the audit log holds for a read run. */
export interface AuditCheck {
  /** Full responses that must have exactly one event (every status the design audits). */
  expected: number;
  /** Of those, how many have exactly one. */
  found: number;
  /** Markers of full responses without an event. */
  missing: string[];
  /** Markers with more than one event. */
  duplicated: string[];
  /** Statuses of the full responses, counted. */
  statuses: Record<string, number>;
}

/** Restarts the service and matches the audit export against the reads' markers. Leaves the service running. */
export async function checkAudit(svc: FaultService, ws: string, run: ReadRun): Promise<AuditCheck> {
  await svc.start();
  const counts = new Map<string, number>();
  for (const event of await exportAudit(svc, ws)) {
    const marker = eventMarker(event);
    if (marker !== undefined) counts.set(marker, (counts.get(marker) ?? 0) + 1);
  }
  const statuses: Record<string, number> = {};
  const missing: string[] = [];
  let expected = 0;
  for (const read of run.reads) {
    if (read.status === null) continue;
    statuses[read.status] = (statuses[read.status] ?? 0) + 1;
    // Audited: every call past authentication on an existing workspace (401 and 429 are not).
    if (read.status === 401 || read.status === 429) continue;
    expected++;
    if ((counts.get(read.marker) ?? 0) === 0) missing.push(read.marker);
  }
  const duplicated = [...counts].filter(([, n]) => n > 1).map(([marker]) => marker);
  return { expected, found: expected - missing.length, missing, duplicated, statuses };
}
