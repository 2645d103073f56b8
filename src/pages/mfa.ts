import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AppError, isAppError } from '../errors.js';
import type { TotpEnrolment } from '../mfa/index.js';
import { AuthenticationResponse } from '../passkeys/index.js';
import { sessionAuthentication } from '../plugins/browser-sessions.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { renderPage } from '../plugins/views.js';
import { type Amr, parseAmr } from '../shared/acr.js';
import { livePendingMfa, type PendingMfa, pendingMfa, STEP_UP } from '../shared/pending-flow.js';
import { requestContext } from '../shared/request-context.js';
import { isFactorDue, type SecondFactorDemand, withSecondFactor } from '../sign-in/policy.js';
import type { EnrolmentOwner, SecondFactorProof } from '../sign-in/service.js';
import { findUserById, type UserRow } from '../storage/repos/users.js';
import { accountMfaError, afterSignIn, carriedQuery, field, flowApp, holdForDeletion, readFlow, shownFlowApp, showRecoveryCodes } from './flow.js';
import { type FormState, formFailure, formState } from './form-state.js';
import { ceremonyAnswer, passkeyGetForm } from './passkeys.js';

/**
 * The second step of a hosted sign-in, and second factors on the account page (docs/guides/mfa-and-passkeys.md):
 * - `/mfa` asks for the second factor of the first factor a hosted door remembered (flow.ts:
 *   completeBrowserSignIn), or that `/oauth/authorize` wants for a signed-in session: a code (TOTP or
 *   recovery), or one of the user's passkeys (with JavaScript; the page script asks
 *   `/mfa/passkey/options`). When the app requires a factor the user does not have, it sets up an
 *   authenticator app first. Only then is the browser session signed in (new id, `amr` with the
 *   factor and `mfa`).
 * - `/account/mfa`: set up the authenticator app (QR code and the secret to type, confirmed by a first
 *   code), remove it, new recovery codes. Changing factors needs a fresh second factor once the
 *   account has one (policy.ts: factorChangeRefusal); "Verify again" asks for it through `/mfa`.
 * Wrong codes meet the password lockout (Mfa.verifyCode). Works without JavaScript.
 */

/** The code forms start with the code field focused: it is all they ask for. */
const CODE_FIRST = formState({ focus: 'code' });

function expired(): AppError {
  return new AppError('invalid_request', { message: 'This sign-in has expired. Sign in again.', detail: 'no pending second factor' });
}

const AccountMfaForm = z.object({
  csrf: z.string().optional(),
  action: z.string().max(30).optional(),
  code: z.string().max(40).optional(),
});

/** An authenticator app set up on these pages belongs to the browser session that started it (Mfa.beginTotp). */
const enrolmentOwner = (request: FastifyRequest): EnrolmentOwner => `session:${request.browserSession!.id_hash}`;

/** The second factor a `/mfa` form gives: the typed code, or the answer of the passkey ceremony. */
async function proofOf(app: FastifyInstance, request: FastifyRequest, pending: PendingMfa): Promise<SecondFactorProof> {
  if (field(request.body, 'action') === 'passkey') {
    app.passkeys.assertEnabled();
    const response = ceremonyAnswer(AuthenticationResponse, field(request.body, 'response'));
    // Only an account-wide passkey of the user who gave the first factor, answering this browser's challenge.
    const verified = await app.passkeys.verifyAuthentication({ userId: pending.userId, binding: `session:${request.browserSession!.id_hash}`, response, appId: null, secondFactor: true });
    return { kind: 'passkey', amr: verified.amr[0] };
  }
  if (field(request.body, 'action') !== 'verify') throw new AppError('invalid_request', { detail: 'unknown mfa action' });
  const code = field(request.body, 'code').trim().slice(0, 40);
  if (!code) throw new AppError('invalid_code');
  return { kind: 'code', code };
}

export default async function mfaPages(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();

  /** How the code forms explain a refused code: next to the code field (a lockout says how long). */
  const codeFailure = (request: FastifyRequest, reply: FastifyReply, error: unknown): FormState =>
    formFailure(request, reply, error, {
      codes: ['invalid_code', 'invalid_credentials', 'invalid_token', 'feature_disabled', 'rate_limited', 'user_disabled', 'user_blocked', 'conflict', 'invalid_request'],
      fieldOf: { invalid_code: 'code', rate_limited: 'code' },
      keys: {
        invalid_code: 'mfa.error.invalid_code',
        rate_limited: 'mfa.error.locked',
        // A refused passkey (mfa.ts proofOf): said above the forms, with the ways that remain.
        invalid_credentials: 'mfa.error.invalid_credentials',
        invalid_token: 'mfa.error.invalid_token',
        feature_disabled: 'mfa.error.feature_disabled',
      },
    });

  /** The pending second step of this browser, while it is fresh. */
  function pendingOf(request: FastifyRequest): PendingMfa {
    const pending = request.browserSession && livePendingMfa(readFlow(request), app.clock.now());
    if (!pending) throw expired();
    return pending;
  }

  async function demandOf(request: FastifyRequest, pending: PendingMfa): Promise<{ demand: SecondFactorDemand; user: UserRow; methods: string[] }> {
    const user = await findUserById(app.db, pending.userId);
    if (!user) throw expired();
    const client = await flowApp(request);
    const { demand, methods } = await app.signIn.secondFactorDemand(app.db, user, pending.amr, client, pending.stepUp);
    return { demand, user, methods };
  }

  async function enrolmentFor(request: FastifyRequest, user: UserRow): Promise<TotpEnrolment> {
    const owner = enrolmentOwner(request);
    return (await app.mfa.pendingTotp(user, owner)) ?? app.mfa.beginTotp(user, owner);
  }

  async function renderMfa(request: FastifyRequest, reply: FastifyReply, locals: { form?: FormState } = {}) {
    const pending = pendingOf(request);
    const { demand, user, methods } = await demandOf(request, pending);
    const client = await shownFlowApp(request);
    const passkeys = methods.includes('passkey') && app.passkeys.enabled ? passkeyGetForm(`/mfa${carriedQuery(request)}`, '/mfa/passkey/options', 'mfa.passkey') : undefined;
    return renderPage(request, reply, 'mfa', {
      titleKey: 'mfa.title',
      csrf: request.browserSession!.csrf_token,
      appName: client?.name,
      email: user.email,
      formAction: `/mfa${carriedQuery(request)}`,
      enrolment: demand === 'enrol' ? await enrolmentFor(request, user) : undefined,
      hasRecoveryCodes: methods.includes('recovery_code'),
      hasTotp: methods.includes('totp'),
      passkeys,
      // With a passkey to offer, nothing takes the focus: the passkey button comes first.
      form: locals.form ?? (passkeys ? formState({}) : CODE_FIRST),
    });
  }

  /** Signs the browser in with the strengthened `amr`, records the sign-in, and goes on. */
  async function finish(request: FastifyRequest, reply: FastifyReply, pending: PendingMfa, amr: Amr[], method: string, recoveryCodes?: string[]) {
    const client = await flowApp(request);
    if (pending.method !== STEP_UP && !recoveryCodes && (await findUserById(app.db, pending.userId))?.deletion_scheduled_at != null) {
      // docs/account/deletion.md: the person chooses to keep the account before being signed in.
      return holdForDeletion(request, reply, { userId: pending.userId, amr, method: pending.method, via: pending.via, returnTo: pending.returnTo });
    }
    await app.browserSessions.writeData(request, reply, { ...readFlow(request), mfa: undefined });
    await app.browserSessions.signIn(request, reply, pending.userId, amr);
    const via = pending.via;
    await app.signIn.recordLogin(app.db, { userId: pending.userId, appId: client?.id ?? null, method: pending.method === STEP_UP ? method : pending.method, amr, via }, requestContext(request));
    if (recoveryCodes) return showRecoveryCodes(request, reply, recoveryCodes, pending.returnTo ?? readFlow(request).resume ?? '/account');
    return afterSignIn(request, reply, pending.returnTo);
  }

  app.get('/mfa', async (request, reply) => {
    reply.header('cache-control', 'no-store');
    return renderMfa(request, reply);
  });

  app.post('/mfa', async (request, reply) => {
    const pending = pendingOf(request);
    try {
      await app.throttle.hitIp(request);
      const { demand } = await demandOf(request, pending);
      // Nothing to give (any more): the first factor signs in, and the flow asks for what remains.
      if (!isFactorDue(demand)) return await finish(request, reply, pending, pending.amr, pending.method);
      const proof = await proofOf(app, request, pending);
      const checked = await app.signIn.checkSecondFactor(pending.userId, pending.amr, proof, demand, enrolmentOwner(request), requestContext(request));
      return await finish(request, reply, pending, checked.amr, checked.method, checked.recoveryCodes);
    } catch (error) {
      return renderMfa(request, reply, { form: codeFailure(request, reply, error) });
    }
  });

  // Account page ------------------------------------------------------------------------------------

  async function accountUser(request: FastifyRequest): Promise<UserRow> {
    const session = request.browserSession;
    const user = session?.user_id ? await findUserById(app.db, session.user_id) : undefined;
    if (!user) throw new AppError('unauthorized', { message: 'Sign in on the account page first.' });
    return user;
  }


  const backToAccount = (reply: FastifyReply, done?: string) => reply.redirect(done ? `/account?done=${done}#mfa` : '/account#mfa', 303);

  async function renderSetup(request: FastifyRequest, reply: FastifyReply, user: UserRow, form?: FormState) {
    const enrolment = await app.mfa.pendingTotp(user, enrolmentOwner(request));
    // None in progress (never started here, finished, or expired): the account page says so after a code.
    if (!enrolment) return reply.redirect(form ? '/account?mfa_error=setup_expired#mfa' : '/account#mfa', 303);
    reply.header('cache-control', 'no-store');
    return renderPage(request, reply, 'mfa-setup', { titleKey: 'mfa.setup.title', csrf: request.browserSession!.csrf_token, enrolment, form: form ?? CODE_FIRST });
  }

  app.get('/account/mfa/totp', async (request, reply) => renderSetup(request, reply, await accountUser(request)));

  app.post('/account/mfa', { schema: { body: AccountMfaForm } }, async (request, reply) => {
    const user = await accountUser(request);
    const action = request.body.action;
    const ctx = requestContext(request);
    const session = request.browserSession!;
    if (action === 'reauth') {
      // Verify again: /mfa asks for the factor and comes back here with a fresh sign-in.
      await app.browserSessions.writeData(request, reply, {
        ...readFlow(request),
        mfa: pendingMfa(user.id, { method: STEP_UP, amr: parseAmr(session.amr) }, { via: 'account', since: app.clock.now(), stepUp: true, returnTo: '/account' }),
      });
      return reply.redirect('/mfa', 303);
    }
    const adding = action === 'setup_totp' || action === 'verify';
    const refusal = await app.mfa.changeRefusal(user, adding ? 'add' : 'change', sessionAuthentication(session));
    if (refusal) return reply.redirect(`/account?mfa_error=${accountMfaError(refusal, action === 'remove_totp')}#mfa`, 303);
    if (action === 'setup_totp') {
      try {
        await app.mfa.beginTotp(user, enrolmentOwner(request));
      } catch (error) {
        if (!isAppError(error) || error.code !== 'conflict') throw error;
      }
      return reply.redirect('/account/mfa/totp', 303);
    }
    if (action === 'verify') {
      try {
        const { recoveryCodes } = await app.mfa.confirmTotp(user.id, enrolmentOwner(request), request.body.code ?? '', ctx);
        // The code just proved the factor: this session now counts as two-factor.
        await app.browserSessions.signIn(request, reply, user.id, withSecondFactor(parseAmr(session.amr), 'otp'));
        if (recoveryCodes) return showRecoveryCodes(request, reply, recoveryCodes, '/account#mfa');
        return backToAccount(reply, 'mfa_enrolled');
      } catch (error) {
        return renderSetup(request, reply, user, codeFailure(request, reply, error));
      }
    }
    if (action === 'remove_totp') {
      await app.mfa.removeTotp(user.id, ctx, 'account');
      return backToAccount(reply, 'mfa_removed');
    }
    if (action === 'regenerate_codes') return showRecoveryCodes(request, reply, await app.mfa.regenerateRecoveryCodes(user.id, ctx), '/account#mfa');
    throw new AppError('invalid_request', { detail: 'unknown mfa action' });
  });
}

/**
 * What the account page shows of second factors: the factors, whether this session may change them
 * now (else the page offers "Verify with my second factor"), and whether the address must be proven
 * before a factor can be added.
 */
export async function accountMfa(app: FastifyInstance, user: UserRow, session: Parameters<typeof sessionAuthentication>[0]) {
  const overview = await app.mfa.overview(app.db, user.id);
  const refusal = await app.mfa.changeRefusal(user, 'change', sessionAuthentication(session));
  return {
    totp: overview.totp,
    recoveryCodes: overview.recoveryCodes,
    hasFactor: overview.methods.length > 0,
    needsStepUp: refusal !== null,
    needsVerifiedEmail: user.email_verified !== 1,
  };
}
