import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import type { App } from '../storage/repos/apps.js';
import { type AppReader, authenticateClient } from '../sign-in/client-auth.js';
import { authorizationCodeGrant } from './grants/authorization-code.js';
import { refreshTokenGrant } from './grants/refresh-token.js';
import { DEVICE_CODE_GRANT, deviceCodeGrant } from './grants/device-code.js';
import { paramsWithResource, type Params } from './params.js';
import { clientCredentialsGrant } from './grants/client-credentials.js';

/** POST /oauth/token: parameter hygiene → grant type → the grant's handler, which first authenticates the client. */

/**
 * Failed grants (unknown, used or expired codes and refresh tokens) per IP per minute before 429
 * (docs/security/checklist.md#authorization-codes-and-the-authorize-endpoint: online guessing). Generous: a working client fails a grant only by accident.
 */
export const MAX_FAILED_GRANTS_PER_MINUTE = 100;

/**
 * Authenticates the requesting client (client-auth.ts), reading its app with `readApp`: a grant may read
 * what it needs in the same statement. Every grant calls it before it looks at its own parameters.
 */
export type ClientAuthenticator = <A extends App = App>(readApp?: AppReader<A>) => Promise<A>;

/** `dpopJkt`: the key of the request's DPoP proof, checked (undefined without one). */
type GrantHandler = (app: FastifyInstance, request: FastifyRequest, params: Params, authenticate: ClientAuthenticator, dpopJkt: string | undefined) => Promise<object | string>;

const GRANTS: Record<string, GrantHandler> = {
  authorization_code: authorizationCodeGrant,
  refresh_token: refreshTokenGrant,
  [DEVICE_CODE_GRANT]: deviceCodeGrant,
  client_credentials: clientCredentialsGrant,
};

export function noStore(reply: FastifyReply): FastifyReply {
  return reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
}

export async function token(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  noStore(reply);
  const params = paramsWithResource(request.body);
  const grantType = params.grant_type;
  if (!grantType) throw new AppError('invalid_request', { message: 'The grant_type parameter is required.' });
  const handler = Object.hasOwn(GRANTS, grantType) ? GRANTS[grantType] : undefined;
  if (!handler) throw new AppError('unsupported_grant_type');
  // RFC 9449 §5: the proof is checked before anything else; the grant decides what its key binds.
  const dpopJkt = await app.tokens.dpop.proofKey(request, reply, { path: '/oauth/token', site: 'token' });
  const credentials = { authorization: request.headers.authorization, clientId: params.client_id, clientSecret: params.client_secret, ip: request.ip };
  const authenticate: ClientAuthenticator = async (readApp) => {
    const { app: client } = await authenticateClient(app, credentials, readApp);
    request.corsAppId = client.id;
    app.tokens.dpop.assertRequired(client, dpopJkt);
    return client;
  };
  const result = await handler(app, request, params, authenticate, dpopJkt).catch(async (error: unknown) => {
    if (error instanceof AppError && error.code === 'invalid_grant') {
      await app.throttle.hitKey(`token-grant-failure:${request.ip}`, MAX_FAILED_GRANTS_PER_MINUTE, 60);
    }
    throw error;
  });
  reply.type('application/json; charset=utf-8');
  return reply.send(typeof result === 'string' ? result : JSON.stringify(result));
}
