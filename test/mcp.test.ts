/**
 * The MCP endpoint with the official client, on both protocol generations: tools and their
 * schemas, answers equal to the HTTP tools', errors, the cap, resources, token pinning,
 * visibility, rate limits and audit; then the raw HTTP contract.
 */
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setAccountLimits } from '../db/accounts.js';
import { put, settled, startTestService, type TestService } from './helpers/service.js';

let t: TestService;
let token: string;
const MAX_CHARS = 8192;

beforeAll(async () => {
  t = await startTestService({ VFS_READ_THREADS: '1', VFS_MCP_MAX_CHARS: String(MAX_CHARS), VFS_MCP_ALLOWED_ORIGINS: 'https://app.example.com' });
  for (const name of ['docs', 'other']) expect((await t.call('POST', '/v1/workspaces', { body: { name } })).status).toBe(201);
  const files: Record<string, string> = {
    'README.md': '# Project\nSee src/.\n',
    'src/main.ts': 'export function main(): void {\n  console.log("hello");\n}\n',
    'src/util/strings.ts': 'export const greeting = "hello world";\nexport const farewell = "bye";\n',
    'notes/long.txt': Array.from({ length: 3000 }, (_, i) => `line ${i + 1} of the long notes`).join('\n') + '\n',
    'notes/caf\u00e9 menu.txt': 'Caf\u00e9 au lait\nth\u00e9 vert\n',
  };
  for (const [path, body] of Object.entries(files)) expect((await put(t, 'docs', path, body)).status).toBe(202);
  expect((await put(t, 'docs', 'secret/eng.txt', 'hello from engineering\n', {}, '?visibility=group:eng')).status).toBe(202);
  expect((await put(t, 'other', 'secret.txt', 'other workspace\n')).status).toBe(202);
  await settled(t, 'docs');
  await settled(t, 'other');
  token = (await t.call('POST', '/v1/workspaces/docs/tokens', { body: { claims: ['group:ops'] } })).json.token;
});
afterAll(async () => t?.stop());

type Era = 'legacy' | 'modern';
const ERAS: Era[] = ['legacy', 'modern'];

/** A connected official client on one generation of the protocol. */
async function connect(era: Era, ws = 'docs', key: string = t.key, protocolVersion?: string): Promise<Client> {
  const client = new Client(
    { name: 'vfs-test', version: '1.0.0' },
    era === 'modern'
      ? { versionNegotiation: { mode: { pin: '2026-07-28' } } }
      : protocolVersion === undefined
        ? {}
        : { supportedProtocolVersions: [protocolVersion] },
  );
  const transport = new StreamableHTTPClientTransport(new URL(`${t.url}/v1/workspaces/${ws}/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${key}` } },
  });
  await client.connect(transport);
  return client;
}

/** The text of a tool call's one text block, and its error flag. */
async function callText(client: Client, name: string, args: Record<string, unknown>): Promise<{ text: string; isError: boolean }> {
  const result = (await client.callTool({ name, arguments: args })) as { content: Array<{ type: string; text: string }>; isError?: boolean };
  expect(result.content).toHaveLength(1);
  expect(result.content[0].type).toBe('text');
  return { text: result.content[0].text, isError: result.isError === true };
}

/** The HTTP tool's answer for the same arguments. */
async function httpText(tool: string, args: Record<string, unknown>, key?: string): Promise<{ status: number; text: string }> {
  const query = new URLSearchParams(Object.entries(args).map(([k, v]): [string, string] => [k, String(v)])).toString();
  const r = await t.call('GET', `/v1/workspaces/docs/${tool}${query === '' ? '' : '?' + query}`, { key });
  return { status: r.status, text: r.text };
}

/** Arguments each tool is called with, answered as the HTTP tool answers them. */
const TABLE: Array<[string, Record<string, unknown>]> = [
  ['ls', {}],
  ['ls', { path: '/src' }],
  ['ls', { path: '/notes' }],
  ['find', { pattern: '**/*.ts' }],
  ['find', { pattern: '*.ts', path: '/src', head_limit: 1 }],
  ['cat', { path: '/src/main.ts' }],
  ['cat', { path: 'src/main.ts', offset: 2, limit: 1 }],
  ['cat', { path: '/notes/caf\u00e9 menu.txt' }],
  ['cat', { path: '/notes/long.txt', offset: 2990 }],
  ['cat', { path: '/README.md', offset: 40 }],
  ['grep', { pattern: 'hello' }],
  ['grep', { pattern: 'hello', output_mode: 'content' }],
  ['grep', { pattern: 'HELLO', '-i': true, output_mode: 'count' }],
  ['grep', { pattern: 'export', output_mode: 'content', '-C': 1, '-n': false }],
  ['grep', { pattern: 'line \\d+0 of', output_mode: 'content', head_limit: 5, offset: 3 }],
  ['grep', { pattern: 'e', glob: '*.ts', output_mode: 'files_with_matches', head_limit: 1 }],
  ['grep', { pattern: 'main\\(\\)', type: 'ts', output_mode: 'content', '-A': 1 }],
  ['grep', { pattern: 'void \\{\\n\\s+console', multiline: true, output_mode: 'content' }],
  ['grep', { pattern: 'caf\u00e9', '-i': true, output_mode: 'content' }],
];

/** Calls answered with an error, as the HTTP tool answers them. */
const ERRORS: Array<[string, Record<string, unknown>]> = [
  ['grep', { pattern: 'a(b' }],
  ['grep', { pattern: 'a\\nb' }],
  ['grep', { pattern: 'x', output_mode: 'lines' }],
  ['grep', { pattern: 'x', head_limit: 0 }],
  ['grep', { pattern: 'x', head_limit: 1.5 }],
  ['grep', { pattern: 'x', '-i': 'maybe' }],
  ['grep', { pattern: 'x', path: '/nowhere' }],
  ['grep', { pattern: 'x', colour: true }],
  ['grep', {}],
  ['find', { pattern: '' }],
  ['find', { pattern: '*', head_limit: 1001 }],
  ['cat', { path: '/missing.txt' }],
  ['cat', { path: '/README.md', offset: 0 }],
  ['ls', { path: '/nowhere' }],
];

for (const era of ERAS) {
  describe(`${era} protocol`, () => {
    let client: Client;
    let scoped: Client;
    beforeAll(async () => {
      client = await connect(era);
      scoped = await connect(era, 'docs', token);
    });
    afterAll(async () => {
      await client?.close();
      await scoped?.close();
    });

    it('speaks its generation and gives instructions that say how the tools fit together', () => {
      expect(client.getNegotiatedProtocolVersion()).toBe(era === 'legacy' ? '2025-11-25' : '2026-07-28');
      const text = client.getInstructions() ?? '';
      expect(text).toContain('Workspace "docs"');
      expect(text).toMatch(/grep/);
      expect(text).toMatch(/cat .*offset/);
      expect(text.length).toBeLessThan(2048);
    });

    it('lists the four tools with strict schemas, described parameters and read-only annotations', async () => {
      const { tools } = await client.listTools();
      expect(tools.map((tool) => tool.name)).toEqual(['grep', 'find', 'cat', 'ls']);
      for (const tool of tools) {
        expect(tool.annotations).toMatchObject({ readOnlyHint: true, destructiveHint: false, idempotentHint: true, openWorldHint: false });
        expect(tool.inputSchema.additionalProperties).toBe(false);
        expect(tool.description!.length).toBeGreaterThan(40);
        for (const [name, property] of Object.entries(tool.inputSchema.properties ?? {})) {
          expect((property as { description?: string }).description, `${tool.name}.${name}`).toMatch(/\w{3}/);
        }
      }
      const grep = tools.find((tool) => tool.name === 'grep')!;
      expect(Object.keys(grep.inputSchema.properties!).sort()).toEqual(
        ['-A', '-B', '-C', '-i', '-n', 'glob', 'head_limit', 'multiline', 'offset', 'output_mode', 'path', 'pattern', 'type'].sort(),
      );
      expect(grep.inputSchema.required).toEqual(['pattern']);
      expect(tools.find((tool) => tool.name === 'cat')!.inputSchema.properties!.offset).toMatchObject({ type: 'integer', minimum: 1 });
    });

    it('answers each call with exactly the HTTP tool text, footers included', async () => {
      for (const [tool, args] of TABLE) {
        const http = await httpText(tool, args);
        expect(http.status, `${tool} ${JSON.stringify(args)}`).toBe(200);
        expect(await callText(client, tool, args), `${tool} ${JSON.stringify(args)}`).toEqual({ text: http.text, isError: false });
      }
    });

    it('answers bad arguments, patterns, globs and missing files with an error result and the HTTP message', async () => {
      for (const [tool, args] of ERRORS) {
        const http = await httpText(tool, args);
        expect(http.status, `${tool} ${JSON.stringify(args)}`).toBeGreaterThanOrEqual(400);
        expect(await callText(client, tool, args), `${tool} ${JSON.stringify(args)}`).toEqual({ text: http.text.trimEnd(), isError: true });
      }
      const unknown = await callText(client, 'grep', { pattern: 'x', colour: true });
      expect(unknown.text).toContain('colour');
    });

    it('refuses an unknown tool with a protocol error', async () => {
      await expect(client.callTool({ name: 'rm', arguments: {} })).rejects.toThrow(/unknown tool: rm/);
    });

    it('applies the token visibility inside every tool', async () => {
      expect((await callText(scoped, 'find', { pattern: '**/*.txt' })).text).not.toContain('eng.txt');
      expect((await callText(scoped, 'grep', { pattern: 'engineering' })).text).toBe((await httpText('grep', { pattern: 'engineering' }, token)).text);
      expect(await callText(scoped, 'cat', { path: '/secret/eng.txt' })).toEqual({ text: 'no such file: /secret/eng.txt', isError: true });
      expect((await callText(client, 'cat', { path: '/secret/eng.txt' })).text).toContain('hello from engineering');
    });

    it('caps a long result at a line boundary with a footer whose call goes on exactly', async () => {
      const first = await callText(client, 'grep', { pattern: 'long notes', output_mode: 'content' });
      expect(first.text.length).toBeLessThanOrEqual(MAX_CHARS);
      const lines = first.text.trimEnd().split('\n');
      const footer = lines.pop()!;
      expect(footer).toMatch(/^\[output cut at the 8192-character limit after (\d+) entries; continue with offset=\1\]$/);
      const shown = Number(/offset=(\d+)/.exec(footer)![1]);
      expect(lines).toHaveLength(shown);
      const all = (await httpText('grep', { pattern: 'long notes', output_mode: 'content' })).text.split('\n');
      expect(lines).toEqual(all.slice(0, shown));
      const next = await callText(client, 'grep', { pattern: 'long notes', output_mode: 'content', offset: shown, head_limit: 3 });
      expect(next.text).toBe((await httpText('grep', { pattern: 'long notes', output_mode: 'content', offset: shown, head_limit: 3 })).text);

      const paged = (await callText(client, 'grep', { pattern: 'long notes', output_mode: 'content', offset: 10, head_limit: '2000' })).text
        .trimEnd()
        .split('\n');
      const pagedShown = paged.length - 1;
      expect(paged.at(-1)).toBe(
        `[output cut at the 8192-character limit after ${pagedShown} entries; continue with offset=${10 + pagedShown}, head_limit=${2000 - pagedShown}]`,
      );
      expect(paged[0]).toBe(all[10]);

      const cat = await callText(client, 'cat', { path: '/notes/long.txt', limit: 500 });
      const catFooter = cat.text.trimEnd().split('\n').at(-1)!;
      const catShown = cat.text.trimEnd().split('\n').length - 1;
      expect(catFooter).toBe(`[output cut at the 8192-character limit after ${catShown} lines; continue with offset=${catShown + 1}, limit=${500 - catShown}]`);
      expect(cat.text.split('\n')[catShown - 1]).toMatch(new RegExp(`^ +${catShown}\\tline ${catShown} of`));
    });

    it('offers the files as resources: a template, and a read that is cat without line numbers', async () => {
      const { resourceTemplates } = await client.listResourceTemplates();
      expect(resourceTemplates).toHaveLength(1);
      expect(resourceTemplates[0].uriTemplate).toBe('vfs://docs/{+path}');
      const read = await client.readResource({ uri: 'vfs://docs/src/main.ts' });
      expect(read.contents).toEqual([
        { uri: 'vfs://docs/src/main.ts', mimeType: 'text/plain', text: 'export function main(): void {\n  console.log("hello");\n}\n' },
      ]);
      const menu = await client.readResource({ uri: `vfs://docs/notes/${encodeURIComponent('caf\u00e9 menu.txt')}` });
      expect((menu.contents[0] as { text: string }).text).toBe('Caf\u00e9 au lait\nth\u00e9 vert\n');
      const long = (await client.readResource({ uri: 'vfs://docs/notes/long.txt' })).contents[0] as { text: string };
      expect(long.text.length).toBeLessThanOrEqual(MAX_CHARS);
      expect(long.text.startsWith('line 1 of the long notes\nline 2 of')).toBe(true);
      expect(long.text.trimEnd().split('\n').at(-1)).toMatch(/^\[output cut at .* read on with the cat tool: path=\/notes\/long\.txt, offset=\d+\]$/);
      await expect(client.readResource({ uri: 'vfs://docs/missing.txt' })).rejects.toThrow(/no such file: \/missing\.txt/);
      await expect(client.readResource({ uri: 'vfs://other/secret.txt' })).rejects.toThrow(/not found/i);
      await expect(scoped.readResource({ uri: 'vfs://docs/secret/eng.txt' })).rejects.toThrow(/no such file/);
    });

    it('records exactly one audit event per tool call and resource read, and none for the handshake or listings', async () => {
      expect((await t.call('POST', '/v1/workspaces', { body: { name: `aud-${era}` } })).status).toBe(201);
      expect((await put(t, `aud-${era}`, 'a.txt', 'alpha\nbeta\n')).status).toBe(202);
      await settled(t, `aud-${era}`);
      const minted = (await t.call('POST', `/v1/workspaces/aud-${era}/tokens`, { body: {} })).json;
      const c = await connect(era, `aud-${era}`, minted.token);
      await c.listTools();
      if (era === 'legacy') await c.ping(); // 2026-07-28 has no ping
      await c.listResourceTemplates();
      await callText(c, 'grep', { pattern: 'a', output_mode: 'content', head_limit: 5 });
      await callText(c, 'cat', { path: '/missing' });
      await c.readResource({ uri: `vfs://aud-${era}/a.txt` });
      await c.close();
      const events = (await t.call('GET', `/v1/workspaces/aud-${era}/audit`)).json.events;
      expect(events.map((e: { tool: string }) => e.tool)).toEqual(['grep', 'cat', 'cat']);
      expect(events[0]).toMatchObject({
        actorType: 'token',
        actorId: minted.id,
        params: { pattern: 'a', output_mode: 'content', head_limit: '5' },
        resultCount: 2,
      });
      expect(events[1]).toMatchObject({ params: { path: '/missing' }, resultCount: null });
      expect(events[2]).toMatchObject({ params: { path: '/a.txt' }, resultCount: 2 });
    });

    it('gives a token pinned to another workspace what the HTTP tools give: 404', async () => {
      await expect(connect(era, 'other', token)).rejects.toThrow();
      const first = era === 'legacy' ? INIT : DISCOVER;
      const r = await post(first, era === 'legacy' ? {} : MODERN, token, 'other');
      expect(r.status).toBe(404);
      expect(r.json.error.message).toBe('no such workspace: other');
      expect((await post(first, era === 'legacy' ? {} : MODERN, token, 'docs')).status).toBe(200);
    });
  });
}

describe('older 2025 revisions', () => {
  for (const version of ['2025-03-26', '2025-06-18']) {
    it(`serves a client that asks for ${version}`, async () => {
      const client = await connect('legacy', 'docs', t.key, version);
      expect(client.getNegotiatedProtocolVersion()).toBe(version);
      expect(await callText(client, 'ls', { path: '/src' })).toEqual({ text: (await httpText('ls', { path: '/src' })).text, isError: false });
      await client.close();
    });
  }
});

/** A raw POST to the endpoint. */
function post(body: unknown, headers: Record<string, string> = {}, key: string | null = t.key, ws = 'docs') {
  return t.call('POST', `/v1/workspaces/${ws}/mcp`, {
    key,
    body: typeof body === 'string' ? body : JSON.stringify(body),
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
  });
}

const INIT = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
};
const V = { 'mcp-protocol-version': '2025-06-18' };
const MODERN = { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'server/discover' };
const DISCOVER = {
  jsonrpc: '2.0',
  id: 1,
  method: 'server/discover',
  params: {
    _meta: {
      'io.modelcontextprotocol/protocolVersion': '2026-07-28',
      'io.modelcontextprotocol/clientCapabilities': {},
      'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
    },
  },
};

describe('the HTTP contract', () => {
  it('answers 405 to GET and DELETE', async () => {
    for (const method of ['GET', 'DELETE']) {
      const r = await t.call(method, '/v1/workspaces/docs/mcp');
      expect(r.status).toBe(405);
      expect(r.headers.get('allow')).toBe('POST');
    }
  });

  it('answers the handshake in JSON with no session id, and a client that accepts only JSON', async () => {
    for (const accept of ['application/json, text/event-stream', 'application/json']) {
      const r = await post(INIT, { accept });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(r.headers.get('mcp-session-id')).toBeNull();
      expect(r.json.result.protocolVersion).toBe('2025-06-18');
      expect(r.json.result.serverInfo.name).toBe('agent-vfs');
    }
    const call = await post(
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'ls', arguments: { path: '/src' } } },
      { ...V, accept: 'application/json' },
    );
    expect(call.status).toBe(200);
    expect(call.json.result.content[0].text).toBe((await httpText('ls', { path: '/src' })).text);
  });

  it('serves 2026-07-28 requests that carry their version in _meta and the headers, and refuses a header that disagrees', async () => {
    const params = { name: 'ls', arguments: { path: '/src' }, _meta: DISCOVER.params._meta };
    const headers = { 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call', 'mcp-name': 'ls', accept: 'application/json' };
    const ok = await post({ jsonrpc: '2.0', id: 7, method: 'tools/call', params }, headers);
    expect(ok.status).toBe(200);
    expect(ok.headers.get('content-type')).toMatch(/^application\/json/);
    expect(ok.json.result.content[0].text).toBe((await httpText('ls', { path: '/src' })).text);
    const wrong = await post({ jsonrpc: '2.0', id: 8, method: 'tools/call', params }, { ...headers, 'mcp-method': 'tools/list' });
    expect(wrong.status).toBe(400);
    const discover = await post(DISCOVER, MODERN);
    expect(discover.status).toBe(200);
    expect(discover.json.result.supportedVersions ?? discover.json.result.protocolVersions ?? JSON.stringify(discover.json.result)).toContain('2026-07-28');
  });

  it('answers 202 to a notification', async () => {
    const r = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, V);
    expect(r.status).toBe(202);
    expect(r.text).toBe('');
  });

  it('refuses a batch, a body that is not JSON and an unsupported protocol version with 400', async () => {
    const batch = await post([INIT], V);
    expect(batch.status).toBe(400);
    expect(batch.json.error.code).toBe(-32600);
    expect(batch.json.error.message).toMatch(/batch/);
    const bad = await post('{"jsonrpc":', V);
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe(-32700);
    const version = await post({ jsonrpc: '2.0', id: 3, method: 'tools/list' }, { 'mcp-protocol-version': '1999-01-01' });
    expect(version.status).toBe(400);
    expect(version.json.error.message).toMatch(/version/i);
  });

  it('answers an unknown method with the JSON-RPC error', async () => {
    const r = await post({ jsonrpc: '2.0', id: 4, method: 'files/delete' }, V);
    expect(r.json.error.code).toBe(-32601);
  });

  it('answers 401 with a WWW-Authenticate challenge naming the resource metadata (OAuth is on by default)', async () => {
    const metadata = `${t.url}/.well-known/oauth-protected-resource/v1/workspaces/docs/mcp`;
    for (const key of [null, 'svc_at_notavalidtoken', 'garbage']) {
      const r = await post(INIT, {}, key);
      expect(r.status).toBe(401);
      const sent = key === null ? '' : ', error="invalid_token"';
      expect(r.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${metadata}", scope="vfs:read"${sent}`);
    }
  });

  it('answers the protected-resource metadata of its workspace, and a JSON 404 at the bare well-known path', async () => {
    expect((await t.call('GET', '/.well-known/oauth-protected-resource/v1/workspaces/docs/mcp', { key: null })).status).toBe(200);
    const r = await t.call('GET', '/.well-known/oauth-protected-resource', { key: null });
    expect(r.status).toBe(404);
    expect(r.headers.get('content-type')).toBe('application/json');
  });

  it('answers 403 to an Origin outside the allow list, and serves one inside it', async () => {
    expect((await post(INIT, { origin: 'https://evil.example' })).status).toBe(403);
    expect((await post(INIT, { origin: 'https://app.example.com' })).status).toBe(200);
  });

  it('answers 413 to a body over the JSON limit, and 404 to an unknown workspace', async () => {
    const big = { ...INIT, params: { ...INIT.params, padding: 'x'.repeat(70_000) } };
    expect((await post(big)).status).toBe(413);
    expect((await post(INIT, {}, t.key, 'nope')).status).toBe(404);
  });
});

describe('the failed-authentication lock', () => {
  it('locks an address after repeated bad credentials, for good ones too, with Retry-After', async () => {
    const locked = await startTestService({ VFS_AUTH_FAILURES: '3' }, { realLimits: true });
    try {
      const call = (key: string) =>
        locked.call('POST', '/v1/workspaces/x/mcp', {
          key,
          body: JSON.stringify(INIT),
          headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        });
      for (let i = 0; i < 3; i++) expect((await call('svc_at_wrong')).status).toBe(401);
      const r = await call(locked.key);
      expect(r.status).toBe(429);
      expect(r.headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
    } finally {
      await locked.stop();
    }
  });
});

describe('read rate limits', () => {
  it('a burst of tool calls over the limit gets 429 with Retry-After; the handshake and listings do not count', async () => {
    const key = await t.newAccount('mcp-limited');
    expect((await t.call('POST', '/v1/workspaces', { key, body: { name: 'lim' } })).status).toBe(201);
    await setAccountLimits(t.service.db, 'mcp-limited', { limits: { readRatePerCredential: 3, readRatePerAccount: 100 } });
    await new Promise((r) => setTimeout(r, 300)); // the change reaches the service by NOTIFY
    const list = () => post({ jsonrpc: '2.0', id: 1, method: 'tools/list' }, V, key, 'lim');
    for (let i = 0; i < 6; i++) expect((await list()).status).toBe(200);
    const call = () => post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'ls', arguments: {} } }, V, key, 'lim');
    const replies = await Promise.all(Array.from({ length: 4 }, call));
    expect(replies.filter((r) => r.status === 200)).toHaveLength(3);
    const refused = replies.filter((r) => r.status === 429);
    expect(refused).toHaveLength(1);
    expect(refused[0].headers.get('retry-after')).toMatch(/^[1-9]\d*$/);
  });
});
