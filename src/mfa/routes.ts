import type { FastifyInstance, FastifyReply } from 'fastify';
import { namedClientId, resolveApp } from '../sign-in/requesting-app.js';
import { AppError } from '../errors.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { parseAmr } from '../shared/acr.js';
import { requestContext } from '../shared/request-context.js';
import { json, OPTIONAL_CLIENT_AUTH } from '../shared/responses.js';
import { SignInResult } from '../shared/schemas.js';
import { AWAITING, findGrant, type GrantRow } from '../storage/repos/grants.js';
import { findUserById, type UserRow } from '../storage/repos/users.js';
import { AuthenticationOptions } from '../passkeys/index.js';
import { originsOfApp } from '../shared/cors.js';
import { enrolmentOwnerOf, type SecondFactorProof } from '../sign-in/service.js';
import { MfaPasskeyOptionsBody, MfaVerifyBody, TotpSetup, TotpSetupBody } from './schemas.js';

/**
 * `/v1/auth/mfa/*`: the second step of a REST sign-in (docs/guides/mfa-and-passkeys.md), registered inside the
 * `/v1/auth` scope (per-IP limit, CORS, client authentication as the other sign-in routes). The rule
 * itself is `app.signIn`'s; these routes only read the pending session and answer.
 */
export default async function mfaSignInRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  const noStore = (reply: FastifyReply) => reply.header('cache-control', 'no-store').header('pragma', 'no-cache');

  /** The pending sign-in a `session` names: its app (client-authenticated), grant and user. */
  async function pendingOf(request: Parameters<typeof namedClientId>[0], body: { session: string; client_id?: string; client_secret?: string }) {
    const claims = await app.tokens.verifySession(body.session, namedClientId(request, body));
    const client = await resolveApp(app, request, { ...body, client_id: claims.appId }, { authenticate: true });
    const grant: GrantRow | undefined = await findGrant(app.db, claims.grantId);
    const user: UserRow | undefined = await findUserById(app.db, claims.sub);
    if (!grant || !user || grant.awaiting_completion !== AWAITING.secondFactor) {
      throw new AppError('invalid_token', { detail: 'session is not a sign-in waiting for a second factor' });
    }
    return { client, grant, user };
  }

  app.post(
    '/verify',
    {
      schema: {
        operationId: 'verifySecondFactor',
        summary: 'Give the second factor of a pending sign-in',
        description:
          'With the `session` of a `pending` answer whose `next_step` is `mfa`, exactly one of: `code`, an authenticator-app code (each accepted once) or a recovery code (each usable once); ' +
          '`passkey`, the answer to options from `POST /v1/auth/mfa/passkey/options` (one of the same user\'s passkeys). ' +
          'Five wrong codes lock the second factor like passwords (429 with `retry_after`). Answers the sign-in result: tokens, or the next pending step.',
        security: OPTIONAL_CLIENT_AUTH,
        body: MfaVerifyBody,
        response: { 200: json('Signed in, or the next step is pending.', SignInResult) },
        errors: { 400: ['invalid_code', 'invalid_token'], 401: ['invalid_credentials'], 403: ['user_disabled', 'user_blocked', 'feature_disabled'] },
      },
    },
    async (request, reply) => {
      const { client, grant, user } = await pendingOf(request, request.body);
      const { code, passkey } = request.body;
      const proof: SecondFactorProof =
        passkey === undefined
          ? { kind: 'code', code: code! }
          : {
              kind: 'passkey',
              // Only an account-wide passkey of the user who gave the first factor, answering a challenge issued to this app.
              amr: (
                await app.passkeys.verifyAuthentication({ userId: user.id, binding: `app:${client.id}`, response: passkey, appId: client.id, secondFactor: true, appOrigins: originsOfApp(client) })
              ).amr[0],
            };
      const result = await app.signIn.completeSecondFactor(client, grant, user, proof, requestContext(request));
      return noStore(reply).send(result);
    },
  );

  app.post(
    '/passkey/options',
    {
      schema: {
        operationId: 'secondFactorPasskeyOptions',
        summary: 'Options to give a passkey as the second factor of a pending sign-in',
        description:
          'For a `pending` `mfa` answer whose `methods` include `passkey`: options for `navigator.credentials.get()` listing that user\'s passkeys. ' +
          'The challenge is bound to the app and answers once within 5 minutes, at `POST /v1/auth/mfa/verify` (`passkey`).',
        security: OPTIONAL_CLIENT_AUTH,
        body: MfaPasskeyOptionsBody,
        response: { 200: json('Options for `navigator.credentials.get()`.', AuthenticationOptions) },
        errors: { 400: ['invalid_token'], 403: ['feature_disabled'] },
      },
    },
    async (request, reply) => {
      const { client, user } = await pendingOf(request, request.body);
      return noStore(reply).send(await app.passkeys.authenticationOptions({ userId: user.id, binding: `app:${client.id}` }));
    },
  );

  app.post(
    '/totp/setup',
    {
      schema: {
        operationId: 'setUpTotpDuringSignIn',
        summary: 'Set up an authenticator app during a sign-in that requires one',
        description:
          'Only for a `pending` `mfa` answer with `enroll`: the app requires a second factor the user does not have. Returns a new secret, ' +
          'known only to this pending sign-in and usable for 10 minutes; the first code from the app, sent to `POST /v1/auth/mfa/verify` with the same `session`, ' +
          'confirms it and completes the sign-in (with the recovery codes, once).',
        security: OPTIONAL_CLIENT_AUTH,
        body: TotpSetupBody,
        response: { 200: json('The secret to add to an authenticator app.', TotpSetup) },
        errors: { 400: ['invalid_token'], 409: ['conflict'] },
      },
    },
    async (request, reply) => {
      const { client, grant, user } = await pendingOf(request, request.body);
      const { demand } = await app.signIn.secondFactorDemand(app.db, user, parseAmr(grant.amr), client);
      if (demand !== 'enrol') throw new AppError('conflict', { message: 'This sign-in asks for a second factor the user already has.' });
      const enrolment = await app.mfa.beginTotp(user, enrolmentOwnerOf(grant));
      return noStore(reply).send({ secret: enrolment.secret, otpauth_uri: enrolment.uri });
    },
  );
}
