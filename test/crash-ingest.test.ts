/**
 * The service process is killed (SIGKILL) in the middle of ingest and started
 * again: every upload it acknowledged reaches `ready`, each file exactly once.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { newCredential } from '../core/credentials.js';
import { type ServiceProcess, spawnService } from './helpers/process.js';

const key = newCredential('management_key');
const dirs: string[] = [];
const running: ServiceProcess[] = [];
afterAll(async () => {
  for (const p of running) if (p.child.exitCode === null) p.child.kill('SIGTERM');
  await Promise.all(running.map((p) => p.exited));
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

async function start(dataDir: string): Promise<ServiceProcess> {
  const p = await spawnService({ DATA_DIR: dataDir, VFS_BOOTSTRAP_KEY: key, VFS_INGEST_LEASE_SECONDS: '2' });
  running.push(p);
  return p;
}

function api(p: ServiceProcess, method: string, path: string, body?: string): Promise<Response> {
  return fetch(p.url + path, { method, headers: { authorization: `Bearer ${key}` }, body });
}

describe('SIGKILL during ingest', () => {
  it('loses no acknowledged upload and indexes each file once', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'vfs-crash-'));
    dirs.push(dataDir);
    const first = await start(dataDir);
    expect((await api(first, 'POST', '/v1/workspaces', JSON.stringify({ name: 'ws' }))).status).toBe(201);
    const acknowledged: string[] = [];
    await Promise.all(
      Array.from({ length: 200 }, async (_, i) => {
        const path = `/d${i % 10}/file${i}.txt`;
        const r = await api(first, 'PUT', `/v1/workspaces/ws/files${path}`, `needle ${i}\n`.repeat(50));
        if (r.status === 202) acknowledged.push(path);
      }),
    );
    expect(acknowledged).toHaveLength(200);
    first.child.kill('SIGKILL');
    await first.exited;

    const second = await start(dataDir);
    const deadline = Date.now() + 60_000;
    let files: Array<{ path: string; status: string }> = [];
    while (Date.now() < deadline) {
      files = ((await (await api(second, 'GET', '/v1/workspaces/ws/files?limit=1000')).json()) as { files: typeof files }).files;
      if (files.length === 200 && files.every((f) => f.status === 'ready')) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(files.map((f) => f.path).sort()).toEqual([...acknowledged].sort());
    expect(files.every((f) => f.status === 'ready')).toBe(true);
    const found = (await (await api(second, 'GET', '/v1/workspaces/ws/find?pattern=**/*.txt&head_limit=1000')).text()).trim().split('\n');
    expect(found).toHaveLength(200);
    expect(new Set(found).size).toBe(200);
    const count = await (await api(second, 'GET', '/v1/workspaces/ws/grep?pattern=needle&output_mode=count')).text();
    expect(count.trim().split('\n')).toHaveLength(200);
    expect(
      count
        .trim()
        .split('\n')
        .every((line) => line.endsWith(':50')),
    ).toBe(true);
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });
});
