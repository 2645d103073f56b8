import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { PROJECT_ROOT } from '../shared/paths.js';

/** `GET /openapi.yaml`: the interface description (CONTRACT §14.25), read once at startup. */
export default async function openapiRoute(app: FastifyInstance) {
  const document = readFileSync(join(PROJECT_ROOT, 'openapi.yaml'), 'utf8');
  app.get('/openapi.yaml', async (_request, reply) => reply.type('application/yaml; charset=utf-8').header('cache-control', 'public, max-age=300').send(document));
}
