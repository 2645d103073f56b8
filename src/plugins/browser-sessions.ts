import cookie from '@fastify/cookie';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import { createHmac, hkdfSync } from 'node:crypto';
import { deflateRawSync, inflateRawSync } from 'node:zlib';
import type { ResolvedConfig } from '../config.js';
import { AppError } from '../errors.js';
import { type Amr, parseAmr, serializeAmr } from '../shared/acr.js';
import { SecretBox } from '../shared/crypto.js';
import { hashSecret, newId, newSecret } from '../shared/ids.js';
import { type Device, ipArea, storedUserAgent } from '../shared/ip-area.js';
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
 * Hosted-page browser sessions (docs/guides/hosted-pages.md#pages-sessions-and-headers): an opaque cookie (`__Host-gh_sid` on https, `gh_sid`
 * on plain http; HttpOnly, SameSite=Lax, Path=/), a server-side row keyed by the cookie's SHA-256,
 * a CSRF token per session, a new id at every sign-in, idle and absolute timeouts.
 *
 * An anonymous visitor costs no storage at all: its session is the cookie alone (the CSRF token is an
 * HMAC of the cookie value), and what it must remember before someone signs in (the authorization
 * request in flight, a first factor waiting for its second) travels in a sealed cookie (`…_flow`:
 * AES-256-GCM under SECRET_KEY, bound to the session id, expiring with it). The row is written at
 * sign-in, taking that state along, or when state must be revocable on the server (`serverSide`: the
 * console's operator proof). So no number of anonymous requests makes the database grow.
 */

/** The most page state a session keeps (the authorization request in flight and its pending step). */
export const MAX_DATA_BYTES = 16 * 1024;

/**
 * The sealed state of an anonymous session spans at most FLOW_COOKIES cookies of FLOW_CHUNK characters:
 * room for the largest authorization request the authorize limits allow (state 4096, nonce 512, a
 * 2000-character redirect URI), and under the 8 KiB request line common proxies accept.
 */
const FLOW_CHUNK = 3800;
const FLOW_COOKIES = 2;

/** Options of BrowserSessions.writeData. */
export interface WriteOptions {
  /** Keep the state in a row even for an anonymous session, so that it can be revoked on the server. */
  serverSide?: boolean;
}

const COOKIE_VALUE = /^bs_[A-Za-z0-9_-]{20,80}$/;

/** How long a page shown once after a redirect (a new secret) waits for its GET. */
const SHOW_ONCE_SECONDS = 300;

export class BrowserSessions {
  readonly cookieName: string;
  private readonly flowCookieNames: string[];
  private readonly secure: boolean;
  private readonly csrfKey: Buffer;
  private readonly flowBox: SecretBox;
  private readonly onceCookieName: string;
  private readonly onceBox: SecretBox;
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
    this.flowCookieNames = Array.from({ length: FLOW_COOKIES }, (_, i) => `${this.cookieName}_flow${i === 0 ? '' : i + 1}`);
    this.csrfKey = Buffer.from(hkdfSync('sha256', config.secretKey, 'gatehouse', 'gatehouse:csrf', 32));
    this.flowBox = new SecretBox(config.secretKey, `browser-flow:${cookieBase}`);
    this.onceCookieName = `${this.cookieName}_once`;
    this.onceBox = new SecretBox(config.secretKey, `browser-once:${cookieBase}`);
  }

  /**
   * What the page after a POST's redirect shows once (a secret just made, its notice): sealed into a
   * cookie bound to this session that lives 5 minutes, so a reload neither repeats the POST nor shows
   * the secret again, and the secret is never stored in plain text on the server.
   */
  showOnce(request: FastifyRequest, reply: FastifyReply, data: object): void {
    const session = request.browserSession;
    if (!session) throw new Error('showOnce needs a session');
    const payload = JSON.stringify({ sid: session.id_hash, exp: this.clock.now() + SHOW_ONCE_SECONDS, data });
    reply.setCookie(this.onceCookieName, this.onceBox.seal(Buffer.from(payload)), this.cookieOptions(SHOW_ONCE_SECONDS));
  }

  /** What showOnce left for this session, taken (the cookie is cleared); {} when none, expired, damaged or another session's. */
  takeShownOnce<T extends object>(request: FastifyRequest, reply: FastifyReply): Partial<T> {
    const sealed = request.cookies[this.onceCookieName];
    if (sealed === undefined) return {};
    reply.clearCookie(this.onceCookieName, this.cookieOptions());
    const session = request.browserSession;
    try {
      const once = JSON.parse(this.onceBox.openBytes(sealed).toString('utf8')) as { sid?: unknown; exp?: unknown; data?: unknown };
      if (!session || once.sid !== session.id_hash || typeof once.exp !== 'number' || once.exp <= this.clock.now()) return {};
      return typeof once.data === 'object' && once.data !== null ? (once.data as Partial<T>) : {};
    } catch {
      return {};
    }
  }

  /** The request's live session, if its cookie names one (idle timeout applied; refreshed as used). */
  async load(request: FastifyRequest): Promise<BrowserSessionRow | null> {
    const value = request.cookies[this.cookieName];
    if (!value || !COOKIE_VALUE.test(value)) return null;
    const now = this.clock.now();
    const idHash = hashSecret(value);
    const row = await findBrowserSession(this.db, idHash);
    // No row: an anonymous session, with what its sealed cookie remembers.
    if (!row) return this.anonymous(value, now, this.sealedFlow(request, idHash, now));
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
    return (request.browserSession = this.anonymous(value, this.clock.now(), '{}'));
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
    this.clearFlow(request, reply);
    const device = { userAgent: storedUserAgent(request.headers['user-agent']), ipArea: ipArea(request.ip) };
    // The public `sid` of ID and logout tokens stays with the person across re-authentication in this browser.
    const sid = previous?.user_id === userId && previous.sid ? previous.sid : newId('sid');
    return (request.browserSession = await this.create(reply, userId, { time: this.clock.now(), amr }, previous?.data ?? '{}', device, sid));
  }

  async signOut(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const session = request.browserSession;
    if (session && !this.unsaved.has(session)) await revokeBrowserSession(this.db, session.id_hash, this.clock.now());
    request.browserSession = null;
    this.clearFlow(request, reply);
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

  /**
   * Stores the session's page state: in its row, or for an anonymous session in the sealed cookie
   * (a row only with `serverSide`). Too large → 400 `invalid_request`, nothing stored.
   */
  async writeData(request: FastifyRequest, reply: FastifyReply, data: object, options: WriteOptions = {}): Promise<void> {
    const session = request.browserSession;
    if (!session) throw new Error('writeData needs a session (call ensure first)');
    const json = JSON.stringify(data);
    if (Buffer.byteLength(json) > MAX_DATA_BYTES) throw tooLarge(`session data of ${Buffer.byteLength(json)} bytes`);
    if (!this.unsaved.has(session)) {
      session.data = json;
      await setBrowserSessionData(this.db, session.id_hash, json);
    } else if (options.serverSide) {
      session.data = json;
      await insertBrowserSession(this.db, session);
      this.unsaved.delete(session);
      this.clearFlow(request, reply);
    } else {
      this.setFlow(request, reply, session, json);
      session.data = json;
    }
  }

  /** The in-memory session of a cookie that has no row yet, with the state its sealed cookie carries. */
  private anonymous(value: string, now: number, data: string): BrowserSessionRow {
    const row = this.newRow(value, null, null, data, now);
    this.unsaved.add(row);
    return row;
  }

  /** The state an anonymous session's sealed cookie carries: '{}' when none, or when it is not this session's, expired or damaged. */
  private sealedFlow(request: FastifyRequest, idHash: string, now: number): string {
    const sealed = this.flowCookieNames.map((name) => request.cookies[name] ?? '').join('');
    if (!sealed) return '{}';
    try {
      const flow = JSON.parse(inflateRawSync(this.flowBox.openBytes(sealed)).toString('utf8')) as { sid?: unknown; exp?: unknown; data?: unknown };
      if (flow.sid !== idHash || typeof flow.exp !== 'number' || flow.exp <= now || typeof flow.data !== 'string') return '{}';
      return flow.data;
    } catch {
      return '{}';
    }
  }

  /** Seals an anonymous session's state into its cookies (bound to the session, expiring with it); `{}` clears them. */
  private setFlow(request: FastifyRequest, reply: FastifyReply, session: BrowserSessionRow, json: string): void {
    if (json === '{}') return this.clearFlow(request, reply);
    const payload = JSON.stringify({ sid: session.id_hash, exp: session.expires_at, data: json });
    const sealed = this.flowBox.seal(deflateRawSync(payload));
    if (sealed.length > FLOW_CHUNK * FLOW_COOKIES) throw tooLarge(`sealed session state of ${sealed.length} characters`);
    this.flowCookieNames.forEach((name, i) => {
      const chunk = sealed.slice(i * FLOW_CHUNK, (i + 1) * FLOW_CHUNK);
      if (chunk) reply.setCookie(name, chunk, this.cookieOptions(Math.max(1, session.expires_at - this.clock.now())));
      else if (request.cookies[name] !== undefined) reply.clearCookie(name, this.cookieOptions());
    });
  }

  private clearFlow(request: FastifyRequest, reply: FastifyReply): void {
    for (const name of this.flowCookieNames) if (request.cookies[name] !== undefined) reply.clearCookie(name, this.cookieOptions());
  }

  private cookieOptions(maxAge?: number) {
    return { path: '/', httpOnly: true, secure: this.secure, sameSite: 'lax' as const, ...(maxAge === undefined ? {} : { maxAge }) };
  }

  private newRow(value: string, userId: string | null, auth: { time: number; amr: readonly Amr[] } | null, data: string, now: number, device?: Device, sid: string | null = null): BrowserSessionRow {
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
      // Where it was signed in from, for the sessions list (docs/account/sessions.md): never the full address.
      user_agent: device?.userAgent ?? null,
      ip_area: device?.ipArea ?? null,
      sid,
    };
  }

  private setCookie(reply: FastifyReply, value: string): void {
    reply.setCookie(this.cookieName, value, this.cookieOptions(this.config.ttl.browserSession));
  }

  /** A signed-in session: always a row (the account page lists them, sign-outs revoke them). */
  private async create(reply: FastifyReply, userId: string, auth: { time: number; amr: readonly Amr[] }, data: string, device: Device, sid: string): Promise<BrowserSessionRow> {
    const value = newSecret('bs');
    const row = this.newRow(value, userId, auth, data, this.clock.now(), device, sid);
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

const tooLarge = (detail: string) => new AppError('invalid_request', { message: 'This request is too large to continue.', detail });
