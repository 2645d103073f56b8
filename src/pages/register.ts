import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { passwordRulesOf } from './password-rules.js';
import { requestContext } from '../shared/request-context.js';
import { listPublishedDocTypes } from '../storage/repos/legal-published.js';
import { FIRST_FACTOR } from '../sign-in/service.js';
import { carriedQuery, completeBrowserSignIn, field, flowApp, shownFlowApp } from './flow.js';
import { type FormState, formState } from './form-state.js';
import { signInFailure } from './login.js';
import { localeOf, renderPage } from '../plugins/views.js';

/** `/register`: see login.ts. Acceptance of the platform documents is recorded by the accounts service. */

const PLATFORM_DOCS = ['terms', 'privacy'] as const;

export default async function registerPages(app: FastifyInstance) {
  async function legalLinks(request: FastifyRequest) {
    const t = app.messages.translator(localeOf(request));
    const published = new Set(await listPublishedDocTypes(app.db, 'platform'));
    return PLATFORM_DOCS.filter((d) => published.has(d)).map((d) => ({ href: `/legal/platform/${d}`, label: t(`oauth.register.${d}`) }));
  }

  async function renderRegister(request: FastifyRequest, reply: FastifyReply, locals: { form?: FormState; email?: string; name?: string }) {
    const session = await app.browserSessions.ensure(request, reply);
    const client = await shownFlowApp(request);
    const carried = carriedQuery(request);
    return renderPage(request, reply, 'register', {
      titleKey: 'oauth.register.title',
      csrf: session.csrf_token,
      appName: client?.name,
      form: locals.form,
      // The rules of the app's policy, shown before the person types (docs/guides/password-policy.md).
      passwordRules: passwordRulesOf(client?.passwordPolicy, app.config.passwordMinLength),
      email: locals.email ?? '',
      name: locals.name ?? '',
      legal: await legalLinks(request),
      formAction: `/register${carried}`,
      loginHref: `/login${carried}`,
    });
  }

  app.get('/register', async (request, reply) => renderRegister(request, reply, {}));

  app.post('/register', async (request, reply) => {
    const email = field(request.body, 'email').trim().slice(0, 320);
    const password = field(request.body, 'password');
    const name = field(request.body, 'name').trim();
    const accepted = field(request.body, 'accept_terms') !== '';
    const t = app.messages.translator(localeOf(request));
    try {
      await app.throttle.hitIp(request);
    } catch (error) {
      return renderRegister(request, reply, { form: signInFailure(request, reply, error), email, name });
    }
    const mustAccept = (await legalLinks(request)).length > 0 && !accepted;
    if (!email || !password || mustAccept) {
      reply.code(400);
      const form = formState({
        fields: {
          email: email ? undefined : t('form.error.email_missing'),
          password: password ? undefined : t('form.error.password_missing'),
          accept_terms: mustAccept ? t('oauth.register.must_accept') : undefined,
        },
      });
      return renderRegister(request, reply, { form, email, name });
    }
    const client = await flowApp(request);
    try {
      const user = await app.accounts.register(
        { email, password, ...(name ? { name } : {}), acceptLegal: accepted, locale: localeOf(request) },
        { ...requestContext(request), appId: client?.id },
      );
      // Next, the code just mailed: a step the person may skip, the sign-in under way waiting behind it.
      return await completeBrowserSignIn(request, reply, user, FIRST_FACTOR.register, 'hosted_register', `/verify-email?after=register`);
    } catch (error) {
      return renderRegister(request, reply, { form: signInFailure(request, reply, error, passwordRulesOf(client?.passwordPolicy, app.config.passwordMinLength)), email, name });
    }
  });
}
