/**
 * The extraction pool with real processes (loaded through tsx from source) and
 * real hostile inputs, no test hooks in the process:
 * - time: a PDF whose form XObjects nest 2^40 text runs (makeXObjectBombPdf)
 *   runs for ever, so it must be killed at the time cap;
 * - heap: a PDF with a 64 Mi-character string literal (makeStringBombPdf)
 *   exhausts a 256 MiB process heap within seconds;
 * - memory outside the heap: a 4 MB PDF whose content stream inflates to
 *   4 GiB (makeDeflateBombPdf) must be stopped by the memory watchdog.
 * After each, the pool must go on serving ordinary files.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ExtractPool } from '../ingest/extract/pool.js';
import { ROOT } from '../service/script-args.js';
import type { ExtractResult } from '../ingest/extract/types.js';
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

/** The CPU ticks (utime + stime, 100 a second) a process has used; NaN once it is gone. */
function cpuTicks(pid: number): number {
  try {
    // The fields after the command's closing parenthesis; utime and stime are the 12th and 13th.
    const fields = readFileSync(`/proc/${pid}/stat`, 'latin1').split(') ')[1].split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return NaN;
  }
}

/** The CPU ticks of each child process of this one, by pid (Linux's /proc). */
function childTicks(): Map<number, number> {
  const ticks = new Map<number, number>();
  for (const task of readdirSync('/proc/self/task')) {
    for (const pid of readFileSync(`/proc/self/task/${task}/children`, 'latin1').split(' ').filter(Boolean).map(Number)) {
      const used = cpuTicks(pid);
      if (!Number.isNaN(used)) ticks.set(pid, used);
    }
  }
  return ticks;
}

/** CPU time this process's children spend over `ms` while this one only waits (100 ticks a second). */
async function childrenIdleCpuMs(ms: number): Promise<number> {
  const before = childTicks();
  await new Promise((resolve) => setTimeout(resolve, ms));
  let used = 0;
  for (const [pid, ticks] of childTicks()) used += ticks - (before.get(pid) ?? 0);
  return used * 10;
}

describe('ExtractPool', () => {
  it('extracts text and PDFs in processes, several at a time', async () => {
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

  it('reads a small file that is plainly text in this thread, starting no process, and sends anything else to one', async () => {
    const pool = new ExtractPool({ threads: 1 });
    try {
      const before = new Set(childTicks().keys());
      const text = await pool.extract(textBlob, 'text/plain', '/a.txt', 20);
      expectText(text, 'line one\r\nline two\n', 'text');
      expect(text).toMatchObject({ original: true });
      expect([...childTicks().keys()].filter((pid) => !before.has(pid))).toEqual([]);
      // Not text: the same answer a process gives, from a process.
      const binary = blob('binary', Buffer.from('ab\0cd'));
      expect(await pool.extract(binary, 'application/octet-stream', '/b.bin', 5)).toEqual({
        ok: false,
        error: 'not a text file: binary content (NUL byte at offset 2)',
        retryable: false,
      });
      expect([...childTicks().keys()].filter((pid) => !before.has(pid))).toHaveLength(1);
      // A PDF goes to a process as before.
      expectText(await pool.extract(pdfBlob, 'application/pdf', '/c.pdf', 1000), PDF_TEXT, 'pdf');
    } finally {
      await pool.close();
    }
  });

  it('terminates a file over the time cap and keeps serving', async () => {
    const pool = new ExtractPool({ threads: 1, timeoutMs: 1500 });
    try {
      // The process starts and loads pdfjs (neither counts against a file's cap, nor should it here).
      expectText(await pool.extract(pdfBlob, 'application/pdf', '/warm.pdf'), PDF_TEXT, 'pdf');
      const started = performance.now();
      expect(await pool.extract(hangBlob, 'application/pdf', '/hang.pdf')).toEqual({
        ok: false,
        error: 'extraction exceeded the 1.5 s time limit',
        retryable: true,
        capped: true,
      });
      expect(performance.now() - started).toBeLessThan(1500 + 1000);
      // The next file runs in a fresh process (the only one allowed).
      expectText(await pool.extract(pdfBlob, 'application/pdf', '/after.pdf'), PDF_TEXT, 'pdf');
      // Had the hung process only been abandoned, it would still burn a core.
      expect(await childrenIdleCpuMs(800)).toBeLessThan(400);
    } finally {
      await pool.close();
    }
  });

  it('reports a process that runs out of heap as the memory cap (retried once), and only that process ends', async () => {
    const pool = new ExtractPool({ threads: 1, maxMemoryMb: 256, timeoutMs: 15_000 });
    try {
      expect(await pool.extract(heapBombBlob, 'application/pdf', '/bomb.pdf')).toEqual({
        ok: false,
        error: "extraction exceeded the memory limit (its process's heap is capped at 256 MiB)",
        retryable: true,
        capped: true,
      });
      expectText(await pool.extract(pdfBlob, 'application/pdf', '/after.pdf'), PDF_TEXT, 'pdf');
    } finally {
      await pool.close();
    }
  });

  it('stops a file that grows memory outside the heap (deflate bomb) and keeps serving', async () => {
    const pool = new ExtractPool({ threads: 1, maxRssGrowthMb: 256, timeoutMs: 15_000 });
    try {
      // The memory cap, not the 15 s time cap, ends it: the error names which.
      expect(await pool.extract(deflateBombBlob, 'application/pdf', '/bomb.pdf')).toEqual({
        ok: false,
        error: 'extraction exceeded the memory limit (its process grew by more than 256 MiB)',
        retryable: true,
        capped: true,
      });
      expectText(await pool.extract(textBlob, 'text/plain', '/after.txt'), 'line one\r\nline two\n', 'text');
    } finally {
      await pool.close();
    }
  });

  it('lets other files finish while one process is killed', async () => {
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

  it('runs files in processes without the service environment, and reports one killed from outside as crashed', async () => {
    const logged: string[] = [];
    const pool = new ExtractPool({ threads: 1, timeoutMs: 30_000 }, (message, detail) => logged.push(`${message}: ${String(detail)}`));
    try {
      // pdfjs loaded, so that the next PDF begins at once (a process killed before it began a
      // file would have the file tried again on a new one).
      expectText(await pool.extract(pdfBlob, 'application/pdf', '/warm.pdf'), PDF_TEXT, 'pdf');
      const [pid] = childTicks().keys();
      // Only what Node.js sets for the IPC channel itself.
      const names = readFileSync(`/proc/${pid}/environ`, 'latin1')
        .split('\0')
        .filter(Boolean)
        .map((v) => v.split('=')[0]);
      expect(names.filter((name) => !name.startsWith('NODE_CHANNEL_'))).toEqual([]);
      expect(process.env.PATH).toBeDefined();
      const hang = pool.extract(hangBlob, 'application/pdf', '/hang.pdf');
      await new Promise((resolve) => setTimeout(resolve, 500));
      process.kill(pid, 'SIGKILL');
      expect(await hang).toEqual({ ok: false, error: 'extraction process crashed (SIGKILL)', retryable: true });
      expect(logged).toEqual(['an extraction process crashed (SIGKILL): nothing on its standard error']);
      expectText(await pool.extract(textBlob, 'text/plain', '/after.txt'), 'line one\r\nline two\n', 'text');
      expect([...childTicks().keys()]).not.toContain(pid);
    } finally {
      await pool.close();
    }
  });

  it('kills its processes when the service dies, even one busy in a file that never ends', async () => {
    // The compiled pool in a process of its own, as `npm start` runs it, killed with SIGKILL.
    const script = `
      const { ExtractPool } = await import(${JSON.stringify(pathToFileURL(join(ROOT, 'dist/ingest/extract/pool.js')).href)});
      const pool = new ExtractPool({ threads: 1 });
      void pool.extract(${JSON.stringify(hangBlob)}, 'application/pdf', '/hang.pdf');
      setInterval(() => {}, 1000);`;
    const service = spawn(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, stdio: 'ignore' });
    try {
      let extraction: number | undefined;
      for (let i = 0; i < 100 && extraction === undefined; i++) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        extraction = Number(readFileSync(`/proc/${service.pid}/task/${service.pid}/children`, 'latin1').trim().split(' ')[0]) || undefined;
      }
      expect(extraction).toBeDefined();
      // Busy in the file: half a second of CPU (starting and loading pdfjs take about 0.15 s), so
      // that only the kernel can end it (an idle process would also leave once its channel closed).
      for (let i = 0; i < 200 && cpuTicks(extraction!) < 50; i++) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(cpuTicks(extraction!)).toBeGreaterThanOrEqual(50);
      service.kill('SIGKILL');
      await new Promise((resolve) => setTimeout(resolve, 500));
      // Gone, or a zombie waiting for init to reap it: never running on.
      const state = existsSync(`/proc/${extraction}/stat`) ? readFileSync(`/proc/${extraction}/stat`, 'latin1').split(') ')[1][0] : 'gone';
      expect(['gone', 'Z']).toContain(state);
    } finally {
      service.kill('SIGKILL');
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
