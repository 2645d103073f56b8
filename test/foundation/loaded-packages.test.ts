import { describe, expect, it } from 'vitest';
import { childEnv, start } from '../helpers/processes.js';
import { TEST_SECRET_KEY } from '../helpers/app.js';

/**
 * Libraries that only some servers use are loaded on first use, not at start (~9 MB less resident
 * memory in an idle server; the metrics library alone is ~6 MB). A fresh process builds the app and
 * reports which of them Node has loaded: they are CommonJS, so each one that was loaded is in
 * `require.cache`. `marked` (ESM) is imported beside `sanitize-html`, so the sanitizer stands for both.
 */
const ON_FIRST_USE = ['ioredis', 'nodemailer', 'prom-client', 'qrcode', 'sanitize-html'];

const SCRIPT = `
import { createRequire } from 'node:module';
const { buildApp } = await import('./src/app.ts');
const { parseConfig } = await import('./src/config.ts');
const config = parseConfig({ ...process.env, DATABASE_URL: 'sqlite::memory:', BASE_URL: 'http://localhost:3000' });
const app = await buildApp(config, { logStream: false });
await app.ready();
const packages = new Set();
for (const path of Object.keys(createRequire(import.meta.url).cache)) {
  const at = path.lastIndexOf('/node_modules/');
  if (at === -1) continue;
  const [scope, name] = path.slice(at + '/node_modules/'.length).split('/');
  packages.add(scope.startsWith('@') ? scope + '/' + name : scope);
}
await app.close();
process.stdout.write(JSON.stringify([...packages]));
`;

/** The packages a fresh process has loaded once the app is built and ready. */
async function packagesLoadedAtStart(env: Record<string, string>): Promise<string[]> {
  const child = start(['--import', 'tsx', '--input-type=module', '-e', SCRIPT], childEnv({ SECRET_KEY: TEST_SECRET_KEY, ...env }));
  const finished = await child.done;
  expect(finished.code, finished.stderr).toBe(0);
  return JSON.parse(finished.stdout);
}

describe('packages loaded on first use', { timeout: 60_000 }, () => {
  it('a server without REDIS_URL, SMTP_URL and METRICS starts without the Redis and SMTP clients, the metrics library, the QR code drawer and the Markdown sanitizer', async () => {
    const loaded = await packagesLoadedAtStart({});
    expect(loaded).toContain('fastify'); // the check sees what was loaded
    expect(loaded.filter((name) => ON_FIRST_USE.includes(name))).toEqual([]);
  });

  it('a server with REDIS_URL loads the Redis client at start (nothing needs to listen there)', async () => {
    expect(await packagesLoadedAtStart({ REDIS_URL: 'redis://127.0.0.1:9' })).toContain('ioredis');
  });

  it('a server with METRICS=1 loads the metrics library at start', async () => {
    expect(await packagesLoadedAtStart({ METRICS: '1' })).toContain('prom-client');
  });
});
