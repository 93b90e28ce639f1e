/**
 * The operators' command line run as a real child process (the compiled `agent-vfs`,
 * package.json's `bin`) against a real service on port 0:
 * outcomes are read back from the service's listing and read tools.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, rm, symlink, unlink, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { retryAfterSeconds } from '../cli/client.js';
import { contentTypeOf } from '../core/content-types.js';
import { remotePath } from '../cli/local-tree.js';
import { issueManagementKey, setAccountLimits } from '../db/accounts.js';
import { makePdf } from './helpers/make-pdf.js';
import { CLI_ARGS, type CliRun, startCli } from './helpers/process.js';
import { listAll, put, settled, startTestService, type TestService } from './helpers/service.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

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

function start(args: string[], env: { url?: string | null; key?: string | null } = {}): ReturnType<typeof startCli> {
  return startCli(args, cliEnv(env));
}

/** Runs the command to its end. */
function cli(args: string[], env: { url?: string | null; key?: string | null } = {}): Promise<CliRun> {
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
      // A submodule's pointer file.
      'vendor/lib/.git': 'gitdir: ../../.git/modules/lib\n',
      'vendor/lib/readme.txt': 'vendored\n',
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
    '/vendor/lib/readme.txt',
  ];

  it('uploads the tree, waits for ingest, and names the file in error', async () => {
    const run = await cli(['push', dir, 'pushed', '--json']);
    expect(run.code, run.stderr).toBe(1);
    expect(run.stderr).toBe('');
    const summary = JSON.parse(run.stdout);
    expect(summary).toMatchObject({ workspace: 'pushed', files: 9, uploaded: 9, unchanged: 0, deleted: 0, ready: 8, pending: 0, refused: [] });
    expect(summary.errors).toEqual([{ path: '/bin/prog.bin', errorDetail: expect.stringMatching(/binary/) }]);
    expect(summary.skipped).toEqual(
      expect.arrayContaining([
        { path: '.git', reason: 'dot-directory' },
        { path: '.venv', reason: 'dot-directory' },
        { path: 'link-outside.txt', reason: 'symlink-outside' },
        { path: 'linked-dir', reason: 'symlink-directory' },
        { path: 'vendor/lib/.git', reason: 'git-file' },
      ]),
    );
    expect(summary.skipped).toHaveLength(5);

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
      /^uploaded: 0 {2}unchanged: 9 {2}deleted: 0 {2}skipped: 5\nready: 8 {2}in error: 1 {2}refused: 0\nerror \/bin\/prog\.bin: .*binary/,
    );
    expect(run.stdout).toContain('skipped link-outside.txt (symlink-outside)\n');
    expect(await listAll(t, 'pushed')).toEqual(before);
  });

  it('--retry-errors uploads the unchanged file in error again', async () => {
    const run = await cli(['push', dir, 'pushed', '--retry-errors', '--json']);
    expect(run.code).toBe(1);
    expect(JSON.parse(run.stdout)).toMatchObject({ uploaded: 1, unchanged: 8, ready: 8, errors: [{ path: '/bin/prog.bin' }] });
  });

  it('uploads only what changed, and deletes files gone from the tree only with --delete', async () => {
    await writeFile(join(dir, 'docs/guide.txt'), 'first line, edited\n');
    await unlink(join(dir, 'bin/prog.bin'));
    const kept = await cli(['push', dir, 'pushed', '--json']);
    expect(kept.code, kept.stderr).toBe(0);
    expect(JSON.parse(kept.stdout)).toMatchObject({ files: 8, uploaded: 1, unchanged: 7, deleted: 0, ready: 8, errors: [] });
    expect((await listAll(t, 'pushed')).map((f) => f.path)).toContain('/bin/prog.bin');
    expect((await t.call('GET', '/v1/workspaces/pushed/cat?path=/docs/guide.txt')).text).toBe('     1\tfirst line, edited\n');

    const started = Date.now();
    const pruned = await cli(['push', dir, 'pushed', '--delete', '--json']);
    expect(pruned.code, pruned.stderr).toBe(0);
    // A reply left unread would hold its connection, and the process, until the service's 10 s idle timeout.
    expect(Date.now() - started).toBeLessThan(8000);
    expect(JSON.parse(pruned.stdout)).toMatchObject({ uploaded: 0, unchanged: 8, deleted: 1, ready: 8 });
    expect((await listAll(t, 'pushed')).map((f) => f.path)).toEqual(expected.filter((p) => p !== '/bin/prog.bin'));
  });

  it('uploads again when the visibility asked for differs, and not after', async () => {
    const first = await cli(['push', dir, 'pushed', '--visibility', 'user:ann,group:eng,user:ann', '--json']);
    expect(first.code, first.stderr).toBe(0);
    expect(JSON.parse(first.stdout)).toMatchObject({ uploaded: 8, unchanged: 0 });
    for (const f of await listAll(t, 'pushed')) expect(f.visibility).toEqual(['group:eng', 'user:ann']);
    const again = await cli(['push', dir, 'pushed', '--visibility', 'group:eng,user:ann', '--json']);
    expect(JSON.parse(again.stdout)).toMatchObject({ uploaded: 0, unchanged: 8 });
    const open = await cli(['push', dir, 'pushed', '--json']);
    expect(JSON.parse(open.stdout)).toMatchObject({ uploaded: 8, unchanged: 0 });
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
    expect(stopped.stderr).toContain('3 uploads were accepted before it; run the push again to resume');
    expect(await listAll(t, 'counted', key)).toHaveLength(3);

    await setAccountLimits(t.service.db, 'counted', { limits: { maxFiles: null } });
    await new Promise((r) => setTimeout(r, 200));
    const resumed = await cli(['push', six, 'counted', '--json'], { key });
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ uploaded: 3, unchanged: 3, ready: 6 });
    expect((await listAll(t, 'counted', key)).map((f) => f.path)).toEqual(['/f0.txt', '/f1.txt', '/f2.txt', '/f3.txt', '/f4.txt', '/f5.txt']);
  });

  it('a push killed midway is resumed by the next one, which uploads only what is missing', async () => {
    await workspace('killed');
    const many = await tree('killed', Object.fromEntries(Array.from({ length: 600 }, (_, i) => [`k/${String(i).padStart(3, '0')}.txt`, `killed ${i}\n`])));
    const first = start(['push', many, 'killed', '--concurrency', '1']);
    let held = 0;
    while (held < 20) {
      await new Promise((r) => setTimeout(r, 20));
      held = (await listAll(t, 'killed')).length;
    }
    first.child.kill('SIGKILL');
    expect((await first.done).code).toBeNull();
    // An upload the killed process had sent whole may still be accepted: let it land before counting.
    await new Promise((r) => setTimeout(r, 300));
    const before = (await listAll(t, 'killed')).length;
    expect(before).toBeGreaterThanOrEqual(20);
    expect(before).toBeLessThan(600);

    const resumed = await cli(['push', many, 'killed', '--json']);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(JSON.parse(resumed.stdout)).toMatchObject({ uploaded: 600 - before, unchanged: before, ready: 600, pending: 0 });
    const listed = await listAll(t, 'killed');
    expect(listed).toHaveLength(600);
    expect(listed.every((f) => f.status === 'ready')).toBe(true);
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
    const command = [process.execPath, ...CLI_ARGS, 'push', dir, 'progress'].map((a) => `'${a}'`).join(' ');
    const tty = await new Promise<CliRun>((resolve) => {
      const child = spawn('script', ['-qec', command, '/dev/null'], { cwd: ROOT, env: cliEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
      let stdout = '';
      child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
      child.on('close', (code) => resolve({ code, stdout, stderr: '' }));
    });
    expect(tty.code).toBe(0);
    expect(tty.stdout).toMatch(/uploading \[#+\] 20\/20 files, 1 uploaded/);
    expect(tty.stdout).toMatch(/ingesting \[#+\] 1\/1 files/);
    expect(tty.stdout).toContain('uploaded: 1  unchanged: 19');
  });

  it('--no-wait summarizes at once, counting the files still pending', async () => {
    await workspace('nowait');
    const dir = await tree('nowait', { 'a.txt': 'a\n', 'b/c.txt': 'c\n', 'b/d.md': '# d\n' });
    const run = await cli(['push', dir, 'nowait', '--no-wait', '--json']);
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ uploaded: 3, ready: 0, pending: 3 });
    await settled(t, 'nowait');
    expect(JSON.parse((await cli(['push', dir, 'nowait', '--json'])).stdout)).toMatchObject({ uploaded: 0, unchanged: 3, ready: 3, pending: 0 });
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

describe('workspaces', () => {
  it('creates, lists and deletes, in text and JSON', async () => {
    const created = await cli(['workspaces', 'create', 'made-here']);
    expect(created).toEqual({ code: 0, stdout: 'created workspace made-here\n', stderr: '' });
    const json = await cli(['--json', 'workspaces', 'create', 'made-json']);
    expect(JSON.parse(json.stdout)).toEqual({ name: 'made-json' });

    const listed = await cli(['workspaces', 'list', '--json']);
    expect(listed.code).toBe(0);
    const served = (await t.call('GET', '/v1/workspaces')).json.workspaces;
    expect(
      listed.stdout
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l)),
    ).toEqual(served);
    const text = await cli(['workspaces', 'list']);
    expect(text.stdout).toMatch(/^made-here\t\S+\tversion 0$/m);

    expect(await cli(['workspaces', 'delete', 'made-json'])).toEqual({ code: 0, stdout: 'deleted workspace made-json\n', stderr: '' });
    expect((await t.call('GET', '/v1/workspaces')).json.workspaces.map((w: { name: string }) => w.name)).not.toContain('made-json');
  });

  it.each([
    [['workspaces', 'create', 'made-here'], 'create workspace made-here: the service answered 409: workspace already exists: made-here'],
    [['workspaces', 'create', 'Bad Name'], /^create workspace Bad Name: the service answered 400: invalid request body: /],
    [['workspaces', 'delete', 'never-made'], 'delete workspace never-made: not found (404: no such workspace: never-made)'],
  ])('%j fails with the service reason', async (args, message) => {
    const run = await cli(args);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    if (typeof message === 'string') expect(run.stderr).toBe(`agent-vfs: ${message}\n`);
    else expect(run.stderr.slice('agent-vfs: '.length)).toMatch(message);
  });

  it('names the workspace quota and its limit (403)', async () => {
    const key = await t.newAccount('quota');
    await setAccountLimits(t.service.db, 'quota', { limits: { maxWorkspaces: 1 } });
    await new Promise((r) => setTimeout(r, 200));
    expect((await cli(['workspaces', 'create', 'only'], { key })).code).toBe(0);
    const run = await cli(['workspaces', 'create', 'second'], { key });
    expect(run).toEqual({
      code: 1,
      stdout: '',
      stderr: 'agent-vfs: create workspace second: forbidden (403: workspace quota reached: the plan allows 1 workspaces)\n',
    });
  });
});

describe('connection and credentials', () => {
  it('an unreachable host is named with its URL and cause', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const run = await cli(['workspaces', 'list'], { url });
    expect(run).toEqual({
      code: 1,
      stdout: '',
      stderr: `agent-vfs: cannot reach the service at ${url}: connection refused (ECONNREFUSED); check --url or AGENT_VFS_URL\n`,
    });
    const unknown = await cli(['ls', 'ws'], { url: 'http://no-such-host.invalid' });
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toMatch(
      /^agent-vfs: cannot reach the service at http:\/\/no-such-host\.invalid: host (not found \(ENOTFOUND\)|name lookup failed \(EAI_AGAIN\))/,
    );
  });

  it('a wrong key is a 401 that says which setting to check; a missing one is a usage error', async () => {
    const bad = await cli(['workspaces', 'list'], { key: 'svc_sk_wrong' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^agent-vfs: list workspaces: the service refused the key \(401: .+\); check --key or AGENT_VFS_KEY\n$/);
    const missing = await cli(['workspaces', 'list'], { key: null });
    expect(missing).toMatchObject({ code: 2, stdout: '' });
    expect(missing.stderr).toMatch(/^agent-vfs: no key: pass --key or set AGENT_VFS_KEY/);
    const noUrl = await cli(['workspaces', 'list'], { url: null });
    expect(noUrl).toEqual({ code: 2, stdout: '', stderr: 'agent-vfs: no service URL: pass --url or set AGENT_VFS_URL\n' });
  });

  it('--url and --key win over the environment, before or after the command', async () => {
    const url = `http://127.0.0.1:${await closedPort()}`;
    const run = await cli(['--url', t.url, 'workspaces', 'list', '--key', t.key, '--json'], { url, key: 'svc_sk_wrong' });
    expect(run.code, run.stderr).toBe(0);
  });

  it("usage errors exit 2 with commander's message", async () => {
    for (const args of [
      ['workspaces', 'create'],
      ['grep', 'ws', 'x', '--bogus'],
      ['grep', 'ws', 'x', '-A', 'two'],
      ['push', '.', 'ws', '--concurrency', '0'],
      ['nonsense'],
    ]) {
      const run = await cli(args);
      expect(run.code, args.join(' ')).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr).toMatch(/^error: /);
    }
    expect((await cli(['--help'])).code).toBe(0);
  });
});

describe('retries', () => {
  let limited: TestService;
  beforeAll(async () => {
    // Five management requests per second per credential: a push of a dozen files runs into 429.
    limited = await startTestService({ VFS_MANAGEMENT_RATE: '5' }, { realLimits: true });
    expect((await limited.call('POST', '/v1/workspaces', { body: { name: 'slow' } })).status).toBe(201);
  });
  afterAll(async () => limited?.stop());

  it('429 is retried after Retry-After until the push completes', async () => {
    await new Promise((r) => setTimeout(r, 1100));
    const dir = await tree('retried', Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`r${i}.txt`, `retry ${i}\n`])));
    const run = await cli(['push', dir, 'slow', '--json', '--concurrency', '6'], { url: limited.url, key: limited.key });
    expect(run.code, run.stderr).toBe(0);
    expect(JSON.parse(run.stdout)).toMatchObject({ uploaded: 12, ready: 12 });
    // Checked with a key of its own: the rate limit is per credential.
    const checker = (await issueManagementKey(limited.service.db, 'default')).key;
    expect((await listAll(limited, 'slow', checker)).map((f) => f.status)).toEqual(Array(12).fill('ready'));
  });

  it('gives up after the bounded attempts with the service reason', async () => {
    await new Promise((r) => setTimeout(r, 1100));
    const dir = await tree('given-up', Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`g${i}.txt`, `give up ${i}\n`])));
    const run = await cli(['push', dir, 'slow', '--retries', '0', '--concurrency', '8'], { url: limited.url, key: limited.key });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(
      /^agent-vfs: upload \/g\d+\.txt: gave up after 1 attempts: the service answered 429 each time \(rate limit reached for the .+; retry after \d+ s\)\n/,
    );
  });
});

describe('files list', () => {
  beforeAll(async () => {
    await workspace('paged');
    // More than one page of the listing (1000), so the command must follow the cursor.
    const paths = Array.from({ length: 1005 }, (_, i) => `d${i % 9}/f${String(i).padStart(4, '0')}.txt`);
    for (let i = 0; i < paths.length; i += 100) {
      for (const r of await Promise.all(paths.slice(i, i + 100).map((p) => put(t, 'paged', p, `${p}\n`)))) expect(r.status).toBe(202);
    }
    expect((await put(t, 'paged', 'bad.bin', Buffer.from([0, 1, 2]))).status).toBe(202);
    await settled(t, 'paged', 120_000);
  });

  it('prints every page, as JSON Lines with --json', async () => {
    const run = await cli(['files', 'list', 'paged', '--json']);
    expect(run.code, run.stderr).toBe(0);
    const lines = run.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(1006);
    expect(lines.map((l) => JSON.parse(l))).toEqual(await listAll(t, 'paged'));
  });

  it('filters by status, and prints one readable line per file without --json', async () => {
    const run = await cli(['files', 'list', 'paged', '--status', 'error']);
    expect(run.code).toBe(0);
    const [bad] = await listAll(t, 'paged').then((files) => files.filter((f) => f.status === 'error'));
    expect(bad.errorDetail).toMatch(/binary/);
    expect(run.stdout).toBe(`error            3  /bad.bin  (${bad.errorDetail})\n`);
    const ready = await cli(['files', 'list', 'paged', '--status', 'ready']);
    expect(ready.stdout.trimEnd().split('\n')).toHaveLength(1005);
    expect(ready.stdout.split('\n')[0]).toBe('ready           13  /d0/f0000.txt');
    expect((await cli(['files', 'list', 'paged', '--status', 'gone'])).code).toBe(2);
  });
});

describe('read tools', () => {
  beforeAll(async () => {
    await workspace('reads');
    const docs: Array<[string, string, string?]> = [
      ['docs/alpha.md', '# Alpha\nalpha beta\ngamma\nAlpha again\n'],
      ['docs/notes.txt', 'one\ntwo alpha\nthree\n'],
      ['src/main.rs', 'fn main() {\n    println!("alpha");\n}\n'],
      ['secret.md', 'for the eng group only\n', '?visibility=group:eng'],
    ];
    for (const [path, body, query] of docs) expect((await put(t, 'reads', path, body, {}, query ?? '')).status).toBe(202);
    await settled(t, 'reads');
  });

  it.each([
    [['ls', 'reads'], 'ls?'],
    [['ls', 'reads', '/docs'], 'ls?path=/docs'],
    [['find', 'reads', '**/*.md', '--head-limit', '1'], 'find?pattern=**/*.md&head_limit=1'],
    [['find', 'reads', '*.txt', '--path', '/docs', '--head_limit', '5'], 'find?pattern=*.txt&path=/docs&head_limit=5'],
    [['cat', 'reads', '/docs/alpha.md'], 'cat?path=/docs/alpha.md'],
    [['cat', 'reads', 'docs/alpha.md', '--offset', '2', '--limit', '2'], 'cat?path=docs/alpha.md&offset=2&limit=2'],
    [['grep', 'reads', 'alpha'], 'grep?pattern=alpha'],
    [['grep', 'reads', 'alpha', '--output-mode', 'content', '-i', '-C', '1'], 'grep?pattern=alpha&output_mode=content&-i=true&-C=1'],
    [['grep', 'reads', 'alpha', '--output_mode', 'count', '--glob', '*.md'], 'grep?pattern=alpha&output_mode=count&glob=*.md'],
    [
      ['grep', 'reads', 'ALPHA', '-i', '-A', '1', '-B', '0', '--output-mode', 'content', '-n', '--head-limit', '3'],
      'grep?pattern=ALPHA&-i=1&-A=1&-B=0&output_mode=content&-n=1&head_limit=3',
    ],
    [
      ['grep', 'reads', 'beta\\ngamma', '--multiline', '--path', '/docs', '--output-mode', 'content'],
      'grep?pattern=beta%5Cngamma&multiline=true&path=/docs&output_mode=content',
    ],
    [['grep', 'reads', 'alpha', '--type', 'rust', '--output-mode', 'content', '--offset', '0'], 'grep?pattern=alpha&type=rust&output_mode=content&offset=0'],
  ])('%j prints what the HTTP tool answers', async (args, query) => {
    const served = await t.call('GET', `/v1/workspaces/reads/${query}`);
    expect(served.status).toBe(200);
    expect(served.text).not.toBe('');
    const run = await cli(args);
    expect(run).toEqual({ code: 0, stdout: served.text, stderr: '' });
    const json = await cli([...args, '--json']);
    expect(JSON.parse(json.stdout)).toEqual({ text: served.text });
  });

  it.each([
    [
      ['grep', 'reads', 'x', '--output-mode', 'bogus'],
      /^grep in reads: the service answered 400: invalid output_mode: expected one of files_with_matches, content, count/,
    ],
    [['cat', 'reads', '/nope.md'], /^cat in reads: not found \(404: no such file: \/nope\.md\)$/],
    [['ls', 'nowhere'], /^ls in nowhere: not found \(404: no such workspace: nowhere\)$/],
  ])('%j fails with the tool error', async (args, message) => {
    const run = await cli(args);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr.slice('agent-vfs: '.length).trimEnd()).toMatch(message);
  });
});

describe('tokens', () => {
  it('mints a scoped token that reads what its claims allow, and revokes it', async () => {
    const minted = await cli(['tokens', 'mint', 'reads', '--claims', 'group:eng', '--ttl', '600', '--json']);
    expect(minted.code, minted.stderr).toBe(0);
    const token = JSON.parse(minted.stdout);
    expect(token).toMatchObject({ id: expect.any(String), token: expect.stringMatching(/^svc_at_/), claims: ['group:eng'] });
    expect(Date.parse(token.expiresAt) - Date.now()).toBeGreaterThan(500_000);

    const served = await t.call('GET', '/v1/workspaces/reads/cat?path=/secret.md', { key: token.token });
    expect(served.status).toBe(200);
    expect(await cli(['cat', 'reads', '/secret.md', '--key', token.token])).toEqual({ code: 0, stdout: served.text, stderr: '' });
    const management = await cli(['workspaces', 'list'], { key: token.token });
    expect(management).toEqual({
      code: 1,
      stdout: '',
      stderr: 'agent-vfs: list workspaces: forbidden (403: a scoped token may only call the read tools (ls, find, cat, grep))\n',
    });

    const other = await cli(['tokens', 'mint', 'reads', '--claims', 'user:bob']);
    expect(other.code).toBe(0);
    const [plaintext, id] = other.stdout.split('\n');
    expect(plaintext).toMatch(/^svc_at_/);
    expect(id).toMatch(/^id: [0-9a-f-]{36}$/);
    expect(other.stdout).toMatch(/\nclaims: user:bob\nexpires: \S+\n$/);
    const hidden = await cli(['cat', 'reads', '/secret.md', '--key', plaintext]);
    expect(hidden.code).toBe(1);
    expect(hidden.stderr).toMatch(/not found \(404: no such file: \/secret\.md\)/);

    expect(await cli(['tokens', 'revoke', token.id])).toEqual({ code: 0, stdout: `revoked token ${token.id}\n`, stderr: '' });
    expect(JSON.parse((await cli(['tokens', 'revoke', token.id, '--json'])).stdout)).toEqual({ revoked: token.id });
    const revoked = await cli(['cat', 'reads', '/secret.md', '--key', token.token]);
    expect(revoked.code).toBe(1);
    expect(revoked.stderr).toMatch(/^agent-vfs: cat in reads: the service refused the key \(401: .+\); check --key or AGENT_VFS_KEY\n$/);
  });

  it.each([
    [['tokens', 'mint', 'reads', '--ttl', '30'], /^mint a token for reads: the service answered 400: invalid request body: ttlSeconds/],
    [['tokens', 'mint', 'nowhere'], /^mint a token for nowhere: not found \(404: no such workspace: nowhere\)$/],
    [['tokens', 'revoke', '00000000-0000-4000-8000-000000000000'], /^revoke token 0{8}-.*: not found \(404: no such token: /],
  ])('%j fails with the service reason', async (args, message) => {
    const run = await cli(args);
    expect(run.code).toBe(1);
    expect(run.stderr.slice('agent-vfs: '.length).trimEnd()).toMatch(message);
  });
});

describe('audit export', () => {
  const served = async (): Promise<unknown[]> => (await t.call('GET', '/v1/workspaces/reads/audit?limit=1000')).json.events;

  it('prints every event as JSON Lines, and only later ones with --after', async () => {
    const run = await cli(['audit', 'export', 'reads']);
    expect(run.code, run.stderr).toBe(0);
    const events = await served();
    expect(events.length).toBeGreaterThan(10);
    expect(run.stdout).toBe(events.map((e) => JSON.stringify(e) + '\n').join(''));
    expect(await cli(['audit', 'export', 'reads', '--after', '2999-01-01T00:00:00Z'])).toEqual({ code: 0, stdout: '', stderr: '' });
    const bad = await cli(['audit', 'export', 'reads', '--after', 'yesterday']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^agent-vfs: export the audit log of reads: the service answered 400: invalid after: /);
  });

  it('--follow prints new events as they come until interrupted', async () => {
    const before = (await served()).length;
    const follow = start(['audit', 'export', 'reads', '--follow', '--interval', '0.2']);
    const lines = () =>
      follow
        .stdout()
        .split('\n')
        .filter((l) => l !== '');
    const until = async (ok: () => boolean) => {
      const deadline = Date.now() + 20_000;
      while (!ok() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(ok()).toBe(true);
    };
    await until(() => lines().length === before);
    expect((await t.call('GET', '/v1/workspaces/reads/grep?pattern=followed')).status).toBe(200);
    await until(() => lines().length === before + 1);
    expect(JSON.parse(lines()[before])).toMatchObject({ tool: 'grep', params: expect.objectContaining({ pattern: 'followed' }) });
    follow.child.kill('SIGINT');
    expect((await follow.done).code).toBe(0);
  });
});

describe('pieces', () => {
  // A `+N s` header is an HTTP date N seconds from when the case runs.
  it.each([
    ['2', 2, 2],
    ['0', 0, 0],
    [' ', null, null],
    ['soon', null, null],
    // Whole seconds from now, rounded up (a second may pass while the case runs).
    ['+30 s', 29, 30],
    ['-30 s', 0, 0],
  ])('Retry-After %j waits from %j to %j s', (header, least, most) => {
    const relative = /^([+-]\d+) s$/.exec(header);
    const got = retryAfterSeconds(relative === null ? header : new Date(Date.now() + Number(relative[1]) * 1000).toUTCString());
    if (least === null) expect(got).toBeNull();
    else {
      expect(got).toBeGreaterThanOrEqual(least);
      expect(got).toBeLessThanOrEqual(most!);
    }
  });

  it.each([
    ['notes.md', 'text/plain; charset=utf-8'],
    ['REPORT.PDF', 'application/pdf'],
    ['deck.pptx', 'application/vnd.openxmlformats-officedocument.presentationml.presentation'],
    ['book.epub', 'application/epub+zip'],
    ['Makefile', 'application/octet-stream'],
    ['main.c', 'application/octet-stream'],
  ])('%s is sent as %s', (name, type) => {
    expect(contentTypeOf(name)).toBe(type);
  });

  it.each([
    ['a.txt', '/a.txt'],
    ['dir/sub/b.md', '/dir/sub/b.md'],
    ['cafe\u0301/x.txt', '/caf\u00e9/x.txt'],
  ])('%s is %s in the workspace', (relative, remote) => {
    expect(remotePath(relative)).toBe(remote);
  });
});
