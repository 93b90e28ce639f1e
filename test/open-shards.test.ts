/**
 * More workspaces than the open-shard budget (VFS_OPEN_SHARDS): every thread keeps at most that
 * many shards open and closes the least recently used to open another, and writers close when
 * idle and ask the readers to close too. Reads of every workspace, twice over, while uploads go
 * on, answer exactly what each workspace holds; every upload acknowledged is then ready and found.
 * The small workspaces are read from their shards' images (engine/shard-image.ts), which their
 * writers rewrite at every upload; the others are too large to have one and are opened.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { openReaderCount } from '../engine/reader-cache.js';
import { IMAGE_FILE } from '../engine/shard-image.js';
import { put, settled, startTestService, type TestService } from './helpers/service.js';

const BUDGET = 3;
/** Workspaces w0 to w11 are small; w12 to w17 hold 40 KB of filler in each file. */
const SMALL = 12;
const WORKSPACES = 18;
let t: TestService;

beforeAll(async () => {
  // Writers idle-close after WRITER_IDLE_MS; the test runs long enough to see some close.
  t = await startTestService({ VFS_OPEN_SHARDS: String(BUDGET), VFS_READ_THREADS: '2' });
  for (let i = 0; i < WORKSPACES; i++) {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: `w${i}` } })).status).toBe(201);
    for (const k of [1, 2]) expect((await put(t, `w${i}`, `docs/f${k}.txt`, text(i, k))).status).toBe(202);
  }
  for (let i = 0; i < WORKSPACES; i++) expect((await settled(t, `w${i}`)).map((f) => f.status)).toEqual(['ready', 'ready']);
}, 120_000);
afterAll(async () => t?.stop());

/** File k of workspace i: 20 lines naming both (then, past SMALL, lines of filler). */
function text(i: number, k: number): string {
  const lines = Array.from({ length: 20 }, (_, line) => `w${i} file ${k} line ${line + 1} marker-${i}\n`).join('');
  return i < SMALL ? lines : lines + 'a line of filler, to be past the bounds of an image\n'.repeat(800);
}

test('the small workspaces have images, the others none', () => {
  const shards = join(t.dataDir, 'shards');
  const withImage = readdirSync(shards).filter((dir) => existsSync(join(shards, dir, IMAGE_FILE)));
  expect(withImage.length).toBe(SMALL);
});

test('reads every workspace correctly, twice over, with fewer shards open than workspaces while uploads continue', async () => {
  expect(t.config.openShards).toBe(BUDGET);
  let uploading = true;
  const uploaded: Array<[number, string]> = [];
  const uploads = (async () => {
    for (let n = 0; uploading; n++) {
      const i = n % WORKSPACES;
      const path = `more/u${n}.txt`;
      const r = await put(t, `w${i}`, path, `upload ${n} marker-${i} extra-${n}\n`);
      expect(r.status).toBe(202);
      uploaded.push([i, path]);
    }
  })();
  for (let round = 0; round < 2; round++) {
    for (let i = 0; i < WORKSPACES; i++) {
      const count = await t.call('GET', `/v1/workspaces/w${i}/grep?pattern=marker-${i}&path=/docs&output_mode=count`);
      expect(count.status).toBe(200);
      expect(count.text).toBe(`/docs/f1.txt:20\n/docs/f2.txt:20\n`);
      const cat = await t.call('GET', `/v1/workspaces/w${i}/cat?path=/docs/f2.txt&offset=7&limit=1`);
      expect(cat.status).toBe(200);
      expect(cat.text).toContain(`w${i} file 2 line 7 marker-${i}`);
      const ls = await t.call('GET', `/v1/workspaces/w${i}/ls?path=/docs`);
      expect(ls.text).toMatch(/f1\.txt[\s\S]*f2\.txt/);
      // Another workspace's marker is nowhere in this one.
      const other = await t.call('GET', `/v1/workspaces/w${i}/grep?pattern=marker-${(i + 1) % WORKSPACES}%24&path=/docs`);
      expect(other.text).toBe('');
      // The HTTP thread (ls and cat run on it) keeps no more shards open than the budget, plus one in use.
      expect(openReaderCount()).toBeLessThanOrEqual(BUDGET + 1);
    }
  }
  uploading = false;
  await uploads;
  expect(uploaded.length).toBeGreaterThan(WORKSPACES);
  // Every acknowledged upload is ready and found by grep.
  for (let i = 0; i < WORKSPACES; i++) {
    const files = await settled(t, `w${i}`, 60_000);
    expect(files.filter((f) => f.status !== 'ready')).toEqual([]);
    const mine = uploaded.filter(([w]) => w === i).map(([, path]) => `/${path}`);
    const found = await t.call('GET', `/v1/workspaces/w${i}/grep?pattern=marker-${i}&path=/more&head_limit=100000`);
    expect(
      found.text
        .split('\n')
        .filter((l) => l !== '')
        .sort(),
    ).toEqual(mine.sort());
  }
}, 180_000);
