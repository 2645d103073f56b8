import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import { createHmac, hkdfSync } from 'node:crypto';
import {
  dummyVerify,
  hashPassword,
  passwordProblem,
  passwordProblemText,
  prepareDummyHash,
  verifyPassword,
} from './passwords.js';
import type { ResolvedConfig } from '../config.js';
import { isValidDisplayName, isValidEmailAddress } from '../shared/user-fields.js';
import { AppError } from '../errors.js';
import type { Mailer } from '../mail/index.js';
import type { Locale } from '../plugins/i18n.js';
import { hashSecret, newId, newNumericCode, newSecret, safeEqual } from '../shared/ids.js';
import type { Clock } from '../shared/time.js';
import { appendQuery } from '../shared/url.js';
import { revokeBrowserSessionsOfUser } from '../storage/repos/browser-sessions.js';
import { appendEvent } from '../storage/repos/events.js';
import { revokeGrantsOfUser } from '../storage/repos/grants.js';
import { acceptCurrentPlatformDocuments } from '../storage/repos/legal-acceptances.js';
import {
  consumeOneTimeToken,
  findLiveOneTimeTokenByEmail,
  findLiveOneTimeTokenByUser,
  findOneTimeTokenByHash,
  insertOneTimeToken,
  type OneTimeTokenRow,
  recordOneTimeTokenFailure,
  voidOneTimeTokensByEmail,
  voidOneTimeTokensOfUser,
} from '../storage/repos/one-time-tokens.js';
import { findUserByEmail, findUserById, insertUser, normalizeEmail, updateUser, type UserRow } from '../storage/repos/users.js';
import type { Database } from '../storage/schema.js';
import type { RequestContext } from '../shared/request-context.js';
import { maySignIn, refusalError } from '../sign-in/policy.js';
import type { Throttle } from '../throttle/service.js';

/**
 * End-user accounts (CONTRACT §5, §6, §14.3–6, §14.19–20; SECURITY.md H–K): password sign-in with
 * lockout and no enumeration, registration, magic links (link + 6-digit code, one grant), password
 * reset, email verification codes, password change. Shared by the REST API (`/v1/auth`,
 * `/v1/email_verify`) and the hosted pages. Never logs or records a password, token or code.
 */

export type AccountContext = RequestContext & { appId?: string | null };

/** Lifetimes (seconds) of the single-use secrets. */
export const MAGIC_LINK_TTL = 15 * 60;
export const RESET_TTL = 30 * 60;
export const VERIFY_CODE_TTL = 10 * 60;

const KIND = { magic: 'magic_link', reset: 'password_reset', verify: 'email_verify' } as const;

export class Accounts {
  private readonly codeKey: Buffer;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly config: ResolvedConfig,
    private readonly clock: Clock,
    private readonly throttle: Throttle,
    private readonly mailer: Mailer,
  ) {
    this.codeKey = Buffer.from(hkdfSync('sha256', config.secretKey, 'gatehouse', 'gatehouse:email-codes', 32));
  }

  // Passwords ----------------------------------------------------------------------------------------

  /** Password policy check (CONTRACT §5.2) for the given email; throws weak_password with a reason in `details`. */
  checkPasswordPolicy(password: string, email: string, field = 'password'): void {
    const problem = passwordProblem(password, email);
    if (problem) {
      throw new AppError('weak_password', {
        message: `The password ${passwordProblemText(problem)}.`,
        details: [{ path: field, message: passwordProblemText(problem) }],
        extra: { reason: problem },
        detail: `password policy: ${problem}`,
      });
    }
  }

  hashPassword(password: string): Promise<string> {
    return hashPassword(password);
  }

  /**
   * Email+password check with lockout (CONTRACT §5.3, §14.3, §14.19) and no enumeration (one dummy argon2
   * verify for unknown emails). Throws invalid_credentials (401) | rate_limited (429, extra.retry_after) |
   * user_disabled (403, only after a correct password). Records user.login_failed / user.locked (not
   * login_succeeded: callers record that with the app id). Returns the user row.
   */
  async verifyLogin(input: { email: string; password: string }, ctx: AccountContext): Promise<UserRow> {
    const email = normalizeEmail(input.email);
    await this.throttle.assertLoginAllowed(email);
    const user = await findUserByEmail(this.db, email);
    let ok = false;
    if (user?.password_hash) ok = await verifyPassword(user.password_hash, input.password);
    else await dummyVerify(input.password);
    const now = this.clock.now();
    if (!user || !ok) {
      await this.db.transaction().execute(async (trx) => {
        const locked = await this.throttle.recordLoginFailure(trx, email);
        const base = { appId: ctx.appId ?? null, userId: user?.id ?? null, ip: ctx.ip, userAgent: ctx.userAgent };
        await appendEvent(trx, now, { ...base, type: 'user.login_failed', data: { reason: 'invalid_credentials', known_user: Boolean(user) } });
        if (locked) await appendEvent(trx, now, { ...base, type: 'user.locked', data: { seconds: this.config.throttle.loginLockSeconds } });
      });
      throw new AppError('invalid_credentials', { detail: user ? 'wrong password' : 'unknown email' });
    }
    // The account-wide half of the sign-in policy, only after a correct password (no enumeration);
    // the app's half is checked when the door completes the sign-in for its app.
    const refusal = maySignIn(user, undefined);
    if (refusal) throw refusalError(refusal, 'api');
    await this.afterSignIn(this.db, user);
    return user;
  }

  /** A successful sign-in clears the failure counter and kills outstanding reset tokens (SECURITY.md item 77). */
  private async afterSignIn(db: Kysely<Database>, user: UserRow): Promise<void> {
    const now = this.clock.now();
    await this.throttle.clearLoginFailures(db, user.email);
    await voidOneTimeTokensOfUser(db, KIND.reset, user.id, now);
  }

  /**
   * Creates a user in one transaction: policy-checked password (weak_password), normalised unique email
   * (email_taken 409), optional name (1–100), user.registered event, the verification-code mail in the
   * outbox, and — when acceptLegal — acceptance records of the current platform `terms` and `privacy`
   * versions (if published). Returns the user row.
   */
  async register(
    input: { email: string; password: string; name?: string; acceptLegal?: boolean; locale?: Locale },
    ctx: AccountContext,
  ): Promise<UserRow> {
    const email = normalizeEmail(input.email);
    if (!isValidEmailAddress(email)) throw new AppError('invalid_request', { details: [{ path: 'email', message: 'must be an email address' }] });
    const name = input.name?.trim() || null;
    if (name !== null && !isValidDisplayName(name)) {
      throw new AppError('invalid_request', { details: [{ path: 'name', message: 'must be 1–100 characters without control characters' }] });
    }
    this.checkPasswordPolicy(input.password, email);
    if (await findUserByEmail(this.db, email)) throw new AppError('email_taken');
    const passwordHash = await hashPassword(input.password);
    const now = this.clock.now();
    const user: UserRow = {
      id: newId('usr'),
      email,
      email_verified: 0,
      password_hash: passwordHash,
      name,
      phone_number: null,
      birthdate: null,
      status: 'active',
      password_changed_at: now,
      created_at: now,
      updated_at: now,
    };
    try {
      await this.db.transaction().execute(async (trx) => {
        await insertUser(trx, user);
        await appendEvent(trx, now, { type: 'user.registered', appId: ctx.appId ?? null, userId: user.id, ip: ctx.ip, userAgent: ctx.userAgent, data: { method: 'password' } });
        if (input.acceptLegal) await acceptCurrentPlatformDocuments(trx, user.id, ['terms', 'privacy'], now);
        try {
          await this.throttle.hitMail(trx, 'verify', email);
        } catch (error) {
          if (error instanceof AppError && error.code === 'rate_limited') return; // the account exists either way
          throw error;
        }
        await this.issueVerifyCode(trx, user, input.locale ?? 'en');
      });
    } catch (error) {
      if (isUniqueViolation(error)) throw new AppError('email_taken', { detail: 'concurrent registration' });
      throw error;
    }
    this.mailer.nudge();
    return user;
  }

  /** Changes the password of a signed-in user (account page): checks the current one, then revokes other sign-ins. */
  async changePassword(
    userId: string,
    input: { currentPassword: string; newPassword: string; keepBrowserSessionIdHash?: string; locale?: Locale },
    ctx: AccountContext,
  ): Promise<void> {
    const user = await findUserById(this.db, userId);
    if (!user || user.status !== 'active') throw new AppError('unauthorized');
    if (user.password_hash && !(await verifyPassword(user.password_hash, input.currentPassword))) {
      throw new AppError('invalid_credentials', { message: 'The current password is incorrect.' });
    }
    this.checkPasswordPolicy(input.newPassword, user.email, 'new_password');
    await this.setPassword(user, input.newPassword, ctx, { method: 'change', keepBrowserSessionIdHash: input.keepBrowserSessionIdHash, locale: input.locale });
  }

  private async setPassword(
    user: UserRow,
    password: string,
    ctx: AccountContext,
    options: { method: 'change' | 'reset'; keepBrowserSessionIdHash?: string; locale?: Locale; consume?: (trx: Kysely<Database>) => Promise<boolean> },
  ): Promise<void> {
    const hash = await hashPassword(password);
    const now = this.clock.now();
    const done = await this.db.transaction().execute(async (trx) => {
      if (options.consume && !(await options.consume(trx))) return false;
      await updateUser(trx, user.id, {
        password_hash: hash,
        password_changed_at: now,
        updated_at: now,
        // A reset link proves control of the mailbox.
        ...(options.method === 'reset' ? { email_verified: 1 } : {}),
      });
      await voidOneTimeTokensOfUser(trx, KIND.reset, user.id, now);
      await voidOneTimeTokensOfUser(trx, KIND.magic, user.id, now);
      await revokeGrantsOfUser(trx, user.id, now, options.method === 'reset' ? 'password_reset' : 'password_change');
      await revokeBrowserSessionsOfUser(trx, user.id, now, options.keepBrowserSessionIdHash);
      await this.throttle.clearLoginFailures(trx, user.email);
      await appendEvent(trx, now, { type: 'password.reset', appId: ctx.appId ?? null, userId: user.id, ip: ctx.ip, userAgent: ctx.userAgent, data: { method: options.method } });
      await this.mailer.enqueue(trx, {
        kind: 'notice',
        to: user.email,
        locale: options.locale ?? 'en',
        template: 'password_changed',
        params: { link: `${this.config.authUrl}/password/forgot` },
      });
      return true;
    });
    if (!done) throw new AppError('invalid_token', { detail: 'reset token used concurrently' });
    this.mailer.nudge();
  }

  // Magic links --------------------------------------------------------------------------------------

  /**
   * Mails a magic link (+ the same grant as a 6-digit code) to an existing, active account; answers the
   * same for every address (CONTRACT §5.1). The link is `redirectUri?magic_token=…` when the caller
   * verified `redirectUri` against the app's whitelist, else `{auth_url}/magic-link?token=…`. A newer
   * link voids older ones. Mail limit `magic_link` per address (429 whether or not it has an account).
   */
  async requestMagicLink(input: { email: string; locale?: Locale; redirectUri?: string }, ctx: AccountContext): Promise<void> {
    const email = normalizeEmail(input.email);
    const now = this.clock.now();
    let sent = false;
    await this.db.transaction().execute(async (trx) => {
      await this.throttle.hitMail(trx, 'magic_link', email);
      const user = await findUserByEmail(trx, email);
      if (!user || user.status !== 'active') return;
      await voidOneTimeTokensByEmail(trx, KIND.magic, email, now);
      const token = newSecret('ml');
      const code = newNumericCode(6);
      const id = newId('ott');
      await insertOneTimeToken(trx, {
        id,
        kind: KIND.magic,
        token_hash: hashSecret(token),
        code_hash: this.codeHash(id, code),
        user_id: user.id,
        email,
        app_id: ctx.appId ?? null,
        data: JSON.stringify(input.redirectUri ? { redirect_uri: input.redirectUri } : {}),
        attempts: 0,
        created_at: now,
        expires_at: now + MAGIC_LINK_TTL,
        consumed_at: null,
      });
      const link = input.redirectUri ? appendQuery(input.redirectUri, { magic_token: token }) : `${this.config.authUrl}/magic-link?${new URLSearchParams({ token })}`;
      await this.mailer.enqueue(trx, { kind: 'magic_link', to: user.email, locale: input.locale ?? 'en', template: 'magic_link', params: { link, code, minutes: MAGIC_LINK_TTL / 60 } });
      sent = true;
    });
    if (sent) this.mailer.nudge();
  }

  /** Redeems a magic-link token (single use; also voids its code). Unknown, used or expired → 400 invalid_token. */
  async consumeMagicToken(token: string, ctx: AccountContext): Promise<UserRow> {
    const now = this.clock.now();
    const row = await findOneTimeTokenByHash(this.db, KIND.magic, hashSecret(token));
    if (!row || row.consumed_at !== null || row.expires_at <= now) throw new AppError('invalid_token', { detail: 'magic token unknown, used or expired' });
    if (row.app_id && ctx.appId && row.app_id !== ctx.appId) throw new AppError('invalid_token', { detail: 'magic token of another app' });
    if (!(await consumeOneTimeToken(this.db, row.id, now))) throw new AppError('invalid_token', { detail: 'magic token used concurrently' });
    return this.finishMagic(row);
  }

  /**
   * Redeems the magic-link grant by email + 6-digit code. Wrong → 400 invalid_code with attempts_left
   * (CODE_MAX_ATTEMPTS wrong answers void the grant); no live grant → 400 code_expired.
   */
  async consumeMagicCode(input: { email: string; code: string }, ctx: AccountContext): Promise<UserRow> {
    const email = normalizeEmail(input.email);
    const row = await findLiveOneTimeTokenByEmail(this.db, KIND.magic, email, this.clock.now());
    const usable = row && !(row.app_id && ctx.appId && row.app_id !== ctx.appId) ? row : undefined;
    await this.checkCode(usable, input.code);
    return this.finishMagic(usable!);
  }

  private async finishMagic(row: OneTimeTokenRow): Promise<UserRow> {
    const user = row.user_id ? await findUserById(this.db, row.user_id) : undefined;
    if (!user || user.email !== row.email) throw new AppError('invalid_token', { detail: 'magic link user gone or email changed' });
    const refusal = maySignIn(user, undefined);
    if (refusal) throw refusalError(refusal, 'api');
    const now = this.clock.now();
    await this.db.transaction().execute(async (trx) => {
      await this.afterSignIn(trx, user);
      if (user.email_verified !== 1) await updateUser(trx, user.id, { email_verified: 1, updated_at: now });
    });
    return { ...user, email_verified: 1 };
  }

  // Password reset -----------------------------------------------------------------------------------

  /**
   * Mails a reset link to an existing, active account (30 min, single use); the same answer for every
   * address. Link: `redirectUri?reset_token=…` (whitelisted by the caller) or `{auth_url}/password/reset?token=…`.
   */
  async requestPasswordReset(input: { email: string; locale?: Locale; redirectUri?: string }, ctx: AccountContext): Promise<void> {
    const email = normalizeEmail(input.email);
    const now = this.clock.now();
    let sent = false;
    await this.db.transaction().execute(async (trx) => {
      await this.throttle.hitMail(trx, 'reset', email);
      const user = await findUserByEmail(trx, email);
      if (!user || user.status !== 'active') return;
      await voidOneTimeTokensOfUser(trx, KIND.reset, user.id, now);
      const token = newSecret('pr');
      await insertOneTimeToken(trx, {
        id: newId('ott'),
        kind: KIND.reset,
        token_hash: hashSecret(token),
        code_hash: null,
        user_id: user.id,
        email,
        app_id: ctx.appId ?? null,
        data: '{}',
        attempts: 0,
        created_at: now,
        expires_at: now + RESET_TTL,
        consumed_at: null,
      });
      const link = input.redirectUri ? appendQuery(input.redirectUri, { reset_token: token }) : `${this.config.authUrl}/password/reset?${new URLSearchParams({ token })}`;
      await this.mailer.enqueue(trx, { kind: 'reset', to: user.email, locale: input.locale ?? 'en', template: 'password_reset', params: { link, minutes: RESET_TTL / 60 } });
      await appendEvent(trx, now, { type: 'password.reset_requested', appId: ctx.appId ?? null, userId: user.id, ip: ctx.ip, userAgent: ctx.userAgent, data: {} });
      sent = true;
    });
    if (sent) this.mailer.nudge();
  }

  /** Whether a reset token is live (the hosted page shows the form only then). */
  async isResetTokenLive(token: string): Promise<boolean> {
    const row = await findOneTimeTokenByHash(this.db, KIND.reset, hashSecret(token));
    return Boolean(row && row.consumed_at === null && row.expires_at > this.clock.now());
  }

  /**
   * Sets a new password with a reset token: policy-checked first (a weak password does not burn the
   * token); then, in one transaction, the token is consumed, every grant (refresh tokens, session JWTs)
   * and browser session of the user is revoked, other reset tokens die, a notice mail is queued.
   * Never signs in. Unknown, used or expired token → 400 invalid_token.
   */
  async resetPassword(input: { token: string; password: string; locale?: Locale }, ctx: AccountContext): Promise<UserRow> {
    const now = this.clock.now();
    const row = await findOneTimeTokenByHash(this.db, KIND.reset, hashSecret(input.token));
    if (!row || row.consumed_at !== null || row.expires_at <= now || !row.user_id) throw new AppError('invalid_token', { detail: 'reset token unknown, used or expired' });
    const user = await findUserById(this.db, row.user_id);
    if (!user || user.email !== row.email) throw new AppError('invalid_token', { detail: 'reset token user gone or email changed' });
    this.checkPasswordPolicy(input.password, user.email);
    await this.setPassword(user, input.password, { ...ctx, appId: ctx.appId ?? row.app_id }, {
      method: 'reset',
      locale: input.locale,
      consume: (trx) => consumeOneTimeToken(trx, row.id, this.clock.now()),
    });
    return (await findUserById(this.db, user.id))!;
  }

  // Email verification -------------------------------------------------------------------------------

  private async issueVerifyCode(trx: Kysely<Database>, user: UserRow, locale: Locale): Promise<void> {
    const now = this.clock.now();
    await voidOneTimeTokensOfUser(trx, KIND.verify, user.id, now);
    const id = newId('ott');
    const code = newNumericCode(6);
    await insertOneTimeToken(trx, {
      id,
      kind: KIND.verify,
      token_hash: null,
      code_hash: this.codeHash(id, code),
      user_id: user.id,
      email: user.email,
      app_id: null,
      data: '{}',
      attempts: 0,
      created_at: now,
      expires_at: now + VERIFY_CODE_TTL,
      consumed_at: null,
    });
    await this.mailer.enqueue(trx, { kind: 'verify', to: user.email, locale, template: 'verify_code', params: { code, minutes: VERIFY_CODE_TTL / 60 } });
  }

  /** Mails a new 6-digit verification code (10 min; voids the previous one). Mail limit `verify`. Returns its lifetime. */
  async requestEmailVerification(userId: string, input: { locale?: Locale }, _ctx: AccountContext): Promise<{ expiresIn: number }> {
    const user = await findUserById(this.db, userId);
    if (!user || user.status !== 'active') throw new AppError('unauthorized', { detail: 'user gone or disabled' });
    await this.db.transaction().execute(async (trx) => {
      await this.throttle.hitMail(trx, 'verify', user.email);
      await this.issueVerifyCode(trx, user, input.locale ?? 'en');
    });
    this.mailer.nudge();
    return { expiresIn: VERIFY_CODE_TTL };
  }

  /**
   * Confirms the user's current verification code: right → email_verified (event email.verified);
   * wrong → 400 invalid_code with attempts_left (the last wrong answer says 0); none live, expired or
   * exhausted → 400 code_expired. Single use, bound to the user and the address it was sent to.
   */
  async confirmEmailVerification(userId: string, code: string, ctx: AccountContext): Promise<UserRow> {
    const user = await findUserById(this.db, userId);
    if (!user || user.status !== 'active') throw new AppError('unauthorized', { detail: 'user gone or disabled' });
    const row = await findLiveOneTimeTokenByUser(this.db, KIND.verify, userId, this.clock.now());
    await this.checkCode(row && row.email === user.email ? row : undefined, code);
    const now = this.clock.now();
    await this.db.transaction().execute(async (trx) => {
      await updateUser(trx, user.id, { email_verified: 1, updated_at: now });
      await appendEvent(trx, now, { type: 'email.verified', appId: ctx.appId ?? null, userId: user.id, ip: ctx.ip, userAgent: ctx.userAgent, data: {} });
    });
    return { ...user, email_verified: 1, updated_at: now };
  }

  // Codes ----------------------------------------------------------------------------------------------

  private codeHash(id: string, code: string): string {
    return createHmac('sha256', this.codeKey).update(`${id}:${code}`).digest('base64url');
  }

  /** Checks a code against a live grant and consumes it; throws invalid_code / code_expired. */
  private async checkCode(row: OneTimeTokenRow | undefined, code: string): Promise<void> {
    const max = this.config.throttle.codeMaxAttempts;
    const now = this.clock.now();
    if (!row || !row.code_hash || row.attempts >= max) throw new AppError('code_expired', { detail: 'no live code' });
    if (!/^\d{6}$/.test(code) || !safeEqual(this.codeHash(row.id, code), row.code_hash)) {
      const attempts = await recordOneTimeTokenFailure(this.db, row.id, now, max);
      if (attempts === null) throw new AppError('code_expired', { detail: 'code voided meanwhile' });
      throw new AppError('invalid_code', { extra: { attempts_left: Math.max(0, max - attempts) }, detail: 'wrong code' });
    }
    if (!(await consumeOneTimeToken(this.db, row.id, now, max))) throw new AppError('code_expired', { detail: 'code used concurrently' });
  }
}

/** A unique-constraint violation on SQLite or PostgreSQL. */
function isUniqueViolation(error: unknown): boolean {
  const e = error as { code?: string; message?: string } | undefined;
  return e?.code === '23505' || e?.code === 'SQLITE_CONSTRAINT_UNIQUE' || e?.code === 'SQLITE_CONSTRAINT_PRIMARYKEY' || /UNIQUE constraint failed/.test(e?.message ?? '');
}

declare module 'fastify' {
  interface FastifyInstance {
    accounts: Accounts;
  }
}

async function accountsPlugin(app: FastifyInstance) {
  app.decorate('accounts', new Accounts(app.db, app.config, app.clock, app.throttle, app.mailer));
  app.addHook('onReady', async () => void (await prepareDummyHash()));
}

export default fp(accountsPlugin, { name: 'accounts', dependencies: ['db', 'throttle', 'mailer'] });
