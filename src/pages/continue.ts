import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AppError } from '../errors.js';
import type { BindTicketData, ContinueTicketData } from '../idp/index.js';
import { requestContext } from '../shared/request-context.js';
import { missingRequiredFields } from '../sign-in/policy.js';
import type { ProfileField } from '../sign-in/profile-data.js';
import { scopeList } from '../shared/scopes.js';
import { appendQuery } from '../shared/url.js';
import { findApp } from '../storage/repos/apps.js';
import { findGrant } from '../storage/repos/grants.js';
import { findUserById } from '../storage/repos/users.js';
import type { OneTimeTokenRow } from '../storage/schema.js';
import { carriedQuery } from './flow.js';
import { type FormState, formFailure, formState, signInHelp } from './form-state.js';
import { localeOf, renderPage } from '../plugins/views.js';
import type { ZodTypeProvider } from '../plugins/validation.js';

/**
 * `/continue?ticket=…` (docs/guides/identity-provider.md#native-exchange-and-resume, docs/guides/hosted-pages.md#pages-sessions-and-headers, docs/reference/tokens.md#session-jwts): the hosted intermediate page of provider sign-in.
 * - `tk_…` tickets (native `pending`): consent for the app and/or the missing profile data; Allow
 *   records them and navigates (303) to `{base_url}/oauth/authorize?client_id…&redirect_uri…&response_mode…&consent=1`.
 * - `bt_…` tickets (bind-first): explains that the provider account must be bound first and lets the
 *   user sign in with email + password and bind on the spot, then continues the sign-in; Cancel
 *   redirects `redirect_uri?error=idp_oauth_not_bound&state=…`.
 * Tickets are single use and live 10 minutes; a used or expired one renders the error page (400).
 */

const TicketQuery = z.object({ ticket: z.string().max(200).optional() });
const Form = z.object({
  csrf: z.string().optional(),
  action: z.string().max(20).optional(),
  email: z.string().max(320).optional(),
  password: z.string().max(1024).optional(),
  name: z.string().max(200).optional(),
  phone_number: z.string().max(40).optional(),
  birthdate: z.string().max(20).optional(),
});
type FormInput = z.output<typeof Form>;

/** How recent a sign-in must be to bind a provider account without typing the password again. */
const FRESH_SIGN_IN_SECONDS = 300;

const deadTicket = () => new AppError('invalid_token', { message: 'This link has expired or was already used. Return to the app and start again.', detail: 'continue ticket unknown, used or expired' });

export default async function continuePages(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  async function load(query: { ticket?: string }) {
    const ticket = query.ticket ?? '';
    const found = await app.idp.findTicket(ticket);
    if (!found) throw deadTicket();
    return { ticket, ...found };
  }

  async function renderContinue(request: FastifyRequest, reply: FastifyReply, ticket: string, data: ContinueTicketData, userId: string, appId: string, problems?: FormState, form: FormInput = {}) {
    const session = await app.browserSessions.ensure(request, reply);
    const client = await findApp(app.db, appId);
    const user = await findUserById(app.db, userId);
    if (!client || !user) throw deadTicket();
    const t = app.messages.translator(localeOf(request));
    const missing = missingRequiredFields(client, user);
    return renderPage(request, reply, 'continue', {
      titleKey: data.next_step === 'consent' ? 'idp.continue.consent_title' : 'idp.continue.profile_title',
      csrf: session.csrf_token,
      mode: 'pending',
      action: `/continue?ticket=${encodeURIComponent(ticket)}`,
      appName: client.name,
      clientId: client.id,
      email: user.email,
      showConsent: data.next_step === 'consent',
      scopes: scopeList(data.scope).map((s) => ({ name: s, label: t(`idp.scope.${s}`) })),
      fields: missing.filter((f) => f !== 'email_verified'),
      needsEmailVerification: missing.includes('email_verified'),
      values: { name: form.name ?? '', phone_number: form.phone_number ?? '', birthdate: form.birthdate ?? '' },
      form: problems,
    });
  }

  async function renderBind(request: FastifyRequest, reply: FastifyReply, ticket: string, data: BindTicketData, problems?: FormState, email?: string) {
    const session = await app.browserSessions.ensure(request, reply);
    const provider = await app.idp.provider();
    const client = await findApp(app.db, data.app.appId);
    const signedIn = session.user_id ? await findUserById(app.db, session.user_id) : undefined;
    return renderPage(request, reply, 'continue', {
      titleKey: 'idp.bind.title',
      csrf: session.csrf_token,
      mode: 'bind',
      action: `/continue?ticket=${encodeURIComponent(ticket)}`,
      providerName: provider?.name ?? 'Identity provider',
      // Say exactly which provider account would be bound: its address, else its subject.
      providerAccount: data.email ?? data.subject,
      appName: client?.name ?? '',
      signedInEmail: signedIn?.email,
      // A recent sign-in in this browser is proof enough; otherwise binding asks for the password again.
      needsPassword: !signedIn || !isFreshSignIn(session.auth_time),
      email: email ?? '',
      form: problems,
    });
  }

  /** A sign-in within the last few minutes needs no second password prompt to bind. */
  const isFreshSignIn = (authTime: number | null) => authTime !== null && app.clock.now() - authTime <= FRESH_SIGN_IN_SECONDS;

  /** Bind tickets work only in the browser that holds them (see IdpService.holdsBindTicket). */
  async function checkHolder(request: FastifyRequest, reply: FastifyReply, row: OneTimeTokenRow, mayClaim: boolean): Promise<void> {
    if (!(await app.idp.holdsBindTicket(request, reply, row, { mayClaim }))) throw deadTicket();
  }

  app.get('/continue', { schema: { querystring: TicketQuery } }, async (request, reply) => {
    const { ticket, kind, row } = await load(request.query);
    if (kind === 'idp_bind') {
      await checkHolder(request, reply, row, true);
      return renderBind(request, reply, ticket, JSON.parse(row.data) as BindTicketData);
    }
    return renderContinue(request, reply, ticket, JSON.parse(row.data) as ContinueTicketData, row.user_id!, row.app_id!);
  });

  app.post('/continue', { schema: { querystring: TicketQuery, body: Form } }, async (request, reply) => {
    const { ticket, kind, row } = await load(request.query);
    const form = request.body;
    const ctx = requestContext(request);
    const t = app.messages.translator(localeOf(request));

    if (kind === 'idp_bind') {
      await checkHolder(request, reply, row, false);
      const data = JSON.parse(row.data) as BindTicketData;
      if (form.action === 'cancel') {
        if (!(await app.idp.consumeTicket(app.db, ticket))) throw deadTicket();
        return reply.redirect(
          appendQuery(data.app.redirectUri, { error: 'idp_oauth_not_bound', error_description: 'The provider account is not bound to an account yet.', state: data.app.state, iss: app.config.baseUrl }),
          303,
        );
      }
      try {
        let userId: string;
        const session = request.browserSession;
        if (form.action === 'bind' && session?.user_id) {
          // Binding a provider account to the signed-in account: re-authenticate unless that sign-in is fresh.
          userId = session.user_id;
          if (!isFreshSignIn(session.auth_time)) {
            await app.throttle.hitIp(request);
            const current = await findUserById(app.db, userId);
            if (!current || !form.password) throw new AppError('invalid_credentials');
            await app.accounts.verifyLogin({ email: current.email, password: form.password }, ctx);
          }
        } else if (form.action === 'login') {
          await app.throttle.hitIp(request);
          if (!form.email || !form.password) throw new AppError('invalid_credentials');
          userId = (await app.accounts.verifyLogin({ email: form.email, password: form.password }, ctx)).id;
        } else {
          throw new AppError('invalid_request', { message: t('idp.error.unknown_action') });
        }
        await app.db.transaction().execute(async (trx) => {
          if (!(await app.idp.consumeTicket(trx, ticket))) throw deadTicket();
          await app.idp.bind(trx, userId, { iss: data.issuer, sub: data.subject, email: data.email }, ctx);
        });
        const user = (await findUserById(app.db, userId))!;
        return reply.redirect(await app.idp.finishBrowserSignIn(request, reply, data.app, user), 303);
      } catch (error) {
        const problems = formFailure(request, reply, error, {
          codes: ['invalid_credentials', 'rate_limited', 'user_disabled', 'user_blocked', 'conflict', 'invalid_request'],
          focus: 'password',
          help: signInHelp(request, carriedQuery(request)),
        });
        return renderBind(request, reply, ticket, data, problems, form.email);
      }
    }

    const data = JSON.parse(row.data) as ContinueTicketData;
    const userId = row.user_id!;
    const appId = row.app_id!;
    const grant = await findGrant(app.db, data.grant_id);
    if (!grant || grant.revoked_at !== null) throw deadTicket();
    const user = await findUserById(app.db, userId);
    const client = await findApp(app.db, appId);
    if (!user || !client) throw deadTicket();

    if (form.action === 'deny') {
      if (!(await app.idp.consumeTicket(app.db, ticket))) throw deadTicket();
      return reply.redirect(
        appendQuery(data.redirect_uri, { error: 'access_denied', error_description: 'The user denied the request.', state: data.state, iss: app.config.baseUrl }),
        303,
      );
    }
    if (form.action !== 'allow' && form.action !== 'continue' && form.action !== 'save') {
      reply.code(400);
      return renderContinue(request, reply, ticket, data, userId, appId, formState({ message: t('idp.error.unknown_action') }), form);
    }
    // Profile data the app requires and the user lacks, through the one rule, then consent: one
    // transaction with taking the ticket, so refused data leaves the ticket usable and nothing written.
    const fields = missingRequiredFields(client, user).filter((f): f is ProfileField => f !== 'email_verified');
    const values = Object.fromEntries(fields.map((f) => [f, form[f] ?? ''])) as Record<ProfileField, string>;
    try {
      await app.db.transaction().execute(async (trx) => {
        if (!(await app.idp.consumeTicket(trx, ticket))) throw deadTicket();
        await app.signIn.applyProfileData(trx, { user, appId, data: values, accepted: fields, required: fields, via: 'continue' }, ctx);
        if (data.next_step === 'consent' || form.action === 'allow') {
          await app.signIn.grantConsent(trx, { appId, userId, scope: data.scope, via: 'continue' }, ctx);
        }
      });
    } catch (error) {
      return renderContinue(request, reply, ticket, data, userId, appId, formFailure(request, reply, error, { codes: ['invalid_request'] }), form);
    }
    return reply.redirect(
      appendQuery(`${app.config.baseUrl}/oauth/authorize`, { client_id: appId, redirect_uri: data.redirect_uri, response_mode: data.response_mode, consent: '1' }),
      303,
    );
  });
}
