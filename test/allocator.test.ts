/**
 * Giving the allocator's free pages back (service/allocator.ts): in a child process, 96 MB of
 * 16 KB blocks are freed between small blocks that stay, so that no free page lies at the top
 * of an arena and glibc keeps them all; the periodic trim then returns them to the system.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { allocatorTrim } from '../service/allocator.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

// Resident anonymous memory (MB) after freeing, and after trimming for a while.
const SCRIPT = `
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { trimAllocatorEvery } from './service/allocator.ts';
const anonMb = () => Number(/RssAnon:\\s+(\\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
// Buffers made this way are blocks of the C allocator, each freed when the buffer is collected.
const blocks = Array.from({ length: 12_000 }, (_, i) => Buffer.allocUnsafeSlow(i % 2 === 0 ? 16_384 : 64).fill(1));
for (let i = 0; i < blocks.length; i += 2) blocks[i] = null;
for (let round = 0; round < 3; round++) {
  globalThis.gc();
  await sleep(100);
}
const freed = anonMb();
const errors = [];
const stop = trimAllocatorEvery(50, (error) => errors.push(String(error)));
await sleep(500);
await stop();
process.stdout.write(JSON.stringify({ freed, trimmed: anonMb(), errors, kept: blocks.filter(Boolean).length }));
`;

describe('the allocator trim', () => {
  it.runIf(allocatorTrim() !== null)('gives the free pages between live blocks back to the system', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', '--import', 'tsx', '--input-type=module', '-e', SCRIPT], { cwd: ROOT });
    const result = JSON.parse(stdout) as { freed: number; trimmed: number; errors: string[]; kept: number };
    expect(result.errors).toEqual([]);
    // The small blocks stay reachable to the end, so the freed ones stay between them.
    expect(result.kept).toBe(6000);
    // Three of the four pages of each freed block hold no live block: 72 MB can go.
    expect(result.freed - result.trimmed).toBeGreaterThan(40);
  });
});
