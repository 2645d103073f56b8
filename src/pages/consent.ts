import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { requestContext } from '../shared/request-context.js';
import type { FlowState, PendingConsent, PendingProfile } from '../shared/pending-flow.js';
import { PROFILE_FIELDS, type ProfileField } from '../sign-in/profile-data.js';
import { scopeList, SUPPORTED_SCOPES } from '../shared/scopes.js';
import { appendQuery } from '../shared/url.js';
import { findApp } from '../storage/repos/apps.js';
import { listPublishedDocTypes } from '../storage/repos/legal-published.js';
import { findUserById } from '../storage/repos/users.js';
import { appLink, field, readFlow } from './flow.js';
import { type FormState, formFailure } from './form-state.js';
import { localeOf, renderHtmlError, renderPage } from '../plugins/views.js';

/**
 * `/consent` and `/profile`: the steps `/oauth/authorize` waits for. What they act on (app, user,
 * scopes, fields) is the pending step kept server-side in the browser session, never the form.
 * Allow records consent for exactly the scopes shown (event `consent.granted`); Deny sends the user
 * back to the app with `error=access_denied`. Both finish with a 303 into the authorization request.
 */

/** The order scopes are listed in on the consent page: who you are first, then what else. */
const SCOPE_ORDER: readonly string[] = SUPPORTED_SCOPES;

function expired(): AppError {
  return new AppError('invalid_request', { message: 'This sign-in request has expired. Go back to the application and start again.', detail: 'no pending step' });
}

/** The pending step, if it belongs to the user of this browser (or came with a session JWT in this browser). */
function currentStep<K extends 'consent' | 'profile'>(request: FastifyRequest, kind: K): NonNullable<FlowState[K]> | undefined {
  const step = readFlow(request)[kind] as PendingConsent | PendingProfile | undefined;
  if (!step || !request.browserSession) return undefined;
  if (!step.viaSessionJwt && request.browserSession.user_id !== step.userId) return undefined;
  return step as NonNullable<FlowState[K]>;
}

function pendingStep<K extends 'consent' | 'profile'>(request: FastifyRequest, kind: K): NonNullable<FlowState[K]> {
  const step = currentStep(request, kind);
  if (!step) throw expired();
  return step;
}

/**
 * A step's page opened when the step is no longer pending (reloaded after it was done, or the flow
 * expired): the expired error with, for a signed-in member of the app the URL names, the way back to
 * that app (appLink), so the page is no dead end.
 */
async function renderStale(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const error = expired();
  return renderHtmlError(request, reply.code(error.status), error, await appLink(request));
}

async function clearStep(request: FastifyRequest, reply: FastifyReply, kind: 'consent' | 'profile'): Promise<void> {
  const state = readFlow(request);
  await request.server.browserSessions.writeData(request, reply, { ...state, [kind]: undefined });
}

export default async function consentPages(app: FastifyInstance) {
  app.get('/consent', async (request, reply) => {
    const step = currentStep(request, 'consent');
    if (!step) return renderStale(request, reply);
    const client = await findApp(app.db, step.appId);
    const user = await findUserById(app.db, step.userId);
    if (!client || !user) throw expired();
    const t = app.messages.translator(localeOf(request));
    const docs = await listPublishedDocTypes(app.db, client.id);
    return renderPage(request, reply, 'consent', {
      titleKey: 'oauth.consent.title',
      csrf: request.browserSession!.csrf_token,
      appName: client.name,
      email: user.email,
      scopes: scopeList(step.scope)
        .sort((a, b) => SCOPE_ORDER.indexOf(a) - SCOPE_ORDER.indexOf(b))
        .map((name) => ({ name, label: t(`oauth.scope.${name}`) })),
      // What the app's next step will ask for, told before the person agrees to it.
      fields: client.requiredFields.filter((f): f is ProfileField => f !== 'email_verified').map((f) => t(`oauth.field.${f}`)),
      returnsTo: new URL(step.redirectUri).host || step.redirectUri,
      legal: docs.map((d) => ({ href: `/legal/apps/${encodeURIComponent(client.id)}/${encodeURIComponent(d)}`, label: d })),
    });
  });

  app.post('/consent', async (request, reply) => {
    const step = pendingStep(request, 'consent');
    const action = field(request.body, 'action');
    if (action !== 'allow' && action !== 'deny' && action !== 'switch_account') throw new AppError('invalid_request', { message: 'Choose Allow or Deny.' });
    if (action === 'switch_account') {
      // "Not you?": signed out here, then the same authorization request asks who is signing in.
      const again = new URL(step.resume, app.config.authUrl);
      again.searchParams.delete('session');
      again.searchParams.set('prompt', 'login');
      await app.browserSessions.signOut(request, reply);
      return reply.redirect(`${again.pathname}${again.search}`, 303);
    }
    await clearStep(request, reply, 'consent');
    if (action === 'deny') {
      return reply.redirect(
        appendQuery(step.redirectUri, {
          error: 'access_denied',
          error_description: 'The user denied the request.',
          state: step.state,
          iss: app.config.baseUrl,
        }),
        303,
      );
    }
    await app.db.transaction().execute((trx) =>
      app.signIn.grantConsent(trx, { appId: step.appId, userId: step.userId, scope: step.scope, via: 'consent_page' }, requestContext(request)),
    );
    return reply.redirect(step.resume, 303);
  });

  async function renderProfile(request: FastifyRequest, reply: import('fastify').FastifyReply, step: PendingProfile, locals: { form?: FormState; values?: Record<string, string> }) {
    const client = await findApp(app.db, step.appId);
    if (!client) throw expired();
    return renderPage(request, reply, 'profile', {
      titleKey: 'oauth.profile.title',
      csrf: request.browserSession!.csrf_token,
      appName: client.name,
      fields: step.fields.filter((f) => f !== 'email_verified'),
      needsVerifiedEmail: step.fields.includes('email_verified'),
      values: locals.values ?? {},
      form: locals.form,
    });
  }

  app.get('/profile', async (request, reply) => {
    const step = currentStep(request, 'profile');
    return step ? renderProfile(request, reply, step, {}) : renderStale(request, reply);
  });

  app.post('/profile', async (request, reply) => {
    const step = pendingStep(request, 'profile');
    const fields = PROFILE_FIELDS.filter((f) => step.fields.includes(f));
    const data = Object.fromEntries(fields.map((f) => [f, field(request.body, f)])) as Record<ProfileField, string>;
    const user = await findUserById(app.db, step.userId);
    if (!user) throw expired();
    try {
      await app.signIn.applyProfileData(app.db, { user, appId: step.appId, data, accepted: fields, required: fields, via: 'profile_page' }, requestContext(request));
    } catch (error) {
      const form = formFailure(request, reply, error, { codes: ['invalid_request'] });
      return renderProfile(request, reply, step, { form, values: Object.fromEntries(fields.map((f) => [f, data[f].slice(0, 100)])) });
    }
    await clearStep(request, reply, 'profile');
    return reply.redirect(step.resume, 303);
  });
}
