import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { buildTestApp, type TestApp } from './helpers/app.js';

/**
 * openapi.yaml ⇄ registered routes (STYLE.md "Tests"). Every route the app registers must be described,
 * and every described path+method must exist. HEAD (automatic for GET) and OPTIONS (CORS preflights)
 * are not compared.
 */

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/** Fastify `/a/:id(^\\d+)/*` → OpenAPI `/a/{id}/{wildcard}`. */
const toOpenApiPath = (url: string) => url.replace(/:(\w+)(\([^)]*\))?/g, '{$1}').replace(/\*$/, '{wildcard}');

describe('openapi.yaml', () => {
  let t: TestApp;
  const document = parse(readFileSync('openapi.yaml', 'utf8'));
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t.close());

  it('is OpenAPI 3.1 with version 1.0.0', () => {
    expect(document.openapi).toBe('3.1.0');
    expect(document.info.version).toBe('1.0.0');
  });

  it('describes exactly the registered routes', () => {
    const registered = new Set(
      t.app.routeList.filter((r) => r.method !== 'HEAD' && r.method !== 'OPTIONS').map((r) => `${r.method} ${toOpenApiPath(r.url)}`),
    );
    const described = new Set(
      Object.entries(document.paths as Record<string, Record<string, unknown>>).flatMap(([path, item]) =>
        Object.keys(item).filter((key) => METHODS.includes(key)).map((method) => `${method.toUpperCase()} ${path}`),
      ),
    );
    expect({ missingFromOpenapi: [...registered].filter((r) => !described.has(r)).sort() }).toEqual({ missingFromOpenapi: [] });
    expect({ notRegistered: [...described].filter((d) => !registered.has(d)).sort() }).toEqual({ notRegistered: [] });
  });

  it('resolves every $ref', () => {
    const refs = JSON.stringify(document).match(/"\$ref":"[^"]+"/g) ?? [];
    for (const ref of new Set(refs)) {
      const pointer = ref.slice('"$ref":"#/'.length, -1).split('/');
      const target = pointer.reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], document);
      expect(target, ref).toBeDefined();
    }
  });

  it('is served at GET /openapi.yaml as application/yaml', async () => {
    const res = await t.app.inject('/openapi.yaml');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/yaml/);
    expect(parse(res.body).info.version).toBe('1.0.0');
  });
});
