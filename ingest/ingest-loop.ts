/**
 * The ingest loop: claim a batch of jobs, extract their text in the pool,
 * write the batch into the workspace shards (durably), then record the
 * outcomes. Extraction of the next batch overlaps the writes of the current
 * one, except during a bulk upload, when the next claim waits a little after
 * the write to take more at once (GATHER_FROM); writes happen strictly in
 * claim order, so a newer generation of a path always lands in the shard
 * after an older one.
 */
import type { Database } from '../db/database.js';
import { type IngestFile, type Job, type Outcome, claimJobs, finishJobs, jobFiles, jobKey, lastJobError } from '../db/ingest-jobs.js';
import type { BlobStore } from './blob-store.js';
import type { LocalCopy } from '../storage/object-store.js';
import type { ExtractResult } from './extract/types.js';
import { type ExtractPool, inlineText } from './extract/pool.js';
import type { ShardSnapshots } from './shards/snapshots.js';
import { type ShardDoc, type Shards, shardDoc } from './shards/writers.js';

/** Settings of the loop; every field has a default. */
export interface IngestOptions {
  /** Jobs claimed at once (default 512). */
  batchSize?: number;
  /**
   * During a bulk upload (GATHER_FROM), how long the next claim waits once the last batch is
   * written (default 100 ms), so that more of it comes in one batch.
   */
  gatherMs?: number;
  /** Seconds a claim lasts before another worker may take the job (default 120). */
  leaseSeconds?: number;
  /** Claims after which a job that keeps failing or killing its worker ends in `error` (default 5). */
  maxAttempts?: number;
  /** How often to look for jobs when not woken (default 1000 ms). */
  pollMs?: number;
}

const DEFAULTS: Required<IngestOptions> = { batchSize: 512, gatherMs: 100, leaseSeconds: 120, maxAttempts: 5, pollMs: 1000 };

/**
 * A claim of at least this many jobs, but not a full one, means a bulk upload is under way and
 * the queue is drained: the next claim then waits until this batch is written and gatherMs more
 * have passed. A batch costs about the same whatever it holds (the database's round trips, a
 * shard transaction and its level-0 segment, and so a share of the next merge, which comes every
 * MAX_RECENT_SEGMENTS segments), so while uploads keep coming, fewer and larger batches make each
 * file cheaper, at the price of up to gatherMs more before it is ready. The next claim comes at
 * once after a full claim (more is queued), after fewer jobs (a single upload, a trickle), and
 * after an extraction that took gatherMs or more (originals read from S3, PDFs): uploads gather
 * meanwhile anyway, and extracting the next batch while this one is written is worth more.
 */
const GATHER_FROM = 32;

/** Extensions that name a file type in the metrics; any other file is `text` when read as text, else `other`. */
const TYPED_EXTENSIONS = new Set(['pdf', 'docx', 'pptx', 'xlsx', 'odt', 'odp', 'ods', 'epub']);

/** A file's type for the metrics, from a small fixed set (labels must not grow with the uploads). */
function extractedType(path: string, result: ExtractResult): string {
  const dot = path.lastIndexOf('.');
  const extension = dot === -1 ? '' : path.slice(dot + 1).toLowerCase();
  if (TYPED_EXTENSIONS.has(extension)) return extension;
  if (result.ok) return result.kind === 'text' ? 'text' : result.kind;
  return 'other';
}

/** How long the queue stays empty before level 0 is merged (see run). */
const MERGE_QUIET_MS = 500;

/** Attempts of a file that hit the extraction's time or memory cap (ExtractResult `capped`): one retry. */
const CAPPED_ATTEMPTS = 2;

interface Extracted {
  job: Job;
  file: IngestFile;
  result: ExtractResult;
}

/** Work to run between batches. */
interface Chore {
  task: () => Promise<void>;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** Runs ingest until stopped. */
export class IngestLoop {
  private readonly options: Required<IngestOptions>;
  private readonly chores: Chore[] = [];
  private running = false;
  private wakeUp: (() => void) | null = null;
  private woken = false;
  private done: Promise<void> = Promise.resolve();
  /** Whether the next claim gathers first (GATHER_FROM). */
  private bulk = false;

  constructor(
    private readonly db: Database,
    private readonly blobs: BlobStore,
    private readonly pool: ExtractPool,
    private readonly shards: Shards,
    private readonly onError: (message: string, error: unknown) => void,
    options: IngestOptions = {},
    /** Told of each extraction: the file's type (extractedType), its outcome and its seconds (metrics). */
    private readonly onExtracted: ((type: string, outcome: 'ok' | 'error' | 'capped', seconds: number) => void) | null = null,
    /** Told of each shard change, and asked to snapshot the shards that are due; null: no snapshots. */
    private readonly snapshots: ShardSnapshots | null = null,
    /**
     * Whether this node's shard of a workspace takes what ingest makes of its files. A cluster node
     * writes only the copies it follows: any other copy would be partial, and a read there fills
     * it from the kept texts, where a copy it does not hold comes from the snapshot.
     */
    private readonly keeps: (workspaceId: string) => boolean = () => true,
  ) {
    this.options = { ...DEFAULTS, ...Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined)) };
  }

  /** Starts the loop. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.done = this.run();
  }

  /** Wakes the loop now (a job was enqueued). */
  poke(): void {
    this.woken = true;
    const wake = this.wakeUp;
    this.wakeUp = null;
    wake?.();
  }

  /**
   * Runs `task` between two batches, when no batch is being extracted or
   * written (shard repair needs the shards to itself); resolves once it ran.
   * Tasks queued before `start` run before the first claim.
   */
  between(task: () => Promise<void>): Promise<void> {
    return new Promise((resolve, reject) => {
      this.chores.push({ task, resolve, reject });
      this.poke();
    });
  }

  /** Stops after the batch in hand; claimed jobs not finished are claimed again after their lease. */
  async stop(): Promise<void> {
    this.running = false;
    this.poke();
    await this.done;
    for (const chore of this.chores.splice(0)) chore.reject(new Error('the ingest loop has stopped'));
  }

  private async run(): Promise<void> {
    let writing: Promise<void> = Promise.resolve();
    while (this.running) {
      if (this.chores.length > 0) {
        await writing;
        for (const chore of this.chores.splice(0)) await chore.task().then(chore.resolve, chore.reject);
        continue;
      }
      await this.gather(writing);
      if (!this.running) break;
      let jobs: Job[] = [];
      this.bulk = false;
      try {
        this.woken = false;
        jobs = await claimJobs(this.db, this.options.batchSize, this.options.leaseSeconds);
      } catch (error) {
        this.onError('ingest: claiming jobs failed', error);
      }
      if (jobs.length === 0) {
        await writing;
        // Nothing queued for a moment: merge what the last batches left in level 0, so that reads
        // look up fewer lists. Not at once: during a bulk upload the queue empties between its
        // batches (on S3 a pack's uploads arrive together), and a merge at each gap rewrote the
        // same lists again and again.
        if (await this.quiet(MERGE_QUIET_MS)) {
          await this.shards.mergeWritten().catch((error: unknown) => this.onError("ingest: merging a shard's recent postings failed", error));
          await this.snapshots?.makeDue(true);
          await this.idle();
        }
        continue;
      }
      try {
        const started = performance.now();
        const extracted = await this.extract(jobs);
        this.bulk = jobs.length >= GATHER_FROM && jobs.length < this.options.batchSize && performance.now() - started < this.options.gatherMs;
        // Writes stay in claim order: wait for the previous batch before writing this one.
        await writing;
        writing = this.write(extracted).catch((error: unknown) => this.onError('ingest: writing a batch failed', error));
      } catch (error) {
        this.onError('ingest: a batch failed; its jobs will be claimed again after their lease', error);
        await this.idle();
      }
    }
    await writing;
  }

  /** After a bulk upload's claim, waits until its batch is written and gatherMs more have passed (GATHER_FROM). */
  private async gather(writing: Promise<void>): Promise<void> {
    if (!this.bulk) return;
    await writing;
    await new Promise((resolve) => setTimeout(resolve, this.options.gatherMs));
  }

  private async idle(): Promise<void> {
    await this.quiet(this.options.pollMs);
  }

  /** Waits `ms` unless woken (or stopped) first; true when the whole wait passed. */
  private async quiet(ms: number): Promise<boolean> {
    if (this.woken || !this.running) return false;
    return new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        this.wakeUp = null;
        resolve(true);
      }, ms);
      this.wakeUp = () => {
        clearTimeout(timer);
        resolve(false);
      };
    });
  }

  /** Loads the jobs' files and extracts them; jobs superseded or out of attempts are settled here. */
  private async extract(jobs: Job[]): Promise<{ extracted: Extracted[]; settled: Outcome[] }> {
    const settled: Outcome[] = [];
    const work: Array<Promise<Extracted>> = [];
    for (const [accountId, accountJobs] of groupBy(jobs, (j) => j.accountId)) {
      const files = await this.db.inAccount(accountId, (tx) => jobFiles(tx, accountJobs));
      // Packed originals are read first, together: a batch's uploads share a pack, and its
      // neighbours come in one range (a kept text is read on its own).
      const packed = [...files.values()].filter((f) => f.packedAt !== null && f.knownText !== 'kept');
      const read = await this.blobs.readPlaces(packed.map((f) => f.packedAt!)).then(
        (bytes) => new Map(packed.map((f, i) => [f, bytes[i]])),
        (error: unknown) => error,
      );
      for (const job of accountJobs) {
        const file = files.get(jobKey(job.workspaceId, job.path));
        // Deleted, or uploaded again since this job was made: a newer job carries it.
        if (file === undefined || file.generation !== job.generation) continue;
        if (job.attempts > this.options.maxAttempts) {
          const last = await this.db.inAccount(accountId, (tx) => lastJobError(tx, job.id));
          settled.push({
            job,
            kind: 'error',
            detail: `ingest gave up after ${job.attempts - 1} attempts: ${last ?? 'the service stopped while processing this file'}`,
          });
          continue;
        }
        work.push(read instanceof Map ? this.extractOne(job, file, read.get(file) ?? null) : Promise.resolve({ job, file, result: unavailable(read) }));
      }
    }
    return { extracted: await Promise.all(work), settled };
  }

  /**
   * One job's text. Bytes the account already holds as a ready file's: their text as kept, or
   * the bytes themselves when that file's text is its original. Else extracted from a local copy
   * of the blob (this node's upload itself when it can take it), and kept unless it is the
   * original byte for byte. A store out of reach is a retryable failure.
   */
  private async extractOne(job: Job, file: IngestFile, packed: Buffer | null): Promise<Extracted> {
    let copy: LocalCopy | null = null;
    const started = performance.now();
    let result: ExtractResult | null = null;
    try {
      if (file.knownText !== 'none') {
        // Read as a shard holds it (BlobStore.text): the original itself takes any hand-off.
        const original = file.knownText === 'original';
        const text = original && packed !== null ? packed : await this.blobs.text(job.accountId, file.blobSha256, original, file.packedAt);
        if (text !== null) {
          if (!original) await this.blobs.dropHandOff(job.accountId, file.blobSha256);
          return { job, file, result: original ? { ok: true, text, kind: 'text', original } : { ok: true, text, kind: 'text' } };
        }
      }
      // A packed original is in memory: plain text is taken from there, anything else goes to the
      // pool as a local copy, as does an original of its own.
      result = packed === null ? null : inlineText(packed);
      if (result === null) copy = packed === null ? await this.blobs.open(job.accountId, file.blobSha256, file.packedAt) : await this.blobs.copyOf(packed);
    } catch (error) {
      return { job, file, result: unavailable(error) };
    }
    if (result === null) {
      if (copy === null) return { job, file, result: { ok: false, error: 'the original is missing from the object store', retryable: false } };
      try {
        result = await this.pool.extract(copy.path, file.contentType, file.path, file.sizeBytes);
      } finally {
        await copy.release();
      }
    }
    const outcome = result.ok ? 'ok' : result.capped === true ? 'capped' : 'error';
    this.onExtracted?.(extractedType(file.path, result), outcome, (performance.now() - started) / 1000);
    if (result.ok && result.original !== true) {
      // Without the kept text the file is still indexed; the next rebuild extracts it again.
      await this.blobs
        .keepText(job.accountId, file.blobSha256, result.text)
        .catch((error: unknown) => this.onError(`keeping the text of ${file.path} failed`, error));
    }
    return { job, file, result };
  }

  /** Writes the batch into the shards, then records every outcome. */
  private async write({ extracted, settled }: { extracted: Extracted[]; settled: Outcome[] }): Promise<void> {
    const outcomes: Outcome[] = [...settled];
    for (const [workspaceId, items] of groupBy(extracted, (e) => e.job.workspaceId)) {
      const docs: ShardDoc[] = [];
      for (const { job, file, result } of items) {
        if (result.ok) {
          // Same blob, same text: a job run twice (or a re-upload of identical bytes) re-indexes nothing.
          docs.push(shardDoc(file, result.text));
          outcomes.push({ job, kind: 'ready', textIsOriginal: result.original === true });
        } else if (result.retryable && job.attempts < (result.capped === true ? CAPPED_ATTEMPTS : this.options.maxAttempts)) {
          // A capped file is tried again at once, so that one built to hang ends within about two caps.
          outcomes.push({ job, kind: 'retry', detail: result.error, delaySeconds: result.capped === true ? 0 : Math.min(60, 2 ** job.attempts) });
        } else if (result.retryable) {
          // A file that kills its worker every time: bounded by maxAttempts.
          outcomes.push({ job, kind: 'error', detail: `ingest gave up after ${job.attempts} attempts: ${result.error}` });
        } else {
          outcomes.push({ job, kind: 'error', detail: result.error });
        }
      }
      // A file becomes ready only after its shard write is durable (or, on a node that keeps no copy, its text).
      if (docs.length > 0 && this.keeps(workspaceId)) {
        await this.shards.write(workspaceId, docs);
        this.snapshots?.changed(workspaceId, items[0].job.accountId, docs.length);
      }
    }
    for (const [accountId, accountOutcomes] of groupBy(outcomes, (o) => o.job.accountId)) {
      const gone = await this.db.inAccount(accountId, (tx) => finishJobs(tx, accountOutcomes));
      for (const job of gone) {
        if (!this.keeps(job.workspaceId)) continue;
        await this.shards.remove(job.workspaceId, job.path);
        this.snapshots?.changed(job.workspaceId, accountId, 1);
      }
    }
    // While ingest keeps going, only a workspace whose oldest unsnapshotted change is old enough.
    await this.snapshots?.makeDue(false);
  }
}

/** A store out of reach: a retryable failure. */
function unavailable(error: unknown): ExtractResult {
  return { ok: false, error: `the object store is unavailable: ${error instanceof Error ? error.message : String(error)}`, retryable: true };
}

function groupBy<T>(items: T[], key: (item: T) => string): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const item of items) {
    const k = key(item);
    const list = out.get(k);
    if (list === undefined) out.set(k, [item]);
    else list.push(item);
  }
  return out;
}
