import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, TEST_DIALECT, type TestApp } from '../helpers/app.js';
import { freePort } from '../helpers/processes.js';
import { haveChromium, launchChromium } from '../helpers/browser.js';

/**
 * `/docs`, the API reference (Swagger UI served from the swagger-ui-dist package), rendered by
 * Chromium under the service's own CSP: every tag opens to list its operations, nothing is fetched
 * from another origin, and the page's CSP is not violated. The page needs no database: SQLite only.
 */
describe.skipIf(!haveChromium || TEST_DIALECT !== 'sqlite')('the API reference page /docs', () => {
  let t: TestApp;
  let base: string;
  let browser: Browser;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    t = await buildTestApp({ env: { BASE_URL: base } });
    await t.app.listen({ port, host: '127.0.0.1' });
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('lists every operation of /openapi.json, tag by tag, same-origin only, within the CSP', async () => {
    const page = await browser.newPage();
    const foreign: string[] = [];
    const violations: string[] = [];
    page.on('request', (request) => {
      if (!request.url().startsWith(base) && !request.url().startsWith('data:')) foreign.push(request.url());
    });
    page.on('console', (message) => {
      if (/Content Security Policy|Refused to/i.test(message.text())) violations.push(message.text());
    });
    const res = await page.goto(`${base}/docs`);
    expect(res?.status()).toBe(200);
    expect(res?.headers()['content-security-policy']).toContain("script-src 'self'");

    // The operations of each tag, as the document has them; the page shows the tags closed.
    const byTag = new Map<string, number>();
    for (const item of Object.values(t.app.openapi().document.paths)) {
      for (const operation of Object.values(item as Record<string, { tags?: string[] }>)) {
        const tag = operation.tags?.[0] ?? 'default';
        byTag.set(tag, (byTag.get(tag) ?? 0) + 1);
      }
    }
    await page.waitForSelector('.opblock-tag', { timeout: 20_000 });
    expect(await page.locator('.opblock-tag').count()).toBe(byTag.size);
    for (const [tag, operations] of byTag) {
      // Open the tag, count its operations, close it again.
      const heading = page.locator(`h3.opblock-tag[data-tag="${tag}"]`);
      await heading.click();
      const section = page.locator('.opblock-tag-section', { has: heading });
      await expect.poll(() => section.locator('.opblock').count(), { timeout: 20_000 }).toBe(operations);
      if (tag === 'oauth') expect(await section.locator('.opblock-summary-path', { hasText: '/oauth/token' }).first().isVisible()).toBe(true);
      await heading.click();
    }
    expect(await page.locator('.info .title').textContent()).toContain('Gatehouse');
    expect(foreign).toEqual([]);
    expect(violations).toEqual([]);
  }, 60_000);

  it('passes axe (no serious or critical finding) in both colour schemes, a tag open, and follows the scheme', async () => {
    const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
    for (const scheme of ['light', 'dark'] as const) {
      const context = await browser.newContext({ colorScheme: scheme, viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      await page.goto(`${base}/docs`);
      await page.waitForSelector('.opblock-tag', { timeout: 20_000 });
      await page.locator('h3.opblock-tag[data-tag="oauth"]').click();
      await page.waitForSelector('.opblock');
      await page.evaluate(axeSource);
      const violations = await page.evaluate(async () => {
        const axe = (window as unknown as { axe: { run: (ctx: Document) => Promise<{ violations: Array<{ id: string; impact: string | null; nodes: Array<{ target: string[] }> }> }> } }).axe;
        return (await axe.run(document)).violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).slice(0, 5).join(', ')}`);
      });
      expect(violations, scheme).toEqual([]);
      const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
      if (scheme === 'dark') expect(background).not.toBe('rgb(255, 255, 255)');
      await context.close();
    }
  }, 60_000);
});
