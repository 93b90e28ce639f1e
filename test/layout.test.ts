/**
 * The layout the folders' READMEs describe, held against the code's own imports: no import
 * circle anywhere in the tree (tests and benchmarks included), and each folder of the service
 * importing only the folders below it. A rule names folders (`db/`) or single files
 * (`api/metrics.ts`); a file's rule is the one of the longest folder or file that holds it,
 * and a file under a folder's rule may import anything inside that folder. Type-only imports load nothing; they
 * count for circles but not for the rules.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, test } from 'vitest';
import { ROOT } from '../service/script-args.js';

/** What each part of the service may import besides its own folder (READMEs of api/ and ingest/). */
const RULES: Record<string, readonly string[]> = {
  'core/': [],
  'storage/': ['core/'],
  'engine/': ['core/'],
  'db/': ['core/'],
  'reads/': ['core/', 'engine/'],
  'api/http/': ['core/'],
  'api/contract/': ['core/', 'db/files.ts', 'api/http/'],
  'api/contract/read-params.ts': ['core/'],
  'api/gate/': ['core/', 'db/', 'api/http/', 'api/metrics.ts'],
  'api/mcp/': ['core/', 'engine/', 'reads/', 'api/http/', 'api/contract/', 'api/read-routes.ts'],
  'api/': ['core/', 'db/', 'engine/', 'reads/', 'ingest/'],
  'ingest/extract/': ['core/'],
  'ingest/shards/': ['core/', 'db/', 'engine/', 'storage/', 'ingest/blob-store.ts'],
  'ingest/': ['core/', 'db/', 'storage/', 'engine/'],
  'cli/': ['core/', 'api/contract/read-params.ts'],
  'console/': ['core/content-types.ts'],
};

/** One relative import of a file: the file it names, and whether only types are taken. */
interface Import {
  target: string;
  typeOnly: boolean;
}

const SPECIFIER =
  /(?:^|\n)\s*(import|export)(\s+type)?\b[^'";]*?\bfrom\s+'(\.{1,2}\/[^']+)\.js'|\bimport\(\s*'(\.{1,2}\/[^']+)\.js'\s*\)|(?:^|\n)\s*import\s+'(\.{1,2}\/[^']+)\.js'/g;

const files = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.ts'], { cwd: ROOT, encoding: 'utf8' })
  .split('\n')
  .filter((file) => file !== '' && !file.startsWith('node_modules/'));

const imports = new Map<string, Import[]>(
  files.map((file) => {
    const text = readFileSync(join(ROOT, file), 'utf8');
    const found: Import[] = [];
    for (const m of text.matchAll(SPECIFIER)) {
      const specifier = m[3] ?? m[4] ?? m[5];
      const target = normalize(join(dirname(file), `${specifier}.ts`));
      if (files.includes(target)) found.push({ target, typeOnly: m[2] !== undefined });
    }
    return [file, found];
  }),
);

/** The rule that holds `file`: the longest folder or file named in RULES that holds it. */
function ruleOf(file: string): string | undefined {
  return Object.keys(RULES)
    .filter((key) => file === key || (key.endsWith('/') && file.startsWith(key)))
    .sort((a, b) => b.length - a.length)[0];
}

/** Every circle of imports, each as its files in order (found by depth-first search). */
function circles(): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string): void => {
    state.set(file, 'open');
    stack.push(file);
    for (const { target } of imports.get(file) ?? []) {
      if (state.get(target) === 'open') found.push([...stack.slice(stack.indexOf(target)), target]);
      else if (!state.has(target)) visit(target);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of files) if (!state.has(file)) visit(file);
  return found;
}

describe('the layout', () => {
  test('reads the imports it checks', () => {
    // A parser that saw nothing would pass every rule below.
    expect(imports.get('api/server.ts')?.map((i) => i.target)).toContain('api/http/uws.ts');
    expect(imports.get('cli/tools.ts')).toEqual(expect.arrayContaining([{ target: 'api/contract/read-params.ts', typeOnly: false }]));
    expect(imports.get('api/mcp/routes.ts')?.find((i) => i.target === 'api/http/context.ts')?.typeOnly).toBe(false);
  });

  test('has no import circle anywhere in the tree', () => {
    expect(circles().map((circle) => circle.join(' -> '))).toEqual([]);
  });

  test('each folder imports only what its README says', () => {
    const broken: string[] = [];
    for (const [file, found] of imports) {
      const rule = ruleOf(file);
      if (rule === undefined) continue;
      for (const { target, typeOnly } of found) {
        if (typeOnly) continue;
        // A folder's files may import anything inside it; a rule of one file allows only what it lists.
        const own = rule.endsWith('/') && target.startsWith(rule);
        if (!own && !RULES[rule].some((key) => target === key || (key.endsWith('/') && target.startsWith(key)))) broken.push(`${file} -> ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });
});
