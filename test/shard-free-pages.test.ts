/**
 * A shard writer closed leaves no free-page list behind (engine/shard-env.ts, dropFreePageList).
 * The list lives in LMDB's C code, out of JavaScript's sight, so a child process cycles writers
 * under heaptrack (Debian's, which CI installs), and the blocks LMDB allocated for the list and
 * never freed are read from its report: about 2 KB a cycle before the fix, none after.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const run = promisify(execFile);
const heaptrack = await run('heaptrack', ['--version']).then(
  () => true,
  () => false,
);

const CYCLES = 150;
// Each cycle opens a writer, overwrites eight documents four times (freeing pages the next
// transaction takes back from the free list), and closes it.
const SCRIPT = `
import { openShardWriter } from '${pathToFileURL(join(ROOT, 'engine/shard-writer.ts')).href}';
const dir = process.argv[2];
for (let c = 0; c < ${CYCLES}; c++) {
  const writer = openShardWriter(dir + '/s' + (c % 10));
  for (let t = 0; t < 4; t++) {
    await writer.writeBatch(Array.from({ length: 8 }, (_, i) => ({
      path: '/d/' + i + '.txt', text: Buffer.from(('line ' + c + ' ' + t + '\\n').repeat(200 + i)), sizeBytes: 100,
      contentType: 'text/plain', updatedAt: 1, visibility: null, version: 'v' + c + '-' + t,
    })));
  }
  await writer.close();
}
`;

/** Bytes heaptrack reports as never freed, by the function that allocated them (its top-level entries). */
function leakedBy(report: string): Map<string, number> {
  const units: Record<string, number> = { '': 1, K: 1e3, M: 1e6, G: 1e9 };
  const leaks = new Map<string, number>();
  const section = report.slice(report.indexOf('MEMORY LEAKS'));
  for (const m of section.matchAll(/^([\d.]+)([KMG]?) leaked over \d+ calls from\n(\S+)/gm)) {
    leaks.set(m[3], (leaks.get(m[3]) ?? 0) + Number(m[1]) * units[m[2]]);
  }
  return leaks;
}

describe('a shard writer closed', () => {
  it.runIf(heaptrack)(
    'leaves none of the free-page lists LMDB kept between its transactions',
    async () => {
      const dir = await mkdtemp(join(tmpdir(), 'vfs-free-pages-'));
      try {
        const trace = join(dir, 'trace');
        // A file, not `-e`: heaptrack's report of an `-e` script held none of the native module's blocks.
        const script = join(dir, 'cycle.mjs');
        await writeFile(script, SCRIPT);
        await run('heaptrack', ['-o', trace, process.execPath, '--import', 'tsx', script, dir], { cwd: ROOT });
        const { stdout } = await run(
          'heaptrack_print',
          ['-f', `${trace}.zst`, '--print-leaks', '1', '--print-peaks', '0', '--print-allocators', '0', '--print-temporary', '0', '-n', '200'],
          {
            maxBuffer: 64 * 1024 * 1024,
          },
        );
        const leaks = leakedBy(stdout);
        // The report lists what LMDB's environments leak anyway (lmdb-js's own, about 90 bytes a
        // writer), so a report that parsed to nothing would not pass for a clean one.
        expect([...leaks.keys()].some((name) => name.startsWith('EnvWrap::'))).toBe(true);
        // The free-page list grows by mdb_midl_need and starts as a copy by mdb_midl_alloc.
        const lists = (leaks.get('mdb_midl_need') ?? 0) + (leaks.get('mdb_midl_alloc') ?? 0);
        expect(lists).toBeLessThan(16 * 1024);
      } finally {
        await rm(dir, { recursive: true, force: true });
      }
    },
    120_000,
  );
});
