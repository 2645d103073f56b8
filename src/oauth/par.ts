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
 * authenticates as at /oauth/token, the request is checked exactly as /oauth/authorize checks it, and
 * only its known parameters are kept, by the hash of a fresh `request_uri`, for 60 seconds, once.
 */

export const PUSHED_REQUEST_SECONDS = 60;

export async function pushAuthorizationRequest(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  noStore(reply);
  const params = paramsWithResource(request.body);
  // RFC 9449 §10.1: a proof here binds the code to its key, as dpop_jkt would.
  const proofJkt = await app.tokens.dpop.proofKey(request, reply, { path: '/oauth/par', site: 'token' });
  const credentials = { authorization: request.headers.authorization, clientId: params.client_id, clientSecret: params.client_secret, ip: request.ip };
  const { app: client } = await authenticateClient(app, credentials);
  request.corsAppId = client.id;
  if (params.request_uri !== undefined) throw new AppError('invalid_request', { message: 'request_uri cannot be pushed (RFC 9126 §2.1).' });
  const pushed: Record<string, string> = { ...params, client_id: client.id };
  if (proofJkt !== undefined) {
    if (pushed.dpop_jkt !== undefined && pushed.dpop_jkt !== proofJkt) throw app.tokens.dpop.keyMismatch('token', 'dpop_jkt differs from the key of the DPoP proof');
    pushed.dpop_jkt = proofJkt;
  }
  const checked = checkAuthorizeParams(client, pushed, app.config);
  const kept = Object.fromEntries(Object.entries(checked.params).filter(([name]) => KNOWN_PARAMS.has(name)));
  const requestUri = `${REQUEST_URI_PREFIX}${randomBytes(32).toString('base64url')}`;
  const now = app.clock.now();
  await insertPushedRequest(app.db, { uriHash: requestUriHash(requestUri), appId: client.id, params: kept, now, expiresAt: now + PUSHED_REQUEST_SECONDS });
  request.log.info({ client_id: client.id }, 'authorization request pushed');
  return reply.code(201).send({ request_uri: requestUri, expires_in: PUSHED_REQUEST_SECONDS });
}
