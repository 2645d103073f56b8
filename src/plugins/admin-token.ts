import type { FastifyRequest } from 'fastify';
import { createHmac, hkdfSync } from 'node:crypto';
import type { ResolvedConfig } from '../config.js';
import { AppError } from '../errors.js';
import { bearerCredential } from '../shared/bearer.js';
import { safeEqual } from '../shared/ids.js';

/**
 * The platform operator's credential, `Authorization: Bearer $ADMIN_TOKEN` compared in constant time:
 * the admin API requires it, and the dev mailbox accepts it from non-loopback callers.
 */

/**
 * Wrong tokens per IP per minute: once an IP has sent this many, every admin request from it answers
 * 429 `rate_limited` until the oldest of them is a minute old, the right token included (a limit that let the right
 * token through would tell a guesser when it had won).
 */
export const MAX_FAILED_ADMIN_TOKENS_PER_MINUTE = 20;

export async function authenticateAdmin(request: FastifyRequest): Promise<void> {
  const throttleKey = `admin-token-failure:${request.ip}`;
  await request.server.throttle.assertUnderLimit(throttleKey, MAX_FAILED_ADMIN_TOKENS_PER_MINUTE, 60);
  const header = request.headers.authorization;
  if (!header) throw new AppError('unauthorized', { headers: { 'www-authenticate': 'Bearer realm="gatehouse-admin"' }, detail: 'no admin token' });
  await checkAdminToken(request, bearerCredential(header));
}

/**
 * A keyed fingerprint of the current ADMIN_TOKEN (null when none is set), kept in place of the token
 * where a proof of it must be remembered (the console's operator view): it stops matching as soon as
 * the token is rotated or removed, and tells nothing about the token without SECRET_KEY.
 */
export function adminTokenFingerprint(config: Pick<ResolvedConfig, 'adminToken' | 'secretKey'>): string | null {
  if (!config.adminToken) return null;
  const key = Buffer.from(hkdfSync('sha256', config.secretKey, 'gatehouse', 'gatehouse:admin-token-fingerprint', 32));
  return createHmac('sha256', key).update(config.adminToken).digest('base64url');
}

/**
 * Checks a presented admin token (the API's bearer, the console's operator form) under the same
 * per-IP limit on wrong tokens; 401 `unauthorized` when wrong or when ADMIN_TOKEN is not set.
 */
export async function checkAdminToken(request: FastifyRequest, token: string | null | undefined): Promise<void> {
  const expected = request.server.config.adminToken;
  const throttleKey = `admin-token-failure:${request.ip}`;
  await request.server.throttle.assertUnderLimit(throttleKey, MAX_FAILED_ADMIN_TOKENS_PER_MINUTE, 60);
  if (!expected || !token || !safeEqual(token, expected)) {
    await request.server.throttle.hitKey(throttleKey, MAX_FAILED_ADMIN_TOKENS_PER_MINUTE, 60);
    throw new AppError('unauthorized', { detail: expected ? 'wrong admin token' : 'ADMIN_TOKEN is not set' });
  }
}
