import type { FastifyInstance, FastifyRequest } from 'fastify';
import { pickLocale } from '../plugins/i18n.js';
import { answerPreflight, corsOnSend, headerClientId } from '../plugins/cors.js';
import { type BearerIdentity } from '../tokens/service.js';
import { requestContext } from '../shared/request-context.js';
import { json, shareRouteDocs } from '../shared/responses.js';
import { CodeSent, ConfirmBody, EmailVerified } from './schemas.js';
import type { ZodTypeProvider } from '../plugins/validation.js';

/**
 * Email verification, `/v1/email_verify/*` (docs/reference/rest-api.md#email-verification, docs/reference/rest-api.md#pending-sign-ins): `Authorization: Bearer <access token
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
  // CORS (docs/reference/rest-api.md#cors): the credential's app once authenticated; before that, X-Client-Id or every app.
  app.addHook('onSend', corsOnSend({ appIdOf: headerClientId, unnamed: 'all-apps' }));
  app.options('/*', answerPreflight);
  app.addHook('onRoute', (route) =>
    shareRouteDocs(route, { tags: ['auth'], security: [{ accessToken: [] }, { sessionToken: [] }], errors: { 400: ['invalid_token'], 401: ['unauthorized'], 429: ['rate_limited'] } }),
  );

  app.post(
    '/request',
    {
      schema: {
        operationId: 'requestEmailVerification',
        summary: 'Mail a 6-digit email verification code',
        description: 'The code lives 10 minutes; a new request voids the previous code. Mail limit per address: MAIL_PER_HOUR, one per MAIL_INTERVAL_SECONDS.',
        response: { 202: json('The code is on its way.', CodeSent) },
        examples: { request: { summary: 'Send a code', status: 202, response: { status: 'sent', expires_in: 600 } } },
      },
    },
    async (request, reply) => {
      const identity = identities.get(request)!;
      const { expiresIn } = await app.accounts.requestEmailVerification(
        identity.userId,
        { locale: pickLocale(undefined, request.headers['accept-language']) },
        { ...requestContext(request), appId: identity.appId },
      );
      return reply.header('cache-control', 'no-store').code(202).send({ status: 'sent', expires_in: expiresIn });
    },
  );

  app.post(
    '/confirm',
    {
      schema: {
        operationId: 'confirmEmailVerification',
        summary: 'Confirm the emailed code',
        body: ConfirmBody,
        response: { 200: json('The email address is verified.', EmailVerified) },
        errors: { 400: ['invalid_code', 'code_expired'] },
        examples: {
          wrongCode: {
            summary: 'A wrong code',
            body: { code: '000000' },
            status: 400,
            response: { code: 'invalid_code', message: 'The code is incorrect.', attempts_left: 4 },
          },
        },
      },
    },
    async (request, reply) => {
      const identity = identities.get(request)!;
      await app.accounts.confirmEmailVerification(identity.userId, request.body.code, { ...requestContext(request), appId: identity.appId });
      return reply.header('cache-control', 'no-store').send({ email_verified: true });
    },
  );
}
