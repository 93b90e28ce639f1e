/**
 * The node options and entry of package.json's `start` and `admin` scripts, for the benchmarks
 * and tests that run the service or the operator command as a process of its own: they run it
 * as an operator would. `start` runs the compiled service: `buildService` first.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** The project's root directory, where package.json is. */
export const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** Compiles the service into dist/ with package.json's `build` script, as `npm start` does first. */
export function buildService(): void {
  execFileSync('npm', ['run', '--silent', 'build'], { cwd: ROOT, stdio: ['ignore', 'inherit', 'inherit'] });
}

/**
 * One of package.json's scripts as a process to start: the environment it assigns (`NAME=value`
 * words before `node`), then the arguments of `node` (its options, then the entry).
 */
export function scriptCommand(script: 'start' | 'admin'): { env: Record<string, string>; args: string[] } {
  const { scripts } = JSON.parse(readFileSync(`${ROOT}/package.json`, 'utf8')) as { scripts: Record<string, string> };
  const words = scripts[script].split(' ');
  const env: Record<string, string> = {};
  while (/^[A-Z_][A-Z0-9_]*=/.test(words[0])) {
    const [name, ...value] = words.shift()!.split('=');
    env[name] = value.join('=');
  }
  const [command, ...args] = words;
  if (command !== 'node') throw new Error(`package.json's ${script} script does not run node: ${scripts[script]}`);
  return { env, args };
}
