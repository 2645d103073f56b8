import cookie from '@fastify/cookie';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import { createHmac, hkdfSync } from 'node:crypto';
import type { ResolvedConfig } from '../config.js';
import { AppError } from '../errors.js';
import { type Amr, parseAmr, serializeAmr } from '../shared/acr.js';
import { hashSecret, newSecret } from '../shared/ids.js';
import type { Clock } from '../shared/time.js';
import {
  type BrowserSessionRow,
  findBrowserSession,
  insertBrowserSession,
  revokeBrowserSession,
  setBrowserSessionData,
  touchBrowserSession,
} from '../storage/repos/browser-sessions.js';
import type { Database } from '../storage/schema.js';

/**
 * Hosted-page browser sessions (CONTRACT §12): an opaque cookie (`__Host-gh_sid` on https, `gh_sid`
 * on plain http; HttpOnly, SameSite=Lax, Path=/), a server-side row keyed by the cookie's SHA-256,
 * a CSRF token per session, a new id at every sign-in, idle and absolute timeouts.
 *
 * An anonymous visitor costs no row until there is something to remember: its session is the cookie
 * alone (the CSRF token is an HMAC of the cookie value), and the row is written with the first page
 * state or at sign-in. Page state is capped (MAX_DATA_BYTES).
 */

/** The most page state a session keeps (the authorization request in flight and its pending step). */
export const MAX_DATA_BYTES = 16 * 1024;

const COOKIE_VALUE = /^bs_[A-Za-z0-9_-]{20,80}$/;

export class BrowserSessions {
  readonly cookieName: string;
  private readonly secure: boolean;
  private readonly csrfKey: Buffer;
  /** Sessions that exist only as a cookie so far (no row yet). */
  private readonly unsaved = new WeakSet<BrowserSessionRow>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly config: ResolvedConfig,
    /** The cookie's name on plain http (`__Host-` is prefixed on https): the console keeps its own sessions. */
    cookieBase = 'gh_sid',
  ) {
    this.secure = config.authUrl.startsWith('https://');
    this.cookieName = this.secure ? `__Host-${cookieBase}` : cookieBase;
    this.csrfKey = Buffer.from(hkdfSync('sha256', config.secretKey, 'gatehouse', 'gatehouse:csrf', 32));
  }

  /** The request's live session, if its cookie names one (idle timeout applied; refreshed as used). */
  async load(request: FastifyRequest): Promise<BrowserSessionRow | null> {
    const value = request.cookies[this.cookieName];
    if (!value || !COOKIE_VALUE.test(value)) return null;
    const now = this.clock.now();
    const idHash = hashSecret(value);
    const row = await findBrowserSession(this.db, idHash);
    // No row: an anonymous session that has remembered nothing yet.
    if (!row) return this.anonymous(value, now);
    if (row.revoked_at !== null || row.expires_at <= now) return null;
    const ttl = this.config.ttl;
    if (row.last_seen_at + ttl.browserSessionIdle <= now) {
      await revokeBrowserSession(this.db, idHash, now);
      return null;
    }
    if (now - row.last_seen_at >= 60) {
      await touchBrowserSession(this.db, idHash, now, Math.min(row.created_at + ttl.browserSession, now + ttl.browserSessionIdle));
    }
    return row;
  }

  /** The session for a form page: the current one, or a new anonymous one (it carries the CSRF token). */
  async ensure(request: FastifyRequest, reply: FastifyReply): Promise<BrowserSessionRow> {
    if (request.browserSession) return request.browserSession;
    const value = newSecret('bs');
    this.setCookie(reply, value);
    return (request.browserSession = this.anonymous(value, this.clock.now()));
  }

  /**
   * Signs a user in: the old session id is revoked and a new one issued (session fixation defence).
   * Page state moves to the new session even when the old one had a user: it holds the authorization
   * request that sent a signed-in user to authenticate again (prompt=login, max_age). A pending step
   * in it names its user and is refused to anyone else (pages/consent.ts).
   */
  async signIn(request: FastifyRequest, reply: FastifyReply, userId: string, amr: readonly Amr[]): Promise<BrowserSessionRow> {
    const previous = request.browserSession;
    if (previous && !this.unsaved.has(previous)) await revokeBrowserSession(this.db, previous.id_hash, this.clock.now());
    return (request.browserSession = await this.create(reply, userId, { time: this.clock.now(), amr }, previous?.data ?? '{}'));
  }

  async signOut(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const session = request.browserSession;
    if (session && !this.unsaved.has(session)) await revokeBrowserSession(this.db, session.id_hash, this.clock.now());
    request.browserSession = null;
    reply.clearCookie(this.cookieName, { path: '/', secure: this.secure, httpOnly: true, sameSite: 'lax' });
  }

  /** Page state carried between hosted pages (e.g. the authorize request to resume after sign-in). */
  readData<T extends object>(request: FastifyRequest): Partial<T> {
    return this.dataOf<T>(request.browserSession);
  }

  /** The page state of a session loaded outside the pages scope (e.g. a page script's JSON request). */
  dataOf<T extends object>(session: BrowserSessionRow | null | undefined): Partial<T> {
    try {
      return JSON.parse(session?.data ?? '{}') as Partial<T>;
    } catch {
      return {};
    }
  }

  async writeData(request: FastifyRequest, data: object): Promise<void> {
    const session = request.browserSession;
    if (!session) throw new Error('writeData needs a session (call ensure first)');
    const json = JSON.stringify(data);
    if (Buffer.byteLength(json) > MAX_DATA_BYTES) {
      throw new AppError('invalid_request', { message: 'This request is too large to continue.', detail: `session data of ${Buffer.byteLength(json)} bytes` });
    }
    session.data = json;
    if (this.unsaved.has(session)) {
      await insertBrowserSession(this.db, session);
      this.unsaved.delete(session);
    } else {
      await setBrowserSessionData(this.db, session.id_hash, session.data);
    }
  }

  /** The in-memory session of a cookie that has no row yet. */
  private anonymous(value: string, now: number): BrowserSessionRow {
    const row = this.newRow(value, null, null, '{}', now);
    this.unsaved.add(row);
    return row;
  }

  private newRow(value: string, userId: string | null, auth: { time: number; amr: readonly Amr[] } | null, data: string, now: number): BrowserSessionRow {
    return {
      id_hash: hashSecret(value),
      user_id: userId,
      // Derived, so a session without a row still has a stable token.
      csrf_token: createHmac('sha256', this.csrfKey).update(value).digest('base64url'),
      auth_time: auth?.time ?? null,
      amr: auth ? serializeAmr(auth.amr) : null,
      data,
      created_at: now,
      last_seen_at: now,
      expires_at: now + Math.min(this.config.ttl.browserSession, this.config.ttl.browserSessionIdle),
      revoked_at: null,
    };
  }

  private setCookie(reply: FastifyReply, value: string): void {
    reply.setCookie(this.cookieName, value, { path: '/', httpOnly: true, secure: this.secure, sameSite: 'lax', maxAge: this.config.ttl.browserSession });
  }

  /** A signed-in session: always a row (the account page lists them, sign-outs revoke them). */
  private async create(reply: FastifyReply, userId: string, auth: { time: number; amr: readonly Amr[] }, data: string): Promise<BrowserSessionRow> {
    const value = newSecret('bs');
    const row = this.newRow(value, userId, auth, data, this.clock.now());
    await insertBrowserSession(this.db, row);
    this.setCookie(reply, value);
    return row;
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The live browser session (null when none); loaded for hosted pages and /oauth/authorize. */
    browserSession: BrowserSessionRow | null;
  }
  interface FastifyInstance {
    browserSessions: BrowserSessions;
  }
}

/** App-wide: cookies and the browser-session store (hosted pages, /oauth/authorize and the provider callback use them). */
export default fp(
  async (app: FastifyInstance) => {
    await app.register(cookie);
    app.decorate('browserSessions', new BrowserSessions(app.db, app.clock, app.config));
    app.decorateRequest('browserSession', null);
  },
  { name: 'browser-sessions', dependencies: ['db'] },
);

/** How a signed-in browser session authenticated, for the rules that ask how strong and how recent it is. */
export function sessionAuthentication(session: Pick<BrowserSessionRow, 'amr' | 'auth_time' | 'created_at'>): { amr: Amr[]; authTime: number } {
  return { amr: parseAmr(session.amr), authTime: session.auth_time ?? session.created_at };
}
