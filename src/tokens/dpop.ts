import { createHmac, hkdfSync, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import type { Clock } from '../shared/time.js';
import { checkDpopProof, DPOP_ALGS, PROOF_FUTURE_SKEW_S, PROOF_MAX_AGE_S } from './dpop-proof.js';

/**
 * DPoP (RFC 9449, docs/reference/oauth.md "DPoP") around the pure proof check: the `DPoP` header read
 * once, our public URL of the endpoint as `htu` (under BASE_URL, never the Host header), the `jti`
 * replay cache shared by every process, and stateless server nonces: an HMAC of the current time window
 * under a key derived from SECRET_KEY, the current and the previous window accepted.
 */

/** Records `key` for `ttlSeconds`; true only the first time (throttle's shared store: Redis or the database). */
export type FirstSighting = (key: string, ttlSeconds: number) => Promise<boolean>;

export interface DpopSettings {
  baseUrl: string;
  secretKey: string;
  /** Whether proofs must carry a server nonce (DPOP_NONCES). */
  nonces: boolean;
  /** How long one nonce window lasts (seconds); a nonce stays good for one to two windows. */
  nonceWindowSeconds: number;
}

/** Where a proof's error goes: token-style endpoints answer 400 JSON, resource endpoints 401 with WWW-Authenticate. */
export type ProofSite = 'token' | 'resource';

export const DPOP_SIGNING_ALGS: readonly string[] = DPOP_ALGS;

export class Dpop {
  private readonly nonceKey: Buffer;

  constructor(
    private readonly settings: DpopSettings,
    private readonly clock: Clock,
    private readonly firstSighting: FirstSighting,
  ) {
    this.nonceKey = Buffer.from(hkdfSync('sha256', settings.secretKey, 'gatehouse', 'gatehouse:dpop-nonce', 32));
  }

  private nonceFor(window: number): string {
    return createHmac('sha256', this.nonceKey).update(String(window)).digest('base64url');
  }

  /** The nonce to hand out now. */
  currentNonce(): string {
    return this.nonceFor(Math.floor(this.clock.now() / this.settings.nonceWindowSeconds));
  }

  /** A nonce of the current or the previous window. */
  acceptsNonce = (nonce: string): boolean => {
    const window = Math.floor(this.clock.now() / this.settings.nonceWindowSeconds);
    const given = Buffer.from(nonce);
    return [window, window - 1].some((w) => {
      const expected = Buffer.from(this.nonceFor(w));
      return expected.length === given.length && timingSafeEqual(expected, given);
    });
  };

  /** The `WWW-Authenticate` challenge of a resource endpoint, with an error when there is one (RFC 9449 §7.1). */
  challenge(error?: string): string {
    return `DPoP ${error ? `error="${error}", ` : ''}algs="${DPOP_SIGNING_ALGS.join(' ')}"`;
  }

  private refuse(site: ProofSite, error: 'invalid_dpop_proof' | 'use_dpop_nonce', reason: string): AppError {
    const headers: Record<string, string> = {};
    if (this.settings.nonces) headers['dpop-nonce'] = this.currentNonce();
    if (site === 'resource') headers['www-authenticate'] = this.challenge(error);
    return new AppError(error, { status: site === 'resource' ? 401 : 400, headers, detail: reason });
  }

  /**
   * The key thumbprint (`jkt`) of the request's DPoP proof, or undefined when it has none. A bad proof
   * throws `invalid_dpop_proof` (or `use_dpop_nonce`). `path` is the endpoint's path under BASE_URL;
   * `accessToken` the token a resource endpoint was shown (`ath`). Sets `DPoP-Nonce` on the reply.
   */
  async proofKey(request: FastifyRequest, reply: FastifyReply | undefined, options: { path: string; site: ProofSite; accessToken?: string }): Promise<string | undefined> {
    if (this.settings.nonces && reply) reply.header('dpop-nonce', this.currentNonce());
    const raw = request.headers.dpop;
    if (raw === undefined) return undefined;
    // A repeated header arrives joined with ", " (or as an array): one proof per request (RFC 9449 §4.3 item 1).
    if (typeof raw !== 'string') throw this.refuse(options.site, 'invalid_dpop_proof', 'several DPoP headers');
    const now = this.clock.now();
    const result = await checkDpopProof(raw, {
      method: request.method,
      url: `${this.settings.baseUrl}${options.path}`,
      now,
      accessToken: options.accessToken,
      acceptsNonce: this.settings.nonces ? this.acceptsNonce : undefined,
    });
    if (!result.ok) throw this.refuse(options.site, result.error, result.reason);
    // Kept as long as the proof could pass the iat window, so a replay is always seen.
    const fresh = await this.firstSighting(`dpop-jti:${result.jkt}:${result.jti}`, PROOF_MAX_AGE_S + PROOF_FUTURE_SKEW_S + 1);
    if (!fresh) throw this.refuse(options.site, 'invalid_dpop_proof', 'jti replayed');
    return result.jkt;
  }

  /**
   * At a door that issues tokens (token endpoint, REST sign-in): the key of the request's proof, checked;
   * required when the app has `dpop_bound_access_tokens` (RFC 9449 §5.2).
   */
  async issuingKey(request: FastifyRequest, reply: FastifyReply, client: { oauth: { dpopBoundAccessTokens: boolean } }, path: string): Promise<string | undefined> {
    const jkt = await this.proofKey(request, reply, { path, site: 'token' });
    this.assertRequired(client, jkt);
    return jkt;
  }

  /** `invalid_dpop_proof` when the app has `dpop_bound_access_tokens` and the request came without a proof. */
  assertRequired(client: { oauth: { dpopBoundAccessTokens: boolean } }, jkt: string | undefined): void {
    if (jkt === undefined && client.oauth.dpopBoundAccessTokens) throw this.refuse('token', 'invalid_dpop_proof', 'the app requires DPoP');
  }

  /**
   * At a door that issues authorization codes (PAR, the native exchange and resume): the key the code must
   * be redeemed with (RFC 9449 §10), the proof's or `dpopJkt` (the `dpop_jkt` parameter); with both, the
   * same key, else `invalid_dpop_proof`.
   */
  async codeKey(request: FastifyRequest, reply: FastifyReply, path: string, dpopJkt: string | undefined): Promise<string | undefined> {
    const proofJkt = await this.proofKey(request, reply, { path, site: 'token' });
    if (proofJkt !== undefined && dpopJkt !== undefined && dpopJkt !== proofJkt) throw this.keyMismatch('token', 'dpop_jkt differs from the key of the DPoP proof');
    return proofJkt ?? dpopJkt;
  }

  /** A proof refused because the token or code it came with is bound to another key (or needs one). */
  keyMismatch(site: ProofSite, reason: string): AppError {
    return this.refuse(site, 'invalid_dpop_proof', reason);
  }
}
