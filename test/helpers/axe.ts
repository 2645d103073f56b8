import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Page } from 'playwright-core';

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

export interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: string[]; failureSummary?: string }>;
}

/**
 * axe on the page as it is now (injected through DevTools, so the page's CSP does not apply): its
 * serious and critical violations, and the rules it saw pass.
 */
export async function audit(page: Page): Promise<{ serious: Violation[]; passed: string[] }> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
  const result = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (ctx: Document) => Promise<{ violations: Violation[]; passes: Array<{ id: string }> }> } }).axe;
    const { violations, passes } = await axe.run(document);
    return { violations, passed: passes.map((p) => p.id) };
  });
  return { serious: result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical'), passed: result.passed };
}
