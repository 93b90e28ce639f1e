/**
 * The authorization page (/oauth/authorize) in a real Chromium: it looks like the console (the
 * same palette, one stylesheet allowed by its hash, an injected one refused), axe-core finds no
 * violation on it or on its error page, and a person gets a client its code at its redirect URI
 * by keyboard alone and with JavaScript off. Screenshots go to test-output/console/.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { AxeBuilder } from '@axe-core/playwright';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PAGE_STYLE } from '../api/oauth/page.js';
import { launchBrowser, shoot } from './helpers/browser.js';
import { type AuthorizationRequest, mcpPingStatus, newAuthorizationRequest, RedirectTarget, redeemCode } from './helpers/oauth.js';
import { startTestService, type TestService } from './helpers/service.js';

let t: TestService;
let browser: Browser;
let callback: RedirectTarget;

beforeAll(async () => {
  [t, browser, callback] = await Promise.all([startTestService(), launchBrowser(), RedirectTarget.start()]);
  expect((await t.call('POST', '/v1/workspaces', { body: { name: 'docs' } })).status).toBe(201);
});
afterAll(async () => {
  await browser?.close();
  await callback?.close();
  await t?.stop();
});

/** A new client's authorization request for workspace docs, returning to the loopback callback. */
function request(): Promise<AuthorizationRequest> {
  return newAuthorizationRequest(t.url, 'docs', `${callback.base}/callback`, 'Desk Agent');
}

/** Every axe-core violation on the page, whatever its impact, as readable lines. */
async function violations(page: Page): Promise<string[]> {
  const result = await new AxeBuilder({ page }).analyze();
  return result.violations.map((v) => `${v.id} (${v.impact}): ${v.help} at ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

/** Waits until the browser has been sent to the callback, and returns the query it brought. */
async function landed(page: Page, before: number): Promise<URLSearchParams> {
  await page.waitForURL((url) => url.href.startsWith(`${callback.base}/callback`));
  expect(callback.received.length).toBe(before + 1);
  return callback.received[before];
}

/** The computed background colour of the first element `selector` finds. */
function background(page: Page, selector: string): Promise<string> {
  return page.evaluate(`getComputedStyle(document.querySelector(${JSON.stringify(selector)})).backgroundColor`);
}

/** The custom properties a stylesheet's :root sets, name to value. */
function rootProperties(css: string): Map<string, string> {
  const root = /:root\s*{([^}]*)}/.exec(css)?.[1] ?? '';
  return new Map([...root.matchAll(/(--[\w-]+):\s*([^;]+);/g)].map((m) => [m[1], m[2].trim()]));
}

describe('the authorization page in a browser', () => {
  it("uses the console's palette through one stylesheet allowed by its hash, and refuses an injected one", async () => {
    const consoleColours = rootProperties(await readFile(join(import.meta.dirname, '..', 'console', 'src', 'style.css'), 'utf8'));
    const page = rootProperties(PAGE_STYLE);
    expect(page.size).toBeGreaterThanOrEqual(6);
    for (const [name, value] of page) expect([name, value]).toEqual([name, consoleColours.get(name)]);

    const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const tab = await context.newPage();
    const refused: string[] = [];
    tab.on('console', (m) => {
      if (/Content Security Policy/i.test(m.text())) refused.push(m.text());
    });
    const response = await tab.goto((await request()).url);
    const csp = response?.headers()['content-security-policy'] ?? '';
    expect(csp).toMatch(/^default-src 'none'; style-src 'sha256-[A-Za-z0-9+/]+=*'; /);
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|script-src/);
    // The stylesheet applied: the console's top bar and accent, on the console's panel.
    expect([await background(tab, 'header.top'), await background(tab, 'button[value="allow"]'), await background(tab, '.card')]).toEqual([
      'rgb(22, 50, 79)',
      'rgb(11, 92, 173)',
      'rgb(245, 246, 248)',
    ]);
    expect(refused).toEqual([]);
    // A style written into the page, as an injection would be: the policy refuses it.
    const outcome = await tab.evaluate(`new Promise((resolve) => {
      let violated = '';
      document.addEventListener('securitypolicyviolation', (e) => { violated = e.violatedDirective; });
      const style = document.createElement('style');
      style.textContent = 'body { background: rgb(255, 0, 0); }';
      document.head.append(style);
      setTimeout(() => resolve({ background: getComputedStyle(document.body).backgroundColor, violated }), 200);
    })`);
    expect(outcome).toEqual({ background: 'rgba(0, 0, 0, 0)', violated: expect.stringMatching(/^style-src/) });
    expect(await violations(tab)).toEqual([]);
    await shoot(tab, 'oauth-authorize');

    // The error page wears the same look and passes the same check.
    await tab.goto(`${t.url}/oauth/authorize?client_id=unknown`);
    expect(await background(tab, 'header.top')).toBe('rgb(22, 50, 79)');
    expect(await violations(tab)).toEqual([]);
    await shoot(tab, 'oauth-error');
    await context.close();
  });

  it('a person approves by keyboard alone: Tab to the key, type it, Tab to Allow, Enter; the client gets its code', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const req = await request();
    await page.goto(req.url);
    for (let i = 0; i < 10 && (await page.evaluate('document.activeElement?.id')) !== 'key'; i++) await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement?.id')).toBe('key');
    await page.keyboard.type(t.key);
    for (let i = 0; i < 5 && (await page.evaluate('document.activeElement?.textContent')) !== 'Allow'; i++) await page.keyboard.press('Tab');
    expect(await page.evaluate('document.activeElement?.textContent')).toBe('Allow');
    const before = callback.received.length;
    await page.keyboard.press('Enter');
    const params = await landed(page, before);
    expect(params.get('state')).toBe(new URL(req.url).searchParams.get('state'));
    expect(await mcpPingStatus(req.resource, await redeemCode(t.url, req, params.get('code') ?? ''))).toBe(200);
    await context.close();
  });

  it('works with JavaScript off: Deny sends access_denied back, Allow a code that redeems', async () => {
    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    await page.goto((await request()).url);
    let before = callback.received.length;
    await page.getByRole('button', { name: 'Deny' }).click();
    expect((await landed(page, before)).get('error')).toBe('access_denied');

    const req = await request();
    await page.goto(req.url);
    // A wrong key first: the page again, saying so, and nothing sent back.
    await page.getByLabel('Access key').fill('svc_sk_not_a_key');
    await page.getByRole('button', { name: 'Allow' }).click();
    await page.getByRole('alert').waitFor();
    before = callback.received.length;
    await page.getByLabel('Access key').fill(t.key);
    await page.getByRole('button', { name: 'Allow' }).click();
    const params = await landed(page, before);
    expect(await mcpPingStatus(req.resource, await redeemCode(t.url, req, params.get('code') ?? ''))).toBe(200);
    await context.close();
  });
});
