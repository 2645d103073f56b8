import type { FastifyReply, FastifyRequest } from 'fastify';
import { decodeProtectedHeader, errors as joseErrors } from 'jose';
import type { Kysely } from 'kysely';
import type { ResolvedConfig } from '../config.js';
import { AppError } from '../errors.js';
import { acrOf, type Amr, parseAmr, serializeAmr } from '../shared/acr.js';
import { SecretBox } from '../shared/crypto.js';
import { randomBytes } from 'node:crypto';
import { hashSecret, idOf, newId, newOrderedSecret, orderedSecretOf } from '../shared/ids.js';
import { hasScope, isSubsetScope, joinScope, scopeList } from '../shared/scopes.js';
import type { Clock } from '../shared/time.js';
import { type App, findApp } from '../storage/repos/apps.js';
import { appendEvent } from '../storage/repos/events.js';
import {
  AWAITING,
  type Awaiting,
  findGrant,
  type LiveGrant,
  liveGrants,
  type LiveGrantReader,
  type RefreshFamily,
  findRefreshToken,
  insertAuthorizationCode,
  insertGrant,
  insertRefreshToken,
  isGrantLive,
  isLiveGrant,
  revokeGrant,
  rotateRefreshTokens,
  type Rotation,
  type AppWithRefreshFamily,
  findAppWithRefreshFamily,
  findAppsWithRefreshFamilies,
  type AppWithCodeRedemption,
  findAppWithCodeRedemption,
  findAppsWithCodeRedemptions,
  type CodeRedemption,
  type Redemption,
  redeemAuthorizationCodes,
} from '../storage/repos/grants.js';
import type { UserRow } from '../storage/repos/users.js';
import type { Database, GrantsTable, RefreshTokensTable } from '../storage/schema.js';
import type { Insertable } from 'kysely';
import type { KeyStore } from '../plugins/keys.js';
import type { Storage } from '../storage/connect.js';
import type { RequestContext } from '../shared/request-context.js';
import { Coalescer } from '../shared/coalescer.js';
import { audienceIncludesUs, audienceOf, narrowedAudience } from '../shared/resources.js';
import type { Dpop } from './dpop.js';
import type { Device } from '../shared/ip-area.js';
import { PROTECTED_RESOURCE_PATH } from '../shared/resources.js';

/**
 * Token issuing shared by every sign-in path (OAuth code exchange, REST sign-in, provider exchange):
 * grants (`sid`), JWT access tokens (RFC 9068), ID tokens, session JWTs, opaque refresh tokens with
 * atomic rotation and the REFRESH_REUSE_GRACE replay, and authorization codes.
 */

export interface TokenResponse {
  access_token: string;
  /** `DPoP` when the access token is bound to the key of a DPoP proof (`cnf.jkt`, RFC 9449 §5). */
  token_type: 'Bearer' | 'DPoP';
  expires_in: number;
  refresh_token: string;
  scope: string;
  id_token?: string;
}

export interface AccessTokenClaims<G extends LiveGrant = LiveGrant> {
  sub: string;
  clientId: string;
  scope: string;
  grantId: string;
  jti: string;
  exp: number;
  /** The thumbprint of the DPoP key the token is bound to (`cnf.jkt`), if it is. */
  jkt?: string;
  /** The token's audience: its app, or the resources it was narrowed to (RFC 8707). */
  aud: string | string[];
  /** The live grant, with the token's app (its client), as the liveness reader read it. */
  grant: G;
}

/** A client-credentials access token (no user: `sub` is the client, RFC 9068 §2.2), still valid. */
export interface ClientTokenClaims {
  clientId: string;
  scope: string;
  aud: string | string[];
  jti: string;
  iat: number;
  exp: number;
  jkt?: string;
}

/** The answer to grant_type=client_credentials: no refresh token, no ID token (RFC 6749 §4.4.3). */
export interface ClientTokenResponse {
  access_token: string;
  token_type: 'Bearer' | 'DPoP';
  expires_in: number;
  scope: string;
}

export interface SessionClaims {
  sub: string;
  appId: string;
  grantId: string;
  exp: number;
}

/** Who a bearer credential identifies, at Gatehouse's own resource endpoints. */
export interface BearerIdentity<G extends LiveGrant = LiveGrant> {
  kind: 'access' | 'session';
  userId: string;
  appId: string;
  scope: string;
  grantId: string;
  /**
   * The live grant as its reader read it: with the app the credential was issued to (no second query for
   * it) and whatever else the caller asked to read in the same statement.
   */
  grant: G;
}

/** What a token response is minted from: the grant it belongs to, its user and app. */
export interface MintInput {
  app: App;
  /** What the tokens say of the user (a refresh reads no more of it: RefreshFamily). */
  user: Pick<UserRow, 'id' | 'email' | 'email_verified' | 'name'>;
  grantId: string;
  grantExpiresAt: number;
  scope: string;
  refreshScope: string;
  authTime: number;
  /** How the user authenticated (ID token `amr`, and `acr` from it). */
  amr: readonly Amr[];
  nonce: string | null;
  /** The DPoP key the access token is bound to (`cnf.jkt`); a public client's refresh tokens are bound through the grant. */
  dpopJkt?: string;
  /** The grant's `sid` (ID tokens carry it; null for a grant stored before it had one). */
  sid: string | null;
  /** RFC 8707: the resources the access token is for (its `aud`); empty or absent: the app itself. */
  audience?: readonly string[];
}

/** What a new grant records (TokenService.createGrant). */
export interface GrantInput {
  appId: string;
  userId: string;
  scope: string;
  authTime: number;
  amr: readonly Amr[];
  nonce?: string | null;
  awaiting?: Awaiting;
  expiresAt?: number;
  /** Where the person signed in from (the sessions list shows it); unknown when the request came from the app's server. */
  device?: Device;
  /** The DPoP key the grant's refresh tokens are bound to (public clients only: bindRefreshTo). */
  dpopJkt?: string | null;
  /** The browser session's public `sid` (docs/guides/back-channel-logout.md); absent: a sid of the grant's own. */
  sid?: string | null;
  /** RFC 8707: the resources the authorization named (a later token request may narrow to some of them). */
  resources?: readonly string[];
}

/**
 * Which key a new grant's refresh tokens are bound to (RFC 9449 §5): a public client's are bound to the
 * key of its proof; a confidential client's are already bound to its secret, so stay unbound.
 */
export const bindRefreshTo = (app: Pick<App, 'type'>, jkt: string | undefined): string | null => (app.type === 'public' && jkt !== undefined ? jkt : null);

/**
 * A token response being signed, and the refresh-token row that must be committed before it is sent: the
 * row exists at once, so a caller may store it while the signatures are made.
 */
export interface PreparedTokens {
  response: Promise<TokenResponse>;
  /**
   * The response's JSON text as a rotation stores it for replay, sealed, once the access token is signed:
   * the ID token (if any) as its signing input with an empty signature, signed again when it is replayed
   * (TokenService.replayed), so the rotation need not wait for the RSA signature.
   */
  sealedReplay(): Promise<string>;
  refreshRow: Insertable<RefreshTokensTable>;
}

/**
 * `Authorization: Bearer <b64token>` (RFC 6750 §2.1) or `DPoP <b64token>` (RFC 9449 §7.1); the scheme is
 * case-insensitive (RFC 9110 §11.1).
 */
const AUTHORIZATION = /^(Bearer|DPoP) +([A-Za-z0-9\-._~+/]+=*)$/i;

interface PresentedToken {
  token: string;
  /** `dpop` for the DPoP scheme; a form-body token is a bearer token. */
  scheme: 'bearer' | 'dpop';
}

/** The token of a request: the Authorization header, or (where allowed) the form body; never both (RFC 6750 §2). */
function presentedToken(request: FastifyRequest, allowFormBody: boolean): PresentedToken {
  const header = request.headers.authorization;
  const isForm = (request.headers['content-type'] ?? '').toLowerCase().startsWith('application/x-www-form-urlencoded');
  const fromBody = allowFormBody && request.method === 'POST' && isForm ? (request.body as Record<string, unknown> | undefined)?.access_token : undefined;
  if (header !== undefined && fromBody !== undefined) {
    throw new AppError('invalid_request', {
      message: 'Send the access token in one place only.',
      headers: { 'www-authenticate': 'Bearer error="invalid_request"' },
      detail: 'bearer token in header and body',
    });
  }
  if (typeof fromBody === 'string') return { token: fromBody, scheme: 'bearer' };
  if (!header) throw new AppError('unauthorized', { headers: { 'www-authenticate': 'Bearer realm="gatehouse"' }, detail: 'no bearer credential' });
  const match = AUTHORIZATION.exec(header);
  if (!match) throw new AppError('unauthorized', { detail: 'malformed Authorization header' });
  return { token: match[2]!, scheme: match[1]!.toLowerCase() === 'dpop' ? 'dpop' : 'bearer' };
}

/** The most calls one coalesced statement carries (PostgreSQL); more go in the next. */
const MAX_COALESCED = 64;

/** A batch's answers (in the order asked) by the key each was asked with, for a Coalescer. */
function byKey<K, V>(asked: readonly K[], answers: ReadonlyArray<V | undefined>): Map<K, V> {
  const found = new Map<K, V>();
  asked.forEach((key, i) => {
    const answer = answers[i];
    if (answer !== undefined) found.set(key, answer);
  });
  return found;
}

export class TokenService {
  private readonly box: SecretBox;
  /** Per grant reader, on PostgreSQL: the coalesced reads of concurrent bearer checks (readLiveGrant). */
  private readonly coalescedGrantReads?: Map<LiveGrantReader<LiveGrant>, Coalescer<string, LiveGrant>>;
  /** On PostgreSQL: the grants' reads of their client and code or token, coalesced. */
  private readonly coalescedCodeReads?: Coalescer<{ appId: string; codeHash: string }, AppWithCodeRedemption>;
  private readonly coalescedRefreshReads?: Coalescer<{ appId: string; tokenHash: string }, AppWithRefreshFamily>;
  /**
   * A grant's writes: the rotations (redemptions) asked in the same turn of the event loop share one
   * write, on PostgreSQL one statement, on SQLite one transaction (docs/adr/0004-coalesced-statements.md).
   */
  private readonly rotations: Coalescer<Rotation, boolean>;
  private readonly redemptions: Coalescer<Redemption, CodeRedemption>;

  /** `db` is the database to ask (a test may give it plugins); `storage` says which one it is. */
  constructor(
    private readonly db: Kysely<Database>,
    storage: Storage,
    private readonly keys: KeyStore,
    private readonly config: ResolvedConfig,
    private readonly clock: Clock,
    /** DPoP proofs, nonces and the replay cache (tokens/dpop.ts). */
    readonly dpop: Dpop,
  ) {
    this.box = new SecretBox(config.secretKey, 'refresh-replay');
    if (storage.dialect === 'postgres') {
      this.coalescedGrantReads = new Map();
      this.coalescedCodeReads = new Coalescer(async (asked) => byKey(asked, await findAppsWithCodeRedemptions(db, asked)), { maxBatch: MAX_COALESCED });
      this.coalescedRefreshReads = new Coalescer(async (asked) => byKey(asked, await findAppsWithRefreshFamilies(db, asked)), { maxBatch: MAX_COALESCED });
    }
    this.rotations = new Coalescer(async (asked) => {
      const won = await rotateRefreshTokens(db, storage.dialect, asked);
      return byKey(asked, asked.map((rotation) => won.has(rotation.successor.token_hash)));
    }, { maxBatch: MAX_COALESCED });
    this.redemptions = new Coalescer(async (asked) => {
      const won = await redeemAuthorizationCodes(db, storage.dialect, asked);
      return byKey(asked, asked.map((redemption) => won.get(redemption.grant.id)));
    }, { maxBatch: MAX_COALESCED });
  }

  /**
   * redeemAuthorizationCodes: the code consumed, its grant and first refresh token stored, the basis
   * returned as the consuming statement saw it; undefined when the code was consumed before. Concurrent
   * redemptions share one write, each answered once it is committed (a failed write changed nothing:
   * Coalescer runs its calls again alone).
   */
  redeemCode(redemption: Redemption): Promise<CodeRedemption | undefined> {
    return this.redemptions.submit(redemption);
  }

  /**
   * The app `appId` and the code `codeHash` with its redemption basis (findAppWithCodeRedemption): what a
   * code grant reads first. On PostgreSQL the reads of concurrent grants share one statement.
   */
  findAppWithCodeRedemption(appId: string, codeHash: string): Promise<AppWithCodeRedemption | undefined> {
    if (!this.coalescedCodeReads) return findAppWithCodeRedemption(this.db, appId, codeHash);
    return this.coalescedCodeReads.submit({ appId, codeHash });
  }

  /**
   * The app `appId` and the family of the refresh token `tokenHash` (findAppWithRefreshFamily): what a
   * refresh grant reads first. On PostgreSQL the reads of concurrent grants share one statement: a round
   * trip, not the lookup, is most of such a read's cost there.
   */
  findAppWithRefreshFamily(appId: string, tokenHash: string): Promise<AppWithRefreshFamily | undefined> {
    if (!this.coalescedRefreshReads) return findAppWithRefreshFamily(this.db, appId, tokenHash);
    return this.coalescedRefreshReads.submit({ appId, tokenHash });
  }

  /**
   * Starts a grant: one sign-in of a user to an app. Tokens and session JWTs reference it as `sid`.
   */
  async createGrant(db: Kysely<Database>, input: GrantInput): Promise<string> {
    const row = this.grantRow(input);
    await insertGrant(db, row);
    return row.id;
  }

  /** The row of a new grant, with a new id (tokens may be signed for it before it is stored). */
  private grantRow(input: GrantInput): Insertable<GrantsTable> {
    const now = this.clock.now();
    return {
      id: newId('grt'),
      app_id: input.appId,
      user_id: input.userId,
      scope: joinScope(scopeList(input.scope)),
      auth_time: input.authTime,
      amr: serializeAmr(input.amr),
      nonce: input.nonce ?? null,
      created_at: now,
      expires_at: input.expiresAt ?? now + this.config.ttl.refreshFamily,
      revoked_at: null,
      revoked_reason: null,
      awaiting_completion: input.awaiting ?? AWAITING.nothing,
      user_agent: input.device?.userAgent ?? null,
      ip_area: input.device?.ipArea ?? null,
      dpop_jkt: input.dpopJkt ?? null,
      // One browser session's sign-ins share its sid; a sign-in without one (REST, a provider's server) is a session of its own.
      sid: input.sid ?? newId('sid'),
      resources: input.resources?.length ? input.resources.join(' ') : null,
    };
  }

  /**
   * Issues a token response for a grant (creating one unless `grantId` is given). Call inside the
   * transaction that records the sign-in, so tokens exist only if everything else committed.
   */
  async issueTokens(
    db: Kysely<Database>,
    input: { app: App; user: UserRow; scope: string; authTime: number; amr: readonly Amr[]; nonce?: string | null; grantId?: string; device?: Device; dpopJkt?: string },
  ): Promise<{ response: TokenResponse; grantId: string }> {
    if (input.grantId === undefined) {
      const { response, grantRow, refreshRow } = this.prepareGrantTokens(input);
      await insertGrant(db, grantRow);
      await insertRefreshToken(db, refreshRow);
      return { response: await response, grantId: grantRow.id };
    }
    const grant = await findGrant(db, input.grantId);
    if (!grant) throw new Error('grant vanished while issuing tokens');
    const response = await this.mint(db, {
      app: input.app,
      user: input.user,
      grantId: grant.id,
      grantExpiresAt: grant.expires_at,
      scope: joinScope(scopeList(input.scope)),
      refreshScope: grant.scope,
      authTime: input.authTime,
      amr: input.amr,
      nonce: input.nonce ?? null,
      dpopJkt: input.dpopJkt,
      sid: grant.sid,
    });
    return { response, grantId: grant.id };
  }

  /**
   * Tokens for a new grant, their signing started, without touching the database, with the rows to store
   * (`grantRow`, `refreshRow`): store them inside the transaction that decides the sign-in, before answering.
   */
  prepareGrantTokens(input: {
    app: App;
    user: UserRow;
    scope: string;
    authTime: number;
    amr: readonly Amr[];
    nonce?: string | null;
    device?: Device;
    /** The key of the request's DPoP proof: binds the access token, and a public client's refresh tokens. */
    dpopJkt?: string;
    /** The browser session's public `sid` (docs/guides/back-channel-logout.md); absent: a sid of the grant's own. */
    sid?: string | null;
    /** RFC 8707: the resources authorized (the grant keeps them), and those this access token is for. */
    resources?: readonly string[];
    audience?: readonly string[];
  }): PreparedTokens & { grantRow: Insertable<GrantsTable> } {
    const grantRow = this.grantRow({
      appId: input.app.id, userId: input.user.id, scope: input.scope, authTime: input.authTime, amr: input.amr, nonce: input.nonce, device: input.device,
      dpopJkt: bindRefreshTo(input.app, input.dpopJkt),
      sid: input.sid,
      resources: input.resources,
    });
    const prepared = this.prepareTokens({
      app: input.app,
      user: input.user,
      grantId: grantRow.id,
      grantExpiresAt: grantRow.expires_at,
      scope: grantRow.scope,
      refreshScope: grantRow.scope,
      authTime: input.authTime,
      amr: input.amr,
      nonce: input.nonce ?? null,
      dpopJkt: input.dpopJkt,
      sid: grantRow.sid ?? null,
      audience: input.audience,
    });
    return Object.assign(prepared, { grantRow });
  }

  private async mint(db: Kysely<Database>, input: MintInput): Promise<TokenResponse> {
    const prepared = this.prepareTokens(input);
    await insertRefreshToken(db, prepared.refreshRow);
    return prepared.response;
  }

  /**
   * Starts signing a token response, without touching the database. Hot paths call it before their
   * transaction, so no connection waits for a signature; they store `refreshRow` inside it, and answer
   * `response` once both are done.
   */
  prepareTokens(input: MintInput): PreparedTokens {
    const now = this.clock.now();
    const ttl = this.config.ttl;
    // The refresh token, the access token's jti and the replay's IV in one draw (docs/adr/0014-one-random-draw-per-token-response.md).
    const random = randomBytes(32 + 16 + 12);
    const refreshToken = orderedSecretOf('rt', random.subarray(0, 32));
    const refreshRow = {
      token_hash: hashSecret(refreshToken),
      grant_id: input.grantId,
      app_id: input.app.id,
      scope: input.refreshScope,
      created_at: now,
      expires_at: Math.min(now + ttl.refreshToken, input.grantExpiresAt),
      consumed_at: null,
      successor_response: null,
      successor_hash: null,
    };
    const accessToken = this.keys.signing(
      {
        // RFC 8707 §2: narrowed to the resources asked for; otherwise for the app itself (docs/reference/oauth.md#resource-indicators-rfc-8707).
        sub: input.user.id, aud: input.audience?.length ? audienceOf(input.audience) : input.app.id, client_id: input.app.id, scope: input.scope, jti: idOf('at', random.subarray(32, 48)), sid: input.grantId,
        ...(input.dpopJkt !== undefined ? { cnf: { jkt: input.dpopJkt } } : {}),
      },
      { alg: 'ES256', typ: 'at+jwt', expiresIn: ttl.accessToken },
    );
    const idToken = hasScope(input.scope, 'openid')
      ? this.keys.signing(
          {
            sub: input.user.id,
            aud: input.app.id,
            auth_time: input.authTime,
            acr: acrOf(input.amr),
            ...(input.amr.length > 0 ? { amr: input.amr } : {}),
            ...(input.nonce ? { nonce: input.nonce } : {}),
            // The session a back-channel logout token names (docs/guides/back-channel-logout.md).
            ...(input.sid ? { sid: input.sid } : {}),
            ...(hasScope(input.scope, 'email') ? { email: input.user.email, email_verified: input.user.email_verified === 1 } : {}),
            ...(hasScope(input.scope, 'profile') ? { name: input.user.name ?? undefined } : {}),
          },
          { alg: 'RS256', typ: 'JWT', expiresIn: ttl.accessToken },
        )
      : undefined;
    const withTokens = (access: string, id: string | undefined): TokenResponse => {
      const tokens: TokenResponse = { access_token: access, token_type: input.dpopJkt !== undefined ? 'DPoP' : 'Bearer', expires_in: ttl.accessToken, refresh_token: refreshToken, scope: input.scope };
      if (id !== undefined) tokens.id_token = id;
      return tokens;
    };
    const response = Promise.all([accessToken.jwt, idToken?.jwt]).then(([access, id]) => withTokens(access, id));
    // A caller whose statement failed no longer waits for the response: its failure must not go unhandled.
    response.catch(() => undefined);
    const sealedReplay = async () => this.box.seal(JSON.stringify(withTokens(await accessToken.jwt, idToken && `${idToken.input}.`)), random.subarray(48, 60));
    return { response, sealedReplay, refreshRow };
  }

  /**
   * A response stored for replay (PreparedTokens.sealedReplay) as it was first answered: its ID token signed
   * again from its signing input, which gives the very same JWT (RS256 is deterministic). A response
   * stored whole is returned as it is.
   */
  private async replayed(stored: string): Promise<string> {
    const response = JSON.parse(stored) as TokenResponse;
    if (response.id_token === undefined || !response.id_token.endsWith('.')) return stored;
    response.id_token = await this.keys.resignRs256(response.id_token.slice(0, -1));
    return JSON.stringify(response);
  }

  /**
   * Refresh-token rotation: one token has at most one successor. The same token
   * from the same client inside the grace window gets the identical response (returned as the exact
   * JSON text); after the window, or once the successor itself was used, it revokes the family.
   * The caller reads the presented token's family (findRefreshFamily, or with its client in one statement).
   */
  async refresh(input: { family: RefreshFamily | undefined; client: App; scope?: string; dpopJkt?: string; resource?: string }, ctx: RequestContext): Promise<string> {
    const now = this.clock.now();
    const { family } = input;
    if (!family) throw new AppError('invalid_grant', { reason: 'refresh_token_unknown' });
    const { token: row, grant, user } = family;
    const hash = row.token_hash;
    if (row.app_id !== input.client.id) throw new AppError('invalid_grant', { reason: 'refresh_token_other_client' });
    // Before reuse detection: whoever lacks the key of a bound family can neither use nor revoke it.
    if (grant.dpop_jkt !== null && grant.dpop_jkt !== input.dpopJkt) {
      throw this.dpop.keyMismatch('token', input.dpopJkt === undefined ? 'refresh token bound to a DPoP key, no proof' : 'refresh token bound to another DPoP key');
    }
    if (input.scope !== undefined && !isSubsetScope(input.scope, row.scope)) throw new AppError('invalid_scope', { detail: 'scope wider than granted' });
    const audience = narrowedAudience(input.resource, grant.resources, input.client.resourceUris, this.config.baseUrl);

    if (row.consumed_at === null) {
      if (row.expires_at <= now) throw new AppError('invalid_grant', { reason: 'refresh_token_expired' });
      if (!isLiveGrant(grant, user, now)) throw new AppError('invalid_grant', { reason: 'refresh_token_revoked' });
      const scope = input.scope !== undefined ? joinScope(scopeList(input.scope)) : row.scope;
      // The conditional UPDATE decides the one winner; the ID token is signed while it runs, and the
      // response is answered only once the rotation has committed.
      const prepared = this.prepareTokens({
        app: input.client,
        user,
        grantId: grant.id,
        grantExpiresAt: grant.expires_at,
        scope,
        refreshScope: row.scope,
        authTime: grant.auth_time,
        amr: parseAmr(grant.amr),
        nonce: null,
        dpopJkt: input.dpopJkt,
        sid: grant.sid,
        audience,
      });
      const sealedResponse = await prepared.sealedReplay();
      const [won, response] = await Promise.all([this.rotations.submit({ tokenHash: hash, at: now, sealedResponse, successor: prepared.refreshRow }), prepared.response]);
      if (won === true) return JSON.stringify(response);
    }
    // Lost the race, or presented again: replay inside the window, otherwise it is reuse.
    const settled = await findRefreshToken(this.db, hash);
    if (settled?.successor_response && settled.successor_hash && settled.consumed_at !== null && now - settled.consumed_at <= this.config.ttl.refreshReuseGrace) {
      const successor = await findRefreshToken(this.db, settled.successor_hash);
      if (successor && successor.consumed_at === null && (await isGrantLive(this.db, row.grant_id, now))) {
        return this.replayed(this.box.open(settled.successor_response));
      }
    }
    await this.db.transaction().execute(async (trx) => {
      const grant = await findGrant(trx, row.grant_id);
      await revokeGrant(trx, row.grant_id, now, 'refresh_token_reuse');
      await appendEvent(trx, now, {
        type: 'token.refresh_reuse_detected',
        appId: row.app_id,
        userId: grant?.user_id,
        ip: ctx.ip,
        userAgent: ctx.userAgent,
        data: { grant_id: row.grant_id, token_hash_prefix: hash.slice(0, 8) },
      });
    });
    throw new AppError('invalid_grant', { reason: 'refresh_token_reused' });
  }

  /** Revokes the family of a refresh token (logout, RFC 7009). Unknown tokens are ignored. */
  async revokeRefreshToken(refreshToken: string, clientId?: string): Promise<{ grantId: string; userId: string } | undefined> {
    const row = await findRefreshToken(this.db, hashSecret(refreshToken));
    if (!row || (clientId !== undefined && row.app_id !== clientId)) return undefined;
    const grant = await findGrant(this.db, row.grant_id);
    const now = this.clock.now();
    await this.db.transaction().execute(async (trx) => {
      await revokeGrant(trx, row.grant_id, now, 'logout');
      // The end of a live sign-in of the app (also the user.signed_out webhook, docs/webhooks.md).
      if (grant && grant.revoked_at === null) {
        await appendEvent(trx, now, { type: 'user.signed_out', appId: grant.app_id, userId: grant.user_id, data: { grant_id: grant.id } });
      }
    });
    return grant ? { grantId: grant.id, userId: grant.user_id } : undefined;
  }

  /** Issues a single-use authorization code (60 s) bound to client, redirect_uri and PKCE challenge. */
  async issueAuthorizationCode(
    db: Kysely<Database>,
    input: {
      appId: string;
      userId: string;
      redirectUri: string;
      scope: string;
      codeChallenge: string | null;
      nonce: string | null;
      authTime: number;
      amr: readonly Amr[];
      /** The browser that asked for the code: its redemption's grant records it. */
      device?: Device;
      /** `dpop_jkt` of the authorization request: the redemption must prove this key (RFC 9449 §10). */
      dpopJkt?: string;
      /** That browser session's public `sid`, which the grant and its ID tokens take over. */
      sid?: string | null;
      /** RFC 8707: the resources the request named; the grant keeps them. */
      resources?: readonly string[];
    },
  ): Promise<string> {
    const now = this.clock.now();
    const code = newOrderedSecret('ac');
    await insertAuthorizationCode(db, {
      code_hash: hashSecret(code),
      app_id: input.appId,
      user_id: input.userId,
      redirect_uri: input.redirectUri,
      scope: joinScope(scopeList(input.scope)),
      code_challenge: input.codeChallenge,
      nonce: input.nonce,
      auth_time: input.authTime,
      amr: serializeAmr(input.amr),
      created_at: now,
      expires_at: now + this.config.ttl.authorizationCode,
      consumed_at: null,
      grant_id: null,
      user_agent: input.device?.userAgent ?? null,
      ip_area: input.device?.ipArea ?? null,
      dpop_jkt: input.dpopJkt ?? null,
      sid: input.sid ?? null,
      resources: input.resources?.length ? input.resources.join(' ') : null,
    });
    return code;
  }

  /** Session JWT (`typ: session+jwt`, claim `typ: end_user`), bound to the app in `aud`. */
  async mintSession(input: { userId: string; appId: string; grantId: string }): Promise<string> {
    return this.keys.sign(
      { sub: input.userId, aud: input.appId, typ: 'end_user', sid: input.grantId },
      { alg: 'ES256', typ: 'session+jwt', expiresIn: this.config.ttl.session },
    );
  }

  /**
   * Verifies a session JWT (for `appId` when given); null when invalid, expired, revoked or another
   * app's. Only the token itself can make it invalid: a database that cannot be asked whether the
   * grant is live throws (→ 503), it never turns a valid session into a rejected one.
   */
  async checkSession(token: string, appId?: string): Promise<SessionClaims | null> {
    let payload: Awaited<ReturnType<KeyStore['verify']>>;
    try {
      payload = await this.keys.verify(token, { typ: 'session+jwt', algorithms: ['ES256'], audience: appId });
    } catch (error) {
      if (error instanceof joseErrors.JOSEError) return null;
      throw error;
    }
    const aud = payload.aud;
    if (payload.typ !== 'end_user' || typeof payload.sid !== 'string' || typeof aud !== 'string' || typeof payload.sub !== 'string') return null;
    if (!(await isGrantLive(this.db, payload.sid, this.clock.now()))) return null;
    return { sub: payload.sub, appId: aud, grantId: payload.sid, exp: payload.exp! };
  }

  /** Like checkSession, but a failure is 400 `invalid_token` (session passed as a body parameter). */
  async verifySession(token: string, appId?: string): Promise<SessionClaims> {
    const claims = await this.checkSession(token, appId);
    if (!claims) throw new AppError('invalid_token', { detail: 'session JWT invalid, expired, revoked or for another app' });
    return claims;
  }

  /**
   * An ID token of ours offered back as `id_token_hint` (RP-Initiated Logout 1.0 §2): signature, `typ`
   * and issuer are checked, expiry is not (as §2 allows), so an app can still sign its user out after
   * the ID token expired. Null when it is not an ID token this server issued.
   */
  async checkIdTokenHint(token: string): Promise<{ sub: string; appId: string } | null> {
    let payload: Awaited<ReturnType<KeyStore['verify']>>;
    try {
      payload = await this.keys.verify(token, { typ: 'JWT', algorithms: ['RS256', 'ES256'] });
    } catch (error) {
      // jose checks `exp` after the signature, typ and issuer, so an expired token has passed those.
      if (error instanceof joseErrors.JWTExpired && error.claim === 'exp') payload = error.payload;
      else if (error instanceof joseErrors.JOSEError) return null;
      else throw error;
    }
    const { sub, aud } = payload;
    if (typeof sub !== 'string' || typeof aud !== 'string') return null;
    return { sub, appId: aud };
  }

  /**
   * The grant `id` as `reader` reads it, if live. On PostgreSQL the reads of concurrent bearer checks
   * share one statement (Coalescer): its round trip, not the lookup, is most of a check's cost there. Liveness is then judged at the time that statement is sent, after
   * each of its reads was asked, so a grant revoked before a check began is refused as before. SQLite
   * runs in process, so each read is its own statement, at once.
   */
  private readLiveGrant<G extends LiveGrant>(reader: LiveGrantReader<G>, id: string): Promise<G | undefined> {
    if (!this.coalescedGrantReads) return reader.one(this.db, id, this.clock.now());
    let reads = this.coalescedGrantReads.get(reader) as Coalescer<string, G> | undefined;
    if (!reads) {
      reads = new Coalescer((ids) => reader.many(this.db, ids, this.clock.now()), { maxBatch: MAX_COALESCED });
      this.coalescedGrantReads.set(reader, reads);
    }
    return reads.submit(id);
  }

  /** An access token's verified payload (signature, `typ`, issuer, expiry), or null. */
  private async verifiedAccessToken(token: string): Promise<Record<string, unknown> | null> {
    try {
      return (await this.keys.verify(token, { typ: 'at+jwt', algorithms: ['ES256'] })) as Record<string, unknown>;
    } catch (error) {
      if (error instanceof joseErrors.JOSEError) return null;
      throw error;
    }
  }

  /**
   * Verifies a user's access token (RFC 9068 profile) and that its grant is still live; null otherwise (as
   * checkSession). Unless `anyAudience` (revocation and introspection by its client), its audience must
   * include Gatehouse: a token narrowed to another API is refused (docs/reference/oauth.md#resource-indicators-rfc-8707).
   */
  async checkAccessToken<G extends LiveGrant = LiveGrant>(
    token: string,
    readGrant: LiveGrantReader<G> = liveGrants as LiveGrantReader<G>,
    options: { anyAudience?: boolean } = {},
  ): Promise<AccessTokenClaims<G> | null> {
    const payload = await this.verifiedAccessToken(token);
    if (!payload) return null;
    const { sub, client_id: clientId, scope, sid, jti, aud, cnf } = payload;
    // No `sid`: no user grant (a client-credentials token, checkClientToken), never a user.
    if (typeof sub !== 'string' || typeof clientId !== 'string' || typeof scope !== 'string' || typeof sid !== 'string' || typeof jti !== 'string') return null;
    if (typeof aud !== 'string' && !Array.isArray(aud)) return null;
    if (!options.anyAudience && !audienceIncludesUs(aud, clientId, this.config.baseUrl)) return null;
    const jkt = this.boundKey(cnf);
    if (jkt === null) return null;
    const grant = await this.readLiveGrant(readGrant, sid);
    if (!grant || grant.app.id !== clientId) return null;
    return { sub, clientId, scope, grantId: sid, jti, exp: payload.exp as number, jkt, aud: aud as string | string[], grant };
  }

  /** `cnf.jkt` of a token: undefined when unbound, null when `cnf` is malformed. */
  private boundKey(cnf: unknown): string | undefined | null {
    if (cnf === undefined) return undefined;
    const jkt = (cnf as { jkt?: unknown } | null)?.jkt;
    return typeof jkt === 'string' ? jkt : null;
  }

  /**
   * A client-credentials access token for `app` (docs/reference/oauth.md#client-credentials): `sub` is the
   * client (RFC 9068 §2.2), `aud` the resources, no `sid` (no user grant: Gatehouse's own endpoints
   * never accept it), bound to the DPoP key of the request's proof if it had one.
   */
  async issueClientToken(input: { app: App; scope: string; audience: readonly string[]; dpopJkt?: string }): Promise<ClientTokenResponse> {
    const ttl = this.config.ttl.accessToken;
    const accessToken = await this.keys.sign(
      {
        sub: input.app.id, aud: audienceOf(input.audience), client_id: input.app.id, scope: input.scope, jti: newId('at'),
        ...(input.dpopJkt !== undefined ? { cnf: { jkt: input.dpopJkt } } : {}),
      },
      { alg: 'ES256', typ: 'at+jwt', expiresIn: ttl },
    );
    return { access_token: accessToken, token_type: input.dpopJkt !== undefined ? 'DPoP' : 'Bearer', expires_in: ttl, scope: input.scope };
  }

  /**
   * A client-credentials token of ours, if still valid: its app exists, is enabled, confidential, still
   * allowed the grant, and has not revoked the app's client tokens since it was issued (RFC 7009); null otherwise.
   */
  async checkClientToken(token: string): Promise<ClientTokenClaims | null> {
    const payload = await this.verifiedAccessToken(token);
    if (!payload) return null;
    const { sub, client_id: clientId, scope, sid, jti, aud, iat, exp, cnf } = payload;
    if (typeof clientId !== 'string' || sub !== clientId || sid !== undefined || typeof scope !== 'string' || typeof jti !== 'string' || typeof iat !== 'number') return null;
    if (typeof aud !== 'string' && !Array.isArray(aud)) return null;
    const jkt = this.boundKey(cnf);
    if (jkt === null) return null;
    const app = await findApp(this.db, clientId);
    if (!app || app.disabled || app.type !== 'confidential' || !app.clientCredentials.enabled) return null;
    if (app.clientCredentials.notBefore !== null && iat <= app.clientCredentials.notBefore) return null;
    return { clientId, scope, aud: aud as string | string[], jti, iat, exp: exp as number, jkt };
  }

  /**
   * RFC 9449 §7: a DPoP-bound access token only with the DPoP scheme and a proof by its key naming it in
   * `ath`; an unbound one only as a bearer token. The proof's `htu` is this endpoint under BASE_URL.
   */
  private async checkSenderConstraint(request: FastifyRequest, reply: FastifyReply | undefined, token: string, scheme: PresentedToken['scheme'], jkt: string | undefined): Promise<void> {
    if (jkt === undefined) {
      if (scheme === 'dpop') throw new AppError('unauthorized', { headers: { 'www-authenticate': this.dpop.challenge('invalid_token') }, detail: 'unbound token with the DPoP scheme' });
      return;
    }
    if (scheme !== 'dpop') throw new AppError('unauthorized', { headers: { 'www-authenticate': this.dpop.challenge('invalid_token') }, detail: 'DPoP-bound token presented as Bearer' });
    const path = request.url.split('?', 1)[0]!;
    const proven = await this.dpop.proofKey(request, reply, { path, site: 'resource', accessToken: token });
    if (proven === undefined) throw this.dpop.keyMismatch('resource', 'DPoP scheme without a proof');
    if (proven !== jkt) throw this.dpop.keyMismatch('resource', 'proof made with another key than the token is bound to');
  }

  /**
   * Authenticates `Authorization: Bearer …` at Gatehouse's own resource endpoints. Access tokens always;
   * session JWTs only where the contract allows them (`allowSession`); the `access_token` field of a
   * form-encoded POST body only where `allowFormBody` (RFC 6750 §2.2). The token never comes from the query.
   * `readGrant` reads the grant's liveness (liveGrants unless a route reads more in the same statement).
   */
  async authenticate<G extends LiveGrant = LiveGrant>(
    request: FastifyRequest,
    options: { allowSession?: boolean; allowFormBody?: boolean; readGrant?: LiveGrantReader<G>; reply?: FastifyReply } = {},
  ): Promise<BearerIdentity<G>> {
    try {
      return await this.identify(request, options);
    } catch (error) {
      throw this.withResourceMetadata(error);
    }
  }

  /**
   * A 401 of Gatehouse's own resource endpoints names their protected-resource metadata (RFC 9728 §5.1,
   * docs/reference/oauth.md#protected-resource-metadata-rfc-9728), so a client can find the authorization server.
   */
  private withResourceMetadata(error: unknown): unknown {
    if (!(error instanceof AppError) || error.status !== 401) return error;
    const challenge = error.headers?.['www-authenticate'] ?? 'Bearer error="invalid_token"';
    return new AppError(error.code, {
      status: error.status, message: error.publicMessage, detail: error.detail, reason: error.reason, details: error.details, extra: error.extra, messageKey: error.messageKey, cause: error,
      headers: { ...error.headers, 'www-authenticate': `${challenge}, resource_metadata="${this.config.baseUrl}${PROTECTED_RESOURCE_PATH}"` },
    });
  }

  private async identify<G extends LiveGrant>(
    request: FastifyRequest,
    options: { allowSession?: boolean; allowFormBody?: boolean; readGrant?: LiveGrantReader<G>; reply?: FastifyReply },
  ): Promise<BearerIdentity<G>> {
    const readGrant = options.readGrant ?? (liveGrants as LiveGrantReader<G>);
    const { token, scheme } = presentedToken(request, options.allowFormBody === true);
    let typ: unknown;
    try {
      typ = decodeProtectedHeader(token).typ;
    } catch {
      throw new AppError('unauthorized', { detail: 'not a JWT' });
    }
    if (options.allowSession && scheme === 'bearer' && typeof typ === 'string' && typ.toLowerCase() === 'session+jwt') {
      const session = await this.checkSession(token);
      if (!session) throw new AppError('unauthorized', { detail: 'session JWT rejected' });
      const grant = await this.readLiveGrant(readGrant, session.grantId);
      if (!grant || grant.app.id !== session.appId) throw new AppError('unauthorized', { detail: 'session JWT rejected' });
      // A sign-in still waiting for its second factor is no credential yet.
      if (grant.awaiting === AWAITING.secondFactor) throw new AppError('unauthorized', { detail: 'session awaits its second factor' });
      return { kind: 'session', userId: session.sub, appId: session.appId, scope: grant.scope, grantId: session.grantId, grant };
    }
    const claims = await this.checkAccessToken(token, readGrant);
    if (!claims) throw new AppError('unauthorized', { detail: 'access token rejected' });
    await this.checkSenderConstraint(request, options.reply, token, scheme, claims.jkt);
    return { kind: 'access', userId: claims.sub, appId: claims.clientId, scope: claims.scope, grantId: claims.grantId, grant: claims.grant };
  }
}
