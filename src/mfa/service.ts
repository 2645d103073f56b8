import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { ResolvedConfig } from '../config.js';
import { AppError } from '../errors.js';
import type { Amr } from '../shared/acr.js';
import { type FactorChangeRefusal, factorChangeRefusal, type SecondFactor, secondFactorsOf } from '../sign-in/policy.js';
import { SecretBox } from '../shared/crypto.js';
import type { RequestContext } from '../shared/request-context.js';
import type { Clock } from '../shared/time.js';
import { appendEvent } from '../storage/repos/events.js';
import {
  acceptTotpStep,
  deleteRecoveryCodes,
  deleteTotpFactor,
  type FactorSummary,
  findFactorSummary,
  findTotpFactor,
  putUnconfirmedTotp,
  replaceRecoveryCodes,
  useRecoveryCode,
} from '../storage/repos/factors.js';
import { deletePasskeysOfUser } from '../storage/repos/passkeys.js';
import type { Database } from '../storage/schema.js';
import type { Throttle } from '../throttle/service.js';
import { looksLikeTotp, matchTotpStep, newRecoveryCodes, newTotpSecret, recoveryCodeHash, totpUri } from './codes.js';

/**
 * Second factors (CONTRACT §15.6): enrolling and removing an authenticator app (TOTP), recovery codes,
 * and checking a code a user typed as the second step of a sign-in. Code checks share the password
 * lockout (Throttle.reserveFactorAttempt): the attempt is reserved before the check, a failure keeps
 * it, five failures lock the user's second factor for LOGIN_LOCK_SECONDS.
 */

export interface MfaDeps {
  db: Kysely<Database>;
  clock: Clock;
  config: ResolvedConfig;
  throttle: Throttle;
  log: FastifyBaseLogger;
}

/** What the enrolment page shows: the secret for manual entry, the URI and its QR code (SVG). */
export interface TotpEnrolment {
  secret: string;
  uri: string;
  qrSvg: string;
}

export interface FactorOverview extends FactorSummary {
  /** The second factors a sign-in may ask for (CONTRACT §15.6 `methods`), in the order shown. */
  methods: SecondFactor[];
}

export class Mfa {
  private readonly box: SecretBox;
  private readonly issuer: string;

  constructor(private readonly deps: MfaDeps) {
    this.box = new SecretBox(deps.config.secretKey, 'totp');
    this.issuer = `Gatehouse (${new URL(deps.config.authUrl).host})`;
  }

  /** The user's factors, and what a sign-in may ask of them (secondFactorsOf). */
  async overview(db: Kysely<Database>, userId: string): Promise<FactorOverview> {
    const summary = await findFactorSummary(db, userId);
    return { ...summary, methods: secondFactorsOf(summary) };
  }

  async enrolled(db: Kysely<Database>, userId: string): Promise<SecondFactor[]> {
    return (await this.overview(db, userId)).methods;
  }

  // Authenticator app ----------------------------------------------------------------------------------

  /** Starts (or restarts) enrolling an authenticator app: a new secret, unconfirmed until a first code. */
  async beginTotp(user: { id: string; email: string }): Promise<TotpEnrolment> {
    const secret = newTotpSecret();
    const stored = await putUnconfirmedTotp(this.deps.db, user.id, this.box.seal(secret), this.deps.clock.now());
    if (!stored) throw new AppError('conflict', { message: 'An authenticator app is already set up. Remove it first to set up another.' });
    return this.enrolmentOf(secret, user.email);
  }

  /** The enrolment in progress (to show the QR code again after a wrong first code), if any. */
  async pendingTotp(user: { id: string; email: string }): Promise<TotpEnrolment | null> {
    const factor = await findTotpFactor(this.deps.db, user.id);
    if (!factor || factor.confirmedAt !== null) return null;
    const secret = this.secretOf(user.id, factor.secretSealed);
    return secret === null ? null : this.enrolmentOf(secret, user.email);
  }

  private async enrolmentOf(secret: string, account: string): Promise<TotpEnrolment> {
    const uri = totpUri(secret, this.issuer, account);
    // Loaded on the first enrolment: most processes never draw a QR code.
    const { default: QRCode } = await import('qrcode');
    const qrSvg = await QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
    return { secret, uri, qrSvg };
  }

  /**
   * Confirms the authenticator app with its first code. The first factor a user enrols also gets the
   * ten recovery codes, returned once (only their hashes are kept). Counts as a second-factor check.
   */
  async confirmTotp(userId: string, code: string, ctx: RequestContext): Promise<{ recoveryCodes: string[] | null }> {
    const factor = await findTotpFactor(this.deps.db, userId);
    if (!factor || factor.confirmedAt !== null) throw new AppError('invalid_request', { message: 'Start setting up an authenticator app first.' });
    const secret = this.secretOf(userId, factor.secretSealed);
    // The step that confirms the app, its event and the first recovery codes commit together.
    return this.checkCode(
      userId,
      ctx,
      async (trx, now) => {
        const step = secret === null ? null : await matchTotpStep(secret, code, now);
        return step !== null && (await acceptTotpStep(trx, userId, step, now));
      },
      async (trx, now) => {
        await appendEvent(trx, now, { type: 'mfa.enrolled', userId, ip: ctx.ip, userAgent: ctx.userAgent, data: { method: 'totp' } });
        return { recoveryCodes: await this.firstRecoveryCodes(trx, userId, ctx) };
      },
    );
  }

  /**
   * In the transaction that enrolled a factor (authenticator app or passkey): the user's first ten
   * recovery codes when there are none yet, to be shown once; null when the user has them already.
   */
  async firstRecoveryCodes(trx: Kysely<Database>, userId: string, ctx: RequestContext): Promise<string[] | null> {
    const { recoveryCodes } = await findFactorSummary(trx, userId);
    return recoveryCodes > 0 ? null : this.storeRecoveryCodes(trx, userId, ctx);
  }

  /**
   * Why a session (its `amr` and `auth_time`) may not add or remove this user's second factors now,
   * or null when it may (policy.ts: factorChangeRefusal). Every door that changes factors asks this.
   */
  async changeRefusal(userId: string, session: { amr: readonly Amr[]; authTime: number }): Promise<FactorChangeRefusal | null> {
    return factorChangeRefusal(await this.enrolled(this.deps.db, userId), session, this.deps.clock.now());
  }

  /** New recovery codes replace all earlier ones; returned once. Only for a user with a factor. */
  async regenerateRecoveryCodes(userId: string, ctx: RequestContext): Promise<string[]> {
    return this.deps.db.transaction().execute(async (trx) => {
      if ((await this.overview(trx, userId)).methods.length === 0) throw new AppError('invalid_request', { message: 'Set up an authenticator app or a passkey first.' });
      return this.storeRecoveryCodes(trx, userId, ctx);
    });
  }

  private async storeRecoveryCodes(trx: Kysely<Database>, userId: string, ctx: RequestContext): Promise<string[]> {
    const now = this.deps.clock.now();
    const codes = newRecoveryCodes();
    await replaceRecoveryCodes(trx, userId, codes.map((c) => recoveryCodeHash(c)!), now);
    await appendEvent(trx, now, { type: 'mfa.recovery_codes_generated', userId, ip: ctx.ip, userAgent: ctx.userAgent, data: { count: codes.length } });
    return codes;
  }

  /**
   * Removes the authenticator app. When no factor is left, the recovery codes go too (they back up a
   * factor, they are not one). The caller has checked the sign-in is fresh and strong enough.
   */
  async removeTotp(userId: string, ctx: RequestContext, via: string): Promise<boolean> {
    return this.deps.db.transaction().execute(async (trx) => {
      if (!(await deleteTotpFactor(trx, userId))) return false;
      await appendEvent(trx, this.deps.clock.now(), { type: 'mfa.removed', userId, ip: ctx.ip, userAgent: ctx.userAgent, data: { method: 'totp', via } });
      await this.dropOrphanRecoveryCodes(trx, userId);
      return true;
    });
  }

  /** After a factor was removed: recovery codes that back up nothing are deleted. */
  async dropOrphanRecoveryCodes(trx: Kysely<Database>, userId: string): Promise<void> {
    const { totp, passkeys } = await this.overview(trx, userId);
    if (!totp && passkeys === 0) await deleteRecoveryCodes(trx, userId);
  }

  /**
   * An operator resets a user's second factors (lost phone, codes and passkeys): the authenticator app,
   * the recovery codes and the passkeys go, the lock on wrong codes is lifted. The password alone then
   * signs in again, and the user can enrol anew.
   */
  async resetFactors(userId: string, ctx: RequestContext): Promise<{ totp: boolean; passkeys: number }> {
    return this.deps.db.transaction().execute(async (trx) => {
      const totp = await deleteTotpFactor(trx, userId);
      await deleteRecoveryCodes(trx, userId);
      const passkeys = await deletePasskeysOfUser(trx, userId);
      await this.deps.throttle.clearFactorFailures(trx, userId);
      await appendEvent(trx, this.deps.clock.now(), { type: 'mfa.reset', userId, ip: ctx.ip, userAgent: ctx.userAgent, data: { by: 'admin', totp, passkeys } });
      return { totp, passkeys };
    });
  }

  // Second step of a sign-in -------------------------------------------------------------------------

  /**
   * Checks a code typed as the second factor: six digits are an authenticator-app code (each time step
   * accepted once), anything else a recovery code (each used once). Wrong → 400 `invalid_code`; locked
   * → 429 `rate_limited` with `retry_after`. Returns which method it was.
   */
  async verifyCode(userId: string, code: string, ctx: RequestContext): Promise<'totp' | 'recovery_code'> {
    const method = looksLikeTotp(code) ? 'totp' : 'recovery_code';
    await this.checkCode(userId, ctx, async (db, now) => {
      if (method === 'recovery_code') {
        const hash = recoveryCodeHash(code);
        return hash !== null && (await useRecoveryCode(db, userId, hash, now));
      }
      const factor = await findTotpFactor(db, userId);
      if (!factor || factor.confirmedAt === null) return false;
      const secret = this.secretOf(userId, factor.secretSealed);
      const step = secret === null ? null : await matchTotpStep(secret, code, now);
      return step !== null && (await acceptTotpStep(db, userId, step, now));
    });
    return method;
  }

  /**
   * The authenticator app's secret, or null when it cannot be opened: sealed under another SECRET_KEY
   * (changed since), or damaged. Its codes then never match (recovery codes and passkeys still work,
   * and an operator can reset the user's factors); the operator is told, never the user a 500.
   */
  private secretOf(userId: string, sealed: string): string | null {
    try {
      return this.box.open(sealed);
    } catch (error) {
      this.deps.log.error({ user_id: userId, err: error }, 'the TOTP secret of a user cannot be opened: was SECRET_KEY changed? Recovery codes still work; DELETE /v1/admin/users/{id}/mfa resets the user');
      return null;
    }
  }

  /**
   * One guarded code check: reserve an attempt, check, then clear the counter or record the failure.
   * The check and `accepted` (what a good code does) run in one transaction.
   */
  private async checkCode(userId: string, ctx: RequestContext, check: (trx: Kysely<Database>, now: number) => Promise<boolean>): Promise<void>;
  private async checkCode<T>(
    userId: string,
    ctx: RequestContext,
    check: (trx: Kysely<Database>, now: number) => Promise<boolean>,
    accepted: (trx: Kysely<Database>, now: number) => Promise<T>,
  ): Promise<T>;
  private async checkCode<T>(
    userId: string,
    ctx: RequestContext,
    check: (trx: Kysely<Database>, now: number) => Promise<boolean>,
    accepted?: (trx: Kysely<Database>, now: number) => Promise<T>,
  ): Promise<T | void> {
    const { throttle } = this.deps;
    const attempt = await throttle.reserveFactorAttempt(userId);
    const now = this.deps.clock.now();
    const outcome = await this.deps.db.transaction().execute(async (trx) => {
      if (!(await check(trx, now))) return { ok: false as const };
      return { ok: true as const, value: accepted ? await accepted(trx, now) : undefined };
    });
    if (outcome.ok) {
      await throttle.clearFactorFailures(this.deps.db, userId);
      return outcome.value;
    }
    await this.deps.db.transaction().execute(async (trx) => {
      const locked = await throttle.recordLoginFailure(trx, attempt);
      await appendEvent(trx, now, { type: 'mfa.challenge_failed', userId, ip: ctx.ip, userAgent: ctx.userAgent });
      if (locked) await appendEvent(trx, now, { type: 'user.locked', userId, ip: ctx.ip, userAgent: ctx.userAgent, data: { seconds: this.deps.config.throttle.loginLockSeconds, factor: 'second' } });
    });
    throw new AppError('invalid_code', { detail: 'second-factor code refused' });
  }
}
