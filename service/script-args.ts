/**
 * The node options and entry of package.json's `start` and `admin` scripts, for the benchmarks
 * and tests that run the service or the operator command as a process of its own: they run it
 * as an operator would.
 */
import { readFileSync } from 'node:fs';

/** The arguments of `node` in one of package.json's scripts (its options, then the entry). */
export function scriptArgs(script: 'start' | 'admin'): string[] {
  const { scripts } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { scripts: Record<string, string> };
  const [command, ...args] = scripts[script].split(' ');
  if (command !== 'node') throw new Error(`package.json's ${script} script does not run node: ${scripts[script]}`);
  return args;
}
