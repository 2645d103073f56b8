import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import {
  type JWK,
  type JWSHeaderParameters,
  type JWTPayload,
  calculateJwkThumbprint,
  errors as joseErrors,
  exportJWK,
  generateKeyPair,
  jwtVerify,
} from 'jose';
import type { Kysely } from 'kysely';
import { createPrivateKey, createPublicKey, type KeyObject } from 'node:crypto';
import { SecretBox } from '../shared/crypto.js';
import { type SigningAlg, signingInput, signJws } from './jws.js';
import type { Clock } from '../shared/time.js';
import type { Database } from '../storage/schema.js';
import { insertFirstSigningKeys, insertSigningKeys, listSigningKeys, retireSigningKeys } from '../storage/repos/signing-keys.js';

/**
 * Signing keys: one active ES256 key (access tokens, sessions) and one active RS256 key
 * (ID tokens). Private halves are sealed with SECRET_KEY; retired public keys stay in the JWKS until
 * every token they signed has expired. Keys are re-read from the database every few seconds and on an
 * unknown `kid`, so a rotation done by another instance is picked up without a restart.
 */

export type { SigningAlg } from './jws.js';
const ALGS: SigningAlg[] = ['ES256', 'RS256'];
/** The least time between two reads of the keys, whether periodic or asked by an unknown `kid`. */
const RELOAD_INTERVAL_S = 5;
/** Clock skew allowed on `exp` and `nbf` when verifying. */
const CLOCK_TOLERANCE_S = 30;
/** Tokens VerifiedTokens remembers: ~2 KB each, a few MB in all. */
const VERIFIED_TOKENS = 4096;

interface LoadedKey {
  kid: string;
  alg: SigningAlg;
  publicJwk: JWK;
  /** The private key as stored: a row whose sealed text is unchanged keeps its key objects. */
  sealed: string;
  privateKey: KeyObject;
  publicKey: KeyObject;
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

/** A token jose verified: the rules it was verified under, the key that verified it, and its claims. */
interface VerifiedToken {
  typ: string;
  audience: string | undefined;
  kid: string;
  alg: SigningAlg;
  key: KeyObject;
  payload: Readonly<JWTPayload>;
}

/**
 * Tokens this process has verified, by their exact text (docs/adr/0005-verified-token-memo.md): an app
 * sends the same access token with every call until it expires. A remembered token counts only under
 * the same `typ` and audience, while its `kid` still names the very key object that verified it, and
 * while its `exp` and `nbf` still hold; anything else goes to jose again. Only tokens jose accepted get
 * in, so a client cannot fill it with what it made up; the oldest entry leaves first.
 */
class VerifiedTokens {
  private readonly tokens = new Map<string, VerifiedToken>();
  constructor(private readonly capacity: number) {}

  recall(token: string, options: VerifyOptions, now: number, keyFor: (kid: string, alg: SigningAlg) => KeyObject | undefined): Readonly<JWTPayload> | undefined {
    const known = this.tokens.get(token);
    if (!known || known.typ !== options.typ || known.audience !== options.audience || !options.algorithms.includes(known.alg)) return undefined;
    const { exp, nbf } = known.payload;
    if (!(exp! > now - CLOCK_TOLERANCE_S) || (nbf !== undefined && !(nbf <= now + CLOCK_TOLERANCE_S))) return undefined;
    return keyFor(known.kid, known.alg) === known.key ? known.payload : undefined;
  }

  remember(token: string, verified: VerifiedToken): void {
    this.tokens.delete(token);
    if (this.tokens.size >= this.capacity) this.tokens.delete(this.tokens.keys().next().value!);
    this.tokens.set(token, verified);
  }
}

export class KeyStore {
  private keys: LoadedKey[] = [];
  /** When the last read of the keys started (clock seconds). */
  private readAt = -Infinity;
  /** The read in flight: every reload asked meanwhile waits for it instead of reading again. */
  private reading?: Promise<void>;
  private readonly box: SecretBox;
  private readonly verified = new VerifiedTokens(VERIFIED_TOKENS);

  constructor(
    private readonly db: Kysely<Database>,
    secretKey: string,
    private readonly clock: Clock,
    readonly issuer: string,
    /** How long a retired key stays published: the longest lifetime of anything it signed. */
    private readonly retentionSeconds: number,
  ) {
    this.box = new SecretBox(secretKey, 'signing-keys');
  }

  /** Loads keys, creating the first pair when the database has none (one winner among instances starting at once). */
  async init(): Promise<void> {
    await this.reload();
    const missing = ALGS.filter((alg) => !this.keys.some((k) => k.alg === alg && k.retiredAt === null));
    if (missing.length) {
      await insertFirstSigningKeys(this.db, await Promise.all(missing.map((alg) => this.generate(alg))));
      await this.reloadAfterWrite();
    }
  }

  /** Adds a new active key per algorithm and retires the previous ones (`keys rotate`). */
  async rotate(): Promise<string[]> {
    const fresh = await Promise.all(ALGS.map((alg) => this.generate(alg)));
    await this.db.transaction().execute(async (trx) => {
      await retireSigningKeys(trx, ALGS, this.clock.now(), []);
      await insertSigningKeys(trx, fresh);
    });
    await this.reloadAfterWrite();
    return fresh.map((k) => k.kid);
  }

  /**
   * Re-reads the keys now (one read at a time: a reload asked while one runs waits for that one). A
   * row whose kid, creation time and sealed private key are unchanged keeps its key objects, which jose
   * caches its imported keys by, and is not decrypted again.
   */
  private reload(): Promise<void> {
    this.reading ??= this.read().finally(() => {
      this.reading = undefined;
    });
    return this.reading;
  }

  /** Reads the keys after a write of ours: a read in flight may have started before it, so a new one follows. */
  private async reloadAfterWrite(): Promise<void> {
    await this.reading?.catch(() => undefined);
    await this.reload();
  }

  private async read(): Promise<void> {
    this.readAt = this.clock.now();
    const rows = await listSigningKeys(this.db);
    const known = new Map(this.keys.map((k) => [k.kid, k]));
    this.keys = rows.map((row) => {
      const same = known.get(row.kid);
      if (same && same.sealed === row.private_jwk && same.createdAt === row.created_at && same.alg === row.alg) {
        return same.retiredAt === row.retired_at ? same : { ...same, retiredAt: row.retired_at };
      }
      const publicJwk = JSON.parse(row.public_jwk) as JWK;
      const privateJwk = JSON.parse(this.openPrivateKey(row.private_jwk)) as JWK;
      return {
        kid: row.kid,
        alg: row.alg,
        publicJwk,
        sealed: row.private_jwk,
        privateKey: createPrivateKey({ key: privateJwk as never, format: 'jwk' }),
        publicKey: createPublicKey({ key: publicJwk as never, format: 'jwk' }),
        createdAt: row.created_at,
        retiredAt: row.retired_at,
      };
    });
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

  /** Whether the keys may be read again: the last read started at least RELOAD_INTERVAL_S ago. */
  private mayRead(): boolean {
    return this.clock.now() - this.readAt >= RELOAD_INTERVAL_S;
  }

  /**
   * Starts a background re-read when the cache is stale, without waiting for it: signing happens
   * inside transactions, and on SQLite (one connection) awaiting a query there would deadlock.
   */
  private refreshSoon(): void {
    if (this.reading || !this.mayRead()) return;
    // On failure the cached keys keep serving; the next read is tried RELOAD_INTERVAL_S later.
    this.reload().catch(() => undefined);
  }

  /** Public JWKS: public members only, with kid/alg/use; retired keys while their tokens can live. */
  async jwks(): Promise<{ keys: JWK[] }> {
    this.refreshSoon();
    const now = this.clock.now();
    return {
      keys: this.keys.filter((k) => this.isPublished(k, now)).map((k) => ({ ...k.publicJwk, kid: k.kid, alg: k.alg, use: 'sig' })),
    };
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

  async sign(payload: JWTPayload, options: { alg: SigningAlg; typ: string; expiresIn: number }): Promise<string> {
    return this.signing(payload, options).jwt;
  }

  /** Starts signing a JWT: its signing input (`header.payload`) at once, the JWT once signed. Throws when no key is active. */
  signing(payload: JWTPayload, options: { alg: SigningAlg; typ: string; expiresIn: number }): JwtSigning {
    this.refreshSoon();
    // The oldest active key: every instance picks the same one.
    const key = this.keys.find((k) => k.alg === options.alg && k.retiredAt === null);
    if (!key) throw new Error(`no active ${options.alg} signing key`);
    const now = this.clock.now();
    // Object.assign, not a spread followed by claims: V8 gives each such spread object a hidden class of its own.
    const claims = Object.assign({}, payload, { iss: this.issuer, iat: now, exp: now + options.expiresIn });
    const input = signingInput(key.alg, { kid: key.kid, typ: options.typ }, claims);
    return { input, jwt: signJws(key.alg, input, key.privateKey) };
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
    return signJws('RS256', input, key.privateKey);
  }

  /**
   * Verifies one of our own JWTs with jose: signature by a published key (never a key named inside the
   * token), allowed algorithms, `typ`, issuer, expiry with a small skew. Throws jose's errors on any
   * failure. An unknown `kid` reads the keys again (a key another instance added) when the last read is
   * RELOAD_INTERVAL_S old, or joins the read in flight; otherwise it fails at once, so made-up `kid`s
   * cannot make the keys be read more often than that.
   */
  async verify(token: string, options: VerifyOptions): Promise<JWTPayload> {
    this.refreshSoon();
    const remembered = this.verified.recall(token, options, this.clock.now(), (kid, alg) => this.publishedKey(kid, alg)?.publicKey);
    if (remembered) return remembered;
    try {
      return await this.verifyWithJose(token, options);
    } catch (error) {
      if (!(error instanceof joseErrors.JWKSNoMatchingKey) || !(this.reading || this.mayRead())) throw error;
      await this.reload();
      return this.verifyWithJose(token, options);
    }
  }

  private async verifyWithJose(token: string, options: VerifyOptions): Promise<JWTPayload> {
    let used: LoadedKey | undefined;
    const keyFor = (header: JWSHeaderParameters): KeyObject => {
      used = typeof header.kid === 'string' ? this.publishedKey(header.kid, header.alg as SigningAlg) : undefined;
      if (!used) throw new joseErrors.JWKSNoMatchingKey();
      return used.publicKey;
    };
    const { payload } = await jwtVerify(token, keyFor, {
      issuer: this.issuer,
      algorithms: options.algorithms,
      typ: options.typ,
      audience: options.audience,
      currentDate: new Date(this.clock.now() * 1000),
      clockTolerance: CLOCK_TOLERANCE_S,
      requiredClaims: ['iat', 'exp', 'sub'],
    });
    // Frozen: the memo hands the same object to every later caller of this token.
    const frozen = Object.freeze(payload);
    this.verified.remember(token, { typ: options.typ, audience: options.audience, kid: used!.kid, alg: used!.alg, key: used!.publicKey, payload: frozen });
    return frozen;
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
  const store = new KeyStore(app.db, app.config.secretKey, app.clock, app.config.baseUrl, Math.max(ttl.accessToken, ttl.session) + 60);
  await store.init();
  app.decorate('keys', store);
}

export default fp(keysPlugin, { name: 'keys', dependencies: ['db'] });
