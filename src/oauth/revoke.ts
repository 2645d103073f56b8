import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { decodeJwt } from 'jose';
import { AppError } from '../errors.js';
import { hashSecret } from '../shared/ids.js';
import { findRefreshToken, isGrantLive, findGrant, revokeGrant } from '../storage/repos/grants.js';
import { authenticateClient } from '../sign-in/client-auth.js';
import { revokeClientCredentialTokens } from '../storage/repos/apps.js';
import { required, singleParams } from './params.js';
import { noStore } from './token.js';

/**
 * POST /oauth/revoke (RFC 7009). The client authenticates like at the token endpoint. A refresh token
 * revokes its whole family; an access token revokes its grant (`sid`), which ends the refresh tokens
 * of that sign-in too (RFC 7009 §2.1 allows it; a JWT cannot be revoked alone). Tokens of other
 * clients, unknown and already-invalid tokens are ignored: the answer is always 200.
 */
export async function revoke(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  noStore(reply);
  const params = singleParams(request.body);
  const { app: client } = await authenticateClient(app, { authorization: request.headers.authorization, clientId: params.client_id, clientSecret: params.client_secret, ip: request.ip });
  request.corsAppId = client.id;
  const token = required(params, 'token');
  // token_type_hint is only a hint (RFC 7009 §2.1): both kinds are looked up whatever it says.
  if (token.length <= 4096) {
    const refresh = await findRefreshToken(app.db, hashSecret(token));
    if (refresh) {
      if (refresh.app_id === client.id) await app.tokens.revokeRefreshToken(token, client.id);
    } else {
      const claims = await app.tokens.checkAccessToken(token, undefined, { anyAudience: true });
      if (claims) {
        if (claims.clientId === client.id) await revokeGrant(app.db, claims.grantId, app.clock.now(), 'revoked_by_client');
      } else {
        // A client-credentials token has no grant of its own: the app's client tokens issued so far go together (RFC 7009 §2.1).
        const clientToken = await app.tokens.checkClientToken(token);
        if (clientToken && clientToken.clientId === client.id) await revokeClientCredentialTokens(app.db, client.id, app.clock.now());
      }
    }
  }
  return reply.code(200).send();
}

/**
 * POST /oauth/introspect (RFC 7662), for confidential apps, about their own tokens. Anything not
 * currently valid, or issued to another client, is `{"active": false}`.
 */
export async function introspect(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  noStore(reply);
  const params = singleParams(request.body);
  const { app: client } = await authenticateClient(app, { authorization: request.headers.authorization, clientId: params.client_id, clientSecret: params.client_secret, ip: request.ip });
  if (client.type !== 'confidential') throw new AppError('invalid_client', { message: 'Only confidential clients may introspect tokens.', detail: 'public client at introspection' });
  const token = required(params, 'token');
  const inactive = { active: false };
  if (token.length > 4096) return reply.send(inactive);
  const now = app.clock.now();

  const refresh = await findRefreshToken(app.db, hashSecret(token));
  if (refresh) {
    if (refresh.app_id !== client.id || refresh.consumed_at !== null || refresh.expires_at <= now || !(await isGrantLive(app.db, refresh.grant_id, now))) {
      return reply.send(inactive);
    }
    const grant = await findGrant(app.db, refresh.grant_id);
    return reply.send({
      active: true,
      token_type: 'refresh_token',
      client_id: client.id,
      scope: refresh.scope,
      sub: grant?.user_id,
      iat: refresh.created_at,
      exp: refresh.expires_at,
      iss: app.config.baseUrl,
    });
  }
  const claims = await app.tokens.checkAccessToken(token, undefined, { anyAudience: true });
  if (!claims) {
    const clientToken = await app.tokens.checkClientToken(token);
    if (!clientToken || clientToken.clientId !== client.id) return reply.send(inactive);
    return reply.send({
      active: true,
      token_type: clientToken.jkt === undefined ? 'Bearer' : 'DPoP',
      ...(clientToken.jkt === undefined ? {} : { cnf: { jkt: clientToken.jkt } }),
      client_id: clientToken.clientId,
      scope: clientToken.scope,
      sub: clientToken.clientId,
      aud: clientToken.aud,
      iss: app.config.baseUrl,
      iat: clientToken.iat,
      exp: clientToken.exp,
      jti: clientToken.jti,
    });
  }
  if (claims.clientId !== client.id) return reply.send(inactive);
  const payload = decodeJwt(token);
  return reply.send({
    active: true,
    token_type: claims.jkt === undefined ? 'Bearer' : 'DPoP',
    ...(claims.jkt === undefined ? {} : { cnf: { jkt: claims.jkt } }),
    client_id: claims.clientId,
    scope: claims.scope,
    sub: claims.sub,
    aud: claims.aud,
    iss: app.config.baseUrl,
    iat: payload.iat,
    exp: claims.exp,
    jti: claims.jti,
    sid: claims.grantId,
  });
}
