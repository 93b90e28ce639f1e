/**
 * What a cluster node's heartbeat pays to report the bytes of its shard copies: the walk of
 * their directories (service/service.ts `directoryBytes`) timed on N copies of two files each
 * (an LMDB shard's `data.mdb` and `lock.mdb`), and the share of one core it takes when run at
 * every 2 s heartbeat and when paced (core/paced.ts, 50 times its duration).
 *
 *   node --import tsx bench/copies-walk.ts [copies=64,1000,10000]
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { paced } from '../core/paced.js';
import { directoryBytes } from '../service/service.js';

const HEARTBEAT_MS = 2000;
const PACE = 50;
const counts = (process.argv[2] ?? '64,1000,10000').split(',').map(Number);

const root = await mkdtemp(join(tmpdir(), 'vfs-copies-walk-'));
try {
  const rows = [];
  for (const copies of counts) {
    const shards = join(root, String(copies));
    for (let i = 0; i < copies; i++) {
      const dir = join(shards, `ws-${i}`);
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, 'data.mdb'), 'x');
      await writeFile(join(dir, 'lock.mdb'), 'y');
    }
    await directoryBytes(shards);
    const walks = 5;
    const cpu0 = process.cpuUsage();
    for (let k = 0; k < walks; k++) await directoryBytes(shards);
    const cpu = process.cpuUsage(cpu0);
    const cpuMs = (cpu.user + cpu.system) / 1000 / walks;
    // Heartbeats on a simulated clock, each walk taking its measured time.
    let clock = 0;
    let walked = 0;
    const beat = paced(
      async () => {
        walked++;
        clock += cpuMs;
        return 0;
      },
      PACE,
      () => clock,
    );
    const beats = 1000;
    for (let b = 0; b < beats; b++) {
      clock = b * HEARTBEAT_MS;
      await beat();
    }
    rows.push({
      copies,
      walkCpuMs: Math.round(cpuMs * 10) / 10,
      everyBeatCoreShare: Math.round((cpuMs / HEARTBEAT_MS) * 1000) / 1000,
      pacedCoreShare: Math.round(((walked * cpuMs) / (beats * HEARTBEAT_MS)) * 1000) / 1000,
    });
    await rm(shards, { recursive: true, force: true });
  }
  process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
} finally {
  await rm(root, { recursive: true, force: true });
}
