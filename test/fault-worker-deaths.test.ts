/**
 * Worker deaths: extraction threads killed mid-file lose no job. A PDF that
 * exhausts its worker's heap every time (a real hostile input, no test hook)
 * is retried (each try kills a worker thread, which the pool replaces) and
 * ends in `error` after VFS_INGEST_MAX_ATTEMPTS tries; meanwhile ordinary
 * files, uploaded before and during the retries, keep becoming `ready`, and
 * the service process never goes down. (A file past the time cap, which is
 * not retried, is covered by uploads.test.ts.)
 */
import { afterAll, describe, expect, it } from 'vitest';
import { FaultService, listFiles, settled } from './helpers/faults.js';
import { makePdf, makeStringBombPdf } from './helpers/make-pdf.js';

const MAX_ATTEMPTS = 3;

let svc: FaultService | null = null;
afterAll(async () => svc?.dispose());

async function put(path: string, body: string | Buffer, type = 'text/plain'): Promise<void> {
  const res = await fetch(`${svc!.current!.url}/v1/workspaces/ws/files${path}`, {
    method: 'PUT',
    headers: { authorization: `Bearer ${svc!.key}`, 'content-type': type },
    body,
  });
  expect([path, res.status]).toEqual([path, 202]);
}

async function statusOf(path: string): Promise<string | undefined> {
  return (await listFiles(svc!, 'ws')).find((f) => f.path === path)?.status;
}

describe('extraction workers that die', () => {
  it(`retry a file that kills its worker up to ${MAX_ATTEMPTS} times, while other files flow`, { timeout: 120_000 }, async () => {
    svc = await FaultService.create({ VFS_INGEST_MAX_ATTEMPTS: String(MAX_ATTEMPTS), VFS_EXTRACT_MEMORY_MB: '128' });
    const proc = await svc.start();
    expect((await svc.api('POST', '/v1/workspaces', JSON.stringify({ name: 'ws' }))).status).toBe(201);

    // A 64 Mi-character string literal: the worker's 128 MiB heap runs out on every try.
    await put('/bomb/heap.pdf', makeStringBombPdf(64), 'application/pdf');
    for (let i = 0; i < 20; i++) await put(`/ok/a${i}.txt`, `needle a${i}\n`);
    await put('/ok/doc.pdf', await makePdf([['needle in a pdf']]), 'application/pdf');

    // The ordinary files become ready while the heap bomb still waits for its next try.
    const deadline = Date.now() + 30_000;
    let files = await listFiles(svc, 'ws');
    while (files.some((f) => f.path.startsWith('/ok/') && f.status !== 'ready') && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 100));
      files = await listFiles(svc, 'ws');
    }
    expect(files.filter((f) => f.path.startsWith('/ok/')).every((f) => f.status === 'ready')).toBe(true);
    expect(await statusOf('/bomb/heap.pdf')).toBe('pending');

    // More files during the retries: they flow too.
    for (let i = 0; i < 10; i++) await put(`/ok/b${i}.txt`, `needle b${i}\n`);
    const flowDeadline = Date.now() + 15_000;
    while ((await listFiles(svc, 'ws')).some((f) => f.path.startsWith('/ok/b') && f.status !== 'ready') && Date.now() < flowDeadline) {
      await new Promise((r) => setTimeout(r, 100));
    }
    expect(await statusOf('/bomb/heap.pdf')).toBe('pending');
    expect((await listFiles(svc, 'ws')).filter((f) => f.path.startsWith('/ok/b') && f.status === 'ready')).toHaveLength(10);

    const final = new Map((await settled(svc, 'ws', 60_000)).map((f) => [f.path, f]));
    expect(final.get('/bomb/heap.pdf')).toMatchObject({ status: 'error' });
    expect(final.get('/bomb/heap.pdf')!.errorDetail).toMatch(new RegExp(`^ingest gave up after ${MAX_ATTEMPTS} attempts: extraction worker crashed`));
    expect([...final.values()].filter((f) => f.status === 'ready')).toHaveLength(31);

    const count = await (await svc.api('GET', '/v1/workspaces/ws/grep?pattern=needle&output_mode=count&head_limit=1000')).text();
    expect(count.trim().split('\n').sort()).toEqual(
      [...Array.from({ length: 20 }, (_, i) => `/ok/a${i}.txt:1`), ...Array.from({ length: 10 }, (_, i) => `/ok/b${i}.txt:1`), '/ok/doc.pdf:1'].sort(),
    );
    // One process all along: the workers died, the service did not.
    expect(svc.current!.child.pid).toBe(proc.child.pid);
    expect(proc.child.exitCode).toBeNull();
    expect(await svc.stop()).toBe(0);
  });
});
