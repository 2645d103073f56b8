import type { Kysely } from 'kysely';
import { parseAmr } from '../shared/acr.js';
import { isoTime } from '../shared/time.js';
import {
  listExportApps,
  listExportBrowserSessions,
  listExportEvents,
  listExportGrants,
  listExportIdentities,
  listExportLegalAcceptances,
  listExportPasskeys,
  listExportProfiles,
  readExportAccount,
  readExportFactors,
} from '../storage/repos/account-export.js';
import { PLATFORM_OWNER } from '../storage/repos/legal.js';
import type { Database } from '../storage/schema.js';
import { type AccountExportDocument, EXPORT_FORMAT } from './schemas.js';

/**
 * Who asked for an export (docs/account/data-export.md):
 * - `full`: the person on Gatehouse's own account page (browser session): everything of the account.
 * - `app`: an app, with the person's access token from it: the account itself, and of everything kept
 *   per app only what belongs to that app. An app must not use a person's token to read what the person
 *   stored at, allowed to, or did at another app (profile documents, consents, sign-ins, events), nor the
 *   sessions of the hosted pages, nor the binding to the external provider (an identity apps never see).
 *   The account's own fields are those apps see of a user at every sign-in (`PublicUser`) and its status.
 */
export type ExportAudience = { coverage: 'full' } | { coverage: 'app'; appId: string };

const time = (seconds: number): string => isoTime(seconds);
const maybeTime = (seconds: number | null): string | null => (seconds === null ? null : isoTime(seconds));
const scopesOf = (scope: string): string[] => scope.split(' ').filter(Boolean);

function jsonObject(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** The file name a download of an export made at `now` gets: `gatehouse-export-YYYY-MM-DD.json` (UTC). */
export const exportFileName = (now: number): string => `gatehouse-export-${isoTime(now).slice(0, 10)}.json`;

/**
 * The export of one account, or undefined when there is no such account. Every read names its columns
 * and none selects a secret (src/storage/repos/account-export.ts).
 */
export async function buildAccountExport(db: Kysely<Database>, userId: string, audience: ExportAudience, now: number): Promise<AccountExportDocument | undefined> {
  const account = await readExportAccount(db, userId);
  if (!account) return undefined;
  const appId = audience.coverage === 'app' ? audience.appId : undefined;
  const [identities, apps, factors, passkeys, grants, browser, profiles, legal, events] = await Promise.all([
    audience.coverage === 'full' ? listExportIdentities(db, userId) : Promise.resolve([]),
    listExportApps(db, userId, appId),
    readExportFactors(db, userId),
    listExportPasskeys(db, userId, appId),
    listExportGrants(db, userId, appId),
    audience.coverage === 'full' ? listExportBrowserSessions(db, userId) : Promise.resolve([]),
    listExportProfiles(db, userId, appId),
    listExportLegalAcceptances(db, userId, PLATFORM_OWNER, appId),
    listExportEvents(db, userId, appId),
  ]);
  const codes = factors.recoveryCodes;
  const newestCodes = codes.reduce<number | null>((newest, c) => (newest === null || c.createdAt > newest ? c.createdAt : newest), null);
  return {
    format: EXPORT_FORMAT,
    exported_at: time(now),
    coverage: audience.coverage,
    app_id: appId ?? null,
    account: {
      id: account.id,
      email: account.email,
      email_verified: account.emailVerified,
      name: account.name,
      phone_number: account.phoneNumber,
      birthdate: account.birthdate,
      status: account.status,
      has_password: account.hasPassword,
      password_changed_at: maybeTime(account.passwordChangedAt),
      created_at: time(account.createdAt),
      updated_at: time(account.updatedAt),
      provider_identities: identities.map((i) => ({ issuer: i.issuer, subject: i.subject, email: i.email, bound_at: time(i.createdAt) })),
    },
    apps: apps.map((a) => ({
      app_id: a.appId,
      name: a.appName,
      membership: a.joinedAt === null ? null : { status: a.status ?? 'active', joined_at: time(a.joinedAt), last_sign_in_at: maybeTime(a.lastLoginAt) },
      consent:
        a.consentScope === null || a.consentedAt === null
          ? null
          : { scopes: scopesOf(a.consentScope), granted_at: time(a.consentedAt), updated_at: time(a.consentUpdatedAt ?? a.consentedAt) },
    })),
    factors: {
      authenticator_app: factors.totp && { created_at: time(factors.totp.createdAt), confirmed_at: maybeTime(factors.totp.confirmedAt) },
      recovery_codes: { total: codes.length, unused: codes.filter((c) => c.usedAt === null).length, generated_at: maybeTime(newestCodes) },
    },
    passkeys: passkeys.map((p) => ({
      id: p.id,
      name: p.name,
      app_id: p.appId,
      synced: p.deviceType === 'multiDevice',
      backed_up: p.backedUp,
      created_at: time(p.createdAt),
      last_used_at: maybeTime(p.lastUsedAt),
    })),
    sessions: {
      apps: grants.map((g) => ({
        id: g.id,
        app_id: g.appId,
        scopes: scopesOf(g.scope),
        amr: parseAmr(g.amr),
        auth_time: time(g.authTime),
        created_at: time(g.createdAt),
        expires_at: time(g.expiresAt),
        revoked_at: maybeTime(g.revokedAt),
        revoked_reason: g.revokedReason,
        user_agent: g.userAgent,
        ip_area: g.ipArea,
      })),
      browser: browser.map((s) => ({
        amr: parseAmr(s.amr),
        auth_time: maybeTime(s.authTime),
        created_at: time(s.createdAt),
        last_seen_at: time(s.lastSeenAt),
        expires_at: time(s.expiresAt),
        revoked_at: maybeTime(s.revokedAt),
        user_agent: s.userAgent,
        ip_area: s.ipArea,
      })),
    },
    profiles: profiles.map((p) => ({ app_id: p.appId, version: p.version, data: jsonObject(p.data), created_at: time(p.createdAt), updated_at: time(p.updatedAt) })),
    legal_acceptances: legal.map((l) => ({ owner: l.owner, doc_type: l.docType, lang: l.lang, version: l.version, accepted_at: time(l.acceptedAt) })),
    events: {
      truncated: events.truncated,
      items: events.items.map((e) => ({ id: e.id, type: e.type, app_id: e.appId, at: time(e.at), ip: e.ip, user_agent: e.userAgent, data: jsonObject(e.data) })),
    },
  };
}
