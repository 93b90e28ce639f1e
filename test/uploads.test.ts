/**
 * Uploads and ingest against a real service: real files, a real PostgreSQL,
 * real shards read back through `cat`.
 */
import { createHash } from 'node:crypto';
import { readdir, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setAccountLimits } from '../db/accounts.js';
import { closeShardReader, openLmdbReader, type ShardState } from '../engine/index.js';
import { strToU8 } from 'fflate';
import { makeDocx, makeEpub, makeOdf, makePptx, makeXlsx, zipFiles } from './helpers/make-documents.js';
import { makePdf, makeXObjectBombPdf } from './helpers/make-pdf.js';
import { listAll, put, settled, startTestService, type TestService } from './helpers/service.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService({ VFS_EXTRACT_TIMEOUT_SECONDS: '2' });
  expect((await t.call('POST', '/v1/workspaces', { body: { name: 'ws' } })).status).toBe(201);
});
afterAll(async () => t?.stop());

function blobFiles(): Promise<string[]> {
  return t.blobFiles();
}

async function cat(ws: string, path: string, query = ''): Promise<{ status: number; text: string }> {
  const r = await t.call('GET', `/v1/workspaces/${ws}/cat?path=${encodeURIComponent(path)}${query}`);
  return { status: r.status, text: r.text };
}

describe('text files', () => {
  const cases: Array<[string, Buffer, string]> = [
    ['plain.txt', Buffer.from('alpha\nbeta\n'), '     1\talpha\n     2\tbeta\n'],
    ['crlf.txt', Buffer.from('one\r\ntwo\r\n'), '     1\tone\r\n     2\ttwo\r\n'],
    ['no-newline.txt', Buffer.from('last line'), '     1\tlast line\n'],
    ['bom.txt', Buffer.from('\ufeffwith bom\n'), '     1\twith bom\n'],
    ['utf16le.txt', Buffer.concat([Buffer.from([0xff, 0xfe]), Buffer.from('héllo\nwörld\n', 'utf16le')]), '     1\théllo\n     2\twörld\n'],
    ['unicode/日本.md', Buffer.from('# 見出し\n'), '     1\t# 見出し\n'],
  ];
  beforeAll(async () => {
    for (const [path, body] of cases) {
      const r = await put(t, 'ws', path, body, { 'content-type': 'text/plain; charset=utf-8' });
      expect(r.status).toBe(202);
      expect(r.json).toEqual({ path: '/' + path, status: 'pending' });
    }
    await settled(t, 'ws');
  });

  it.each(cases)('%s becomes ready and reads back', async (path, body, expected) => {
    const files = await listAll(t, 'ws');
    const entry = files.find((f) => f.path === '/' + path)!;
    expect(entry).toMatchObject({ status: 'ready', sizeBytes: body.length, contentType: 'text/plain; charset=utf-8', errorDetail: null });
    expect(entry.sha256).toBe(createHash('sha256').update(body).digest('hex'));
    expect(entry.visibility).toBeNull();
    expect(await cat('ws', path)).toEqual({ status: 200, text: expected });
  });

  it('an empty file is ready and has no lines', async () => {
    expect((await put(t, 'ws', 'empty.txt', new Uint8Array(0))).status).toBe(202);
    const files = await settled(t, 'ws');
    expect(files.find((f) => f.path === '/empty.txt')).toMatchObject({ status: 'ready', sizeBytes: 0, contentType: 'application/octet-stream' });
    const r = await cat('ws', 'empty.txt');
    expect(r.status).toBe(200);
    expect(r.text).not.toMatch(/^\s+1\t/m);
  });
});

describe('PDFs and binary content', () => {
  it('a real PDF is served as its extracted text', async () => {
    const pdf = await makePdf([['The quick brown fox', 'jumps over the lazy dog'], ['Second page text']]);
    expect((await put(t, 'pdf', 'doc.pdf', pdf, { 'content-type': 'application/pdf' })).status).toBe(404);
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'pdf' } })).status).toBe(201);
    expect((await put(t, 'pdf', 'doc.pdf', pdf, { 'content-type': 'application/pdf' })).status).toBe(202);
    const files = await settled(t, 'pdf');
    expect(files[0]).toMatchObject({ path: '/doc.pdf', status: 'ready', sizeBytes: pdf.length, contentType: 'application/pdf' });
    const r = await cat('pdf', '/doc.pdf');
    expect(r.text).toMatch(/--- page 1 ---\n.*The quick brown fox\n.*jumps over the lazy dog\n/);
    expect(r.text).toMatch(/--- page 2 ---\n.*Second page text/);
  });

  it.each([
    ['corrupt.pdf', () => Buffer.from('%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 9 0 R >>\nendobj\ntrailer garbage'), /PDF/],
    ['image.png', () => Buffer.concat([Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]), Buffer.alloc(64, 1)]), /PNG/],
    ['prog.bin', () => Buffer.from([0x41, 0x00, 0x42, 0x43]), /binary/],
  ] as const)('%s ends in error with a readable detail', async (path, body, detail) => {
    expect((await put(t, 'ws', path, body(), { 'content-type': 'text/plain' })).status).toBe(202);
    const files = await settled(t, 'ws');
    const entry = files.find((f) => f.path === '/' + path)!;
    expect(entry.status).toBe('error');
    expect(entry.errorDetail).toMatch(detail);
    const r = await cat('ws', path);
    expect(r.status).toBe(404);
    expect(r.text).toMatch(/error/);
  });

  it('re-uploading the same path heals an error', async () => {
    expect((await put(t, 'ws', 'heal.txt', Buffer.from([0, 1, 2]))).status).toBe(202);
    expect((await settled(t, 'ws')).find((f) => f.path === '/heal.txt')?.status).toBe('error');
    expect((await put(t, 'ws', 'heal.txt', 'fixed\n')).status).toBe(202);
    const entry = (await settled(t, 'ws')).find((f) => f.path === '/heal.txt')!;
    expect(entry).toMatchObject({ status: 'ready', errorDetail: null });
    expect((await cat('ws', 'heal.txt')).text).toBe('     1\tfixed\n');
  });

  it('keeps serving the last ready version while a re-upload is pending', async () => {
    expect((await put(t, 'ws', 'versioned.txt', 'version one\n')).status).toBe(202);
    await settled(t, 'ws');
    // A PDF whose extraction runs into the 2 s cap: pending for a while, then error.
    expect((await put(t, 'ws', 'versioned.txt', makeXObjectBombPdf(40, 2))).status).toBe(202);
    const during = (await listAll(t, 'ws')).find((f) => f.path === '/versioned.txt')!;
    expect(during.status).toBe('pending');
    expect((await cat('ws', 'versioned.txt')).text).toBe('     1\tversion one\n');
    const after = (await settled(t, 'ws')).find((f) => f.path === '/versioned.txt')!;
    expect(after.status).toBe('error');
    expect(after.errorDetail).toMatch(/time limit/);
    expect((await put(t, 'ws', 'versioned.txt', 'version three\n')).status).toBe(202);
    await settled(t, 'ws');
    expect((await cat('ws', 'versioned.txt')).text).toBe('     1\tversion three\n');
  });
});

/** Ten entities of ten of the one before, nine deep: a billion `lol`s if anything expanded them. */
const BILLION_LAUGHS =
  '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">' +
  Array.from({ length: 8 }, (_, i) => `<!ENTITY lol${i + 2} "${`&lol${i === 0 ? '' : i + 1};`.repeat(10)}">`).join('') +
  ']><w:document><w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>';

describe('Office, OpenDocument and EPUB documents', () => {
  it('become ready as text with their markers, keep their content type, and are searched; a hostile one ends in error while they flow', async () => {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'docs' } })).status).toBe(201);
    const docx = 'application/vnd.openxmlformats-officedocument.wordprocessingml.document';
    const uploads: Array<[string, Buffer, string]> = [
      ['report.docx', await makeDocx(), docx],
      ['deck.pptx', await makePptx(), 'application/vnd.openxmlformats-officedocument.presentationml.presentation'],
      ['book.xlsx', await makeXlsx(), 'application/vnd.openxmlformats-officedocument.spreadsheetml.sheet'],
      ['notes.odt', makeOdf('odt', '<office:text><text:p>Quarterly notes</text:p></office:text>'), 'application/vnd.oasis.opendocument.text'],
      ['story.epub', makeEpub(['<p>Quarterly story</p>']), 'application/epub+zip'],
      ['laughs.docx', zipFiles({ 'word/document.xml': strToU8(BILLION_LAUGHS) }), docx],
      ['deep.odt', makeOdf('odt', `<office:text>${'<text:span>'.repeat(5000)}${'</text:span>'.repeat(5000)}</office:text>`), 'application/octet-stream'],
      ['bomb.docx', zipFiles({ 'word/document.xml': new Uint8Array(64 * 1024 * 1024) }), docx],
      ['cut.pptx', (await makePptx()).subarray(0, 5000), 'application/octet-stream'],
    ];
    for (const [path, bytes, type] of uploads) expect((await put(t, 'docs', path, bytes, { 'content-type': type })).status).toBe(202);
    const files = new Map((await settled(t, 'docs')).map((f) => [f.path, f]));
    for (const [path, , type] of uploads.slice(0, 5))
      expect(files.get(`/${path}`), path).toMatchObject({ status: 'ready', contentType: type, errorDetail: null });
    expect(files.get('/laughs.docx')).toMatchObject({ status: 'error', contentType: docx });
    expect(files.get('/laughs.docx')!.errorDetail).toBe('Word document refused: its XML declares a document type, which is refused (no entities are expanded)');
    expect(files.get('/deep.odt')).toMatchObject({
      status: 'error',
      errorDetail: 'OpenDocument text document refused: its XML nests elements deeper than 1000',
    });
    expect(files.get('/bomb.docx')).toMatchObject({
      status: 'error',
      errorDetail: expect.stringMatching(/^ZIP archive refused: entry "word\/document.xml" would inflate \d+ times/),
    });
    expect(files.get('/cut.pptx')).toMatchObject({ status: 'error', errorDetail: expect.stringMatching(/refused: .*truncated/) });
    expect((await cat('docs', 'deck.pptx', '&limit=3')).text).toBe(
      '     1\t--- slide 1 ---\n     2\tWelcome to the launch\n     3\t--- slide 2 ---\n[... 5 more lines (the file has 8); continue with offset=4]\n',
    );
    const grep = await t.call('GET', `/v1/workspaces/docs/grep?pattern=${encodeURIComponent('Quarterly|^--- sheet')}&output_mode=content`);
    expect(grep.text).toBe(
      '/book.xlsx:1:--- sheet Sales ---\n/book.xlsx:6:--- sheet Notes 2026 ---\n/notes.odt:1:Quarterly notes\n/report.docx:1:Quarterly report\n/story.epub:2:Quarterly story\n',
    );
  });
});

describe('limits', () => {
  let key: string;
  beforeAll(async () => {
    key = await t.newAccount('limited');
    await setAccountLimits(t.service.db, 'limited', { limits: { maxFileBytes: 1000, maxFiles: 3, maxStorageBytes: 2500 } });
    expect((await t.call('POST', '/v1/workspaces', { key, body: { name: 'small' } })).status).toBe(201);
    // The limits reach the service's cache by NOTIFY.
    await new Promise((r) => setTimeout(r, 200));
  });

  const up = (path: string, bytes: number) => t.call('PUT', `/v1/workspaces/small/files/${path}`, { key, body: Buffer.alloc(bytes, 0x61) });

  it('accepts a file of exactly the per-file limit, refuses one byte over with 413 and keeps nothing', async () => {
    const before = await blobFiles();
    expect((await up('under.txt', 999)).status).toBe(202);
    expect((await up('exact.txt', 1000)).status).toBe(202);
    const over = await up('over.txt', 1001);
    expect(over.status).toBe(413);
    expect(over.json.error).toMatch(/1000 bytes/);
    // Without Content-Length the limit is enforced while streaming.
    const chunked = await fetch(`${t.url}/v1/workspaces/small/files/streamed.txt`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${key}` },
      body: new ReadableStream({
        start(c) {
          for (let i = 0; i < 11; i++) c.enqueue(new Uint8Array(100).fill(0x62));
          c.close();
        },
      }),
      duplex: 'half',
    } as RequestInit);
    expect(chunked.status).toBe(413);
    // Ingest of the accepted two writes their kept texts through temp files of its own: let it finish.
    await settled(t, 'small', 30_000, key);
    const after = await blobFiles();
    expect(after.filter((f) => !before.includes(f))).toHaveLength(2);
    expect(after.some((f) => f.startsWith('tmp/'))).toBe(false);
    const paths = (await listAll(t, 'small', key)).map((f) => f.path);
    expect(paths).toEqual(['/exact.txt', '/under.txt']);
  });

  it('refuses past the storage limit with 403', async () => {
    const r = await up('third.txt', 600);
    expect(r.status).toBe(403);
    expect(r.json.error).toMatch(/storage/);
  });

  it('refuses past the file-count limit with 403, but replacing a file is fine', async () => {
    expect((await up('third.txt', 10)).status).toBe(202);
    const r = await up('fourth.txt', 10);
    expect(r.status).toBe(403);
    expect(r.json.error).toMatch(/file-count/);
    expect((await up('third.txt', 20)).status).toBe(202);
    expect((await listAll(t, 'small', key)).map((f) => f.path)).toEqual(['/exact.txt', '/third.txt', '/under.txt']);
  });
});

describe('paths', () => {
  it.each([
    ['a/%2e%2e/b.txt', /\.\./],
    ['a/./b.txt', /"\."/],
    ['a//b.txt', /empty segment/],
    ['a%00b.txt', /control character/],
    ['a%5Cb.txt', /backslash/],
    ['%E0%A4%A', /percent-encoding/],
    ['%C0%AE%C0%AE/x', /percent-encoding/],
    ['x'.repeat(256), /255 bytes/],
    [Array.from({ length: 206 }, () => 'abcd').join('/'), /1024 bytes/],
  ])('%s -> 400', async (path, message) => {
    // A raw request: fetch would resolve "." and ".." segments before sending.
    const r = await rawRequest(t.url, 'PUT', `/v1/workspaces/ws/files/${path}`, t.key, 'x');
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body).error).toMatch(message);
  });

  it('stores NFC and answers with a leading slash', async () => {
    const r = await t.call('PUT', `/v1/workspaces/ws/files/${encodeURIComponent('cafe\u0301.txt')}`, { body: 'x\n' });
    expect(r.json).toEqual({ path: '/caf\u00e9.txt', status: 'pending' });
  });

  it('refuses a malformed visibility', async () => {
    const r = await t.call('PUT', '/v1/workspaces/ws/files/v.txt?visibility=team', { body: 'x' });
    expect(r.status).toBe(400);
    expect(r.json.error).toMatch(/visibility/);
  });

  it('lists the visibility claims an upload carried, sorted and without duplicates', async () => {
    expect((await t.call('PUT', '/v1/workspaces/ws/files/seen.txt?visibility=user:b,group:a,user:b', { body: 'x' })).status).toBe(202);
    const entry = (await listAll(t, 'ws')).find((f) => f.path === '/seen.txt')!;
    expect(entry.visibility).toEqual(['group:a', 'user:b']);
  });
});

describe('delete', () => {
  it('removes the file from the listing, the shard and the blob store', async () => {
    const body = 'unique content for the delete test\n';
    expect((await put(t, 'ws', 'doomed.txt', body)).status).toBe(202);
    await settled(t, 'ws');
    const blobsBefore = await blobFiles();
    const del = await t.call('DELETE', '/v1/workspaces/ws/files/doomed.txt');
    expect(del.status).toBe(204);
    expect((await listAll(t, 'ws')).some((f) => f.path === '/doomed.txt')).toBe(false);
    expect((await cat('ws', 'doomed.txt')).status).toBe(404);
    expect((await blobFiles()).length).toBe(blobsBefore.length - 1);
    expect((await t.call('DELETE', '/v1/workspaces/ws/files/doomed.txt')).status).toBe(404);
  });

  it('moves the workspace version once per change', async () => {
    const version = async () => (await t.call('GET', '/v1/workspaces')).json.workspaces.find((w: { name: string }) => w.name === 'ws').version as number;
    const v0 = await version();
    expect((await put(t, 'ws', 'counted.txt', 'x\n')).status).toBe(202);
    await settled(t, 'ws');
    expect(await version()).toBe(v0 + 1);
    expect((await t.call('DELETE', '/v1/workspaces/ws/files/counted.txt')).status).toBe(204);
    expect(await version()).toBe(v0 + 2);
  });

  it('deleting the workspace removes its shard, and no thread keeps its files open', async () => {
    const shards = join(t.dataDir, 'shards');
    const earlier = new Set(await readdir(shards).catch(() => []));
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'gone' } })).status).toBe(201);
    expect((await put(t, 'gone', 'a.txt', 'a\n')).status).toBe(202);
    await settled(t, 'gone');
    const dir = join(shards, (await readdir(shards)).find((name) => !earlier.has(name))!);
    // Reads open the shard on the HTTP thread (cat) and on the read threads (grep, several so
    // that each thread gets one).
    expect((await t.call('GET', '/v1/workspaces/gone/cat?path=/a.txt')).status).toBe(200);
    for (const r of await Promise.all(Array.from({ length: 6 }, () => t.call('GET', '/v1/workspaces/gone/grep?pattern=a')))) expect(r.status).toBe(200);
    const openInShard = async (): Promise<number> => {
      let n = 0;
      for (const fd of await readdir('/proc/self/fd')) if ((await readlink(`/proc/self/fd/${fd}`).catch(() => '')).startsWith(dir)) n++;
      return n;
    };
    expect(await openInShard()).toBeGreaterThan(0);
    const before = await readdir(shards);
    expect((await t.call('DELETE', '/v1/workspaces/gone')).status).toBe(204);
    expect((await readdir(shards)).length).toBe(before.length - 1);
    // Deleted files held open keep their disk space: every thread lets go of them.
    const deadline = Date.now() + 5_000;
    while ((await openInShard()) > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(await openInShard()).toBe(0);
  });

  it('merges the recent postings of the shards it wrote once ingest goes idle', async () => {
    const shards = join(t.dataDir, 'shards');
    const earlier = new Set(await readdir(shards).catch(() => []));
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'merged' } })).status).toBe(201);
    for (let i = 0; i < 3; i++) {
      expect((await put(t, 'merged', `m${i}.txt`, `merge candidate ${i}\n`)).status).toBe(202);
      await settled(t, 'merged'); // one batch, so one level-0 segment, each
    }
    const dir = join(shards, (await readdir(shards)).find((name) => !earlier.has(name))!);
    const reader = openLmdbReader(dir);
    const state = (): ShardState => {
      const snapshot = reader.snapshot();
      try {
        return snapshot.state();
      } finally {
        snapshot.done();
      }
    };
    try {
      const deadline = Date.now() + 10_000;
      while (state().segFirst < state().segNext && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(state().segNext).toBeGreaterThanOrEqual(3);
      expect(state().segFirst).toBe(state().segNext);
    } finally {
      closeShardReader(dir);
    }
    const grep = await t.call('GET', '/v1/workspaces/merged/grep?pattern=merge%20candidate');
    expect(
      grep.text
        .split('\n')
        .filter((l) => l !== '')
        .sort(),
    ).toEqual(['/m0.txt', '/m1.txt', '/m2.txt']);
  });

  it('a file deleted while it ingests stays deleted: no document comes back into the shard', async () => {
    for (let round = 0; round < 30; round++) {
      const uploads = Array.from({ length: 1 + (round % 4) }, (_, i) =>
        put(t, 'ws', `racing/r${round}-${i}.txt`, `racemarker${round}x${i} `.repeat(50 + i * 400)),
      );
      for (const r of await Promise.all(uploads)) expect(r.status).toBe(202);
      await new Promise((r) => setTimeout(r, (round * 7) % 25));
      for (let i = 0; i < 1 + (round % 4); i++) expect((await t.call('DELETE', `/v1/workspaces/ws/files/racing/r${round}-${i}.txt`)).status).toBe(204);
    }
    expect((await put(t, 'ws', 'after-race.txt', 'x\n')).status).toBe(202);
    expect((await settled(t, 'ws')).find((f) => f.path === '/after-race.txt')?.status).toBe('ready');
    const grep = await t.call('GET', '/v1/workspaces/ws/grep?pattern=racemarker&output_mode=files_with_matches');
    expect(grep.status).toBe(200);
    expect(grep.text).not.toContain('/racing/');
    expect((await t.call('GET', '/v1/workspaces/ws/grep?pattern=x&output_mode=files_with_matches')).text).toContain('/after-race.txt');
    expect((await t.call('GET', '/v1/workspaces/ws/ls?path=/racing')).status).toBe(404);
  });

  it('deleting a workspace while its files ingest answers 204 each time and leaves no shard behind', async () => {
    const shards = join(t.dataDir, 'shards');
    const before = new Set(await readdir(shards));
    for (let round = 0; round < 40; round++) {
      expect((await t.call('POST', '/v1/workspaces', { body: { name: 'churn' } })).status).toBe(201);
      const uploads = Array.from({ length: round % 6 }, (_, i) => put(t, 'churn', `d/f${i}.txt`, `churn ${round} `.repeat(i * 200)));
      for (const r of await Promise.all(uploads)) expect(r.status).toBe(202);
      // Delete at different points of the ingest: before the claim, during extraction, during the shard write.
      await new Promise((r) => setTimeout(r, (round * 7) % 25));
      const del = await t.call('DELETE', '/v1/workspaces/churn');
      expect(del.status, del.text).toBe(204);
    }
    // Another workspace's upload going through shows the ingest has moved past every batch of those rounds.
    expect((await put(t, 'ws', 'after-churn.txt', 'x\n')).status).toBe(202);
    expect((await settled(t, 'ws')).find((f) => f.path === '/after-churn.txt')?.status).toBe('ready');
    expect((await readdir(shards)).filter((d) => !before.has(d))).toEqual([]);
  });
});

describe('listing', () => {
  it('pages through many files with status filters', async () => {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'many' } })).status).toBe(201);
    await Promise.all(Array.from({ length: 120 }, (_, i) => put(t, 'many', `dir${i % 7}/f${String(i).padStart(3, '0')}.txt`, `line ${i}\n`)));
    expect((await put(t, 'many', 'bad.bin', Buffer.from([0, 0, 0]))).status).toBe(202);
    await settled(t, 'many');
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const r = await t.call('GET', `/v1/workspaces/many/files?limit=50&status=ready${cursor === null ? '' : `&cursor=${cursor}`}`);
      seen.push(...r.json.files.map((f: { path: string }) => f.path));
      cursor = r.json.nextCursor;
    } while (cursor !== null);
    expect(seen).toHaveLength(120);
    expect(seen).toEqual([...seen].sort());
    const errors = await t.call('GET', '/v1/workspaces/many/files?status=error');
    expect(errors.json.files.map((f: { path: string }) => f.path)).toEqual(['/bad.bin']);
    const ls = await t.call('GET', '/v1/workspaces/many/ls');
    expect(ls.text.split('\n').filter((l) => l.endsWith('/'))).toHaveLength(7);
  });
});

/** An HTTP request whose path is sent exactly as given. */
function rawRequest(base: string, method: string, path: string, key: string, body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(base + '/', { method, path, headers: { authorization: `Bearer ${key}` } }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}
