#!/usr/bin/env node
// `npm test`: runs vitest (SQLite, plus PostgreSQL when TEST_DATABASE_URL is set), says what was
// skipped and why, and ends with one plain "N passed, N failed, N skipped" line.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';

const skipped = [];
if (!process.env.TEST_DATABASE_URL) skipped.push('the PostgreSQL run of the whole suite: TEST_DATABASE_URL is not set');
if (!existsSync(process.env.CHROMIUM_PATH ?? '/usr/bin/chromium')) skipped.push('browser tests: no Chromium at /usr/bin/chromium (apt-get install chromium)');
if (!process.env.TEST_REDIS_URL) skipped.push('Redis-backed rate-limit tests: TEST_REDIS_URL is not set');

mkdirSync('.vitest-artifacts', { recursive: true });
const report = '.vitest-artifacts/results.json';
const result = spawnSync(
  process.execPath,
  ['node_modules/vitest/vitest.mjs', 'run', '--reporter=default', '--reporter=json', `--outputFile.json=${report}`, ...process.argv.slice(2)],
  { stdio: 'inherit', env: process.env },
);

for (const line of skipped) console.log(`skipped: ${line}`);
let code = result.status ?? 1;
try {
  const r = JSON.parse(readFileSync(report, 'utf8'));
  const skippedTests = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
  console.log(`tests: ${r.numPassedTests} passed, ${r.numFailedTests} failed, ${skippedTests} skipped`);
  if (r.numTotalTests === 0) code = code || 1;
} catch {
  console.log('tests: 0 passed, 1 failed (no test report was written)');
  code = code || 1;
}
process.exit(code);
