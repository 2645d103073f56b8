import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { bearerCredential } from '../shared/bearer.js';
import { hashSecret } from '../shared/ids.js';
import { type App, findApp } from '../storage/repos/apps.js';
import { type Developer, findDeveloperByKeyHash } from '../storage/repos/developers.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The authenticated developer. Set only inside the `/v1/dev` scope (its onRequest hook). */
    developer: Developer;
  }
  interface FastifyInstance {
    /**
     * Inside the `/v1/dev` scope: the app `id` if it belongs to the calling developer; otherwise 404
     * `not_found` (another developer's app is indistinguishable from a missing one, docs/reference/rest-api.md#developers).
     */
    requireOwnedApp(request: FastifyRequest, id: string): Promise<App>;
  }
}

/**
 * Wrong keys per IP per minute (docs/security/checklist.md#brute-force-and-rate-limits): once an IP has sent this many, every `/v1/dev`
 * request from it answers 429 `rate_limited` until the oldest of them is a minute old, a right key included.
 */
export const MAX_FAILED_DEVELOPER_KEYS_PER_MINUTE = 20;

/**
 * onRequest hook of the `/v1/dev` scope: `Authorization: Bearer <developer API key>`, looked up by its
 * SHA-256. Keys are never read from the query string (docs/security/checklist.md#developer-api-and-public-endpoints).
 */
export async function authenticateDeveloper(request: FastifyRequest, _reply: FastifyReply): Promise<void> {
  const throttleKey = `developer-key-failure:${request.ip}`;
  await request.server.throttle.assertUnderLimit(throttleKey, MAX_FAILED_DEVELOPER_KEYS_PER_MINUTE, 60);
  const header = request.headers.authorization;
  if (!header) throw new AppError('unauthorized', { headers: { 'www-authenticate': 'Bearer realm="gatehouse"' }, detail: 'no developer API key' });
  const key = bearerCredential(header);
  const developer = key ? await findDeveloperByKeyHash(request.server.db, hashSecret(key)) : undefined;
  if (!developer) {
    await request.server.throttle.hitKey(throttleKey, MAX_FAILED_DEVELOPER_KEYS_PER_MINUTE, 60);
    throw new AppError('unauthorized', { detail: 'unknown developer API key' });
  }
  request.developer = developer;
}

export async function requireOwnedApp(request: FastifyRequest, id: string): Promise<App> {
  const app = await findApp(request.server.db, id);
  if (!app || app.developerId !== request.developer.id) throw new AppError('not_found', { detail: `app ${id} is not the developer's` });
  return app;
}
