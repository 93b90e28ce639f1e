/**
 * Hostile input against every route and parameter (issue "Trust").
 *
 * Each row of a table is one request, sent byte for byte on a fresh
 * connection (node:net: nothing resolves `.`/`..` or re-encodes the URL), with
 * the status the contract gives it (SPEC.md section 7, DESIGN.md section 3,
 * README), a pattern the body must match so that it names the problem (JSON
 * `{ error }` on management routes, plain text on read tools), and a check
 * that nothing changed: workspaces, files, tokens (read as the cluster's
 * superuser, every account at once) and the blob store are the same before
 * and after. Every request is bounded at BOUND_MS: a bound, not a speed goal.
 *
 * The tables are followed by cases that need more than one request:
 * misleading uploads, legal names that look like traversal, slow clients, and
 * malformed HTTP below the routes.
 */
import type pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listAll, put, settled, startTestService, type TestService } from './helpers/service.js';
import { exchange as rawExchange, type Wire } from './helpers/wire.js';
import { loadUws } from '../api/http/uws.js';

/** The test service's HTTP layer: the node:http implementation, or with VFS_HTTP=native a native uWebSockets.js build where one loads. */
const httpLayer = loadUws(process.env.VFS_HTTP === 'native' ? 'native' : 'node');
const nativeHttp = httpLayer.native;
/** The trufflesuite build (uWS 20.30), which the loader takes only where neither newer build loads. */
const olderNative = httpLayer.build === '@trufflesuite/uws-js-unofficial';
/** A native build fails the checks of its known limitations (README). */
const nativeLimit = nativeHttp ? it.fails : it;
/** The trufflesuite build fails the checks of the limitations only it has (README). */
const olderNativeLimit = olderNative ? it.fails : it;

/**
 * Groups whose requests never reach the object store: npm test's S3 pass (VFS_TEST_STORAGE=s3)
 * skips them, since the other passes run them on the same code.
 */
const storeFree = process.env.VFS_TEST_STORAGE === 's3' ? describe.skip : describe;

/** Longest any single request may take to be answered. */
const BOUND_MS = 5_000;

let t: TestService;
let su: pg.Client;
/** A scoped token pinned to `ws`. */
let token: string;
/** The management key of a second account. */
let otherKey: string;

/** A request header as sent. */
type Header = readonly [string, string];

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** A raw exchange with the service under test, bounded at BOUND_MS unless told otherwise. */
function exchange(pieces: Buffer[], options: { pieceDelayMs?: number; head?: boolean; timeoutMs?: number } = {}): Promise<Wire> {
  return rawExchange(t.service.port, pieces, { timeoutMs: BOUND_MS, ...options });
}

/** The bytes of one HTTP/1.1 request; `connection: close` so that the answer ends with the connection. */
function requestBytes(method: string, target: string, headers: readonly Header[], body?: Buffer, version = 'HTTP/1.1'): Buffer {
  const lines = [`${method} ${target} ${version}`, 'host: 127.0.0.1', 'connection: close', ...headers.map(([k, v]) => `${k}: ${v}`)];
  if (body !== undefined) lines.push(`content-length: ${body.length}`);
  const head = Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'utf8');
  return body === undefined ? head : Buffer.concat([head, body]);
}

/** One request as a table row describes it. */
interface Request {
  method: string;
  target: string;
  /** Credential; undefined means the default account's management key, null none. */
  auth?: string | null;
  headers?: readonly Header[];
  body?: string | Buffer;
}

function send(r: Request): Promise<Wire> {
  const credential = r.auth === undefined ? t.key : r.auth;
  const headers: Header[] = credential === null ? [] : [['authorization', `Bearer ${credential}`]];
  headers.push(...(r.headers ?? []));
  const body = r.body === undefined ? undefined : Buffer.isBuffer(r.body) ? r.body : Buffer.from(r.body, 'utf8');
  return exchange([requestBytes(r.method, r.target, headers, body)], { head: r.method === 'HEAD' });
}

/** Everything a refused request must leave as it was, across all accounts. */
async function state(): Promise<string> {
  const { rows } = await su.query(`SELECT json_build_object(
      'workspaces', (SELECT coalesce(json_agg(json_build_object('a', account_id, 'n', name, 'v', version) ORDER BY account_id, name), '[]') FROM workspaces),
      'files', (SELECT coalesce(json_agg(json_build_object('w', workspace_id, 'p', path, 's', status, 'b', size_bytes, 'g', generation, 'c', content_type, 'u', updated_at) ORDER BY workspace_id, path), '[]') FROM files),
      'tokens', (SELECT count(*) FROM tokens),
      'revoked', (SELECT count(*) FROM tokens WHERE revoked_at IS NOT NULL)) AS s`);
  const blobs = (await t.blobFiles()).length;
  return `${JSON.stringify(rows[0].s)} blobs=${blobs}`;
}

/** A refused request: its status, the body format, and what the body must say. */
interface Refusal extends Request {
  name: string;
  status: readonly number[];
  kind: 'json' | 'text';
  /** Must match the error text (checked on 4xx answers). */
  message: RegExp;
}

async function expectRefused(c: Refusal): Promise<void> {
  const before = await state();
  const r = await send(c);
  const label = `${c.method} ${c.target.slice(0, 120)}`;
  expect(r.outcome, `${label}: no answer (${r.outcome} after ${Math.round(r.ms)} ms)`).toBe('answered');
  expect(r.ms).toBeLessThan(BOUND_MS);
  expect(c.status, `${label} answered ${r.status}: ${r.text.slice(0, 200)}`).toContain(r.status);
  if (r.status >= 400) {
    if (c.kind === 'json') {
      expect(r.headers['content-type']).toBe('application/json');
      const parsed = JSON.parse(r.text) as Record<string, unknown>;
      expect(Object.keys(parsed)).toEqual(['error']);
      expect(parsed.error).toMatch(c.message);
    } else {
      expect(r.headers['content-type']).toBe('text/plain; charset=utf-8');
      expect(r.text).toMatch(c.message);
    }
    if (r.status === 401) expect(r.headers['www-authenticate']).toBe('Bearer');
  }
  expect(await state(), `${label} changed something`).toBe(before);
}

const json = (name: string, method: string, target: string, status: number | number[], message: RegExp, extra: Partial<Request> = {}): Refusal => ({
  name,
  method,
  target,
  status: typeof status === 'number' ? [status] : status,
  kind: 'json',
  message,
  ...extra,
});
const text = (name: string, target: string, status: number | number[], message: RegExp, extra: Partial<Request> = {}): Refusal => ({
  name,
  method: 'GET',
  target,
  status: typeof status === 'number' ? [status] : status,
  kind: 'text',
  message,
  ...extra,
});
const escapeRe = (s: string) => s.replace(/[.*+?^${}()|[\]\\-]/g, '\\$&');

beforeAll(async () => {
  t = await startTestService({ VFS_AUTH_FAILURES: '1000000', VFS_MANAGEMENT_RATE: '1000000' });
  su = await t.superuser();
  for (const name of ['ws', 'other']) expect((await t.call('POST', '/v1/workspaces', { body: { name } })).status).toBe(201);
  const files: Record<string, string> = {
    'a.txt': 'alpha\nbeta\n',
    'dir/b.md': '# title\nbody\n',
    // Inputs on which a backtracking engine takes exponential time.
    'redos.txt': `${'a'.repeat(5000)}!\n${'ab'.repeat(3000)}\n${'x'.repeat(4000)}\n`,
    // A legal name holding U+FFFD, the character a lossy decoder substitutes for undecodable bytes.
    '\uFFFD.txt': 'the replacement-character file\n',
  };
  for (const [path, body] of Object.entries(files)) expect((await put(t, 'ws', path, body)).status).toBe(202);
  expect((await put(t, 'other', 'sibling.txt', 'SIBLING_WORKSPACE_CONTENT\n')).status).toBe(202);
  await settled(t, 'ws');
  await settled(t, 'other');
  token = (await t.call('POST', '/v1/workspaces/ws/tokens', { body: {} })).json.token;
  otherKey = await t.newAccount('stranger');
  expect((await t.call('POST', '/v1/workspaces', { key: otherKey, body: { name: 'theirs' } })).status).toBe(201);
});
afterAll(async () => {
  await su?.end();
  await t?.stop();
});

// ---------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------

const DOTDOT = /"\.\." segment/;
const DOT = /"\." segment/;
const CONTROL = /control character, NUL or backslash/;
const UNDECODABLE = /not valid percent-encoding of UTF-8/;

/** File paths (the raw tail of `/files/`) that an upload or delete must refuse with 400, and what the error says. */
const BAD_FILE_PATHS: Array<[string, RegExp]> = [
  ['..', DOTDOT],
  ['../x.txt', DOTDOT],
  ['a/../../x.txt', DOTDOT],
  ['a/..', DOTDOT],
  ['%2e%2e/x.txt', DOTDOT],
  ['%2E%2E/x.txt', DOTDOT],
  ['.%2e/x.txt', DOTDOT],
  ['%2e./x.txt', DOTDOT],
  ['a/%2e%2e/%2e%2e/x.txt', DOTDOT],
  ['..%2fx.txt', DOTDOT],
  ['..%2F..%2Fetc%2Fpasswd', DOTDOT],
  ['%2e%2e%2f%2e%2e%2fetc%2fpasswd', DOTDOT],
  ['.', DOT],
  ['a/./b.txt', DOT],
  ['%2e/x.txt', DOT],
  ['a%00b.txt', CONTROL],
  ['%00', CONTROL],
  ['x.txt%00.png', CONTROL],
  ['a%00/../b', CONTROL],
  ['%C0%AE%C0%AE/x.txt', UNDECODABLE],
  ['%C0%AE/x.txt', UNDECODABLE],
  ['%C0%2E%C0%2E/x.txt', UNDECODABLE],
  ['%E0%80%AE%E0%80%AE/x.txt', UNDECODABLE],
  ['%F0%80%80%AE/x.txt', UNDECODABLE],
  ['%C1%9C', UNDECODABLE],
  ['%ED%A0%80.txt', UNDECODABLE],
  ['%FF.txt', UNDECODABLE],
  ['%FE%FF', UNDECODABLE],
  ['a%5Cb.txt', CONTROL],
  ['..%5C..%5Cwindows%5Cwin.ini', CONTROL],
  ['%5C', CONTROL],
  ['a%', UNDECODABLE],
  ['a%2', UNDECODABLE],
  ['a%zz', UNDECODABLE],
  ['%%', UNDECODABLE],
  ['%u002e%u002e/x', UNDECODABLE],
  ['a%0Ab.txt', CONTROL],
  ['a%0Db.txt', CONTROL],
  ['a%0D%0AX-Injected:%201', CONTROL],
  ['a%09b.txt', CONTROL],
  ['a%1Bb.txt', CONTROL],
  ['a%7Fb.txt', CONTROL],
  ['x'.repeat(10_000), /exceeds 1024 bytes/],
  ['a/'.repeat(5_000) + 'x', /exceeds 1024 bytes/],
  ['%E2%82%AC'.repeat(3_334), /exceeds 1024 bytes/],
  ['y'.repeat(256), /segment exceeds 255 bytes/],
  ['a//b.txt', /empty segment/],
  ['a/', /empty segment/],
  ['', /empty/],
  ['%2F', /names no file/],
  ['%2F%2F', /empty segment/],
];

/** Workspace names in a path that no workspace can have: 404, as for a missing one (README). */
const BAD_WORKSPACES = ['..', '%2e%2e', '.', 'WS', 'ws%00', '%00', 'a'.repeat(65), '%FF', '%EF%BD%97%EF%BD%93', 'ws%2Ffiles', '-ws', '%27%20OR%201%3D1--'];

describe('upload paths: 400, naming the problem, nothing stored', () => {
  it.each(BAD_FILE_PATHS.map(([path, message]) => json(`PUT ${path.slice(0, 60)}`, 'PUT', `/v1/workspaces/ws/files/${path}`, 400, message, { body: 'x' })))(
    '$name',
    expectRefused,
  );
});

describe('delete paths: 400, nothing removed', () => {
  it.each(BAD_FILE_PATHS.map(([path, message]) => json(`DELETE ${path.slice(0, 60)}`, 'DELETE', `/v1/workspaces/ws/files/${path}`, 400, message)))(
    '$name',
    expectRefused,
  );
  it.each([
    json('a legal name that does not exist', 'DELETE', '/v1/workspaces/ws/files/%EF%BC%8E%EF%BC%8E/nothing', 404, /no such file/),
    json('a file of the sibling workspace', 'DELETE', '/v1/workspaces/ws/files/sibling.txt', 404, /no such file/),
  ])('$name', expectRefused);
});

storeFree('workspace names that cannot exist: 404 on every route', () => {
  const routes: Array<[string, string, string | undefined, 'json' | 'text']> = [
    ['PUT', '/v1/workspaces/{ws}/files/x.txt', 'x', 'json'],
    ['DELETE', '/v1/workspaces/{ws}/files/x.txt', undefined, 'json'],
    ['GET', '/v1/workspaces/{ws}/files', undefined, 'json'],
    ['POST', '/v1/workspaces/{ws}/tokens', '{}', 'json'],
    ['GET', '/v1/workspaces/{ws}/audit', undefined, 'json'],
    ['DELETE', '/v1/workspaces/{ws}', undefined, 'json'],
    ['GET', '/v1/workspaces/{ws}/ls', undefined, 'text'],
  ];
  const cases = routes.flatMap(([method, pattern, body, kind]) =>
    BAD_WORKSPACES.map(
      (ws): Refusal => ({
        name: `${method} ${pattern} ws=${ws.slice(0, 30)}`,
        method,
        target: pattern.replace('{ws}', ws),
        status: [404],
        kind,
        message: /no such workspace/,
        body,
      }),
    ),
  );
  it.each(cases)('$name', expectRefused);
});

storeFree('read-tool paths', () => {
  const TOOLS: Array<[string, (path: string) => string]> = [
    ['ls', (p) => `ls?path=${p}`],
    ['cat', (p) => `cat?path=${p}`],
    ['find', (p) => `find?pattern=*&path=${p}`],
    ['grep', (p) => `grep?pattern=a&path=${p}`],
  ];
  // 400 naming `path`. The last three are undecodable percent-encoding: an upload refuses them
  // (SPEC 4.2 "400 undecodable"), so a read must not quietly look up something else instead.
  const INVALID = [
    '..',
    '%2e%2e',
    '/a/../..',
    'a/%2E%2E/b',
    '%2e%2e%2f%2e%2e%2fetc%2fpasswd',
    '.',
    '%00',
    'a%00b',
    'a%5Cb',
    '..%5C..%5Cwindows',
    '%0A',
    '%1B%5B31m',
    '%7F',
    'x'.repeat(10_000),
    'a//b',
    '%C0%AE%C0%AE',
    '%FF',
    '%ED%A0%80',
  ];
  // Legal names under application/x-www-form-urlencoded (a stray `%` is literal) that do not exist: 404 naming the path.
  const MISSING = ['%', '%zz', '%25', 'nonexistent', '%EF%BC%8E%EF%BC%8E/nothing'];
  const cases = TOOLS.flatMap(([tool, query]) => [
    ...INVALID.map((p) => text(`${tool} path=${p.slice(0, 40)}`, `/v1/workspaces/ws/${query(p)}`, 400, /path/)),
    ...MISSING.map((p) => text(`${tool} path=${p} (missing)`, `/v1/workspaces/ws/${query(p)}`, 404, /no such file/)),
  ]);
  it.each(cases)('$name', expectRefused);

  it('an undecodable path never reads another file: cat path=%FF.txt does not serve /\uFFFD.txt', async () => {
    const r = await send({ method: 'GET', target: '/v1/workspaces/ws/cat?path=%FF.txt' });
    expect(r.text).not.toContain('replacement-character file');
    expect([r.status, r.text]).toEqual([400, expect.stringMatching(/path/)]);
  });

  it('no response to a traversal attempt carries another workspace or the host filesystem', async () => {
    for (const p of ['..%2Fother%2Fsibling.txt', '%2e%2e/other/sibling.txt', '%2Fetc%2Fpasswd', '/proc/self/environ', '%EF%BC%8E%EF%BC%8E/other/sibling.txt']) {
      const r = await send({ method: 'GET', target: `/v1/workspaces/ws/cat?path=${p}` });
      expect(r.outcome).toBe('answered');
      expect([400, 404]).toContain(r.status);
      expect(r.text).not.toMatch(/SIBLING_WORKSPACE_CONTENT|root:|PATH=/);
    }
  });
});

// ---------------------------------------------------------------------------
// Numbers
// ---------------------------------------------------------------------------

/** Integers in every shape the contract does not allow (plain decimal only). */
const NUMBERS: Array<[string, string]> = [
  ['negative', '-1'],
  ['negative zero', '-0'],
  ['fraction', '1.5'],
  ['trailing dot', '1.'],
  ['2^53', '9007199254740992'],
  ['far beyond 2^53', '99999999999999999999'],
  ['exponent', '1e3'],
  ['hex', '0x10'],
  ['leading plus', '%2B1'],
  ['leading space', '%201'],
  ['trailing space', '1%20'],
  ['empty', ''],
  ['fullwidth digit', '%EF%BC%91'],
  ['arabic-indic digit', '%D9%A1'],
  ['underscore', '1_000'],
  ['Infinity', 'Infinity'],
  ['NaN', 'NaN'],
  ['thousands comma', '1,000'],
  ['NUL', '1%00'],
  ['undecodable', '%FF'],
];

storeFree('integer parameters of the read tools: 400 naming the parameter', () => {
  const PARAMS: Array<[string, string]> = [
    ['cat?path=a.txt&offset=', 'offset'],
    ['cat?path=a.txt&limit=', 'limit'],
    ['find?pattern=*&head_limit=', 'head_limit'],
    ['grep?pattern=a&-A=', '-A'],
    ['grep?pattern=a&-B=', '-B'],
    ['grep?pattern=a&-C=', '-C'],
    ['grep?pattern=a&head_limit=', 'head_limit'],
    ['grep?pattern=a&offset=', 'offset'],
  ];
  const cases = PARAMS.flatMap(([prefix, name]) =>
    NUMBERS.map(([label, value]) =>
      text(`${prefix.split('?')[0]} ${name} ${label}`, `/v1/workspaces/ws/${prefix}${value}`, 400, new RegExp(`invalid ${escapeRe(name)}`)),
    ),
  );
  it.each(cases)('$name', expectRefused);

  it.each([
    text('cat offset 0', '/v1/workspaces/ws/cat?path=a.txt&offset=0', 400, /offset/),
    text('cat limit 0', '/v1/workspaces/ws/cat?path=a.txt&limit=0', 400, /limit/),
    text('find head_limit 0', '/v1/workspaces/ws/find?pattern=*&head_limit=0', 400, /head_limit/),
    text('find head_limit 1001', '/v1/workspaces/ws/find?pattern=*&head_limit=1001', 400, /head_limit/),
    text('grep head_limit 0', '/v1/workspaces/ws/grep?pattern=a&head_limit=0', 400, /head_limit/),
    text('offset given twice', '/v1/workspaces/ws/cat?path=a.txt&offset=1&offset=2', 400, /offset.*more than once/),
  ])('$name', expectRefused);
});

storeFree('listing and audit limit and cursor: 400 naming the parameter', () => {
  const numeric: Array<[string, string]> = [
    ['/v1/workspaces/ws/files?limit=', 'limit'],
    ['/v1/workspaces/ws/audit?limit=', 'limit'],
    ['/v1/workspaces/ws/audit?cursor=', 'cursor'],
  ];
  const cases = numeric.flatMap(([prefix, name]) =>
    NUMBERS.map(([label, value]) =>
      json(`${prefix.split('/')[4].split('?')[0]} ${name} ${label}`, 'GET', `${prefix}${value}`, 400, new RegExp(`invalid ${name}`)),
    ),
  );
  it.each(cases)('$name', expectRefused);

  it.each([
    json('files limit 0', 'GET', '/v1/workspaces/ws/files?limit=0', 400, /invalid limit/),
    json('files limit 1001', 'GET', '/v1/workspaces/ws/files?limit=1001', 400, /invalid limit/),
    json('files limit twice', 'GET', '/v1/workspaces/ws/files?limit=1&limit=2', 400, /limit.*more than once/),
    json('files cursor empty', 'GET', '/v1/workspaces/ws/files?cursor=', 400, /invalid cursor/),
    json('files cursor undecodable', 'GET', '/v1/workspaces/ws/files?cursor=%FF', 400, /invalid cursor/),
    json('files cursor dotdot', 'GET', '/v1/workspaces/ws/files?cursor=%2e%2e', 400, /invalid cursor/),
    json('files cursor negative', 'GET', '/v1/workspaces/ws/files?cursor=-1', 400, /invalid cursor/),
    json('files cursor padded base64', 'GET', '/v1/workspaces/ws/files?cursor=Lw==', 400, /invalid cursor/),
    json('files cursor of a NUL', 'GET', '/v1/workspaces/ws/files?cursor=AA', 400, /invalid cursor/),
    json('files cursor 2001 chars', 'GET', `/v1/workspaces/ws/files?cursor=${'L'.repeat(2001)}`, 400, /invalid cursor/),
    json('files status unknown', 'GET', '/v1/workspaces/ws/files?status=done', 400, /invalid status/),
    json('files status empty', 'GET', '/v1/workspaces/ws/files?status=', 400, /invalid status/),
    json('files status upper case', 'GET', '/v1/workspaces/ws/files?status=READY', 400, /invalid status/),
    json('files status list', 'GET', '/v1/workspaces/ws/files?status=ready,error', 400, /invalid status/),
    json('files status with NUL', 'GET', '/v1/workspaces/ws/files?status=ready%00', 400, /invalid status/),
    json('files status twice', 'GET', '/v1/workspaces/ws/files?status=ready&status=error', 400, /status.*more than once/),
    json('files unknown parameter', 'GET', '/v1/workspaces/ws/files?colour=red', 400, /colour/),
    json('workspaces list with a parameter', 'GET', '/v1/workspaces?limit=10', 400, /limit/),
    json('audit cursor twice', 'GET', '/v1/workspaces/ws/audit?cursor=1&cursor=2', 400, /cursor.*more than once/),
    json('audit unknown parameter', 'GET', '/v1/workspaces/ws/audit?since=2026-01-01T00:00:00Z', 400, /since/),
    json('audit after empty', 'GET', '/v1/workspaces/ws/audit?after=', 400, /invalid after/),
    json('audit after a year', 'GET', '/v1/workspaces/ws/audit?after=2026', 400, /invalid after/),
    json('audit after a date without time', 'GET', '/v1/workspaces/ws/audit?after=2026-01-01', 400, /invalid after/),
    json('audit after without zone', 'GET', '/v1/workspaces/ws/audit?after=2026-01-01T00:00:00', 400, /invalid after/),
    json('audit after month 13', 'GET', '/v1/workspaces/ws/audit?after=2026-13-01T00:00:00Z', 400, /invalid after/),
    json('audit after hour 25', 'GET', '/v1/workspaces/ws/audit?after=2026-01-01T25:00:00Z', 400, /invalid after/),
    json('audit after February 30', 'GET', '/v1/workspaces/ws/audit?after=2026-02-30T00:00:00Z', 400, /invalid after/),
    json('audit after April 31', 'GET', '/v1/workspaces/ws/audit?after=2026-04-31T12:00:00Z', 400, /invalid after/),
    json('audit after five-digit year', 'GET', '/v1/workspaces/ws/audit?after=99999-01-01T00:00:00Z', 400, /invalid after/),
    json('audit after a word', 'GET', '/v1/workspaces/ws/audit?after=yesterday', 400, /invalid after/),
    json('audit after a number', 'GET', '/v1/workspaces/ws/audit?after=1700000000', 400, /invalid after/),
    json('audit after undecodable', 'GET', '/v1/workspaces/ws/audit?after=%FF', 400, /invalid after/),
    json('audit after with a leading space', 'GET', '/v1/workspaces/ws/audit?after=%202026-01-01T00:00:00Z', 400, /invalid after/),
    json('audit after 10,000 characters', 'GET', `/v1/workspaces/ws/audit?after=${'9'.repeat(10_000)}`, 400, /invalid after/),
  ])('$name', expectRefused);
});

// ---------------------------------------------------------------------------
// Read-tool parameters and regular expressions
// ---------------------------------------------------------------------------

storeFree('read-tool parameters', () => {
  it.each([
    text('cat without path', '/v1/workspaces/ws/cat', 400, /path/),
    text('cat with an empty path', '/v1/workspaces/ws/cat?path=', 400, /path/),
    text('find without pattern', '/v1/workspaces/ws/find', 400, /pattern/),
    text('find with an empty pattern', '/v1/workspaces/ws/find?pattern=', 400, /pattern/),
    text('grep without pattern', '/v1/workspaces/ws/grep', 400, /pattern/),
    text('grep with an empty pattern', '/v1/workspaces/ws/grep?pattern=', 400, /pattern/),
    text('ls unknown parameter', '/v1/workspaces/ws/ls?depth=1', 400, /depth/),
    text('cat unknown parameter', '/v1/workspaces/ws/cat?path=a.txt&lines=3', 400, /lines/),
    text('find unknown parameter', '/v1/workspaces/ws/find?pattern=*&type=f', 400, /type/),
    text('grep unknown parameter', '/v1/workspaces/ws/grep?pattern=a&color=always', 400, /color/),
    text('parameter name with NUL', '/v1/workspaces/ws/ls?pa%00th=/', 400, /pa/),
    text('ls path twice', '/v1/workspaces/ws/ls?path=a&path=b', 400, /path.*more than once/),
    text('grep pattern twice', '/v1/workspaces/ws/grep?pattern=a&pattern=b', 400, /pattern.*more than once/),
    text('grep output_mode unknown', '/v1/workspaces/ws/grep?pattern=a&output_mode=lines', 400, /output_mode/),
    text('grep output_mode upper case', '/v1/workspaces/ws/grep?pattern=a&output_mode=CONTENT', 400, /output_mode/),
    text('grep output_mode empty', '/v1/workspaces/ws/grep?pattern=a&output_mode=', 400, /output_mode/),
    text('grep output_mode undecodable', '/v1/workspaces/ws/grep?pattern=a&output_mode=%FF', 400, /output_mode/),
    text('grep -i yes', '/v1/workspaces/ws/grep?pattern=a&-i=yes', 400, /-i/),
    text('grep -i 2', '/v1/workspaces/ws/grep?pattern=a&-i=2', 400, /-i/),
    text('grep -i TRUE', '/v1/workspaces/ws/grep?pattern=a&-i=TRUE', 400, /-i/),
    text('grep multiline maybe', '/v1/workspaces/ws/grep?pattern=a&multiline=maybe', 400, /multiline/),
    text('grep -n 2', '/v1/workspaces/ws/grep?pattern=a&-n=2', 400, /-n/),
    text('grep type unknown', '/v1/workspaces/ws/grep?pattern=a&type=cobol', 400, /type/),
    text('grep type empty', '/v1/workspaces/ws/grep?pattern=a&type=', 400, /type/),
    text('grep type NUL', '/v1/workspaces/ws/grep?pattern=a&type=%00', 400, /type/),
    text('grep glob empty', '/v1/workspaces/ws/grep?pattern=a&glob=', 400, /glob/),
    // Very long globs: answered (200) or refused (400 naming the parameter), never an internal error.
    text('grep glob of 40,000 characters', `/v1/workspaces/ws/grep?pattern=a&glob=${'a'.repeat(40_000)}`, [200, 400], /glob/),
    text('find pattern of 40,000 characters', `/v1/workspaces/ws/find?pattern=${'a'.repeat(40_000)}`, [200, 400], /pattern/),
    text('find pattern of 20,000 stars', `/v1/workspaces/ws/find?pattern=${'*'.repeat(20_000)}`, [200, 400], /pattern/),
    text('find pattern of 2,000 nested braces', `/v1/workspaces/ws/find?pattern=${'%7Ba,'.repeat(2_000)}`, [200, 400], /pattern/),
    text('find pattern of 3,000 parentheses', `/v1/workspaces/ws/find?pattern=${'%28'.repeat(3_000)}`, [200, 400], /pattern/),
    text('find pattern that climbs', '/v1/workspaces/ws/find?pattern=**/../**', [200], /./),
    text('grep glob that climbs', '/v1/workspaces/ws/grep?pattern=a&glob=**/../**', [200], /./),
  ])('$name', expectRefused);
});

storeFree('grep regular expressions', () => {
  // Inputs that make backtracking engines explode: RE2 answers them in linear time (200), within the bound.
  const LINEAR = [
    '(a*)*',
    '(a*)*$',
    '(a|a)*b',
    '(a|aa)*c',
    '(x+x+)+y',
    '(.*a){25}',
    '(a+)+$',
    '^(a|a?)+$',
    '(?:a|b|ab)*c',
    '.*.*.*.*.*.*=',
    '[\\s\\S]*!',
    '(|)*',
    '()*',
  ];
  // Valid RE2 whose meaning is literal or trivial.
  const ACCEPTED = [']', '{', 'a{0}', 'a{1000}', '\\p{L}+', '(?i)ALPHA', '$^', '(?<n>a)', `${'('.repeat(200)}a${')'.repeat(200)}`];
  // Not RE2 (backreferences, lookaround, possessive and atomic groups, bad repetition, unbalanced brackets): 400 naming the pattern.
  const REFUSED = [
    'a{1000}{1000}',
    '(?:a{1000}){1000}',
    'a{1001}',
    '(a{500}){500}',
    'x{99999}',
    'a{2,1}',
    '(a)\\1',
    '(a)(b)\\2',
    '\\k<n>',
    '(?P<n>a)(?P=n)',
    '(?=a)',
    '(?!a)',
    '(?<=a)',
    '(?<!a)',
    '(?>a)',
    'a++',
    'a*+',
    'a**',
    '*a',
    '+',
    '?',
    '(',
    ')',
    '((a)',
    '(a))',
    '[',
    '[abc',
    '[a-',
    '[z-a]',
    '[[:foo:]]',
    '\\',
    'a\\',
    '\\p{Foo}',
    '(?P<n>a)(?P<n>b)',
    '(?i',
    '(?z)',
    '(?#comment)',
    '\\Z',
    '\\x{110000}',
  ];
  const grep = (pattern: string, mode: string) => `/v1/workspaces/ws/grep?output_mode=${mode}&pattern=${encodeURIComponent(pattern)}`;
  it.each([
    ...LINEAR.map((p) => text(`linear: ${p}`, grep(p, 'count'), 200, /./)),
    ...LINEAR.slice(0, 4).map((p) => text(`linear, content: ${p}`, grep(p, 'content'), 200, /./)),
    ...ACCEPTED.map((p) => text(`accepted: ${p.slice(0, 40)}`, grep(p, 'files_with_matches'), [200, 400], /pattern/)),
    ...REFUSED.map((p) => text(`refused: ${p}`, grep(p, 'files_with_matches'), 400, /invalid pattern/)),
    text('a pattern one byte over 16 KiB', grep('a'.repeat(16 * 1024 + 1), 'count'), 400, /pattern.*longer than/),
    text('NUL in the pattern', '/v1/workspaces/ws/grep?pattern=a%00b', [200, 400], /pattern/),
    // Undecodable bytes: rejected like an undecodable upload path, not searched as U+FFFD.
    text('invalid UTF-8 %FF', '/v1/workspaces/ws/grep?pattern=%FF', 400, /pattern/),
    text('overlong UTF-8 %C0%AE', '/v1/workspaces/ws/grep?pattern=%C0%AE', 400, /pattern/),
    text('lone surrogate %ED%A0%80', '/v1/workspaces/ws/grep?pattern=%ED%A0%80', 400, /pattern/),
  ])('$name', expectRefused);

  it('a 1 MB pattern is refused at once: the HTTP layer closes a request head over its limit, never a 2xx, 5xx or a hang', async () => {
    const r = await send({ method: 'GET', target: `/v1/workspaces/ws/grep?pattern=${'a'.repeat(1 << 20)}` });
    expect(r.outcome, `1 MB pattern: ${r.outcome} after ${Math.round(r.ms)} ms`).not.toBe('timeout');
    if (r.outcome === 'answered') {
      expect(r.status).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
    }
  });
});

// ---------------------------------------------------------------------------
// Token ids
// ---------------------------------------------------------------------------

storeFree('token ids: 404, nothing revoked', () => {
  it.each(
    [
      'not-a-uuid',
      '%2e%2e',
      '..',
      '..%2f..%2fworkspaces',
      'x'.repeat(10_000),
      '%FF',
      '%00',
      '00000000-0000-0000-0000-000000000000',
      'FFFFFFFF-FFFF-4FFF-8FFF-FFFFFFFFFFFF',
      '%27%3B%20DROP%20TABLE%20tokens%3B--',
      '00000000-0000-4000-8000-000000000000%00',
      '{00000000-0000-4000-8000-000000000000}',
      '00000000000040008000000000000000',
    ].map((id) => json(`DELETE /v1/tokens/${id.slice(0, 40)}`, 'DELETE', `/v1/tokens/${id}`, 404, /no such token/)),
  )('$name', expectRefused);
});

// ---------------------------------------------------------------------------
// JSON bodies
// ---------------------------------------------------------------------------

const NAME_RULE = /name must be 1-64 characters/;
const NOT_JSON = /not valid JSON/;

describe('POST /v1/workspaces bodies: 400 or 413, nothing created', () => {
  const body = (name: string, payload: string | Buffer, status: number | number[], message: RegExp): Refusal =>
    json(name, 'POST', '/v1/workspaces', status, message, { body: payload });
  it.each([
    body('truncated object', '{"name":"x1"', 400, NOT_JSON),
    body('truncated after colon', '{"name":', 400, NOT_JSON),
    body('lone brace', '{', 400, NOT_JSON),
    body('trailing comma', '{"name":"x1",}', 400, NOT_JSON),
    body('open brackets', '[[[[', 400, NOT_JSON),
    body('10,000 open brackets', '['.repeat(10_000), 400, NOT_JSON),
    body('arrays nested 10,000 deep', '['.repeat(10_000) + ']'.repeat(10_000), 400, /expected a JSON object/),
    body('objects nested 10,000 deep', '{"a":'.repeat(10_000) + '1' + '}'.repeat(10_000), 400, /invalid request body/),
    body('null', 'null', 400, /expected a JSON object/),
    body('a string', '"ws-x"', 400, /expected a JSON object/),
    body('an array', '[]', 400, /expected a JSON object/),
    body('a number', '1', 400, /expected a JSON object/),
    body('true', 'true', 400, /expected a JSON object/),
    body('empty object', '{}', 400, /name/),
    body('name a number', '{"name":1}', 400, /name must be a string/),
    body('name null', '{"name":null}', 400, /name must be a string/),
    body('name an array', '{"name":["a"]}', 400, /name must be a string/),
    body('name an object', '{"name":{"toString":"x"}}', 400, /name must be a string/),
    body('name true', '{"name":true}', 400, /name must be a string/),
    body('name 1e400', '{"name":1e400}', 400, /name must be a string/),
    body('name empty', '{"name":""}', 400, NAME_RULE),
    body('name upper case', '{"name":"A"}', 400, NAME_RULE),
    body('name with a space', '{"name":"a b"}', 400, NAME_RULE),
    body('name starting with a hyphen', '{"name":"-a"}', 400, NAME_RULE),
    body('name ending with a hyphen', '{"name":"a-"}', 400, NAME_RULE),
    body('name of 65 characters', JSON.stringify({ name: 'a'.repeat(65) }), 400, NAME_RULE),
    body('name ..', '{"name":".."}', 400, NAME_RULE),
    body('name .', '{"name":"."}', 400, NAME_RULE),
    body('name with a slash', '{"name":"a/b"}', 400, NAME_RULE),
    body('name climbing', '{"name":"../x"}', 400, NAME_RULE),
    body('name with NUL', '{"name":"ws\\u0000"}', 400, NAME_RULE),
    body('name fullwidth', '{"name":"ｗｓ"}', 400, NAME_RULE),
    body('name accented', '{"name":"café"}', 400, NAME_RULE),
    body('name with a newline', '{"name":"ws\\n"}', 400, NAME_RULE),
    body('name of 10,000 characters', JSON.stringify({ name: 'a'.repeat(10_000) }), 400, NAME_RULE),
    body('extra property', '{"name":"ok-x","extra":1}', 400, /unknown property "extra"/),
    body('__proto__ beside name', '{"name":"ok-x","__proto__":{"admin":true}}', 400, /__proto__/),
    body('name hidden in __proto__', '{"__proto__":{"name":"proto-x"}}', 400, /invalid request body/),
    body('constructor.prototype', '{"constructor":{"prototype":{"name":"x"}}}', 400, /invalid request body/),
    body('constructor beside name', '{"name":"ok-x","constructor":{}}', 400, /constructor/),
    body('UTF-8 BOM', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"name":"bom-x"}')]), 400, NOT_JSON),
    body('UTF-16 JSON', Buffer.from('{"name":"u16-x"}', 'utf16le'), 400, NOT_JSON),
    body('invalid UTF-8 in the name', Buffer.from([...Buffer.from('{"name":"'), 0xff, 0xfe, ...Buffer.from('"}')]), 400, NAME_RULE),
    body('overlong UTF-8 in the name', Buffer.from([...Buffer.from('{"name":"a'), 0xc0, 0xae, ...Buffer.from('"}')]), 400, NAME_RULE),
    body('a form body', 'name=form-x', 400, NOT_JSON),
    body('single quotes', "{'name':'x'}", 400, NOT_JSON),
    body('trailing garbage', '{"name":"tg-x"}garbage', 400, NOT_JSON),
    body('two objects', '{"name":"two-a"}{"name":"two-b"}', 400, NOT_JSON),
    body('a comment', '{"name":"cm-x"/*c*/}', 400, NOT_JSON),
    body('NaN', '{"name":NaN}', 400, NOT_JSON),
    body('empty body', '', 400, /JSON object is required/),
    body('whitespace only', '   \n ', 400, NOT_JSON),
    body('1 MB of JSON', JSON.stringify({ name: 'x'.repeat(1 << 20) }), 413, /exceeds 65536 bytes/),
    body('64 KiB + 1', '{"name":"' + 'a'.repeat(65_536 - 11 + 1) + '"}', 413, /exceeds 65536 bytes/),
  ])('$name', expectRefused);

  it('duplicate keys: the last one wins (JSON.parse) or the body is refused; never both, never the first', async () => {
    const before = (await t.call('GET', '/v1/workspaces')).json.workspaces.map((w: { name: string }) => w.name);
    const r = await send({ method: 'POST', target: '/v1/workspaces', body: '{"name":"dup-first","name":"dup-last"}' });
    expect(r.outcome).toBe('answered');
    expect([201, 400]).toContain(r.status);
    const after = (await t.call('GET', '/v1/workspaces')).json.workspaces.map((w: { name: string }) => w.name);
    expect(after).not.toContain('dup-first');
    if (r.status === 201) {
      expect(JSON.parse(r.text)).toEqual({ name: 'dup-last' });
      expect(after.sort()).toEqual([...before, 'dup-last'].sort());
      expect((await t.call('DELETE', '/v1/workspaces/dup-last')).status).toBe(204);
    } else {
      expect(after).toEqual(before);
    }
  });

  it.each(['text/plain', 'application/xml', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', 'application/json; charset=utf-16', ''])(
    'a JSON body sent as Content-Type %j is parsed as JSON (201) or refused as unsupported (415), never half-done',
    async (contentType) => {
      const name = `ct-${Buffer.from(contentType).toString('hex').slice(0, 20) || 'none'}`;
      const headers: Header[] = contentType === '' ? [] : [['content-type', contentType]];
      const r = await send({ method: 'POST', target: '/v1/workspaces', headers, body: JSON.stringify({ name }) });
      expect(r.outcome).toBe('answered');
      expect([201, 415]).toContain(r.status);
      const names = (await t.call('GET', '/v1/workspaces')).json.workspaces.map((w: { name: string }) => w.name);
      expect(names.includes(name)).toBe(r.status === 201);
      if (r.status === 201) expect((await t.call('DELETE', `/v1/workspaces/${name}`)).status).toBe(204);
    },
  );
});

storeFree('POST /v1/workspaces/{ws}/tokens bodies: 400 or 413, no token minted', () => {
  const body = (name: string, payload: string | Buffer, status: number | number[], message: RegExp): Refusal =>
    json(name, 'POST', '/v1/workspaces/ws/tokens', status, message, { body: payload });
  it.each([
    body('ttlSeconds negative', '{"ttlSeconds":-1}', 400, /ttlSeconds/),
    body('ttlSeconds zero', '{"ttlSeconds":0}', 400, /ttlSeconds/),
    body('ttlSeconds negative zero', '{"ttlSeconds":-0}', 400, /ttlSeconds/),
    body('ttlSeconds 59', '{"ttlSeconds":59}', 400, /ttlSeconds/),
    body('ttlSeconds 86401', '{"ttlSeconds":86401}', 400, /ttlSeconds/),
    body('ttlSeconds fraction', '{"ttlSeconds":60.5}', 400, /ttlSeconds/),
    body('ttlSeconds string', '{"ttlSeconds":"600"}', 400, /ttlSeconds/),
    body('ttlSeconds null', '{"ttlSeconds":null}', 400, /ttlSeconds/),
    body('ttlSeconds true', '{"ttlSeconds":true}', 400, /ttlSeconds/),
    body('ttlSeconds array', '{"ttlSeconds":[600]}', 400, /ttlSeconds/),
    body('ttlSeconds object', '{"ttlSeconds":{}}', 400, /ttlSeconds/),
    body('ttlSeconds 1e400', '{"ttlSeconds":1e400}', 400, /ttlSeconds/),
    body('ttlSeconds beyond 2^53', '{"ttlSeconds":9007199254740993}', 400, /ttlSeconds/),
    body('ttlSeconds hex', '{"ttlSeconds":0x10}', 400, NOT_JSON),
    body('ttlSeconds with a leading plus', '{"ttlSeconds":+600}', 400, NOT_JSON),
    body('claims empty', '{"claims":[]}', 400, /claims/),
    body('claims with an empty string', '{"claims":[""]}', 400, /claim/),
    body('claims a string', '{"claims":"*"}', 400, /claims/),
    body('claims null', '{"claims":null}', 400, /claims/),
    body('claims with null', '{"claims":[null]}', 400, /claims/),
    body('claims with a number', '{"claims":[1]}', 400, /claims/),
    body('claims nested', '{"claims":[["*"]]}', 400, /claims/),
    body('claims an object', '{"claims":{"0":"*"}}', 400, /claims/),
    body('claim group: without id', '{"claims":["group:"]}', 400, /claim/),
    body('claim with a space', '{"claims":["group:a b"]}', 400, /claim/),
    body('claim of an unknown kind', '{"claims":["role:admin"]}', 400, /claim/),
    body('claim with NUL', '{"claims":["user:a\\u0000"]}', 400, /claim/),
    body('claim of 129 characters', JSON.stringify({ claims: [`user:${'a'.repeat(129)}`] }), 400, /claim/),
    body('65 claims', JSON.stringify({ claims: Array.from({ length: 65 }, (_, i) => `user:u${i}`) }), 400, /claims/),
    body('a workspace property', '{"workspace":"other"}', 400, /unknown property "workspace"/),
    body('an account property', '{"accountId":"00000000-0000-4000-8000-000000000000"}', 400, /unknown property/),
    body('__proto__', '{"claims":["*"],"__proto__":{"ttlSeconds":1}}', 400, /__proto__/),
    body('truncated', '{"claims":', 400, NOT_JSON),
    body('an array', '[]', 400, /expected a JSON object/),
    body('deeply nested', '['.repeat(10_000) + ']'.repeat(10_000), 400, /expected a JSON object/),
    body('UTF-8 BOM', Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{}')]), 400, NOT_JSON),
    body('invalid UTF-8', Buffer.from([...Buffer.from('{"claims":["user:'), 0xff, ...Buffer.from('"]}')]), 400, /claim/),
    body('1 MB', JSON.stringify({ claims: ['user:' + 'a'.repeat(1 << 20)] }), 413, /exceeds 65536 bytes/),
  ])('$name', expectRefused);

  it('ttlSeconds in exponent notation is a JSON number like any other: 1e3 mints a token for 1000 s', async () => {
    const r = await send({ method: 'POST', target: '/v1/workspaces/ws/tokens', body: '{"ttlSeconds":1e3}' });
    expect(r.status).toBe(201);
    const minted = JSON.parse(r.text) as { expiresAt: string };
    expect(Math.abs(Date.parse(minted.expiresAt) - Date.now() - 1_000_000)).toBeLessThan(60_000);
  });
});

describe('PUT visibility and parameters: 400 naming visibility, nothing stored', () => {
  const up = (name: string, query: string, message = /visibility/): Refusal =>
    json(name, 'PUT', `/v1/workspaces/ws/files/v.txt?${query}`, 400, message, { body: 'x' });
  it.each([
    up('empty', 'visibility='),
    up('a bare word', 'visibility=team'),
    up('star beside a claim', 'visibility=*,user:a'),
    up('user: without id', 'visibility=user:'),
    up('trailing comma', 'visibility=user:a,'),
    up('NUL in the id', 'visibility=user:a%00'),
    up('space in the id', 'visibility=group:a%20b'),
    up('undecodable', 'visibility=%FF'),
    up('id of 129 characters', `visibility=user:${'a'.repeat(129)}`),
    up('65 claims', `visibility=${Array.from({ length: 65 }, (_, i) => `user:u${i}`).join(',')}`),
    up('given twice', 'visibility=user:a&visibility=user:b', /visibility.*more than once/),
    up('unknown parameter', 'colour=red', /colour/),
    up('parameter name in upper case', 'VISIBILITY=user:a', /VISIBILITY/),
  ])('$name', expectRefused);
});

// ---------------------------------------------------------------------------
// Headers
// ---------------------------------------------------------------------------

storeFree('Authorization headers', () => {
  const mgmt = (name: string, headers: Header[]): Refusal => json(name, 'GET', '/v1/workspaces', 401, /credential|Authorization/, { auth: null, headers });
  const valid = () => t.key;
  it.each([
    mgmt('missing', []),
    mgmt('scheme only', [['authorization', 'Bearer']]),
    mgmt('scheme and a space', [['authorization', 'Bearer ']]),
    mgmt('Basic scheme', [['authorization', 'Basic dXNlcjpwYXNz']]),
    mgmt('Token scheme', [['authorization', `Token ${'svc_sk_' + 'A'.repeat(49)}`]]),
    mgmt('10 KB of garbage', [['authorization', `Bearer ${'A'.repeat(10_240)}`]]),
    mgmt('10 KB key-shaped', [['authorization', `Bearer svc_sk_${'A'.repeat(10_240)}`]]),
    mgmt('prefix only', [['authorization', 'Bearer svc_sk_']]),
    mgmt('latin-1 byte', [['authorization', 'Bearer svc_sk_\u00e9']]),
    mgmt('quoted', [['authorization', 'Bearer "svc_sk_x"']]),
  ])('$name', expectRefused);

  it.each([
    ['a tab between scheme and credential', () => `Bearer\t${valid()}`],
    ['two credentials', () => `Bearer ${valid()} ${otherKey}`],
    ['a comma-separated list', () => `Bearer ${valid()}, Bearer ${otherKey}`],
    ['one character appended', () => `Bearer ${valid()}x`],
    ['the key as a token', () => `Bearer svc_at_${valid().slice(7)}`],
  ])('401: %s', async (_label, header) => {
    await expectRefused(json('', 'GET', '/v1/workspaces', 401, /credential|Authorization/, { auth: null, headers: [['authorization', header()]] }));
  });

  it.each([
    ['missing', []],
    ['malformed', [['authorization', 'Bearer nonsense']]],
    ['a 10 KB header', [['authorization', `Bearer ${'B'.repeat(10_240)}`]]],
  ] as Array<[string, Header[]]>)('read tools answer 401 in plain text: %s', async (_label, headers) => {
    await expectRefused(text('', '/v1/workspaces/ws/ls', 401, /credential|Authorization/, { auth: null, headers }));
  });

  it.each([
    ['lower-case scheme', () => `bearer ${t.key}`],
    ['upper-case scheme', () => `BEARER ${t.key}`],
    ['extra spaces', () => `Bearer    ${t.key}   `],
  ])('accepted (auth schemes are case-insensitive, spaces are padding): %s', async (_label, header) => {
    const r = await send({ method: 'GET', target: '/v1/workspaces', auth: null, headers: [['authorization', header()]] });
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text).workspaces.map((w: { name: string }) => w.name)).toContain('ws');
  });

  it('the same credential twice: either answer is sane, nothing else', async () => {
    const r = await send({
      method: 'GET',
      target: '/v1/workspaces',
      auth: null,
      headers: [
        ['authorization', `Bearer ${t.key}`],
        ['authorization', `Bearer ${t.key}`],
      ],
    });
    expect([200, 400, 401]).toContain(r.status);
  });

  it('a garbage credential, then a valid one: 401', async () => {
    await expectRefused(
      json('', 'GET', '/v1/workspaces', 401, /credential/, {
        auth: null,
        headers: [
          ['authorization', 'Bearer junk'],
          ['authorization', `Bearer ${t.key}`],
        ],
      }),
    );
  });

  it('two different valid credentials (two accounts) are ambiguous: 400 or 401, never served as either', async () => {
    for (const [first, second] of [
      [t.key, otherKey],
      [otherKey, t.key],
    ]) {
      const r = await send({
        method: 'GET',
        target: '/v1/workspaces',
        auth: null,
        headers: [
          ['authorization', `Bearer ${first}`],
          ['authorization', `Bearer ${second}`],
        ],
      });
      expect([400, 401], `answered ${r.status}: ${r.text.slice(0, 120)}`).toContain(r.status);
      expect(JSON.parse(r.text)).toEqual({ error: expect.any(String) });
    }
  });

  it('a scoped token on management routes is 403, on its read tools 200', async () => {
    await expectRefused(json('', 'GET', '/v1/workspaces', 403, /scoped token/, { auth: token }));
    await expectRefused(json('', 'POST', '/v1/workspaces', 403, /scoped token/, { auth: token, body: '{"name":"by-token"}' }));
    expect((await send({ method: 'GET', target: '/v1/workspaces/ws/ls', auth: token })).status).toBe(200);
  });
});

// ---------------------------------------------------------------------------
// Methods and routes
// ---------------------------------------------------------------------------

storeFree('methods and routes that do not exist: 404 (or 405) in JSON, nothing changed', () => {
  it.each([
    ['OPTIONS', '/v1/workspaces'],
    ['PATCH', '/v1/workspaces/ws'],
    ['TRACE', '/v1/workspaces'],
    ['PUT', '/v1/workspaces'],
    ['DELETE', '/v1/workspaces'],
    ['PUT', '/v1/workspaces/ws'],
    ['POST', '/v1/workspaces/ws/ls'],
    ['DELETE', '/v1/workspaces/ws/ls'],
    ['GET', '/v1/workspaces/ws/LS'],
    ['GET', '/v1/workspaces/ws/ls/'],
    ['GET', '/v1/workspaces/ws/files/a.txt'],
    ['POST', '/v1/workspaces/ws/files/a.txt'],
    ['DELETE', '/healthz'],
    ['POST', '/readyz'],
    ['GET', '/v1/tokens/00000000-0000-4000-8000-000000000000'],
    ['PUT', '/v1/tokens/00000000-0000-4000-8000-000000000000'],
    ['GET', '/V1/workspaces'],
    ['GET', '//v1/workspaces'],
    ['GET', '/v1//workspaces'],
    ['GET', '/v1/workspaces/'],
    ['GET', '/v1/./workspaces'],
    ['GET', '/v1/workspaces/ws/../other/ls'],
    ['GET', '/v1/workspaces/ws/%6Cs'],
    ['GET', '/v2/workspaces'],
  ])('%s %s', async (method, target) => {
    await expectRefused(
      json(`${method} ${target}`, method, target, [404, 405], /no such route|not allowed/, {
        body: method === 'GET' || method === 'DELETE' ? undefined : '{}',
      }),
    );
  });
});

// ---------------------------------------------------------------------------
// Uploads with misleading content types
// ---------------------------------------------------------------------------

describe('uploads whose Content-Type lies', () => {
  const cases: Array<[string, Buffer, string, RegExp]> = [
    ['zip-as-text.txt', Buffer.concat([Buffer.from('PK\x03\x04', 'latin1'), Buffer.alloc(60, 7)]), 'text/plain', /ZIP/],
    ['png-as-text.txt', Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(60, 1)]), 'text/plain', /PNG/],
    ['gzip-as-text.txt', Buffer.concat([Buffer.from([0x1f, 0x8b, 0x08, 0x00]), Buffer.alloc(60, 0)]), 'text/plain; charset=utf-8', /gzip/],
    ['elf-as-text.txt', Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46, 0x02, 0x01, 0x01, 0x00]), Buffer.alloc(60, 0)]), 'text/plain', /ELF/],
  ];
  beforeAll(async () => {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'lies' } })).status).toBe(201);
    for (const [path, body, contentType] of cases) expect((await put(t, 'lies', path, body, { 'content-type': contentType })).status).toBe(202);
    expect((await put(t, 'lies', 'text-as-pdf.pdf', 'plain words, not a PDF\nsecond line\n', { 'content-type': 'application/pdf' })).status).toBe(202);
    await settled(t, 'lies');
  });

  it.each(cases)('%s: 202, then error with a readable errorDetail naming the format', async (path, body, contentType, detail) => {
    const entry = (await listAll(t, 'lies')).find((f) => f.path === '/' + path)!;
    expect(entry).toMatchObject({ status: 'error', sizeBytes: body.length, contentType });
    expect(entry.errorDetail).toMatch(detail);
    expect(entry.errorDetail).toMatch(/^[\x20-\x7e]+$/); // readable: one printable line
    const r = await t.call('GET', `/v1/workspaces/lies/cat?path=/${path}`);
    expect(r.status).toBe(404);
    expect(r.text).toMatch(/status is error/);
  });

  it('text uploaded as application/pdf is extracted by its content: ready, served as text, Content-Type echoed', async () => {
    const entry = (await listAll(t, 'lies')).find((f) => f.path === '/text-as-pdf.pdf')!;
    expect(entry).toMatchObject({ status: 'ready', contentType: 'application/pdf', errorDetail: null });
    const r = await t.call('GET', '/v1/workspaces/lies/cat?path=/text-as-pdf.pdf');
    expect(r.text).toBe('     1\tplain words, not a PDF\n     2\tsecond line\n');
  });
});

// ---------------------------------------------------------------------------
// Names that look like traversal but are not
// ---------------------------------------------------------------------------

describe('look-alike dots and absolute-looking paths stay inside the workspace', () => {
  const LOOKALIKE: Array<[string, string]> = [
    ['fullwidth full stops', '\uFF0E\uFF0E'],
    ['two dot leader', '\u2025'],
    ['small full stops', '\uFE52\uFE52'],
    ['one dot leaders', '\u2024\u2024'],
  ];
  beforeAll(async () => {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'looks' } })).status).toBe(201);
  });

  it.each(LOOKALIKE)('%s are a literal segment name, not a parent', async (_label, dots) => {
    const enc = encodeURIComponent(dots);
    const up = await send({ method: 'PUT', target: `/v1/workspaces/looks/files/${enc}/${enc}/other/sibling.txt`, body: `inside looks via ${dots}\n` });
    expect(up.status).toBe(202);
    expect(JSON.parse(up.text)).toEqual({ path: `/${dots}/${dots}/other/sibling.txt`, status: 'pending' });
    const files = await settled(t, 'looks');
    expect(files.map((f) => f.path)).toContain(`/${dots}/${dots}/other/sibling.txt`);
    // ls shows it as a directory of the root, and cat reads our bytes, not the sibling workspace's.
    expect((await send({ method: 'GET', target: '/v1/workspaces/looks/ls' })).text).toContain(`${dots}/\n`);
    const cat = await send({ method: 'GET', target: `/v1/workspaces/looks/cat?path=${enc}/${enc}/other/sibling.txt` });
    expect(cat.text).toBe(`     1\tinside looks via ${dots}\n`);
    // The same path sent as raw UTF-8 bytes in the request line reads the same file; Node's
    // HTTP parser refuses bytes outside ASCII there, as RFC 9112 allows (README).
    const rawCat = await send({ method: 'GET', target: `/v1/workspaces/looks/cat?path=${dots}/${dots}/other/sibling.txt` });
    if (nativeHttp) expect(rawCat.text).toBe(cat.text);
    else expect(rawCat.status).toBe(400);
    expect((await send({ method: 'GET', target: `/v1/workspaces/looks/ls?path=${enc}` })).text).toBe(`${dots}/\n`);
    // The sibling workspace is untouched.
    const sibling = await listAll(t, 'other');
    expect(sibling.map((f) => f.path)).toEqual(['/sibling.txt']);
  });

  it('an absolute-looking path is a key in the workspace, never the host file', async () => {
    const before = await send({ method: 'GET', target: '/v1/workspaces/looks/cat?path=/etc/passwd' });
    expect(before.status).toBe(404);
    expect(before.text).not.toContain('root:');
    for (const target of ['/v1/workspaces/looks/files/%2Fetc%2Fpasswd', '/v1/workspaces/looks/files//etc/passwd']) {
      const r = await send({ method: 'PUT', target, body: 'not the host file\n' });
      expect(r.status).toBe(202);
      expect(JSON.parse(r.text).path).toBe('/etc/passwd');
    }
    await settled(t, 'looks');
    const cat = await send({ method: 'GET', target: '/v1/workspaces/looks/cat?path=/etc/passwd' });
    expect(cat.text).toBe('     1\tnot the host file\n');
    expect((await send({ method: 'DELETE', target: '/v1/workspaces/looks/files/etc/passwd' })).status).toBe(204);
  });
});

// ---------------------------------------------------------------------------
// Slow clients
// ---------------------------------------------------------------------------

storeFree('slow clients', () => {
  /** Times one request through fetch, bounded. */
  async function timed(path: string, key: string | null = t.key): Promise<{ status: number; ms: number }> {
    const started = performance.now();
    const res = await fetch(t.url + path, { headers: key === null ? {} : { authorization: `Bearer ${key}` }, signal: AbortSignal.timeout(BOUND_MS) });
    await res.arrayBuffer();
    return { status: res.status, ms: performance.now() - started };
  }

  it('uploads trickling one byte every 200 ms do not hold up other requests', async () => {
    const BYTES = 15; // 3 s per upload
    const trickles = Array.from({ length: 10 }, (_, i) => {
      const head = requestBytes('PUT', `/v1/workspaces/ws/files/slow/trickle-${i}.txt`, [
        ['authorization', `Bearer ${t.key}`],
        ['content-length', String(BYTES)],
      ]);
      const pieces = [head, ...Array.from({ length: BYTES }, () => Buffer.from('z'))];
      return exchange(pieces, { pieceDelayMs: 200, timeoutMs: 15_000 });
    });
    await sleep(300); // every trickle has sent its head and is mid-body
    for (let round = 0; round < 5; round++) {
      const [health, list, ls] = await Promise.all([timed('/healthz', null), timed('/v1/workspaces'), timed('/v1/workspaces/ws/ls')]);
      for (const r of [health, list, ls]) {
        expect(r.status).toBe(200);
        expect(r.ms).toBeLessThan(2_000);
      }
      await sleep(300);
    }
    for (const r of await Promise.all(trickles)) expect(r.status < 500, `trickled upload answered ${r.status}`).toBe(true);
    await settled(t, 'ws');
    for (let i = 0; i < 10; i++) expect((await t.call('DELETE', `/v1/workspaces/ws/files/slow/trickle-${i}.txt`)).status).toBe(204);
  });

  it('request heads trickling one byte every 200 ms do not hold up other requests', async () => {
    const head = requestBytes('GET', '/v1/workspaces/ws/ls', [['authorization', `Bearer ${t.key}`]]);
    const slow = Array.from({ length: 10 }, () =>
      exchange(
        [...head].map((b) => Buffer.from([b])),
        { pieceDelayMs: 200, timeoutMs: 4_000 },
      ),
    );
    await sleep(300);
    for (let round = 0; round < 5; round++) {
      const [health, list] = await Promise.all([timed('/healthz', null), timed('/v1/workspaces')]);
      expect([health.status, list.status]).toEqual([200, 200]);
      expect(Math.max(health.ms, list.ms)).toBeLessThan(2_000);
      await sleep(300);
    }
    for (const r of await Promise.all(slow)) expect(r.status < 500).toBe(true);
  });
});

// ---------------------------------------------------------------------------
// Malformed HTTP below the routes
// ---------------------------------------------------------------------------

storeFree('HTTP framing', () => {
  it.each(['/healthz', '/v1/workspaces', '/v1/workspaces/ws/ls'])(
    'HEAD %s: a head without a body (RFC 9110 9.3.2), so the connection stays in step',
    async (path) => {
      const r = await send({ method: 'HEAD', target: path });
      expect(r.outcome).toBe('answered');
      expect(r.status).toBeLessThan(500);
      expect(r.bodyBytes, `HEAD ${path} sent a body: ${r.raw.toString('latin1').split('\r\n\r\n')[1]}`).toBe(0);
    },
  );

  // Known limitation of every native uWebSockets.js build (README, "Known limitations"): it does
  // not answer a request pipelined behind a HEAD. `it.fails` keeps the check and flags its fix;
  // the node:http implementation (the default) must pass it.
  nativeLimit('HEAD then GET on one keep-alive connection: the GET answer is a well-formed response', async () => {
    const both = Buffer.from('HEAD /healthz HTTP/1.1\r\nhost: x\r\n\r\nGET /healthz HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n');
    const r = await exchange([both], { head: true });
    const afterFirstHead = r.raw.subarray(r.raw.indexOf('\r\n\r\n') + 4).toString('latin1');
    expect(afterFirstHead).toMatch(/^HTTP\/1\.1 200 /);
  });

  // Known limitation of every native build (README): HTTP/1.0 requests are not answered.
  nativeLimit('an HTTP/1.0 request is answered', async () => {
    const r = await exchange([Buffer.from('GET /healthz HTTP/1.0\r\nhost: x\r\n\r\n')]);
    expect(r.outcome, `HTTP/1.0: ${r.outcome} after ${Math.round(r.ms)} ms`).toBe('answered');
    expect(r.status).toBe(200);
  });

  // Known limitation of the trufflesuite build (README): a request head over 4 KiB that arrives
  // in several TCP segments is dropped. The newer builds take it up to their cap (uws.ts).
  olderNativeLimit.each([
    [
      'an 8 KB grep pattern',
      () => requestBytes('GET', `/v1/workspaces/ws/grep?output_mode=count&pattern=${'b'.repeat(8_000)}`, [['authorization', `Bearer ${t.key}`]]),
      [200],
    ],
    ['a 10 KB Authorization header', () => requestBytes('GET', '/v1/workspaces', [['authorization', `Bearer ${'A'.repeat(10_240)}`]]), [401]],
  ] as Array<[string, () => Buffer, number[]]>)(
    'a request head with %s, arriving in 1 KB pieces as from a real network, is answered',
    async (_label, bytes, statuses) => {
      const all = bytes();
      const pieces: Buffer[] = [];
      for (let i = 0; i < all.length; i += 1024) pieces.push(all.subarray(i, i + 1024));
      const r = await exchange(pieces, { pieceDelayMs: 5 });
      expect(r.outcome, `${r.outcome} after ${Math.round(r.ms)} ms`).toBe('answered');
      expect(statuses).toContain(r.status);
    },
  );

  it('Content-Length of 5 GB on an upload: refused at once (413, or closed by the HTTP layer, which takes no body over 4 GiB), nothing stored', async () => {
    const before = await state();
    const r = await exchange([
      Buffer.from(
        `PUT /v1/workspaces/ws/files/huge.bin HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer ${t.key}\r\ncontent-length: 5000000000\r\n\r\nabc`,
      ),
    ]);
    expect(r.outcome).not.toBe('timeout');
    if (r.outcome === 'answered') {
      expect(r.status).toBe(413);
      expect(JSON.parse(r.text).error).toMatch(/limit/);
    }
    expect(await state()).toBe(before);
  });

  // Requests a parser must reject (RFC 9112). Acceptable: a 4xx, or closing the connection, within
  // the bound. Not acceptable: a 2xx (the request was acted on), a 5xx, or waiting. They run side by
  // side (a hang costs the whole bound); the test after them checks that none was acted on.
  const A = () => `connection: close\r\nauthorization: Bearer ${t.key}\r\n`;
  const MALFORMED: Array<[string, () => string]> = [
    ['a lower-case method', () => `get /v1/workspaces HTTP/1.1\r\nhost: x\r\n${A()}\r\n`],
    ['an unknown method', () => `FOO /v1/workspaces HTTP/1.1\r\nhost: x\r\n${A()}\r\n`],
    ['CONNECT', () => `CONNECT example.com:443 HTTP/1.1\r\nhost: example.com\r\n${A()}\r\n`],
    ['a control character in the request line', () => `GET /v1/workspaces/ws/cat?path=a\x01b HTTP/1.1\r\nhost: x\r\n${A()}\r\n`],
    ['a space in the request target', () => `GET /v1/workspaces/ws/cat?path=a b HTTP/1.1\r\nhost: x\r\n${A()}\r\n`],
    ['NUL in a header value', () => `GET /v1/workspaces HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization: Bearer ${t.key}\x00\r\n\r\n`],
    [
      'whitespace between a header name and the colon',
      () => `GET /v1/workspaces HTTP/1.1\r\nhost: x\r\nconnection: close\r\nauthorization : Bearer ${t.key}\r\n\r\n`,
    ],
    ['200 headers', () => `GET /v1/workspaces HTTP/1.1\r\nhost: x\r\n${A()}${Array.from({ length: 200 }, (_, i) => `x-h${i}: v\r\n`).join('')}\r\n`],
    ['no Host header', () => `GET /v1/workspaces HTTP/1.1\r\n${A()}\r\n`],
    ['a negative Content-Length', () => `POST /v1/workspaces HTTP/1.1\r\nhost: x\r\n${A()}content-length: -1\r\n\r\n{"name":"neg-cl"}`],
    ['a non-numeric Content-Length', () => `POST /v1/workspaces HTTP/1.1\r\nhost: x\r\n${A()}content-length: abc\r\n\r\n{"name":"abc-cl"}`],
    [
      'two different Content-Lengths',
      () => `POST /v1/workspaces HTTP/1.1\r\nhost: x\r\n${A()}content-length: 19\r\ncontent-length: 5\r\n\r\n{"name":"dup-cl-x"}`,
    ],
    [
      'Transfer-Encoding and Content-Length',
      () => `POST /v1/workspaces HTTP/1.1\r\nhost: x\r\n${A()}content-length: 4\r\ntransfer-encoding: chunked\r\n\r\n12\r\n{"name":"te-cl-x"}\r\n0\r\n\r\n`,
    ],
    [
      'a malformed chunk size',
      () => `POST /v1/workspaces HTTP/1.1\r\nhost: x\r\n${A()}transfer-encoding: chunked\r\n\r\nzz\r\n{"name":"bad-chunk"}\r\n0\r\n\r\n`,
    ],
  ];
  // Requests a native build may neither answer nor close at once: it closes them at its 10 s idle
  // timeout. Still bounded, and never acted on (README, "Known limitations"). The newer builds
  // answer the first three at once (VERSION_REFUSED below).
  const IDLE_CLOSED = new Set([
    'CONNECT',
    'a control character in the request line',
    'a space in the request target',
    'NUL in a header value',
    'whitespace between a header name and the colon',
    '200 headers',
  ]);
  // Request lines the newer native builds' parser cannot split into method, target and version:
  // it answers them at once with 505 HTTP Version Not Supported (README, "Known limitations").
  const VERSION_REFUSED = new Set(['CONNECT', 'a control character in the request line', 'a space in the request target']);
  it.concurrent.each(MALFORMED)('%s: refused (4xx or closed) within the bound', async (label, request) => {
    const r = await exchange([Buffer.from(request(), 'latin1')], { timeoutMs: IDLE_CLOSED.has(label) ? 15_000 : BOUND_MS });
    expect(r.outcome, `${r.outcome} after ${Math.round(r.ms)} ms; ${r.raw.toString('latin1').slice(0, 80)}`).not.toBe('timeout');
    if (r.outcome === 'answered') {
      expect(r.status, r.text.slice(0, 200)).toBeGreaterThanOrEqual(400);
      if (nativeHttp && !olderNative && VERSION_REFUSED.has(label)) expect(r.status).toBe(505);
      else expect(r.status).toBeLessThan(500);
    }
  });

  it('none of the malformed requests was acted on', async () => {
    const names = (await t.call('GET', '/v1/workspaces')).json.workspaces.map((w: { name: string }) => w.name);
    for (const name of ['neg-cl', 'abc-cl', 'dup-cl-x', 'te-cl-x', 'bad-chunk']) expect(names).not.toContain(name);
  });

  it('the service still answers after all of the above', async () => {
    expect((await send({ method: 'GET', target: '/healthz', auth: null })).text).toBe('ok');
    expect((await send({ method: 'GET', target: '/v1/workspaces/ws/cat?path=a.txt' })).text).toBe('     1\talpha\n     2\tbeta\n');
  });
});
