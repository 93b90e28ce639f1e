/**
 * Runs the service the way an operator does (`npm start`'s command, service/script-args.ts)
 * as a child process, and the operator command likewise.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { scriptCommand } from '../../service/script-args.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** A service child process with what it printed. */
export interface ServiceProcess {
  child: ChildProcess;
  url: string;
  stdout: string;
  stderr: () => string;
  /** Resolves with the exit code (or signal name) when the process ends. */
  exited: Promise<number | string>;
}

/** A service child process that may not be listening yet. */
export interface StartingService {
  child: ChildProcess;
  /** Resolves with the base URL once the service prints it; rejects if it exits first or takes too long. */
  listening: Promise<ServiceProcess>;
  exited: Promise<number | string>;
}

/** Starts the service without waiting for it (a test may kill it while it starts). */
export function startServiceProcess(env: Record<string, string>, timeoutMs = 90_000): StartingService {
  const start = scriptCommand('start');
  // BENCH_NODE_ARGS adds flags to the service's node (e.g. --cpu-prof) for profiling a benchmark's nodes.
  const extra = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');
  const child = spawn(process.execPath, [...extra, ...start.args], {
    cwd: ROOT,
    env: { ...process.env, ...start.env, PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | string>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  const listening = new Promise<ServiceProcess>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`service did not start in time:\n${stdout}\n${stderr}`)), timeoutMs);
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(stdout);
      if (m !== null) {
        clearTimeout(timer);
        resolve({ child, url: m[1], stdout, stderr: () => stderr, exited });
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`service exited (${code}) before listening:\n${stdout}\n${stderr}`));
    });
  });
  listening.catch(() => {});
  return { child, listening, exited };
}

/** Starts the service and waits for its "listening on" line. */
export async function spawnService(env: Record<string, string>, timeoutMs = 90_000): Promise<ServiceProcess> {
  return startServiceProcess(env, timeoutMs).listening;
}

/** Runs `npm run admin -- args` and returns its stdout. */
export async function runAdmin(env: Record<string, string>, args: string[]): Promise<{ stdout: string; stderr: string }> {
  const admin = scriptCommand('admin');
  return promisify(execFile)(process.execPath, [...admin.args, ...args], {
    cwd: ROOT,
    env: { ...process.env, ...admin.env, ...env },
  });
}

/** What one run of the command line printed, and how it ended. */
export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * How Node runs the command line: the compiled one, package.json's `bin`, which the test run
 * builds first (test/global-setup.ts). It starts in half the time of the sources through tsx,
 * and suites run it a hundred times.
 */
export const CLI_ARGS = ['dist/cli/main.js'];

/** Starts the command line with `args` and exactly `env`. */
export function startCli(args: string[], env: NodeJS.ProcessEnv): { child: ChildProcess; done: Promise<CliRun>; stdout: () => string } {
  const child = spawn(process.execPath, [...CLI_ARGS, ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const done = new Promise<CliRun>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { child, done, stdout: () => stdout };
}
