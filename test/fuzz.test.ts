/**
 * Property-based fuzzing of every endpoint (issue "Trust"), with fast-check:
 * random paths (unicode, percent-encoding, invalid UTF-8, traversal pieces),
 * random query parameters, random JSON and non-JSON bodies, random methods on
 * known paths, sent byte for byte (node:net) by two accounts' management keys
 * and scoped tokens. Properties, for every request:
 *
 * - it is answered within BOUND_MS, and never with a 5xx;
 * - error bodies have the documented shape (JSON `{ error }` on management
 *   routes, plain text on read tools);
 * - nothing of the other account is in it: each account's files carry a
 *   marker (ACCOUNT_A_SECRET / ACCOUNT_B_SECRET) in their text and in a path,
 *   requests never contain a marker (patterns that would match one are written
 *   so that they do not), so a marker in an answer to the other account is a
 *   read outside the caller's workspace.
 *
 * Mutating requests never aim at the caller's own data workspaces, so the
 * markers stay in place for the whole run; the last test checks that they did
 * and that both accounts still read exactly their own files.
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { settled, startTestService, type TestService } from './helpers/service.js';
import { exchange, type Wire } from './helpers/wire.js';

const BOUND_MS = 5_000;
/** Each property stops generating new runs after this long (a slow machine does fewer, never a longer test). */
const PROPERTY_TIME_MS = 12_000;

let t: TestService;

/** One account and its credentials. */
interface Tenant {
  label: 'a' | 'b';
  key: string;
  marker: string;
  /** Its own data workspace (the other account has none of that name). */
  own: string;
  /** A workspace fuzzed with mutating requests. */
  scratch: string;
  /** Tokens pinned to `common` and to `own`. */
  tokens: Array<{ id: string; token: string }>;
  /** Exact `cat` output of its marker files, by workspace and path. */
  expected: Array<[string, string, string]>;
}
let A: Tenant;
let B: Tenant;
const other = (x: Tenant) => (x === A ? B : A);

// ---------------------------------------------------------------------------
// Raw HTTP
// ---------------------------------------------------------------------------

/** A request as generated. */
interface Req {
  method: string;
  target: string;
  credential: string | null;
  contentType?: string;
  body?: Buffer;
}

function send(r: Req): Promise<Wire> {
  const lines = [`${r.method} ${r.target} HTTP/1.1`, 'host: 127.0.0.1', 'connection: close'];
  if (r.credential !== null) lines.push(`authorization: Bearer ${r.credential}`);
  if (r.contentType !== undefined) lines.push(`content-type: ${r.contentType}`);
  if (r.body !== undefined) lines.push(`content-length: ${r.body.length}`);
  const head = Buffer.from(lines.join('\r\n') + '\r\n\r\n', 'latin1');
  return exchange(t.service.port, [r.body === undefined ? head : Buffer.concat([head, r.body])], { timeoutMs: BOUND_MS, head: r.method === 'HEAD' });
}

/** Percent-encodes every byte outside the unreserved set: any string (lone surrogates too) becomes a well-formed request-target piece. */
function enc(s: string): string {
  let out = '';
  for (const byte of Buffer.from(s, 'utf8')) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9\-._~]/.test(c) ? c : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

/** Percent-encodes raw bytes (so invalid UTF-8 reaches the service). */
const encBytes = (bytes: Uint8Array) => [...bytes].map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`).join('');

/** The checks every answer must pass; `caller` is whose credential was used (null: none or garbage). */
function checkAnswer(r: Wire, req: Req, caller: Tenant | null, kind: 'json' | 'text' | 'any'): void {
  const label = `${req.method} ${req.target.slice(0, 300)}`;
  expect(r.outcome, `${label}: ${r.outcome} after ${Math.round(r.ms)} ms`).toBe('answered');
  expect(r.status, `${label}: ${r.status} ${r.text.slice(0, 300)}`).toBeLessThan(500);
  for (const x of [A, B]) {
    if (x === caller) continue;
    expect(r.raw.includes(x.marker) || r.raw.includes(x.marker.toLowerCase()), `${label}: answer carries ${x.marker}: ${r.text.slice(0, 300)}`).toBe(false);
  }
  if (r.status >= 400 && kind === 'json') {
    expect(r.headers['content-type'], label).toBe('application/json');
    const parsed = JSON.parse(r.text) as Record<string, unknown>;
    expect(Object.keys(parsed), label).toEqual(['error']);
    expect(typeof parsed.error).toBe('string');
  }
  if (r.status >= 400 && kind === 'text') {
    expect(r.headers['content-type'], label).toBe('text/plain; charset=utf-8');
    expect(r.text.length, label).toBeGreaterThan(0);
  }
}

// ---------------------------------------------------------------------------
// Arbitraries
// ---------------------------------------------------------------------------

/** Pieces that mean something to a path or a parser. */
const TRICKY = [
  '..',
  '.',
  '%2e%2e',
  '%2E%2e',
  '%2e',
  '%00',
  '%FF',
  '%C0%AE',
  '%C0%AE%C0%AE',
  '%E0%80%AE',
  '%ED%A0%80',
  '%EF%BC%8E%EF%BC%8E',
  '%E2%80%A5',
  '%5C',
  '%2F',
  '%252e%252e',
  '%',
  '%zz',
  '%%',
  '~',
  '*',
  '**',
  '%0A',
  '%0D%0A',
  '%09',
  '%7F',
];

/** Random text: unicode graphemes, arbitrary code points (encoded as UTF-8), raw bytes, or tricky pieces. */
const piece: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit: 'grapheme', maxLength: 16 }).map(enc) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 8 }).map(enc) },
  { weight: 2, arbitrary: fc.uint8Array({ maxLength: 10 }).map(encBytes) },
  { weight: 3, arbitrary: fc.constantFrom(...TRICKY) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme-ascii', maxLength: 300 }).map(enc) },
);

/** A file path: segments of pieces and names, sometimes with a leading slash. */
const filePath: fc.Arbitrary<string> = fc.oneof(
  fc
    .tuple(fc.boolean(), fc.array(fc.oneof(piece, fc.constantFrom('secret.txt', 'dir', 'private.txt', 'common', 'readme.txt')), { minLength: 1, maxLength: 5 }))
    .map(([slash, segments]) => (slash ? '/' : '') + segments.join('/')),
  fc.constantFrom('notes.txt', 'a/b/c.md', 'dir/x.txt', enc('ünïcödé/ファイル.txt'), enc('．．/x.txt'), '%2Fetc%2Fpasswd'),
);

/** Integers and numbers in every shape. */
const numberish: fc.Arbitrary<string> = fc.oneof(
  fc.integer({ min: -5, max: 3000 }).map(String),
  fc.constantFrom(
    '0',
    '1',
    '1000',
    '1001',
    '9007199254740991',
    '9007199254740992',
    '1e3',
    '0x10',
    '%2B1',
    '%201',
    '1.5',
    '-0',
    '',
    'NaN',
    'Infinity',
    '%EF%BC%91',
  ),
  fc.double().map((d) => enc(String(d))),
  fc.bigInt().map(String),
);

/**
 * Regexes and globs: some would match a marker if a foreign file were visible, but none contains one.
 * (`ACCOUNT_._SECRET` matches both markers; content output would show the full line.)
 */
const patternish: fc.Arbitrary<string> = fc.oneof(
  fc
    .constantFrom(
      'ACCOUNT_._SECRET',
      'SECRET',
      '(?i)account_.',
      'CCOUNT',
      '.',
      '.*',
      '^',
      '$',
      '(a*)*b',
      '(a|a)*b',
      'a{1000}{1000}',
      '(?=x)',
      '(a)\\1',
      '[',
      '\\',
      '**',
      '*',
      '**/*secret*',
      '**/*',
      '{a,b}',
      '[!a]',
      '**/../**',
      '/**',
      '!(x)',
    )
    .map(enc),
  piece,
  fc.string({ unit: 'grapheme', maxLength: 40 }).map(enc),
);

const QUERY_NAMES = [
  'path',
  'pattern',
  'glob',
  'output_mode',
  '-i',
  '-A',
  '-B',
  '-C',
  'head_limit',
  'offset',
  'limit',
  'cursor',
  'status',
  'after',
  'visibility',
  'multiline',
  'type',
  '-n',
];

/** A query string of random parameters, known names mostly, values of every kind. */
const query: fc.Arbitrary<string> = fc
  .array(
    fc.tuple(
      fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...QUERY_NAMES) }, { weight: 1, arbitrary: piece }),
      fc.oneof(
        numberish,
        patternish,
        filePath,
        fc.constantFrom(
          'content',
          'count',
          'files_with_matches',
          'true',
          'false',
          'ready',
          'pending',
          'error',
          'user:a',
          'group:eng',
          '*',
          'ts',
          'md',
          '2026-01-01T00:00:00Z',
        ),
      ),
      fc.boolean(),
    ),
    { maxLength: 6 },
  )
  .map((pairs) => pairs.map(([k, v, bare]) => (bare && v === '' ? k : `${k}=${v}`)).join('&'));

/** No query half of the time, so that requests also get past parameter validation. */
const maybeQuery: fc.Arbitrary<string> = fc.oneof(fc.constant(''), query);

/**
 * JSON-ish bodies: valid JSON of any shape, objects near the real schemas (written out by hand, so
 * that keys may repeat and `__proto__` is a plain key), and bytes that are not JSON. Workspace names
 * never name a data workspace of either account, which must keep its meaning for the whole run.
 */
const member: fc.Arbitrary<string> = fc.oneof(
  fc
    .oneof(
      fc.string({ unit: 'grapheme', maxLength: 70 }).filter((n) => !['alpha', 'beta', 'common'].includes(n)),
      fc.constantFrom('fuzz-ws', '..', 'A', 'scratch-a'),
      fc.jsonValue(),
    )
    .map((v) => `"name":${JSON.stringify(v)}`),
  fc
    .oneof(fc.array(fc.oneof(fc.constantFrom('*', 'user:a', 'group:b', 'user:', ''), fc.string()), { maxLength: 70 }), fc.jsonValue())
    .map((v) => `"claims":${JSON.stringify(v)}`),
  fc
    .oneof(fc.integer({ min: -100, max: 100_000 }), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.jsonValue())
    .map((v) => `"ttlSeconds":${JSON.stringify(v)}`),
  fc.tuple(fc.constantFrom('__proto__', 'constructor', 'prototype', 'extra', ''), fc.jsonValue()).map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v)}`),
);
const body: fc.Arbitrary<Buffer | undefined> = fc.oneof(
  fc.constant(undefined),
  fc.json({ maxDepth: 3 }).map((s) => Buffer.from(s)),
  fc.array(member, { maxLength: 4 }).map((members) => Buffer.from(`{${members.join(',')}}`)),
  fc.uint8Array({ maxLength: 200 }).map((b) => Buffer.from(b)),
  fc.constantFrom('{', '[[[[', '{"name":', '\ufeff{}', 'null', '"x"', '{"name":"a","name":"b"}').map((s) => Buffer.from(s)),
  fc.integer({ min: 1, max: 3000 }).map((n) => Buffer.from('['.repeat(n) + ']'.repeat(n))),
);

/** Who calls: a tenant with its key or one of its tokens, or someone with a bad or no credential. */
type Caller = { tenant: Tenant | null; credential: string | null };
const tenant = fc.constantFrom<'a' | 'b'>('a', 'b').map((l) => (l === 'a' ? A : B));
/** Callers, weighted between management keys, scoped tokens and bad credentials. */
const callerWeighted = (keys: number, tokens: number): fc.Arbitrary<Caller> =>
  fc.oneof(
    { weight: keys, arbitrary: tenant.map((x): Caller => ({ tenant: x, credential: x.key })) },
    { weight: tokens, arbitrary: fc.tuple(tenant, fc.constantFrom(0, 1)).map(([x, i]): Caller => ({ tenant: x, credential: x.tokens[i].token })) },
    {
      weight: 1,
      arbitrary: fc.constantFrom<Caller>(
        { tenant: null, credential: null },
        { tenant: null, credential: 'svc_sk_' + 'A'.repeat(49) },
        { tenant: null, credential: 'junk' },
      ),
    },
  );
const caller = callerWeighted(4, 4);

/**
 * Workspace names for a request by `x`: for reads anything; for mutating
 * requests never `x`'s own data workspaces (common, own), so that the markers
 * stay where they are.
 */
const workspaceFor = (x: Tenant | null, mutating: boolean): fc.Arbitrary<string> => {
  const names = ['common', 'alpha', 'beta', 'scratch-a', 'scratch-b', 'nowhere'];
  const safe = names.filter((n) => !mutating || x === null || (n !== 'common' && n !== x.own));
  const usable = x === null ? 'common' : mutating ? x.scratch : x.own;
  return fc.oneof(
    { weight: 3, arbitrary: fc.constant(usable) },
    { weight: 4, arbitrary: fc.constantFrom(...safe) },
    { weight: 1, arbitrary: piece.filter((p) => !names.includes(p)) },
  );
};

// ---------------------------------------------------------------------------
// Setup
// ---------------------------------------------------------------------------

beforeAll(async () => {
  t = await startTestService({ VFS_AUTH_FAILURES: '1000000', VFS_MANAGEMENT_RATE: '1000000', VFS_GREP_TIMEOUT_SECONDS: '2' });
  const make = async (label: 'a' | 'b', key: string): Promise<Tenant> => {
    const marker = `ACCOUNT_${label.toUpperCase()}_SECRET`;
    const own = label === 'a' ? 'alpha' : 'beta';
    const scratch = `scratch-${label}`;
    for (const name of ['common', own, scratch]) expect((await t.call('POST', '/v1/workspaces', { key, body: { name } })).status).toBe(201);
    const files: Array<[string, string, string]> = [
      ['common', `/secret.txt`, `${marker}\nshared name, ${label} content\n`],
      ['common', `/dir/${marker.toLowerCase()}.md`, `# ${marker}\n`],
      ['common', '/readme.txt', `aaaa ${'a'.repeat(200)} ${marker}\n`],
      [own, '/private.txt', `${marker} only in ${own}\n`],
      [own, `/${marker.toLowerCase()}/deep/file.txt`, `${marker} deep\n`],
    ];
    for (const [ws, path, text] of files) expect((await t.call('PUT', `/v1/workspaces/${ws}/files${path}`, { key, body: text })).status).toBe(202);
    await settled(t, 'common', 30_000, key);
    await settled(t, own, 30_000, key);
    const tokens: Array<{ id: string; token: string }> = [];
    for (const ws of ['common', own]) {
      const r = await t.call('POST', `/v1/workspaces/${ws}/tokens`, { key, body: {} });
      tokens.push({ id: r.json.id, token: r.json.token });
    }
    const expected = files.map(([ws, path, text]): [string, string, string] => [
      ws,
      path,
      text
        .split('\n')
        .slice(0, -1)
        .map((line, i) => `${String(i + 1).padStart(6)}\t${line}\n`)
        .join(''),
    ]);
    return { label, key, marker, own, scratch, tokens, expected };
  };
  A = await make('a', t.key);
  B = await make('b', await t.newAccount('fuzz-b'));
});
afterAll(async () => t?.stop());

const params = <T>(numRuns: number): fc.Parameters<T> => ({ numRuns, interruptAfterTimeLimit: PROPERTY_TIME_MS, markInterruptAsFailure: false });

// ---------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------

describe('fuzz', () => {
  it('read tools with random parameters: no 5xx, bounded, plain-text errors, nothing of the other account', async () => {
    const tools = fc.oneof({ weight: 6, arbitrary: fc.constantFrom('ls', 'find', 'cat', 'grep') }, { weight: 1, arbitrary: piece });
    const where = fc.constantFrom<'common' | 'own' | 'foreign'>('common', 'own', 'foreign');
    await fc.assert(
      fc.asyncProperty(caller, tools, maybeQuery, where, async (who, tool, q, place) => {
        const ws = who.tenant === null || place === 'common' ? 'common' : place === 'own' ? who.tenant.own : other(who.tenant).own;
        const req: Req = { method: 'GET', target: `/v1/workspaces/${ws}/${tool}${q === '' ? '' : `?${q}`}`, credential: who.credential };
        const r = await send(req);
        const known = ['ls', 'find', 'cat', 'grep'].includes(tool);
        checkAnswer(r, req, who.tenant, known ? 'text' : 'json');
        if (known && who.tenant !== null && ws === other(who.tenant).own) expect(r.status, req.target).toBe(404);
      }),
      params(150),
    );
  });

  it("read tools with patterns that would match the other account's marker: they only ever find the caller's own", async () => {
    await fc.assert(
      fc.asyncProperty(
        caller.filter((c) => c.tenant !== null),
        fc.constantFrom('common', 'alpha', 'beta'),
        patternish,
        fc.constantFrom('content', 'count', 'files_with_matches'),
        async (who, ws, pattern, mode) => {
          for (const target of [
            `/v1/workspaces/${ws}/grep?pattern=${pattern}&output_mode=${mode}&-i`,
            `/v1/workspaces/${ws}/find?pattern=${pattern}`,
            `/v1/workspaces/${ws}/ls?path=${pattern}`,
          ]) {
            const req: Req = { method: 'GET', target, credential: who.credential };
            checkAnswer(await send(req), req, who.tenant, 'text');
          }
        },
      ),
      params(50),
    );
  });

  it('management routes with random queries and bodies: no 5xx, bounded, JSON errors, nothing of the other account', async () => {
    const route = fc.constantFrom(
      ['GET', '/v1/workspaces'],
      ['POST', '/v1/workspaces'],
      ['GET', '/v1/workspaces/{ws}/files'],
      ['GET', '/v1/workspaces/{ws}/audit'],
      ['POST', '/v1/workspaces/{ws}/tokens'],
      ['PUT', '/v1/workspaces/{ws}/files/{path}'],
      ['DELETE', '/v1/workspaces/{ws}/files/{path}'],
      ['DELETE', '/v1/workspaces/{ws}'],
      ['DELETE', '/v1/tokens/{id}'],
    );
    const contentType = fc.option(
      fc.constantFrom('application/json', 'text/plain', 'application/pdf', 'application/octet-stream', 'multipart/form-data', 'x/\u00ff', ''),
      { nil: undefined },
    );
    // The workspace is drawn after the caller and the method, so that mutating requests keep off the caller's data.
    const routed = fc
      .tuple(callerWeighted(6, 2), route)
      .chain(([who, r]) => fc.tuple(fc.constant(who), fc.constant(r), workspaceFor(who.tenant, r[0] !== 'GET')));
    await fc.assert(
      fc.asyncProperty(routed, maybeQuery, body, contentType, fc.nat(1_000), filePath, async ([who, [method, pattern], ws], q, payload, type, pick, path) => {
        // Token ids to revoke: the other account's, random uuids, garbage; never the caller's own.
        const foreignIds = who.tenant === null ? [...A.tokens, ...B.tokens].map((x) => x.id) : other(who.tenant).tokens.map((x) => x.id);
        const ids = [...foreignIds, '00000000-0000-4000-8000-000000000000', 'not-a-uuid', enc(path)];
        const target =
          pattern
            .replace('{ws}', ws)
            .replace('{path}', path.replace(/^\//, ''))
            .replace('{id}', ids[pick % ids.length]) + (q === '' ? '' : `?${q}`);
        const req: Req = { method, target, credential: who.credential, contentType: type, body: method === 'GET' || method === 'DELETE' ? undefined : payload };
        checkAnswer(await send(req), req, who.tenant, 'json');
      }),
      params(150),
    );
  });

  it('random paths and methods: no 5xx, bounded, nothing of the other account', async () => {
    const method = fc.constantFrom('GET', 'GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS');
    const segment = (mutating: boolean) =>
      fc.oneof(
        {
          weight: 3,
          arbitrary: fc.constantFrom('v1', 'workspaces', 'files', 'tokens', 'audit', 'ls', 'find', 'cat', 'grep', 'healthz', 'readyz', 'secret.txt'),
        },
        { weight: 2, arbitrary: mutating ? fc.constantFrom('scratch-a', 'scratch-b', 'nowhere') : fc.constantFrom('common', 'alpha', 'beta') },
        { weight: 3, arbitrary: piece },
      );
    const req = method.chain((m) =>
      fc.record({
        method: fc.constant(m),
        prefix: fc.constantFrom('/v1/workspaces/', '/v1/', '/', '/v1/tokens/'),
        segments: fc.array(segment(m !== 'GET'), { maxLength: 6 }),
        q: maybeQuery,
        payload: body,
        who: caller,
      }),
    );
    await fc.assert(
      fc.asyncProperty(req, async ({ method: m, prefix, segments, q, payload, who }) => {
        // A mutating request with a tenant's credential never names that tenant's own data workspaces.
        fc.pre(m === 'GET' || who.tenant === null || !segments.some((s) => s === 'common' || s === who.tenant!.own));
        const r: Req = {
          method: m,
          target: `${prefix}${segments.join('/')}${q === '' ? '' : `?${q}`}`,
          credential: who.credential,
          body: m === 'GET' ? undefined : payload,
        };
        checkAnswer(await send(r), r, who.tenant, 'any');
      }),
      params(120),
    );
  });

  it('HEAD on known paths: answered without a body, as HTTP requires', async () => {
    const target = fc.constantFrom(
      '/healthz',
      '/readyz',
      '/v1/workspaces',
      '/v1/workspaces/common/files',
      '/v1/workspaces/common/ls',
      '/v1/workspaces/common/cat?path=/secret.txt',
    );
    await fc.assert(
      fc.asyncProperty(caller, target, async (who, path) => {
        const req: Req = { method: 'HEAD', target: path, credential: who.credential };
        const r = await send(req);
        expect(r.outcome).toBe('answered');
        expect(r.status).toBeLessThan(500);
        expect(r.bodyBytes, `HEAD ${path} answered ${r.status} with a body: ${r.text.slice(0, 100)}`).toBe(0);
      }),
      params(30),
    );
  });

  it('afterwards each account reads exactly its own files, with its key and its tokens', async () => {
    for (const x of [A, B]) {
      for (const [ws, path, expected] of x.expected) {
        const credentials = [x.key, x.tokens[ws === 'common' ? 0 : 1].token];
        for (const credential of credentials) {
          const r = await t.call('GET', `/v1/workspaces/${ws}/cat?path=${encodeURIComponent(path)}`, { key: credential });
          expect([r.status, r.text]).toEqual([200, expected]);
        }
      }
      const grep = await t.call('GET', '/v1/workspaces/common/grep?pattern=ACCOUNT_._SECRET&output_mode=content', { key: x.key });
      expect(grep.text).toContain(x.marker);
      expect(grep.text).not.toContain(other(x).marker);
    }
  });
});
