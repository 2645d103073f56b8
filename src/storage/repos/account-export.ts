import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';

/**
 * The reads of a person's data export (docs/account/data-export.md). Each names its columns
 * (docs/operations/migrations.md), and none names a secret: no password hash, TOTP secret, recovery-code
 * hash, passkey key material, token or code hash, CSRF token or session id hash is ever selected, so
 * none can reach the export by a later change to the code that shapes it.
 *
 * `appId`: only what belongs to that app (an app's token asked); undefined: everything of the person.
 */

/** The columns an export reads, table by table: the personal ones, never a hash, secret or key. */
export const EXPORT_COLUMNS = {
  users: ['id', 'email', 'email_verified', 'name', 'phone_number', 'birthdate', 'status', 'password_changed_at', 'created_at', 'updated_at'],
  provider_identities: ['issuer', 'subject', 'email', 'created_at'],
  totp_factors: ['confirmed_at', 'created_at'],
  recovery_codes: ['created_at', 'used_at'],
  passkeys: ['id', 'name', 'app_id', 'device_type', 'backed_up', 'created_at', 'last_used_at'],
  grants: ['id', 'app_id', 'scope', 'auth_time', 'amr', 'created_at', 'expires_at', 'revoked_at', 'revoked_reason', 'user_agent', 'ip_area'],
  browser_sessions: ['auth_time', 'amr', 'created_at', 'last_seen_at', 'expires_at', 'revoked_at', 'user_agent', 'ip_area'],
  profiles: ['app_id', 'data', 'version', 'created_at', 'updated_at'],
  legal_acceptances: ['owner', 'doc_type', 'lang', 'version', 'accepted_at'],
  events: ['id', 'type', 'app_id', 'ip', 'user_agent', 'at', 'data'],
} as const satisfies { [T in keyof Database]?: ReadonlyArray<keyof Database[T] & string> };

/** The most events one export carries (the newest); older ones are purged after EVENT_RETENTION_DAYS anyway. */
export const EXPORT_EVENT_LIMIT = 10_000;

const num = (value: number | string | bigint): number => Number(value);
const numOrNull = (value: number | string | bigint | null): number | null => (value === null ? null : Number(value));

export interface ExportAccountRow {
  id: string;
  email: string;
  emailVerified: boolean;
  name: string | null;
  phoneNumber: string | null;
  birthdate: string | null;
  status: string;
  hasPassword: boolean;
  passwordChangedAt: number | null;
  createdAt: number;
  updatedAt: number;
}

export async function readExportAccount(db: Kysely<Database>, userId: string): Promise<ExportAccountRow | undefined> {
  const row = await db
    .selectFrom('users')
    .select(EXPORT_COLUMNS.users)
    // Whether a password is set, never the hash itself.
    .select((eb) => eb.case().when('password_hash', 'is not', null).then(1).else(0).end().as('has_password'))
    .where('id', '=', userId)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    id: row.id,
    email: row.email,
    emailVerified: Number(row.email_verified) === 1,
    name: row.name,
    phoneNumber: row.phone_number,
    birthdate: row.birthdate,
    status: row.status,
    hasPassword: Number(row.has_password) === 1,
    passwordChangedAt: numOrNull(row.password_changed_at),
    createdAt: num(row.created_at),
    updatedAt: num(row.updated_at),
  };
}

export async function listExportIdentities(db: Kysely<Database>, userId: string) {
  const rows = await db.selectFrom('provider_identities').select(EXPORT_COLUMNS.provider_identities).where('user_id', '=', userId).orderBy('created_at').execute();
  return rows.map((r) => ({ issuer: r.issuer, subject: r.subject, email: r.email, createdAt: num(r.created_at) }));
}

export interface ExportAppRow {
  appId: string;
  appName: string | null;
  status: string | null;
  joinedAt: number | null;
  lastLoginAt: number | null;
  consentScope: string | null;
  consentedAt: number | null;
  consentUpdatedAt: number | null;
}

/** The apps the person uses or consented to: membership (status, dates) and the consented scopes. */
export async function listExportApps(db: Kysely<Database>, userId: string, appId?: string): Promise<ExportAppRow[]> {
  let members = db
    .selectFrom('app_users as au')
    .leftJoin('apps as a', 'a.id', 'au.app_id')
    .select(['au.app_id', 'a.name', 'au.status', 'au.created_at', 'au.last_login_at'])
    .where('au.user_id', '=', userId);
  let consents = db
    .selectFrom('consents as c')
    .leftJoin('apps as a', 'a.id', 'c.app_id')
    .select(['c.app_id', 'a.name', 'c.scope', 'c.created_at', 'c.updated_at'])
    .where('c.user_id', '=', userId);
  if (appId !== undefined) {
    members = members.where('au.app_id', '=', appId);
    consents = consents.where('c.app_id', '=', appId);
  }
  const [memberRows, consentRows] = await Promise.all([members.execute(), consents.execute()]);
  const apps = new Map<string, ExportAppRow>();
  const entry = (id: string, name: string | null): ExportAppRow => {
    let found = apps.get(id);
    if (!found) {
      found = { appId: id, appName: name, status: null, joinedAt: null, lastLoginAt: null, consentScope: null, consentedAt: null, consentUpdatedAt: null };
      apps.set(id, found);
    }
    return found;
  };
  for (const r of memberRows) Object.assign(entry(r.app_id, r.name), { status: r.status, joinedAt: num(r.created_at), lastLoginAt: numOrNull(r.last_login_at) });
  for (const r of consentRows) Object.assign(entry(r.app_id, r.name), { consentScope: r.scope, consentedAt: num(r.created_at), consentUpdatedAt: num(r.updated_at) });
  return [...apps.values()].sort((a, b) => a.appId.localeCompare(b.appId));
}

/** The authenticator app (dates only) and the recovery codes (how many, used or not; never a code or hash). */
export async function readExportFactors(db: Kysely<Database>, userId: string) {
  const [totp, codes] = await Promise.all([
    db.selectFrom('totp_factors').select(EXPORT_COLUMNS.totp_factors).where('user_id', '=', userId).executeTakeFirst(),
    db.selectFrom('recovery_codes').select(EXPORT_COLUMNS.recovery_codes).where('user_id', '=', userId).orderBy('created_at').execute(),
  ]);
  return {
    totp: totp ? { confirmedAt: numOrNull(totp.confirmed_at), createdAt: num(totp.created_at) } : null,
    recoveryCodes: codes.map((c) => ({ createdAt: num(c.created_at), usedAt: numOrNull(c.used_at) })),
  };
}

/** Passkeys: names, kind and dates; never the credential id, public key or counter. With `appId`: account-wide ones and that app's. */
export async function listExportPasskeys(db: Kysely<Database>, userId: string, appId?: string) {
  let q = db.selectFrom('passkeys').select(EXPORT_COLUMNS.passkeys).where('user_id', '=', userId);
  if (appId !== undefined) q = q.where((eb) => eb.or([eb('app_id', 'is', null), eb('app_id', '=', appId)]));
  const rows = await q.orderBy('created_at').orderBy('id').execute();
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    appId: r.app_id,
    deviceType: r.device_type,
    backedUp: Number(r.backed_up) === 1,
    createdAt: num(r.created_at),
    lastUsedAt: numOrNull(r.last_used_at),
  }));
}

/** Sign-ins to apps (grants), revoked ones included; never a token, code or nonce. */
export async function listExportGrants(db: Kysely<Database>, userId: string, appId?: string) {
  let q = db.selectFrom('grants').select(EXPORT_COLUMNS.grants).where('user_id', '=', userId);
  if (appId !== undefined) q = q.where('app_id', '=', appId);
  const rows = await q.orderBy('created_at').orderBy('id').execute();
  return rows.map((r) => ({
    id: r.id,
    appId: r.app_id,
    scope: r.scope,
    authTime: num(r.auth_time),
    amr: r.amr,
    createdAt: num(r.created_at),
    expiresAt: num(r.expires_at),
    revokedAt: numOrNull(r.revoked_at),
    revokedReason: r.revoked_reason,
    userAgent: r.user_agent,
    ipArea: r.ip_area,
  }));
}

/** Browser sessions of the hosted pages, signed-in ones; never the session id (hash), CSRF token or page state. */
export async function listExportBrowserSessions(db: Kysely<Database>, userId: string) {
  const rows = await db.selectFrom('browser_sessions').select(EXPORT_COLUMNS.browser_sessions).where('user_id', '=', userId).orderBy('created_at').execute();
  return rows.map((r) => ({
    authTime: numOrNull(r.auth_time),
    amr: r.amr,
    createdAt: num(r.created_at),
    lastSeenAt: num(r.last_seen_at),
    expiresAt: num(r.expires_at),
    revokedAt: numOrNull(r.revoked_at),
    userAgent: r.user_agent,
    ipArea: r.ip_area,
  }));
}

/** Profile documents: with `appId`, that app's only. */
export async function listExportProfiles(db: Kysely<Database>, userId: string, appId?: string) {
  let q = db.selectFrom('profiles').select(EXPORT_COLUMNS.profiles).where('user_id', '=', userId);
  if (appId !== undefined) q = q.where('app_id', '=', appId);
  const rows = await q.orderBy('app_id').execute();
  return rows.map((r) => ({ appId: r.app_id, data: r.data, version: num(r.version), createdAt: num(r.created_at), updatedAt: num(r.updated_at) }));
}

/** Accepted legal documents: with `appId`, the platform's and that app's. */
export async function listExportLegalAcceptances(db: Kysely<Database>, userId: string, platformOwner: string, appId?: string) {
  let q = db.selectFrom('legal_acceptances').select(EXPORT_COLUMNS.legal_acceptances).where('user_id', '=', userId);
  if (appId !== undefined) q = q.where('owner', 'in', [platformOwner, appId]);
  const rows = await q.orderBy('accepted_at').orderBy('id').execute();
  return rows.map((r) => ({ owner: r.owner, docType: r.doc_type, lang: r.lang, version: num(r.version), acceptedAt: num(r.accepted_at) }));
}

/** The person's own events, the newest EXPORT_EVENT_LIMIT (newest first); with `appId`, those at that app only. */
export async function listExportEvents(db: Kysely<Database>, userId: string, appId?: string) {
  let q = db.selectFrom('events').select(EXPORT_COLUMNS.events).where('user_id', '=', userId);
  if (appId !== undefined) q = q.where('app_id', '=', appId);
  const rows = await q.orderBy('id', 'desc').limit(EXPORT_EVENT_LIMIT + 1).execute();
  return {
    truncated: rows.length > EXPORT_EVENT_LIMIT,
    items: rows.slice(0, EXPORT_EVENT_LIMIT).map((r) => ({ id: r.id, type: r.type, appId: r.app_id, ip: r.ip, userAgent: r.user_agent, at: num(r.at), data: r.data })),
  };
}
