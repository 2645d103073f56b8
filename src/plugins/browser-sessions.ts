import cookie from '@fastify/cookie';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import { randomBytes } from 'node:crypto';
import type { ResolvedConfig } from '../config.js';
import { hashSecret, newSecret } from '../shared/ids.js';
import type { Clock } from '../shared/time.js';
import {
  type BrowserSessionRow,
  findLiveBrowserSession,
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
 */
export class BrowserSessions {
  readonly cookieName: string;
  private readonly secure: boolean;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly config: ResolvedConfig,
  ) {
    this.secure = config.authUrl.startsWith('https://');
    this.cookieName = this.secure ? '__Host-gh_sid' : 'gh_sid';
  }

  /** The request's live session, if its cookie names one (idle timeout applied; refreshed as used). */
  async load(request: FastifyRequest): Promise<BrowserSessionRow | null> {
    const value = request.cookies[this.cookieName];
    if (!value || value.length > 100) return null;
    const now = this.clock.now();
    const idHash = hashSecret(value);
    const row = await findLiveBrowserSession(this.db, idHash, now);
    if (!row) return null;
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
    return request.browserSession ?? (request.browserSession = await this.create(reply, null, null, '{}'));
  }

  /** Signs a user in: the old session id is revoked and a new one issued (session fixation defence). */
  async signIn(request: FastifyRequest, reply: FastifyReply, userId: string): Promise<BrowserSessionRow> {
    const previous = request.browserSession;
    if (previous) await revokeBrowserSession(this.db, previous.id_hash, this.clock.now());
    const data = previous && previous.user_id === null ? previous.data : '{}';
    return (request.browserSession = await this.create(reply, userId, this.clock.now(), data));
  }

  async signOut(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (request.browserSession) await revokeBrowserSession(this.db, request.browserSession.id_hash, this.clock.now());
    request.browserSession = null;
    reply.clearCookie(this.cookieName, { path: '/', secure: this.secure, httpOnly: true, sameSite: 'lax' });
  }

  /** Page state carried between hosted pages (e.g. the authorize request to resume after sign-in). */
  readData<T extends object>(request: FastifyRequest): Partial<T> {
    try {
      return JSON.parse(request.browserSession?.data ?? '{}') as Partial<T>;
    } catch {
      return {};
    }
  }

  async writeData(request: FastifyRequest, data: object): Promise<void> {
    const session = request.browserSession;
    if (!session) throw new Error('writeData needs a session (call ensure first)');
    session.data = JSON.stringify(data);
    await setBrowserSessionData(this.db, session.id_hash, session.data);
  }

  private async create(reply: FastifyReply, userId: string | null, authTime: number | null, data: string): Promise<BrowserSessionRow> {
    const now = this.clock.now();
    const value = newSecret('bs');
    const row: BrowserSessionRow = {
      id_hash: hashSecret(value),
      user_id: userId,
      csrf_token: randomBytes(32).toString('base64url'),
      auth_time: authTime,
      data,
      created_at: now,
      last_seen_at: now,
      expires_at: now + Math.min(this.config.ttl.browserSession, this.config.ttl.browserSessionIdle),
      revoked_at: null,
    };
    await insertBrowserSession(this.db, row);
    reply.setCookie(this.cookieName, value, {
      path: '/',
      httpOnly: true,
      secure: this.secure,
      sameSite: 'lax',
      maxAge: this.config.ttl.browserSession,
    });
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
