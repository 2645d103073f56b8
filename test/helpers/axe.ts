import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';

/**
 * axe-core in Chromium for the browser tests of the account page (docs/guides/hosted-pages.md): the four combinations every page is checked in, and the serious and critical
 * findings on a page as it is now (axe injected through DevTools, so the page's CSP does not apply).
 */

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export const COMBINATIONS = [
  { scheme: 'light', width: 1280, height: 800 },
  { scheme: 'dark', width: 1280, height: 800 },
  { scheme: 'light', width: 390, height: 844 },
  { scheme: 'dark', width: 390, height: 844 },
] as const;

export interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: string[] }>;
}

export async function seriousViolations(page: Page): Promise<Violation[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (ctx: Document) => Promise<{ violations: Violation[] }> } }).axe;
    return (await axe.run(document)).violations;
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/** axe in every combination, the page as it is; one line per finding (`state` names the page state). Leaves the page light at 1280 px. */
export async function axeInEveryCombination(page: Page, state: string): Promise<string[]> {
  const found: string[] = [];
  for (const c of COMBINATIONS) {
    await page.emulateMedia({ colorScheme: c.scheme });
    await page.setViewportSize({ width: c.width, height: c.height });
    for (const v of await seriousViolations(page)) found.push(`${state} (${c.scheme}, ${c.width}px): ${v.id} [${v.impact}] ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
  }
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize({ width: 1280, height: 800 });
  return found;
}
