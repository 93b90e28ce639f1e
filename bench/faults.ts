/**
 * Fault bench: the kill scenarios of the fault tests, longer. The service runs
 * as a child process on a fresh data directory and is SIGKILLed `kills` times
 * at random moments under concurrent uploads, then `kills` times under
 * concurrent reads (management key and scoped token), restarting on the same
 * directory each time; then it checks that every acknowledged upload is
 * there and `ready` (once in its shard, with the right grep count, no blob
 * without a file after the sweep) and that every fully answered read has
 * exactly one audit event.
 *
 *   node --import tsx bench/faults.ts [kills]     (default 50; FAULT_SEED=n replays a run)
 */
import { FaultService, checkAudit, checkUploads, readsUnderKills, seedReadWorkspace, uploadsUnderKills } from '../test/helpers/faults.js';

const kills = Number(process.argv[2] ?? 50);
if (!Number.isInteger(kills) || kills < 1) throw new Error(`kills must be a positive integer, got ${process.argv[2]}`);
const seed = Number(process.env.FAULT_SEED ?? Date.now() % 1_000_000);
const started = Date.now();
const log = (line: string): void => console.log(`[${((Date.now() - started) / 1000).toFixed(1).padStart(6)} s] ${line}`);
/** Prints every tenth progress line. */
const everyTenth = (): ((line: string) => void) => {
  let n = 0;
  return (line) => {
    if (++n % 10 === 0) log(line);
  };
};
let failed = false;
const verdict = (ok: boolean, line: string): void => {
  failed ||= !ok;
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${line}`);
};

log(`${kills} kills under uploads, then ${kills} under reads; seed ${seed}`);

const uploads = await FaultService.create({ VFS_INGEST_LEASE_SECONDS: '2', VFS_INGEST_MAX_ATTEMPTS: '100' });
try {
  const run = await uploadsUnderKills(uploads, 'ws', { kills, clients: 8, roundMs: 2000, seed, log: everyTenth() });
  log('uploads: restarting and checking');
  const c = await checkUploads(uploads, 'ws', run);
  const exit = await uploads.stop();
  console.log('');
  verdict(run.kills === kills, `kills survived under uploads: ${run.kills}`);
  verdict(run.roundsWithoutUploads === 0, `upload rounds killed before their first acknowledged upload: ${run.roundsWithoutUploads} of ${run.uploadRounds}`);
  verdict(
    c.found === run.acknowledged.size,
    `uploads acknowledged: ${run.acknowledged.size} of ${run.sent.size} sent; found ready: ${c.found}; lost: ${c.lost.length}`,
  );
  verdict(c.phantoms.length === 0, `files never sent: ${c.phantoms.length}`);
  verdict(
    c.findProblems.length === 0 && c.grepProblems.length === 0,
    `shard problems (find duplicates or gaps, wrong grep counts): ${c.findProblems.length + c.grepProblems.length}`,
  );
  verdict(c.orphanBlobs === 0 && c.missingBlobs === 0, `blobs after the sweep: ${c.orphanBlobs} without a file, ${c.missingBlobs} missing (${c.sweep})`);
  verdict(c.tempFiles === 0, `upload temp files left after the restart: ${c.tempFiles}`);
  verdict(true, `cleaned at the restarts: ${run.cleaned.tempFiles} upload temp files, ${run.cleaned.blobs} unreferenced blobs`);
  verdict(exit === 0, `exit code after SIGTERM: ${exit}`);
  for (const p of [...c.lost, ...c.phantoms, ...c.findProblems, ...c.grepProblems].slice(0, 20)) console.log(`     ${p}`);
} finally {
  await uploads.dispose();
}
console.log('');

const reads = await FaultService.create();
try {
  await reads.start();
  const token = await seedReadWorkspace(reads, 'ws');
  const run = await readsUnderKills(reads, 'ws', token, { kills, clients: 8, roundMs: 2000, seed: seed + 1, log: everyTenth() });
  log('reads: restarting and checking');
  const c = await checkAudit(reads, 'ws', run);
  const exit = await reads.stop();
  console.log('');
  verdict(run.kills === kills, `kills survived under reads: ${run.kills}`);
  const statuses = Object.entries(c.statuses)
    .map(([s, n]) => `${n} × ${s}`)
    .join(', ');
  verdict(true, `reads sent: ${run.reads.length}; full responses: ${run.reads.filter((r) => r.status !== null).length} (${statuses})`);
  verdict(c.found === c.expected, `audit events expected: ${c.expected}; found exactly once: ${c.found}; missing: ${c.missing.length}`);
  verdict(c.duplicated.length === 0, `reads with more than one event: ${c.duplicated.length}`);
  verdict(exit === 0, `exit code after SIGTERM: ${exit}`);
  for (const m of [...c.missing, ...c.duplicated].slice(0, 20)) console.log(`     ${m}`);
} finally {
  await reads.dispose();
}
log(failed ? 'FAILED' : 'all checks passed');
process.exit(failed ? 1 : 0);
