import { createRemoteJWKSet, errors as joseErrors, type JWTPayload, type JWTVerifyGetKey, type JWTVerifyOptions, jwtVerify } from 'jose';
import type { Kysely } from 'kysely';
import * as oidc from 'openid-client';
import type { ResolvedConfig } from '../config.js';
import { AppError, isAppError } from '../errors.js';
import { SecretBox } from '../shared/crypto.js';
import { sha256 } from '../shared/sha256.js';
import { isHttpsOrLoopback, isLoopbackHost } from '../shared/loopback.js';
import { deleteSetting, getSetting, IDP_SECRET_PURPOSE, IDP_SETTING_KEY, type IdpSetting, putSetting } from '../storage/repos/settings.js';
import type { Database } from '../storage/schema.js';

/**
 * The one external OpenID Connect provider (docs/guides/identity-provider.md#start-and-callback, docs/guides/identity-provider.md#native-exchange-and-resume): its configuration (environment first,
 * then the `idp` setting), and Gatehouse as its client. openid-client does the discovery, the
 * authorization URL and the code exchange (client authentication, PKCE, state, RFC 9207 `iss`, nonce
 * and the id_token's claims); jose verifies every id_token's signature and claims, the one the app
 * presents (native path A) as well as those fetched here: openid-client has no call for a token it did
 * not fetch itself, and checks signatures only through a JWKS cache of its own. jose's remote JWKS keeps
 * the keys an hour and refetches them on an unknown `kid` unless it did less than a minute ago. Every
 * request to the provider times out after 5 s and follows no redirect; plain http only for a loopback
 * issuer.
 */

export interface ProviderConfig {
  issuer: string;
  clientId: string;
  clientSecret?: string;
  /** Accepted `aud` values for native id_tokens (docs/guides/identity-provider.md#configuration). */
  audiences: string[];
  name: string;
  source: 'env' | 'settings';
}

/** Asymmetric JWS algorithms we accept from the provider (never HS*, never none). */
const ASYMMETRIC_ALGS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/** Allowed clock skew for `iat`/`exp`. */
const CLOCK_SKEW_S = 60;
/** How long a discovery document (and the JWKS fetched with it) is used. */
const METADATA_TTL_S = 3600;
/** An unknown `kid` refetches the JWKS unless it was fetched less than this long ago. */
const JWKS_REFETCH_INTERVAL_S = 60;
/** After a failed discovery or JWKS fetch, the failure is answered from memory this long, without a new request. */
export const FAILURE_BACKOFF_S = 10;
const TIMEOUT_S = 5;

// Configuration -----------------------------------------------------------------------------------------

export function providerFromEnv(config: ResolvedConfig): ProviderConfig | undefined {
  const idp = config.idp;
  if (!idp) return undefined;
  return { issuer: idp.issuer, clientId: idp.clientId, clientSecret: idp.clientSecret, audiences: idp.audiences, name: idp.name, source: 'env' };
}

/** The active provider configuration: the environment wins, otherwise the `idp` setting; undefined when none. */
export async function loadProviderConfig(db: Kysely<Database>, config: ResolvedConfig): Promise<ProviderConfig | undefined> {
  const fromEnv = providerFromEnv(config);
  if (fromEnv) return fromEnv;
  const setting = await getSetting<IdpSetting>(db, IDP_SETTING_KEY);
  if (!setting) return undefined;
  const box = new SecretBox(config.secretKey, IDP_SECRET_PURPOSE);
  return {
    issuer: setting.issuer,
    clientId: setting.client_id,
    clientSecret: setting.client_secret_sealed ? box.open(setting.client_secret_sealed) : undefined,
    audiences: setting.audiences.length ? setting.audiences : [setting.client_id],
    name: setting.name,
    source: 'settings',
  };
}

export async function saveProviderSetting(
  db: Kysely<Database>,
  config: ResolvedConfig,
  input: { issuer: string; client_id: string; client_secret?: string | null; audiences?: string[]; name: string },
  at: number,
): Promise<IdpSetting> {
  const box = new SecretBox(config.secretKey, IDP_SECRET_PURPOSE);
  const setting: IdpSetting = {
    issuer: input.issuer,
    client_id: input.client_id,
    client_secret_sealed: input.client_secret ? box.seal(input.client_secret) : null,
    audiences: input.audiences && input.audiences.length ? [...new Set(input.audiences)] : [input.client_id],
    name: input.name,
  };
  await putSetting(db, IDP_SETTING_KEY, setting, at);
  return setting;
}

export const deleteProviderSetting = (db: Kysely<Database>): Promise<boolean> => deleteSetting(db, IDP_SETTING_KEY);

/** docs/guides/identity-provider.md#configuration: https, or http on a loopback host; no query, fragment or credentials. */
export function isValidIssuer(issuer: string): boolean {
  if (!isHttpsOrLoopback(issuer)) return false;
  const u = new URL(issuer);
  return !u.search && !u.hash && !u.username && !u.password;
}

// The provider as discovered -----------------------------------------------------------------------------

/** What discovery gives: the provider's metadata, and its keys (jose's remote JWKS, with a back-off after a failed fetch). */
export interface Upstream {
  metadata: oidc.ServerMetadata;
  keys: JWTVerifyGetKey;
}

/** Plain http is allowed for a loopback issuer only (docs/guides/identity-provider.md#configuration); openid-client refuses it otherwise. */
const isLoopbackHttp = (url: string): boolean => {
  const u = new URL(url);
  return u.protocol === 'http:' && isLoopbackHost(u.hostname);
};

const unavailable = (detail: string, cause?: unknown): AppError => new AppError('idp_unavailable', { detail, cause });

/** Failures of the JWKS itself; a key that is not there, or several that might be, are the token's problem. */
const isKeySelection = (error: unknown): boolean =>
  error instanceof joseErrors.JWKSNoMatchingKey || error instanceof joseErrors.JWKSMultipleMatchingKeys || error instanceof joseErrors.JOSENotSupported;

/**
 * The discovered provider per issuer: discovered once an hour (concurrent callers share one
 * discovery), its JWKS fetched on first use. After a failed discovery or JWKS fetch, callers get the
 * same 502 for FAILURE_BACKOFF_S without a new request to the provider. `clear()` forgets everything
 * (the configuration changed).
 */
export class ProviderCache {
  private readonly discovered = new Map<string, { upstream: Promise<Upstream>; at: number }>();
  private readonly failures = new Map<string, { error: AppError; at: number }>();

  constructor(private readonly now: () => number) {}

  upstream(provider: ProviderConfig): Promise<Upstream> {
    const { issuer } = provider;
    const failure = this.failures.get(`discovery ${issuer}`);
    if (failure && this.now() - failure.at < FAILURE_BACKOFF_S) return Promise.reject(failure.error);
    const cached = this.discovered.get(issuer);
    if (cached && this.now() - cached.at < METADATA_TTL_S) return cached.upstream;
    const entry = { upstream: this.discover(provider), at: this.now() };
    this.discovered.set(issuer, entry);
    entry.upstream.then(
      () => this.failures.delete(`discovery ${issuer}`),
      (error: AppError) => {
        if (this.discovered.get(issuer) === entry) this.discovered.delete(issuer);
        this.failures.set(`discovery ${issuer}`, { error, at: this.now() });
      },
    );
    return entry.upstream;
  }

  clear(): void {
    this.discovered.clear();
    this.failures.clear();
  }

  private async discover({ issuer, clientId }: ProviderConfig): Promise<Upstream> {
    let metadata: oidc.ServerMetadata;
    try {
      const found = await oidc.discovery(new URL(issuer), clientId, undefined, undefined, {
        timeout: TIMEOUT_S,
        execute: isLoopbackHttp(issuer) ? [oidc.allowInsecureRequests] : [],
      });
      metadata = found.serverMetadata();
    } catch (cause) {
      throw unavailable('discovery failed', cause);
    }
    // openid-client compares issuers as URLs; tokens are checked against the configured one, exactly.
    if (metadata.issuer !== issuer) throw unavailable('discovery issuer does not match the configured issuer');
    for (const field of ['authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const) {
      if (!isHttpsOrLoopback(metadata[field] ?? '')) throw unavailable(`discovery ${field} missing or not https`);
    }
    const jwks = createRemoteJWKSet(new URL(metadata.jwks_uri!), {
      timeoutDuration: TIMEOUT_S * 1000,
      cacheMaxAge: METADATA_TTL_S * 1000,
      cooldownDuration: JWKS_REFETCH_INTERVAL_S * 1000,
    });
    const keys: JWTVerifyGetKey = async (header, token) => {
      const failure = this.failures.get(`jwks ${issuer}`);
      if (failure && this.now() - failure.at < FAILURE_BACKOFF_S) throw failure.error;
      try {
        return await jwks(header, token);
      } catch (cause) {
        if (isKeySelection(cause)) throw cause;
        const error = unavailable('JWKS fetch failed', cause);
        this.failures.set(`jwks ${issuer}`, { error, at: this.now() });
        throw error;
      }
    };
    return { metadata, keys };
  }
}

// The authorization request and the code exchange (openid-client) ---------------------------------------------

/**
 * Gatehouse as the provider's client, per call: the secret may have changed since discovery. The
 * secret goes in the Basic header unless the provider takes it only in the body; without one,
 * `client_id` goes in the body.
 */
function clientOf(provider: ProviderConfig, metadata: oidc.ServerMetadata): oidc.Configuration {
  const methods = metadata.token_endpoint_auth_methods_supported ?? ['client_secret_basic'];
  const auth = !provider.clientSecret
    ? oidc.None()
    : methods.includes('client_secret_basic') || !methods.includes('client_secret_post')
      ? oidc.ClientSecretBasic(provider.clientSecret)
      : oidc.ClientSecretPost(provider.clientSecret);
  const config = new oidc.Configuration(metadata, provider.clientId, { [oidc.clockTolerance]: CLOCK_SKEW_S }, auth);
  config.timeout = TIMEOUT_S;
  if (isLoopbackHttp(provider.issuer)) oidc.allowInsecureRequests(config);
  return config;
}

/** The provider's authorization URL for a code flow with PKCE (S256) and a nonce. */
export async function authorizationUrl(
  provider: ProviderConfig,
  metadata: oidc.ServerMetadata,
  request: { redirectUri: string; scope: string; state: string; nonce: string; codeVerifier: string },
): Promise<string> {
  return oidc
    .buildAuthorizationUrl(clientOf(provider, metadata), {
      redirect_uri: request.redirectUri,
      scope: request.scope,
      state: request.state,
      nonce: request.nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(request.codeVerifier),
      code_challenge_method: 'S256',
    })
    .toString();
}

/** openid-client's codes for an id_token (or a token response) that fails its checks. */
const REFUSED_RESPONSE = new Set(['OAUTH_JWT_CLAIM_COMPARISON_FAILED', 'OAUTH_JWT_TIMESTAMP_CHECK_FAILED', 'OAUTH_INVALID_RESPONSE']);

/**
 * What a failed code exchange means: a 4xx from the token endpoint is the provider refusing the code
 * (401 `invalid_idp_code`); an answer that fails openid-client's checks is 401 `invalid_id_token`;
 * anything else — a timeout, a network error, a 5xx — is 502 `idp_unavailable`, never a 401.
 */
function exchangeFailure(error: unknown): AppError {
  const status =
    error instanceof oidc.ResponseBodyError || error instanceof oidc.WWWAuthenticateChallengeError
      ? error.status
      : error instanceof oidc.ClientError && error.cause instanceof Response
        ? error.cause.status
        : undefined;
  // Never the error itself as the cause: openid-client's may hold the token response, which is never logged.
  if (status !== undefined && status >= 400 && status < 500) return new AppError('invalid_idp_code', { detail: `provider token endpoint answered ${status}` });
  if (error instanceof oidc.ClientError && REFUSED_RESPONSE.has(error.code ?? '')) {
    return new AppError('invalid_id_token', { detail: error.cause instanceof Error ? error.cause.message : error.message });
  }
  if (status !== undefined) return unavailable(`token endpoint answered ${status}`);
  const reason = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
  const code = (error as { cause?: { code?: unknown } } | undefined)?.cause?.code;
  return unavailable(`token request failed: ${reason}${typeof code === 'string' ? ` (${code})` : ''}`);
}

/**
 * Redeems the code of our own authorization request at the provider's callback: openid-client checks
 * the state, the `iss` parameter (RFC 9207), the PKCE verifier, and the id_token's claims and nonce.
 * Returns the id_token (for the caller's signature check, as for any other).
 */
export async function redeemBrowserCode(
  provider: ProviderConfig,
  metadata: oidc.ServerMetadata,
  callback: URL,
  checks: { state: string; nonce: string; codeVerifier: string },
): Promise<string> {
  try {
    const tokens = await oidc.authorizationCodeGrant(clientOf(provider, metadata), callback, {
      expectedState: checks.state,
      expectedNonce: checks.nonce,
      pkceCodeVerifier: checks.codeVerifier,
      idTokenExpected: true,
    });
    // idTokenExpected: openid-client has refused an answer without one.
    return tokens.id_token!;
  } catch (error) {
    throw exchangeFailure(error);
  }
}

/**
 * Redeems a provider code the app obtained itself (native `idp_code`): no state of ours, and the nonce
 * rule is the native one (the caller's), so a plain authorization_code grant; openid-client still
 * checks the id_token's claims.
 */
export async function redeemNativeCode(provider: ProviderConfig, metadata: oidc.ServerMetadata, input: { code: string; redirectUri: string; codeVerifier?: string }): Promise<string> {
  let idToken: string | undefined;
  try {
    const tokens = await oidc.genericGrantRequest(clientOf(provider, metadata), 'authorization_code', {
      code: input.code,
      redirect_uri: input.redirectUri,
      ...(input.codeVerifier ? { code_verifier: input.codeVerifier } : {}),
    });
    idToken = tokens.id_token;
  } catch (error) {
    throw exchangeFailure(error);
  }
  if (!idToken) throw new AppError('invalid_idp_code', { detail: 'provider token response has no id_token' });
  return idToken;
}

// id_token verification (jose) -----------------------------------------------------------------------------

export interface IdTokenExpectations {
  issuer: string;
  /** Accepted `aud` values. */
  audiences: string[];
  /** Algorithms the provider advertises (filtered to asymmetric ones). */
  advertisedAlgs?: string[];
  now: number;
  /** Browser flow: the nonce we sent (exact). */
  nonce?: string;
  /** Native flow: the app's raw nonce; the token's nonce may equal it or its lowercase hex SHA-256. */
  nativeNonce?: string;
}

export interface VerifiedIdToken {
  claims: JWTPayload & { sub: string; iss: string; exp: number; iat: number };
  /** SHA-256 of the token's signing input: the replay key. */
  replayKey: string;
}

const reject = (detail: string, cause?: unknown): AppError => new AppError('invalid_id_token', { detail, cause });

function allowedAlgorithms(advertised: string[] | undefined): string[] {
  const list = advertised && advertised.length ? advertised : ['RS256'];
  return list.filter((a) => ASYMMETRIC_ALGS.includes(a));
}

/** jose leaves the choice among several keys without `kid` to the caller: the first that verifies wins. */
async function verifyWithEither(token: string, candidates: joseErrors.JWKSMultipleMatchingKeys, options: JWTVerifyOptions): Promise<JWTPayload> {
  for await (const key of candidates) {
    try {
      return (await jwtVerify(token, key, options)).payload;
    } catch (error) {
      if (!(error instanceof joseErrors.JWSSignatureVerificationFailed)) throw error;
    }
  }
  throw new joseErrors.JWSSignatureVerificationFailed();
}

/**
 * Verifies a provider id_token (OIDC Core §3.1.3.7) with jose: signature with the provider's JWKS only
 * (the token's own `jku`/`jwk`/`x5u`/`x5c` are never used), asymmetric advertised algorithms only,
 * exact `iss`, `aud` ∈ audiences (and `azp` when several audiences or when present), `exp`, `iat`
 * (required, not more than 60 s in the future), and the nonce. Any failure is 401 `invalid_id_token`;
 * an unreachable provider is 502 `idp_unavailable`.
 */
export async function verifyIdToken(token: string, expect: IdTokenExpectations, keys: JWTVerifyGetKey): Promise<VerifiedIdToken> {
  const options: JWTVerifyOptions = {
    algorithms: allowedAlgorithms(expect.advertisedAlgs),
    issuer: expect.issuer,
    audience: expect.audiences,
    currentDate: new Date(expect.now * 1000),
    clockTolerance: CLOCK_SKEW_S,
    requiredClaims: ['iss', 'sub', 'aud', 'exp', 'iat'],
  };
  let payload: JWTPayload;
  try {
    payload = (await jwtVerify(token, keys, options)).payload;
  } catch (error) {
    if (isAppError(error)) throw error;
    try {
      if (!(error instanceof joseErrors.JWKSMultipleMatchingKeys)) throw error;
      payload = await verifyWithEither(token, error, options);
    } catch (failure) {
      throw reject(failure instanceof Error ? failure.message : 'verification failed', failure);
    }
  }

  if (typeof payload.sub !== 'string' || payload.sub.length === 0 || payload.sub.length > 255) throw reject('sub missing');
  const aud = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
  const azp = (payload as { azp?: unknown }).azp;
  if (aud.length > 1 && azp === undefined) throw reject('azp required with several audiences');
  if (azp !== undefined && (typeof azp !== 'string' || !expect.audiences.includes(azp))) throw reject('azp not accepted');
  if (typeof payload.iat !== 'number' || payload.iat > expect.now + CLOCK_SKEW_S) throw reject('iat in the future');

  const nonce = (payload as { nonce?: unknown }).nonce;
  if (expect.nonce !== undefined) {
    if (typeof nonce !== 'string' || nonce !== expect.nonce) throw reject('nonce mismatch');
  } else if (expect.nativeNonce !== undefined) {
    if (typeof nonce !== 'string' || (nonce !== expect.nativeNonce && nonce !== sha256(expect.nativeNonce, 'hex'))) throw reject('nonce mismatch');
  }
  const [h, p] = token.split('.');
  return {
    claims: payload as VerifiedIdToken['claims'],
    replayKey: sha256(`${h}.${p}`, 'base64url'),
  };
}
