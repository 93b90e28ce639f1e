/**
 * Structured logs: the service's stderr is one JSON line per event, a request's lines carry its
 * request id (taken from X-Request-Id when given, and echoed), and no line holds a credential,
 * wherever a client put one.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newCredential } from '../core/credentials.js';
import { createLogger } from '../service/log.js';
import { FaultService } from './helpers/faults.js';

let svc: FaultService;
let token: string;
beforeAll(async () => {
  svc = await FaultService.create({ VFS_LOG_LEVEL: 'debug' });
  await svc.start();
  expect((await svc.api('POST', '/v1/workspaces', JSON.stringify({ name: 'ws' }))).status).toBe(201);
  token = ((await (await svc.api('POST', '/v1/workspaces/ws/tokens', '{}')).json()) as { token: string }).token;
});
afterAll(async () => {
  await svc?.stop();
  await svc?.dispose();
});

/** The log lines written so far, parsed (each must be JSON). */
function lines(): Array<Record<string, unknown>> {
  return svc
    .current!.stderr()
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

describe('logs', () => {
  it('write one JSON line per event, a line per request with its id, echoed on the response', async () => {
    const given = await fetch(`${svc.current!.url}/v1/workspaces/ws/ls`, { headers: { authorization: `Bearer ${svc.key}`, 'x-request-id': 'trace-42' } });
    expect(given.status).toBe(200);
    expect(given.headers.get('x-request-id')).toBe('trace-42');
    const made = await fetch(`${svc.current!.url}/v1/workspaces/ws/ls`, { headers: { authorization: `Bearer ${svc.key}`, 'x-request-id': 'not valid!' } });
    const id = made.headers.get('x-request-id')!;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    await new Promise((r) => setTimeout(r, 100));
    const all = lines();
    expect(all.every((l) => typeof l.level === 'string' && typeof l.time === 'string' && typeof l.msg === 'string')).toBe(true);
    expect(all.find((l) => l.requestId === 'trace-42')).toMatchObject({ msg: 'request', method: 'GET', route: '/v1/workspaces/:ws/ls', status: '200' });
    expect(all.find((l) => l.requestId === id)).toMatchObject({ msg: 'request', status: '200' });
  });

  it('hold no credential, wherever a client puts one', async () => {
    const url = svc.current!.url;
    const secrets = [svc.key, token, newCredential('management_key'), newCredential('token')];
    for (const secret of secrets) {
      const places: Array<[string, RequestInit]> = [
        [`/v1/workspaces/ws/ls`, { headers: { authorization: `Bearer ${secret}` } }],
        [`/v1/workspaces/ws/grep?pattern=${secret}&key=${secret}`, { headers: { authorization: `Bearer ${secret}` } }],
        [`/v1/workspaces/${secret}/cat?path=/${secret}`, { headers: { authorization: `Bearer ${secret}`, cookie: `key=${secret}` } }],
        [`/v1/${secret}`, { headers: { 'x-api-key': secret, 'x-request-id': secret } }],
        [`/v1/workspaces`, { method: 'POST', headers: { authorization: `Bearer ${secret}` }, body: JSON.stringify({ name: secret, key: secret }) }],
        [`/v1/workspaces/ws/files/${secret}.txt`, { method: 'PUT', headers: { authorization: `Bearer ${svc.key}` }, body: secret }],
        [
          `/v1/workspaces/ws/mcp`,
          {
            method: 'POST',
            headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
            body: `{"jsonrpc":"2.0","id":1,"method":"${secret}"}`,
          },
        ],
        [`/v1/tokens/${secret}`, { method: 'DELETE', headers: { authorization: `Bearer ${secret}` } }],
      ];
      for (const [path, init] of places) await fetch(url + path, init).then((r) => r.arrayBuffer());
    }
    await new Promise((r) => setTimeout(r, 200));
    const text = svc.current!.stderr();
    expect(text.split('\n').filter((l) => l !== '').length).toBeGreaterThan(30);
    for (const secret of secrets) expect(text.includes(secret.slice('svc_sk_'.length))).toBe(false);
  });

  it('redact credentials in messages, errors and fields', () => {
    let written = '';
    const sink = new Writable({
      write(chunk, _encoding, done) {
        written += String(chunk);
        done();
      },
    });
    const key = newCredential('management_key');
    const log = createLogger('debug', sink);
    log.error(`failed for ${key}`, new Error(`boom ${key}`), { body: { key } });
    log.info(`hello ${key}`, { path: `/x/${key}` });
    log.debug('request', { requestId: key });
    expect(written.split('\n').filter((l) => l !== '')).toHaveLength(3);
    expect(written).not.toContain(key.slice(7));
    expect(written).toContain('svc_sk_[redacted]');
  });
});
