/**
 * The extraction pool with real worker threads (loaded through tsx, as in
 * production) and real hostile inputs, no test hooks in the worker:
 * - time: a PDF whose form XObjects nest 2^40 text runs (makeXObjectBombPdf)
 *   runs for ever, so it must be killed at the time cap;
 * - heap: a PDF with a 64 Mi-character string literal (makeStringBombPdf)
 *   exhausts a 128 MiB worker heap within a second;
 * - memory outside the heap: a 4 MB PDF whose content stream inflates to
 *   4 GiB (makeDeflateBombPdf) must be stopped by the memory watchdog.
 * After each, the pool must go on serving ordinary files.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExtractPool } from '../ingest/extract-pool.js';
import { ROOT } from '../service/script-args.js';
import type { ExtractResult } from '../ingest/extract.js';
import { makeDeflateBombPdf, makePdf, makeStringBombPdf, makeXObjectBombPdf } from './helpers/make-pdf.js';

const dir = mkdtempSync(join(tmpdir(), 'vfs-extract-pool-'));
const blob = (name: string, bytes: Buffer | string): string => {
  const path = join(dir, name);
  writeFileSync(path, bytes);
  return path;
};

let textBlob: string;
let pdfBlob: string;
let hangBlob: string;
let heapBombBlob: string;
let deflateBombBlob: string;

const PDF_TEXT = '--- page 1 ---\nHello from a worker thread.\n--- page 2 ---\nSecond page.\n';

beforeAll(async () => {
  textBlob = blob('text', 'line one\r\nline two\n');
  pdfBlob = blob('pdf', await makePdf([['Hello from a worker thread.'], ['Second page.']]));
  hangBlob = blob('hang', makeXObjectBombPdf(40, 2));
  heapBombBlob = blob('heap-bomb', makeStringBombPdf(64));
  deflateBombBlob = blob('deflate-bomb', makeDeflateBombPdf(4096));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function expectText(result: ExtractResult, expected: string, kind: 'text' | 'pdf' | 'document'): void {
  if (!result.ok) throw new Error(`expected text, got error: ${result.error}`);
  expect(result.kind).toBe(kind);
  expect(Buffer.isBuffer(result.text)).toBe(true);
  expect(result.text.toString('utf8')).toBe(expected);
}

/** CPU time the process spends over `ms` while this thread only waits. */
async function idleCpuMs(ms: number): Promise<number> {
  const start = process.cpuUsage();
  await new Promise((resolve) => setTimeout(resolve, ms));
  const used = process.cpuUsage(start);
  return (used.user + used.system) / 1000;
}

describe('ExtractPool', () => {
  it('extracts text and PDFs in worker threads, several at a time', async () => {
    const pool = new ExtractPool({ threads: 2 });
    try {
      const results = await Promise.all([
        pool.extract(textBlob, 'text/plain', '/a.txt'),
        pool.extract(pdfBlob, 'application/pdf', '/b.pdf'),
        pool.extract(pdfBlob, 'application/octet-stream', '/c'),
        pool.extract(textBlob, 'text/plain', '/d.txt'),
        pool.extract(join(dir, 'missing'), 'text/plain', '/e.txt'),
      ]);
      expectText(results[0], 'line one\r\nline two\n', 'text');
      expectText(results[1], PDF_TEXT, 'pdf');
      expectText(results[2], PDF_TEXT, 'pdf');
      expectText(results[3], 'line one\r\nline two\n', 'text');
      expect(results[4]).toEqual({ ok: false, error: 'could not read the stored original (ENOENT)', retryable: true });
    } finally {
      await pool.close();
    }
  });

  it('terminates a file over the time cap and keeps serving', async () => {
    const pool = new ExtractPool({ threads: 1, timeoutMs: 1500 });
    try {
      expectText(await pool.extract(textBlob, 'text/plain', '/warm.txt'), 'line one\r\nline two\n', 'text');
      const started = performance.now();
      expect(await pool.extract(hangBlob, 'application/pdf', '/hang.pdf')).toEqual({
        ok: false,
        error: 'extraction exceeded the 1.5 s time limit',
        retryable: true,
        capped: true,
      });
      expect(performance.now() - started).toBeLessThan(1500 + 1000);
      // The next file runs on a fresh thread (the only one allowed).
      expectText(await pool.extract(pdfBlob, 'application/pdf', '/after.pdf'), PDF_TEXT, 'pdf');
      // Had the hung thread only been abandoned, it would still burn a core.
      expect(await idleCpuMs(800)).toBeLessThan(400);
    } finally {
      await pool.close();
    }
  });

  // In a process of its own (the compiled pool, as `npm start` runs it): depending on the shape
  // of the allocation that meets the cap, V8 sometimes aborts the whole process instead of ending
  // the thread (Node.js issue 47224; README, "Known limitations"). Here that fails this test, and
  // it is tried again, rather than ending the test run with it.
  it('reports a worker that runs out of heap as the memory cap (retried once) and keeps serving', { retry: 2 }, async () => {
    const script = `
      const { ExtractPool } = await import(${JSON.stringify(pathToFileURL(join(ROOT, 'dist/ingest/extract-pool.js')).href)});
      const pool = new ExtractPool({ threads: 1, maxMemoryMb: 128, timeoutMs: 15_000 });
      const bomb = await pool.extract(${JSON.stringify(heapBombBlob)}, 'application/pdf', '/bomb.pdf');
      const after = await pool.extract(${JSON.stringify(pdfBlob)}, 'application/pdf', '/after.pdf');
      await pool.close();
      process.stdout.write(JSON.stringify({ bomb, after: after.ok ? { kind: after.kind, text: after.text.toString('utf8') } : after }));`;
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT });
    expect(JSON.parse(stdout)).toEqual({
      bomb: { ok: false, error: "extraction exceeded the memory limit (a worker's heap is capped at 128 MiB)", retryable: true, capped: true },
      after: { kind: 'pdf', text: PDF_TEXT },
    });
  });

  it('stops a file that grows memory outside the heap (deflate bomb) and keeps serving', async () => {
    const pool = new ExtractPool({ threads: 1, maxRssGrowthMb: 256, timeoutMs: 15_000 });
    try {
      const started = performance.now();
      expect(await pool.extract(deflateBombBlob, 'application/pdf', '/bomb.pdf')).toEqual({
        ok: false,
        error: 'extraction exceeded the memory limit (process memory grew by more than 256 MiB)',
        retryable: true,
        capped: true,
      });
      expect(performance.now() - started).toBeLessThan(10_000);
      expectText(await pool.extract(textBlob, 'text/plain', '/after.txt'), 'line one\r\nline two\n', 'text');
    } finally {
      await pool.close();
    }
  });

  it('lets other files finish while one thread is killed', async () => {
    const pool = new ExtractPool({ threads: 2, timeoutMs: 2500 });
    try {
      const hang = pool.extract(hangBlob, 'application/pdf', '/hang.pdf');
      const others = await Promise.all([1, 2, 3, 4].map((i) => pool.extract(pdfBlob, 'application/pdf', `/ok-${i}.pdf`)));
      for (const r of others) expectText(r, PDF_TEXT, 'pdf');
      expect(await hang).toMatchObject({ ok: false, error: 'extraction exceeded the 2.5 s time limit' });
      expectText(await pool.extract(textBlob, 'text/plain', '/after.txt'), 'line one\r\nline two\n', 'text');
    } finally {
      await pool.close();
    }
  });

  it('ends running and queued files with a retryable error on close', async () => {
    const pool = new ExtractPool({ threads: 1, timeoutMs: 30_000 });
    expectText(await pool.extract(textBlob, 'text/plain', '/warm.txt'), 'line one\r\nline two\n', 'text');
    const running = pool.extract(hangBlob, 'application/pdf', '/hang.pdf');
    const queued = pool.extract(textBlob, 'text/plain', '/queued.txt');
    await new Promise((resolve) => setTimeout(resolve, 200));
    const started = performance.now();
    await pool.close();
    const closed = { ok: false, error: 'extraction pool is shut down', retryable: true };
    expect(await running).toEqual(closed);
    expect(await queued).toEqual(closed);
    expect(await pool.extract(textBlob, 'text/plain', '/late.txt')).toEqual(closed);
    expect(performance.now() - started).toBeLessThan(2000);
  });

  it('rejects invalid options', () => {
    expect(() => new ExtractPool({ threads: 0 })).toThrow(RangeError);
    expect(() => new ExtractPool({ timeoutMs: -1 })).toThrow(RangeError);
  });
});
