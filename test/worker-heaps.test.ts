/**
 * The heaps of the service's worker threads under `npm start`'s V8 flags: its semi-space flag is
 * for the HTTP thread, and every worker made with `workerResourceLimits()` has the smaller young
 * generation that function names, while the HTTP thread keeps its own.
 */
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

// Each figure is a heap's whole limit (old generation and young) in MB, as V8 reports it.
const SCRIPT = `
import { Worker } from 'node:worker_threads';
import { getHeapStatistics } from 'node:v8';
import { workerResourceLimits } from './core/run-mode.ts';
const MB = 1048576;
const limitOf = (resourceLimits) =>
  new Promise((resolve, reject) => {
    const worker = new Worker(
      "require('node:worker_threads').parentPort.postMessage(require('node:v8').getHeapStatistics().heap_size_limit)",
      { eval: true, execArgv: [], resourceLimits },
    );
    worker.once('message', (limit) => resolve(limit / MB));
    worker.once('error', reject);
  });
const main = getHeapStatistics().heap_size_limit / MB;
const limits = workerResourceLimits();
const worker = await limitOf(limits);
const mainAfter = getHeapStatistics().heap_size_limit / MB;
process.stdout.write(JSON.stringify({ main, mainAfter, worker, young: limits.maxYoungGenerationSizeMb }));
`;

describe('worker heaps', () => {
  it("take their own young generation, not the HTTP thread's semi-space flag", async () => {
    const run = (flags: string[]) =>
      promisify(execFile)(process.execPath, [...flags, '--import', 'tsx', '--input-type=module', '-e', SCRIPT], { cwd: ROOT }).then(
        (r) => JSON.parse(r.stdout) as { main: number; mainAfter: number; worker: number; young: number },
      );
    // Without the flag: a worker's limit is the main thread's old generation and its own young one.
    const plain = await run([]);
    // With `npm start`'s flag (package.json), the limits are taken once the flag is cleared.
    const flagged = await run(['--max-semi-space-size=32']);
    expect(flagged.worker).toBe(plain.worker);
    // The main thread's young generation (V8 sizes it as three semi-spaces) is set when its heap
    // is made, and stays; the worker's differs from it by the young generations alone.
    expect(flagged.main).toBeGreaterThan(plain.main);
    expect(flagged.mainAfter).toBe(flagged.main);
    expect(flagged.main - flagged.worker).toBe(3 * 32 - flagged.young);
  });
});
