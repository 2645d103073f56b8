import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { decodeJwt } from 'jose';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import {
  type AppView,
  backchannelUriProblem,
  resourceUrisProblem,
  CreateAppBody,
  MAIL_KINDS,
  createApp,
  EventsQuery,
  listAppEventPage,
  listAppLegalViews,
  listApps,
  listAppUserPage,
  findAppUserItem,
  listUserEventsOfApp,
  removeApp,
  requireOwnedApp,
  rotateClientSecret,
  setAppUserStatusAudited,
  toAppView,
  UpdateAppBody,
  updateApp,
  UserListQuery,
} from '../dev/index.js';
import { AppError } from '../errors.js';
import { DocTypeParams, listDocumentSummaries, MarkdownRenderer, PublishBody, PublishQuery, publishVersion } from '../legal/index.js';
import { assertCsrf, documentPageIn } from '../pages/index.js';
import { BrowserSessions } from '../plugins/browser-sessions.js';
import { consoleLocaleOf, localeOf, setPageHeaders, translatedErrorText, VIEWS_DIR } from '../plugins/views.js';
import { LOCALE_NAMES, LOCALES } from '../plugins/i18n.js';
import { parseAmr } from '../shared/acr.js';
import { isLocalDevelopment } from '../shared/loopback.js';
import { requestContext } from '../shared/request-context.js';
import { s256 } from '../sign-in/pkce.js';
import type { Developer } from '../storage/repos/developers.js';
import { findMemberEmails } from '../storage/repos/app-users.js';
import { findUserById } from '../storage/repos/users.js';
import { viewChart } from './chart.js';
import { CONSOLE_PAGES } from './docs.js';
import { appInput, appSettingsInput, check, field, fields, type FieldErrors, type FormBody, type ShownOnce } from './forms.js';
import {
  acceptInvitation,
  becomeDeveloper,
  CONSOLE_APP_ID,
  CONSOLE_SCOPE,
  consoleRedirectUri,
  createApiKey,
  developerOfUser,
  ensureConsoleApp,
  listApiKeys,
  revokeApiKey,
} from './service.js';
import { operatorRoutes } from './operator.js';
import { CreateWebhookBody, UpdateWebhookBody, WEBHOOK_TYPES, type WebhookEndpointView } from '../webhooks/index.js';
import { integrationSnippets } from './snippets.js';

/**
 * The developer console (`{auth_url}/console`, issue 15): server-rendered pages over the developer
 * API's own services and schemas. It signs in as an app of the platform (code + PKCE through the
 * hosted login, tokens fetched server-side) and keeps its own session cookie (`gh_console`), so
 * signing out of the console leaves the hosted session alone. In this scope `request.browserSession`
 * is that console session: the hosted pages' CSRF check works on it unchanged.
 */

interface LoginState {
  state: string;
  verifier: string;
  return: string;
}

interface ConsoleData {
  console_login?: LoginState;
}

/** Where a sign-in may return to: a console path, never another site. */
const safeReturn = (value: unknown): string =>
  typeof value === 'string' && /^\/console(\/[A-Za-z0-9_\-/]*)?(\?[^\s#]*)?$/.test(value) ? value : '/console';

const KeyName = z.string().trim().min(1, 'must not be empty').max(100);
const KeyId = z.string().min(1).max(200);
const UserId = z.string().min(1).max(200);

/** Query strings of the listing pages: empty inputs and the search button are not API parameters. */
function listingQuery(query: unknown): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [key, value] of Object.entries((query ?? {}) as Record<string, unknown>)) {
    if (key !== 'action' && key !== 'ui_locales' && typeof value === 'string' && value !== '') out[key] = value;
  }
  return out;
}

/** App form values as the page shows them (text areas one entry a line). */
function appFormValues(view: Pick<AppView, 'name' | 'redirect_uris' | 'allowed_origins' | 'type' | 'features' | 'required_fields' | 'mfa' | 'logo_url' | 'logo_url_dark' | 'accent_color' | 'default_locale'>) {
  return {
    name: view.name,
    redirect_uris: view.redirect_uris.join('\n'),
    allowed_origins: view.allowed_origins.join('\n'),
    type: view.type,
    features: Object.entries(view.features).filter(([, on]) => on).map(([name]) => name),
    required_fields: [...view.required_fields],
    mfa: view.mfa,
    logo_url: view.logo_url ?? '',
    logo_url_dark: view.logo_url_dark ?? '',
    default_locale: view.default_locale ?? '',
    accent_color: view.accent_color ?? '',
  };
}

/** The create form's starting values: a new app as the apps API defaults it, in the form's shape. */
const NEW_APP_VALUES = appFormValues({
  name: '',
  redirect_uris: [],
  allowed_origins: [],
  type: 'public',
  features: { auth: true, profile: false },
  required_fields: [],
  mfa: 'optional',
  logo_url: null,
  logo_url_dark: null,
  accent_color: null,
  default_locale: null,
});

function postedAppValues(body: FormBody) {
  return {
    name: field(body, 'name'),
    redirect_uris: field(body, 'redirect_uris'),
    allowed_origins: field(body, 'allowed_origins'),
    type: field(body, 'type'),
    features: fields(body, 'features'),
    required_fields: fields(body, 'required_fields'),
    mfa: field(body, 'mfa') || 'optional',
    logo_url: field(body, 'logo_url'),
    logo_url_dark: field(body, 'logo_url_dark'),
    default_locale: field(body, 'default_locale'),
    accent_color: field(body, 'accent_color'),
  };
}

/** The settings form's back-channel logout, DPoP, PAR, device-flow and password-policy values as the page shows them. */
function settingsFormValues(view: AppView) {
  const policy = view.password_policy;
  return {
    backchannel_logout_uri: view.backchannel_logout_uri ?? '',
    backchannel_logout_session_required: view.backchannel_logout_session_required,
    dpop_bound_access_tokens: view.dpop_bound_access_tokens,
    require_pushed_authorization_requests: view.require_pushed_authorization_requests,
    device_authorization_grant: view.device_authorization_grant,
    resource_uris: view.resource_uris.join('\n'),
    client_credentials: view.client_credentials,
    client_credentials_scopes: view.client_credentials_scopes.join(' '),
    password_min_length: String(policy.min_length),
    password_character_classes: String(policy.character_classes),
    password_max_age_days: policy.max_age_days === null ? '' : String(policy.max_age_days),
    password_history_count: String(policy.history_count),
  };
}

function postedSettingsValues(body: FormBody) {
  return {
    backchannel_logout_uri: field(body, 'backchannel_logout_uri'),
    backchannel_logout_session_required: field(body, 'backchannel_logout_session_required') === 'on',
    dpop_bound_access_tokens: field(body, 'dpop_bound_access_tokens') === 'on',
    require_pushed_authorization_requests: field(body, 'require_pushed_authorization_requests') === 'on',
    device_authorization_grant: field(body, 'device_authorization_grant') === 'on',
    resource_uris: field(body, 'resource_uris'),
    client_credentials: field(body, 'client_credentials') === 'on',
    client_credentials_scopes: field(body, 'client_credentials_scopes'),
    password_min_length: field(body, 'password_min_length'),
    password_character_classes: field(body, 'password_character_classes'),
    password_max_age_days: field(body, 'password_max_age_days'),
    password_history_count: field(body, 'password_history_count'),
  };
}

/** The password policy's API path (`password_policy.min_length`) as its form field (`password_min_length`). */
const settingsFieldOf = (path: PropertyKey[]): PropertyKey[] =>
  path[0] === 'password_policy' && typeof path[1] === 'string' ? [`password_${path[1]}`, ...path.slice(2)] : path;

/** The mail form's API paths (`mail.overrides.<kind>.<locale>.subject`) as its fields (`subject`). */
const mailFieldOf = (path: PropertyKey[]): PropertyKey[] => {
  const last = path.at(-1);
  return [typeof last === 'string' && ['reply_to', 'subject', 'intro'].includes(last) ? last : 'form'];
};

const MailChoice = z.object({ kind: z.enum(MAIL_KINDS).catch('verify_code'), locale: z.enum(LOCALES).catch('en') });
const MailChoiceStrict = z.object({ kind: z.enum(MAIL_KINDS), locale: z.enum(LOCALES) });

export default async function consolePages(app: FastifyInstance) {
  const { config, db } = app;
  const https = config.authUrl.startsWith('https://');
  const sessions = new BrowserSessions(db, app.clock, config, 'gh_console');
  const renderer = new MarkdownRenderer();
  app.addHook('onClose', async () => renderer.close());
  await ensureConsoleApp(db, config, app.clock.now());
  const now = () => app.clock.now();

  app.decorateRequest('developer', null as never);
  app.addHook('onRoute', (route) => {
    route.config = { errorStyle: 'html', acceptForm: true, csrf: true, ...(route.config ?? {}) };
    documentPageIn(CONSOLE_PAGES, route);
  });
  // A cross-site `text/plain` form post must meet the CSRF check (403), not a parser error.
  app.addContentTypeParser('text/plain', { parseAs: 'string' }, (_request, _body, done) => done(null, {}));
  app.addHook('preHandler', async (request) => {
    request.browserSession = await sessions.load(request);
    if (request.method === 'POST' && request.routeOptions.config.csrf) assertCsrf(request);
  });

  const css = readFileSync(join(VIEWS_DIR, 'assets', 'console.css'), 'utf8');
  app.get('/assets/console.css', async (_request, reply) => reply.type('text/css; charset=utf-8').header('cache-control', 'public, max-age=3600').send(css));
  const script = readFileSync(join(VIEWS_DIR, 'assets', 'console.js'), 'utf8');
  app.get('/assets/console.js', async (_request, reply) => reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(script));

  async function render(request: FastifyRequest, reply: FastifyReply, name: string, locals: Record<string, unknown> & { titleKey: string; titleParams?: Record<string, string> }) {
    const locale = consoleLocaleOf(request);
    const t = app.messages.translator(locale);
    setPageHeaders(reply, https, { frames: locals.frames === true });
    const errors = (locals.errors ?? {}) as FieldErrors;
    const html = await reply.viewAsync(`console/${name}`, {
      notice: undefined,
      developer: request.developer ?? null,
      ...locals,
      errors,
      localeNames: Object.entries(LOCALE_NAMES),
      // A field's accessibility attributes: its hint, its error, and focus on the first field in error
      // (no script needed). Names and ids are the templates' own constants, so this is safe unescaped.
      fieldAttrs: (fieldName: string, hintId?: string) => {
        const describedBy = [hintId, errors[fieldName] ? `${fieldName}-error` : undefined].filter(Boolean).join(' ');
        return (
          (describedBy ? ` aria-describedby="${describedBy}"` : '') +
          (errors[fieldName] ? ' aria-invalid="true"' : '') +
          (fieldName === Object.keys(errors)[0] ? ' autofocus' : '')
        );
      },
      csrf: request.browserSession?.csrf_token,
      title: t(locals.titleKey, locals.titleParams),
      t,
      locale,
      // Dates shown as the server's UTC, readable in both languages.
      date: (seconds: number | string) => (typeof seconds === 'string' ? seconds : new Date(seconds * 1000).toISOString()).replace('T', ' ').slice(0, 16) + ' UTC',
    });
    return reply.type('text/html; charset=utf-8').send(html);
  }

  /** The signed-in user's id, or a redirect to the console sign-in (then back here) and null. */
  async function signedInUser(request: FastifyRequest, reply: FastifyReply): Promise<string | null> {
    const userId = request.browserSession?.user_id;
    if (userId) return userId;
    await reply.redirect(`/console/login?return=${encodeURIComponent(safeReturn(request.url))}`, 303);
    return null;
  }

  /** The developer the signed-in user is; a user who is none gets a page saying so (403) and null. */
  async function signedInDeveloper(request: FastifyRequest, reply: FastifyReply): Promise<Developer | null> {
    const userId = await signedInUser(request, reply);
    if (!userId) return null;
    const developer = await developerOfUser(db, now(), userId, requestContext(request));
    if (developer) return (request.developer = developer);
    const user = await findUserById(db, userId);
    reply.code(403);
    await render(request, reply, 'not-developer', { titleKey: 'console.not_developer.title', email: user?.email ?? '', developmentDoor: developmentDoorOpen(request) });
    return null;
  }

  /** A signed-in account may make itself a developer in one click on a local development server only. */
  const developmentDoorOpen = (request: FastifyRequest): boolean => isLocalDevelopment(config, request.ip);

  app.post('/console/become-developer', async (request, reply) => {
    const userId = await signedInUser(request, reply);
    if (!userId) return reply;
    if (!developmentDoorOpen(request)) throw new AppError('not_found');
    if (field(request.body as FormBody, 'action') !== 'become_developer') throw new AppError('invalid_request', { message: 'Unknown action.' });
    const user = await findUserById(db, userId);
    if (!user) throw new AppError('not_found');
    await becomeDeveloper(db, now(), user, requestContext(request));
    return reply.redirect('/console', 303);
  });

  // ---- Sign-in (the console as a client of the platform) ----

  app.get('/console/login', async (request, reply) => {
    const returnTo = safeReturn((request.query as Record<string, unknown>).return);
    if (request.browserSession?.user_id) return reply.redirect(returnTo, 303);
    await sessions.ensure(request, reply);
    const login: LoginState = { state: randomBytes(16).toString('base64url'), verifier: randomBytes(32).toString('base64url'), return: returnTo };
    await sessions.writeData(request, reply, { console_login: login } satisfies ConsoleData);
    const authorize = new URLSearchParams({
      response_type: 'code',
      client_id: CONSOLE_APP_ID,
      redirect_uri: consoleRedirectUri(config),
      scope: CONSOLE_SCOPE,
      state: login.state,
      code_challenge: s256(login.verifier),
      code_challenge_method: 'S256',
      ui_locales: localeOf(request),
    });
    return reply.redirect(`${config.authUrl}/oauth/authorize?${authorize.toString()}`, 303);
  });

  app.get('/console/callback', async (request, reply) => {
    const query = request.query as Record<string, unknown>;
    const login = sessions.readData<ConsoleData>(request).console_login;
    if (!login || typeof query.state !== 'string' || query.state !== login.state) {
      reply.code(400);
      return render(request, reply, 'signed-out', { titleKey: 'console.signin.title', message: 'console.signin.expired' });
    }
    if (typeof query.code !== 'string') {
      // The user denied consent or the sign-in was refused: nothing to exchange.
      reply.code(400);
      return render(request, reply, 'signed-out', { titleKey: 'console.signin.title', message: 'console.signin.refused' });
    }
    const form = (fields: Record<string, string>) => ({ method: 'POST' as const, headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams(fields).toString() });
    const exchanged = await app.inject({
      url: '/oauth/token',
      ...form({ grant_type: 'authorization_code', code: query.code, redirect_uri: consoleRedirectUri(config), client_id: CONSOLE_APP_ID, code_verifier: login.verifier }),
    });
    if (exchanged.statusCode !== 200) {
      request.log.warn({ status: exchanged.statusCode }, 'console sign-in: code exchange refused');
      reply.code(400);
      return render(request, reply, 'signed-out', { titleKey: 'console.signin.title', message: 'console.signin.expired' });
    }
    const tokens = exchanged.json<{ id_token: string; refresh_token?: string }>();
    // The token response came straight from this process: its id_token needs no signature check here.
    const claims = decodeJwt(tokens.id_token);
    // The console keeps its own session; the platform's refresh token is not needed.
    if (tokens.refresh_token) await app.inject({ url: '/oauth/revoke', ...form({ token: tokens.refresh_token, client_id: CONSOLE_APP_ID }) });
    await sessions.signIn(request, reply, String(claims.sub), parseAmr(JSON.stringify(claims.amr ?? [])));
    await sessions.writeData(request, reply, {});
    return reply.redirect(login.return, 303);
  });

  app.post('/console/logout', async (request, reply) => {
    await sessions.signOut(request, reply);
    return render(request, reply, 'signed-out', { titleKey: 'console.signout.title', message: 'console.signout.done' });
  });

  app.get('/console/invitation', async (request, reply) => {
    const userId = await signedInUser(request, reply);
    if (!userId) return reply;
    const token = (request.query as Record<string, unknown>).token;
    const user = await findUserById(db, userId);
    return render(request, reply, 'invitation', { titleKey: 'console.invitation.title', token: typeof token === 'string' ? token : '', email: user?.email ?? '' });
  });

  app.post('/console/invitation', async (request, reply) => {
    const userId = await signedInUser(request, reply);
    if (!userId) return reply;
    await acceptInvitation(db, now(), field(request.body as FormBody, 'token'), userId, requestContext(request));
    return reply.redirect('/console?linked=1', 303);
  });

  // ---- Apps ----

  async function appsPage(request: FastifyRequest, reply: FastifyReply, developer: Developer, extra: Record<string, unknown> = {}) {
    const apps = await listApps(db, developer.id);
    const query = request.query as Record<string, unknown>;
    const notice = query.deleted ? 'console.apps.deleted' : query.linked ? 'console.apps.linked' : undefined;
    return render(request, reply, 'apps', {
      titleKey: 'console.apps.title',
      apps,
      notice,
      values: NEW_APP_VALUES,
      ...extra,
    });
  }

  app.get('/console', async (request, reply) => {
    const developer = await signedInDeveloper(request, reply);
    if (!developer) return reply;
    return appsPage(request, reply, developer);
  });

  app.post('/console/apps', async (request, reply) => {
    const developer = await signedInDeveloper(request, reply);
    if (!developer) return reply;
    const body = request.body as FormBody;
    const checked = check(CreateAppBody, { ...appInput(body), type: field(body, 'type') }, request);
    if (!checked.ok) {
      reply.code(400);
      return appsPage(request, reply, developer, { values: postedAppValues(body), errors: checked.errors });
    }
    const created = await createApp(db, now(), developer.id, checked.value, requestContext(request));
    return showSecretOnce(request, reply, `/console/apps/${created.id}`, { notice: 'console.app.created', secret: created.client_secret });
  });

  /**
   * Every form that makes something answers 303 to a GET, so a reload never makes it twice; a secret
   * made by it is shown once by that GET (BrowserSessions.showOnce).
   */
  function showSecretOnce(request: FastifyRequest, reply: FastifyReply, location: string, shown: ShownOnce) {
    sessions.showOnce(request, reply, shown);
    return reply.redirect(location, 303);
  }

  async function ownedApp(request: FastifyRequest) {
    return requireOwnedApp(request, (request.params as { id: string }).id);
  }

  function appPage(request: FastifyRequest, reply: FastifyReply, view: AppView, extra: Record<string, unknown> = {}) {
    return render(request, reply, 'app', { titleKey: 'console.app.title', titleParams: { name: view.name }, app: view, tab: 'settings', values: { ...appFormValues(view), ...settingsFormValues(view) }, ...extra });
  }

  app.get('/console/apps/:id', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const shown = sessions.takeShownOnce<ShownOnce>(request, reply);
    return appPage(request, reply, toAppView(owned), { notice: (request.query as Record<string, unknown>).saved ? 'console.app.saved' : shown.notice, secret: shown.secret });
  });

  app.post('/console/apps/:id', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const body = request.body as FormBody;
    const ctx = requestContext(request);
    const action = field(body, 'action');
    if (action === 'rotate_secret') {
      const rotated = await rotateClientSecret(db, now(), owned, ctx);
      return showSecretOnce(request, reply, `/console/apps/${owned.id}`, { notice: 'console.app.rotated', secret: rotated.client_secret });
    }
    if (action !== 'save') throw new AppError('invalid_request', { message: 'Unknown action.' });
    const input = { ...appInput(body), ...appSettingsInput(body) };
    const checked = check(UpdateAppBody, input, request, settingsFieldOf);
    // The back-channel URI's target policy depends on the deployment, so it runs beside the schema, as in the API.
    const uriProblem = backchannelUriProblem(input.backchannel_logout_uri, { publicOnly: config.webhooks.publicOnly });
    const resourceProblem = resourceUrisProblem(input.resource_uris, config.production);
    if (!checked.ok || uriProblem || resourceProblem) {
      const errors = checked.ok ? {} : { ...checked.errors };
      const translate = app.messages.translator(consoleLocaleOf(request));
      if (uriProblem && !errors.backchannel_logout_uri) errors.backchannel_logout_uri = translatedErrorText(translate, uriProblem);
      if (resourceProblem && !errors.resource_uris) errors.resource_uris = translatedErrorText(translate, resourceProblem.message);
      reply.code(400);
      return appPage(request, reply, toAppView(owned), { values: { ...postedAppValues(body), ...postedSettingsValues(body), type: owned.type }, errors });
    }
    await updateApp(db, now(), owned, checked.value, ctx);
    return reply.redirect(`/console/apps/${owned.id}?saved=1`, 303);
  });

  // ---- Mails of an app (docs/guides/app-mail.md) ----

  function mailPage(request: FastifyRequest, reply: FastifyReply, view: AppView, choice: z.output<typeof MailChoice>, extra: Record<string, unknown> = {}) {
    const override = view.mail.overrides[choice.kind]?.[choice.locale];
    return render(request, reply, 'mail', {
      titleKey: 'console.mail.title',
      titleParams: { name: view.name },
      app: view,
      tab: 'mail',
      frames: true,
      kinds: MAIL_KINDS,
      choice,
      overridden: Object.entries(view.mail.overrides).flatMap(([kind, byLocale]) => Object.keys(byLocale ?? {}).map((locale) => ({ kind, locale }))),
      values: { reply_to: view.mail.reply_to ?? '', subject: override?.subject ?? '', intro: override?.intro ?? '' },
      previewUrl: `/console/apps/${view.id}/mail/preview?${new URLSearchParams(choice).toString()}`,
      ...extra,
    });
  }

  app.get('/console/apps/:id/mail', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const query = request.query as Record<string, unknown>;
    return mailPage(request, reply, toAppView(owned), MailChoice.parse(query), { notice: query.saved ? 'console.app.saved' : undefined });
  });

  app.get('/console/apps/:id/mail/preview', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const choice = MailChoiceStrict.safeParse(request.query);
    if (!choice.success) throw new AppError('invalid_request', { message: 'Choose a mail kind and a locale.' });
    const rendered = app.mailer.preview(owned, choice.data.kind, choice.data.locale);
    // The mail's own HTML: sandboxed (no script, no form, no navigation), framed by the console only.
    reply.header('content-security-policy', "sandbox; default-src 'none'; style-src 'unsafe-inline'; img-src https: data:; frame-ancestors 'self'");
    reply.header('x-frame-options', 'SAMEORIGIN');
    reply.header('referrer-policy', 'no-referrer');
    reply.header('cache-control', 'no-store');
    return reply.type('text/html; charset=utf-8').send(rendered.html);
  });

  app.post('/console/apps/:id/mail', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const body = request.body as FormBody;
    if (field(body, 'action') !== 'save') throw new AppError('invalid_request', { message: 'Unknown action.' });
    const choice = MailChoiceStrict.safeParse({ kind: field(body, 'kind'), locale: field(body, 'locale') });
    if (!choice.success) throw new AppError('invalid_request', { message: 'Choose a mail kind and a locale.' });
    const { kind, locale } = choice.data;
    const subject = field(body, 'subject').trim();
    const intro = field(body, 'intro').trim();
    // The form edits one kind in one locale; the API takes the whole set, so the others are carried over.
    const overrides: Record<string, Record<string, { subject?: string; intro?: string }>> = structuredClone(owned.mail.overrides) as never;
    const byLocale = { ...overrides[kind] };
    if (subject || intro) byLocale[locale] = { ...(subject ? { subject } : {}), ...(intro ? { intro } : {}) };
    else delete byLocale[locale];
    if (Object.keys(byLocale).length > 0) overrides[kind] = byLocale;
    else delete overrides[kind];
    const checked = check(UpdateAppBody, { mail: { reply_to: field(body, 'reply_to').trim() || null, overrides } }, request, mailFieldOf);
    if (!checked.ok) {
      reply.code(400);
      return mailPage(request, reply, toAppView(owned), choice.data, { values: { reply_to: field(body, 'reply_to'), subject: field(body, 'subject'), intro: field(body, 'intro') }, errors: checked.errors });
    }
    await updateApp(db, now(), owned, checked.value, requestContext(request));
    return reply.redirect(`/console/apps/${owned.id}/mail?${new URLSearchParams({ kind, locale, saved: '1' }).toString()}`, 303);
  });

  app.get('/console/apps/:id/delete', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    return render(request, reply, 'app-delete', { titleKey: 'console.delete.title', titleParams: { name: owned.name }, app: toAppView(owned) });
  });

  app.post('/console/apps/:id/delete', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    if (field(request.body as FormBody, 'action') !== 'delete') throw new AppError('invalid_request', { message: 'Unknown action.' });
    await removeApp(db, now(), owned, requestContext(request));
    return reply.redirect('/console?deleted=1', 303);
  });

  app.get('/console/apps/:id/integration', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    return render(request, reply, 'integration', {
      titleKey: 'console.integration.title',
      titleParams: { name: owned.name },
      app: toAppView(owned),
      tab: 'integration',
      issuer: config.baseUrl,
      snippets: integrationSnippets(config.baseUrl, owned),
    });
  });

  // ---- Users of an app ----

  app.get('/console/apps/:id/users', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const { changed, ...raw } = listingQuery(request.query);
    const checked = check(UserListQuery, raw, request);
    const locals = { titleKey: 'console.users.title', titleParams: { name: owned.name }, app: toAppView(owned), tab: 'users', query: raw };
    if (!checked.ok) {
      reply.code(400);
      return render(request, reply, 'users', { ...locals, errors: checked.errors, list: null });
    }
    const list = await listAppUserPage(db, app.dialect, owned.id, checked.value);
    const notice = changed === 'blocked' ? 'console.users.blocked' : changed === 'active' ? 'console.users.unblocked' : undefined;
    return render(request, reply, 'users', { ...locals, list, notice, back: new URLSearchParams(raw).toString() });
  });

  app.get('/console/apps/:id/users/:userId', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const userId = UserId.safeParse((request.params as { userId: string }).userId);
    const user = userId.success ? await findAppUserItem(db, owned.id, userId.data) : undefined;
    if (!user) throw new AppError('not_found', { message: 'No such user of this app.' });
    const events = await listUserEventsOfApp(db, owned.id, user.id, 20);
    return render(request, reply, 'user', { titleKey: 'console.user.title', titleParams: { email: user.email }, app: toAppView(owned), tab: 'users', user, events, back: '' });
  });

  app.post('/console/apps/:id/users', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const body = request.body as FormBody;
    const action = field(body, 'action');
    if (action !== 'block' && action !== 'unblock') throw new AppError('invalid_request', { message: 'Unknown action.' });
    const userId = UserId.safeParse(field(body, 'user_id'));
    if (!userId.success) throw new AppError('invalid_request', { message: 'No user was chosen.' });
    const status = action === 'block' ? 'blocked' : 'active';
    await setAppUserStatusAudited(db, now(), owned, userId.data, status, requestContext(request));
    // Back to the same listing (its query was carried in `back`; the GET checks it again).
    const back = new URLSearchParams(field(body, 'back'));
    back.set('changed', status);
    return reply.redirect(`/console/apps/${owned.id}/users?${back.toString()}`, 303);
  });

  // ---- Events of an app ----

  app.get('/console/apps/:id/events', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const raw = listingQuery(request.query);
    const checked = check(EventsQuery, { ...raw, limit: raw.limit ?? '25' }, request);
    const locals = { titleKey: 'console.events.title', titleParams: { name: owned.name }, app: toAppView(owned), tab: 'events', query: raw };
    if (!checked.ok) {
      reply.code(400);
      return render(request, reply, 'events', { ...locals, errors: checked.errors, list: null });
    }
    const list = await listAppEventPage(db, owned.id, checked.value);
    // People by their address, not their id (only the app's own users: the page shows no others).
    const emails = await findMemberEmails(db, owned.id, list.items.flatMap((e) => (e.user_id ? [e.user_id] : [])));
    const next = list.next_cursor ? new URLSearchParams({ ...(raw.type ? { type: raw.type } : {}), after: list.next_cursor }).toString() : null;
    return render(request, reply, 'events', { ...locals, list, next, emails });
  });

  // ---- Webhooks of an app (docs/webhooks.md) ----

  const WebhookId = z.string().min(1).max(200);
  const DeliveryCursor = z.strictObject({ before: z.string().regex(/^msg_[0-9a-z]{26}$/, 'must be a cursor').optional() });

  /** The endpoint form as the API's body: event types are checkboxes, an empty description is none. */
  const webhookInput = (body: FormBody) => ({ url: field(body, 'url'), description: field(body, 'description') || null, event_types: fields(body, 'event_types') });
  const webhookValues = (view: Pick<WebhookEndpointView, 'url' | 'description' | 'event_types' | 'enabled'>) => ({
    url: view.url,
    description: view.description ?? '',
    event_types: [...view.event_types],
    enabled: view.enabled,
  });

  async function webhooksPage(request: FastifyRequest, reply: FastifyReply, owned: Awaited<ReturnType<typeof ownedApp>>, extra: Record<string, unknown> = {}) {
    const endpoints = await app.webhooks.list(owned.id);
    return render(request, reply, 'webhooks', {
      titleKey: 'console.webhooks.title',
      titleParams: { name: owned.name },
      app: toAppView(owned),
      tab: 'webhooks',
      endpoints,
      webhookTypes: WEBHOOK_TYPES,
      values: { url: '', description: '', event_types: [] as string[] },
      ...extra,
    });
  }

  async function webhookPage(request: FastifyRequest, reply: FastifyReply, owned: Awaited<ReturnType<typeof ownedApp>>, webhookId: string, extra: Record<string, unknown> = {}) {
    const endpoint = await app.webhooks.get(owned.id, webhookId);
    const cursor = check(DeliveryCursor, listingQuery(request.query), request);
    if (!cursor.ok) reply.code(400);
    const log = await app.webhooks.deliveries(owned.id, webhookId, { before: cursor.ok ? cursor.value.before : undefined, limit: 20 });
    return render(request, reply, 'webhook', {
      titleKey: 'console.webhooks.title',
      titleParams: { name: owned.name },
      app: toAppView(owned),
      tab: 'webhooks',
      endpoint,
      log,
      webhookTypes: WEBHOOK_TYPES,
      values: webhookValues(endpoint),
      ...extra,
    });
  }

  const webhookIdOf = (request: FastifyRequest): string => {
    const parsed = WebhookId.safeParse((request.params as { webhookId: string }).webhookId);
    if (!parsed.success) throw new AppError('not_found', { message: 'No such webhook endpoint.' });
    return parsed.data;
  };

  app.get('/console/apps/:id/webhooks', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const deleted = (request.query as Record<string, unknown>).deleted;
    return webhooksPage(request, reply, owned, { notice: deleted ? 'console.webhooks.deleted' : undefined });
  });

  app.post('/console/apps/:id/webhooks', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const body = request.body as FormBody;
    if (field(body, 'action') !== 'create') throw new AppError('invalid_request', { message: 'Unknown action.' });
    const input = webhookInput(body);
    const checked = check(CreateWebhookBody, input, request);
    const values = { url: input.url, description: input.description ?? '', event_types: input.event_types };
    if (!checked.ok) {
      reply.code(400);
      return webhooksPage(request, reply, owned, { values, errors: checked.errors });
    }
    try {
      const created = await app.webhooks.create(owned.id, checked.value, requestContext(request));
      return showSecretOnce(request, reply, `/console/apps/${owned.id}/webhooks/${created.id}`, { notice: 'console.webhooks.created', secret: created.secret });
    } catch (error) {
      // The URL rules (https, public address) live in the service: shown at the field like the schema's.
      if (error instanceof AppError && error.code === 'invalid_request') {
        reply.code(400);
        return webhooksPage(request, reply, owned, { values, errors: { [error.details?.[0]?.path === 'body.url' ? 'url' : 'form']: error.details?.[0]?.message ?? error.message } });
      }
      throw error;
    }
  });

  app.get('/console/apps/:id/webhooks/:webhookId', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const shown = sessions.takeShownOnce<ShownOnce>(request, reply);
    const done = (request.query as Record<string, unknown>).done;
    const notices: Record<string, string> = { saved: 'console.webhooks.saved', tested: 'console.webhooks.tested', redelivered: 'console.webhooks.redelivered' };
    return webhookPage(request, reply, owned, webhookIdOf(request), { notice: (typeof done === 'string' ? notices[done] : undefined) ?? shown.notice, secret: shown.secret });
  });

  app.post('/console/apps/:id/webhooks/:webhookId', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const webhookId = webhookIdOf(request);
    const body = request.body as FormBody;
    const ctx = requestContext(request);
    const here = `/console/apps/${owned.id}/webhooks/${webhookId}`;
    switch (field(body, 'action')) {
      case 'save': {
        const input = { ...webhookInput(body), enabled: field(body, 'enabled') === '1' };
        const values = { ...input, description: input.description ?? '' };
        const checked = check(UpdateWebhookBody, input, request);
        if (!checked.ok) {
          reply.code(400);
          return webhookPage(request, reply, owned, webhookId, { values, errors: checked.errors });
        }
        try {
          await app.webhooks.update(owned.id, webhookId, checked.value, ctx);
        } catch (error) {
          if (error instanceof AppError && error.code === 'invalid_request') {
            reply.code(400);
            return webhookPage(request, reply, owned, webhookId, { values, errors: { url: error.details?.[0]?.message ?? error.message } });
          }
          throw error;
        }
        return reply.redirect(`${here}?done=saved`, 303);
      }
      case 'rotate_secret': {
        const rotated = await app.webhooks.rotateSecret(owned.id, webhookId, { overlap_seconds: 86400 }, ctx);
        return showSecretOnce(request, reply, here, { notice: 'console.webhooks.rotated', secret: rotated.secret });
      }
      case 'test':
        await app.webhooks.sendTest(owned.id, webhookId);
        return reply.redirect(`${here}?done=tested`, 303);
      case 'redeliver': {
        const deliveryId = WebhookId.safeParse(field(body, 'delivery_id'));
        if (!deliveryId.success) throw new AppError('invalid_request', { message: 'No delivery was chosen.' });
        await app.webhooks.redeliver(owned.id, webhookId, deliveryId.data);
        return reply.redirect(`${here}?done=redelivered`, 303);
      }
      case 'delete':
        await app.webhooks.remove(owned.id, webhookId, ctx);
        return reply.redirect(`/console/apps/${owned.id}/webhooks?deleted=1`, 303);
      default:
        throw new AppError('invalid_request', { message: 'Unknown action.' });
    }
  });

  // ---- Legal documents of an app ----

  async function legalPage(request: FastifyRequest, reply: FastifyReply, owned: Awaited<ReturnType<typeof ownedApp>>, extra: Record<string, unknown> = {}) {
    const [documents, views] = await Promise.all([listDocumentSummaries(db, config.authUrl, owned.id, undefined), listAppLegalViews(db, now(), owned.id, {})]);
    const locale = consoleLocaleOf(request);
    const t = app.messages.translator(locale);
    const languageName = new Intl.DisplayNames([locale], { type: 'language' });
    // The common documents, and any other type this app has published through the API.
    const types = [...new Set(['terms', 'privacy', ...documents.map((d) => d.docType)])];
    return render(request, reply, 'legal', {
      docTypes: types.map((d) => ({ value: d, label: d === 'terms' || d === 'privacy' ? t(`console.legal.type_${d}`) : d })),
      langs: LOCALES.map((l) => ({ value: l, label: `${languageName.of(l) ?? l} (${l})` })),
      titleKey: 'console.legal.title',
      titleParams: { name: owned.name },
      app: toAppView(owned),
      tab: 'legal',
      documents,
      views,
      chart: viewChart(views, now()),
      values: { docType: 'privacy', lang: 'en', title: '', content: '' },
      preview: null,
      ...extra,
    });
  }

  app.get('/console/apps/:id/legal', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const published = (request.query as Record<string, unknown>).published;
    return legalPage(request, reply, owned, { notice: published ? 'console.legal.published' : undefined });
  });

  app.post('/console/apps/:id/legal', async (request, reply) => {
    if (!(await signedInDeveloper(request, reply))) return reply;
    const owned = await ownedApp(request);
    const body = request.body as FormBody;
    const values = { docType: field(body, 'docType').trim(), lang: field(body, 'lang').trim(), title: field(body, 'title'), content: field(body, 'content') };
    const action = field(body, 'action');
    if (action !== 'publish' && action !== 'preview') throw new AppError('invalid_request', { message: 'Unknown action.' });
    const checks = [check(DocTypeParams, { docType: values.docType }, request), check(PublishQuery, { lang: values.lang }, request), check(PublishBody, { title: values.title, content: values.content }, request)];
    const errors: FieldErrors = Object.assign({}, ...checks.map((c) => (c.ok ? {} : c.errors)));
    // Rendering is the last check (content it cannot render is refused), and it is the preview.
    let preview: string | null = null;
    if (Object.keys(errors).length === 0) {
      try {
        preview = await renderer.render(values.content);
      } catch (error) {
        if (!(error instanceof AppError) || error.code !== 'invalid_request') throw error;
        errors.content = error.details?.[0]?.message ?? error.publicMessage;
      }
    }
    if (Object.keys(errors).length > 0 || action === 'preview') {
      if (Object.keys(errors).length > 0) reply.code(400);
      return legalPage(request, reply, owned, { values, errors, preview });
    }
    await publishVersion(db, renderer, {
      owner: owned.id,
      docType: values.docType,
      lang: values.lang,
      body: { title: values.title, content: values.content },
      at: now(),
      ctx: requestContext(request),
    });
    return reply.redirect(`/console/apps/${owned.id}/legal?published=${encodeURIComponent(values.docType)}`, 303);
  });

  await operatorRoutes(app, sessions, render);

  // ---- API keys ----

  async function keysPage(request: FastifyRequest, reply: FastifyReply, developer: Developer, extra: Record<string, unknown> = {}) {
    const query = request.query as Record<string, unknown>;
    return render(request, reply, 'keys', {
      titleKey: 'console.keys.title',
      keys: await listApiKeys(db, developer.id),
      notice: query.revoked ? 'console.keys.revoked' : undefined,
      values: { name: '' },
      ...extra,
    });
  }

  app.get('/console/keys', async (request, reply) => {
    const developer = await signedInDeveloper(request, reply);
    if (!developer) return reply;
    return keysPage(request, reply, developer, { created: sessions.takeShownOnce<ShownOnce>(request, reply).created });
  });

  app.post('/console/keys', async (request, reply) => {
    const developer = await signedInDeveloper(request, reply);
    if (!developer) return reply;
    const body = request.body as FormBody;
    const ctx = requestContext(request);
    const action = field(body, 'action');
    if (action === 'revoke_key') {
      const keyId = KeyId.safeParse(field(body, 'key_id'));
      if (!keyId.success) throw new AppError('invalid_request', { message: 'No key was chosen.' });
      await revokeApiKey(db, now(), developer.id, keyId.data, ctx);
      return reply.redirect('/console/keys?revoked=1', 303);
    }
    if (action !== 'create_key') throw new AppError('invalid_request', { message: 'Unknown action.' });
    const name = check(KeyName, field(body, 'name'), request);
    if (!name.ok) {
      reply.code(400);
      return keysPage(request, reply, developer, { values: { name: field(body, 'name') }, errors: { name: name.errors.form } });
    }
    const created = await createApiKey(db, now(), developer.id, name.value, ctx);
    return showSecretOnce(request, reply, '/console/keys', { created: { name: created.name, key: created.key } });
  });
}
