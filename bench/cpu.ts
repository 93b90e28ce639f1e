/**
 * CPU seconds of benchmarked processes, from /proc: a service, or the embedded PostgreSQL of a
 * data directory (its postmaster and backends).
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

/** The fields of /proc/PID/stat after the command name (state, ppid, …), or null once the process is gone. */
async function statFields(pid: number): Promise<string[] | null> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => null);
  return stat === null ? null : stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
}

/** Every process now. */
async function livePids(): Promise<number[]> {
  return (await readdir('/proc')).filter((name) => /^\d+$/.test(name)).map(Number);
}

/** CPU seconds (user + system) used so far by a process and its threads; 0 once it is gone. */
async function cpuSeconds(pid: number): Promise<number> {
  const fields = await statFields(pid);
  return fields === null ? 0 : (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * The processes of the embedded PostgreSQL of `dataDir`: its postmaster (pg_ctl leaves it to
 * init, not under the service) and the processes it started.
 */
export async function postgresPids(dataDir: string): Promise<number[]> {
  const pids = await livePids();
  const cmdlines = await Promise.all(pids.map((pid) => readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')));
  const postmaster = pids.find((_, i) => cmdlines[i].split('\0').includes(join(dataDir, 'pg')));
  return postmaster === undefined ? [] : [postmaster, ...(await descendants(postmaster))];
}

/** Every live process descended from `pid` (children, their children, …). */
export async function descendants(pid: number): Promise<number[]> {
  const pids = await livePids();
  const stats = await Promise.all(pids.map(statFields));
  const children = new Map<number, number[]>();
  for (const [i, p] of pids.entries()) {
    if (stats[i] === null) continue;
    const ppid = Number(stats[i]![1]);
    children.set(ppid, [...(children.get(ppid) ?? []), p]);
  }
  const out: number[] = [];
  const visit = (p: number): void => {
    for (const child of children.get(p) ?? []) {
      out.push(child);
      visit(child);
    }
  };
  visit(pid);
  return out;
}

/** CPU seconds used so far by each of `pids`. */
export async function cpuOf(pids: number[]): Promise<Map<number, number>> {
  return new Map(await Promise.all(pids.map(async (pid): Promise<[number, number]> => [pid, await cpuSeconds(pid)])));
}

/** CPU seconds used by `pids` since `before` was taken (a process started meanwhile counts whole). */
export async function cpuSince(pids: number[], before: Map<number, number>): Promise<number> {
  const now = await cpuOf(pids);
  let cpu = 0;
  for (const [pid, seconds] of now) cpu += seconds - (before.get(pid) ?? 0);
  return cpu;
}
