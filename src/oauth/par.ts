import { randomBytes } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { authenticateClient } from '../sign-in/client-auth.js';
import { insertPushedRequest } from '../storage/repos/pushed-requests.js';
import { checkAuthorizeParams, KNOWN_PARAMS, REQUEST_URI_PREFIX, requestUriHash } from './authorize.js';
import { paramsWithResource } from './params.js';
import { noStore } from './token.js';

/**
 * POST /oauth/par (RFC 9126, docs/reference/oauth.md#pushed-authorization-requests-rfc-9126): the client
 * authenticates as at /oauth/token, the request is checked exactly as /oauth/authorize checks it (and
 * must carry PKCE, whatever the client type), and only its known parameters are kept, by the hash of a fresh `request_uri`, for 60 seconds, once.
 */

export const PUSHED_REQUEST_SECONDS = 60;

/**
 * Pushed requests per IP per minute, whatever their outcome (docs/reference/oauth.md#pushed-authorization-requests-rfc-9126):
 * each one that passes stores a row, so one address cannot fill the table. One per sign-in; generous for an app backend.
 */
export const MAX_PUSHED_REQUESTS_PER_MINUTE = 120;

/**
 * Failed client authentications at PAR per IP per minute, over every client id (docs/security/checklist.md#brute-force-and-rate-limits):
 * past it, that IP's pushes are refused until the oldest failure is a minute old, right credentials included.
 */
export const MAX_FAILED_PAR_AUTH_PER_MINUTE = 20;

export async function pushAuthorizationRequest(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  noStore(reply);
  await app.throttle.hitKey(`par:${request.ip}`, MAX_PUSHED_REQUESTS_PER_MINUTE, 60);
  const failureKey = `par-client-failure:${request.ip}`;
  await app.throttle.assertUnderLimit(failureKey, MAX_FAILED_PAR_AUTH_PER_MINUTE, 60);
  const params = paramsWithResource(request.body);
  // RFC 9449 §10.1: a proof here binds the code to its key, as dpop_jkt would.
  const codeJkt = await app.tokens.dpop.codeKey(request, reply, '/oauth/par', params.dpop_jkt);
  const credentials = { authorization: request.headers.authorization, clientId: params.client_id, clientSecret: params.client_secret, ip: request.ip };
  const { app: client } = await authenticateClient(app, credentials).catch(async (error: unknown) => {
    if (error instanceof AppError && error.code === 'invalid_client') await app.throttle.hitKey(failureKey, MAX_FAILED_PAR_AUTH_PER_MINUTE, 60);
    throw error;
  });
  request.corsAppId = client.id;
  if (params.request_uri !== undefined) throw new AppError('invalid_request', { message: 'request_uri cannot be pushed (RFC 9126 §2.1).' });
  const pushed: Record<string, string> = { ...params, client_id: client.id, ...(codeJkt !== undefined ? { dpop_jkt: codeJkt } : {}) };
  const checked = checkAuthorizeParams(client, pushed, app.config);
  // FAPI 2.0 Security Profile §5.3.2.2 (docs/reference/oauth.md#fapi-20-security-profile): PKCE for every pushed request, confidential clients included.
  if (checked.codeChallenge === null) throw new AppError('invalid_request', { message: 'PKCE: code_challenge (S256) is required for a pushed request.' });
  const kept = Object.fromEntries(Object.entries(checked.params).filter(([name]) => KNOWN_PARAMS.has(name)));
  const requestUri = `${REQUEST_URI_PREFIX}${randomBytes(32).toString('base64url')}`;
  const now = app.clock.now();
  await insertPushedRequest(app.db, { uriHash: requestUriHash(requestUri), appId: client.id, params: kept, now, expiresAt: now + PUSHED_REQUEST_SECONDS });
  request.log.info({ client_id: client.id }, 'authorization request pushed');
  return reply.code(201).send({ request_uri: requestUri, expires_in: PUSHED_REQUEST_SECONDS });
}
