import type { Kysely } from 'kysely';
import { newId } from '../../shared/ids.js';
import { precompiled } from '../precompiled.js';
import { getSetting, putSetting } from './settings.js';
import type { AppRow, Database } from '../schema.js';
import { COLUMNS } from '../columns.js';

export type AppType = 'public' | 'confidential';
export type RequiredField = 'name' | 'phone_number' | 'birthdate' | 'email_verified';

/** An app's second-factor policy; the rule that reads it is sign-in/policy.ts. */
export type MfaPolicy = 'off' | 'optional' | 'required';

/** An app's password policy (the rule that reads it is sign-in/password-policy.ts). */
export interface AppPasswordPolicy {
  minLength: number;
  characterClasses: number;
  maxAgeDays: number | null;
  historyCount: number;
}

/** A text override of one mail kind in one locale: replaces the subject and/or the intro line (docs/guides/app-mail.md). */
export interface MailTextOverride {
  subject?: string;
  intro?: string;
}

/** Overrides by mail template (`password_reset`, …), then by locale (`en`, `zh-CN`, …). */
export type MailOverrides = Record<string, Record<string, MailTextOverride>>;

/** What a new app starts with: no password rules beyond the platform's, no mail settings. */
export function defaultAppSettings(): Pick<App, 'passwordPolicy' | 'mail'> {
  return { passwordPolicy: { minLength: 8, characterClasses: 0, maxAgeDays: null, historyCount: 0 }, mail: { replyTo: null, overrides: {} } };
}

/** An app (OAuth client) as the features see it. `id` is its client_id. */
export interface App {
  id: string;
  developerId: string;
  name: string;
  type: AppType;
  clientSecretHash: string | null;
  redirectUris: string[];
  allowedOrigins: string[];
  features: { auth: boolean; profile: boolean };
  requiredFields: RequiredField[];
  /** Second-factor policy. */
  mfa: MfaPolicy;
  /** Hosted-page branding (validated on write: https URL, `#rrggbb`). */
  branding: { logoUrl: string | null; logoUrlDark: string | null; accentColor: string | null };
  /** The hosted pages' language when neither the request nor the person chooses one (NULL = English). */
  defaultLocale: string | null;
  /** OpenID Connect Back-Channel Logout (docs/guides/back-channel-logout.md): `uri` null = no logout tokens. */
  backchannelLogout: { uri: string | null; sessionRequired: boolean };
  passwordPolicy: AppPasswordPolicy;
  /** The mails the app causes: a Reply-To address (validated on write) and text overrides. */
  mail: { replyTo: string | null; overrides: MailOverrides };
  disabled: boolean;
  createdAt: number;
  updatedAt: number;
  /** Sender-constrained tokens (docs/reference/oauth.md): DPoP required, pushed authorization requests required; the device authorization grant allowed. */
  oauth: { dpopBoundAccessTokens: boolean; requirePushedAuthorizationRequests: boolean; deviceAuthorizationGrant: boolean };
  /** The APIs (RFC 8707 resource URIs) the app may ask tokens for (docs/reference/oauth.md#resource-indicators-rfc-8707). */
  resourceUris: string[];
  /**
   * grant_type=client_credentials (docs/reference/oauth.md#client-credentials): allowed (confidential apps
   * only), the scopes its tokens may carry, and the revocation cut-off (tokens issued at or before it are revoked).
   */
  clientCredentials: { enabled: boolean; scopes: string[]; notBefore: number | null };
}

/** What a bearer check needs of the token's app: who it is, and whether it may still serve the token. */
export type AppAccess = Pick<App, 'id' | 'disabled' | 'features'>;

export function toAppAccess(row: Pick<AppRow, 'id' | 'disabled' | 'feature_auth' | 'feature_profile'>): AppAccess {
  return { id: row.id, disabled: row.disabled === 1, features: { auth: row.feature_auth === 1, profile: row.feature_profile === 1 } };
}

/**
 * Built as one literal, not by spreading toAppAccess: on Node 20 every object whose properties follow
 * an object spread gets a map of its own, which cost ~14 µs a call here and left the code that reads
 * apps megamorphic (docs/adr/0011-hot-path-object-shapes.md).
 */
export function toApp(row: AppRow): App {
  const access = toAppAccess(row);
  return {
    id: access.id,
    disabled: access.disabled,
    features: access.features,
    developerId: row.developer_id,
    name: row.name,
    type: row.type,
    clientSecretHash: row.client_secret_hash,
    redirectUris: JSON.parse(row.redirect_uris) as string[],
    allowedOrigins: JSON.parse(row.allowed_origins) as string[],
    requiredFields: JSON.parse(row.required_fields) as RequiredField[],
    mfa: row.mfa,
    branding: { logoUrl: row.logo_url, logoUrlDark: row.logo_url_dark, accentColor: row.accent_color },
    defaultLocale: row.default_locale,
    backchannelLogout: { uri: row.backchannel_logout_uri, sessionRequired: row.backchannel_logout_session_required === 1 },
    passwordPolicy: {
      minLength: row.password_min_length,
      characterClasses: row.password_character_classes,
      maxAgeDays: row.password_max_age_days,
      historyCount: row.password_history_count,
    },
    mail: { replyTo: row.mail_reply_to, overrides: JSON.parse(row.mail_overrides) as MailOverrides },
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    oauth: { dpopBoundAccessTokens: row.dpop_bound_access_tokens === 1, requirePushedAuthorizationRequests: row.require_pushed_authorization_requests === 1, deviceAuthorizationGrant: row.device_authorization_grant === 1 },
    resourceUris: JSON.parse(row.resource_uris) as string[],
    clientCredentials: { enabled: row.client_credentials === 1, scopes: row.client_credentials_scopes.split(' ').filter(Boolean), notBefore: row.client_credentials_not_before },
  };
}

function toRow(app: App): AppRow {
  return {
    id: app.id,
    developer_id: app.developerId,
    name: app.name,
    type: app.type,
    client_secret_hash: app.clientSecretHash,
    redirect_uris: JSON.stringify(app.redirectUris),
    allowed_origins: JSON.stringify(app.allowedOrigins),
    feature_auth: app.features.auth ? 1 : 0,
    feature_profile: app.features.profile ? 1 : 0,
    required_fields: JSON.stringify(app.requiredFields),
    mfa: app.mfa,
    logo_url: app.branding.logoUrl,
    logo_url_dark: app.branding.logoUrlDark,
    accent_color: app.branding.accentColor,
    default_locale: app.defaultLocale,
    backchannel_logout_uri: app.backchannelLogout.uri,
    backchannel_logout_session_required: app.backchannelLogout.sessionRequired ? 1 : 0,
    password_min_length: app.passwordPolicy.minLength,
    password_character_classes: app.passwordPolicy.characterClasses,
    password_max_age_days: app.passwordPolicy.maxAgeDays,
    password_history_count: app.passwordPolicy.historyCount,
    mail_reply_to: app.mail.replyTo,
    mail_overrides: JSON.stringify(app.mail.overrides),
    disabled: app.disabled ? 1 : 0,
    created_at: app.createdAt,
    updated_at: app.updatedAt,
    dpop_bound_access_tokens: app.oauth.dpopBoundAccessTokens ? 1 : 0,
    require_pushed_authorization_requests: app.oauth.requirePushedAuthorizationRequests ? 1 : 0,
    device_authorization_grant: app.oauth.deviceAuthorizationGrant ? 1 : 0,
    resource_uris: JSON.stringify(app.resourceUris),
    client_credentials: app.clientCredentials.enabled ? 1 : 0,
    client_credentials_scopes: app.clientCredentials.scopes.join(' '),
    client_credentials_not_before: app.clientCredentials.notBefore,
  };
}

const selectApp = precompiled((db, id: string) => db.selectFrom('apps').select(COLUMNS.apps).where('id', '=', id));

export async function findApp(db: Kysely<Database>, id: string): Promise<App | undefined> {
  const row = (await selectApp(db, id)).rows[0];
  return row ? toApp(row) : undefined;
}

export async function listAppsOfDeveloper(db: Kysely<Database>, developerId: string): Promise<App[]> {
  const rows = await db.selectFrom('apps').select(COLUMNS.apps).where('developer_id', '=', developerId).orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
  return rows.map(toApp);
}

export async function listAllApps(db: Kysely<Database>): Promise<App[]> {
  return (await db.selectFrom('apps').select(COLUMNS.apps).execute()).map(toApp);
}

/** What decides every app's CORS origins (shared/cors.ts), and nothing more. */
export async function listAppOrigins(db: Kysely<Database>): Promise<Array<Pick<App, 'redirectUris' | 'allowedOrigins' | 'disabled'>>> {
  const rows = await db.selectFrom('apps').select(['redirect_uris', 'allowed_origins', 'disabled']).execute();
  return rows.map((row) => ({ redirectUris: JSON.parse(row.redirect_uris) as string[], allowedOrigins: JSON.parse(row.allowed_origins) as string[], disabled: row.disabled === 1 }));
}

/** Every app's redirect URIs: what an open client registration may not claim (docs/reference/oauth.md#dynamic-client-registration-rfc-7591). */
export async function listAppRedirectUris(db: Kysely<Database>): Promise<Array<Pick<App, 'id' | 'redirectUris'>>> {
  const rows = await db.selectFrom('apps').select(['id', 'redirect_uris']).execute();
  return rows.map((row) => ({ id: row.id, redirectUris: JSON.parse(row.redirect_uris) as string[] }));
}

/**
 * A stamp of the apps' contents that every write below replaces, in the writer's transaction: a cache
 * of something derived from all apps (plugins/cors.ts) compares it, one row, instead of reading them.
 */
const APPS_VERSION_KEY = 'apps_version';

export async function appsVersion(db: Kysely<Database>): Promise<string | undefined> {
  return getSetting<string>(db, APPS_VERSION_KEY);
}

const stampAppsChange = (db: Kysely<Database>, at: number) => putSetting(db, APPS_VERSION_KEY, newId('apv'), at);

export async function insertApp(db: Kysely<Database>, app: App): Promise<void> {
  await db.insertInto('apps').values(toRow(app)).execute();
  await stampAppsChange(db, app.updatedAt);
}

export async function saveApp(db: Kysely<Database>, app: App): Promise<void> {
  const { id, ...rest } = toRow(app);
  await db.updateTable('apps').set(rest).where('id', '=', id).execute();
  await stampAppsChange(db, app.updatedAt);
}

/**
 * Revokes the app's client-credentials tokens issued at or before `at` (RFC 7009 at /oauth/revoke): one
 * column, no app-wide stamp (nothing derived from all apps reads it).
 */
export async function revokeClientCredentialTokens(db: Kysely<Database>, id: string, at: number): Promise<void> {
  await db.updateTable('apps').set({ client_credentials_not_before: at }).where('id', '=', id).execute();
}

export async function deleteApp(db: Kysely<Database>, id: string, at: number): Promise<void> {
  await db.deleteFrom('apps').where('id', '=', id).execute();
  await stampAppsChange(db, at);
}

export async function countAppsOfDeveloper(db: Kysely<Database>, developerId: string): Promise<number> {
  const row = await db.selectFrom('apps').select((eb) => eb.fn.countAll<number>().as('n')).where('developer_id', '=', developerId).executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function countApps(db: Kysely<Database>): Promise<number> {
  const row = await db.selectFrom('apps').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  return Number(row.n);
}
