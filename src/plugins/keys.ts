import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import {
  type JWK,
  type JWTPayload,
  type JWTVerifyResult,
  calculateJwkThumbprint,
  createLocalJWKSet,
  errors as joseErrors,
  exportJWK,
  generateKeyPair,
  jwtVerify,
} from 'jose';
import type { Kysely } from 'kysely';
import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { SecretBox } from '../shared/crypto.js';
import { JwsSigner } from './jws-signer.js';
import { CheckedSignatures, signingInput, signRs256, verifyEs256 } from './jwt-node-crypto.js';
import type { Clock } from '../shared/time.js';
import type { Database } from '../storage/schema.js';
import { insertFirstSigningKeys, insertSigningKeys, listSigningKeys, retireSigningKeys } from '../storage/repos/signing-keys.js';

/**
 * Signing keys (CONTRACT §3): one active ES256 key (access tokens, sessions) and one active RS256 key
 * (ID tokens). Private halves are sealed with SECRET_KEY; retired public keys stay in the JWKS until
 * every token they signed has expired. Keys are re-read from the database every few seconds and on an
 * unknown `kid`, so a rotation done by another instance is picked up without a restart.
 */

export type SigningAlg = 'ES256' | 'RS256';
const ALGS: SigningAlg[] = ['ES256', 'RS256'];
const RELOAD_INTERVAL_S = 5;
/** Clock skew allowed on `exp` and `nbf` when verifying. */
const CLOCK_TOLERANCE_S = 30;

interface LoadedKey {
  kid: string;
  alg: SigningAlg;
  publicJwk: JWK;
  /** The private key every token is signed with (jwt-node-crypto.ts). */
  privateKey: KeyObject;
  /** ES256 keys only: our access tokens and session JWTs are verified with it (jwt-node-crypto.ts). */
  es256PublicKey?: KeyObject;
  createdAt: number;
  retiredAt: number | null;
}

/** A JWT being signed (KeyStore.signing): its signing input, and the JWT once the signature is made. */
export interface JwtSigning {
  input: string;
  jwt: Promise<string>;
}

export interface VerifyOptions {
  typ: string;
  algorithms: SigningAlg[];
  audience?: string;
}

export class KeyStore {
  private keys: LoadedKey[] = [];
  private loadedAt = -Infinity;
  private refreshing?: Promise<void>;
  /** Bumped by every reload, so the verification key set is rebuilt even for two reloads in one second. */
  private generation = 0;
  private verifier?: { keySet: ReturnType<typeof createLocalJWKSet>; generation: number; validUntil: number };
  private readonly box: SecretBox;
  /** ES256 tokens whose signature was checked (see CheckedSignatures): ~2 KB each, a few MB in all. */
  private readonly checked = new CheckedSignatures(4096);

  constructor(
    private readonly db: Kysely<Database>,
    secretKey: string,
    private readonly clock: Clock,
    readonly issuer: string,
    /** How long a retired key stays published: the longest lifetime of anything it signed. */
    private readonly retentionSeconds: number,
    /** Makes the signatures: batches on a worker thread, a lone one inline (ES256) or on the thread pool (RS256). */
    private readonly signer: JwsSigner,
  ) {
    this.box = new SecretBox(secretKey, 'signing-keys');
  }

  /** Loads keys, creating the first pair when the database has none (one winner among instances starting at once). */
  async init(): Promise<void> {
    await this.reload();
    const missing = ALGS.filter((alg) => !this.keys.some((k) => k.alg === alg && k.retiredAt === null));
    if (missing.length) {
      await insertFirstSigningKeys(this.db, await Promise.all(missing.map((alg) => this.generate(alg))));
      await this.reload();
    }
  }

  /** Adds a new active key per algorithm and retires the previous ones (`keys rotate`). */
  async rotate(): Promise<string[]> {
    const fresh = await Promise.all(ALGS.map((alg) => this.generate(alg)));
    await this.db.transaction().execute(async (trx) => {
      await retireSigningKeys(trx, ALGS, this.clock.now(), []);
      await insertSigningKeys(trx, fresh);
    });
    await this.reload();
    return fresh.map((k) => k.kid);
  }

  async reload(): Promise<void> {
    const rows = await listSigningKeys(this.db);
    this.keys = rows.map((row) => {
      const publicJwk = JSON.parse(row.public_jwk) as JWK;
      const privateJwk = JSON.parse(this.openPrivateKey(row.private_jwk)) as JWK;
      return {
        kid: row.kid,
        alg: row.alg,
        publicJwk,
        privateKey: createPrivateKey({ key: privateJwk as never, format: 'jwk' }),
        es256PublicKey: row.alg === 'ES256' ? createPublicKey({ key: publicJwk as never, format: 'jwk' }) : undefined,
        createdAt: row.created_at,
        retiredAt: row.retired_at,
      };
    });
    this.loadedAt = this.clock.now();
    this.generation += 1;
  }

  /**
   * A private key unsealed with SECRET_KEY. One that does not open was sealed with another SECRET_KEY
   * (changed, lost, or another DATA_DIR's development key), and nothing can be signed: the start stops
   * with a message saying so, instead of the cipher's own "unable to authenticate data".
   */
  private openPrivateKey(sealed: string): string {
    try {
      return this.box.open(sealed);
    } catch {
      throw new Error(
        'the signing keys in the database do not open with this SECRET_KEY: the database was set up with another one. ' +
          'Start with the SECRET_KEY it was set up with (when SECRET_KEY is not set, the development key is read from DATA_DIR/secret.key)',
      );
    }
  }

  /**
   * Starts a background re-read when the cache is stale, without waiting for it: signing happens
   * inside transactions, and on SQLite (one connection) awaiting a query there would deadlock.
   */
  private refreshSoon(): void {
    if (this.refreshing || this.clock.now() - this.loadedAt < RELOAD_INTERVAL_S) return;
    this.refreshing = this.reload()
      .catch(() => undefined) // keep serving the cached keys; the next call tries again
      .finally(() => {
        this.refreshing = undefined;
      });
  }

  /** Public JWKS: public members only, with kid/alg/use; retired keys while their tokens can live. */
  async jwks(): Promise<{ keys: JWK[] }> {
    this.refreshSoon();
    return { keys: this.publicJwks() };
  }

  /** Whether a key is in the JWKS: active, or retired less than its retention ago. */
  private isPublished(key: LoadedKey, now: number): boolean {
    return key.retiredAt === null || key.retiredAt + this.retentionSeconds > now;
  }

  /** A published key, by `kid` and algorithm. */
  private publishedKey(kid: string, alg: SigningAlg): LoadedKey | undefined {
    const now = this.clock.now();
    return this.keys.find((k) => k.kid === kid && k.alg === alg && this.isPublished(k, now));
  }

  private publicJwks(): JWK[] {
    const now = this.clock.now();
    return this.keys
      .filter((k) => this.isPublished(k, now))
      .map((k) => ({ ...k.publicJwk, kid: k.kid, alg: k.alg, use: 'sig' }));
  }

  /**
   * The key set tokens are verified against, built once per key reload (jose keeps the imported keys
   * inside it, so verifying a bearer token imports nothing), and rebuilt the moment a retired key
   * leaves the JWKS: a key that is no longer published never verifies, even before the next reload.
   */
  private verificationKeys(): ReturnType<typeof createLocalJWKSet> {
    const now = this.clock.now();
    const cached = this.verifier;
    if (cached && cached.generation === this.generation && now < cached.validUntil) return cached.keySet;
    const retirements = this.keys.filter((k) => k.retiredAt !== null && k.retiredAt + this.retentionSeconds > now);
    const validUntil = Math.min(Infinity, ...retirements.map((k) => k.retiredAt! + this.retentionSeconds));
    this.verifier = { keySet: createLocalJWKSet({ keys: this.publicJwks() }), generation: this.generation, validUntil };
    return this.verifier.keySet;
  }

  async sign(payload: JWTPayload, options: { alg: SigningAlg; typ: string; expiresIn: number }): Promise<string> {
    return this.signing(payload, options).jwt;
  }

  /**
   * Starts signing a JWT: its signing input (`header.payload`) at once, the JWT once signed (by the
   * signer, on its worker when several of one algorithm are asked at once). Throws when no key is active.
   */
  signing(payload: JWTPayload, options: { alg: SigningAlg; typ: string; expiresIn: number }): JwtSigning {
    this.refreshSoon();
    // The oldest active key: every instance picks the same one.
    const key = this.keys.find((k) => k.alg === options.alg && k.retiredAt === null);
    if (!key) throw new Error(`no active ${options.alg} signing key`);
    const now = this.clock.now();
    // Object.assign, not a spread followed by claims: each such object would get a map of its own (finding 76, see toApp).
    const claims = Object.assign({}, payload, { iss: this.issuer, iat: now, exp: now + options.expiresIn });
    const input = signingInput(key.alg, { kid: key.kid, typ: options.typ }, claims);
    return { input, jwt: this.signer.sign(key.alg, input, key.kid, key.privateKey) };
  }

  /**
   * The RS256 JWT of a signing input from `signing`, signed again with the key its header names: the very
   * JWT signed the first time (RS256 is deterministic). The key must still be published (a retired key
   * is, for as long as what it signed can live).
   */
  async resignRs256(input: string): Promise<string> {
    // Decoded here: jose's decodeProtectedHeader refuses a signing input, which is not a whole JWS.
    const header = JSON.parse(Buffer.from(input.slice(0, input.indexOf('.')), 'base64url').toString()) as { kid?: unknown };
    const key = typeof header.kid === 'string' ? this.publishedKey(header.kid, 'RS256') : undefined;
    if (!key) throw new Error('the key of a stored RS256 signing input is no longer published');
    return signRs256(input, key.privateKey);
  }

  /**
   * Verifies one of our own JWTs: signature by a published key (never a key named inside the token),
   * allowed algorithms, `typ`, issuer, expiry with a small skew. Throws on any failure.
   */
  async verify(token: string, options: VerifyOptions): Promise<JWTVerifyResult['payload']> {
    this.refreshSoon();
    const attempt = async () => {
      if (options.algorithms.length === 1 && options.algorithms[0] === 'ES256') {
        return verifyEs256(token, {
          keyFor: (kid) => this.publishedKey(kid, 'ES256')?.es256PublicKey,
          issuer: this.issuer,
          typ: options.typ,
          audience: options.audience,
          now: this.clock.now(),
          tolerance: CLOCK_TOLERANCE_S,
        }, this.checked);
      }
      const { payload } = await jwtVerify(token, this.verificationKeys(), {
        issuer: this.issuer,
        algorithms: options.algorithms,
        typ: options.typ,
        audience: options.audience,
        currentDate: new Date(this.clock.now() * 1000),
        clockTolerance: CLOCK_TOLERANCE_S,
        requiredClaims: ['iat', 'exp', 'sub'],
      });
      return payload;
    };
    try {
      return await attempt();
    } catch (error) {
      // A key rotated by another instance: reload once, then try again.
      if (error instanceof joseErrors.JWKSNoMatchingKey && this.clock.now() - this.loadedAt >= 1) {
        await this.reload();
        return attempt();
      }
      throw error;
    }
  }

  private async generate(alg: SigningAlg) {
    const { publicKey, privateKey } = await generateKeyPair(alg, { extractable: true, modulusLength: 2048 });
    const publicJwk = await exportJWK(publicKey);
    const kid = (await calculateJwkThumbprint(publicJwk)).slice(0, 16);
    return {
      kid,
      alg,
      public_jwk: JSON.stringify(publicJwk),
      private_jwk: this.box.seal(JSON.stringify(await exportJWK(privateKey))),
      created_at: this.clock.now(),
      retired_at: null,
    };
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    keys: KeyStore;
  }
}

async function keysPlugin(app: FastifyInstance) {
  const ttl = app.config.ttl;
  const signer = new JwsSigner((error) => app.log.error({ err: error }, 'the signing worker stopped: signing without it from now on'));
  app.addHook('onClose', () => signer.close());
  const store = new KeyStore(app.db, app.config.secretKey, app.clock, app.config.baseUrl, Math.max(ttl.accessToken, ttl.session) + 60, signer);
  await store.init();
  app.decorate('keys', store);
}

export default fp(keysPlugin, { name: 'keys', dependencies: ['db'] });
