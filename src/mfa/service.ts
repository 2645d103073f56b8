import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { ResolvedConfig } from '../config.js';
import { AppError } from '../errors.js';
import type { Amr } from '../shared/acr.js';
import { type FactorChangeRefusal, factorChangeRefusal, type SecondFactor, secondFactorsOf } from '../sign-in/policy.js';
import type { EnrolmentOwner } from '../sign-in/service.js';
import { SecretBox } from '../shared/crypto.js';
import { newId } from '../shared/ids.js';
import type { RequestContext } from '../shared/request-context.js';
import type { Clock } from '../shared/time.js';
import { appendEvent } from '../storage/repos/events.js';
import {
  acceptTotpStep,
  deleteFactorsOfUser,
  deleteRecoveryCodes,
  deleteTotpFactor,
  type FactorSummary,
  findFactorSummary,
  findTotpFactor,
  insertConfirmedTotp,
  replaceRecoveryCodes,
  useRecoveryCode,
} from '../storage/repos/factors.js';
import { consumeOneTimeToken, insertOneTimeToken, listLiveOneTimeTokensOfUser, type OneTimeTokenRow } from '../storage/repos/one-time-tokens.js';
import type { Database, UserRow } from '../storage/schema.js';
import type { Throttle } from '../throttle/service.js';
import { looksLikeTotp, matchTotpStep, newRecoveryCodes, newTotpSecret, recoveryCodeHash, totpUri } from './codes.js';

/**
 * Second factors (docs/guides/mfa-and-passkeys.md): enrolling and removing an authenticator app (TOTP), recovery codes,
 * and checking a code a user typed as the second step of a sign-in. Code checks share the password
 * lockout (Throttle.reserveFactorAttempt): the attempt is reserved before the check, a failure keeps
 * it, five failures lock the user's second factor for LOGIN_LOCK_SECONDS.
 *
 * An authenticator app being set up is a secret of whoever started it (an `EnrolmentOwner`: the browser
 * session, or the pending REST sign-in) for TOTP_ENROLMENT_SECONDS: only that owner is shown it and may
 * confirm it, so nobody can plant a secret in another session's setup or read one from it.
 */

/** How long a new authenticator-app secret waits for its first code. */
export const TOTP_ENROLMENT_SECONDS = 600;

const ENROLMENT_KIND = 'totp_enrolment';

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
  /** The second factors a sign-in may ask for (docs/guides/mfa-and-passkeys.md `methods`), in the order shown. */
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

  /**
   * Starts (or restarts) enrolling an authenticator app for `owner`: a new secret, shown only to that
   * owner and unconfirmed until its first code (within TOTP_ENROLMENT_SECONDS). The owner's earlier
   * enrolment is voided; other owners' are not touched.
   */
  async beginTotp(user: { id: string; email: string }, owner: EnrolmentOwner): Promise<TotpEnrolment> {
    if ((await findTotpFactor(this.deps.db, user.id))?.confirmedAt != null) {
      throw new AppError('conflict', { message: 'An authenticator app is already set up. Remove it first to set up another.' });
    }
    const now = this.deps.clock.now();
    const secret = newTotpSecret();
    await this.deps.db.transaction().execute(async (trx) => {
      for (const earlier of await this.enrolmentsOf(trx, user.id, owner)) await consumeOneTimeToken(trx, earlier.row.id, now);
      await insertOneTimeToken(trx, {
        id: newId('ott'),
        kind: ENROLMENT_KIND,
        token_hash: null,
        code_hash: null,
        user_id: user.id,
        email: null,
        app_id: null,
        data: JSON.stringify({ owner, secret: this.box.seal(secret) }),
        attempts: 0,
        created_at: now,
        expires_at: now + TOTP_ENROLMENT_SECONDS,
        consumed_at: null,
      });
    });
    return this.enrolmentOf(secret, user.email);
  }

  /** The owner's enrolment in progress (to show the QR code again after a wrong first code), if any. */
  async pendingTotp(user: { id: string; email: string }, owner: EnrolmentOwner): Promise<TotpEnrolment | null> {
    const [latest] = await this.enrolmentsOf(this.deps.db, user.id, owner);
    const secret = latest && this.secretOf(user.id, latest.sealed);
    return secret ? this.enrolmentOf(secret, user.email) : null;
  }

  /** The owner's live enrolments, newest first. */
  private async enrolmentsOf(db: Kysely<Database>, userId: string, owner: EnrolmentOwner): Promise<Array<{ row: OneTimeTokenRow; sealed: string }>> {
    const rows = await listLiveOneTimeTokensOfUser(db, ENROLMENT_KIND, userId, this.deps.clock.now());
    return rows.flatMap((row) => {
      const data = parseEnrolment(row.data);
      return data && data.owner === owner ? [{ row, sealed: data.secret }] : [];
    });
  }

  private async enrolmentOf(secret: string, account: string): Promise<TotpEnrolment> {
    const uri = totpUri(secret, this.issuer, account);
    // Loaded on the first enrolment: most processes never draw a QR code.
    const { default: QRCode } = await import('qrcode');
    const qrSvg = await QRCode.toString(uri, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
    return { secret, uri, qrSvg };
  }

  /**
   * Confirms the owner's authenticator app with its first code. The first factor a user enrols also
   * gets the ten recovery codes, returned once (only their hashes are kept). Counts as a second-factor
   * check. Another owner's enrolment is never confirmed here.
   */
  async confirmTotp(userId: string, owner: EnrolmentOwner, code: string, ctx: RequestContext): Promise<{ recoveryCodes: string[] | null }> {
    const [enrolment] = await this.enrolmentsOf(this.deps.db, userId, owner);
    if (!enrolment) throw new AppError('invalid_request', { message: 'Start setting up an authenticator app first (the last setup expired or was finished).' });
    const secret = this.secretOf(userId, enrolment.sealed);
    // The enrolment taken, the factor stored with its first step, its event and the first recovery codes commit together.
    return this.checkCode(
      userId,
      ctx,
      async (trx, now) => {
        const step = secret === null ? null : await matchTotpStep(secret, code, now);
        if (step === null || !(await consumeOneTimeToken(trx, enrolment.row.id, now))) return false;
        if (!(await insertConfirmedTotp(trx, userId, enrolment.sealed, step, now))) {
          throw new AppError('conflict', { message: 'An authenticator app is already set up. Remove it first to set up another.' });
        }
        return true;
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
   * Why a session (its `amr` and `auth_time`) may not add (`add`) or remove or replace (`change`) this
   * user's second factors now, or null when it may (policy.ts: factorChangeRefusal). Every door that
   * changes factors asks this.
   */
  async changeRefusal(
    user: Pick<UserRow, 'id' | 'email_verified'>,
    change: 'add' | 'change',
    session: { amr: readonly Amr[]; authTime: number },
  ): Promise<FactorChangeRefusal | null> {
    const account = { enrolled: await this.enrolled(this.deps.db, user.id), emailVerified: user.email_verified === 1 };
    return factorChangeRefusal(account, change, session, this.deps.clock.now());
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
      const { totp, passkeys } = await deleteFactorsOfUser(trx, userId);
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
      return step !== null && (await acceptTotpStep(db, userId, step));
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

/** The stored enrolment: its owner and the sealed secret (null when the row is not one). */
function parseEnrolment(data: string): { owner: string; secret: string } | null {
  try {
    const value = JSON.parse(data) as { owner?: unknown; secret?: unknown };
    return typeof value.owner === 'string' && typeof value.secret === 'string' ? { owner: value.owner, secret: value.secret } : null;
  } catch {
    return null;
  }
}
