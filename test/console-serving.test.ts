/**
 * The console's files under /console/ as `npm run build` made them (test/global-setup.ts builds
 * first): the page and its assets with the right cache headers, brotli or gzip as the client
 * asks and the same bytes once decoded, 304 on a matching ETag, the redirect of /console, a
 * JSON 404 or 405 for anything else, and the security headers on every one of those answers.
 * Raw node:http requests, since fetch asks for and decodes compressed bodies by itself. Run on
 * the default node:http layer and, in npm test's second pass, on a native build.
 */
import { existsSync, readFileSync } from 'node:fs';
import { Agent, type IncomingHttpHeaders, request } from 'node:http';
import { join } from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import type { us_listen_socket } from 'uWebSockets.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_DIR, CONSOLE_HEADERS, registerConsoleRoutes } from '../api/console-routes.js';
import { loadUws } from '../api/http/uws.js';
import { startTestService, type TestService } from './helpers/service.js';

/** An answer as the wire carried it: body bytes not decoded. */
interface Raw {
  status: number;
  headers: IncomingHttpHeaders;
  body: Buffer;
}

/**
 * One request to `base` (its port), with no header but `headers`, on a kept-alive connection of
 * its own (a client that asks to close gets a HEAD answered as an empty response, see `send`; and
 * the native builds answer nothing more on a connection after a HEAD: they wait for the body whose
 * length the HEAD answer gave).
 */
function raw(base: string, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Raw> {
  const agent = new Agent({ keepAlive: true });
  return new Promise<Raw>((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port: new URL(base).port, path, method, headers, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  }).finally(() => agent.destroy());
}

/** Every security header, as the console sends it. */
function expectSecurityHeaders(r: Raw, what: string): void {
  for (const [name, value] of Object.entries(CONSOLE_HEADERS)) expect(r.headers[name], `${what}: ${name}`).toBe(value);
}

let t: TestService;
let index: Buffer;
/** The page's script, e.g. /console/assets/index-abc123.js. */
let script: string;

beforeAll(async () => {
  t = await startTestService();
  index = readFileSync(join(CONSOLE_DIR, 'index.html'));
  script = /<script[^>]+src="(\/console\/assets\/[^"]+\.js)"/.exec(index.toString('utf8'))![1];
});
afterAll(async () => t?.stop());

describe('the page', () => {
  it.each(['/console/', '/console/index.html'])('%s is index.html, revalidated at each load, with every security header', async (path) => {
    const r = await raw(t.url, path);
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(r.headers['cache-control']).toBe('no-cache');
    expect(r.headers['content-encoding']).toBeUndefined();
    expect(r.body.equals(index)).toBe(true);
    expectSecurityHeaders(r, path);
  });

  it('names its script, which is there, cached for a year', async () => {
    const r = await raw(t.url, script);
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(r.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(r.headers.etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    expect(r.headers.vary).toBe('Accept-Encoding');
    expectSecurityHeaders(r, script);
  });

  it('/console redirects to /console/ (308), with the security headers', async () => {
    for (const method of ['GET', 'HEAD']) {
      const r = await raw(t.url, '/console', {}, method);
      expect(r.status, method).toBe(308);
      expect(r.headers.location).toBe('/console/');
      expectSecurityHeaders(r, `${method} /console`);
    }
  });
});

describe('codings', () => {
  /** Accept-Encoding (absent: undefined) and the coding chosen (null: identity). */
  const CASES: Array<[string | undefined, 'br' | 'gzip' | null]> = [
    [undefined, null],
    ['br', 'br'],
    ['gzip', 'gzip'],
    ['gzip, deflate, br', 'br'],
    ['br;q=0, gzip', 'gzip'],
    ['br;q=0.5, gzip', 'gzip'],
    ['br, gzip;q=0', 'br'],
    ['BR;Q=1', 'br'],
    ['x-gzip', 'gzip'],
    ['*', 'br'],
    ['gzip;q=0, *', 'br'],
    ['br;q=0, *;q=0.1', 'gzip'],
    ['*;q=0', null],
    ['br;q=0, gzip;q=0', null],
    ['identity', null],
    ['deflate', null],
    ['', null],
  ];

  it.each(CASES)('Accept-Encoding %j -> %s, whose bytes decode to the identity', async (accept, coding) => {
    const identity = readFileSync(join(CONSOLE_DIR, script.slice('/console/'.length)));
    const r = await raw(t.url, script, accept === undefined ? {} : { 'accept-encoding': accept });
    expect(r.status).toBe(200);
    expect(r.headers['content-encoding']).toBe(coding ?? undefined);
    expect(r.headers.vary).toBe('Accept-Encoding');
    expect(Number(r.headers['content-length'])).toBe(r.body.length);
    const decoded = coding === 'br' ? brotliDecompressSync(r.body) : coding === 'gzip' ? gunzipSync(r.body) : r.body;
    expect(decoded.equals(identity)).toBe(true);
    if (coding !== null) expect(r.body.length).toBeLessThan(identity.length);
  });

  it('each coding has its own ETag, and a matching If-None-Match is a 304 with no body and the same headers', async () => {
    const tags = new Set<string>();
    for (const accept of ['identity', 'gzip', 'br']) {
      const first = await raw(t.url, script, { 'accept-encoding': accept });
      const etag = first.headers.etag!;
      tags.add(etag);
      for (const match of [etag, `W/${etag}`, `"other", ${etag}`, '*']) {
        const again = await raw(t.url, script, { 'accept-encoding': accept, 'if-none-match': match });
        expect(again.status, `${accept} ${match}`).toBe(304);
        expect(again.body.length).toBe(0);
        expect(again.headers.etag).toBe(etag);
        expect(again.headers['cache-control']).toBe('public, max-age=31536000, immutable');
        expectSecurityHeaders(again, `304 ${accept}`);
      }
      expect((await raw(t.url, script, { 'accept-encoding': accept, 'if-none-match': '"other"' })).status).toBe(200);
    }
    expect(tags.size).toBe(3);
    const page = await raw(t.url, '/console/');
    const revalidated = await raw(t.url, '/console/', { 'if-none-match': page.headers.etag! });
    expect(revalidated.status).toBe(304);
    expect(revalidated.headers['cache-control']).toBe('no-cache');
  });

  it('HEAD says what GET would send, without the body', async () => {
    for (const accept of ['identity', 'gzip', 'br']) {
      const get = await raw(t.url, script, { 'accept-encoding': accept });
      const head = await raw(t.url, script, { 'accept-encoding': accept }, 'HEAD');
      expect(head.status).toBe(200);
      expect(head.body.length).toBe(0);
      expect(head.headers['content-length']).toBe(String(get.body.length));
      expect(head.headers['content-encoding']).toBe(get.headers['content-encoding']);
      expect(head.headers.etag).toBe(get.headers.etag);
      expectSecurityHeaders(head, `HEAD ${accept}`);
    }
  });
});

describe('what is not a file', () => {
  it.each([
    ['GET', '/console/assets/missing-abc123.js', 404],
    ['HEAD', '/console/assets/missing-abc123.js', 404],
    ['GET', '/console/nothing/here', 404],
    ['GET', '/console/assets/', 404],
    ['GET', '/console/%2e%2e/package.json', 404],
    ['GET', '/console/index.html.br', 404],
    ['POST', '/console/', 405],
    ['DELETE', '/console/index.html', 405],
    ['PUT', '/console', 405],
  ])('%s %s -> %i, JSON, with the security headers', async (method, path, status) => {
    const r = await raw(t.url, path, {}, method);
    expect(r.status).toBe(status);
    expect(r.headers['content-type']).toBe('application/json');
    if (method !== 'HEAD') expect(JSON.parse(r.body.toString('utf8'))).toEqual({ error: expect.any(String) });
    if (status === 405) expect(r.headers.allow).toBe('GET, HEAD');
    expectSecurityHeaders(r, `${method} ${path}`);
  });
});

describe('a service whose console was not built', () => {
  let base: string;
  let socket: us_listen_socket;
  const { uws } = loadUws(process.env.VFS_HTTP === 'native' ? 'native' : 'node');

  beforeAll(async () => {
    const app = uws.App();
    const missing = join(CONSOLE_DIR, 'not-built');
    expect(existsSync(missing)).toBe(false);
    expect(registerConsoleRoutes(app, missing)).toBe(false);
    // The overload server.ts uses (its typings lack it): the node:http layer takes only this one.
    const listen = app.listen.bind(app) as unknown as (host: string, port: number, options: number, cb: (s: us_listen_socket | false) => void) => void;
    socket = await new Promise<us_listen_socket>((resolve, reject) => listen('127.0.0.1', 0, 1, (s) => (s ? resolve(s) : reject(new Error('cannot listen')))));
    base = `http://127.0.0.1:${uws.us_socket_local_port(socket)}`;
  });
  afterAll(() => uws.us_listen_socket_close(socket));

  it.each(['/console/', '/console/index.html', '/console/assets/index.js'])('%s is a 404 that says to build it, with the security headers', async (path) => {
    const r = await raw(base, path);
    expect(r.status).toBe(404);
    expect(JSON.parse(r.body.toString('utf8'))).toEqual({ error: expect.stringContaining('npm run build') });
    expectSecurityHeaders(r, path);
  });
});
