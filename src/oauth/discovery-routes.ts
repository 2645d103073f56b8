import type { FastifyInstance } from 'fastify';
import { answerPreflight, corsOnSend } from '../plugins/cors.js';
import { discoveryDocument, protectedResourceDocument } from './discovery.js';
import { PROTECTED_RESOURCE_PATH } from '../shared/resources.js';
import { json, shareRouteDocs } from '../shared/responses.js';
import { Discovery, Jwks, ProtectedResourceMetadata } from './schemas.js';

/**
 * Public metadata: both discovery documents and the JWKS (docs/reference/oauth.md#endpoints), with CORS for the origins of
 * all apps (docs/reference/rest-api.md#cors: these requests name no app) and answers to their preflights.
 */

const CACHE_CONTROL = 'public, max-age=300';
const DISCOVERY_PATHS = ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server'];
const JWKS_PATH = '/oauth/jwks';

export default async function discoveryRoutes(app: FastifyInstance) {
  const document = discoveryDocument(app.config.baseUrl, { registration: app.config.registration.enabled });

  // These requests name no app: every app's origins. Servers fetching the JWKS (no Origin) never read apps.
  app.addHook('onSend', corsOnSend({ unnamed: 'all-apps' }));
  for (const path of [...DISCOVERY_PATHS, JWKS_PATH, PROTECTED_RESOURCE_PATH]) app.options(path, answerPreflight);

  app.addHook('onRoute', (route) => shareRouteDocs(route, { tags: ['oauth'] }));
  const cached = { 'Cache-Control': { description: '`public, max-age=300`.', type: 'string' } };
  const operations: Record<string, { operationId: string; summary: string }> = {
    '/.well-known/openid-configuration': { operationId: 'getOpenidConfiguration', summary: 'OpenID Provider metadata (OIDC Discovery 1.0)' },
    '/.well-known/oauth-authorization-server': { operationId: 'getAuthorizationServerMetadata', summary: 'Authorization server metadata (RFC 8414)' },
  };
  for (const path of DISCOVERY_PATHS) {
    const schema = {
      ...operations[path],
      response: { 200: json('The metadata.', Discovery, cached) },
      examples: { metadata: { summary: 'The metadata', status: 200, response: document } },
    };
    app.get(path, { schema }, async (_request, reply) => {
      reply.header('cache-control', CACHE_CONTROL);
      return document;
    });
  }
  const resourceDocument = protectedResourceDocument(app.config.baseUrl);
  const resourceSchema = {
    operationId: 'getProtectedResourceMetadata',
    summary: "Protected-resource metadata (RFC 9728) of Gatehouse's own resource endpoints",
    description: 'What `resource_metadata` in the `WWW-Authenticate` of a 401 from `/oauth/userinfo` or `/v1/profile` points to (docs/reference/oauth.md#protected-resource-metadata-rfc-9728).',
    response: { 200: json('The metadata.', ProtectedResourceMetadata, cached) },
    examples: { metadata: { summary: 'The metadata', status: 200, response: resourceDocument } },
  };
  app.get(PROTECTED_RESOURCE_PATH, { schema: resourceSchema }, async (_request, reply) => {
    reply.header('cache-control', CACHE_CONTROL);
    return resourceDocument;
  });
  const jwks = {
    operationId: 'getJwks',
    summary: 'The JSON Web Key Set (`jwks_uri`)',
    response: { 200: json('The public keys.', Jwks, cached) },
    examples: { keys: { summary: 'One ES256 and one RS256 key', status: 200, response: { keys: [{ kty: 'EC', kid: 'es256-01k2v6xf', alg: 'ES256', use: 'sig', crv: 'P-256', x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU', y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0' }] } } },
  };
  app.get(JWKS_PATH, { schema: jwks }, async (_request, reply) => {
    reply.header('cache-control', CACHE_CONTROL);
    return app.keys.jwks();
  });
}
