import { deviceOf } from '../shared/ip-area.js';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import { randomBytes } from 'node:crypto';
import type { ResolvedConfig } from '../config.js';
import { AppError } from '../errors.js';
import type { BrowserSessions } from '../plugins/browser-sessions.js';
import { type RequestContext, requestContext } from '../shared/request-context.js';
import { hashSecret, newId, newSecret, safeEqual } from '../shared/ids.js';
import { DEFAULT_SCOPE } from '../shared/scopes.js';
import type { Clock } from '../shared/time.js';
import { appendQuery } from '../shared/url.js';
import { isRegisteredRedirectUri, unregisteredRedirectUri } from '../shared/redirect-uri-match.js';
import { checkChallenge } from '../sign-in/pkce.js';
import { isFactorDue, type SecondFactor } from '../sign-in/policy.js';
import { FIRST_FACTOR, type SignIn } from '../sign-in/service.js';
import { type Amr, parseAmr } from '../shared/acr.js';
import { type FlowState, pendingMfa } from '../shared/pending-flow.js';
import { type App, findApp } from '../storage/repos/apps.js';
import { appendEvent } from '../storage/repos/events.js';
import { AWAITING, findGrant } from '../storage/repos/grants.js';
import type { TokenService } from '../tokens/service.js';
import {
  deleteIdentityOfUser,
  findIdentity,
  insertIdentity,
  insertIdpToken,
  listIdentitiesOfUser,
  rememberIdToken,
  replaceIdpTokenData,
  voidIdpTokens,
} from '../storage/repos/idp.js';
import { findLiveOneTimeTokenByHash, takeOneTimeTokenByHash } from '../storage/repos/one-time-tokens.js';
import { findUserById, type UserRow } from '../storage/repos/users.js';
import type { Database, OneTimeTokenRow } from '../storage/schema.js';
import {
  authorizationUrl,
  loadProviderConfig,
  ProviderCache,
  type ProviderConfig,
  redeemBrowserCode,
  redeemNativeCode,
  type Upstream,
  type VerifiedIdToken,
  verifyIdToken,
} from './provider.js';

/**
 * Sign-in through the external provider (docs/guides/identity-provider.md#start-and-callback, docs/guides/identity-provider.md#native-exchange-and-resume): browser transactions,
 * the native exchange/resume, bind-first, and the `/continue` tickets. Accounts are found by the
 * provider's (iss, sub) only (docs/security/checklist.md#the-external-provider).
 */

export const TRANSACTION_TTL_S = 600;
export const TICKET_TTL_S = 600;
const BINDER_COOKIE_MAX = 100;

export type ResponseMode = 'session' | 'code';

/** The app-side request a browser provider sign-in carries until the callback. */
export interface AppRequest {
  appId: string;
  redirectUri: string;
  state?: string;
  codeChallenge?: string;
  codeChallengeMethod?: 'S256';
  responseMode: ResponseMode;
  /** Web flow: the scope and nonce of the authorization request (default scope otherwise). */
  scope?: string;
  nonce?: string;
}

interface TransactionData {
  intent: 'signin' | 'bind';
  issuer: string;
  nonce: string;
  verifier: string;
  binder: string;
  app?: AppRequest;
  user_id?: string;
}

export interface BindTicketData {
  issuer: string;
  subject: string;
  email: string | null;
  binder: string;
  app: AppRequest;
  /** Where pages and the callback have different origins: the hash of the claim cookie of the first browser that opened the ticket. */
  claim?: string;
}

export interface ContinueTicketData {
  grant_id: string;
  redirect_uri: string;
  response_mode: ResponseMode;
  state?: string;
  next_step: 'consent' | 'profile';
  scope: string;
}

export type NativeResult =
  | { status: 'pending'; next_step: 'mfa'; session: string; methods: SecondFactor[]; enroll?: ['totp'] }
  | { status: 'ok'; response_mode: 'session'; session: string }
  | { status: 'ok'; response_mode: 'code'; code: string; state?: string }
  | {
      status: 'pending';
      next_step: 'consent' | 'profile';
      session: string;
      hosted_url: string;
      authorize_params: { client_id: string; redirect_uri: string; response_mode: ResponseMode };
    };

/** A native answer before its session JWT is minted (signing happens after the transaction commits). */
type NativeDraft =
  | { status: 'pending'; next_step: 'mfa'; sessionGrantId: string; methods: SecondFactor[]; enroll?: ['totp'] }
  | { status: 'ok'; response_mode: 'session'; sessionGrantId: string }
  | { status: 'ok'; response_mode: 'code'; code: string; state?: string }
  | {
      status: 'pending';
      next_step: 'consent' | 'profile';
      sessionGrantId: string;
      hosted_url: string;
      authorize_params: { client_id: string; redirect_uri: string; response_mode: ResponseMode };
    };

export interface NativeInput {
  client_id: string;
  redirect_uri: string;
  state?: string;
  code_challenge?: string;
  code_challenge_method?: string;
  response_mode?: ResponseMode;
  /** The DPoP key a code issued here must be redeemed with (RFC 9449 §10). */
  dpop_jkt?: string;
}

/** What the provider doors work with, handed over explicitly. */
export interface IdpDeps {
  db: Kysely<Database>;
  config: ResolvedConfig;
  clock: Clock;
  tokens: TokenService;
  browserSessions: BrowserSessions;
  signIn: SignIn;
}

export class IdpService {
  readonly cache: ProviderCache;
  readonly binderCookie: string;
  private readonly claimCookie: string;
  private readonly secureCookie: boolean;
  private readonly secureAuthCookie: boolean;
  private readonly pagesShareOrigin: boolean;
  private readonly db: Kysely<Database>;

  constructor(private readonly deps: IdpDeps) {
    this.db = deps.db;
    this.cache = new ProviderCache(() => deps.clock.now());
    this.secureCookie = deps.config.baseUrl.startsWith('https://');
    this.binderCookie = this.secureCookie ? '__Host-gh_idp' : 'gh_idp';
    this.secureAuthCookie = deps.config.authUrl.startsWith('https://');
    this.claimCookie = this.secureAuthCookie ? '__Host-gh_idp_claim' : 'gh_idp_claim';
    this.pagesShareOrigin = new URL(deps.config.authUrl).origin === new URL(deps.config.baseUrl).origin;
  }

  get callbackUrl(): string {
    return `${this.deps.config.baseUrl}/oauth/idp/callback`;
  }

  /** The provider configuration, or undefined when the platform has none. */
  provider(): Promise<ProviderConfig | undefined> {
    return loadProviderConfig(this.db, this.deps.config);
  }

  async requireProvider(): Promise<ProviderConfig> {
    const provider = await this.provider();
    if (!provider) throw new AppError('idp_oauth_not_configured');
    return provider;
  }

  // Apps -----------------------------------------------------------------------------------------------

  /** App + exact redirect_uri check shared by every browser entry point (docs/reference/errors.md). */
  async checkApp(clientId: string, redirectUri: string): Promise<App> {
    const app = await findApp(this.db, clientId);
    if (!app || app.disabled) throw new AppError('invalid_client', { reason: app ? 'client_disabled' : 'client_unknown' });
    return this.checkRedirect(app, redirectUri);
  }

  /** The exact redirect_uri check of an app the door has already identified (and, natively, authenticated). */
  checkRedirect(app: App, redirectUri: string): App {
    if (!isRegisteredRedirectUri(app.redirectUris, redirectUri)) throw unregisteredRedirectUri(app.redirectUris, redirectUri, { production: this.deps.config.production });
    return app;
  }

  // Browser transactions ---------------------------------------------------------------------------------

  private binderOf(request: FastifyRequest, reply: FastifyReply): string {
    const existing = request.cookies?.[this.binderCookie];
    if (existing && /^[A-Za-z0-9_-]{20,100}$/.test(existing)) return existing;
    const value = randomBytes(24).toString('base64url');
    reply.setCookie(this.binderCookie, value, { path: '/', httpOnly: true, secure: this.secureCookie, sameSite: 'lax', maxAge: TRANSACTION_TTL_S });
    return value;
  }

  /** True when the request carries the binder cookie whose hash is `binderHash`. */
  matchesBinder(request: FastifyRequest, binderHash: string): boolean {
    return this.cookieMatches(request, this.binderCookie, binderHash);
  }

  private cookieMatches(request: FastifyRequest, name: string, hash: string): boolean {
    const value = request.cookies?.[name];
    return typeof value === 'string' && value.length <= BINDER_COOKIE_MAX && safeEqual(hashSecret(value), hash);
  }

  /**
   * Whether this browser holds a bind-first ticket. Where the pages share the callback's origin, the
   * ticket belongs to the browser that started the provider sign-in (the binder cookie). Where they do
   * not, that cookie never reaches the pages: the ticket belongs to the first browser that opens it
   * (`claim`, when allowed: a GET), which the callback's redirect leads there; nobody else may use it.
   */
  async holdsBindTicket(request: FastifyRequest, reply: FastifyReply, row: OneTimeTokenRow, options: { mayClaim: boolean }): Promise<boolean> {
    const data = JSON.parse(row.data) as BindTicketData;
    if (this.pagesShareOrigin) return this.matchesBinder(request, data.binder);
    if (data.claim) return this.cookieMatches(request, this.claimCookie, data.claim);
    if (!options.mayClaim) return false;
    const existing = request.cookies?.[this.claimCookie];
    const value = existing && /^[A-Za-z0-9_-]{20,100}$/.test(existing) ? existing : randomBytes(24).toString('base64url');
    const claimed = await replaceIdpTokenData(this.db, row.id, row.data, { ...data, claim: hashSecret(value) } satisfies BindTicketData, this.deps.clock.now());
    if (claimed && value !== existing) {
      reply.setCookie(this.claimCookie, value, { path: '/', httpOnly: true, secure: this.secureAuthCookie, sameSite: 'lax', maxAge: TICKET_TTL_S });
    }
    return claimed;
  }

  /**
   * Starts an authorization request at the provider: stores the transaction (our state, nonce and PKCE
   * verifier, the app request, the intent) for 10 minutes, sets the binder cookie, and returns the
   * provider's authorization URL.
   */
  async begin(request: FastifyRequest, reply: FastifyReply, input: { intent: 'signin'; app: AppRequest } | { intent: 'bind'; userId: string }): Promise<string> {
    const provider = await this.requireProvider();
    const { metadata } = await this.cache.upstream(provider);
    const now = this.deps.clock.now();
    const state = newSecret('st');
    const nonce = randomBytes(32).toString('base64url');
    const verifier = randomBytes(32).toString('base64url');
    const binder = this.binderOf(request, reply);
    const data: TransactionData = {
      intent: input.intent,
      issuer: provider.issuer,
      nonce,
      verifier,
      binder: hashSecret(binder),
      ...(input.intent === 'signin' ? { app: input.app } : { user_id: input.userId }),
    };
    await insertIdpToken(this.db, {
      id: newId('itx'),
      kind: 'idp_state',
      tokenHash: hashSecret(state),
      userId: input.intent === 'bind' ? input.userId : null,
      appId: input.intent === 'signin' ? input.app.appId : null,
      data,
      createdAt: now,
      expiresAt: now + TRANSACTION_TTL_S,
    });
    const supported = metadata.scopes_supported;
    const scope = ['openid', 'email', 'profile'].filter((s) => s === 'openid' || !supported || supported.includes(s)).join(' ');
    return authorizationUrl(provider, metadata, { redirectUri: this.callbackUrl, scope, state, nonce, codeVerifier: verifier });
  }

  /** Takes the transaction named by `state` (single use). Unknown, expired, replayed or another browser's → null. */
  async takeTransaction(request: FastifyRequest, state: string): Promise<TransactionData | null> {
    const stateHash = hashSecret(state);
    const now = this.deps.clock.now();
    // Check the browser binding before consuming: a callback URL opened elsewhere must not cancel the user's sign-in.
    const live = await findLiveOneTimeTokenByHash(this.db, 'idp_state', stateHash, now);
    if (!live || !this.matchesBinder(request, (JSON.parse(live.data) as TransactionData).binder)) return null;
    const row = await takeOneTimeTokenByHash(this.db, 'idp_state', stateHash, now);
    return row ? (JSON.parse(row.data) as TransactionData) : null;
  }

  /**
   * Redeems the provider code of a browser transaction (`state` is the one that found it) and verifies
   * its id_token (nonce exact, aud = our client).
   */
  async redeemCallback(tx: TransactionData, query: { code?: string; state?: string; iss?: string }): Promise<{ provider: ProviderConfig; token: VerifiedIdToken }> {
    const provider = await this.requireProvider();
    if (provider.issuer !== tx.issuer) throw new AppError('access_denied', { detail: 'provider configuration changed during sign-in' });
    const { code, state, iss } = query;
    if (!code || !state) throw new AppError('invalid_request', { detail: 'callback without code' });
    const upstream = await this.cache.upstream(provider);
    const callback = appendQuery(this.callbackUrl, { code, state, iss });
    const idToken = await redeemBrowserCode(provider, upstream.metadata, new URL(callback), { state, nonce: tx.nonce, codeVerifier: tx.verifier });
    const token = await this.verify(provider, upstream, idToken, { nonce: tx.nonce, audiences: [provider.clientId] });
    // The code is single use at the provider; remember the token anyway so it cannot be replayed natively.
    await this.rememberFetched(this.db, provider, token);
    return { provider, token };
  }

  private verify(provider: ProviderConfig, upstream: Upstream, idToken: string, options: { nonce?: string; nativeNonce?: string; audiences?: string[] }): Promise<VerifiedIdToken> {
    return verifyIdToken(
      idToken,
      {
        issuer: provider.issuer,
        audiences: options.audiences ?? provider.audiences,
        advertisedAlgs: upstream.metadata.id_token_signing_alg_values_supported,
        now: this.deps.clock.now(),
        nonce: options.nonce,
        nativeNonce: options.nativeNonce,
      },
      upstream.keys,
    );
  }

  // Binding ----------------------------------------------------------------------------------------------

  /**
   * Binds (iss, sub) to a user. A subject bound to someone else, or a user already bound to another
   * subject of this provider, is a `conflict`.
   */
  async bind(db: Kysely<Database>, userId: string, claims: { iss: string; sub: string; email?: unknown }, ctx: RequestContext): Promise<void> {
    const existing = await findIdentity(db, claims.iss, claims.sub);
    if (existing && existing.userId === userId) return;
    if (existing) throw new AppError('conflict', { message: 'This provider account is already bound to another account.', detail: 'subject bound to another user' });
    const mine = (await listIdentitiesOfUser(db, userId)).find((i) => i.issuer === claims.iss);
    if (mine) throw new AppError('conflict', { message: 'Your account is already bound to another account of this provider. Unbind it first.', detail: 'user already bound' });
    const now = this.deps.clock.now();
    await insertIdentity(db, { id: newId('pid'), userId, issuer: claims.iss, subject: claims.sub, email: typeof claims.email === 'string' ? claims.email.slice(0, 320) : null, createdAt: now });
    await appendEvent(db, now, { type: 'idp.bound', userId, ip: ctx.ip, userAgent: ctx.userAgent, data: { issuer: claims.iss } });
  }

  async unbind(userId: string, ctx: RequestContext): Promise<boolean> {
    const provider = await this.provider();
    const identities = await listIdentitiesOfUser(this.db, userId);
    const target = identities.find((i) => !provider || i.issuer === provider.issuer) ?? identities[0];
    if (!target) return false;
    const now = this.deps.clock.now();
    await this.db.transaction().execute(async (trx) => {
      await deleteIdentityOfUser(trx, userId, target.issuer);
      await appendEvent(trx, now, { type: 'idp.unbound', userId, ip: ctx.ip, userAgent: ctx.userAgent, data: { issuer: target.issuer } });
    });
    return true;
  }

  // Browser outcomes -------------------------------------------------------------------------------------

  /** Bind-first: a 10-minute single-use ticket for the `/continue` intermediate page, tied to this browser. */
  async createBindTicket(request: FastifyRequest, reply: FastifyReply, data: Omit<BindTicketData, 'binder'>): Promise<string> {
    const binder = this.binderOf(request, reply);
    const ticket = newSecret('bt');
    const now = this.deps.clock.now();
    await insertIdpToken(this.db, {
      id: newId('ibt'),
      kind: 'idp_bind',
      tokenHash: hashSecret(ticket),
      appId: data.app.appId,
      data: { ...data, binder: hashSecret(binder) } satisfies BindTicketData,
      createdAt: now,
      expiresAt: now + TICKET_TTL_S,
    });
    return `${this.deps.config.authUrl}/continue?ticket=${encodeURIComponent(ticket)}`;
  }

  /**
   * A bound user finishing a browser sign-in through the provider. When the user owes a second factor
   * (enrolled, or the app requires one), the browser session is not signed in: `response_mode=code`
   * goes to `/mfa`, which returns into `/oauth/authorize` (same request) once it is given;
   * `response_mode=session` hands the app a session whose grant waits for the factor (`/oauth/authorize`
   * with it, or `/v1/auth/mfa/verify`, asks for it). Otherwise the browser session is signed in (new
   * id) and the authentication recorded, then `response_mode=session` → `redirect_uri?session=…&state=…`;
   * `response_mode=code` → a code when the sign-in policy has nothing left to do, otherwise
   * `/oauth/authorize` (same request), which shows the hosted consent/profile step and then redirects
   * with the code.
   */
  async finishBrowserSignIn(request: FastifyRequest, reply: FastifyReply, appRequest: AppRequest, user: UserRow): Promise<string> {
    const app = await this.checkApp(appRequest.appId, appRequest.redirectUri);
    const { signIn, browserSessions } = this.deps;
    await signIn.assertMaySignIn(this.db, user, app.id);
    const now = this.deps.clock.now();
    const ctx = requestContext(request);
    const factor = FIRST_FACTOR.provider;
    const scope = appRequest.scope ?? DEFAULT_SCOPE;
    const authorizeAgain = () =>
      appendQuery(`${this.deps.config.baseUrl}/oauth/authorize`, {
        response_type: 'code',
        client_id: app.id,
        redirect_uri: appRequest.redirectUri,
        scope,
        state: appRequest.state,
        code_challenge: appRequest.codeChallenge,
        code_challenge_method: appRequest.codeChallenge ? 'S256' : undefined,
        nonce: appRequest.nonce,
      });
    request.browserSession ??= await browserSessions.load(request);

    if (isFactorDue((await signIn.secondFactorDemand(this.db, user, factor.amr, app)).demand)) {
      if (appRequest.responseMode === 'code') {
        await browserSessions.ensure(request, reply);
        const flow = browserSessions.readData<FlowState>(request);
        const resume = authorizeAgain().slice(this.deps.config.baseUrl.length);
        await browserSessions.writeData(request, reply, { ...flow, resume, mfa: pendingMfa(user.id, factor, { via: 'idp_callback', since: now }) });
        return appendQuery(`${this.deps.config.authUrl}/mfa`, { client_id: app.id });
      }
      const grantId = await this.deps.tokens.createGrant(this.db, { appId: app.id, userId: user.id, scope: DEFAULT_SCOPE, authTime: now, amr: factor.amr, awaiting: AWAITING.secondFactor, device: deviceOf(ctx) });
      const session = await this.deps.tokens.mintSession({ userId: user.id, appId: app.id, grantId });
      return appendQuery(appRequest.redirectUri, { session, state: appRequest.state });
    }

    if (request.browserSession?.user_id !== user.id) await browserSessions.signIn(request, reply, user.id, factor.amr);
    await signIn.recordLogin(this.db, { userId: user.id, appId: app.id, method: factor.method, amr: factor.amr }, ctx);

    if (appRequest.responseMode === 'code') {
      if ((await signIn.nextStep(this.db, user, app, { requestedScope: scope, amr: factor.amr })) !== 'done') return authorizeAgain();
      const code = await this.db.transaction().execute((trx) =>
        signIn.issueCode(trx, {
          app,
          user,
          redirectUri: appRequest.redirectUri,
          scope,
          codeChallenge: appRequest.codeChallenge ?? null,
          nonce: appRequest.nonce ?? null,
          authTime: now,
          amr: factor.amr,
          device: deviceOf(ctx),
          sid: request.browserSession?.sid ?? null,
        }),
      );
      return appendQuery(appRequest.redirectUri, { code, state: appRequest.state, iss: this.deps.config.baseUrl });
    }
    const grantId = await this.db.transaction().execute((trx) => signIn.openSession(trx, { app, user, authTime: now, amr: factor.amr, device: deviceOf(ctx) }));
    // Signing may read keys from the database: never inside a transaction (SQLite has one connection).
    const session = await this.deps.tokens.mintSession({ userId: user.id, appId: app.id, grantId });
    return appendQuery(appRequest.redirectUri, { session, state: appRequest.state });
  }

  /**
   * An id_token Gatehouse fetched from the provider itself (callback, `idp_code`) is remembered, so the
   * app can never present it later as its own `id_token`; it is not a replay when the provider hands
   * out an identical one again (it does, for two sign-ins of one user within a second).
   */
  private async rememberFetched(db: Kysely<Database>, provider: ProviderConfig, token: VerifiedIdToken): Promise<void> {
    await rememberIdToken(db, { id: newId('idt'), tokenHash: token.replayKey, issuer: provider.issuer, now: this.deps.clock.now(), expiresAt: token.claims.exp + 60 });
  }

  // Native path A -----------------------------------------------------------------------------------------

  /** The one PKCE rule (sign-in/pkce.ts): S256, 43 base64url characters, required for `response_mode=code`. */
  private checkPkce(input: NativeInput): void {
    const result = checkChallenge(input.code_challenge, input.code_challenge_method, (input.response_mode ?? 'session') === 'code');
    if (!result.ok) throw new AppError('invalid_request', { message: `PKCE: ${result.reason}.`, details: [{ path: 'code_challenge', message: result.reason }] });
  }

  async exchange(
    client: App,
    input: NativeInput & { id_token?: string; idp_code?: string; nonce?: string; idp_redirect_uri?: string; idp_code_verifier?: string },
    ctx: RequestContext,
  ): Promise<NativeResult> {
    const app = this.checkRedirect(client, input.redirect_uri);
    if ((input.id_token === undefined) === (input.idp_code === undefined)) {
      throw new AppError('invalid_request', { message: 'Send exactly one of id_token and idp_code.' });
    }
    this.checkPkce(input);
    const provider = await this.requireProvider();
    const upstream = await this.cache.upstream(provider);
    const presented = input.id_token !== undefined;
    const idToken = presented
      ? input.id_token!
      : await redeemNativeCode(provider, upstream.metadata, {
          code: input.idp_code!,
          redirectUri: input.idp_redirect_uri ?? this.callbackUrl,
          codeVerifier: input.idp_code_verifier,
        });
    const token = await this.verify(provider, upstream, idToken, { nativeNonce: input.nonce });
    const identity = await findIdentity(this.db, token.claims.iss, token.claims.sub);
    const user = identity && (await findUserById(this.db, identity.userId));
    if (!user) {
      throw new AppError('idp_oauth_not_bound', { extra: { hosted_url: `${this.deps.config.authUrl}/account?bind=1` } });
    }
    const { signIn } = this.deps;
    await signIn.assertMaySignIn(this.db, user, app.id);
    const now = this.deps.clock.now();
    const draft = await this.db.transaction().execute(async (trx) => {
      if (presented) {
        // docs/guides/identity-provider.md#native-exchange-and-resume: an id_token the app presents is single use (a concurrent twin loses the unique key).
        const fresh = await rememberIdToken(trx, { id: newId('idt'), tokenHash: token.replayKey, issuer: provider.issuer, now, expiresAt: token.claims.exp + 60 });
        if (!fresh) throw new AppError('invalid_id_token', { detail: 'id_token replayed' });
      } else {
        await this.rememberFetched(trx, provider, token);
      }
      await signIn.recordLogin(trx, { userId: user.id, appId: app.id, method: FIRST_FACTOR.provider.method, amr: FIRST_FACTOR.provider.amr, via: 'exchange' }, ctx);
      return this.nativeOutcome(trx, app, user, input, { authTime: now, amr: FIRST_FACTOR.provider.amr });
    });
    return this.finalize(draft, app.id, user.id);
  }

  /**
   * `POST /oauth/idp/resume`: goes on with a pending native sign-in. With `code`, the second factor a
   * `pending` `mfa` answer asked for is checked first (a TOTP or recovery code; a wrong one → 400
   * `invalid_code`, under the login lockout).
   */
  async resume(client: App, input: NativeInput & { session: string; consent?: string; code?: string }, ctx: RequestContext): Promise<NativeResult> {
    const app = this.checkRedirect(client, input.redirect_uri);
    this.checkPkce(input);
    const claims = await this.deps.tokens.verifySession(input.session, app.id);
    const user = await findUserById(this.db, claims.sub);
    let grant = await findGrant(this.db, claims.grantId);
    if (!user || !grant) throw new AppError('invalid_token', { detail: 'session user or grant gone' });
    await this.deps.signIn.assertMaySignIn(this.db, user, app.id);
    let amr = parseAmr(grant.amr);
    if (input.code !== undefined && grant.awaiting_completion === AWAITING.secondFactor) {
      amr = (await this.deps.signIn.secondFactorOfGrant(app, grant, user, { kind: 'code', code: input.code }, AWAITING.nothing, ctx)).amr;
      grant = { ...grant, amr: JSON.stringify(amr), awaiting_completion: AWAITING.nothing };
    }
    const { auth_time: authTime, id: grantId } = grant;
    const draft = await this.db.transaction().execute((trx) => this.nativeOutcome(trx, app, user, input, { authTime, amr, grantId }));
    return this.finalize(draft, app.id, user.id);
  }

  /** Mints the session JWT of a draft answer, after its transaction committed. */
  private async finalize(draft: NativeDraft, appId: string, userId: string): Promise<NativeResult> {
    if (draft.status === 'ok' && draft.response_mode === 'code') return draft;
    const { sessionGrantId, ...rest } = draft;
    const session = await this.deps.tokens.mintSession({ userId, appId, grantId: sessionGrantId });
    return { ...rest, session } as NativeResult;
  }

  /**
   * The `ok` or `pending` answer of exchange/resume (docs/guides/identity-provider.md#native-exchange-and-resume, docs/reference/rest-api.md#pending-sign-ins, docs/reference/tokens.md#session-jwts, docs/reference/rest-api.md#consent-from-a-rest-sign-in):
   * `response_mode=session` always opens a session; `code` asks the sign-in policy, and answers a code
   * when nothing is left to do, else `pending` with a `/continue` ticket for the hosted step.
   */
  private async nativeOutcome(
    trx: Kysely<Database>,
    app: App,
    user: UserRow,
    input: NativeInput,
    options: { authTime: number; amr: readonly Amr[]; grantId?: string },
  ): Promise<NativeDraft> {
    const { signIn, tokens } = this.deps;
    const mode = input.response_mode ?? 'session';
    // A second factor comes before anything else, in either mode (docs/guides/mfa-and-passkeys.md): the session of this
    // answer is good for nothing but `resume` with the factor's `code` (or `/v1/auth/mfa/verify`).
    const { demand, methods } = await signIn.secondFactorDemand(trx, user, options.amr, app);
    if (isFactorDue(demand)) {
      const grantId =
        options.grantId ??
        (await tokens.createGrant(trx, { appId: app.id, userId: user.id, scope: DEFAULT_SCOPE, authTime: options.authTime, amr: options.amr, awaiting: AWAITING.secondFactor }));
      return { status: 'pending', next_step: 'mfa', sessionGrantId: grantId, methods, ...(demand === 'enrol' ? { enroll: ['totp'] as ['totp'] } : {}) };
    }
    if (mode === 'session') {
      const grantId = options.grantId ?? (await signIn.openSession(trx, { app, user, authTime: options.authTime, amr: options.amr }));
      return { status: 'ok', response_mode: 'session', sessionGrantId: grantId };
    }
    const step = await signIn.nextStep(trx, user, app, { requestedScope: DEFAULT_SCOPE, amr: options.amr });
    if (step === 'done') {
      const code = await signIn.issueCode(trx, {
        app,
        user,
        redirectUri: input.redirect_uri,
        scope: DEFAULT_SCOPE,
        codeChallenge: input.code_challenge ?? null,
        nonce: null,
        authTime: options.authTime,
        amr: options.amr,
        dpopJkt: input.dpop_jkt,
      });
      return { status: 'ok', response_mode: 'code', code, ...(input.state !== undefined ? { state: input.state } : {}) };
    }
    // The hosted page does consent and profile data; an unverified address is explained there too.
    const nextStep = step === 'consent' ? 'consent' : 'profile';
    const grantId = options.grantId ?? (await tokens.createGrant(trx, { appId: app.id, userId: user.id, scope: DEFAULT_SCOPE, authTime: options.authTime, amr: options.amr }));
    const now = this.deps.clock.now();
    await voidIdpTokens(trx, 'idp_continue', user.id, app.id, now);
    const ticket = newSecret('tk');
    await insertIdpToken(trx, {
      id: newId('ict'),
      kind: 'idp_continue',
      tokenHash: hashSecret(ticket),
      userId: user.id,
      appId: app.id,
      data: {
        grant_id: grantId,
        redirect_uri: input.redirect_uri,
        response_mode: mode,
        state: input.state,
        next_step: nextStep,
        scope: DEFAULT_SCOPE,
      } satisfies ContinueTicketData,
      createdAt: now,
      expiresAt: now + TICKET_TTL_S,
    });
    return {
      status: 'pending',
      next_step: nextStep,
      sessionGrantId: grantId,
      hosted_url: `${this.deps.config.authUrl}/continue?ticket=${encodeURIComponent(ticket)}`,
      authorize_params: { client_id: app.id, redirect_uri: input.redirect_uri, response_mode: mode },
    };
  }

  // Tickets of the /continue page -------------------------------------------------------------------------

  async findTicket(ticket: string): Promise<{ kind: 'idp_continue' | 'idp_bind'; row: OneTimeTokenRow } | null> {
    if (!/^(tk|bt)_[A-Za-z0-9_-]{20,80}$/.test(ticket)) return null;
    const kind = ticket.startsWith('tk_') ? 'idp_continue' : 'idp_bind';
    const row = await findLiveOneTimeTokenByHash(this.db, kind, hashSecret(ticket), this.deps.clock.now());
    return row ? { kind, row } : null;
  }

  consumeTicket(db: Kysely<Database>, ticket: string): Promise<OneTimeTokenRow | undefined> {
    const kind = ticket.startsWith('tk_') ? 'idp_continue' : 'idp_bind';
    return takeOneTimeTokenByHash(db, kind, hashSecret(ticket), this.deps.clock.now());
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    idp: IdpService;
  }
}
