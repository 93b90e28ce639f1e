/**
 * `npm start`'s node options and entry, from package.json, for the benchmarks and tests that
 * start the service as a process of its own: they run it as an operator would.
 */
import { readFileSync } from 'node:fs';

/** The arguments of `node` in package.json's start script (its options, then `service/main.ts`). */
export function startArgs(): string[] {
  const { scripts } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { scripts: { start: string } };
  const [command, ...args] = scripts.start.split(' ');
  if (command !== 'node') throw new Error(`package.json's start script does not run node: ${scripts.start}`);
  return args;
}
