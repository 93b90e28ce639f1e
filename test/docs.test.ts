/**
 * The documentation as a reader meets it: every relative link of every Markdown file in the
 * tree that stays in the tree resolves (to a file, and to a heading where it names one, by GitHub's anchor rules), and
 * the two pages read first stay short enough to be maps: README.md and docs/architecture.md at
 * most 25 KB each.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { describe, expect, test } from 'vitest';
import { ROOT } from '../service/script-args.js';

const MAX_MAP_BYTES = 25_000;

const pages = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', '*.md'], { cwd: ROOT, encoding: 'utf8' })
  .split('\n')
  .filter((file) => file !== '' && !file.startsWith('node_modules/'));

/** A page's text without its fenced code blocks. */
function unfenced(text: string): string {
  return text.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');
}

/** A page's text without its code: fenced blocks and inline code hold no links. */
function prose(text: string): string {
  return unfenced(text).replace(/`[^`\n]*`/g, '');
}

/** The anchors GitHub gives a page's headings: lower case, punctuation dropped, spaces as hyphens, repeats numbered. */
function anchors(file: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of unfenced(readFileSync(join(ROOT, file), 'utf8')).matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const text = m[1].replace(/`/g, '').replace(/\[([^\]]*)\]\([^)]*\)/g, '$1');
    const slug = text
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}

/** Each relative link of a page: `[text](target)` and `[label]: target`. */
function links(file: string): string[] {
  const text = prose(readFileSync(join(ROOT, file), 'utf8'));
  const found = [...text.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g), ...text.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/gm)].map((m) => m[1]);
  return found.filter((target) => !/^[a-z][a-z0-9+.-]*:/i.test(target));
}

describe('the documentation', () => {
  test('has pages to check', () => {
    expect(pages).toEqual(expect.arrayContaining(['README.md', 'docs/architecture.md', 'test/README.md']));
    expect(links('README.md').length).toBeGreaterThan(5);
  });

  test.each(pages)('%s: every relative link resolves', (page) => {
    const broken: string[] = [];
    for (const link of links(page)) {
      const [path, anchor] = link.split('#', 2) as [string, string | undefined];
      const target = path === '' ? page : normalize(join(dirname(page), decodeURIComponent(path)));
      // Beside the repository (the shared contract), not in it: a checkout need not have it.
      if (target.startsWith('../shared/')) continue;
      if (!existsSync(join(ROOT, target))) {
        broken.push(`${link}: no such file`);
        continue;
      }
      if (anchor !== undefined && target.endsWith('.md') && statSync(join(ROOT, target)).isFile() && !anchors(target).has(anchor.toLowerCase())) {
        broken.push(`${link}: no such heading in ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });

  test.each(['README.md', 'docs/architecture.md'])('%s is at most 25 KB', (page) => {
    expect(statSync(join(ROOT, page)).size).toBeLessThanOrEqual(MAX_MAP_BYTES);
  });
});
