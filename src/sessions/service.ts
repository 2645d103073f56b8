import Bowser from 'bowser';
import type { Kysely } from 'kysely';
import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import { AppError } from '../errors.js';
import type { RequestContext } from '../shared/request-context.js';
import type { Clock } from '../shared/time.js';
import { findBrowserSession, revokeBrowserSession, revokeBrowserSessionsOfUser } from '../storage/repos/browser-sessions.js';
import { appendEvent } from '../storage/repos/events.js';
import { revokeGrant, revokeGrantsOfSession, revokeGrantsOfUser } from '../storage/repos/grants.js';
import { listSignedInBrowsers, listSignedInGrants } from '../storage/repos/signed-in.js';
import type { Database } from '../storage/schema.js';

/**
 * Where a person is signed in, and signing out of it (docs/account/sessions.md): the browser sessions
 * of the hosted pages and the grants of apps (one per sign-in to an app: its refresh-token family and
 * access tokens). Both doors (the account page, `/v1/auth/sessions`) go through here.
 */

export type SessionKind = 'browser' | 'grant';

/** One place the person is signed in, as both doors show it. */
export interface SessionEntry {
  /** Opaque and unguessable (an HMAC under SECRET_KEY of what names the row): never the cookie, its hash or the grant id. */
  id: string;
  kind: SessionKind;
  current: boolean;
  /** The app of a grant; null for a browser session of the hosted pages. */
  app: { id: string; name: string } | null;
  browser: string | null;
  os: string | null;
  /** `desktop`, `mobile`, `tablet`, `tv`, … as bowser tells it; null when unknown. */
  deviceType: string | null;
  /** Coarse: IPv4 /24 or IPv6 /48 (shared/ip-area.ts). */
  ipArea: string | null;
  createdAt: number;
  lastSeenAt: number;
}

/**
 * What a caller may see and sign out of. `account`: the person on the hosted account page, or an app
 * the platform itself runs (its token holds the account-wide view): every browser session and grant.
 * `app`: any other app's token: only that app's own grants, nothing of the browser sessions (an app
 * may act for the person at that app, nothing more: docs/security/credentials.md).
 */
export type SessionView =
  | { reach: 'account'; currentBrowser?: string; currentGrant?: string }
  | { reach: 'app'; appId: string; currentGrant: string };

/** Where a revocation came from, for its event. */
export interface RevokeContext extends RequestContext {
  /** The app whose token asked (null: the account page). */
  viaApp: string | null;
}

interface Row extends SessionEntry {
  /** What names the row in the database (the session's lookup hash, the grant id): never leaves the service. */
  key: string;
}

const PUBLIC_ID_LENGTH = 27; // 160 bits of the HMAC, base64url

export class Sessions {
  private readonly idKey: Buffer;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    secretKey: string,
  ) {
    this.idKey = Buffer.from(hkdfSync('sha256', secretKey, 'gatehouse', 'gatehouse:session-public-id', 32));
  }

  /** The public id of a row: stable for the row, unlinkable to its cookie or grant id without SECRET_KEY. */
  publicId(kind: SessionKind, key: string): string {
    return `ses_${createHmac('sha256', this.idKey).update(`${kind}:${key}`).digest('base64url').slice(0, PUBLIC_ID_LENGTH)}`;
  }

  async list(userId: string, view: SessionView): Promise<SessionEntry[]> {
    return (await this.rows(userId, view)).map(({ key: _key, ...entry }) => entry);
  }

  private async rows(userId: string, view: SessionView): Promise<Row[]> {
    const now = this.clock.now();
    const [browsers, grants] = await Promise.all([
      view.reach === 'account' ? listSignedInBrowsers(this.db, userId, now) : Promise.resolve([]),
      listSignedInGrants(this.db, userId, now, view.reach === 'app' ? view.appId : undefined),
    ]);
    const out: Row[] = [];
    for (const b of browsers) {
      out.push({
        key: b.id_hash,
        id: this.publicId('browser', b.id_hash),
        kind: 'browser',
        current: view.reach === 'account' && view.currentBrowser === b.id_hash,
        app: null,
        ...device(b.user_agent),
        ipArea: b.ip_area,
        createdAt: b.created_at,
        lastSeenAt: b.last_seen_at,
      });
    }
    for (const g of grants) {
      out.push({
        key: g.id,
        id: this.publicId('grant', g.id),
        kind: 'grant',
        current: view.currentGrant === g.id,
        app: { id: g.app_id, name: g.app_name },
        ...device(g.user_agent),
        ipArea: g.ip_area,
        createdAt: g.created_at,
        lastSeenAt: g.last_seen_at,
      });
    }
    return out;
  }

  /**
   * Signs out of one entry the view can see. An id the view cannot see (another person's, another
   * app's, a browser session asked by an app's token, an ended one, a made-up one) is 404 `not_found`,
   * the same answer for each: the id tells nobody whether it exists. `keepBrowser` (the account page's
   * own session, which signs out through its own form) is never a candidate. Returns what was signed out.
   */
  async revoke(userId: string, id: string, view: SessionView, ctx: RevokeContext, options: { keepBrowser?: string } = {}): Promise<SessionEntry> {
    const row = (await this.rows(userId, view)).find((r) => sameId(r.id, id) && !(r.kind === 'browser' && r.key === options.keepBrowser));
    if (!row) throw new AppError('not_found', { message: 'No such session.', detail: 'session id not among the caller\'s view' });
    const now = this.clock.now();
    await this.db.transaction().execute(async (trx) => {
      if (row.kind === 'browser') await this.endBrowser(trx, userId, row.key, now, 'session_revoked');
      else await revokeGrant(trx, row.key, now, 'signed_out');
      await this.recordRevoked(trx, userId, row, ctx, now);
    });
    const { key: _key, ...entry } = row;
    return entry;
  }

  /**
   * "Sign out everywhere else": every browser session but `keepIdHash`, and every grant of every app
   * (their refresh tokens and access tokens die with them; codes not yet redeemed expire). Returns how
   * many were signed out.
   */
  async revokeOthers(userId: string, keepIdHash: string, ctx: RevokeContext): Promise<number> {
    const rows = (await this.rows(userId, { reach: 'account', currentBrowser: keepIdHash })).filter((r) => !(r.kind === 'browser' && r.key === keepIdHash));
    const now = this.clock.now();
    await this.db.transaction().execute(async (trx) => {
      await revokeBrowserSessionsOfUser(trx, userId, now, keepIdHash);
      await revokeGrantsOfUser(trx, userId, now, 'signed_out_everywhere');
      for (const row of rows) await this.recordRevoked(trx, userId, row, ctx, now);
    });
    return rows.length;
  }

  /**
   * Signs out of the hosted pages in one browser (docs/guides/back-channel-logout.md): the session ends,
   * and so do the apps' sign-ins made through it (their grants carry its `sid`), each app listening
   * getting a logout token. Records `user.signed_out` for every such app and for `viaApp`, the app that
   * asked (RP-Initiated Logout); once with no app when there is neither.
   */
  async signOutBrowser(userId: string, idHash: string, ctx: RevokeContext): Promise<void> {
    const now = this.clock.now();
    await this.db.transaction().execute(async (trx) => {
      const ended = await this.endBrowser(trx, userId, idHash, now, 'signed_out');
      const apps = [...new Set([...ended.map((e) => e.app_id), ...(ctx.viaApp ? [ctx.viaApp] : [])])];
      for (const appId of apps.length > 0 ? apps : [null]) {
        await appendEvent(trx, now, { type: 'user.signed_out', appId, userId, ip: ctx.ip, userAgent: ctx.userAgent, data: { via: 'hosted_logout' } });
      }
    });
  }

  /** Ends a browser session and the grants it signed in (with their back-channel logouts). */
  private async endBrowser(trx: Kysely<Database>, userId: string, idHash: string, now: number, reason: string) {
    const session = await findBrowserSession(trx, idHash);
    await revokeBrowserSession(trx, idHash, now);
    if (!session || session.user_id !== userId || !session.sid) return [];
    return revokeGrantsOfSession(trx, userId, session.sid, now, reason);
  }

  private recordRevoked(trx: Kysely<Database>, userId: string, row: Row, ctx: RevokeContext, now: number) {
    return appendEvent(trx, now, {
      type: 'session.revoked',
      appId: row.app?.id ?? ctx.viaApp,
      userId,
      ip: ctx.ip,
      userAgent: ctx.userAgent,
      data: { kind: row.kind, app: row.app?.id ?? null },
    });
  }
}

/** Constant-time comparison of two public ids (they are bearer-like names of a row). */
function sameId(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** Browser, operating system and device type from a user agent (bowser); nulls when unknown. */
export function device(userAgent: string | null): { browser: string | null; os: string | null; deviceType: string | null } {
  if (!userAgent) return { browser: null, os: null, deviceType: null };
  try {
    const parsed = Bowser.parse(userAgent);
    return { browser: parsed.browser.name || null, os: parsed.os.name || null, deviceType: parsed.platform.type || null };
  } catch {
    return { browser: null, os: null, deviceType: null };
  }
}
