/**
 * Database outage: the service's embedded PostgreSQL is stopped for a few
 * seconds under a stream of uploads and reads, then started again, and the
 * service is not restarted. During the outage `/readyz` answers 503, uploads
 * answer 503 (never a 2xx that is then lost), reads fail clearly (503: their
 * audit event cannot be committed) and every request is answered within a
 * bound. Afterwards everything works again, and the ingest job whose end fell
 * in the outage completes.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { EmbeddedCluster } from '../db/embedded-postgres.js';
import { exportAudit } from './helpers/audit-export.js';
import { FaultService, listFiles, seedReadWorkspace, settled } from './helpers/faults.js';
import { makePdf } from './helpers/make-pdf.js';

/** Longest any request may take during the outage. */
const BOUND_MS = 10_000;

let svc: FaultService | null = null;
afterAll(async () => svc?.dispose());

interface Answer {
  kind: 'upload' | 'read' | 'readyz';
  path: string;
  status: number | string;
  ms: number;
  /** Sent and answered while the database was down. */
  inOutage: boolean;
}

describe('PostgreSQL outage', () => {
  it('fails clearly while the database is down and recovers without a restart', { timeout: 120_000 }, async () => {
    svc = await FaultService.create({ VFS_INGEST_LEASE_SECONDS: '2' });
    const proc = await svc.start();
    const token = await seedReadWorkspace(svc, 'ws');
    expect((await svc.api('GET', '/v1/workspaces/ws/grep?pattern=needle', undefined, token)).status).toBe(200);

    // A PDF whose extraction takes seconds: its job is under way when the database goes away.
    const pages = Array.from({ length: 1000 }, (_, p) => Array.from({ length: 40 }, (_, l) => `page ${p} line ${l} slow needle`));
    expect((await svc.api('PUT', '/v1/workspaces/ws/files/slow.pdf', await makePdf(pages))).status).toBe(202);
    expect((await listFiles(svc, 'ws')).find((f) => f.path === '/slow.pdf')?.status).toBe('pending');

    // Load across the outage: uploads with the key, reads with the token (its credential is cached).
    const answers: Answer[] = [];
    let down = false;
    let stop = false;
    const timed = async (kind: Answer['kind'], path: string, call: () => Promise<Response>): Promise<void> => {
      const started = Date.now();
      const sentDown = down;
      let status: number | string;
      try {
        const r = await call();
        await r.arrayBuffer();
        status = r.status;
      } catch (error) {
        status = String(error);
      }
      answers.push({ kind, path, status, ms: Date.now() - started, inOutage: sentDown && down });
    };
    let n = 0;
    const loads = [
      (async () => {
        while (!stop) {
          const path = `/outage/u${n++}.txt`;
          await timed('upload', path, () => svc!.api('PUT', `/v1/workspaces/ws/files${path}`, `needle ${path}\n`));
          await new Promise((r) => setTimeout(r, 20));
        }
      })(),
      (async () => {
        while (!stop) {
          await timed('read', 'grep', () => svc!.api('GET', '/v1/workspaces/ws/grep?pattern=needle', undefined, token));
          await timed('read', 'cat', () => svc!.api('GET', '/v1/workspaces/ws/cat?path=/d1/f1.txt'));
          await timed('readyz', '/readyz', () => fetch(`${proc.url}/readyz`));
          await new Promise((r) => setTimeout(r, 20));
        }
      })(),
    ];
    let inOutage: Answer[] = [];
    const marker = 'needle|zafteroutage';
    try {
      await new Promise((r) => setTimeout(r, 300));

      const cluster = await EmbeddedCluster.start(svc.dataDir);
      expect(cluster.adopted).toBe(true);
      await cluster.stop();
      down = true;
      await new Promise((r) => setTimeout(r, 4000));
      // The management plane and the probe, explicitly, while it is down.
      expect(proc.child.exitCode ?? proc.child.signalCode, `the service died:\n${proc.stderr()}`).toBeNull();
      const management = await svc.api('GET', '/v1/workspaces');
      expect(management.status).toBe(503);
      expect(await management.json()).toEqual({ error: expect.stringMatching(/database/) });
      const readyz = await fetch(`${proc.url}/readyz`);
      expect([readyz.status, await readyz.json()]).toEqual([503, { ok: false }]);
      down = false;
      await EmbeddedCluster.start(svc.dataDir);

      inOutage = answers.filter((a) => a.inOutage);
      expect(inOutage.filter((a) => a.kind === 'upload').length).toBeGreaterThan(10);
      expect(inOutage.filter((a) => a.kind === 'read').length).toBeGreaterThan(10);
      for (const a of inOutage) {
        expect([a.kind, a.path, a.status]).toEqual([a.kind, a.path, 503]);
        expect(a.ms).toBeLessThan(BOUND_MS);
      }

      // Recovery, same process: ready again, uploads and reads work.
      const deadline = Date.now() + 30_000;
      while ((await fetch(`${proc.url}/readyz`)).status !== 200) {
        expect(Date.now()).toBeLessThan(deadline);
        await new Promise((r) => setTimeout(r, 200));
      }
      expect((await svc.api('PUT', '/v1/workspaces/ws/files/after.txt', 'needle after\n')).status).toBe(202);
      expect((await svc.api('GET', `/v1/workspaces/ws/grep?pattern=${encodeURIComponent(marker)}`, undefined, token)).status).toBe(200);
      await new Promise((r) => setTimeout(r, 1000));
    } finally {
      stop = true;
      await Promise.all(loads);
    }

    // Every upload answered 202 is there and ready, the slow PDF's job resumed, and nothing sent
    // during the outage exists.
    const files = new Map((await settled(svc, 'ws', 60_000)).map((f) => [f.path, f.status]));
    for (const a of answers.filter((x) => x.kind === 'upload' && x.status === 202)) expect([a.path, files.get(a.path)]).toEqual([a.path, 'ready']);
    for (const a of inOutage.filter((x) => x.kind === 'upload')) expect([a.path, files.has(a.path)]).toEqual([a.path, false]);
    expect(files.get('/slow.pdf')).toBe('ready');
    expect(files.get('/after.txt')).toBe('ready');
    expect((await exportAudit(svc, 'ws')).filter((e) => e.params.pattern === marker)).toHaveLength(1);
    expect(svc.current!.child.pid).toBe(proc.child.pid);
    expect(await svc.stop()).toBe(0);
  });
});
