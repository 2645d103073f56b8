import swagger from '@fastify/swagger';
import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { z } from 'zod';
import { setPageHeaders, VIEWS_DIR } from '../plugins/views.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { html, text } from '../shared/responses.js';
import { type OpenApiDocument, swaggerOptions, toYaml } from './document.js';

/**
 * The interface description (docs/reference/rest-api.md#interface-description): the OpenAPI 3.1 document generated from the route
 * schemas, at `GET /openapi.yaml` and `GET /openapi.json`, and the API reference page `GET /docs`
 * (Swagger UI, served from the swagger-ui-dist package: no CDN, and the pages' CSP holds).
 * Register before any route: @fastify/swagger learns the routes as they are added.
 */

export interface OpenApiRenderings {
  document: OpenApiDocument;
  yaml: string;
  json: string;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The document and its two renderings, built once all routes are known (after `ready`). */
    openapi(): OpenApiRenderings;
  }
}

const DocumentSchema = z
  .looseObject({ openapi: z.literal('3.1.0'), info: z.looseObject({ title: z.string(), version: z.string() }), paths: z.record(z.string(), z.unknown()) })
  .meta({ id: 'OpenApiDocument', description: 'An OpenAPI 3.1 document.' });

const SWAGGER_UI_DIR = dirname(createRequire(import.meta.url).resolve('swagger-ui-dist/package.json'));
const DOCS_ASSETS = {
  'swagger-ui.css': { path: join(SWAGGER_UI_DIR, 'swagger-ui.css'), type: 'text/css; charset=utf-8' },
  'swagger-ui-bundle.js': { path: join(SWAGGER_UI_DIR, 'swagger-ui-bundle.js'), type: 'text/javascript; charset=utf-8' },
  'docs.js': { path: join(VIEWS_DIR, 'assets', 'docs.js'), type: 'text/javascript; charset=utf-8' },
  'docs.css': { path: join(VIEWS_DIR, 'assets', 'docs.css'), type: 'text/css; charset=utf-8' },
} as const;
type DocsAsset = keyof typeof DOCS_ASSETS;
const DocsAssetParams = z.strictObject({ file: z.enum(Object.keys(DOCS_ASSETS) as [DocsAsset, ...DocsAsset[]]) });

/** Files read once per process, when first asked for (the Swagger UI bundle is 1.7 MB). */
const fileCache = new Map<string, Promise<string>>();
const cachedFile = (path: string): Promise<string> => {
  let content = fileCache.get(path);
  if (!content) {
    content = readFile(path, 'utf8');
    fileCache.set(path, content);
  }
  return content;
};

async function openapiPlugin(scope: FastifyInstance) {
  await scope.register(swagger, swaggerOptions(scope.config.baseUrl));
  const app = scope.withTypeProvider<ZodTypeProvider>();

  let renderings: OpenApiRenderings | undefined;
  app.decorate('openapi', () => {
    if (!renderings) {
      const document = app.swagger() as unknown as OpenApiDocument;
      renderings = { document, yaml: toYaml(document), json: JSON.stringify(document) };
    }
    return renderings;
  });
  const cacheable = 'public, max-age=300';

  app.get(
    '/openapi.yaml',
    {
      schema: {
        operationId: 'getOpenapiYaml',
        tags: ['operations'],
        summary: 'This interface description, as YAML',
        response: { 200: text('The OpenAPI 3.1 document.', 'application/yaml', DocumentSchema) },
      },
    },
    async (_request, reply) => reply.type('application/yaml; charset=utf-8').header('cache-control', cacheable).send(app.openapi().yaml),
  );

  app.get(
    '/openapi.json',
    {
      schema: {
        operationId: 'getOpenapiJson',
        tags: ['operations'],
        summary: 'This interface description, as JSON',
        response: { 200: text('The OpenAPI 3.1 document.', 'application/json', DocumentSchema) },
      },
    },
    async (_request, reply) => reply.type('application/json; charset=utf-8').header('cache-control', cacheable).send(app.openapi().json),
  );

  const page = join(VIEWS_DIR, 'docs.html');
  app.get(
    '/docs',
    { schema: { operationId: 'getApiReference', tags: ['operations'], summary: 'API reference page (Swagger UI)', response: { 200: html('The API reference, rendered from /openapi.json.') } } },
    async (_request, reply) => {
      setPageHeaders(reply, app.config.baseUrl.startsWith('https://'));
      return reply.type('text/html; charset=utf-8').send(await cachedFile(page));
    },
  );

  app.get(
    '/docs/assets/:file',
    {
      schema: {
        operationId: 'getApiReferenceAsset',
        tags: ['operations'],
        summary: 'A script or stylesheet of the API reference page',
        params: DocsAssetParams,
        response: {
          200: { description: 'The file.', content: { 'text/css': { schema: z.string() }, 'text/javascript': { schema: z.string() } } },
        },
      },
    },
    async (request, reply) => {
      const asset = DOCS_ASSETS[request.params.file];
      return reply.type(asset.type).header('cache-control', 'public, max-age=3600').send(await cachedFile(asset.path));
    },
  );
}

export default fp(openapiPlugin, { name: 'openapi', dependencies: ['db'] });
