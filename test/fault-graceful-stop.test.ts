/**
 * Graceful stop: on SIGTERM the service stops accepting connections, answers
 * 503 to a new request on a connection already open, lets the requests in
 * flight finish (a grep streaming megabytes to a slow reader, an upload whose
 * body trickles in), commits their audit events, closes everything, stops
 * its embedded PostgreSQL and exits 0. After a restart the upload is there
 * and the grep is in the audit log.
 */
import { existsSync } from 'node:fs';
import { Agent, type IncomingMessage, request } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { exportAudit } from './helpers/audit-export.js';
import { FaultService, liftReadLimits, settled } from './helpers/faults.js';

let svc: FaultService | null = null;
afterAll(async () => svc?.dispose());

/** Lines of the big file: its grep output (~26 MB) is more than the socket buffers hold. */
const LINES = 120_000;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('SIGTERM', () => {
  it('finishes the requests in flight, then exits 0', { timeout: 90_000 }, async () => {
    svc = await FaultService.create();
    const proc = await svc.start();
    const url = new URL(proc.url);
    expect((await svc.api('POST', '/v1/workspaces', JSON.stringify({ name: 'ws' }))).status).toBe(201);
    const big = Array.from({ length: LINES }, (_, i) => `needle line ${i} ${'x'.repeat(200)}\n`).join('');
    expect((await svc.api('PUT', '/v1/workspaces/ws/files/big.txt', big)).status).toBe(202);
    await settled(svc, 'ws');
    await liftReadLimits(svc);

    // A keep-alive connection, opened before the stop.
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const get = (path: string): Promise<IncomingMessage> =>
      new Promise((resolve, reject) =>
        request({ host: url.hostname, port: url.port, path, agent, headers: { authorization: `Bearer ${svc!.key}` } }, resolve)
          .on('error', reject)
          .end(),
      );
    const warm = await get('/healthz');
    warm.resume();
    await new Promise((r) => warm.on('end', r));

    // In flight 1: a grep of ~26 MB read by a client that has stopped reading.
    const marker = 'needle|zgracefulx';
    const grep = await new Promise<IncomingMessage>((resolve, reject) =>
      request({
        host: url.hostname,
        port: url.port,
        path: `/v1/workspaces/ws/grep?pattern=${encodeURIComponent(marker)}&output_mode=content`,
        headers: { authorization: `Bearer ${svc!.key}` },
      })
        .on('response', resolve)
        .on('error', reject)
        .end(),
    );
    expect(grep.statusCode).toBe(200);
    grep.pause();

    // In flight 2: an upload whose body arrives in pieces.
    const pieces = Array.from({ length: 10 }, (_, i) => `needle upload piece ${i}\n`);
    const length = pieces.reduce((n, p) => n + Buffer.byteLength(p), 0);
    const upload = request({
      host: url.hostname,
      port: url.port,
      method: 'PUT',
      path: '/v1/workspaces/ws/files/slow-upload.txt',
      headers: { authorization: `Bearer ${svc.key}`, 'content-length': String(length), 'content-type': 'text/plain' },
    });
    const uploaded = new Promise<{ status: number; body: string }>((resolve, reject) => {
      upload.on('response', (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, body }));
      });
      upload.on('error', reject);
    });
    uploaded.catch(() => {}); // awaited below; a failure before then is reported there
    upload.write(pieces[0]);
    await sleep(300);

    proc.child.kill('SIGTERM');
    await sleep(500);
    // No new connection is accepted; a request on the open one is refused with 503.
    const connected = await new Promise<string>((resolve) => {
      const socket = connect(Number(url.port), url.hostname);
      socket.on('connect', () => {
        socket.destroy();
        resolve('connected');
      });
      socket.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? String(error)));
    });
    expect(connected).toBe('ECONNREFUSED');
    const refused = await get('/v1/workspaces');
    expect(refused.statusCode).toBe(503);
    refused.resume();

    // The upload's body finishes arriving, then the slow reader reads everything.
    for (const piece of pieces.slice(1)) {
      upload.write(piece);
      await sleep(100);
    }
    upload.end();
    expect(await uploaded).toEqual({ status: 202, body: JSON.stringify({ path: '/slow-upload.txt', status: 'pending' }) });
    // Still waiting for the grep, whose reader has not read.
    await sleep(1000);
    expect(proc.child.exitCode).toBeNull();
    let bytes = 0;
    let lines = 0;
    grep.on('data', (d: Buffer) => {
      bytes += d.length;
      for (const c of d) if (c === 10) lines++;
    });
    grep.resume();
    await new Promise((resolve, reject) => grep.on('end', resolve).on('error', reject));
    expect(grep.complete).toBe(true);
    expect(lines).toBe(LINES);
    expect(bytes).toBeGreaterThan(25_000_000);

    expect(await proc.exited).toBe(0);
    svc.current = null;
    agent.destroy();
    // The embedded PostgreSQL was stopped too.
    expect(existsSync(join(svc.dataDir, 'pg', 'postmaster.pid'))).toBe(false);

    await svc.start();
    const files = new Map((await settled(svc, 'ws')).map((f) => [f.path, f.status]));
    expect(files.get('/slow-upload.txt')).toBe('ready');
    expect((await exportAudit(svc, 'ws')).filter((e) => e.params.pattern === marker)).toHaveLength(1);
    expect(await svc.stop()).toBe(0);
  });
});
