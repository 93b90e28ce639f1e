/**
 * A real browser for the console's tests: Debian's Chromium driven by playwright-core (CI
 * installs the `chromium` package; Playwright's own browser download is never used), with
 * axe-core's accessibility check and screenshots at a desktop and a phone size.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import { type Browser, chromium, type Page } from 'playwright-core';

/** Debian's Chromium; CHROMIUM_PATH names another. */
export const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

/** Where screenshots and traces go (git-ignored). */
export const OUTPUT_DIR = join(import.meta.dirname, '..', '..', 'test-output', 'console');

/** The two sizes every page is shot at. */
export const VIEWPORTS = [
  { name: 'desktop', width: 1280, height: 800 },
  { name: 'phone', width: 390, height: 844 },
] as const;

/** Starts headless Chromium (as root it needs --no-sandbox; the rest keeps it off the network). */
export function launchBrowser(): Promise<Browser> {
  mkdirSync(OUTPUT_DIR, { recursive: true });
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
}

/** Violations axe-core rates serious or critical on the page as it is now, as readable lines. */
export async function seriousViolations(page: Page): Promise<string[]> {
  const result = await new AxeBuilder({ page }).analyze();
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/** Screenshots the page at both sizes into OUTPUT_DIR, leaving it at the desktop size. */
export async function shoot(page: Page, name: string): Promise<string[]> {
  const files: string[] = [];
  for (const v of [...VIEWPORTS].reverse()) {
    await page.setViewportSize({ width: v.width, height: v.height });
    const file = join(OUTPUT_DIR, `${name}-${v.name}-${v.width}x${v.height}.png`);
    await page.screenshot({ path: file, fullPage: true });
    files.push(file);
  }
  return files;
}

/**
 * Presses Tab twice as many times as the page has controls (focus runs through the page and the
 * browser's own stops, wherever it starts), and returns how each element focused on the way is
 * named (its label, text or aria-label): what a keyboard user can reach.
 */
export async function tabOrder(page: Page): Promise<Set<string>> {
  const presses = 2 * (await visibleControls(page)).length + 4;
  const seen = new Set<string>();
  for (let i = 0; i < presses; i++) {
    await page.keyboard.press('Tab');
    const name = (await page.evaluate(`(() => {
      const e = document.activeElement;
      return e === null || e === document.body ? null : (${CONTROL_NAME})(e);
    })()`)) as string | null;
    if (name !== null) seen.add(name);
  }
  return seen;
}

/** Names of the visible controls a keyboard user must be able to reach (a file input is hidden but focusable). */
export async function visibleControls(page: Page): Promise<string[]> {
  return (await page.evaluate(`[...document.querySelectorAll('a[href], button, input, select, textarea, summary, [tabindex]')]
    .filter((e) => !e.disabled && (e.classList.contains('file-input') || (e.getBoundingClientRect().width > 0 && e.getBoundingClientRect().height > 0)))
    .map(${CONTROL_NAME})`)) as string[];
}

/** How a control is named in these lists: its tag, then its aria-label, its label's text or its own text (a browser-side function's source). */
const CONTROL_NAME = `(e) => {
  const label = e.id === '' ? null : document.querySelector('label[for="' + e.id + '"]');
  return e.tagName.toLowerCase() + ':' + (e.getAttribute('aria-label') ?? label?.textContent?.trim() ?? e.textContent?.trim().slice(0, 60) ?? '');
}`;
