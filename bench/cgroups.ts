/**
 * CPU groups for benchmarks that give each process a CPU share of its own: a cgroup with a CPU
 * quota (or none) whose usage and throttling are read back. cgroup v1 (the `cpu` and `cpuacct`
 * controllers, each a hierarchy of its own or mounted together) or v2 (`cpu.max`, `cpu.stat`),
 * whichever the machine has. Needs root.
 */
import { existsSync } from 'node:fs';
import { appendFile, mkdir, readFile, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { descendants } from './cpu.js';

const ROOT = '/sys/fs/cgroup';
/** The quota's period: 100 ms, the kernel's default. */
const PERIOD_US = 100_000;

/** Throttling of a group so far: CFS periods it ran in, those it ran out of quota in, time held back. */
export interface Throttling {
  periods: number;
  throttled: number;
  throttledSeconds: number;
}

interface Layout {
  version: 1 | 2;
  /** The directories a group is made in: v1 the cpu and cpuacct hierarchies (one when mounted together), v2 one. */
  roots: string[];
}

/** Which cgroup version the machine mounts, or why none can be used. */
async function layout(): Promise<Layout> {
  if (process.getuid?.() !== 0) throw new Error('CPU groups need root (cgroups are made under /sys/fs/cgroup)');
  if (existsSync(join(ROOT, 'cgroup.controllers'))) {
    const controllers = await readFile(join(ROOT, 'cgroup.controllers'), 'utf8');
    if (!controllers.split(/\s+/).includes('cpu')) throw new Error('the cgroup v2 hierarchy has no cpu controller');
    return { version: 2, roots: [ROOT] };
  }
  const cpu = join(ROOT, 'cpu');
  const cpuacct = join(ROOT, 'cpuacct');
  if (!existsSync(join(cpu, 'cpu.cfs_quota_us'))) throw new Error(`no cgroup v1 cpu controller at ${cpu} and no cgroup v2 hierarchy at ${ROOT}`);
  if (!existsSync(join(cpuacct, 'cpuacct.usage'))) throw new Error(`no cgroup v1 cpuacct controller at ${cpuacct}`);
  return { version: 1, roots: existsSync(join(cpu, 'cpuacct.usage')) ? [cpu] : [cpu, cpuacct] };
}

/** A CPU group: processes added to it share its quota. */
export class CpuGroup {
  private constructor(
    readonly name: string,
    private readonly version: 1 | 2,
    /** The group's directory in each hierarchy (the first one holds the quota). */
    private readonly dirs: string[],
    private readonly rootDirs: string[],
  ) {}

  /**
   * Makes group `<parent>/<name>` (emptied first if a killed run left it) with a quota of `cpus`
   * CPUs (null: no quota).
   */
  static async create(parent: string, name: string, cpus: number | null): Promise<CpuGroup> {
    const { version, roots } = await layout();
    const dirs = roots.map((root) => join(root, parent, name));
    if (version === 2) {
      // The cpu controller must be handed down to the parent's children.
      await appendFile(join(ROOT, 'cgroup.subtree_control'), '+cpu').catch(() => {});
      await mkdir(join(ROOT, parent), { recursive: true });
      await appendFile(join(ROOT, parent, 'cgroup.subtree_control'), '+cpu');
    }
    for (const dir of dirs) await mkdir(dir, { recursive: true });
    const group = new CpuGroup(name, version, dirs, roots);
    await group.release();
    await group.setQuota(cpus);
    return group;
  }

  /** Sets the group's quota to `cpus` CPUs (null: none). */
  async setQuota(cpus: number | null): Promise<void> {
    const quota = cpus === null ? null : Math.round(cpus * PERIOD_US);
    if (this.version === 1) {
      await writeFile(join(this.dirs[0], 'cpu.cfs_period_us'), String(PERIOD_US));
      await writeFile(join(this.dirs[0], 'cpu.cfs_quota_us'), String(quota ?? -1));
    } else {
      await writeFile(join(this.dirs[0], 'cpu.max'), `${quota ?? 'max'} ${PERIOD_US}`);
    }
  }

  /** Moves a process (all its threads) into the group; a process gone meanwhile is skipped. */
  async add(pid: number): Promise<void> {
    for (const dir of this.dirs) {
      try {
        await writeFile(join(dir, 'cgroup.procs'), String(pid));
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
      }
    }
  }

  /**
   * The command and arguments that run `file args` inside the group from its first instruction
   * (a shell that joins the group, then execs it), for a server that forks workers at once.
   */
  command(file: string, args: string[]): [string, string[]] {
    const procs = this.dirs.map((dir) => `'${join(dir, 'cgroup.procs')}'`).join(' ');
    return ['/bin/sh', ['-c', `for f in ${procs}; do echo $$ > "$f" || exit 1; done; exec "$0" "$@"`, file, ...args]];
  }

  /** Moves a process and every process descended from it into the group. */
  async addTree(pid: number): Promise<void> {
    for (const p of [pid, ...(await descendants(pid))]) await this.add(p);
  }

  /** CPU seconds its processes used since they joined it. */
  async usageSeconds(): Promise<number> {
    if (this.version === 1) return Number(await readFile(join(this.dirs.at(-1)!, 'cpuacct.usage'), 'utf8')) / 1e9;
    return Number((await this.stat()).get('usage_usec') ?? 0) / 1e6;
  }

  /** Its throttling so far. */
  async throttling(): Promise<Throttling> {
    const stat = await this.stat();
    return {
      periods: stat.get('nr_periods') ?? 0,
      throttled: stat.get('nr_throttled') ?? 0,
      throttledSeconds: this.version === 1 ? (stat.get('throttled_time') ?? 0) / 1e9 : (stat.get('throttled_usec') ?? 0) / 1e6,
    };
  }

  /** Moves every process still in the group back to the root group. */
  async release(): Promise<void> {
    for (const [i, dir] of this.dirs.entries()) {
      const pids = (await readFile(join(dir, 'cgroup.procs'), 'utf8')).split('\n').filter((line) => line !== '');
      for (const pid of pids) await writeFile(join(this.rootDirs[i], 'cgroup.procs'), pid).catch(() => {});
    }
  }

  /** Empties and removes the group. */
  async remove(): Promise<void> {
    await this.release();
    for (const dir of this.dirs) await rmdir(dir).catch(() => {});
  }

  private async stat(): Promise<Map<string, number>> {
    const text = await readFile(join(this.dirs[0], 'cpu.stat'), 'utf8');
    return new Map(
      text
        .split('\n')
        .filter((line) => line !== '')
        .map((line): [string, number] => [line.split(' ')[0], Number(line.split(' ')[1])]),
    );
  }
}

/** Removes `<parent>` once its groups are removed. */
export async function removeParent(parent: string): Promise<void> {
  const { roots } = await layout();
  for (const root of roots) await rmdir(join(root, parent)).catch(() => {});
}
