/** The Prometheus metrics: after a known sequence of requests, the counters and histograms hold the expected counts. */
import { openReaderCount } from '../engine/reader-cache.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setAccountLimits } from '../db/accounts.js';
import { put, settled, startTestService, type TestService } from './helpers/service.js';

let t: TestService;
beforeAll(async () => {
  t = await startTestService({ VFS_METRICS_PORT: '0' });
});
afterAll(async () => t?.stop());

/** The value of one sample (`name{labels} value`), or undefined when the scrape has none. */
function sample(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(series + ' ')) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

async function scrape(): Promise<string> {
  const r = await fetch(t.service.metricsUrl!);
  expect(r.status).toBe(200);
  expect(r.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
  return r.text();
}

describe('metrics', () => {
  it('are off unless VFS_METRICS_PORT is set', async () => {
    const plain = await startTestService();
    try {
      expect(plain.service.metricsUrl).toBeNull();
    } finally {
      await plain.stop();
    }
  });

  it('count extractions by type and outcome, requests by route and status, read latencies by tool and mode, what greps read, refusals, audit commits, the ingest queue and shard bytes', async () => {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'm' } })).status).toBe(201);
    for (const name of ['a.txt', 'b.txt']) expect((await put(t, 'm', name, `alpha ${name}\n`)).status).toBe(202);
    expect((await put(t, 'm', 'c.png', Buffer.from('\x89PNG\r\n\x1a\n\0\0', 'latin1'))).status).toBe(202);
    await settled(t, 'm');
    const before = await scrape();
    // The uploads above were extracted: two text files, one refused.
    expect(sample(before, 'vfs_extraction_seconds_count{type="text",outcome="ok"}')).toBe(2);
    expect(sample(before, 'vfs_extraction_seconds_count{type="other",outcome="error"}')).toBe(1);
    const count = (series: string, text: string) => sample(text, series) ?? 0;

    for (let i = 0; i < 3; i++) expect((await t.call('GET', '/v1/workspaces/m/ls')).status).toBe(200);
    for (let i = 0; i < 2; i++) expect((await t.call('GET', '/v1/workspaces/m/grep?pattern=alpha&output_mode=content')).status).toBe(200);
    expect((await t.call('GET', '/v1/workspaces/m/grep?pattern=alpha')).status).toBe(200);
    expect((await t.call('GET', '/v1/workspaces/m/cat?path=/missing')).status).toBe(404);
    expect((await t.call('GET', '/v1/workspaces/m/ls', { key: 'svc_at_nonsense' })).status).toBe(401);
    const key = await t.newAccount('metered');
    expect((await t.call('POST', '/v1/workspaces', { key, body: { name: 'm' } })).status).toBe(201);
    await setAccountLimits(t.service.db, 'metered', { limits: { readRatePerCredential: 2, readRatePerAccount: 100 } });
    await new Promise((r) => setTimeout(r, 300)); // the change reaches the service by NOTIFY
    const burst = await Promise.all(Array.from({ length: 3 }, () => t.call('GET', '/v1/workspaces/m/ls', { key })));
    expect(burst.map((r) => r.status).sort()).toEqual([200, 200, 429]);

    const after = await scrape();
    const delta = (series: string) => count(series, after) - count(series, before);
    expect(delta('vfs_http_requests_total{method="GET",route="/v1/workspaces/:ws/ls",status="200"}')).toBe(5);
    expect(delta('vfs_http_requests_total{method="GET",route="/v1/workspaces/:ws/ls",status="401"}')).toBe(1);
    expect(delta('vfs_http_requests_total{method="GET",route="/v1/workspaces/:ws/ls",status="429"}')).toBe(1);
    expect(delta('vfs_http_requests_total{method="GET",route="/v1/workspaces/:ws/cat",status="404"}')).toBe(1);
    expect(delta('vfs_read_seconds_count{tool="grep",output_mode="content"}')).toBe(2);
    expect(delta('vfs_read_seconds_count{tool="grep",output_mode="files_with_matches"}')).toBe(1);
    expect(delta('vfs_read_seconds_count{tool="ls",output_mode=""}')).toBe(5);
    expect(delta('vfs_read_seconds_count{tool="cat",output_mode=""}')).toBe(1);
    // Three greps, each over both files (12 bytes of text each).
    expect(delta('vfs_grep_candidates_total')).toBe(6);
    expect(delta('vfs_grep_verified_bytes_total')).toBe(72);
    expect(delta('vfs_auth_failures_total')).toBe(1);
    expect(delta('vfs_rate_limited_total{scope="read"}')).toBe(1);
    // Nine audited reads, in one or more group commits.
    expect(delta('vfs_audit_batch_events_sum')).toBe(9);
    expect(delta('vfs_audit_batch_events_count')).toBeGreaterThanOrEqual(1);
    expect(delta('vfs_audit_commit_seconds_count')).toBe(delta('vfs_audit_batch_events_count'));
    expect(sample(after, 'vfs_ingest_queue_jobs')).toBe(0);
    expect(sample(after, 'vfs_ingest_oldest_job_seconds')).toBe(0);
    expect(sample(after, 'vfs_shard_bytes')).toBeGreaterThan(0);
    expect(after).toMatch(/^vfs_nodejs_eventloop_lag_seconds \d/m);
  });

  it('show the ingest queue while a job waits', async () => {
    expect((await t.call('POST', '/v1/workspaces', { body: { name: 'q' } })).status).toBe(201);
    const { rows } = await t.service.db.owner.query<{ id: string; account_id: string }>("SELECT id, account_id FROM workspaces WHERE name = 'q'");
    // A job not due for an hour, made ten seconds ago: no worker claims it meanwhile.
    await t.service.db.owner.query(
      "INSERT INTO ingest_jobs (account_id, workspace_id, path, generation, run_after, created_at) VALUES ($1, $2, '/waiting.txt', 1, now() + interval '1 hour', now() - interval '10 seconds')",
      [rows[0].account_id, rows[0].id],
    );
    const text = await scrape();
    expect(sample(text, 'vfs_ingest_queue_jobs')).toBe(1);
    expect(sample(text, 'vfs_ingest_oldest_job_seconds')).toBeGreaterThanOrEqual(10);
    await t.service.db.owner.query("DELETE FROM ingest_jobs WHERE path = '/waiting.txt'");
  });

  it('carry no workspace, path or credential in their labels, however many workspaces are read', async () => {
    const names = ['label-probe-one', 'label-probe-two'];
    for (const name of names) {
      expect((await t.call('POST', '/v1/workspaces', { body: { name } })).status).toBe(201);
      expect((await put(t, name, 'label-probe-dir/label-probe-file.txt', 'label probe\n')).status).toBe(202);
      await settled(t, name);
      for (const tool of ['ls', 'grep?pattern=probe', 'find?pattern=**', 'cat?path=/label-probe-dir/label-probe-file.txt']) {
        expect((await t.call('GET', `/v1/workspaces/${name}/${tool}`)).status).toBe(200);
      }
    }
    const { rows } = await t.service.db.owner.query<{ id: string }>('SELECT id FROM workspaces WHERE name = ANY($1)', [names]);
    const text = await scrape();
    for (const secret of ['label-probe', t.key, ...rows.map((r) => r.id)]) expect(text).not.toContain(secret);
  });

  it("show each kind of thread's heap, open shards and CPU time", async () => {
    // Worker threads report every second.
    const kinds = ['http', 'read', 'ingest'];
    const missing = (text: string) => kinds.filter((thread) => sample(text, `vfs_thread_heap_used_bytes{thread="${thread}"}`) === undefined);
    let text = await scrape();
    for (let i = 0; i < 120 && missing(text).length > 0; i++) {
      await new Promise((r) => setTimeout(r, 250));
      text = await scrape();
    }
    expect(missing(text)).toEqual([]);
    for (const thread of kinds) {
      expect(sample(text, `vfs_thread_heap_used_bytes{thread="${thread}"}`)).toBeGreaterThan(1_000_000);
      expect(sample(text, `vfs_thread_heap_total_bytes{thread="${thread}"}`)).toBeGreaterThanOrEqual(
        sample(text, `vfs_thread_heap_used_bytes{thread="${thread}"}`)!,
      );
      // Every thread holds some buffers (its modules' and its channels'); none holds a gigabyte.
      expect(sample(text, `vfs_thread_external_bytes{thread="${thread}"}`)).toBeGreaterThan(0);
      expect(sample(text, `vfs_thread_external_bytes{thread="${thread}"}`)).toBeLessThan(1e9);
    }
    // The HTTP thread's count is this test's thread's own (the service runs in it).
    expect((await t.call('GET', '/v1/workspaces/m/ls')).status).toBe(200);
    const open = openReaderCount();
    expect(open).toBeGreaterThanOrEqual(1);
    expect(sample(await scrape(), 'vfs_open_shards{thread="http"}')).toBe(open);
    expect(sample(text, 'vfs_open_shards{thread="read"}')).toBeGreaterThanOrEqual(0);
    expect(sample(text, 'vfs_open_shards{thread="ingest"}')).toBeGreaterThanOrEqual(0);

    // Each thread has run (loading its modules at least), and together they used no more than the process.
    const cpu = (thread: string) => sample(text, `vfs_thread_cpu_seconds{thread="${thread}"}`)!;
    for (const thread of kinds) expect(cpu(thread)).toBeGreaterThan(0.001);
    expect(cpu('http') + cpu('read') + cpu('ingest')).toBeLessThanOrEqual(sample(text, 'vfs_process_cpu_seconds_total')!);
  });

  it('serve only GET /metrics on their port', async () => {
    const url = new URL(t.service.metricsUrl!);
    expect((await fetch(`${url.origin}/other`)).status).toBe(404);
    expect((await fetch(url, { method: 'POST' })).status).toBe(404);
  });
});
