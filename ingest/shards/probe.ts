/**
 * Opens shards in a child process before the service opens them. lmdb-js
 * crashes the whole process (SIGSEGV) on a damaged data file, even on open,
 * so a shard is first opened and its paths read by probe-main.ts; a
 * shard that makes it fail, throw, hang or die is reported as damaged, and
 * the probe goes on with the next one in a new child. Damage that a read of
 * the paths does not touch (text or postings pages) is not found this way.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { FROM_SOURCE, siblingModule, tsxUrl } from '../../core/run-mode.js';

/** Longest one shard may take before its probe is killed and the shard reported as damaged. */
const PER_SHARD_TIMEOUT_MS = 120_000;

const ENTRY = fileURLToPath(siblingModule('probe-main', import.meta.url));

/** Probes the shard directories; returns the damaged ones, each with why. */
export async function probeShards(dirs: readonly string[]): Promise<Map<string, string>> {
  const damaged = new Map<string, string>();
  let rest = [...dirs];
  while (rest.length > 0) {
    const { finished, died } = await runProbe(rest, damaged);
    if (died === null) {
      if (finished < rest.length) throw new Error(`the shard probe stopped after ${finished} of ${rest.length} shards`);
      break;
    }
    damaged.set(died.dir, died.reason);
    rest = rest.slice(rest.indexOf(died.dir) + 1);
  }
  return damaged;
}

/** One child over `dirs`: how many it finished, and the one it died on (if it died). */
async function runProbe(dirs: string[], damaged: Map<string, string>): Promise<{ finished: number; died: { dir: string; reason: string } | null }> {
  const child = spawn(process.execPath, FROM_SOURCE ? ['--import', tsxUrl(), ENTRY] : [ENTRY], { stdio: ['pipe', 'pipe', 'ignore'] });
  const exited = new Promise<string>((resolve) => child.on('close', (code, signal) => resolve(signal ?? `exit code ${code}`)));
  child.on('error', () => {});
  child.stdin.on('error', () => {});
  child.stdin.end(dirs.join('\n') + '\n');
  let finished = 0;
  let current: string | null = null;
  let timedOut = false;
  let timer = setTimeout(() => {
    timedOut = true;
    child.kill('SIGKILL');
  }, PER_SHARD_TIMEOUT_MS);
  for await (const line of createInterface({ input: child.stdout })) {
    let message: { begin?: string; dir?: string; error?: string };
    try {
      message = JSON.parse(line) as typeof message;
    } catch {
      continue;
    }
    if (message.begin !== undefined) {
      current = message.begin;
      clearTimeout(timer);
      timer = setTimeout(() => {
        timedOut = true;
        child.kill('SIGKILL');
      }, PER_SHARD_TIMEOUT_MS);
    } else if (message.dir !== undefined) {
      if (message.error !== undefined) damaged.set(message.dir, message.error);
      current = null;
      finished++;
    }
  }
  clearTimeout(timer);
  const how = await exited;
  if (current === null) return { finished, died: null };
  const reason = timedOut ? `opening it took more than ${PER_SHARD_TIMEOUT_MS / 1000} s` : `the process that opened it died (${how})`;
  return { finished, died: { dir: current, reason } };
}
