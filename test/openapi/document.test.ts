import { Validator } from '@seriousme/openapi-schema-validator';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { generateOpenapiYaml } from '../../src/openapi/generate.js';
import { INTERFACE_VERSION } from '../../src/openapi/document.js';
import { buildTestApp, TEST_DIALECT, type TestApp } from '../helpers/app.js';

/**
 * The OpenAPI document (docs/reference/rest-api.md#interface-description) is generated from the route schemas: it describes exactly the
 * registered routes, is a valid OpenAPI 3.1 document, lints clean, is served as YAML and JSON, and the
 * checked-in openapi.yaml is what the code generates now. Database-independent checks run once, on SQLite.
 */

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/** Fastify `/a/:id(^\\d+)/*` → OpenAPI `/a/{id}/{wildcard}`. */
const toOpenApiPath = (url: string) => url.replace(/:(\w+)(\([^)]*\))?/g, '{$1}').replace(/\*$/, '{wildcard}');

type Operation = { operationId?: string; tags?: string[]; summary?: string; responses: Record<string, { content?: Record<string, { schema: { $ref?: string } }> }> };

describe('the OpenAPI document', () => {
  let t: TestApp;
  let served: { paths: Record<string, Record<string, Operation>>; [key: string]: unknown };
  beforeAll(async () => {
    t = await buildTestApp();
    served = JSON.parse((await t.app.inject('/openapi.json')).body);
  });
  afterAll(async () => t.close());

  const operations = () =>
    Object.entries(served.paths).flatMap(([path, item]) => Object.entries(item).filter(([m]) => METHODS.includes(m)).map(([method, op]) => ({ where: `${method.toUpperCase()} ${path}`, op })));

  it('describes exactly the registered routes (HEAD and CORS preflights aside)', () => {
    const registered = new Set(t.app.routeList.filter((r) => r.method !== 'HEAD' && r.method !== 'OPTIONS').map((r) => `${r.method} ${toOpenApiPath(r.url)}`));
    const described = new Set(operations().map((o) => o.where));
    expect({ missingFromOpenapi: [...registered].filter((r) => !described.has(r)).sort() }).toEqual({ missingFromOpenapi: [] });
    expect({ notRegistered: [...described].filter((d) => !registered.has(d)).sort() }).toEqual({ notRegistered: [] });
  });

  it('is a valid OpenAPI 3.1 document carrying the interface version (@seriousme/openapi-schema-validator)', async () => {
    const validator = new Validator();
    const result = await validator.validate(structuredClone(served));
    expect(result.errors ?? []).toEqual([]);
    expect(validator.version).toBe('3.1');
    expect((served.info as { version: string }).version).toBe(INTERFACE_VERSION);
  });

  it('gives every operation an operationId, a tag, a summary and a success response', () => {
    for (const { where, op } of operations()) {
      expect(op.operationId, where).toMatch(/^[a-z][A-Za-z]+$/);
      expect(op.tags?.length, where).toBe(1);
      expect(op.summary, where).toBeTruthy();
      // The generic error page is the one operation that only ever answers an error.
      if (op.operationId !== 'errorPage') expect(Object.keys(op.responses).some((status) => /^[23]/.test(status)), where).toBe(true);
    }
  });

  it('answers every client error and unexpected error with a shared body: Error, OAuthError, or an HTML page', () => {
    for (const { where, op } of operations()) {
      expect(op.responses.default, where).toBeDefined();
      for (const [status, response] of Object.entries(op.responses)) {
        // 5xx of its own (readiness: 503 with the readiness body) are the operation's to describe.
        if (!/^4|^default$/.test(status)) continue;
        for (const media of Object.values(response.content ?? {})) {
          expect(media.schema.$ref, `${where} ${status}`).toMatch(/^#\/components\/schemas\/(Error|OAuthError|HtmlPage)$/);
        }
      }
    }
  });

  it("lists a form's own refusals beside those every form shares (CSRF 403, busy 503 with Retry-After)", () => {
    const login = served.paths['/login']!.post as Operation & { responses: Record<string, { description: string; headers?: Record<string, unknown> }> };
    expect(login.responses['403']!.description).toMatch(/`forbidden`, `user_disabled`, `user_blocked`/);
    expect(login.responses['503']!.description).toMatch(/`service_unavailable`/);
    expect(login.responses['503']!.headers).toHaveProperty('Retry-After');
    expect(login.responses['429']!.headers).toHaveProperty('Retry-After');
  });

  it('is served as YAML and JSON with their media types, the same document', async () => {
    const yaml = await t.app.inject('/openapi.yaml');
    expect(yaml.statusCode).toBe(200);
    expect(yaml.headers['content-type']).toBe('application/yaml; charset=utf-8');
    const json = await t.app.inject('/openapi.json');
    expect(json.headers['content-type']).toBe('application/json; charset=utf-8');
    expect(parse(yaml.body)).toEqual(served);
  });

  describe.skipIf(TEST_DIALECT !== 'sqlite')('the checked-in openapi.yaml', () => {
    it('is the document the route schemas generate now (else run `npm run openapi`)', async () => {
      expect(readFileSync('openapi.yaml', 'utf8') === (await generateOpenapiYaml()), 'openapi.yaml is stale: run `npm run openapi`').toBe(true);
    });

    it('does not depend on the order the schemas\' modules were loaded in (a test worker loads them in any order)', () => {
      const script = [
        "await import('./src/passkeys/schemas.ts');",
        "await import('./src/mfa/schemas.ts');",
        "const { generateOpenapiYaml } = await import('./src/openapi/generate.ts');",
        'process.stdout.write(await generateOpenapiYaml());',
      ].join(' ');
      const generated = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
      expect(generated.status, generated.stderr).toBe(0);
      expect(generated.stdout === readFileSync('openapi.yaml', 'utf8'), 'the document generated after other modules differs').toBe(true);
    }, 60_000);

    it('passes Redocly lint (recommended rules, redocly.yaml) without a single problem', () => {
      const lint = spawnSync(process.execPath, ['node_modules/@redocly/cli/bin/cli.js', 'lint', 'openapi.yaml', '--format=stylish'], { encoding: 'utf8' });
      expect(lint.stderr + lint.stdout).toContain('Your API description is valid');
      expect(lint.status).toBe(0);
    }, 60_000);
  });
});
