/**
 * The same `grep` and `cat` calls through the MCP endpoint and through the HTTP tools, side by
 * side in one run.
 *
 *   node --import tsx bench/mcp-http.ts <corpus-dir> <data-dir> [runs=40]
 *
 * <data-dir> is a data directory holding the corpus in workspace `bench` (as bench/grep-http.ts
 * leaves it; uploaded here when it does not exist). Each call is made `runs` times through the
 * HTTP tool, through MCP's 2025 generation (a `tools/call` with the MCP-Protocol-Version
 * header, after the handshake) and through 2026-07-28 (the version and client facts in the
 * request's `_meta`), the three alternating so that the machine's drift falls on all alike. A
 * call is timed from the request to the whole body received over a kept-alive connection;
 * the MCP answer's text is checked equal to the HTTP answer. Reports each way's median and
 * what MCP adds (ms, and as a ratio of the HTTP median).
 */
import { existsSync } from 'node:fs';
import { call, startBenchService, uploadCorpus } from './lib.js';

const [corpus, dataDir, runsArg] = process.argv.slice(2);
if (corpus === undefined || dataDir === undefined) {
  process.stderr.write('usage: node --import tsx bench/mcp-http.ts <corpus-dir> <data-dir> [runs]\n');
  process.exit(2);
}
const runs = Number(runsArg ?? 40);

/** Calls an agent makes: selective greps in two modes, and cats of 100 lines. */
const CALLS: Array<{ kind: string; tool: 'grep' | 'cat'; args: Record<string, string | number> }> = [
  { kind: 'selective grep', tool: 'grep', args: { pattern: 'sched_clock_register' } },
  { kind: 'selective grep', tool: 'grep', args: { pattern: 'sched_clock_register', output_mode: 'content' } },
  { kind: 'selective grep', tool: 'grep', args: { pattern: 'EXPORT_SYMBOL_GPL\\(kmem_cache_alloc', output_mode: 'content' } },
  { kind: 'selective grep -i', tool: 'grep', args: { pattern: 'Linus Torvalds', '-i': 'true', head_limit: 50 } },
  { kind: 'cat 100 lines', tool: 'cat', args: { path: '/kernel/sched/core.c', offset: 1000, limit: 100 } },
  { kind: 'cat 100 lines', tool: 'cat', args: { path: '/Documentation/process/coding-style.rst', offset: 1, limit: 100 } },
];

const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const JSON_HEADERS = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
const LEGACY = { ...JSON_HEADERS, 'mcp-protocol-version': '2025-11-25' };
const MODERN = { ...JSON_HEADERS, 'mcp-protocol-version': '2026-07-28', 'mcp-method': 'tools/call' };
const MODERN_META = {
  'io.modelcontextprotocol/protocolVersion': '2026-07-28',
  'io.modelcontextprotocol/clientCapabilities': {},
  'io.modelcontextprotocol/clientInfo': { name: 'bench', version: '1' },
};

const fresh = !existsSync(dataDir);
const service = await startBenchService({ DATA_DIR: dataDir, VFS_READ_THREADS: '2' });
try {
  if (fresh) await uploadCorpus(service, corpus);
  const mcpPath = '/v1/workspaces/bench/mcp';
  const handshake = await call(
    service.url,
    'POST',
    mcpPath,
    service.key,
    JSON.stringify({
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'bench', version: '1' } },
    }),
    JSON_HEADERS,
  );
  if (handshake.status !== 200) throw new Error(`initialize: ${handshake.status} ${handshake.body.toString()}`);
  // Steady state, as in bench/grep-http.ts: every read thread holds the shard's catalog.
  for (let i = 0; i < 3; i++) await call(service.url, 'GET', `/v1/workspaces/bench/grep?pattern=${encodeURIComponent('\\x00')}&output_mode=count`, service.key);

  const rows = [];
  let id = 1;
  for (const { kind, tool, args } of CALLS) {
    const query = new URLSearchParams(Object.entries(args).map(([k, v]): [string, string] => [k, String(v)])).toString();
    const http = async (): Promise<string> => {
      const r = await call(service.url, 'GET', `/v1/workspaces/bench/${tool}?${query}`, service.key);
      if (r.status !== 200) throw new Error(`${tool} ${query}: ${r.status} ${r.body.toString()}`);
      return r.body.toString();
    };
    // JSON arguments, as a client sends them: numbers and booleans typed.
    const typed = Object.fromEntries(Object.entries(args).map(([k, v]) => [k, v === 'true' ? true : v]));
    const mcp = async (modern: boolean): Promise<string> => {
      const params = { name: tool, arguments: typed, ...(modern ? { _meta: MODERN_META } : {}) };
      const body = JSON.stringify({ jsonrpc: '2.0', id: id++, method: 'tools/call', params });
      const r = await call(service.url, 'POST', mcpPath, service.key, body, modern ? { ...MODERN, 'mcp-name': tool } : LEGACY);
      const reply = JSON.parse(r.body.toString()) as { result?: { content: Array<{ text: string }>; isError?: boolean }; error?: unknown };
      if (r.status !== 200 || reply.result === undefined || reply.result.isError === true) throw new Error(`mcp ${tool}: ${r.status} ${r.body.toString()}`);
      return reply.result.content[0].text;
    };
    const expected = await http();
    if ((await mcp(false)) !== expected || (await mcp(true)) !== expected) throw new Error(`${tool} ${query}: MCP text differs from the HTTP tool's`);
    const times = { http: [] as number[], legacy: [] as number[], modern: [] as number[] };
    for (let i = 0; i < runs; i++) {
      for (const way of ['http', 'legacy', 'modern'] as const) {
        const t0 = performance.now();
        if (way === 'http') await http();
        else await mcp(way === 'modern');
        times[way].push(performance.now() - t0);
      }
    }
    const httpMs = median(times.http);
    const row = {
      kind,
      call: `${tool} ${query}`,
      bytes: Buffer.byteLength(expected),
      httpMs: +httpMs.toFixed(2),
      mcp2025Ms: +median(times.legacy).toFixed(2),
      mcp2026Ms: +median(times.modern).toFixed(2),
      added2025Ms: +(median(times.legacy) - httpMs).toFixed(2),
      added2026Ms: +(median(times.modern) - httpMs).toFixed(2),
      ratio2025: +(median(times.legacy) / httpMs).toFixed(3),
      ratio2026: +(median(times.modern) / httpMs).toFixed(3),
    };
    rows.push(row);
    process.stderr.write(`${kind}\t${row.call}\thttp ${row.httpMs} ms\tmcp 2025 ${row.mcp2025Ms} ms\tmcp 2026 ${row.mcp2026Ms} ms\n`);
  }
  process.stdout.write(JSON.stringify({ corpus, runs, rows }, null, 2) + '\n');
} finally {
  await service.stop();
}
