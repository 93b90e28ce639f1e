/**
 * The ingest queue in PostgreSQL. Workers claim jobs with FOR UPDATE SKIP
 * LOCKED under a lease (a job whose worker died is claimed again once its
 * lease runs out); everything after the claim runs inside the job's account.
 * A job carries the file generation it was made for: a newer upload of the
 * same path replaces the job, and an outcome for an older generation changes
 * nothing.
 */
import { recordChanges } from './changes.js';
import type { Database, Tx } from './database.js';
import { FILE_ROW_COLUMNS, type FileRow, fileRow, type JobFile } from './file-rows.js';
import type { PackedAt } from './files.js';

/** A claimed job. */
export interface Job {
  id: string;
  accountId: string;
  workspaceId: string;
  path: string;
  generation: number;
  /** Claims so far, this one included. */
  attempts: number;
}

/** How a job ended. */
export type Outcome =
  | { job: Job; kind: 'ready'; textIsOriginal: boolean }
  | { job: Job; kind: 'error'; detail: string }
  | { job: Job; kind: 'retry'; detail: string; delaySeconds: number };

/** Claims up to `max` runnable jobs for `leaseSeconds`. */
export async function claimJobs(db: Database, max: number, leaseSeconds: number): Promise<Job[]> {
  const { rows } = await db.app.query<{
    id: string;
    account_id: string;
    workspace_id: string;
    path: string;
    generation: string;
    attempts: number;
  }>('SELECT * FROM claim_ingest_jobs($1, $2) ORDER BY id', [max, leaseSeconds]);
  return rows.map((r) => ({
    id: r.id,
    accountId: r.account_id,
    workspaceId: r.workspace_id,
    path: r.path,
    generation: Number(r.generation),
    attempts: r.attempts,
  }));
}

/**
 * What the account already knows of a file's bytes: `original` (the file itself, ingested before
 * and re-queued since, or another ready file holds them, and its text is the original itself),
 * `kept` (the same, with its text kept beside the original) or `none`.
 */
export type KnownText = 'none' | 'original' | 'kept';

/** A job's file, what the account knows of its bytes, and where they are packed (null: an object of their own). */
export interface IngestFile extends JobFile {
  knownText: KnownText;
  packedAt: PackedAt | null;
}

/** The current rows of the jobs' files (one account's jobs); a job whose file is gone has no entry. */
export async function jobFiles(tx: Tx, jobs: Job[]): Promise<Map<string, IngestFile>> {
  const { rows } = await tx.query<FileRow & { known_text: KnownText; pack: string | null; byte_offset: string | null; packed_bytes: string | null }>(
    `SELECT ${FILE_ROW_COLUMNS},
            CASE coalesce(f.text_is_original,
                          (SELECT bool_or(g.text_is_original) FROM files g
                            WHERE g.account_id = f.account_id AND g.blob_sha256 = f.blob_sha256 AND g.status = 'ready'))
              WHEN true THEN 'original' WHEN false THEN 'kept' ELSE 'none' END AS known_text,
            p.pack, p.byte_offset, p.size_bytes AS packed_bytes
       FROM files f JOIN unnest($1::uuid[], $2::text[]) AS j(ws, path) ON f.workspace_id = j.ws AND f.path = j.path
       LEFT JOIN blob_packs p ON p.account_id = f.account_id AND p.sha256 = f.blob_sha256`,
    [jobs.map((j) => j.workspaceId), jobs.map((j) => j.path)],
  );
  return new Map(
    rows.map((r) => [
      jobKey(r.workspace_id, r.path),
      {
        ...fileRow(r),
        knownText: r.known_text,
        packedAt: r.pack === null ? null : { pack: r.pack, offset: Number(r.byte_offset), size: Number(r.packed_bytes) },
      },
    ]),
  );
}

/** Key of a job's file in the map `jobFiles` returns. */
export function jobKey(workspaceId: string, path: string): string {
  return `${workspaceId}\u0000${path}`;
}

/**
 * Records outcomes of one account's jobs: files become ready or error (only if
 * still at the job's generation; `finished_at` says when), finished jobs leave the queue, retries wait,
 * and each workspace's version moves by the number of files that changed.
 *
 * Returns the `ready` jobs whose file was deleted while they ran: their
 * document went into the shard after the deletion removed it, and must be
 * removed again. (A deletion that comes later waits for these row locks, and
 * its own removal follows this batch's shard write.)
 */
export async function finishJobs(tx: Tx, outcomes: Outcome[]): Promise<Job[]> {
  const gone: Job[] = [];
  const done = outcomes.filter((o) => o.kind !== 'retry');
  if (done.length > 0) {
    // The lock order of lockUsage (files.ts): workspaces, then files, each in key order.
    await tx.query('SELECT 1 FROM workspaces WHERE id = ANY($1) ORDER BY id FOR NO KEY UPDATE', [[...new Set(done.map((o) => o.job.workspaceId))]]);
    const present = await tx.query<{ workspace_id: string; path: string }>(
      `SELECT f.workspace_id, f.path FROM files f JOIN unnest($1::uuid[], $2::text[]) AS o(ws, path) ON f.workspace_id = o.ws AND f.path = o.path
        ORDER BY f.workspace_id, f.path FOR UPDATE OF f`,
      [done.map((o) => o.job.workspaceId), done.map((o) => o.job.path)],
    );
    const exists = new Set(present.rows.map((r) => jobKey(r.workspace_id, r.path)));
    for (const o of done) if (o.kind === 'ready' && !exists.has(jobKey(o.job.workspaceId, o.job.path))) gone.push(o.job);
    const { rows } = await tx.query<{ workspace_id: string; n: string; ready: string[] }>(
      `WITH o AS (SELECT * FROM unnest($1::uuid[], $2::text[], $3::bigint[], $4::text[], $5::text[], $6::bool[]) AS o(ws, path, gen, status, detail, original)),
            changed AS (
              UPDATE files f SET status = o.status, error_detail = o.detail, text_is_original = o.original, finished_at = now() FROM o
               WHERE f.workspace_id = o.ws AND f.path = o.path AND f.generation = o.gen
              RETURNING f.workspace_id, f.path, f.status),
            dequeued AS (
              DELETE FROM ingest_jobs q USING o WHERE q.workspace_id = o.ws AND q.path = o.path AND q.generation = o.gen)
       SELECT workspace_id, count(*) AS n, coalesce(array_agg(path) FILTER (WHERE status = 'ready'), '{}') AS ready FROM changed GROUP BY workspace_id ORDER BY workspace_id`,
      [
        done.map((o) => o.job.workspaceId),
        done.map((o) => o.job.path),
        done.map((o) => o.job.generation),
        done.map((o) => o.kind),
        done.map((o) => (o.kind === 'error' ? o.detail : null)),
        done.map((o) => (o.kind === 'ready' ? o.textIsOriginal : null)),
      ],
    );
    // Errors move the version (the listing changed) but not what a shard holds: only ready paths are logged.
    for (const r of rows) await recordChanges(tx, r.workspace_id, Number(r.n), r.ready);
  }
  const retries = outcomes.filter((o): o is Extract<Outcome, { kind: 'retry' }> => o.kind === 'retry');
  if (retries.length > 0) {
    await tx.query(
      `UPDATE ingest_jobs q SET run_after = now() + make_interval(secs => r.delay), lease_until = NULL, last_error = r.detail
         FROM unnest($1::bigint[], $2::bigint[], $3::float8[], $4::text[]) AS r(id, gen, delay, detail)
        WHERE q.id = r.id AND q.generation = r.gen`,
      [retries.map((o) => o.job.id), retries.map((o) => o.job.generation), retries.map((o) => o.delaySeconds), retries.map((o) => o.detail)],
    );
  }
  return gone;
}

/** The last error recorded for a job (used when it runs out of attempts). */
export async function lastJobError(tx: Tx, jobId: string): Promise<string | null> {
  const { rows } = await tx.query<{ last_error: string | null }>('SELECT last_error FROM ingest_jobs WHERE id = $1', [jobId]);
  return rows[0]?.last_error ?? null;
}

/** Jobs waiting or running across every account, and the age of the oldest in seconds (0 when none): counts only. */
export async function ingestQueueStats(db: Database): Promise<{ jobs: number; oldestSeconds: number }> {
  const { rows } = await db.appStatement<{ jobs: string; oldest_seconds: number }>('SELECT * FROM ingest_queue_stats()', []);
  return { jobs: Number(rows[0].jobs), oldestSeconds: rows[0].oldest_seconds };
}
