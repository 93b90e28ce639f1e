/**
 * The read tools inside a worker thread, as the service's read pool runs them: re2 and lmdb
 * load per thread, the worker opens the shard the main thread writes, and every call sees the
 * latest commit.
 */

import { Worker } from 'node:worker_threads';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grep, type GrepRequest } from '../engine/index.js';
import { buildShard, output, type TestShard } from './helpers/engine-shard.js';

const WORKER = `
const { parentPort, workerData } = require('node:worker_threads');
import('tsx/esm/api')
  .then(({ tsImport }) => tsImport(workerData.engine, workerData.parent))
  .then((engine) => {
    parentPort.on('message', (request) => {
      try {
        const reader = engine.openShardReader(workerData.dir);
        const parts = [];
        const gen = engine.grep(reader, request);
        let r = gen.next();
        while (!r.done) {
          parts.push(Buffer.from(r.value));
          r = gen.next();
        }
        parentPort.postMessage({ text: Buffer.concat(parts).toString('utf8'), resultCount: r.value.resultCount });
      } catch (error) {
        parentPort.postMessage({ error: error.code ?? String(error) });
      }
    });
    parentPort.postMessage('ready');
  });
`;

describe('engine in a worker thread', () => {
  let s: TestShard;
  let worker: Worker;
  const call = (request: GrepRequest): Promise<{ text?: string; resultCount?: number; error?: string }> =>
    new Promise((resolve) => {
      worker.once('message', resolve);
      worker.postMessage(request);
    });

  beforeAll(async () => {
    s = await buildShard([
      { path: '/a.txt', text: 'alpha beta\ngamma\n' },
      { path: '/b/c.md', text: 'Beta version\nunicode: café\n' },
    ]);
    worker = new Worker(WORKER, {
      eval: true,
      workerData: { dir: s.dir, engine: new URL('../engine/index.ts', import.meta.url).href, parent: import.meta.url },
    });
    await new Promise((resolve, reject) => {
      worker.once('message', resolve);
      worker.once('error', reject);
    });
  });
  afterAll(async () => {
    await worker.terminate();
    await s.close();
  });

  const requests: GrepRequest[] = [
    { claims: null, pattern: 'beta', caseInsensitive: true },
    { claims: null, pattern: 'caf.', outputMode: 'content' },
    { claims: ['user:1'], pattern: '\\pL+', outputMode: 'count' },
  ];
  it.each(requests.map((r) => [JSON.stringify(r), r] as const))('%s gives the same output as on the main thread', async (_, request) => {
    const got = await call(request);
    expect(got.error).toBeUndefined();
    expect(got.text).toBe(output(grep(s.reader, request)));
  });

  it('reports errors by code', async () => {
    expect((await call({ claims: null, pattern: '(' })).error).toBe('INVALID_PARAMETER');
  });

  it('sees a document committed by the main thread on its next call', async () => {
    expect((await call({ claims: null, pattern: 'freshly' })).text).toBe('');
    await s.write([{ path: '/new.txt', text: 'freshly written\n' }]);
    expect((await call({ claims: null, pattern: 'freshly' })).text).toBe('/new.txt\n');
  });
});
