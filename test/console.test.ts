/**
 * The operator console in a real Chromium against a real service: the whole journey of an
 * operator (sign in, a workspace, a folder uploaded and watched until ingested, a file read, a
 * search, a token minted and revoked, the audit of those reads, sign out), each page checked by
 * axe-core, shot at 1280x800 and 390x844 and walked with the keyboard; an OAuth grant listed and
 * revoked; tenant strings shown as text; the Content-Security-Policy on every console response
 * and in force.
 */
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { launchBrowser, seriousViolations, shoot, tabOrder, visibleControls } from './helpers/browser.js';
import { makePdf } from './helpers/make-pdf.js';
import { formOf, mcpPingStatus, newAuthorizationRequest, postForm, redeemCode, visit } from './helpers/oauth.js';
import { put, settled, startTestService, type TestService } from './helpers/service.js';

let t: TestService;
let browser: Browser;
let folder: string;

beforeAll(async () => {
  [t, browser] = await Promise.all([startTestService(), launchBrowser()]);
  folder = await mkdtemp(join(tmpdir(), 'vfs-console-'));
  // A folder as an operator would upload it: text, a nested source file, a PDF and a binary that ends in error.
  await mkdir(join(folder, 'handbook', 'src'), { recursive: true });
  await writeFile(join(folder, 'handbook', 'README.md'), '# Handbook\n\nThe console shows what agents read.\nSecond line about deploys.\n');
  await writeFile(
    join(folder, 'handbook', 'src', 'deploy.ts'),
    Array.from({ length: 300 }, (_, i) => `export const step${i + 1} = 'deploy step ${i + 1}';`).join('\n'),
  );
  await writeFile(join(folder, 'handbook', 'guide.pdf'), await makePdf([['Operators guide: rotate the keys monthly.']]));
  await writeFile(join(folder, 'handbook', 'blob.bin'), Buffer.from([0x41, 0x00, 0x42, 0x43]));
});
afterAll(async () => {
  await browser?.close();
  await t?.stop();
  if (folder !== undefined) await rm(folder, { recursive: true, force: true });
});

/** A fresh browser tab that fails the test on any dialog (alert, confirm) it did not expect. */
async function openTab(): Promise<{ context: BrowserContext; page: Page; dialogs: string[]; consoleHeaders: Map<string, string | null> }> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const dialogs: string[] = [];
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  const consoleHeaders = new Map<string, string | null>();
  page.on('response', (r) => {
    if (new URL(r.url()).pathname.startsWith('/console')) consoleHeaders.set(r.url(), r.headers()['content-security-policy'] ?? null);
  });
  return { context, page, dialogs, consoleHeaders };
}

async function signIn(page: Page, key: string): Promise<void> {
  await page.goto(`${t.url}/console/`);
  await page.getByLabel('Management key').fill(key);
  await page.getByRole('button', { name: 'Sign in' }).click();
  await page.getByRole('button', { name: 'Sign out' }).waitFor();
}

/** Each page is accessible, reachable by keyboard, and shot at both sizes. */
async function checkPage(page: Page, name: string): Promise<void> {
  expect(await seriousViolations(page), `axe on ${name}`).toEqual([]);
  const reached = await tabOrder(page);
  const missing = (await visibleControls(page)).filter((c) => !reached.has(c));
  expect(missing, `controls of ${name} the keyboard cannot reach`).toEqual([]);
  await shoot(page, name);
}

describe('the console', () => {
  // About 50 s on a quiet machine (nine pages, each checked by axe and walked with Tab), twice that under load.
  it('takes an operator through workspaces, files, search, tokens, audit and health', { timeout: 240_000 }, async () => {
    const { context, page, dialogs, consoleHeaders } = await openTab();
    await page.goto(`${t.url}/console/`);
    await checkPage(page, '01-sign-in');

    await page.getByLabel('Management key').fill('svc_sk_not_a_key');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByRole('alert').textContent()).toMatch(/does not know this key/);

    await signIn(page, t.key);
    await page.getByLabel('Workspace name', { exact: true }).fill('handbook');
    await page.getByRole('button', { name: 'Create workspace' }).click();
    await page.getByRole('link', { name: 'handbook' }).waitFor();
    await checkPage(page, '02-workspaces');
    // Deleting asks for the name typed out.
    await page.getByLabel('Workspace name', { exact: true }).fill('scratch');
    await page.getByRole('button', { name: 'Create workspace' }).click();
    await page.getByRole('button', { name: 'Delete workspace scratch' }).click();
    const confirm = page.getByRole('dialog', { name: 'Delete workspace scratch' });
    expect(await confirm.getByRole('button', { name: 'Delete for good' }).isDisabled()).toBe(true);
    await confirm.getByLabel('Workspace name to delete').fill('scratch');
    await confirm.getByRole('button', { name: 'Delete for good' }).click();
    await expect.poll(() => page.getByRole('link', { name: 'scratch' }).count()).toBe(0);
    expect((await t.call('GET', '/v1/workspaces')).json.workspaces.map((w: { name: string }) => w.name)).toEqual(['handbook']);

    await page.getByRole('link', { name: 'handbook' }).click();
    // A mark on the window: if the page reloaded while ingest ran, it would be gone.
    await page.evaluate('window.stillTheSamePage = true');
    await page.getByLabel('Upload a folder').setInputFiles(join(folder, 'handbook'));
    const table = page.getByRole('region', { name: 'Files as a table' });
    await expect.poll(() => table.locator('tr[data-status="ready"]').count(), { timeout: 30_000 }).toBe(3);
    await expect.poll(() => table.locator('tr[data-status="error"]').count(), { timeout: 30_000 }).toBe(1);
    expect(await page.evaluate('window.stillTheSamePage')).toBe(true);
    await expect.poll(() => page.getByLabel(/^Overall/).getAttribute('value')).not.toBe('0');
    expect(await page.getByText('4 of 4 sent').count()).toBe(1);
    const errorRow = table.locator('tr[data-status="error"]');
    expect(await errorRow.locator('th').textContent()).toBe('/handbook/blob.bin');
    expect(await errorRow.locator('td.detail').textContent()).toMatch(/binary/);
    await checkPage(page, '03-files');

    // A file dropped on the page (as a drag from the desktop delivers it), then deleted after the confirmation.
    await page.evaluate(`(() => {
      const data = new DataTransfer();
      data.items.add(new File(['dropped text\\n'], 'dropped.txt', { type: 'text/plain' }));
      document.querySelector('.drop').dispatchEvent(new DragEvent('drop', { dataTransfer: data, bubbles: true, cancelable: true }));
    })()`);
    await expect.poll(() => table.locator('tr[data-status="ready"]').count(), { timeout: 30_000 }).toBe(4);
    expect((await t.call('GET', '/v1/workspaces/handbook/cat?path=/dropped.txt')).text).toContain('dropped text');
    await page.getByRole('button', { name: 'Delete /dropped.txt' }).click();
    await page.getByRole('dialog', { name: 'Delete a file' }).getByRole('button', { name: 'Delete file' }).click();
    await expect.poll(() => table.locator('tr[data-status="ready"]').count()).toBe(3);
    expect((await t.call('GET', '/v1/workspaces/handbook/cat?path=/dropped.txt')).status).toBe(404);

    await page.getByRole('list', { name: 'Files as a tree' }).getByRole('link', { name: 'guide.pdf' }).click();
    await expect.poll(() => page.getByRole('region', { name: 'Text of /handbook/guide.pdf' }).textContent()).toMatch(/rotate the keys monthly/);
    await page.getByLabel('File path').fill('/handbook/src/deploy.ts');
    await page.getByRole('button', { name: 'Open' }).click();
    await page.getByRole('link', { name: 'Next 200 lines' }).click();
    await expect.poll(() => page.locator('tr#L201 td').first().textContent()).toBe('201');
    await checkPage(page, '04-viewer');

    await page.getByRole('link', { name: 'Search' }).click();
    await page.getByLabel('Pattern').fill('DEPLOY STEP 25\\b');
    await page.getByLabel('Case insensitive').check();
    await page.getByLabel('Glob').fill('*.ts');
    await page.getByRole('button', { name: 'Search' }).click();
    const hit = page.getByRole('link', { name: '/handbook/src/deploy.ts:25' });
    await hit.waitFor();
    // What the agent would get for the same call, line for line.
    const agent = await t.call('GET', '/v1/workspaces/handbook/grep?pattern=DEPLOY%20STEP%2025%5Cb&-i=true&glob=*.ts&output_mode=content&head_limit=500');
    expect(await page.locator('ol.hits li').allTextContents()).toEqual(agent.text.split('\n').filter((l) => l !== ''));
    await checkPage(page, '05-search');
    await hit.click();
    await expect.poll(() => page.locator('tr.mark').textContent()).toContain("step25 = 'deploy step 25'");

    await page.getByRole('link', { name: 'Tokens' }).click();
    await page.getByLabel('Claims').fill('group:eng, user:ann');
    await page.getByLabel('Time to live').selectOption({ label: '15 minutes' });
    await page.getByRole('button', { name: 'Mint token' }).click();
    const secret = (await page.locator('code.secret').textContent()) ?? '';
    expect(secret).toMatch(/^svc_at_/);
    expect((await t.call('GET', '/v1/workspaces/handbook/ls', { key: secret })).status).toBe(200);
    await page.getByRole('button', { name: 'Mint a token for an agent' }).click();
    await page.getByLabel('Claude Code configuration').waitFor();
    for (const client of ['Cursor', 'VS Code', 'Codex'])
      expect(await page.getByLabel(`${client} configuration`).textContent()).toContain('/v1/workspaces/handbook/mcp');
    const cursor = JSON.parse((await page.getByLabel('Cursor configuration').textContent()) ?? '');
    const agentToken = cursor.mcpServers.handbook.headers.Authorization.replace('Bearer ', '');
    expect((await t.call('GET', '/v1/workspaces/handbook/ls', { key: agentToken })).status).toBe(200);
    await checkPage(page, '06-tokens');
    const minted = await page.locator('ul.plain li code').first().textContent();
    await page.getByRole('button', { name: `Revoke token ${await page.locator('ul.plain li code').nth(1).textContent()}` }).click();
    await page.getByText(/is revoked/).waitFor();
    expect((await t.call('GET', '/v1/workspaces/handbook/ls', { key: secret })).status).toBe(401);
    await page.getByLabel('Token id').fill(minted ?? '');
    await page.getByRole('button', { name: 'Revoke', exact: true }).click();
    await page.getByText(`Token ${minted} is revoked.`).waitFor();
    expect((await t.call('GET', '/v1/workspaces/handbook/ls', { key: agentToken })).status).toBe(401);

    await page.getByRole('link', { name: 'Audit' }).click();
    const audit = page.getByRole('region', { name: 'Audit events' });
    await audit.waitFor();
    const tools = await audit.locator('tbody tr td:nth-child(3)').allTextContents();
    expect(tools).toEqual(expect.arrayContaining(['cat', 'grep', 'ls']));
    expect(await audit.locator('tbody tr td.path').allTextContents()).toEqual(expect.arrayContaining(['/handbook/guide.pdf', '/handbook/src/deploy.ts']));
    await page.getByLabel('Follow live').check();
    await t.call('GET', '/v1/workspaces/handbook/cat?path=/handbook/README.md');
    await expect.poll(() => audit.locator('tbody tr').first().locator('td.path').textContent(), { timeout: 10_000 }).toBe('/handbook/README.md');
    const download = page.waitForEvent('download');
    await page.getByRole('button', { name: 'Export JSON Lines' }).click();
    const lines = (await (await (await download).createReadStream()).toArray()).join('').trim().split('\n');
    expect(lines.map((l) => JSON.parse(l).tool)).toEqual(expect.arrayContaining(['cat', 'grep', 'ls']));
    await page.getByLabel('Follow live').uncheck();
    await checkPage(page, '07-audit');

    await page.getByRole('link', { name: 'Health' }).click();
    await page.getByText('Read requests per second, by tool').waitFor();
    await expect.poll(() => page.locator('.chart canvas').count(), { timeout: 10_000 }).toBeGreaterThanOrEqual(2);
    await checkPage(page, '08-health');

    await page.getByRole('button', { name: 'Sign out' }).click();
    await page.getByLabel('Management key').waitFor();
    expect(await page.evaluate('[sessionStorage.length, localStorage.length, document.cookie]')).toEqual([0, 0, '']);
    expect((await context.cookies()).length).toBe(0);
    expect(page.url()).not.toContain('svc_');
    expect(dialogs).toEqual([]);
    // Every console response, the page and its assets, carried the policy.
    expect(consoleHeaders.size).toBeGreaterThanOrEqual(3);
    for (const [url, csp] of consoleHeaders) expect(csp, url).toMatch(/script-src 'self'/);
    await context.close();
  });

  it('lets a scoped token see only its workspace, as text tools', async () => {
    await t.call('POST', '/v1/workspaces', { body: { name: 'tokened' } });
    await put(t, 'tokened', 'notes/a.txt', 'alpha line\n');
    await settled(t, 'tokened');
    const minted = await t.call('POST', '/v1/workspaces/tokened/tokens', { body: {} });
    const { context, page } = await openTab();
    await signIn(page, minted.json.token);
    expect(await page.getByText('Token for tokened').count()).toBe(1);
    expect(await page.getByRole('link', { name: 'Tokens' }).count()).toBe(0);
    await page.getByRole('link', { name: 'a.txt' }).click();
    await expect.poll(() => page.getByRole('region', { name: 'Text of /notes/a.txt' }).textContent()).toContain('alpha line');
    await checkPage(page, '09-token-view');
    await context.close();
  });

  it("lists a workspace's OAuth grants, revokes one after a confirmation, and its access token is refused at once", { timeout: 120_000 }, async () => {
    await t.call('POST', '/v1/workspaces', { body: { name: 'granted' } });
    // A grant made as a client and a person make it: registration, the authorization page, its form posted, the code redeemed.
    const request = await newAuthorizationRequest(t.url, 'granted', 'http://127.0.0.1:7/callback', 'Desk <b>Agent</b>');
    const { html, cookie } = await visit(request.url);
    const post = await postForm(t.url, { ...formOf(html), key: t.key, claims: 'group:eng', decision: 'allow' }, cookie);
    expect(post.status).toBe(303);
    const access = await redeemCode(t.url, request, new URL(post.headers.get('location') ?? '').searchParams.get('code') ?? '');
    expect(await mcpPingStatus(request.resource, access)).toBe(200);
    const [grant] = (await t.call('GET', '/v1/workspaces/granted/grants')).json.grants;

    const { context, page, dialogs } = await openTab();
    await signIn(page, t.key);
    await page.goto(`${t.url}/console/#/w/granted/tokens`);
    const table = page.getByRole('region', { name: 'OAuth grants' });
    const row = table.locator(`tr[data-grant="${grant.id}"]`);
    await expect.poll(() => row.locator('th').textContent()).toBe('Desk <b>Agent</b>');
    const cells = await row.locator('td').allTextContents();
    expect(cells.slice(0, 3)).toEqual(['127.0.0.1:7', 'group:eng', `management key ${grant.approvedBy.id}`]);
    expect(cells[5]).toBe('when revoked');
    expect(cells[4]).not.toBe('none yet');
    await checkPage(page, '10-grants');

    // Cancel leaves it; Revoke grant ends it.
    await page.getByRole('button', { name: 'Revoke the grant of Desk <b>Agent</b>' }).click();
    const confirm = page.getByRole('dialog', { name: 'Revoke a grant' });
    await confirm.getByRole('button', { name: 'Cancel' }).click();
    expect(await mcpPingStatus(request.resource, access)).toBe(200);
    await page.getByRole('button', { name: 'Revoke the grant of Desk <b>Agent</b>' }).click();
    await confirm.getByRole('button', { name: 'Revoke grant' }).click();
    await page.getByText(/is revoked: its tokens are refused/).waitFor();
    expect(await mcpPingStatus(request.resource, access)).toBe(401);
    expect((await t.call('GET', '/v1/workspaces/granted/grants')).json.grants).toEqual([]);
    await page.getByText('No application has access to this workspace through OAuth.', { exact: false }).waitFor();
    expect(await seriousViolations(page)).toEqual([]);
    expect(await page.locator('b').count()).toBe(0);
    expect(dialogs).toEqual([]);
    await context.close();
  });

  it('shows tenant strings as text, never as markup', async () => {
    const hostile = ['<img src=x onerror=alert(1)>', '"><script>alert(1)</script>'];
    await t.call('POST', '/v1/workspaces', { body: { name: 'hostile' } });
    const path = `/${hostile[0]}/${hostile[1]}.txt`;
    expect((await put(t, 'hostile', path, `${hostile[0]}\n${hostile[1]}\n`)).status).toBe(202);
    await settled(t, 'hostile');
    const { context, page, dialogs } = await openTab();
    await signIn(page, t.key);
    await page.goto(`${t.url}/console/#/w/hostile/files`);
    const table = page.getByRole('region', { name: 'Files as a table' });
    await expect.poll(() => table.locator('tbody th').textContent()).toBe(path);
    await page.getByRole('link', { name: path }).click();
    const text = page.getByRole('region', { name: `Text of ${path}` });
    await expect.poll(() => text.locator('pre').allTextContents()).toEqual(hostile);
    await page.getByRole('link', { name: 'Search' }).click();
    await page.getByLabel('Pattern').fill('<img|script');
    await page.getByRole('button', { name: 'Search' }).click();
    await expect.poll(() => page.locator('ol.hits li').allTextContents()).toEqual([`${path}:1:${hostile[0]}`, `${path}:2:${hostile[1]}`]);
    await page.getByRole('link', { name: 'Audit' }).click();
    const audit = page.getByRole('region', { name: 'Audit events' });
    await expect.poll(() => audit.locator('td.path').allTextContents()).toContain(path);
    expect((await audit.locator('code.params').allTextContents()).some((p) => p.includes('"<img|script"'))).toBe(true);
    expect(await page.locator('img[src="x"], script:not([src])').count()).toBe(0);
    expect(dialogs).toEqual([]);
    await context.close();
  });

  it('refuses an inline script under its Content-Security-Policy', async () => {
    const { context, page } = await openTab();
    const response = await page.goto(`${t.url}/console/`);
    const csp = response?.headers()['content-security-policy'] ?? '';
    expect(csp).not.toMatch(/unsafe-inline|unsafe-eval/);
    expect(csp).toMatch(/frame-ancestors 'none'/);
    expect(response?.headers()['referrer-policy']).toBe('no-referrer');
    // A script written into the page at run time, as an injection would be: the policy must refuse it.
    const outcome = await page.evaluate(`new Promise((resolve) => {
      let violated = '';
      document.addEventListener('securitypolicyviolation', (e) => { violated = e.violatedDirective; });
      const script = document.createElement('script');
      script.textContent = 'window.inlineRan = true';
      document.body.append(script);
      setTimeout(() => resolve({ ran: window.inlineRan === true, violated }), 200);
    })`);
    expect(outcome).toEqual({ ran: false, violated: expect.stringMatching(/^script-src/) });
    await context.close();
  });
});
