import type { FastifyInstance, FastifyRequest } from 'fastify';
import { pickLocale } from '../plugins/i18n.js';
import { answerPreflight, corsOnSend, headerClientId } from '../plugins/cors.js';
import { type BearerIdentity } from '../tokens/service.js';
import { requestContext } from '../shared/request-context.js';
import { ConfirmBody } from './schemas.js';
import type { ZodTypeProvider } from '../plugins/validation.js';

/**
 * Email verification, `/v1/email_verify/*` (CONTRACT §6, §14.6): `Authorization: Bearer <access token
 * or session JWT>`. `request` mails a 6-digit code (10 min, stored as an HMAC, a new one voids the
 * old, mail limit `verify`); `confirm` checks it (CODE_MAX_ATTEMPTS wrong answers use it up).
 */
export default async function emailVerifyRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  // The credential is checked first (401 before any body validation).
  const identities = new WeakMap<FastifyRequest, BearerIdentity>();
  app.addHook('onRequest', async (request) => {
    if (request.method === 'OPTIONS') return;
    const identity = await app.tokens.authenticate(request, { allowSession: true });
    identities.set(request, identity);
    request.corsAppId = identity.appId;
  });
  // CORS (CONTRACT §14.17): the credential's app once authenticated; before that, X-Client-Id or every app.
  app.addHook('onSend', corsOnSend({ appIdOf: headerClientId, unnamed: 'all-apps' }));
  app.options('/*', answerPreflight);

  app.post('/request', async (request, reply) => {
    const identity = identities.get(request)!;
    const { expiresIn } = await app.accounts.requestEmailVerification(
      identity.userId,
      { locale: pickLocale(undefined, request.headers['accept-language']) },
      { ...requestContext(request), appId: identity.appId },
    );
    return reply.header('cache-control', 'no-store').code(202).send({ status: 'sent', expires_in: expiresIn });
  });

  app.post('/confirm', { schema: { body: ConfirmBody } }, async (request, reply) => {
    const identity = identities.get(request)!;
    await app.accounts.confirmEmailVerification(identity.userId, request.body.code, { ...requestContext(request), appId: identity.appId });
    return reply.header('cache-control', 'no-store').send({ email_verified: true });
  });
}
