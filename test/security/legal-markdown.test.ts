import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.js';
import { expectAnsweredAtOnce, timeProbeAfterPause } from '../helpers/concurrency.js';
import { bearer } from '../helpers/dev-api.js';
import { makeApp, makeDeveloper } from '../helpers/factories.js';

/**
 * Security hardening item 5: publishing legal Markdown must not block the event loop or crash. The
 * render runs in a worker thread with a time limit and size/nesting limits; what cannot be rendered
 * is 400 `invalid_request` with a message that says why, never a 500, and `/healthz` keeps answering.
 */

/** 57 kB that marked's emphasis parser needs ~40 s for. */
const SLOW = '*a_'.repeat(19_000);
/** 29,000 nested block quotes: marked overflows its stack (a 500 before). */
const DEEP_QUOTES = '> '.repeat(29_000);

describe('legal Markdown rendering is bounded', () => {
  let t: TestApp;
  let base: string;
  let dev: Awaited<ReturnType<typeof makeDeveloper>>;
  let appId: string;
  beforeAll(async () => {
    t = await buildTestApp();
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    dev = await makeDeveloper(t.db);
    appId = (await makeApp(t.db, { developerId: dev.id })).id;
  });
  afterAll(async () => t.close());

  const devPut = (content: string, docType = 'terms') =>
    t.app.inject({ method: 'PUT', url: `/v1/dev/apps/${appId}/legal/${docType}?lang=en`, headers: bearer(dev.apiKey), payload: { title: 'Terms', content } });
  const adminPut = (content: string, docType = 'terms') =>
    t.app.inject({ method: 'PUT', url: `/v1/admin/legal/${docType}?lang=en`, headers: bearer(TEST_ADMIN_TOKEN), payload: { title: 'Terms', content } });

  /** Sends the PUT over a real socket and probes /healthz every 25 ms until it answers. */
  async function healthWhile(url: string, headers: Record<string, string>, content: string) {
    await (await fetch(`${base}/healthz`)).arrayBuffer(); // warm the client and the route first
    const started = Date.now();
    let finished = false;
    const put = fetch(`${base}${url}`, { method: 'PUT', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ title: 'Terms', content }) }).then(
      async (res) => ({ status: res.status, body: (await res.json()) as { code: string; message: string }, ms: Date.now() - started }),
    ).finally(() => (finished = true));
    const latencies: number[] = [];
    while (!finished) {
      latencies.push(
        await timeProbeAfterPause(25, async () => {
          const res = await fetch(`${base}/healthz`);
          await res.arrayBuffer();
          expect(res.status).toBe(200);
        }),
      );
    }
    return { put: await put, latencies };
  }

  /** A render on the event loop would hold every probe for its whole run (~40 s, at least the 2 s limit). */
  function expectLoopFree(latencies: number[]) {
    expect(latencies.length).toBeGreaterThan(10);
    expectAnsweredAtOnce(latencies, 50);
  }

  it('a developer publishing pathological emphasis: /healthz stays fast and the PUT ends in 400 within the time limit', { timeout: 90_000 }, async () => {
    const { put, latencies } = await healthWhile(`/v1/dev/apps/${appId}/legal/terms?lang=en`, bearer(dev.apiKey), SLOW);
    expect(put.status).toBe(400);
    expect(put.body.code).toBe('invalid_request');
    expect(put.body.message).toMatch(/took longer than 2 s to render/);
    // A worker start (under tsx, in the test) plus the 2 s limit; without a worker this took ~40 s.
    expect(put.ms).toBeLessThan(10_000);
    expectLoopFree(latencies);
    // The killed worker is replaced: the next document renders.
    const next = await devPut('# Terms\n\nPlain *text*.');
    expect(next.statusCode).toBe(201);
    expect(next.json().content_html).toBe('<h1>Terms</h1>\n<p>Plain <em>text</em>.</p>\n');
  });

  it('the admin platform PUT is bounded the same way', { timeout: 90_000 }, async () => {
    const { put, latencies } = await healthWhile('/v1/admin/legal/privacy?lang=en', bearer(TEST_ADMIN_TOKEN), SLOW);
    expect(put.status).toBe(400);
    expect(put.body.message).toMatch(/took longer than 2 s to render/);
    expect(put.ms).toBeLessThan(10_000);
    expectLoopFree(latencies);
    expect((await t.app.inject('/v1/legal/platform/privacy')).statusCode).toBe(404);
  });

  it('deeply nested block quotes are 400 with a clear message, not a 500 (developer and admin)', async () => {
    for (const res of [await devPut(DEEP_QUOTES), await adminPut(DEEP_QUOTES)]) {
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ code: 'invalid_request', details: [{ path: 'body.content' }] });
      expect(res.json().message).toMatch(/nested more than 20 levels deep/);
    }
    for (const content of ['>'.repeat(30), '- '.repeat(30) + 'x', '1. '.repeat(30) + 'x', '> - '.repeat(15) + 'x']) {
      const res = await devPut(content);
      expect(res.statusCode, content.slice(0, 12)).toBe(400);
      expect(res.json().message).toMatch(/nested more than 20 levels deep/);
    }
  });

  it('nesting built from indentation alone is measured on the parsed document', async () => {
    const lines = Array.from({ length: 30 }, (_, i) => `${'  '.repeat(i)}- level ${i + 1}`);
    const res = await devPut(lines.join('\n'));
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(/nested more than 20 levels deep/);
  });

  it('content over the size cap, or rendering to huge HTML, is 400 with a clear message', async () => {
    const big = await devPut('a'.repeat(60_001));
    expect(big.statusCode).toBe(400);
    expect(big.json()).toMatchObject({ code: 'invalid_request', details: [{ path: 'body.content', message: 'must be at most 60000 characters of Markdown' }] });
    // A 2 kB reference used 18,000 times: ~40 MB of HTML from 56 kB of Markdown.
    const bomb = `[a]: https://example.com/${'x'.repeat(2000)}\n\n${'[a]'.repeat(18_000)}`;
    const res = await devPut(bomb);
    expect(res.statusCode).toBe(400);
    expect(res.json().message).toMatch(/renders to more than 1000000 characters of HTML/);
  });

  it('control: an ordinary document with lists, quotes and links is published, sanitized', async () => {
    const content = [
      '# Terms of service',
      '',
      '> Please read **carefully**.',
      '> > Quoted twice.',
      '',
      '1. First',
      '   - nested',
      '     - deeper',
      '2. Second [link](https://example.com) <script>alert(1)</script>',
      '',
      '---',
      '- - -',
    ].join('\n');
    const res = await devPut(content, 'privacy');
    expect(res.statusCode).toBe(201);
    const html = res.json().content_html as string;
    expect(html).toContain('<blockquote>');
    expect(html).toContain('<ul>');
    expect(html).toContain('<a href="https://example.com" rel="noopener noreferrer nofollow">link</a>');
    expect(html).not.toContain('<script');
    const admin = await adminPut('Platform *terms*.');
    expect(admin.statusCode).toBe(201);
    expect(admin.json().content_html).toBe('<p>Platform <em>terms</em>.</p>\n');
  });
});

/**
 * The worker entry differs by build: vitest and `tsx src/server.ts` load `render-worker.ts` through
 * tsx (tested above), `node dist/src/server.js` loads the compiled `render-worker.js`. This compiles
 * the renderer like `npm run build` and runs it in a plain Node process.
 */
describe('legal rendering from compiled JavaScript', () => {
  const run = promisify(execFile);
  const outDir = join(process.cwd(), '.vitest-artifacts', `legal-build-${process.pid}-${Date.now()}`);
  afterAll(() => rmSync(outDir, { recursive: true, force: true }));

  it('renders in a worker and enforces the time limit', { timeout: 120_000 }, async () => {
    const tsc = ['node_modules/typescript/bin/tsc', '--outDir', outDir, '--rootDir', 'src', '--module', 'NodeNext', '--moduleResolution', 'NodeNext', '--target', 'ES2022', '--esModuleInterop', '--skipLibCheck', '--strict', '--types', 'node', 'src/legal/renderer.ts', 'src/legal/render-worker.ts'];
    await run(process.execPath, tsc);
    const renderer = pathToFileURL(join(outDir, 'legal', 'renderer.js')).href;
    const script = `
      import { MarkdownRenderer } from ${JSON.stringify(renderer)};
      const r = new MarkdownRenderer();
      const ok = await r.render('# Hi *there*');
      const started = Date.now();
      const slow = await r.render(${JSON.stringify(SLOW)}).then(() => 'rendered', (e) => ({ code: e.code, status: e.status, message: e.publicMessage }));
      const ms = Date.now() - started;
      await r.close();
      console.log(JSON.stringify({ ok, slow, ms }));`;
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', script]);
    const result = JSON.parse(stdout) as { ok: string; slow: { code: string; status: number; message: string }; ms: number };
    expect(result.ok).toBe('<h1>Hi <em>there</em></h1>\n');
    expect(result.slow).toMatchObject({ code: 'invalid_request', status: 400 });
    expect(result.slow.message).toMatch(/took longer than 2 s/);
    expect(result.ms).toBeLessThan(5000);
  });
});
