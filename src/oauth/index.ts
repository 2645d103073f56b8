import type { FastifyInstance, FastifyRequest } from 'fastify';
import { answerPreflight, corsOnSend } from '../plugins/cors.js';
import { authorize } from './authorize.js';
import { parseBasic } from '../sign-in/client-auth.js';
import { firstValue } from './params.js';
import { introspect, revoke } from './revoke.js';
import { ParamsBody } from './schemas.js';
import { token } from './token.js';
import { userinfo } from './userinfo.js';

/**
 * The OAuth 2.0 / OpenID Connect core (CONTRACT §4): /oauth/authorize, /oauth/token, /oauth/revoke,
 * /oauth/introspect, /oauth/userinfo. Token-style endpoints answer RFC 6749 §5.2 errors with
 * no-store; authorize renders HTML errors until client and redirect_uri are verified, then redirects.
 * CORS (CONTRACT §14.17, 23) on token, revoke and userinfo only; never on authorize.
 */
export default async function oauth(app: FastifyInstance) {
  const tokenClientId = (request: FastifyRequest) => parseBasic(request.headers.authorization)?.clientId ?? firstValue(request.body, 'client_id');
  const namedClientCors = corsOnSend({ appIdOf: tokenClientId, unnamed: 'none' });

  // No automatic HEAD route: a HEAD must not run the flow (it would issue a code nobody receives).
  app.get('/oauth/authorize', { config: { errorStyle: 'html' }, exposeHeadRoute: false }, (request, reply) => authorize(app, request, reply));

  const tokenConfig = { errorStyle: 'oauth' as const, acceptForm: true };
  app.post('/oauth/token', { config: tokenConfig, schema: { body: ParamsBody }, onSend: namedClientCors }, (request, reply) => token(app, request, reply));
  app.post('/oauth/revoke', { config: tokenConfig, schema: { body: ParamsBody }, onSend: namedClientCors }, (request, reply) => revoke(app, request, reply));
  app.post('/oauth/introspect', { config: tokenConfig, schema: { body: ParamsBody } }, (request, reply) => introspect(app, request, reply));
  app.route({
    method: ['GET', 'POST'],
    url: '/oauth/userinfo',
    config: tokenConfig,
    onSend: corsOnSend({ unnamed: 'all-apps' }),
    handler: (request, reply) => userinfo(app, request, reply),
  });
  for (const url of ['/oauth/token', '/oauth/revoke', '/oauth/userinfo']) {
    app.options(url, { config: { errorStyle: 'oauth' } }, answerPreflight);
  }
}
