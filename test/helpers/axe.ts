import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';
import { SCHEME_AND_WIDTHS } from './browser.js';

/**
 * axe-core in Chromium for the browser tests (docs/guides/hosted-pages.md): the serious and critical
 * findings on a page as it is now (axe injected through DevTools, so the page's CSP does not apply), and
 * every combination of colour scheme and width a page is checked in (SCHEME_AND_WIDTHS).
 */

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: string[]; failureSummary?: string }>;
}

/** axe on the page as it is now: its serious and critical violations, and the rules it saw pass. */
export async function audit(page: Page): Promise<{ serious: Violation[]; passed: string[] }> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
  const result = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (ctx: Document) => Promise<{ violations: Violation[]; passes: Array<{ id: string }> }> } }).axe;
    const { violations, passes } = await axe.run(document);
    return { violations, passed: passes.map((p) => p.id) };
  });
  return { serious: result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical'), passed: result.passed };
}

export async function seriousViolations(page: Page): Promise<Violation[]> {
  return (await audit(page)).serious;
}

/** axe in every combination, the page as it is; one line per finding (`state` names the page state). Leaves the page light at 1280 px. */
export async function axeInEveryCombination(page: Page, state: string): Promise<string[]> {
  const found: string[] = [];
  for (const c of SCHEME_AND_WIDTHS) {
    await page.emulateMedia({ colorScheme: c.scheme });
    await page.setViewportSize({ width: c.width, height: c.height });
    for (const v of await seriousViolations(page)) found.push(`${state} (${c.scheme}, ${c.width}px): ${v.id} [${v.impact}] ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  }
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize({ width: 1280, height: 800 });
  return found;
}
