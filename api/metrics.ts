/**
 * Metrics in Prometheus's text format (prom-client), served on a port of their own
 * (VFS_METRICS_PORT; off by default) so that a scraper never shares the agents' port or its
 * credentials. What is counted where:
 *
 * - `vfs_http_requests_total{method,route,status}`: every response, by its route pattern
 *   (api/http/in-flight.ts sees each request start and end);
 * - `vfs_read_seconds{tool,output_mode}`: read-tool calls, HTTP and MCP, from admission to the
 *   committed audit event;
 * - `vfs_grep_candidates_total`, `vfs_grep_verified_bytes_total`: what the greps read;
 * - `vfs_rate_limited_total{scope}`, `vfs_auth_failures_total`: refusals at the gate (gate/guard.ts);
 * - `vfs_shared_limit_batch_checks`, `vfs_shared_limit_seconds`, `vfs_shared_limit_errors_total`:
 *   the round trips to the limits shared by the nodes (VFS_CLUSTER_LIMITS=on, gate/shared-limits.ts);
 * - `vfs_audit_batch_events`, `vfs_audit_commit_seconds`: the audit log's group commits;
 * - `vfs_extraction_seconds{type,outcome}`: extractions, reported by the ingest thread;
 * - `vfs_ingest_queue_jobs`, `vfs_ingest_oldest_job_seconds`, `vfs_shard_bytes`: read when
 *   scraped, from PostgreSQL and the shard directories;
 * - `vfs_thread_heap_used_bytes{thread}`, `vfs_thread_heap_total_bytes{thread}`,
 *   `vfs_thread_external_bytes{thread}`, `vfs_open_shards{thread}`: each kind of thread's V8 heap,
 *   the buffers its objects hold outside it, and its open shards (core/thread-stats.ts), the
 *   read threads summed;
 * - prom-client's process metrics, event-loop lag among them.
 */
import { createServer, type Server } from 'node:http';
import { Counter, collectDefaultMetrics, Gauge, Histogram, Registry } from 'prom-client';
import type { ThreadStat } from '../core/thread-stats.js';

/** What the gauges read when scraped. */
export interface MetricSources {
  /** Jobs waiting or running, and the age of the oldest in seconds (0 when none). */
  ingestQueue(): Promise<{ jobs: number; oldestSeconds: number }>;
  /** Bytes of every workspace's shard files on disk. */
  shardBytes(): Promise<number>;
  /** The state of each thread (core/thread-stats.ts). */
  threads(): ThreadStat[];
}

/** Upper bounds in seconds of the latency histograms' buckets (recent-reads.ts counts in the same ones). */
export const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** The service's metrics. */
export class Metrics {
  readonly registry = new Registry();
  readonly requests = new Counter({
    name: 'vfs_http_requests_total',
    help: 'HTTP responses by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [this.registry],
  });
  readonly reads = new Histogram({
    name: 'vfs_read_seconds',
    help: 'Read-tool calls (HTTP and MCP), from admission to the committed audit event, by tool and grep output mode',
    labelNames: ['tool', 'output_mode'] as const,
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly rateLimited = new Counter({
    name: 'vfs_rate_limited_total',
    help: 'Requests refused by a rate limit or the failed-authentication lock',
    labelNames: ['scope'] as const,
    registers: [this.registry],
  });
  readonly authFailures = new Counter({ name: 'vfs_auth_failures_total', help: 'Failed authentications', registers: [this.registry] });
  readonly sharedLimitBatch = new Histogram({
    name: 'vfs_shared_limit_batch_checks',
    help: 'Rate-limit checks per round trip to the limits shared by the nodes',
    buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
    registers: [this.registry],
  });
  readonly sharedLimitSeconds = new Histogram({
    name: 'vfs_shared_limit_seconds',
    help: 'Time of one round trip to the rate limits shared by the nodes',
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });
  readonly sharedLimitErrors = new Counter({
    name: 'vfs_shared_limit_errors_total',
    help: "Round trips to the shared limits that failed (the node's own limits decided alone)",
    registers: [this.registry],
  });
  readonly auditBatch = new Histogram({
    name: 'vfs_audit_batch_events',
    help: 'Audit events per group commit',
    buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000],
    registers: [this.registry],
  });
  readonly grepCandidates = new Counter({
    name: 'vfs_grep_candidates_total',
    help: 'Candidate files of the greps that ended (after the index and the filters)',
    registers: [this.registry],
  });
  readonly grepVerifiedBytes = new Counter({
    name: 'vfs_grep_verified_bytes_total',
    help: 'Text bytes the greps that ended verified with the regex',
    registers: [this.registry],
  });
  readonly extractions = new Histogram({
    name: 'vfs_extraction_seconds',
    help: 'Extractions by file type (pdf, docx, ..., text, other) and outcome (ok, error, capped: the time or memory cap)',
    labelNames: ['type', 'outcome'] as const,
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
    registers: [this.registry],
  });
  readonly auditCommit = new Histogram({
    name: 'vfs_audit_commit_seconds',
    help: 'Time to commit one batch of audit events',
    buckets: LATENCY_BUCKETS,
    registers: [this.registry],
  });

  constructor(sources: MetricSources) {
    collectDefaultMetrics({ register: this.registry, prefix: 'vfs_' });
    // Read when scraped.
    const gauge = (name: string, help: string, read: () => Promise<number>): void => {
      new Gauge({
        name,
        help,
        registers: [this.registry],
        async collect() {
          this.set(await read());
        },
      });
    };
    // The two queue gauges are collected together (a scrape collects every metric at once):
    // one query serves both.
    let queue: ReturnType<MetricSources['ingestQueue']> | null = null;
    const readQueue = (): ReturnType<MetricSources['ingestQueue']> =>
      (queue ??= sources.ingestQueue().finally(() => {
        queue = null;
      }));
    gauge('vfs_ingest_queue_jobs', 'Ingest jobs waiting or running', async () => (await readQueue()).jobs);
    gauge('vfs_ingest_oldest_job_seconds', 'Age of the oldest ingest job waiting or running (0 when none)', async () => (await readQueue()).oldestSeconds);
    gauge('vfs_shard_bytes', 'Bytes of the shard files on disk', () => sources.shardBytes());
    const byThread = (name: string, help: string, value: (stat: ThreadStat) => number | null): void => {
      new Gauge({
        name,
        help,
        labelNames: ['thread'] as const,
        registers: [this.registry],
        collect() {
          this.reset();
          for (const stat of sources.threads()) {
            const v = value(stat);
            if (v !== null) this.inc({ thread: stat.kind }, v);
          }
        },
      });
    };
    byThread('vfs_thread_heap_used_bytes', 'V8 heap in use, by kind of thread (read threads summed)', (s) => s.heapUsedBytes);
    byThread('vfs_thread_heap_total_bytes', 'V8 heap reserved, by kind of thread (read threads summed)', (s) => s.heapTotalBytes);
    byThread('vfs_thread_external_bytes', 'Buffers and ArrayBuffers held outside the V8 heap, by kind of thread (read threads summed)', (s) => s.externalBytes);
    byThread('vfs_open_shards', 'Shards held open, by kind of thread (read threads summed)', (s) => s.openShards);
    byThread(
      'vfs_thread_cpu_seconds',
      "CPU time used by each kind of thread since it started (read threads summed; Linux only); the process's other threads (garbage collection, compilation, the I/O pool) make up the rest of vfs_process_cpu_seconds_total",
      (s) => s.cpuSeconds,
    );
  }
}

/** A listening metrics server. */
export interface MetricsServer {
  port: number;
  close(): Promise<void>;
}

/** Serves `GET /metrics` (and nothing else) on host:port; port 0 picks a free one. */
export function startMetricsServer(metrics: Metrics, host: string, port: number): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end('only GET /metrics is served here\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
      (error: unknown) =>
        res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end(`metrics failed: ${error instanceof Error ? error.message : String(error)}\n`),
    );
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      const address = server.address();
      resolve({
        port: typeof address === 'object' && address !== null ? address.port : port,
        close: () => new Promise((done) => server.close(() => done())),
      });
    });
  });
}
