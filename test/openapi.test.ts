/**
 * GET /v1/openapi.json: a valid OpenAPI 3.1 document of every SPEC.md endpoint, made from the
 * schemas the routes validate with (so a bound it states is the bound a route enforces), and a
 * contract checker that does catch a response that breaks it. Every test file's responses are
 * checked against the document by test/helpers/contract-setup.ts.
 */
import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { ContractChecker } from './helpers/contract.js';
import { put, settled, startTestService, type TestService } from './helpers/service.js';

// biome-ignore lint/suspicious/noExplicitAny: the test walks a JSON document of many shapes; a cast at each step would add nothing
type Json = Record<string, any>;

let t: TestService;
let doc: Json;
beforeAll(async () => {
  t = await startTestService();
  expect((await t.call('POST', '/v1/workspaces', { body: { name: 'ws' } })).status).toBe(201);
  expect((await put(t, 'ws', 'a.md', '# a\n')).status).toBe(202);
  await settled(t, 'ws');
  const r = await t.call('GET', '/v1/openapi.json', { key: null });
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toMatch(/^application\/json/);
  doc = r.json;
});
afterAll(async () => t?.stop());

/** SPEC.md section 4: every endpoint. */
const SPEC_ENDPOINTS = [
  'post /v1/workspaces',
  'get /v1/workspaces',
  'delete /v1/workspaces/{ws}',
  'put /v1/workspaces/{ws}/files/{path}',
  'delete /v1/workspaces/{ws}/files/{path}',
  'get /v1/workspaces/{ws}/files',
  'post /v1/workspaces/{ws}/tokens',
  'delete /v1/tokens/{id}',
  'get /v1/workspaces/{ws}/audit',
  'get /v1/workspaces/{ws}/ls',
  'get /v1/workspaces/{ws}/find',
  'get /v1/workspaces/{ws}/cat',
  'get /v1/workspaces/{ws}/grep',
  'get /healthz',
  'get /readyz',
];

/** OAuth for MCP clients (docs/oauth.md): the metadata, the authorization server, and a workspace's grants. */
const OAUTH_ENDPOINTS = [
  'get /.well-known/oauth-protected-resource/v1/workspaces/{ws}/mcp',
  'get /.well-known/oauth-authorization-server',
  'post /oauth/register',
  'get /oauth/authorize',
  'post /oauth/authorize',
  'post /oauth/token',
  'post /oauth/revoke',
  'get /v1/workspaces/{ws}/grants',
  'delete /v1/grants/{id}',
];

function operations(): [string, Json][] {
  return Object.entries(doc.paths as Json).flatMap(([path, item]) =>
    Object.entries(item as Json).map(([method, op]): [string, Json] => [`${method} ${path}`, op]),
  );
}

describe('the document', () => {
  it('is valid OpenAPI 3.1 by a maintained validator, version 1.0.0, served without authentication', async () => {
    const result = await new Validator().validate(doc as never);
    expect(result).toEqual({ valid: true });
    expect(doc.openapi).toBe('3.1.0');
    expect(doc.info.version).toBe('1.0.0');
  });

  it("describes every SPEC.md endpoint, the MCP endpoint, the console's two, OAuth's and itself, and nothing else", () => {
    expect(
      operations()
        .map(([name]) => name)
        .sort(),
    ).toEqual([...SPEC_ENDPOINTS, 'post /v1/workspaces/{ws}/mcp', 'get /v1/openapi.json', 'get /v1/whoami', 'get /v1/status', ...OAUTH_ENDPOINTS].sort());
  });

  it('gives every operation the statuses SPEC.md lists for it, 401 and 429 on every authenticated one', () => {
    const statuses = (name: string): string[] => Object.keys(operations().find(([n]) => n === name)![1].responses);
    expect(statuses('post /v1/workspaces')).toEqual(expect.arrayContaining(['201', '400', '401', '403', '409', '429']));
    expect(statuses('put /v1/workspaces/{ws}/files/{path}')).toEqual(expect.arrayContaining(['202', '400', '401', '403', '404', '413', '429', '503']));
    expect(statuses('delete /v1/tokens/{id}')).toEqual(expect.arrayContaining(['204', '401', '404', '429']));
    expect(statuses('get /readyz')).toEqual(['200', '503']);
    for (const [name, op] of operations()) {
      if (op.security.length === 0) continue;
      expect(Object.keys(op.responses), name).toEqual(expect.arrayContaining(['401', '429']));
    }
  });

  it('answers management errors as { error } and read-tool errors as text', () => {
    const [, listFiles] = operations().find(([n]) => n === 'get /v1/workspaces/{ws}/files')!;
    expect(listFiles.responses['404'].content['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
    expect(doc.components.schemas.Error).toMatchObject({ required: ['error'], additionalProperties: false });
    const [, grep] = operations().find(([n]) => n === 'get /v1/workspaces/{ws}/grep')!;
    expect(Object.keys(grep.responses['200'].content)).toEqual(['text/plain']);
    expect(Object.keys(grep.responses['400'].content)).toEqual(['text/plain']);
  });

  it("gives the MCP tools the read tools' parameters: one schema for both", async () => {
    const client = new Client({ name: 'contract-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${t.url}/v1/workspaces/ws/mcp`), { requestInit: { headers: { authorization: `Bearer ${t.key}` } } }),
    );
    try {
      const { tools } = await client.listTools();
      for (const tool of tools) {
        const [, op] = operations().find(([n]) => n === `get /v1/workspaces/{ws}/${tool.name}`)!;
        const query = (op.parameters as Json[]).filter((p) => p.in === 'query');
        const properties = tool.inputSchema.properties as Json;
        expect(query.map((p) => p.name).sort(), tool.name).toEqual(Object.keys(properties).sort());
        for (const p of query) {
          expect({ ...p.schema, description: p.description }, `${tool.name} ${p.name}`).toEqual(properties[p.name]);
          expect(p.required, `${tool.name} ${p.name}`).toBe(tool.inputSchema.required?.includes(p.name) ?? false);
        }
      }
    } finally {
      await client.close();
    }
  });
});

describe('the routes enforce what the document states', () => {
  /** Query parameters of the GET operations, with a URL to call each operation with. */
  const cases = (): [string, string, Json][] => {
    const urls: Record<string, string> = {
      '/v1/workspaces/{ws}/files': '/v1/workspaces/ws/files?',
      '/v1/workspaces/{ws}/audit': '/v1/workspaces/ws/audit?',
      '/v1/workspaces/{ws}/ls': '/v1/workspaces/ws/ls?',
      '/v1/workspaces/{ws}/find': '/v1/workspaces/ws/find?pattern=*&',
      '/v1/workspaces/{ws}/cat': '/v1/workspaces/ws/cat?path=/a.md&',
      '/v1/workspaces/{ws}/grep': '/v1/workspaces/ws/grep?pattern=a&',
    };
    return Object.entries(urls).flatMap(([path, url]) =>
      (doc.paths[path].get.parameters as Json[]).filter((p) => p.in === 'query').map((p): [string, string, Json] => [url, p.name, p.schema]),
    );
  };

  it('an integer one step outside its documented range, or a value outside its documented enum, is a 400 naming it', async () => {
    let checked = 0;
    for (const [url, name, schema] of cases()) {
      const bad: string[] = [];
      if (schema.type === 'integer') {
        if (schema.minimum > 0) bad.push(String(schema.minimum - 1));
        if (schema.maximum < Number.MAX_SAFE_INTEGER) bad.push(String(schema.maximum + 1));
      }
      if (schema.enum !== undefined) bad.push('not-a-documented-value');
      if (schema.type === 'boolean') bad.push('maybe');
      for (const value of bad) {
        const r = await t.call('GET', `${url}${encodeURIComponent(name)}=${value}`);
        expect(r.status, `${url} ${name}=${value}`).toBe(400);
        expect(r.text, `${url} ${name}=${value}`).toContain(name);
        checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(14);
  });

  it('a documented bound itself is accepted', async () => {
    for (const [url, name, schema] of cases()) {
      if (schema.type !== 'integer') continue;
      for (const value of [schema.minimum, schema.maximum]) {
        const r = await t.call('GET', `${url}${encodeURIComponent(name)}=${value}`);
        expect(r.status, `${url} ${name}=${value}: ${r.text}`).toBe(200);
      }
    }
  });

  it('a parameter the document does not list is a 400 naming it', async () => {
    for (const url of new Set(cases().map(([u]) => u))) {
      const r = await t.call('GET', `${url}undocumented=1`);
      expect(r.status, url).toBe(400);
      expect(r.text).toContain('undocumented');
    }
  });
});

describe('the contract checker', () => {
  it('catches a body, a status and a media type the document does not allow, and passes a good answer', () => {
    const checker = new ContractChecker(doc);
    const file = {
      path: '/a',
      status: 'ready',
      sizeBytes: 1,
      contentType: 'text/plain',
      updatedAt: 'x',
      errorDetail: null,
      sha256: 'a'.repeat(64),
      visibility: null,
    };
    const listing = { method: 'GET', url: `${t.url}/v1/workspaces/ws/files`, contentType: 'application/json' };
    expect(checker.check({ ...listing, status: 200, json: { files: [file], nextCursor: null } })).toBeNull();
    expect(checker.check({ ...listing, status: 200, json: { files: [{ ...file, sizeBytes: '1' }], nextCursor: null } })).toMatch(/sizeBytes/);
    expect(checker.check({ ...listing, status: 200, json: { files: [{ ...file, extra: 1 }], nextCursor: null } })).toMatch(/additional/);
    expect(checker.check({ ...listing, status: 418, json: {} })).toMatch(/no 418/);
    expect(checker.check({ ...listing, status: 404, contentType: 'text/plain', json: undefined })).toMatch(/media type/);
    expect(checker.check({ ...listing, status: 404, json: { error: 'x', code: 1 } })).toMatch(/does not match/);
    expect(checker.covers('GET', `${t.url}/v1/workspaces/ws/files/some/file.md`)).toBe(false);
    expect(checker.covers('PUT', `${t.url}/v1/workspaces/ws/files/some/file.md`)).toBe(true);
  });
});
