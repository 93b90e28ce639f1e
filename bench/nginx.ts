/**
 * Debian's nginx in front of a benchmark's nodes, configured by deploy/nginx.conf itself (the
 * configuration an operator deploys), with its three example nodes replaced by the benchmark's
 * and its logs and pid file in a directory of the run.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CpuGroup } from './cgroups.js';

const CONFIG = fileURLToPath(new URL('../deploy/nginx.conf', import.meta.url));
const NGINX = '/usr/sbin/nginx';

/** A running nginx. */
export interface Balancer {
  url: string;
  /** Its access log so far (written within a second; whole once stopped). */
  accessLog(): Promise<string>;
  stop(): Promise<void>;
}

/** Requests each node answered in `log` (an access log's lines), by `127.0.0.1:port`; a request passed on counts for the node that answered. */
export function requestsByNode(log: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const match of log.matchAll(/ upstream=(?:[^ ]*, )?(127\.0\.0\.1:\d+) /g)) counts.set(match[1], (counts.get(match[1]) ?? 0) + 1);
  return counts;
}

/** Answers 503 from a node in `log` (a copy catching up; nginx then asks the next node). */
export function unavailableAnswers(log: string): number {
  return log.match(/ upstream_status=(?:\d+, )*503[ ,]/g)?.length ?? 0;
}

/** deploy/nginx.conf listening on `port` with `nodes` (ports on 127.0.0.1) as its upstream servers. */
export async function nginxConfig(dir: string, port: number, nodes: number[]): Promise<string> {
  const lines: string[] = [`pid ${join(dir, 'nginx.pid')};`, `error_log ${join(dir, 'error.log')} warn;`];
  for (const line of (await readFile(CONFIG, 'utf8')).split('\n')) {
    const server = /^(\s*)server agent-vfs-(\d+):8080(.*);$/.exec(line);
    if (server !== null) {
      // The example's first node stands for all of ours; its others are dropped.
      if (server[2] === '1') for (const node of nodes) lines.push(`${server[1]}server 127.0.0.1:${node}${server[3]};`);
    } else if (/^\s*listen 8080;$/.test(line)) {
      lines.push(line.replace('8080', `127.0.0.1:${port}`));
    } else if (/^\s*access_log \/dev\/stdout vfs;$/.test(line)) {
      lines.push(line.replace('/dev/stdout vfs', `${join(dir, 'access.log')} vfs buffer=64k flush=1s`));
    } else if (!/^\s*error_log \/dev\/stderr/.test(line)) {
      lines.push(line);
    }
  }
  const config = lines.join('\n');
  if (!config.includes(`server 127.0.0.1:${nodes[0]}`) || !config.includes(`listen 127.0.0.1:${port}`)) {
    throw new Error(`${CONFIG} no longer has the lines this benchmark rewrites (server agent-vfs-1:8080, listen 8080)`);
  }
  return config;
}

/** Starts nginx in `group` on `port` in front of `nodes` and waits until it answers /healthz. */
export async function startNginx(dir: string, port: number, nodes: number[], group: CpuGroup): Promise<Balancer> {
  if (!existsSync(NGINX)) throw new Error(`${NGINX} is missing: apt-get install nginx-light (Debian's nginx)`);
  const conf = join(dir, 'nginx.conf');
  const log = join(dir, 'access.log');
  await writeFile(conf, await nginxConfig(dir, port, nodes));
  await writeFile(log, '');
  const [file, args] = group.command(NGINX, ['-p', dir, '-c', conf, '-g', 'daemon off;']);
  const child: ChildProcess = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<void>((resolve) => child.on('exit', () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    if (child.exitCode !== null) throw new Error(`nginx exited: ${stderr}${await readFile(join(dir, 'error.log'), 'utf8').catch(() => '')}`);
    const ok = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2000) }).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) break;
    if (i === 100) throw new Error(`nginx on port ${port} did not answer /healthz in 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {
    url,
    accessLog: () => readFile(log, 'utf8'),
    async stop() {
      // A graceful stop: its workers finish their requests and flush the buffered log.
      child.kill('SIGQUIT');
      await exited;
    },
  };
}

/**
 * The answers 503 clients got in `log`, by who gave them: a node (the last node tried answered
 * 503: its copy catching up, or it was stopping) or nginx itself (no node answered: refused, timed
 * out, or every node marked down); and the 503s each node answered, passed on or not.
 */
export function unavailableByOrigin(log: string): { fromNodes: number; fromNginx: number; byNode: Record<string, number> } {
  let fromNodes = 0;
  let fromNginx = 0;
  const byNode: Record<string, number> = {};
  for (const line of log.split('\n')) {
    const m = /" (\d{3}) \d+ ws=\S* upstream=(.*) upstream_status=(.*) time=/.exec(line);
    if (m === null) continue;
    const addresses = m[2].split(', ');
    const statuses = m[3].split(', ');
    statuses.forEach((status, i) => {
      if (status === '503') byNode[addresses[i]] = (byNode[addresses[i]] ?? 0) + 1;
    });
    if (m[1] !== '503') continue;
    if (statuses[statuses.length - 1] === '503') fromNodes++;
    else fromNginx++;
  }
  return { fromNodes, fromNginx, byNode };
}
