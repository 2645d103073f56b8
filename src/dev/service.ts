import type { Kysely } from 'kysely';
import { AppError } from '../errors.js';
import { resourceUriProblem } from '../shared/resources.js';
import { isLocale, type Locale } from '../plugins/i18n.js';
import { hashSecret, newId, newSecret } from '../shared/ids.js';
import type { RequestContext } from '../shared/request-context.js';
import { urlProblem, type TargetPolicy } from '../shared/targets.js';
import { isoTime } from '../shared/time.js';
import { type App, type AppPasswordPolicy, countAppsOfDeveloper, defaultAppSettings, type MailOverrides, deleteApp, insertApp, listAppsOfDeveloper, saveApp } from '../storage/repos/apps.js';
import { appendEvent, type EventType } from '../storage/repos/events.js';
import { deleteWebhooksOfApp } from '../storage/repos/webhooks.js';
import type { Database } from '../storage/schema.js';
import { inTransaction } from '../storage/transaction.js';
import type { CreateAppInput, UpdateAppInput } from './schemas.js';

/** A new app: branding is optional for callers other than the API (first start, the CLI). */
type OptionalOnCreate =
  | 'logo_url' | 'logo_url_dark' | 'accent_color' | 'default_locale' | 'dpop_bound_access_tokens' | 'backchannel_logout_uri' | 'backchannel_logout_session_required'
  | 'password_policy' | 'mail' | 'require_pushed_authorization_requests' | 'device_authorization_grant' | 'resource_uris' | 'client_credentials' | 'client_credentials_scopes';
export type NewAppInput = Omit<CreateAppInput, OptionalOnCreate> & Partial<Pick<CreateAppInput, OptionalOnCreate>> & { disabled?: boolean };

type PasswordPolicyView = { min_length: number; character_classes: number; max_age_days: number | null; history_count: number };
type MailView = { reply_to: string | null; overrides: MailOverrides };

const toPolicy = (view: PasswordPolicyView): AppPasswordPolicy => ({
  minLength: view.min_length,
  characterClasses: view.character_classes,
  maxAgeDays: view.max_age_days,
  historyCount: view.history_count,
});

/** What the developer API shows of an app. `client_secret` only in the response that created it. */
export interface AppView {
  id: string;
  client_id: string;
  name: string;
  type: App['type'];
  redirect_uris: string[];
  allowed_origins: string[];
  features: App['features'];
  required_fields: App['requiredFields'];
  mfa: App['mfa'];
  logo_url: string | null;
  logo_url_dark: string | null;
  accent_color: string | null;
  default_locale: Locale | null;
  dpop_bound_access_tokens: boolean;
  backchannel_logout_uri: string | null;
  backchannel_logout_session_required: boolean;
  password_policy: PasswordPolicyView;
  mail: MailView;
  require_pushed_authorization_requests: boolean;
  device_authorization_grant: boolean;
  resource_uris: string[];
  client_credentials: boolean;
  client_credentials_scopes: string[];
  disabled: boolean;
  created_at: string;
  updated_at: string;
  client_secret?: string;
}

/**
 * Refuses a back-channel logout URI the webhooks' target policy refuses (shared/targets.ts: https and
 * a public address in production, no credentials or fragment): 400 `invalid_request` naming the field.
 */
/** What is wrong with a back-channel logout URI under the target policy, or null when it may be used (or is absent). */
export function backchannelUriProblem(value: string | null | undefined, policy: TargetPolicy): string | null {
  if (value === null || value === undefined) return null;
  return urlProblem(value, policy) ?? null;
}

export function checkBackchannelUri(value: string | null | undefined, policy: TargetPolicy): void {
  const problem = backchannelUriProblem(value, policy);
  if (problem) throw new AppError('invalid_request', { details: [{ path: 'body.backchannel_logout_uri', message: problem }], detail: `backchannel_logout_uri refused: ${problem}` });
}

/** Client credentials are for confidential apps only (docs/reference/oauth.md#client-credentials): a public app's client_id proves nothing. */
function checkClientCredentials(app: App): void {
  if (app.clientCredentials.enabled && app.type !== 'confidential') {
    throw new AppError('invalid_request', { details: [{ path: 'body.client_credentials', message: 'only a confidential app may use client credentials' }], detail: 'client_credentials on a public app' });
  }
}

/** What is wrong with the first resource URI that is not allowed on this deployment (https in production), or null. */
export function resourceUrisProblem(uris: readonly string[] | undefined, production: boolean): { index: number; message: string } | null {
  for (const [index, uri] of (uris ?? []).entries()) {
    const message = resourceUriProblem(uri, production);
    if (message) return { index, message };
  }
  return null;
}

export function checkResourceUris(uris: readonly string[] | undefined, production: boolean): void {
  const problem = resourceUrisProblem(uris, production);
  if (problem) throw new AppError('invalid_request', { details: [{ path: `body.resource_uris.${problem.index}`, message: problem.message }], detail: 'resource_uris refused' });
}

export function toAppView(app: App, clientSecret?: string): AppView {
  return {
    id: app.id,
    client_id: app.id,
    name: app.name,
    type: app.type,
    redirect_uris: app.redirectUris,
    allowed_origins: app.allowedOrigins,
    features: app.features,
    required_fields: app.requiredFields,
    mfa: app.mfa,
    logo_url: app.branding.logoUrl,
    logo_url_dark: app.branding.logoUrlDark,
    accent_color: app.branding.accentColor,
    default_locale: isLocale(app.defaultLocale) ? app.defaultLocale : null,
    dpop_bound_access_tokens: app.oauth.dpopBoundAccessTokens,
    backchannel_logout_uri: app.backchannelLogout.uri,
    backchannel_logout_session_required: app.backchannelLogout.sessionRequired,
    password_policy: {
      min_length: app.passwordPolicy.minLength,
      character_classes: app.passwordPolicy.characterClasses,
      max_age_days: app.passwordPolicy.maxAgeDays,
      history_count: app.passwordPolicy.historyCount,
    },
    mail: { reply_to: app.mail.replyTo, overrides: app.mail.overrides },
    require_pushed_authorization_requests: app.oauth.requirePushedAuthorizationRequests,
    device_authorization_grant: app.oauth.deviceAuthorizationGrant,
    resource_uris: app.resourceUris,
    client_credentials: app.clientCredentials.enabled,
    client_credentials_scopes: app.clientCredentials.scopes,
    disabled: app.disabled,
    created_at: isoTime(app.createdAt),
    updated_at: isoTime(app.updatedAt),
    ...(clientSecret ? { client_secret: clientSecret } : {}),
  };
}

/**
 * Every change below is recorded as an audit event in the same transaction, whichever door made it
 * (developer API, console, CLI, first start); `ctx` is who asked, when there was a request.
 */
async function recordAppChange(db: Kysely<Database>, now: number, type: EventType, app: App, ctx: RequestContext, data: Record<string, unknown> = {}): Promise<void> {
  await appendEvent(db, now, { type, appId: app.id, ip: ctx.ip, userAgent: ctx.userAgent, data: { developer_id: app.developerId, ...data } });
}

/**
 * The most apps a developer may have: with at most MAX_REDIRECT_URIS redirect URIs and
 * MAX_ALLOWED_ORIGINS origins each, what one developer adds to every process's CORS origins is bounded.
 */
export const MAX_APPS_PER_DEVELOPER = 100;

/**
 * Creates an app; a confidential app gets a client secret, returned once (only its hash is stored).
 * A developer at MAX_APPS_PER_DEVELOPER → 400 `invalid_request`, nothing created.
 */
export async function createApp(db: Kysely<Database>, now: number, developerId: string, input: NewAppInput, ctx: RequestContext = {}): Promise<AppView> {
  const clientSecret = input.type === 'confidential' ? newSecret('cs') : undefined;
  const app: App = {
    id: newId('app'),
    developerId,
    name: input.name,
    type: input.type,
    clientSecretHash: clientSecret ? hashSecret(clientSecret) : null,
    redirectUris: input.redirect_uris,
    allowedOrigins: input.allowed_origins,
    features: input.features,
    requiredFields: input.required_fields,
    mfa: input.mfa,
    branding: { logoUrl: input.logo_url ?? null, logoUrlDark: input.logo_url_dark ?? null, accentColor: input.accent_color ?? null },
    defaultLocale: input.default_locale ?? null,
    backchannelLogout: { uri: input.backchannel_logout_uri ?? null, sessionRequired: input.backchannel_logout_session_required ?? false },
    passwordPolicy: input.password_policy ? toPolicy(input.password_policy) : defaultAppSettings().passwordPolicy,
    mail: input.mail ? { replyTo: input.mail.reply_to, overrides: input.mail.overrides as MailOverrides } : defaultAppSettings().mail,
    disabled: input.disabled ?? false,
    createdAt: now,
    updatedAt: now,
    oauth: {
      dpopBoundAccessTokens: input.dpop_bound_access_tokens ?? false,
      requirePushedAuthorizationRequests: input.require_pushed_authorization_requests ?? false,
      deviceAuthorizationGrant: input.device_authorization_grant ?? false,
    },
    resourceUris: input.resource_uris ?? [],
    clientCredentials: { enabled: input.client_credentials ?? false, scopes: input.client_credentials_scopes ?? [], notBefore: null },
  };
  checkClientCredentials(app);
  await inTransaction(db, async (trx) => {
    if ((await countAppsOfDeveloper(trx, developerId)) >= MAX_APPS_PER_DEVELOPER) {
      throw new AppError('invalid_request', { message: `A developer may have at most ${MAX_APPS_PER_DEVELOPER} apps. Delete one you no longer use first.`, detail: 'app limit reached' });
    }
    await insertApp(trx, app);
    await recordAppChange(trx, now, 'app.created', app, ctx, { name: app.name, type: app.type });
  });
  return toAppView(app, clientSecret);
}

export async function listApps(db: Kysely<Database>, developerId: string): Promise<AppView[]> {
  return (await listAppsOfDeveloper(db, developerId)).map((app) => toAppView(app));
}

export async function updateApp(db: Kysely<Database>, now: number, app: App, patch: UpdateAppInput, ctx: RequestContext = {}): Promise<AppView> {
  const updated: App = {
    ...app,
    name: patch.name ?? app.name,
    redirectUris: patch.redirect_uris ?? app.redirectUris,
    allowedOrigins: patch.allowed_origins ?? app.allowedOrigins,
    features: { ...app.features, ...patch.features },
    requiredFields: patch.required_fields ?? app.requiredFields,
    mfa: patch.mfa ?? app.mfa,
    // null clears a branding field; absent keeps it.
    branding: {
      logoUrl: patch.logo_url === undefined ? app.branding.logoUrl : patch.logo_url,
      logoUrlDark: patch.logo_url_dark === undefined ? app.branding.logoUrlDark : patch.logo_url_dark,
      accentColor: patch.accent_color === undefined ? app.branding.accentColor : patch.accent_color,
    },
    defaultLocale: patch.default_locale === undefined ? app.defaultLocale : patch.default_locale,
    oauth: {
      dpopBoundAccessTokens: patch.dpop_bound_access_tokens ?? app.oauth.dpopBoundAccessTokens,
      requirePushedAuthorizationRequests: patch.require_pushed_authorization_requests ?? app.oauth.requirePushedAuthorizationRequests,
      deviceAuthorizationGrant: patch.device_authorization_grant ?? app.oauth.deviceAuthorizationGrant,
    },
    backchannelLogout: {
      uri: patch.backchannel_logout_uri === undefined ? app.backchannelLogout.uri : patch.backchannel_logout_uri,
      sessionRequired: patch.backchannel_logout_session_required ?? app.backchannelLogout.sessionRequired,
    },
    passwordPolicy: patch.password_policy ? toPolicy({ ...toAppView(app).password_policy, ...patch.password_policy }) : app.passwordPolicy,
    mail: {
      replyTo: patch.mail?.reply_to === undefined ? app.mail.replyTo : patch.mail.reply_to,
      overrides: patch.mail?.overrides === undefined ? app.mail.overrides : (patch.mail.overrides as MailOverrides),
    },
    resourceUris: patch.resource_uris ?? app.resourceUris,
    clientCredentials: {
      enabled: patch.client_credentials ?? app.clientCredentials.enabled,
      scopes: patch.client_credentials_scopes ?? app.clientCredentials.scopes,
      notBefore: app.clientCredentials.notBefore,
    },
    disabled: patch.disabled ?? app.disabled,
    updatedAt: now,
  };
  checkClientCredentials(updated);
  await inTransaction(db, async (trx) => {
    await saveApp(trx, updated);
    // The names of the fields sent, never their values (redirect URIs and origins are the app's business).
    await recordAppChange(trx, now, 'app.updated', updated, ctx, { fields: Object.keys(patch).sort() });
  });
  return toAppView(updated);
}

/** Replaces a confidential app's secret; the old one stops working at once. */
export async function rotateClientSecret(db: Kysely<Database>, now: number, app: App, ctx: RequestContext = {}): Promise<AppView> {
  if (app.type !== 'confidential') throw new AppError('invalid_request', { message: 'Only confidential apps have a client secret.' });
  const clientSecret = newSecret('cs');
  const updated: App = { ...app, clientSecretHash: hashSecret(clientSecret), updatedAt: now };
  await inTransaction(db, async (trx) => {
    await saveApp(trx, updated);
    await recordAppChange(trx, now, 'app.secret_rotated', updated, ctx);
  });
  return toAppView(updated, clientSecret);
}

/** Deletes an app; its grants, codes, consents, app users and profiles go with it (foreign keys cascade). */
export async function removeApp(db: Kysely<Database>, now: number, app: App, ctx: RequestContext = {}): Promise<void> {
  await inTransaction(db, async (trx) => {
    await deleteApp(trx, app.id, now);
    await deleteWebhooksOfApp(trx, app.id);
    await recordAppChange(trx, now, 'app.deleted', app, ctx, { name: app.name });
  });
}
