/**
 * The README's first command on a fresh data directory: the service starts
 * its own PostgreSQL, prints a management key once, serves the management
 * plane, and stops cleanly (taking its PostgreSQL down with it). It runs the
 * compiled service, so each of its threads is checked to load from dist/.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { mkdtemp, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newCredential } from '../core/credentials.js';
import { clusterSocketDir } from '../db/embedded-postgres.js';
import { makePdf } from './helpers/make-pdf.js';
import { runAdmin, spawnService, startServiceProcess } from './helpers/process.js';

let dataDir: string;
beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'vfs-embedded-'));
});
afterAll(async () => rm(dataDir, { recursive: true, force: true }));

async function postgresRunning(): Promise<boolean> {
  const { stdout } = await promisify(execFile)('ps', ['-eo', 'args']);
  return stdout.split('\n').some((line) => line.includes('postgres') && line.includes(join(dataDir, 'pg')));
}

describe('npm start on the embedded default', () => {
  it('starts, prints a key once, serves, and stops with exit 0', async () => {
    const first = await spawnService({ DATA_DIR: dataDir });
    const key = /svc_sk_[A-Za-z0-9_-]+/.exec(first.stdout)?.[0];
    expect(key).toBeDefined();
    // The console's address, printed beside the service's, serves its page.
    const consoleUrl = /^console on (http:\S+)$/m.exec(first.stdout)?.[1];
    expect(consoleUrl).toBe(`${first.url}/console/`);
    expect(await (await fetch(consoleUrl!)).text()).toContain('<div id="app">');
    const call = (method: string, path: string, body?: unknown, credential = key) =>
      fetch(first.url + path, {
        method,
        headers: { authorization: `Bearer ${credential}` },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    expect((await call('POST', '/v1/workspaces', { name: 'docs' })).status).toBe(201);
    expect(await (await call('GET', '/v1/workspaces')).json()).toMatchObject({ workspaces: [{ name: 'docs', version: 0 }] });
    const minted = (await (await call('POST', '/v1/workspaces/docs/tokens', { ttlSeconds: 600 })).json()) as { id: string };
    expect((await call('DELETE', `/v1/tokens/${minted.id}`)).status).toBe(204);
    expect(await (await call('GET', '/v1/workspaces/docs/audit')).json()).toEqual({ events: [], nextCursor: null });
    // A PDF goes through the extraction pool and the ingest thread; grep runs on a read thread.
    const pdf = await makePdf([['served by the compiled threads']]);
    const put = await fetch(`${first.url}/v1/workspaces/docs/files/a.pdf`, { method: 'PUT', headers: { authorization: `Bearer ${key}` }, body: pdf });
    expect(put.status).toBe(202);
    let found = '';
    for (let i = 0; i < 100 && found === ''; i++) {
      if (i > 0) await new Promise((r) => setTimeout(r, 100));
      found = await (await call('GET', '/v1/workspaces/docs/grep?pattern=compiled%20threads&output_mode=content')).text();
    }
    expect(found).toMatch(/^\/a\.pdf:\d+:served by the compiled threads\n$/);
    expect((await call('DELETE', '/v1/workspaces/docs')).status).toBe(204);
    expect(await postgresRunning()).toBe(true);

    expect(existsSync(clusterSocketDir(dataDir))).toBe(true);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(await postgresRunning()).toBe(false);
    // Its socket directory in the system's temp directory is gone too.
    expect(existsSync(clusterSocketDir(dataDir))).toBe(false);

    // A second start keeps the data and prints no new key; the operator command issues one.
    const issued = (await runAdmin({ DATA_DIR: dataDir }, ['issue-key', 'default'])).stdout.trim();
    expect(issued).toMatch(/^svc_sk_[A-Za-z0-9_-]{49}$/);
    const bootstrap = newCredential('management_key');
    const second = await spawnService({ DATA_DIR: dataDir, VFS_BOOTSTRAP_KEY: bootstrap });
    try {
      expect(second.stdout).not.toMatch(/svc_sk_/);
      for (const credential of [key!, issued, bootstrap]) {
        const r = await fetch(second.url + '/v1/workspaces', { headers: { authorization: `Bearer ${credential}` } });
        expect(r.status).toBe(200);
      }
    } finally {
      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);
    }
  });

  it('stops its PostgreSQL again when the start fails after it (the port is taken)', async () => {
    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = String((taken.address() as AddressInfo).port);
      const starting = startServiceProcess({ DATA_DIR: dataDir, PORT: port });
      await expect(starting.listening).rejects.toThrow(/start failed/);
      expect(await starting.exited).toBe(1);
      expect(await postgresRunning()).toBe(false);
    } finally {
      taken.close();
    }
  });

  it('closes what it made when a later step fails: no connection reported lost, its PostgreSQL stopped', async () => {
    // The blob store cannot be opened once the database is up: `blobs` is a file.
    const blobs = join(dataDir, 'blobs');
    await rename(blobs, `${blobs}.aside`);
    await writeFile(blobs, 'not a directory');
    try {
      const starting = startServiceProcess({ DATA_DIR: dataDir });
      const error = await starting.listening.then(
        () => null,
        (e: Error) => e.message,
      );
      // The log line: {"level":"error",…,"error":"ENOTDIR…","msg":"start failed"}
      expect(error).toMatch(/"error":"ENOTDIR.*"msg":"start failed"/);
      expect(error).not.toMatch(/connection lost/);
      expect(await starting.exited).toBe(1);
      expect(await postgresRunning()).toBe(false);
    } finally {
      await rm(blobs);
      await rename(`${blobs}.aside`, blobs);
    }
  });

  it('refuses a second service on the same data directory, naming the first, and leaves the first alone', async () => {
    const first = await spawnService({ DATA_DIR: dataDir });
    try {
      // Its own port (PORT=0): only the data directory's lock can refuse it.
      const second = startServiceProcess({ DATA_DIR: dataDir });
      await expect(second.listening).rejects.toThrow(new RegExp(`data directory .* is in use by another agent-vfs process \\(pid ${first.child.pid}\\)`));
      expect(await second.exited).toBe(1);
      expect(await postgresRunning()).toBe(true);
      expect((await fetch(first.url + '/readyz')).status).toBe(200);
    } finally {
      first.child.kill('SIGTERM');
      expect(await first.exited).toBe(0);
    }
  });

  it('releases the lock when the service is killed: the next start adopts its PostgreSQL', async () => {
    const first = await spawnService({ DATA_DIR: dataDir });
    first.child.kill('SIGKILL');
    expect(await first.exited).toBe('SIGKILL');
    const second = await spawnService({ DATA_DIR: dataDir });
    try {
      expect(second.stderr()).toMatch(/adopting the embedded PostgreSQL/);
      expect((await fetch(second.url + '/readyz')).status).toBe(200);
    } finally {
      second.child.kill('SIGTERM');
      expect(await second.exited).toBe(0);
    }
    expect(await postgresRunning()).toBe(false);
  });

  it('runs the operator command with no service running, and stops its PostgreSQL after it, also when the command fails', async () => {
    await expect(runAdmin({ DATA_DIR: dataDir }, ['revoke-key', 'no-such-key'])).rejects.toThrow(/no such key/);
    expect(await postgresRunning()).toBe(false);
    expect((await runAdmin({ DATA_DIR: dataDir }, ['list-plans'])).stdout).toMatch(/^default\t/m);
    expect(await postgresRunning()).toBe(false);
  });

  it('refuses a malformed VFS_BOOTSTRAP_KEY with a clear message', async () => {
    await expect(spawnService({ DATA_DIR: dataDir, VFS_BOOTSTRAP_KEY: 'svc_sk_not-a-key' })).rejects.toThrow(/VFS_BOOTSTRAP_KEY/);
  });
});
