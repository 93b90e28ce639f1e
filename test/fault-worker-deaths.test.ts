/**
 * Poison files: extraction processes killed mid-file lose no job. A PDF that exhausts its
 * process's heap every time and one that runs past the time cap (real hostile inputs, no test
 * hook) are tried once more, each try ending an extraction process that the pool replaces, and end
 * in `error` naming a cap within four times VFS_EXTRACT_TIMEOUT_SECONDS of their upload;
 * meanwhile ordinary files, uploaded before and during the tries, keep becoming `ready`, and
 * the service process never goes down.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { FaultService, listFiles, settled } from './helpers/faults.js';
import { makePdf, makeStringBombPdf, makeXObjectBombPdf } from './helpers/make-pdf.js';

const TIMEOUT_SECONDS = 8;

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

describe('extraction processes that die', () => {
  it('a file that hits the heap or the time cap is tried once more and ends in error within 4 caps, while other files flow', {
    timeout: 120_000,
  }, async () => {
    svc = await FaultService.create({ VFS_EXTRACT_TIMEOUT_SECONDS: String(TIMEOUT_SECONDS), VFS_EXTRACT_MEMORY_MB: '128' });
    const proc = await svc.start();
    expect((await svc.api('POST', '/v1/workspaces', JSON.stringify({ name: 'ws' }))).status).toBe(201);

    // A 64 Mi-character string literal: the process's 128 MiB heap runs out on every try.
    const uploaded = Date.now();
    await put('/bomb/heap.pdf', makeStringBombPdf(64), 'application/pdf');
    // Form XObjects nesting 2^40 text runs: runs until the time cap on every try.
    await put('/bomb/hang.pdf', makeXObjectBombPdf(40, 2), 'application/pdf');
    for (let i = 0; i < 20; i++) await put(`/ok/a${i}.txt`, `needle a${i}\n`);
    await put('/ok/doc.pdf', await makePdf([['needle in a pdf']]), 'application/pdf');

    // Poll until both bombs are settled, noting when each reached error.
    const settledAt = new Map<string, number>();
    let more = 0;
    while (settledAt.size < 2 && Date.now() - uploaded < 60_000) {
      for (const f of await listFiles(svc, 'ws')) {
        if (f.path.startsWith('/bomb/') && f.status !== 'pending' && !settledAt.has(f.path)) settledAt.set(f.path, Date.now() - uploaded);
      }
      // More files while the bombs are being tried: they flow too.
      if (more < 10) await put(`/ok/b${more++}.txt`, `needle b${more - 1}\n`);
      await new Promise((r) => setTimeout(r, 100));
    }
    // Two tries each (the attempts are counted below): the hang is cut at the time cap, the heap
    // bomb when pdfjs has filled 128 MiB, which on two cores shared with the S3 pass's other
    // suites took 20.1 s, and once 24.2 s (three caps were 24 s): the bound is four caps.
    for (const path of ['/bomb/heap.pdf', '/bomb/hang.pdf']) expect(settledAt.get(path), path).toBeLessThan(4 * TIMEOUT_SECONDS * 1000);

    const final = new Map((await settled(svc, 'ws', 60_000)).map((f) => [f.path, f]));
    // The heap bomb ends at whichever cap comes first: its heap on an idle machine, the time cap
    // when the machine is so busy that pdfjs fills 128 MiB slower than in 8 s (seen in a CI run's
    // first pass). Either way each try ended its process; extract-pool.test.ts proves the heap
    // cap's own report.
    expect(final.get('/bomb/heap.pdf')).toMatchObject({
      status: 'error',
      errorDetail: expect.stringMatching(
        new RegExp(
          `^ingest gave up after 2 attempts: extraction exceeded the (memory limit \\(its process's heap is capped at 128 MiB\\)|${TIMEOUT_SECONDS} s time limit)$`,
        ),
      ),
    });
    expect(final.get('/bomb/hang.pdf')).toMatchObject({
      status: 'error',
      errorDetail: `ingest gave up after 2 attempts: extraction exceeded the ${TIMEOUT_SECONDS} s time limit`,
    });
    expect([...final.values()].filter((f) => f.status === 'ready')).toHaveLength(31);

    const count = await (await svc.api('GET', '/v1/workspaces/ws/grep?pattern=needle&output_mode=count&head_limit=1000')).text();
    expect(count.trim().split('\n').sort()).toEqual(
      [...Array.from({ length: 20 }, (_, i) => `/ok/a${i}.txt:1`), ...Array.from({ length: 10 }, (_, i) => `/ok/b${i}.txt:1`), '/ok/doc.pdf:1'].sort(),
    );
    // One service process all along: the extraction processes died, the service did not.
    expect(svc.current!.child.pid).toBe(proc.child.pid);
    expect(proc.child.exitCode).toBeNull();
    expect(await svc.stop()).toBe(0);
  });
});
