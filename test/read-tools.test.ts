/**
 * The read tools over HTTP: parameters, errors, pinned tokens, visibility,
 * truncation footers, audit events and cancellation. (Search semantics are
 * checked against ripgrep in the engine tests.)
 */
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { put, settled, startTestService, type TestService } from './helpers/service.js';

let t: TestService;
let token: string;
beforeAll(async () => {
  t = await startTestService({ VFS_READ_THREADS: '1' });
  for (const name of ['docs', 'other']) expect((await t.call('POST', '/v1/workspaces', { body: { name } })).status).toBe(201);
  const files: Record<string, string> = {
    'README.md': '# Project\nSee src/.\n',
    'src/main.ts': 'export function main(): void {\n  console.log("hello");\n}\n',
    'src/util/strings.ts': 'export const greeting = "hello world";\nexport const farewell = "bye";\n',
    'notes/long.txt': Array.from({ length: 3000 }, (_, i) => `line ${i + 1}`).join('\n') + '\n',
  };
  for (const [path, body] of Object.entries(files)) expect((await put(t, 'docs', path, body)).status).toBe(202);
  expect((await put(t, 'other', 'secret.txt', 'other workspace\n')).status).toBe(202);
  await settled(t, 'docs');
  await settled(t, 'other');
  token = (await t.call('POST', '/v1/workspaces/docs/tokens', { body: {} })).json.token;
});
afterAll(async () => t?.stop());

const read = (path: string, key?: string) => t.call('GET', path, { key });

/** Creates workspace `name` with `files` files f0.txt… of `lines` lines `match me <n> yyy…` (`pad` y's), all ready. */
async function matchFiles(svc: TestService, name: string, files: number, lines: number, pad: number): Promise<void> {
  expect((await svc.call('POST', '/v1/workspaces', { body: { name } })).status).toBe(201);
  const body = Array.from({ length: lines }, (_, i) => `match me ${i} ${'y'.repeat(pad)}`).join('\n');
  await Promise.all(Array.from({ length: files }, (_, i) => put(svc, name, `f${i}.txt`, body)));
  await settled(svc, name, 60_000);
}

describe('outputs', () => {
  it('ls lists directories first, then files with their text sizes', async () => {
    const r = await read('/v1/workspaces/docs/ls');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(r.text).toBe('notes/\nsrc/\nREADME.md\t20\n');
  });

  it('find matches globs relative to path', async () => {
    expect((await read('/v1/workspaces/docs/find?pattern=**/*.ts')).text.trim().split('\n').sort()).toEqual(['/src/main.ts', '/src/util/strings.ts']);
    expect((await read('/v1/workspaces/docs/find?pattern=*.ts&path=/src')).text).toBe('/src/main.ts\n');
  });

  it('cat numbers lines like cat -n and footers a cut', async () => {
    expect((await read('/v1/workspaces/docs/cat?path=/src/main.ts&offset=2&limit=1')).text).toMatch(
      /^ {5}2\t {2}console\.log\("hello"\);\n\[.*offset=3.*\]\n$/,
    );
    const long = await read('/v1/workspaces/docs/cat?path=notes/long.txt');
    const lines = long.text.trimEnd().split('\n');
    expect(lines).toHaveLength(2001);
    expect(lines[1999]).toBe('  2000\tline 2000');
    expect(lines[2000]).toMatch(/^\[.*offset=2001/);
  });

  it('grep answers in the three modes', async () => {
    expect((await read('/v1/workspaces/docs/grep?pattern=hello')).text.trim().split('\n').sort()).toEqual(['/src/main.ts', '/src/util/strings.ts']);
    expect((await read('/v1/workspaces/docs/grep?pattern=hello&output_mode=count')).text.trim().split('\n').sort()).toEqual([
      '/src/main.ts:1',
      '/src/util/strings.ts:1',
    ]);
    expect((await read('/v1/workspaces/docs/grep?pattern=HELLO&-i&output_mode=content&path=/src/util')).text).toBe(
      '/src/util/strings.ts:1:export const greeting = "hello world";\n',
    );
    const limited = await read('/v1/workspaces/docs/grep?pattern=line&output_mode=content&head_limit=2');
    expect(limited.text).toMatch(/^\/notes\/long\.txt:1:line 1\n\/notes\/long\.txt:2:line 2\n\[.+\]\n$/);
  });

  it('a missing file or directory is 404 in plain text', async () => {
    const r = await read('/v1/workspaces/docs/cat?path=/nope.txt');
    expect(r.status).toBe(404);
    expect(r.text).toBe('no such file: /nope.txt\n');
    expect((await read('/v1/workspaces/docs/ls?path=/nowhere')).status).toBe(404);
    expect((await read('/v1/workspaces/none/ls')).status).toBe(404);
  });
});

describe('400 for bad parameters, naming them', () => {
  const big = '9007199254740992';
  const cases: Array<[string, string]> = [
    ['find', 'path=/'],
    ['find', 'pattern='],
    ['find', 'pattern=*&head_limit=0'],
    ['find', 'pattern=*&head_limit=1001'],
    ['find', 'pattern=*&head_limit=ten'],
    ['cat', ''],
    ['cat', 'path='],
    ['cat', 'path=/README.md&offset=0'],
    ['cat', 'path=/README.md&offset=-1'],
    ['cat', 'path=/README.md&offset=1.5'],
    ['cat', `path=/README.md&offset=${big}`],
    ['cat', 'path=/README.md&limit=0'],
    ['cat', 'path=/README.md&limit=1e3'],
    ['cat', 'path=/a/../b'],
    ['cat', 'path=/a%00b'],
    ['ls', 'path=/a//b'],
    ['ls', 'depth=2'],
    ['grep', ''],
    ['grep', 'pattern='],
    ['grep', 'pattern=(unclosed'],
    ['grep', 'pattern=(a)\\1'],
    ['grep', 'pattern=(?=look)'],
    ['grep', 'pattern=a&output_mode=lines'],
    ['grep', 'pattern=a&-i=yes'],
    ['grep', 'pattern=a&-A=-1'],
    ['grep', `pattern=a&-B=${big}`],
    ['grep', 'pattern=a&-C=x'],
    ['grep', 'pattern=a&head_limit=0'],
    ['grep', 'pattern=a&offset=-3'],
    ['grep', 'pattern=a&multiline=maybe'],
    ['grep', 'pattern=a&type=cobol'],
    ['grep', 'pattern=a&-n=2'],
    ['grep', 'pattern=a&glob='],
    ['grep', 'pattern=a&pattern=b'],
    ['grep', 'pattern=a&color=always'],
    ['grep', 'pattern=a%5Cnb'],
    ['grep', '-i=true&pattern=%5B%5Cn%5D'],
  ];
  it.each(cases)('%s?%s', async (tool, query) => {
    const r = await read(`/v1/workspaces/docs/${tool}?${query}`);
    expect(r.status).toBe(400);
    expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    const named = query === '' || query === 'path=/' ? (tool === 'cat' ? 'path' : 'pattern') : /^([^=&]+)/.exec(query.split('&').at(-1)!)![1];
    const expectedName = query.startsWith('pattern=a&pattern=b')
      ? 'pattern'
      : query.includes('/a/../b') || query.includes('%00') || query.includes('//')
        ? 'path'
        : named;
    expect(r.text).toContain(expectedName);
  });

  it('refuses a pattern that names the line break outside multiline mode, as ripgrep does, and serves it with multiline', async () => {
    const refused = await read('/v1/workspaces/docs/grep?pattern=a%5Cnb');
    expect(refused.status).toBe(400);
    expect(refused.text).toMatch(/^invalid pattern: .*multiline=true/);
    const multiline = await read('/v1/workspaces/docs/grep?pattern=a%5Cnb&multiline=true');
    expect(multiline.status).toBe(200);
  });

  it.each([
    ['grep', 'pattern=a&-i'],
    ['grep', 'pattern=a&-i=1&-n=false&multiline=0'],
    ['grep', 'pattern=a&-C=9007199254740991'],
    ['grep', 'pattern=a&head_limit=9007199254740991&offset=0'],
    ['grep', 'pattern=a&type=ts&glob=*.ts&output_mode=count'],
    ['cat', 'path=/README.md&offset=9007199254740991'],
    ['find', 'pattern=README.md&head_limit=1000'],
  ])('accepts %s?%s', async (tool, query) => {
    expect((await read(`/v1/workspaces/docs/${tool}?${query}`)).status).toBe(200);
  });
});

describe('scoped tokens', () => {
  it('read their own workspace', async () => {
    expect((await read('/v1/workspaces/docs/ls', token)).status).toBe(200);
  });

  it.each(['ls', 'find?pattern=*', 'cat?path=/secret.txt', 'grep?pattern=other'])('get 404 on another workspace: %s', async (tool) => {
    const r = await read(`/v1/workspaces/other/${tool}`, token);
    expect(r.status).toBe(404);
    expect(r.text).toMatch(/no such workspace/);
  });

  it('get 404 on a workspace of another account, as the management key of another account does', async () => {
    const otherKey = await t.newAccount('stranger');
    expect((await read('/v1/workspaces/docs/ls', otherKey)).status).toBe(404);
  });
});

describe('visibility', () => {
  const files: Record<string, string | null> = {
    'open.txt': null,
    'eng.txt': 'group:eng',
    'ann.txt': 'user:ann',
    'both.txt': 'group:eng,group:ops',
  };
  const tokens: Record<string, string[]> = {
    star: ['*'],
    eng: ['group:eng'],
    ann: ['user:ann'],
    ops: ['group:ops'],
    none: ['group:nobody'],
  };
  const visible: Record<string, string[]> = {
    star: ['ann.txt', 'both.txt', 'eng.txt', 'open.txt'],
    eng: ['both.txt', 'eng.txt', 'open.txt'],
    ann: ['ann.txt', 'open.txt'],
    ops: ['both.txt', 'open.txt'],
    none: ['open.txt'],
  };
  const secrets: Record<string, string> = {};
  beforeAll(async () => {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'vis' } })).status).toBe(201);
    for (const [path, claims] of Object.entries(files)) {
      const query = claims === null ? '' : `?visibility=${claims}`;
      expect((await put(t, 'vis', path, `shared marker in ${path}\n`, {}, query)).status).toBe(202);
    }
    await settled(t, 'vis');
    for (const [name, claims] of Object.entries(tokens)) {
      secrets[name] = (await t.call('POST', '/v1/workspaces/vis/tokens', { body: { claims } })).json.token;
    }
  });

  for (const name of Object.keys(tokens)) {
    it(`token ${name}: ls, find, grep and cat show exactly its files`, async () => {
      const key = secrets[name];
      const expected = visible[name];
      const ls = (await read('/v1/workspaces/vis/ls', key)).text
        .trim()
        .split('\n')
        .map((l) => l.split('\t')[0]);
      expect(ls.sort()).toEqual(expected);
      const find = (await read('/v1/workspaces/vis/find?pattern=*.txt', key)).text.trim().split('\n');
      expect(find.sort()).toEqual(expected.map((p) => '/' + p));
      const grep = (await read('/v1/workspaces/vis/grep?pattern=shared%20marker', key)).text.trim().split('\n');
      expect(grep.sort()).toEqual(expected.map((p) => '/' + p));
      const content = (await read('/v1/workspaces/vis/grep?pattern=marker&output_mode=content', key)).text;
      for (const path of Object.keys(files)) expect(content.includes(`/${path}:`)).toBe(expected.includes(path));
      for (const path of Object.keys(files)) {
        const r = await read(`/v1/workspaces/vis/cat?path=/${path}`, key);
        if (expected.includes(path)) expect(r.status).toBe(200);
        else expect([r.status, r.text]).toEqual([404, `no such file: /${path}\n`]);
      }
    });
  }

  it('the management key sees everything', async () => {
    expect((await read('/v1/workspaces/vis/find?pattern=*')).text.trim().split('\n')).toHaveLength(4);
  });
});

describe('ls truncation', () => {
  it('shows 1000 entries then a footer', async () => {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'wide' } })).status).toBe(201);
    const paths = Array.from({ length: 1003 }, (_, i) => `f${String(i).padStart(4, '0')}.txt`);
    for (let i = 0; i < paths.length; i += 50) {
      await Promise.all(paths.slice(i, i + 50).map((p) => put(t, 'wide', p, 'x\n')));
    }
    await settled(t, 'wide', 60_000);
    const lines = (await read('/v1/workspaces/wide/ls')).text.trimEnd().split('\n');
    expect(lines).toHaveLength(1001);
    expect(lines[999]).toBe('f0999.txt\t2');
    expect(lines[1000]).toMatch(/^\[.*3.*find/);
  });
});

describe('audit', () => {
  it('records one event per call, with the caller, the params and the result', async () => {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'audited' } })).status).toBe(201);
    expect((await put(t, 'audited', 'a.txt', 'alpha\nbeta\n')).status).toBe(202);
    await settled(t, 'audited');
    const minted = (await t.call('POST', '/v1/workspaces/audited/tokens', { body: {} })).json;
    const calls: Array<[string, string | undefined]> = [
      ['/v1/workspaces/audited/ls', undefined],
      ['/v1/workspaces/audited/cat?path=/a.txt&limit=1', minted.token],
      ['/v1/workspaces/audited/grep?pattern=a&output_mode=content', undefined],
      ['/v1/workspaces/audited/find?pattern=', minted.token],
      ['/v1/workspaces/audited/cat?path=/missing', undefined],
    ];
    for (const [path, key] of calls) await read(path, key);
    const events = (await t.call('GET', '/v1/workspaces/audited/audit')).json.events;
    expect(events.map((e: { tool: string }) => e.tool)).toEqual(['ls', 'cat', 'grep', 'find', 'cat']);
    expect(events[0]).toMatchObject({ actorType: 'management_key', params: {}, resultCount: 1 });
    expect(events[1]).toMatchObject({ actorType: 'token', actorId: minted.id, params: { path: '/a.txt', limit: '1' }, resultCount: 1 });
    expect(events[2]).toMatchObject({ params: { pattern: 'a', output_mode: 'content' }, resultCount: 2 });
    expect(events[3]).toMatchObject({ tool: 'find', params: { pattern: '' }, resultCount: null });
    expect(events[4]).toMatchObject({ tool: 'cat', resultCount: null });
    for (const e of events) {
      expect(typeof e.latencyMs).toBe('number');
      expect(JSON.stringify(e)).not.toContain('svc_');
    }
  });

  it('cuts long parameter values at 1024 characters', async () => {
    await read(`/v1/workspaces/audited/grep?pattern=${'x'.repeat(3000)}`);
    const events = (await t.call('GET', '/v1/workspaces/audited/audit?limit=1000')).json.events;
    expect(events.at(-1).params.pattern).toHaveLength(1024);
  });

  it('cuts a long value before a character that straddles the cut, never inside it', async () => {
    // U+1F600 is two UTF-16 units, at 1023 and 1024: half of it would be a lone surrogate, which
    // PostgreSQL's jsonb refuses, failing the whole batch of events.
    const r = await read(`/v1/workspaces/audited/grep?pattern=${encodeURIComponent('x'.repeat(1023) + '\u{1F600}y')}`);
    expect(r.status).toBe(200);
    const events = (await t.call('GET', '/v1/workspaces/audited/audit?limit=1000')).json.events;
    expect(events.at(-1).params.pattern).toBe('x'.repeat(1023));
  });
});

describe('cancellation', () => {
  it('a grep whose client goes away stops, freeing the only read thread', async () => {
    await matchFiles(t, 'big', 40, 4000, 80);
    // About 14 MB of content output; the client reads one chunk and hangs up.
    await new Promise<void>((resolve, reject) => {
      const req = request(`${t.url}/v1/workspaces/big/grep?pattern=match&output_mode=content`, { headers: { authorization: `Bearer ${t.key}` } }, (res) => {
        expect(res.statusCode).toBe(200);
        res.once('data', () => {
          req.destroy();
          resolve();
        });
      });
      req.on('error', (e) => (e.message.includes('socket hang up') || e.message.includes('aborted') ? resolve() : reject(e)));
      req.end();
    });
    // With one read thread, this grep answers only once the abandoned one has stopped.
    const r = await read('/v1/workspaces/big/grep?pattern=match%20me%203999%20&path=/f0.txt&output_mode=count');
    expect([r.status, r.text]).toEqual([200, '/f0.txt:1\n']);
    let events: Array<{ tool: string; resultCount: number | null }> = [];
    for (let i = 0; i < 50; i++) {
      events = (await t.call('GET', '/v1/workspaces/big/audit')).json.events;
      if (events.length >= 2) break;
      await new Promise((res) => setTimeout(res, 50));
    }
    // Two calls, two events: the abandoned one without a result count.
    expect(events.map((e) => [e.tool, e.resultCount]).sort()).toEqual([
      ['grep', null],
      ['grep', 1],
    ]);
  });
});

describe('sorted-mode greps split across threads', () => {
  let split: TestService;
  beforeAll(async () => {
    split = await startTestService({ VFS_READ_THREADS: '2', VFS_GREP_SPLIT_MIN_BYTES: '0' });
  });
  afterAll(async () => split?.stop());

  it('a client that goes away stops every share and the merge', async () => {
    await matchFiles(split, 'big', 40, 4000, 80);
    // Each call is abandoned at a different point: before the split, during the search, during
    // the merge, or after.
    for (const ms of [0, 2, 5, 10, 20, 40]) {
      await new Promise<void>((resolve, reject) => {
        const req = request(
          `${split.url}/v1/workspaces/big/grep?pattern=me%20%5B0-9%5D&output_mode=count`,
          { headers: { authorization: `Bearer ${split.key}` } },
          (res) => {
            res.resume();
            res.on('end', resolve);
          },
        );
        req.on('error', (e) => (e.message.includes('socket hang up') || e.message.includes('aborted') ? resolve() : reject(e)));
        req.end();
        setTimeout(() => {
          req.destroy();
          resolve();
        }, ms);
      });
    }
    // Split searches need both threads: they answer only if no share of the abandoned ones is left waiting.
    for (let i = 0; i < 3; i++) {
      const r = await split.call('GET', '/v1/workspaces/big/grep?pattern=match%20me%203999%20&output_mode=count');
      expect([r.status, r.text.split('\n').length - 1]).toEqual([200, 40]);
    }
  });

  it('many at once all answer (no share waits on a thread another holds)', async () => {
    await matchFiles(split, 'many', 20, 2000, 40);
    const answers = await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        split.call('GET', `/v1/workspaces/many/grep?pattern=me%20${i}&output_mode=${i % 2 === 0 ? 'count' : 'files_with_matches'}`),
      ),
    );
    for (const r of answers) expect([r.status, r.text.split('\n').length - 1]).toEqual([200, 20]);
  }, 30_000);
});

describe('grep split across threads', () => {
  it('answers exactly as a single thread does, with 2 and 3 threads, split or not', async () => {
    // Every content grep without head_limit is split, however small its candidates.
    const t2 = await startTestService({ VFS_READ_THREADS: '2', VFS_GREP_SPLIT_MIN_BYTES: '0' });
    const t3 = await startTestService({ VFS_READ_THREADS: '3', VFS_GREP_SPLIT_MIN_BYTES: '0' });
    // Never split: the lead keeps the whole search, and formats the sorted modes itself.
    const whole = await startTestService({ VFS_READ_THREADS: '2' });
    try {
      const files = Array.from(
        { length: 60 },
        (_, i) => [`d${i % 4}/f${i}.txt`, Array.from({ length: 30 }, (_, j) => `${j % 7 === 0 ? 'ab' : 'x'}${i * j} ${j}`).join('\n') + '\n'] as const,
      );
      for (const svc of [t, t2, t3, whole]) {
        expect((await svc.call('POST', '/v1/workspaces', { body: { name: 'scan' } })).status).toBe(201);
        await Promise.all(files.map(([path, body]) => put(svc, 'scan', path, body)));
        await settled(svc, 'scan');
      }
      for (const query of [
        'pattern=[0-9]{3}',
        'pattern=[0-9]{3}&output_mode=count',
        'pattern=[0-9]{3}&output_mode=content&-C=1',
        'pattern=\\w\\d\\d&output_mode=content&head_limit=50&offset=7',
        'pattern=.b&path=/d2&output_mode=count',
        'pattern=ab1',
        'pattern=ab2|x3&output_mode=count',
        'pattern=ab&output_mode=content',
        // Content full scans split into path ranges: context across the ranges' edges, ranges
        // that print nothing (glob, path), no line numbers.
        'pattern=[0-9]{3}&output_mode=content&-B=2',
        'pattern=[0-9]{4}&output_mode=content&-A=1&glob=d3/**',
        'pattern=[0-9]{4}&output_mode=content&-C=1&glob=d0/**',
        'pattern=\\d 2[89]$&output_mode=content&-C=1&path=/d1',
        'pattern=x\\d&output_mode=content&-n=false',
      ]) {
        const one = await t.call('GET', `/v1/workspaces/scan/grep?${query}`);
        expect(one.status).toBe(200);
        expect(one.text.length).toBeGreaterThan(0);
        for (const svc of [t2, t3, whole]) {
          const many = await svc.call('GET', `/v1/workspaces/scan/grep?${query}`);
          expect([query, many.status, many.text]).toEqual([query, 200, one.text]);
        }
      }
    } finally {
      await t2.stop();
      await t3.stop();
      await whole.stop();
    }
  });
});
