/**
 * `agent-vfs bench` against a real service on port 0: with `--corpus` it fills the workspace
 * first, each scenario runs and is answered, `--json` is one document of the documented shape
 * (checked against a JSON Schema), the upload scenario leaves nothing behind, and a target that
 * cannot be measured (stopped, or refusing the key) ends with a non-zero status and says why.
 */
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type CliRun, startCli } from './helpers/process.js';
import { listAll, startTestService, type TestService } from './helpers/service.js';

let t: TestService;
let corpus: string;

/** The shape `--json` promises (README, "Benchmarks"; docs/cli.md). */
const REPORT_SCHEMA = {
  type: 'object',
  required: ['url', 'workspace', 'connections', 'pipelining', 'durationSeconds', 'scenarios', 'warnings'],
  properties: {
    url: { type: 'string' },
    workspace: { type: 'string' },
    connections: { type: 'integer', minimum: 1 },
    pipelining: { type: 'integer', minimum: 1 },
    durationSeconds: { type: 'integer', minimum: 1 },
    warnings: { type: 'array', items: { type: 'string' } },
    scenarios: {
      type: 'array',
      minItems: 1,
      items: {
        type: 'object',
        required: ['name', 'request', 'requestsPerSecond', 'latencyMs', 'non2xx', 'errors', 'timeouts', 'bytesPerSecond', 'statuses', 'requests'],
        properties: {
          name: { enum: ['cat', 'ls', 'find', 'grep-selective', 'grep-broad', 'agent-mix', 'mcp-grep', 'upload'] },
          request: { type: 'string', pattern: '^(GET|POST|PUT) /v1/workspaces/' },
          requestsPerSecond: { type: 'number', minimum: 0 },
          latencyMs: {
            type: 'object',
            required: ['p50', 'p90', 'p99', 'max'],
            properties: { p50: { type: 'number' }, p90: { type: 'number' }, p99: { type: 'number' }, max: { type: 'number' } },
          },
          non2xx: { type: 'integer', minimum: 0 },
          errors: { type: 'integer', minimum: 0 },
          timeouts: { type: 'integer', minimum: 0 },
          bytesPerSecond: { type: 'number', minimum: 0 },
          requests: { type: 'integer', minimum: 0 },
          statuses: { type: 'object', additionalProperties: { type: 'integer' } },
        },
      },
    },
  },
};

/** Runs the command line with `args` and none of its environment variables (URL and key are flags here). */
function cli(args: string[]): Promise<CliRun> {
  const env = { ...process.env };
  delete env.AGENT_VFS_URL;
  delete env.AGENT_VFS_KEY;
  return startCli(args, env).done;
}

beforeAll(async () => {
  t = await startTestService();
  corpus = await mkdtemp(join(tmpdir(), 'vfs-bench-corpus-'));
  for (let d = 0; d < 4; d++) {
    await mkdir(join(corpus, `src/dir${d}`), { recursive: true });
    for (let f = 0; f < 10; f++) {
      const lines = Array.from({ length: 150 }, (_, i) => `export function handler${d}_${f}_${i}(widget: number) { return widget + ${i}; }`);
      await writeFile(join(corpus, `src/dir${d}/file${f}.ts`), lines.join('\n') + '\n');
    }
  }
  await writeFile(join(corpus, 'README.md'), '# corpus\n\nwidget handlers for the benchmark\n');
});

afterAll(async () => {
  await t?.stop();
  if (corpus !== undefined) await rm(corpus, { recursive: true, force: true });
});

describe('agent-vfs bench', () => {
  test('fills the workspace from --corpus, runs every scenario, and writes the documented JSON', async () => {
    const scenarios = ['cat', 'ls', 'find', 'grep-selective', 'grep-broad', 'agent-mix', 'mcp-grep', 'upload'];
    const run = await cli([
      'bench',
      ...['--url', t.url, '--key', t.key, '--corpus', corpus, '--workspace', 'loadtest', '--duration', '1', '--connections', '2', '--json'],
      ...scenarios.flatMap((s) => ['--scenario', s]),
    ]);
    expect(run.stderr).not.toContain('warning');
    expect(run.code).toBe(0);
    const report = JSON.parse(run.stdout);
    const validate = new Ajv2020({ strict: true }).compile(REPORT_SCHEMA);
    expect(validate(report), JSON.stringify(validate.errors)).toBe(true);
    expect(report.scenarios.map((s: { name: string }) => s.name)).toEqual(scenarios);
    for (const s of report.scenarios) {
      expect(s.requests, s.name).toBeGreaterThan(0);
      expect(s.non2xx + s.errors + s.timeouts, s.name).toBe(0);
      expect(
        Object.keys(s.statuses).every((status) => status.startsWith('2')),
        s.name,
      ).toBe(true);
    }
    const files = await listAll(t, 'loadtest');
    expect(files.filter((f) => f.path.startsWith('/src/')).length).toBe(40);
    // The upload scenario's files are deleted at the end.
    expect(files.filter((f) => f.path.startsWith('/agent-vfs-bench/'))).toEqual([]);
  });

  test('prints one table per scenario, pipelined too, against an existing workspace', async () => {
    const run = await cli([
      'bench',
      '--url',
      t.url,
      '--key',
      t.key,
      '--workspace',
      'loadtest',
      '--scenario',
      'cat',
      '--scenario',
      'ls',
      '--duration',
      '1',
      '--pipelining',
      '4',
    ]);
    expect(run.code).toBe(0);
    const tables = run.stdout.split('\n\n').filter((block) => block.trim() !== '');
    expect(tables.map((table) => table.split(':')[0])).toEqual(['cat', 'ls']);
    for (const table of tables) {
      expect(table).toContain('pipelining 4');
      expect(table).toMatch(/requests\/s +p50 ms +p90 ms +p99 ms +max ms +non-2xx +errors +timeouts +bytes\/s/);
      expect(table.split('\n')[2]).toMatch(/^ +[\d,]+ +\d+ +\d+ +\d+ +\d+ +0 +0 +0 +[\d.]+ (B|KiB|MiB)$/);
    }
  });

  test('a stopped service, a refused key, a missing workspace and an unknown scenario end non-zero with the reason', async () => {
    const closed = await startTestService();
    const url = closed.url;
    await closed.stop();
    const stopped = await cli(['bench', '--url', url, '--key', t.key, '--workspace', 'loadtest', '--duration', '1']);
    expect(stopped.code).toBe(1);
    expect(stopped.stderr).toContain(`cannot reach the service at ${url}: connection refused`);

    const wrongKey = `svc_sk_${'A'.repeat(43)}${'B'.repeat(6)}`;
    const refused = await cli(['bench', '--url', t.url, '--key', wrongKey, '--workspace', 'loadtest', '--duration', '1']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/refused the key \(401/);

    const missing = await cli(['bench', '--url', t.url, '--key', t.key, '--workspace', 'no-such-workspace', '--duration', '1']);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/no-such-workspace/);

    const neither = await cli(['bench', '--url', t.url, '--key', t.key]);
    expect(neither.code).not.toBe(0);
    expect(neither.stderr).toContain('--workspace');

    const unknown = await cli(['bench', '--url', t.url, '--key', t.key, '--workspace', 'loadtest', '--scenario', 'cat', '--scenario', 'bogus']);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain("argument 'bogus' is invalid. expected one of cat, ls, find");
  });
});
