import { type JWK, type JWTPayload, type ProtectedHeaderParameters, decodeProtectedHeader, errors as joseErrors, importJWK, jwtVerify } from 'jose';
import type { Kysely } from 'kysely';
import type { ResolvedConfig } from '../config.js';
import { AppError } from '../errors.js';
import { SecretBox } from '../shared/crypto.js';
import { sha256 } from '../shared/sha256.js';
import { isHttpsOrLoopback } from '../shared/loopback.js';
import { deleteSetting, getSetting, IDP_SECRET_PURPOSE, IDP_SETTING_KEY, type IdpSetting, putSetting } from '../storage/repos/settings.js';
import type { Database } from '../storage/schema.js';

/**
 * The one external OpenID Connect provider (CONTRACT §4.2–4.5, SECURITY.md F): its configuration
 * (environment first, then the `idp` setting), discovery, a JWKS cache that refetches once on an
 * unknown `kid` (at most once a minute), id_token verification and the code exchange.
 * Every outbound fetch has a timeout, a size cap, and never follows a redirect to another origin.
 */

export interface ProviderConfig {
  issuer: string;
  clientId: string;
  clientSecret?: string;
  /** Accepted `aud` values for native id_tokens (CONTRACT §0). */
  audiences: string[];
  name: string;
  source: 'env' | 'settings';
}

export interface ProviderMetadata {
  issuer: string;
  authorization_endpoint: string;
  token_endpoint: string;
  jwks_uri: string;
  id_token_signing_alg_values_supported?: string[];
  token_endpoint_auth_methods_supported?: string[];
  code_challenge_methods_supported?: string[];
  authorization_response_iss_parameter_supported?: boolean;
}

/** Asymmetric JWS algorithms we accept from the provider (never HS*, never none). */
const ASYMMETRIC_ALGS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519'];
/** Allowed clock skew for `iat`/`exp`. */
export const CLOCK_SKEW_S = 60;
const METADATA_TTL_S = 3600;
const JWKS_TTL_S = 3600;
/** Unknown-kid refetches are rate limited to one per this many seconds. */
export const JWKS_REFETCH_INTERVAL_S = 60;
/** After a failed discovery or JWKS fetch, the failure is answered from memory this long (SECURITY.md item 48d). */
export const FAILURE_BACKOFF_S = 10;
const FETCH_TIMEOUT_MS = 5000;
const MAX_BODY_BYTES = 512 * 1024;

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

/** CONTRACT §14.2: https, or http on a loopback host; no query, fragment or credentials. */
export function isValidIssuer(issuer: string): boolean {
  if (!isHttpsOrLoopback(issuer)) return false;
  const u = new URL(issuer);
  return !u.search && !u.hash && !u.username && !u.password;
}

// Fetching ------------------------------------------------------------------------------------------------

export type Fetcher = typeof fetch;

/**
 * GET/POST with a timeout and a size cap. Redirects are followed only within the same origin (at most 3);
 * a redirect elsewhere fails. Any network problem is `idp_unavailable` (502): we never fail open.
 */
export async function safeFetch(fetcher: Fetcher, url: string, init: RequestInit = {}): Promise<{ status: number; body: string; contentType: string }> {
  let current = url;
  for (let hop = 0; hop < 4; hop++) {
    let res: Response;
    try {
      res = await fetcher(current, { ...init, redirect: 'manual', signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
    } catch (cause) {
      throw new AppError('idp_unavailable', { detail: `fetch ${new URL(current).origin}${new URL(current).pathname} failed`, cause });
    }
    if (res.status >= 300 && res.status < 400) {
      const location = res.headers.get('location');
      await res.body?.cancel().catch(() => undefined);
      if (!location || init.method === 'POST') throw new AppError('idp_unavailable', { detail: `provider answered ${res.status} redirect` });
      const next = new URL(location, current);
      if (next.origin !== new URL(current).origin) throw new AppError('idp_unavailable', { detail: 'provider redirected to another origin' });
      current = next.toString();
      continue;
    }
    const declared = Number(res.headers.get('content-length') ?? '0');
    if (declared > MAX_BODY_BYTES) {
      await res.body?.cancel().catch(() => undefined);
      throw new AppError('idp_unavailable', { detail: 'provider response too large' });
    }
    let body: string;
    try {
      const buf = await res.arrayBuffer();
      if (buf.byteLength > MAX_BODY_BYTES) throw new Error('too large');
      body = new TextDecoder().decode(buf);
    } catch (cause) {
      throw new AppError('idp_unavailable', { detail: 'reading the provider response failed', cause });
    }
    return { status: res.status, body, contentType: res.headers.get('content-type') ?? '' };
  }
  throw new AppError('idp_unavailable', { detail: 'too many redirects' });
}

function parseJsonObject(body: string, what: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(body);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // fall through
  }
  throw new AppError('idp_unavailable', { detail: `${what} is not a JSON object` });
}

// Discovery and JWKS caches ------------------------------------------------------------------------------------

interface CachedJwks {
  keys: JWK[];
  fetchedAt: number;
}

/**
 * Per-issuer caches of the discovery document and the JWKS. Keys are bound to the issuer they were
 * fetched for (item 44): a cache entry is only ever used for tokens verified against that issuer.
 */
export class ProviderCache {
  private readonly metadata = new Map<string, { value: ProviderMetadata; fetchedAt: number }>();
  private readonly jwks = new Map<string, CachedJwks>();
  private readonly lastForcedFetch = new Map<string, number>();
  /** Fetches in flight, shared by concurrent callers (a cold or expired cache must not cause a fetch per request). */
  private readonly inflight = new Map<string, Promise<unknown>>();
  /** Counts JWKS fetches (observability and tests). */
  jwksFetches = 0;

  constructor(
    private readonly now: () => number,
    private readonly fetcher: Fetcher = fetch,
  ) {}

  /** Recent failed fetches: while the provider is down, callers get the same error without a new outbound request. */
  private readonly failures = new Map<string, { error: unknown; at: number }>();

  private shared<T>(key: string, run: () => Promise<T>): Promise<T> {
    const failure = this.failures.get(key);
    if (failure && this.now() - failure.at < FAILURE_BACKOFF_S) return Promise.reject(failure.error);
    const running = this.inflight.get(key) as Promise<T> | undefined;
    if (running) return running;
    const promise = run()
      .then(
        (value) => {
          this.failures.delete(key);
          return value;
        },
        (error: unknown) => {
          this.failures.set(key, { error, at: this.now() });
          throw error;
        },
      )
      .finally(() => this.inflight.delete(key));
    this.inflight.set(key, promise);
    return promise;
  }

  /** OpenID Connect discovery of `issuer` (cached for an hour). The document's `issuer` must equal it exactly. */
  async discover(issuer: string): Promise<ProviderMetadata> {
    const cached = this.metadata.get(issuer);
    if (cached && this.now() - cached.fetchedAt < METADATA_TTL_S) return cached.value;
    return this.shared(`discovery ${issuer}`, () => this.fetchMetadata(issuer));
  }

  private async fetchMetadata(issuer: string): Promise<ProviderMetadata> {
    const now = this.now();
    const url = `${issuer.replace(/\/$/, '')}/.well-known/openid-configuration`;
    const res = await safeFetch(this.fetcher, url, { headers: { accept: 'application/json' } });
    if (res.status !== 200) throw new AppError('idp_unavailable', { detail: `discovery answered ${res.status}` });
    const doc = parseJsonObject(res.body, 'discovery document');
    if (doc.issuer !== issuer) throw new AppError('idp_unavailable', { detail: 'discovery issuer does not match the configured issuer' });
    for (const field of ['authorization_endpoint', 'token_endpoint', 'jwks_uri'] as const) {
      if (typeof doc[field] !== 'string' || !isHttpsOrLoopback(doc[field] as string)) {
        throw new AppError('idp_unavailable', { detail: `discovery ${field} missing or not https` });
      }
    }
    const value = doc as unknown as ProviderMetadata;
    this.metadata.set(issuer, { value, fetchedAt: now });
    return value;
  }

  private fetchJwks(issuer: string, jwksUri: string): Promise<CachedJwks> {
    return this.shared(`jwks ${issuer} ${jwksUri}`, () => this.loadJwks(issuer, jwksUri));
  }

  private async loadJwks(issuer: string, jwksUri: string): Promise<CachedJwks> {
    this.jwksFetches++;
    const res = await safeFetch(this.fetcher, jwksUri, { headers: { accept: 'application/json, application/jwk-set+json' } });
    if (res.status !== 200) throw new AppError('idp_unavailable', { detail: `JWKS answered ${res.status}` });
    const doc = parseJsonObject(res.body, 'JWKS');
    if (!Array.isArray(doc.keys)) throw new AppError('idp_unavailable', { detail: 'JWKS has no keys array' });
    // Public signing keys only; anything carrying private or symmetric material is ignored.
    const keys = (doc.keys as JWK[]).filter(
      (k) => k && typeof k === 'object' && (k.kty === 'RSA' || k.kty === 'EC' || k.kty === 'OKP') && k.d === undefined && (k.use === undefined || k.use === 'sig'),
    );
    const entry = { keys, fetchedAt: this.now() };
    this.jwks.set(issuer, entry);
    return entry;
  }

  /** Keys for a token header: from the cache, refetched when stale or (at most once a minute) on an unknown kid. */
  async keysFor(issuer: string, jwksUri: string, header: ProtectedHeaderParameters): Promise<JWK[]> {
    const now = this.now();
    let entry = this.jwks.get(issuer);
    let fresh = false;
    if (!entry || now - entry.fetchedAt >= JWKS_TTL_S) {
      entry = await this.fetchJwks(issuer, jwksUri);
      fresh = true;
    }
    let candidates = matchKeys(entry.keys, header);
    if (candidates.length === 0 && header.kid !== undefined && !fresh) {
      // OIDC Core §10.1.1: an unfamiliar kid means the provider rotated; refetch once, at most once a minute.
      const last = this.lastForcedFetch.get(issuer) ?? -Infinity;
      if (now - last >= JWKS_REFETCH_INTERVAL_S) {
        this.lastForcedFetch.set(issuer, now);
        entry = await this.fetchJwks(issuer, jwksUri);
        candidates = matchKeys(entry.keys, header);
      }
    }
    return candidates;
  }

  /** Forgets everything (configuration changed). */
  clear(): void {
    this.metadata.clear();
    this.jwks.clear();
    this.lastForcedFetch.clear();
    this.inflight.clear();
    this.failures.clear();
  }
}

function ktyForAlg(alg: string): string | undefined {
  if (alg.startsWith('RS') || alg.startsWith('PS')) return 'RSA';
  if (alg.startsWith('ES')) return 'EC';
  if (alg === 'EdDSA' || alg === 'Ed25519') return 'OKP';
  return undefined;
}

/** The JWKS entries a token may be verified with: same kid (when the token names one) and a matching key type. */
export function matchKeys(keys: JWK[], header: ProtectedHeaderParameters): JWK[] {
  const kty = header.alg ? ktyForAlg(header.alg) : undefined;
  if (!kty) return [];
  return keys.filter((k) => k.kty === kty && (header.kid === undefined || k.kid === header.kid) && (k.alg === undefined || k.alg === header.alg)).slice(0, 5);
}

// id_token verification -------------------------------------------------------------------------------------

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

export function allowedAlgorithms(advertised: string[] | undefined): string[] {
  const list = advertised && advertised.length ? advertised : ['RS256'];
  return list.filter((a) => ASYMMETRIC_ALGS.includes(a));
}

export const sha256Hex = (value: string): string => sha256(value, 'hex');

/**
 * Verifies a provider id_token (OIDC Core §3.1.3.7): signature with the provider's JWKS only (the
 * token's own `jku`/`jwk`/`x5u`/`x5c` are never used), asymmetric advertised algorithms only, exact
 * `iss`, `aud` ∈ audiences (and `azp` when several audiences or when present), `exp`, `iat` (required,
 * not more than 60 s in the future), and the nonce. Any failure is 401 `invalid_id_token`;
 * an unreachable provider is 502 `idp_unavailable`.
 */
export async function verifyIdToken(
  token: string,
  expect: IdTokenExpectations,
  keys: (header: ProtectedHeaderParameters) => Promise<JWK[]>,
): Promise<VerifiedIdToken> {
  if (typeof token !== 'string' || token.length > 16384 || token.split('.').length !== 3) throw reject('not a compact JWS');
  let header: ProtectedHeaderParameters;
  try {
    header = decodeProtectedHeader(token);
  } catch (cause) {
    throw reject('undecodable header', cause);
  }
  const algorithms = allowedAlgorithms(expect.advertisedAlgs);
  if (!header.alg || !algorithms.includes(header.alg)) throw reject(`algorithm ${String(header.alg)} not accepted`);
  if (header.crit !== undefined) throw reject('crit header not supported');
  const candidates = await keys(header);
  if (candidates.length === 0) throw reject('no provider key matches the token');

  let payload: JWTPayload | undefined;
  let lastError: unknown;
  for (const jwk of candidates) {
    try {
      const key = await importJWK({ ...jwk, alg: header.alg }, header.alg);
      const result = await jwtVerify(token, key, {
        algorithms: [header.alg],
        issuer: expect.issuer,
        currentDate: new Date(expect.now * 1000),
        clockTolerance: CLOCK_SKEW_S,
        requiredClaims: ['iss', 'sub', 'aud', 'exp', 'iat'],
      });
      payload = result.payload;
      break;
    } catch (error) {
      lastError = error;
      // A claim failure is final; only a signature mismatch tries the next candidate key.
      if (!(error instanceof joseErrors.JWSSignatureVerificationFailed)) break;
    }
  }
  if (!payload) throw reject(lastError instanceof Error ? lastError.message : 'verification failed', lastError);

  if (payload.iss !== expect.issuer) throw reject('iss mismatch');
  if (typeof payload.sub !== 'string' || payload.sub.length === 0 || payload.sub.length > 255) throw reject('sub missing');
  const aud = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
  if (aud.length === 0 || !aud.every((a) => typeof a === 'string')) throw reject('aud malformed');
  if (!aud.some((a) => expect.audiences.includes(a as string))) throw reject('aud not accepted');
  const azp = (payload as { azp?: unknown }).azp;
  if (aud.length > 1 && azp === undefined) throw reject('azp required with several audiences');
  if (azp !== undefined && (typeof azp !== 'string' || !expect.audiences.includes(azp))) throw reject('azp not accepted');
  if (typeof payload.exp !== 'number' || payload.exp + CLOCK_SKEW_S <= expect.now) throw reject('expired');
  if (typeof payload.iat !== 'number' || payload.iat > expect.now + CLOCK_SKEW_S) throw reject('iat in the future');

  const nonce = (payload as { nonce?: unknown }).nonce;
  if (expect.nonce !== undefined) {
    if (typeof nonce !== 'string' || nonce !== expect.nonce) throw reject('nonce mismatch');
  } else if (expect.nativeNonce !== undefined) {
    if (typeof nonce !== 'string' || (nonce !== expect.nativeNonce && nonce !== sha256Hex(expect.nativeNonce))) throw reject('nonce mismatch');
  }
  const [h, p] = token.split('.');
  return {
    claims: payload as VerifiedIdToken['claims'],
    replayKey: sha256(`${h}.${p}`, 'base64url'),
  };
}

// Code exchange ---------------------------------------------------------------------------------------------

/**
 * Redeems a provider authorization code at its token endpoint (with the PKCE verifier, and client
 * authentication as the provider advertises: client_secret_basic, client_secret_post or none).
 * A refusal by the provider is 401 `invalid_idp_code`; an unreachable provider 502 `idp_unavailable`.
 * Returns the id_token (unverified: the caller verifies it like any other).
 */
export async function exchangeCode(
  fetcher: Fetcher,
  provider: ProviderConfig,
  metadata: ProviderMetadata,
  input: { code: string; redirectUri: string; codeVerifier?: string },
): Promise<string> {
  const form = new URLSearchParams({ grant_type: 'authorization_code', code: input.code, redirect_uri: input.redirectUri });
  if (input.codeVerifier) form.set('code_verifier', input.codeVerifier);
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' };
  const methods = metadata.token_endpoint_auth_methods_supported ?? ['client_secret_basic'];
  if (provider.clientSecret) {
    if (methods.includes('client_secret_basic') || !methods.includes('client_secret_post')) {
      const enc = (s: string) => encodeURIComponent(s).replace(/%20/g, '+');
      headers.authorization = `Basic ${Buffer.from(`${enc(provider.clientId)}:${enc(provider.clientSecret)}`).toString('base64')}`;
    } else {
      form.set('client_id', provider.clientId);
      form.set('client_secret', provider.clientSecret);
    }
  } else {
    form.set('client_id', provider.clientId);
  }
  const res = await safeFetch(fetcher, metadata.token_endpoint, { method: 'POST', headers, body: form.toString() });
  if (res.status >= 500) throw new AppError('idp_unavailable', { detail: `token endpoint answered ${res.status}` });
  let doc: Record<string, unknown> = {};
  try {
    doc = JSON.parse(res.body) as Record<string, unknown>;
  } catch {
    // handled below
  }
  if (res.status !== 200) {
    throw new AppError('invalid_idp_code', { detail: `provider token endpoint answered ${res.status} ${typeof doc.error === 'string' ? doc.error.slice(0, 64) : ''}` });
  }
  if (typeof doc.id_token !== 'string') throw new AppError('invalid_idp_code', { detail: 'provider token response has no id_token' });
  return doc.id_token;
}
