/**
 * Runs the service the way an operator does (`node --import tsx service/main.ts`)
 * as a child process, and the operator command likewise.
 */
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';

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

/** Starts the service and waits for its "listening on" line. */
export async function spawnService(env: Record<string, string>, timeoutMs = 90_000): Promise<ServiceProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'service/main.ts'], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | string>((resolve) => child.on('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`service did not start in time:\n${stdout}\n${stderr}`)), timeoutMs);
    child.stdout!.on('data', (d: Buffer) => {
      stdout += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(stdout);
      if (m !== null) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`service exited (${code}) before listening:\n${stdout}\n${stderr}`));
    });
  });
  return { child, url, stdout, stderr: () => stderr, exited };
}

/** Runs `npm run admin -- args` and returns its stdout. */
export async function runAdmin(env: Record<string, string>, args: string[]): Promise<{ stdout: string; stderr: string }> {
  return promisify(execFile)(process.execPath, ['--import', 'tsx', 'service/admin.ts', ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
  });
}
