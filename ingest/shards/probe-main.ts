/**
 * Child process of probe.ts: reads shard directories from stdin, one
 * per line, and opens each and reads its paths. Before each it writes
 * `{"begin":dir}` and after it `{"dir":dir}` or `{"dir":dir,"error":...}` to
 * stdout, synchronously, so that if a damaged file kills this process the
 * parent knows which one did.
 */
import { existsSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { openLmdbReader } from '../../engine/reader-cache.js';

const say = (message: object): void => {
  writeSync(1, JSON.stringify(message) + '\n');
};

for await (const dir of createInterface({ input: process.stdin })) {
  if (dir === '') continue;
  say({ begin: dir });
  // A missing shard is not created here: shard repair rebuilds it.
  if (!existsSync(join(dir, 'data.mdb'))) {
    say({ dir });
    continue;
  }
  try {
    const reader = openLmdbReader(dir);
    const snapshot = reader.snapshot();
    try {
      snapshot.state();
      for (const doc of snapshot.docsInRange('/', '0')) if (!doc.path.startsWith('/')) throw new Error(`bad path record ${doc.path}`);
    } finally {
      snapshot.done();
      await reader.close();
    }
    say({ dir });
  } catch (error) {
    say({ dir, error: error instanceof Error ? error.message : String(error) });
  }
}
process.exit(0);
