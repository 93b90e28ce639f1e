/**
 * The operators' command line run as a real child process (`node --import tsx
 * cli/main.ts`, what `npm run cli` runs) against a real service on port 0:
 * outcomes are read back from the service's listing and read tools.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setAccountLimits } from '../db/accounts.js';
import { makePdf } from './helpers/make-pdf.js';
import { listAll, put, settled, startTestService, type TestService } from './helpers/service.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const CLI = ['--import', 'tsx', 'cli/main.ts'];

let t: TestService;
let scratch: string;
beforeAll(async () => {
  t = await startTestService();
  scratch = await mkdtemp(join(tmpdir(), 'vfs-cli-'));
});
afterAll(async () => {
  await t?.stop();
  if (scratch !== undefined) await rm(scratch, { recursive: true, force: true });
});

/** What one run of the command printed, and how it ended. */
interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** The environment of a run: the service's URL and a key, unless a test says otherwise (null leaves one out). */
function cliEnv(env: { url?: string | null; key?: string | null } = {}): NodeJS.ProcessEnv {
  const out: NodeJS.ProcessEnv = { ...process.env };
  delete out.AGENT_VFS_URL;
  delete out.AGENT_VFS_KEY;
  const url = env.url === undefined ? t.url : env.url;
  const key = env.key === undefined ? t.key : env.key;
  if (url !== null) out.AGENT_VFS_URL = url;
  if (key !== null) out.AGENT_VFS_KEY = key;
  return out;
}

function start(args: string[], env: { url?: string | null; key?: string | null } = {}): { child: ChildProcess; done: Promise<Run>; stdout: () => string } {
  const child = spawn(process.execPath, [...CLI, ...args], { cwd: ROOT, env: cliEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<Run>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { child, done, stdout: () => stdout };
}

/** Runs the command to its end. */
function cli(args: string[], env: { url?: string | null; key?: string | null } = {}): Promise<Run> {
  return start(args, env).done;
}

/** Writes files (path → content) under a new directory and returns it. */
async function tree(name: string, files: Record<string, string | Buffer>): Promise<string> {
  const dir = join(scratch, name);
  for (const [path, content] of Object.entries(files)) {
    await mkdir(dirname(join(dir, path)), { recursive: true });
    await writeFile(join(dir, path), content);
  }
  return dir;
}

async function workspace(name: string, key = t.key): Promise<void> {
  expect((await t.call('POST', '/v1/workspaces', { key, body: { name } })).status).toBe(201);
}

const sha256 = (content: string | Buffer) => createHash('sha256').update(content).digest('hex');

/** A port on this host that nothing listens on. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  await new Promise((r) => server.close(r));
  return port;
}

describe('push', () => {
  const BINARY = Buffer.from([0x41, 0x00, 0x42, 0x43]);
  let dir: string;
  let pdf: Buffer;
  let files: Record<string, string | Buffer>;

  beforeAll(async () => {
    pdf = await makePdf([['Quarterly report', 'revenue grew'], ['Second page']]);
    files = {
      'readme.md': '# Readme\nhello push\n',
      'docs/guide.txt': 'first line\nsecond line\n',
      'docs/nested/deep/notes.txt': 'deep notes\n',
      // Written NFD on disk; the workspace holds it NFC.
      'unicode/日本語/cafe\u0301.md': 'ünïcödé\n',
      'reports/q3.pdf': pdf,
      'bin/prog.bin': BINARY,
      '.hidden.txt': 'hidden files are pushed\n',
      '.git/config': '[core]\n',
      '.venv/lib.txt': 'tooling\n',
    };
    dir = await tree('push', files);
    await writeFile(join(scratch, 'outside.txt'), 'not in the tree\n');
    await symlink('readme.md', join(dir, 'link-inside.md'));
    await symlink(join(scratch, 'outside.txt'), join(dir, 'link-outside.txt'));
    await symlink('docs', join(dir, 'linked-dir'));
    await workspace('pushed');
  });

  const expected = [
    '/.hidden.txt',
    '/bin/prog.bin',
    '/docs/guide.txt',
    '/docs/nested/deep/notes.txt',
    '/link-inside.md',
    '/readme.md',
    '/reports/q3.pdf',
    '/unicode/日本語/caf\u00e9.md',
  ];

  it('uploads the tree, waits for ingest, and names the file in error', async () => {
    const run = await cli(['push', dir, 'pushed', '--json']);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toBe('');
    const summary = JSON.parse(run.stdout);
    expect(summary).toMatchObject({ workspace: 'pushed', files: 8, uploaded: 8, unchanged: 0, deleted: 0, ready: 7, pending: 0, refused: [] });
    expect(summary.errors).toEqual([{ path: '/bin/prog.bin', errorDetail: expect.stringMatching(/binary/) }]);
    expect(summary.skipped).toEqual(
      expect.arrayContaining([
        { path: '.git', reason: 'dot-directory' },
        { path: '.venv', reason: 'dot-directory' },
        { path: 'link-outside.txt', reason: 'symlink-outside' },
        { path: 'linked-dir', reason: 'symlink-directory' },
      ]),
    );
    expect(summary.skipped).toHaveLength(4);

    const listed = await listAll(t, 'pushed');
    expect(listed.map((f) => f.path)).toEqual(expected);
    const byPath = new Map(listed.map((f) => [f.path, f]));
    expect(byPath.get('/reports/q3.pdf')).toMatchObject({ status: 'ready', contentType: 'application/pdf', sha256: sha256(pdf), visibility: null });
    expect(byPath.get('/link-inside.md')).toMatchObject({ status: 'ready', sha256: sha256(files['readme.md']) });
    expect(byPath.get('/unicode/日本語/caf\u00e9.md')).toMatchObject({ status: 'ready', sha256: sha256(files['unicode/日本語/cafe\u0301.md']) });
    expect(byPath.get('/bin/prog.bin')).toMatchObject({ status: 'error', contentType: 'application/octet-stream' });
    expect((await t.call('GET', '/v1/workspaces/pushed/cat?path=/reports/q3.pdf')).text).toMatch(/Quarterly report/);
  });

  it('a second push of the same tree uploads nothing and still reports the file in error', async () => {
    const before = await listAll(t, 'pushed');
    const run = await cli(['push', dir, 'pushed']);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(
      /^uploaded: 0 {2}unchanged: 8 {2}deleted: 0 {2}skipped: 4\nready: 7 {2}in error: 1 {2}refused: 0\nerror \/bin\/prog\.bin: .*binary/,
    );
    expect(run.stdout).toContain('skipped link-outside.txt (symlink-outside)\n');
    expect(await listAll(t, 'pushed')).toEqual(before);
  });

  it('uploads only what changed, and deletes files gone from the tree only with --delete', async () => {
    await writeFile(join(dir, 'docs/guide.txt'), 'first line, edited\n');
    await unlink(join(dir, 'bin/prog.bin'));
    const kept = await cli(['push', dir, 'pushed', '--json']);
    expect(kept.code, kept.stderr).toBe(0);
    expect(JSON.parse(kept.stdout)).toMatchObject({ files: 7, uploaded: 1, unchanged: 6, deleted: 0, ready: 7, errors: [] });
    expect((await listAll(t, 'pushed')).map((f) => f.path)).toContain('/bin/prog.bin');
    expect((await t.call('GET', '/v1/workspaces/pushed/cat?path=/docs/guide.txt')).text).toBe('     1\tfirst line, edited\n');

    const pruned = await cli(['push', dir, 'pushed', '--delete', '--json']);
    expect(pruned.code, pruned.stderr).toBe(0);
    expect(JSON.parse(pruned.stdout)).toMatchObject({ uploaded: 0, unchanged: 7, deleted: 1, ready: 7 });
    expect((await listAll(t, 'pushed')).map((f) => f.path)).toEqual(expected.filter((p) => p !== '/bin/prog.bin'));
  });

  it('uploads again when the visibility asked for differs, and not after', async () => {
    const first = await cli(['push', dir, 'pushed', '--visibility', 'user:ann,group:eng,user:ann', '--json']);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ uploaded: 7, unchanged: 0 });
    for (const f of await listAll(t, 'pushed')) expect(f.visibility).toEqual(['group:eng', 'user:ann']);
    const again = await cli(['push', dir, 'pushed', '--visibility', 'group:eng,user:ann', '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ uploaded: 0, unchanged: 7 });
    const open = await cli(['push', dir, 'pushed', '--json']);
    expect(JSON.parse(open.stdout)).toMatchObject({ uploaded: 7, unchanged: 0 });
    for (const f of await listAll(t, 'pushed')) expect(f.visibility).toBeNull();
  });

  it('a push stopped by the file-count limit names the limit and resumes where it stopped once the limit is raised', async () => {
    const key = await t.newAccount('counted');
    await setAccountLimits(t.service.db, 'counted', { limits: { maxFiles: 3 } });
    await workspace('counted', key);
    await new Promise((r) => setTimeout(r, 200)); // the limits reach the service by NOTIFY
    const six = await tree('six', Object.fromEntries(Array.from({ length: 6 }, (_, i) => [`f${i}.txt`, `file ${i}\n`])));
    const stopped = await cli(['push', six, 'counted', '--concurrency', '2'], { key });
    expect(stopped.code).toBe(1);
    expect(stopped.stdout).toBe('');
    expect(stopped.stderr).toMatch(/^agent-vfs: upload \/f\d\.txt: forbidden \(403: file-count limit reached: the plan allows 3 files\)\n/);
    expect(stopped.stderr).toContain('3 of 6 uploads were accepted before it; run the push again to resume');
    expect(await listAll(t, 'counted', key)).toHaveLength(3);

    await setAccountLimits(t.service.db, 'counted', { limits: { maxFiles: null } });
    await new Promise((r) => setTimeout(r, 200));
    const resumed = await cli(['push', six, 'counted', '--json'], { key });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ uploaded: 3, unchanged: 3, ready: 6 });
    expect((await listAll(t, 'counted', key)).map((f) => f.path)).toEqual(['/f0.txt', '/f1.txt', '/f2.txt', '/f3.txt', '/f4.txt', '/f5.txt']);
  });

  it('a file over the per-file limit is refused by name (413), small and streamed alike, and the others go in', async () => {
    const key = await t.newAccount('sized');
    await setAccountLimits(t.service.db, 'sized', { limits: { maxFileBytes: 1000 } });
    await workspace('sized', key);
    await new Promise((r) => setTimeout(r, 200));
    // 3 MB is above the size the client reads whole: it streams, with its Content-Length.
    const dir = await tree('sized', { 'ok.txt': 'fits\n', 'big.txt': 'x'.repeat(2000), 'huge.log': Buffer.alloc(3 * 1024 * 1024, 0x61) });
    const run = await cli(['push', dir, 'sized'], { key });
    expect(run.code).toBe(1);
    expect(run.stdout).toContain('uploaded: 1  unchanged: 0');
    expect(run.stdout).toContain('refused: 2');
    expect(run.stdout).toContain('refused /big.txt (413): file exceeds the per-file limit of 1000 bytes\n');
    expect(run.stdout).toContain('refused /huge.log (413): file exceeds the per-file limit of 1000 bytes\n');
    expect((await listAll(t, 'sized', key)).map((f) => [f.path, f.status])).toEqual([['/ok.txt', 'ready']]);
  });

  it('shows progress bars under a terminal and none without one', async () => {
    await workspace('progress');
    const dir = await tree('progress', Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`p${i}.txt`, `progress ${i}\n`])));
    const quiet = await cli(['push', dir, 'progress']);
    expect(quiet.code, quiet.stderr).toBe(0);
    expect(quiet.stderr).toBe('');
    expect(quiet.stdout).toBe('uploaded: 20  unchanged: 0  deleted: 0  skipped: 0\nready: 20  in error: 0  refused: 0\n');

    await writeFile(join(dir, 'p0.txt'), 'changed\n');
    // script(1) from util-linux gives the command a pseudo-terminal, so its stderr is a TTY.
    const command = [process.execPath, ...CLI, 'push', dir, 'progress'].map((a) => `'${a}'`).join(' ');
    const tty = await new Promise<Run>((resolve) => {
      const child = spawn('script', ['-qec', command, '/dev/null'], { cwd: ROOT, env: cliEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.on('close', (code) => resolve({ code, stdout, stderr: '' }));
    });
    expect(tty.code).toBe(0);
    expect(tty.stdout).toMatch(/hashing {3}\[#+\] 20\/20 files/);
    expect(tty.stdout).toMatch(/uploading \[#+\] 1\/1 files/);
    expect(tty.stdout).toMatch(/ingesting \[#+\] 1\/1 files/);
    expect(tty.stdout).toContain('uploaded: 1  unchanged: 19');
  });

  it('fails with the cause when the directory or the workspace does not exist', async () => {
    const noDir = await cli(['push', join(scratch, 'missing'), 'pushed']);
    expect(noDir.code).toBe(1);
    expect(noDir.stderr).toBe(`agent-vfs: cannot read the directory ${join(scratch, 'missing')}: it does not exist\n`);
    const noWs = await cli(['push', dir, 'nowhere']);
    expect(noWs.code).toBe(1);
    expect(noWs.stderr).toBe('agent-vfs: list the files of nowhere: not found (404: no such workspace: nowhere)\n');
  });
});
