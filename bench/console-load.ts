/**
 * How soon the console's first page is usable, in Debian's Chromium driven by playwright-core,
 * against the service as `npm start` runs it.
 *
 *   node --import tsx bench/console-load.ts [loads=10]
 *
 * Each load opens `/console/` in a new browser context (an empty cache: a first visit) and then
 * once more in the same context (a return visit: the hashed assets from the cache, the page
 * revalidated), and takes from the browser's own clock: the navigation's start to the response's
 * end, to `DOMContentLoaded`, and to the moment the `Sign in` button exists and is enabled (the
 * page is interactive: its script ran and rendered the form). Bytes are what crossed the wire
 * (compressed). The first cold load is recorded as a Playwright trace (test-output/console/).
 * Reports medians and the worst load.
 */
import { join } from 'node:path';
import { launchBrowser, OUTPUT_DIR } from '../test/helpers/browser.js';
import { median, startBenchService } from './lib.js';

const loads = Number(process.argv[2] ?? 10);
const service = await startBenchService();
const browser = await launchBrowser();

/** What the page says of its own load: ms from navigation start, and bytes transferred. */
const TIMINGS = `(() => {
  const nav = performance.getEntriesByType('navigation')[0];
  const resources = performance.getEntriesByType('resource');
  return {
    response: nav.responseEnd,
    domContentLoaded: nav.domContentLoadedEventEnd,
    bytes: nav.transferSize + resources.reduce((s, r) => s + r.transferSize, 0),
  };
})()`;

interface Load {
  response: number;
  domContentLoaded: number;
  interactive: number;
  bytes: number;
}

async function load(page: import('playwright-core').Page): Promise<Load> {
  await page.goto(`${service.url}/console/`, { waitUntil: 'commit' });
  await page.waitForFunction(
    `(() => { const b = [...document.querySelectorAll('button')].find((b) => b.textContent === 'Sign in'); return b !== undefined && !b.disabled; })()`,
    null,
    { polling: 'raf' },
  );
  const interactive = (await page.evaluate('performance.now()')) as number;
  const t = (await page.evaluate(TIMINGS)) as Omit<Load, 'interactive'>;
  return { ...t, interactive };
}

const cold: Load[] = [];
const warm: Load[] = [];
try {
  for (let i = 0; i < loads; i++) {
    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    if (i === 0) await context.tracing.start({ screenshots: true, snapshots: true });
    const page = await context.newPage();
    cold.push(await load(page));
    if (i === 0) await context.tracing.stop({ path: join(OUTPUT_DIR, 'first-load-trace.zip') });
    warm.push(await load(page));
    await context.close();
  }
} finally {
  await browser.close();
  await service.stop();
}

const row = (name: string, xs: Load[]): string => {
  const f = (k: keyof Load): string => `${median(xs.map((x) => x[k])).toFixed(0)} (worst ${Math.max(...xs.map((x) => x[k])).toFixed(0)})`;
  return `| ${name} | ${f('response')} | ${f('domContentLoaded')} | ${f('interactive')} | ${f('bytes')} |`;
};
process.stdout.write(`${loads} loads of /console/ (ms from navigation start; median, worst)\n\n`);
process.stdout.write('| visit | response end ms | DOMContentLoaded ms | Sign in usable ms | bytes on the wire |\n|---|---|---|---|---|\n');
process.stdout.write(`${row('first (empty cache)', cold)}\n${row('return (cached assets)', warm)}\n`);
process.stdout.write(`trace of the first load: ${join(OUTPUT_DIR, 'first-load-trace.zip')}\n`);
