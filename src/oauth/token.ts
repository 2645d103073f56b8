import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import type { App } from '../storage/repos/apps.js';
import { authenticateClient } from '../sign-in/client-auth.js';
import { authorizationCodeGrant } from './grants/authorization-code.js';
import { refreshTokenGrant } from './grants/refresh-token.js';
import { singleParams, type Params } from './params.js';

/** POST /oauth/token: parameter hygiene → grant type → client authentication → the grant's handler. */

/**
 * Failed grants (unknown, used or expired codes and refresh tokens) per IP per minute before 429
 * (SECURITY.md item 20: online guessing). Generous: a working client fails a grant only by accident.
 */
export const MAX_FAILED_GRANTS_PER_MINUTE = 100;

type GrantHandler = (app: FastifyInstance, request: FastifyRequest, client: App, params: Params) => Promise<object | string>;

const GRANTS: Record<string, GrantHandler> = {
  authorization_code: authorizationCodeGrant,
  refresh_token: refreshTokenGrant,
};

export function noStore(reply: FastifyReply): FastifyReply {
  return reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
}

export async function token(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  noStore(reply);
  const params = singleParams(request.body);
  const grantType = params.grant_type;
  if (!grantType) throw new AppError('invalid_request', { message: 'The grant_type parameter is required.' });
  const handler = Object.hasOwn(GRANTS, grantType) ? GRANTS[grantType] : undefined;
  if (!handler) throw new AppError('unsupported_grant_type');
  const { app: client } = await authenticateClient(app, { authorization: request.headers.authorization, clientId: params.client_id, clientSecret: params.client_secret, ip: request.ip });
  request.corsAppId = client.id;
  const result = await handler(app, request, client, params).catch(async (error: unknown) => {
    if (error instanceof AppError && error.code === 'invalid_grant') {
      await app.throttle.hitKey(`token-grant-failure:${request.ip}`, MAX_FAILED_GRANTS_PER_MINUTE, 60);
    }
    throw error;
  });
  reply.type('application/json; charset=utf-8');
  return reply.send(typeof result === 'string' ? result : JSON.stringify(result));
}
