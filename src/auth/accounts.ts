import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import { codeHasher } from '../shared/crypto.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import { dummyVerify, hashPassword, needsRehash, prepareDummyHash, verifyPassword } from './passwords.js';
import { isBundledBreachedPassword } from '../sign-in/breached-passwords.js';
import { hibpRangeClient, type RangeCheck } from '../sign-in/hibp.js';
import {
  DEFAULT_PASSWORD_POLICY,
  PASSWORD_HISTORY_MAX,
  type PasswordPolicy,
  type PasswordProblem,
  passwordExpired,
  passwordProblem,
  passwordProblemText,
} from '../sign-in/password-policy.js';
import { listPreviousPasswordHashes, recordPreviousPasswordHash } from '../storage/repos/password-history.js';
import type { ResolvedConfig } from '../config.js';
import { isValidDisplayName, isValidEmailAddress } from '../shared/user-fields.js';
import { AppError } from '../errors.js';
import type { Mailer } from '../mail/index.js';
import type { Locale } from '../plugins/i18n.js';
import { hashSecret, newId, newNumericCode, newSecret } from '../shared/ids.js';
import type { Clock } from '../shared/time.js';
import { checkOneTimeCode } from '../sign-in/one-time-codes.js';
import { TurnSkipped, type TurnTerms } from '../shared/turns.js';
import { appendQuery } from '../shared/url.js';
import { findAppUser } from '../storage/repos/app-users.js';
import { findApp } from '../storage/repos/apps.js';
import { revokeBrowserSessionsOfUser } from '../storage/repos/browser-sessions.js';
import { revokeConsentsOfUser } from '../storage/repos/consents.js';
import { appendEvent } from '../storage/repos/events.js';
import { revokeGrantsOfUser } from '../storage/repos/grants.js';
import { deleteFactorsOfUser } from '../storage/repos/factors.js';
import { deleteIdentityOfUser, listIdentitiesOfUser } from '../storage/repos/idp.js';
import { acceptCurrentPlatformDocuments } from '../storage/repos/legal-acceptances.js';
import {
  consumeOneTimeToken,
  findLiveOneTimeTokenByEmail,
  findLiveOneTimeTokenByHash,
  findLiveOneTimeTokenByUser,
  findOneTimeTokenByHash,
  insertOneTimeToken,
  type OneTimeTokenRow,
  voidOneTimeTokensByEmail,
  voidOneTimeTokensOfUser,
  voidOneTimeTokensOfUserOfKinds,
} from '../storage/repos/one-time-tokens.js';
import { addToCounter, findCounters } from '../storage/repos/throttle.js';
import { findUserByEmail, findUserById, insertUser, normalizeEmail, replacePasswordHash, updateUser, type UserRow } from '../storage/repos/users.js';
import { passwordHashFormat } from '../sign-in/password-hashes.js';
import type { Database } from '../storage/schema.js';
import type { RequestContext } from '../shared/request-context.js';
import { mayAuthenticate, refusalError } from '../sign-in/policy.js';
import { cancelUserDeletion } from '../storage/repos/account-deletion.js';
import type { Throttle } from '../throttle/service.js';

/**
 * End-user accounts (docs/reference/rest-api.md, docs/security/checklist.md): password sign-in with
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

/**
 * The single-use tickets of a user that a claim voids: mailed links and codes, provider transactions,
 * passkey challenges, authenticator-app setups and a pending email change (a squatter's way to move the
 * claimed account to their own address).
 */
const CLAIM_VOIDS = [KIND.magic, KIND.reset, KIND.verify, 'idp_state', 'idp_continue', 'idp_bind', 'passkey_registration', 'passkey_authentication', 'totp_enrolment', 'email_change'];

/** The app an unbound reset link was asked through (`policy_app` in its data), if any. */
function resetPolicyApp(data: string | null): string | undefined {
  try {
    const value = data ? (JSON.parse(data) as { policy_app?: unknown }).policy_app : undefined;
    return typeof value === 'string' ? value : undefined;
  } catch {
    return undefined;
  }
}

export interface MailingApp {
  id: string;
  name: string;
}

/** How a mail link says where it goes: the host for http(s), else the scheme (and host, if any). */
export function linkDestination(link: string): string {
  const url = new URL(link);
  if (url.protocol === 'http:' || url.protocol === 'https:') return url.host;
  return url.host ? `${url.protocol}//${url.host}` : url.protocol;
}

export class Accounts {
  private readonly codeHash: (id: string, code: string) => string;
  private readonly hibp: RangeCheck | undefined;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly config: ResolvedConfig,
    private readonly clock: Clock,
    private readonly throttle: Throttle,
    private readonly mailer: Mailer,
    log: { warn: (obj: object, msg: string) => void } = { warn: () => {} },
  ) {
    this.codeHash = codeHasher(config.secretKey, 'email-codes');
    const hibp = config.hibp;
    this.hibp = hibp
      ? hibpRangeClient({ url: hibp.rangeUrl, timeoutMs: hibp.timeoutMs, onFailure: (reason) => log.warn({ reason }, 'HIBP range check failed; the password was checked against the bundled list only') })
      : undefined;
  }

  // Passwords ----------------------------------------------------------------------------------------

  /**
   * A request's terms at the argon2 line: skipped if its client has gone by its turn, or if it waited
   * over PASSWORD_MAX_WAIT_MS (503 with Retry-After: the line is overloaded).
   */
  private passwordTerms(ctx: AccountContext): TurnTerms {
    return { abandoned: ctx.clientGone, maxWaitMs: this.config.passwordMaxWaitMs };
  }

  /** The password policy of the app a person is signing in through; the platform default without one. */
  async passwordPolicyOf(appId: string | null | undefined): Promise<PasswordPolicy> {
    const app = appId ? await findApp(this.db, appId) : undefined;
    return app && !app.disabled ? app.passwordPolicy : DEFAULT_PASSWORD_POLICY;
  }

  /**
   * Checks a new password against the policy of the app it is chosen through (docs/guides/password-policy.md):
   * the pure rules and the bundled breach list first, then the HIBP range API (when configured), then
   * the account's last `historyCount` passwords (its current hash and the previous ones). Throws
   * weak_password with the problem in `details` (`reason`: too_short, common, reused, …).
   */
  async checkNewPassword(
    password: string,
    account: { email: string; user?: Pick<UserRow, 'id' | 'password_hash'> },
    policy: PasswordPolicy,
    ctx: AccountContext,
    field = 'password',
  ): Promise<void> {
    const floor = this.config.passwordMinLength;
    const base = { email: account.email, breached: false };
    let problem = passwordProblem(password, policy, floor, base);
    if (!problem && isBundledBreachedPassword(password)) problem = 'common';
    if (!problem && this.hibp && (await this.hibp(password)) === 'breached') problem = 'common';
    if (!problem && account.user && policy.historyCount > 0 && (await this.isRecentPassword(account.user, password, policy.historyCount, ctx))) problem = 'reused';
    if (problem) this.refusePassword(problem, policy, field);
  }

  private async isRecentPassword(user: Pick<UserRow, 'id' | 'password_hash'>, password: string, count: number, ctx: AccountContext): Promise<boolean> {
    const hashes = [...(user.password_hash ? [user.password_hash] : []), ...(await listPreviousPasswordHashes(this.db, user.id, count))].slice(0, count);
    for (const hash of hashes) if (await verifyPassword(hash, password, this.passwordTerms(ctx))) return true;
    return false;
  }

  private refusePassword(problem: PasswordProblem, policy: PasswordPolicy, field: string): never {
    const text = passwordProblemText(problem, policy, this.config.passwordMinLength);
    throw new AppError('weak_password', {
      message: `The password ${text}.`,
      details: [{ path: field, message: text }],
      extra: { reason: problem },
      detail: `password policy: ${problem}`,
    });
  }

  /**
   * Email+password check with lockout (docs/reference/rest-api.md#throttling) and no enumeration (one dummy argon2
   * verify for unknown emails). Throws invalid_credentials (401) | rate_limited (429, extra.retry_after) |
   * user_disabled (403, only after a correct password). Records user.login_failed / user.locked (not
   * login_succeeded: callers record that with the app id). Returns the user row.
   *
   * A password older than the maximum age of the app signed in to (docs/guides/password-policy.md)
   * answers the right password with 403 password_expired; the same request with `newPassword` sets a
   * new one under the app's policy (never the current one again) and signs in with it.
   */
  async verifyLogin(
    input: { email: string; password: string; newPassword?: string; locale?: Locale; passwordPolicy?: PasswordPolicy },
    ctx: AccountContext,
  ): Promise<UserRow> {
    const email = normalizeEmail(input.email);
    // The attempt is reserved in the database before any hashing (429 when the address is locked or
    // its LOGIN_MAX_FAILURES slots are taken, by earlier failures or by attempts still running), so
    // concurrent requests and other processes cannot get more guesses evaluated. Same for unknown emails.
    const attempt = await this.throttle.reserveLoginAttempt(email);
    const user = await findUserByEmail(this.db, email);
    let ok = false;
    try {
      if (user?.password_hash) ok = await verifyPassword(user.password_hash, input.password, this.passwordTerms(ctx));
      else await dummyVerify(input.password, this.passwordTerms(ctx));
    } catch (error) {
      // The password's turn was skipped (the client had left, or the line was over its bound):
      // nothing was evaluated, so the slot goes back.
      if (error instanceof TurnSkipped) await this.throttle.releaseLoginAttempt(attempt);
      throw error;
    }
    const now = this.clock.now();
    if (!user || !ok) {
      await this.db.transaction().execute(async (trx) => {
        const locked = await this.throttle.recordLoginFailure(trx, attempt);
        const base = { appId: ctx.appId ?? null, userId: user?.id ?? null, ip: ctx.ip, userAgent: ctx.userAgent };
        await appendEvent(trx, now, { ...base, type: 'user.login_failed', data: { reason: 'invalid_credentials', known_user: Boolean(user) } });
        if (locked) await appendEvent(trx, now, { ...base, type: 'user.locked', data: { seconds: this.config.throttle.loginLockSeconds } });
      });
      throw new AppError('invalid_credentials', { detail: user ? 'wrong password' : 'unknown email' });
    }
    // The account-wide half of the sign-in policy, only after a correct password (no enumeration);
    // the app's half is checked when the door completes the sign-in for its app.
    const refusal = mayAuthenticate(user);
    if (refusal) {
      // A correct password is not a failure: its reservation is released.
      await this.throttle.clearLoginFailures(this.db, email);
      throw refusalError(refusal, 'api');
    }
    // The door usually holds the app already: no second read of it on the login path.
    const policy = input.passwordPolicy ?? (await this.passwordPolicyOf(ctx.appId));
    if (passwordExpired(user.password_changed_at, policy, now)) {
      if (input.newPassword === undefined) {
        await this.throttle.clearLoginFailures(this.db, email);
        throw new AppError('password_expired', { extra: { max_age_days: policy.maxAgeDays }, detail: 'password older than the app allows' });
      }
      await this.checkNewPassword(input.newPassword, { email: user.email, user }, { ...policy, historyCount: Math.max(1, policy.historyCount) }, ctx, 'new_password');
      await this.setPassword(user, input.newPassword, ctx, { method: 'change', locale: input.locale ?? 'en' });
      return (await findUserById(this.db, user.id))!;
    }
    const rehash = needsRehash(user.password_hash!) ? await this.rehash(input.password, ctx) : null;
    if (!rehash) {
      await this.afterSignIn(this.db, user);
      return user;
    }
    // An imported (or older) hash is replaced by ours with the sign-in's own writes: the old one is gone.
    await this.db.transaction().execute(async (trx) => {
      if (await replacePasswordHash(trx, user.id, user.password_hash!, rehash, now)) {
        await appendEvent(trx, now, { type: 'password.rehashed', appId: ctx.appId ?? null, userId: user.id, data: { from: passwordHashFormat(user.password_hash!) ?? 'unknown' } });
      }
      await this.afterSignIn(trx, user);
    });
    return { ...user, password_hash: rehash };
  }

  /** Our hash of a password just verified, or null when its turn at argon2 was skipped (the sign-in goes on; the next one re-hashes). */
  private async rehash(password: string, ctx: AccountContext): Promise<string | null> {
    try {
      return await hashPassword(password, this.passwordTerms(ctx));
    } catch (error) {
      if (error instanceof TurnSkipped) return null;
      throw error;
    }
  }

  /** A successful sign-in clears the failure counter and kills outstanding reset tokens (docs/security/checklist.md#magic-links-and-reset-links). */
  private async afterSignIn(db: Kysely<Database>, user: UserRow): Promise<void> {
    // Independent writes, sent together: on SQLite they share one group commit (one fsync, not two).
    await Promise.all([this.throttle.clearLoginFailures(db, user.email), voidOneTimeTokensOfUser(db, KIND.reset, user.id, this.clock.now())]);
  }

  /**
   * Creates a user in one transaction: policy-checked password (weak_password), normalised unique email
   * (email_taken 409), optional name (1–100), user.registered event, the verification-code mail in the
   * outbox, and — when acceptLegal — acceptance records of the current platform `terms` and `privacy`
   * versions (if published). Returns the user row.
   */
  async register(
    input: { email: string; password: string; name?: string; acceptLegal?: boolean; locale: Locale },
    ctx: AccountContext,
  ): Promise<UserRow> {
    const email = normalizeEmail(input.email);
    if (!isValidEmailAddress(email)) throw new AppError('invalid_request', { details: [{ path: 'email', message: 'must be an email address' }] });
    const name = input.name?.trim() || null;
    if (name !== null && !isValidDisplayName(name)) {
      throw new AppError('invalid_request', { details: [{ path: 'name', message: 'must be 1–100 characters without control characters' }] });
    }
    await this.checkNewPassword(input.password, { email }, await this.passwordPolicyOf(ctx.appId), ctx);
    if (await findUserByEmail(this.db, email)) throw new AppError('email_taken');
    const passwordHash = await hashPassword(input.password, this.passwordTerms(ctx));
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
      deletion_scheduled_at: null,
      locale: null,
    };
    try {
      await this.db.transaction().execute(async (trx) => {
        await insertUser(trx, user);
        await appendEvent(trx, now, { type: 'user.registered', appId: ctx.appId ?? null, userId: user.id, ip: ctx.ip, userAgent: ctx.userAgent, data: { method: 'password' } });
        if (input.acceptLegal) {
          for (const doc of await acceptCurrentPlatformDocuments(trx, user.id, ['terms', 'privacy'], now)) {
            await appendEvent(trx, now, { type: 'legal.accepted', appId: ctx.appId ?? null, userId: user.id, data: { owner: 'platform', doc_type: doc.docType, lang: doc.lang, version: doc.version } });
          }
        }
        try {
          await this.throttle.hitMail(trx, 'verify', email);
        } catch (error) {
          if (error instanceof AppError && error.code === 'rate_limited') return; // the account exists either way
          throw error;
        }
        await this.issueVerifyCode(trx, user, input.locale, ctx.appId);
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
    input: { currentPassword: string; newPassword: string; keepBrowserSessionIdHash?: string; locale: Locale },
    ctx: AccountContext,
  ): Promise<void> {
    const user = await findUserById(this.db, userId);
    if (!user || user.status !== 'active') throw new AppError('unauthorized');
    if (user.password_hash && !(await verifyPassword(user.password_hash, input.currentPassword, this.passwordTerms(ctx)))) {
      throw new AppError('invalid_credentials', { message: 'The current password is incorrect.' });
    }
    await this.checkNewPassword(input.newPassword, { email: user.email, user }, await this.passwordPolicyOf(ctx.appId), ctx, 'new_password');
    await this.setPassword(user, input.newPassword, ctx, { method: 'change', keepBrowserSessionIdHash: input.keepBrowserSessionIdHash, locale: input.locale });
  }

  /**
   * A signed-in person typing their current password again before an account-wide change (email change,
   * docs/account/email-change.md). Wrong or missing → invalid_credentials; an account without a password
   * has nothing to check here (its door asks for a recent sign-in instead).
   */
  async checkCurrentPassword(user: UserRow, password: string, ctx: AccountContext): Promise<void> {
    if (!user.password_hash) return;
    if (!password || !(await verifyPassword(user.password_hash, password, this.passwordTerms(ctx)))) {
      throw new AppError('invalid_credentials', { message: 'The current password is incorrect.', detail: 'wrong current password' });
    }
  }

  private async setPassword(
    user: UserRow,
    password: string,
    ctx: AccountContext,
    options: { method: 'change' | 'reset'; keepBrowserSessionIdHash?: string; locale: Locale; consume?: (trx: Kysely<Database>) => Promise<boolean> },
  ): Promise<void> {
    const hash = await hashPassword(password, this.passwordTerms(ctx));
    const now = this.clock.now();
    const done = await this.db.transaction().execute(async (trx) => {
      if (options.consume && !(await options.consume(trx))) return false;
      // A reset link proves the mailbox: an account whose address was never proven is claimed first.
      if (options.method === 'reset') {
        const current = await findUserById(trx, user.id);
        if (current && current.email_verified !== 1) await this.claimAccount(trx, current, 'password_reset', ctx);
      }
      // The replaced hash joins the history the reuse rule reads (bounded whatever the app's setting).
      if (user.password_hash) await recordPreviousPasswordHash(trx, user.id, user.password_hash, now, PASSWORD_HISTORY_MAX);
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
        locale: options.locale,
        template: 'password_changed',
        params: { link: `${this.config.authUrl}/password/forgot` },
        app: ctx.appId ? await findApp(trx, ctx.appId) : undefined,
      });
      return true;
    });
    if (!done) throw new AppError('invalid_token', { detail: 'reset token used concurrently' });
    this.mailer.nudge();
  }

  // Magic links --------------------------------------------------------------------------------------

  /**
   * Mails a magic link (+ the same grant as a 6-digit code); answers the same for every address
   * (docs/reference/rest-api.md#enumeration). A newer link voids older ones. Mail limit `magic_link` per address (429 whether or
   * not it has an account). Where the link goes (docs/reference/rest-api.md#magic-links-and-reset-links): `redirectUri?magic_token=…` only when
   * the caller verified `redirectUri` against `app`'s whitelist AND the address belongs to an active
   * user of that app — the grant is then bound to the app (redeemable only with its client_id); for
   * anyone else `{auth_url}/magic-link?token=…` (not bound). The mail names the app and the link's host.
   * An address without an active account gets the same work (grant row, rendered mail) with a
   * stand-in grant of no user and a mail the sender drops unsent, so time and statements match.
   */
  async requestMagicLink(input: { email: string; locale: Locale; redirectUri?: string; app?: MailingApp }, ctx: AccountContext): Promise<void> {
    const email = normalizeEmail(input.email);
    await this.db.transaction().execute(async (trx) => {
      await this.throttle.hitMail(trx, 'magic_link', email);
      const code = newNumericCode(6);
      await this.mailLink(trx, email, input, { kind: KIND.magic, prefix: 'ml', param: 'magic_token', hostedPath: '/magic-link', ttl: MAGIC_LINK_TTL, template: 'magic_link', mailKind: 'magic_link', code });
    });
    this.mailer.nudge();
  }

  /**
   * Issues a mailed single-use link (and, for magic links, the same grant as a code) to `email`: voids
   * the older ones of its kind, stores the hashed token, and queues the mail — the same statements
   * whether or not the address has an account (a stand-in grant with no user and a mail the sender
   * drops). Returns who it was for.
   */
  private async mailLink(
    trx: Kysely<Database>,
    email: string,
    input: { locale: Locale; redirectUri?: string; app?: MailingApp },
    link: {
      kind: (typeof KIND)['magic' | 'reset'];
      prefix: string;
      param: string;
      hostedPath: string;
      ttl: number;
      template: 'magic_link' | 'password_reset';
      mailKind: 'magic_link' | 'reset';
      code?: string;
    },
  ): Promise<{ user?: UserRow; boundTo?: { id: string; redirectUri: string } }> {
    const now = this.clock.now();
    const target = await this.mailTarget(trx, email, input);
    await voidOneTimeTokensByEmail(trx, link.kind, email, now);
    const token = newSecret(link.prefix);
    const id = newId('ott');
    await insertOneTimeToken(trx, {
      id,
      kind: link.kind,
      token_hash: hashSecret(token),
      code_hash: link.code ? this.codeHash(id, link.code) : null,
      user_id: target.user?.id ?? null,
      email,
      app_id: target.boundTo?.id ?? null,
      // An unbound reset link remembers the app it was asked through: its password policy applies (docs/guides/password-policy.md).
      data: JSON.stringify(target.boundTo ? { redirect_uri: target.boundTo.redirectUri } : link.kind === KIND.reset && input.app ? { policy_app: input.app.id } : {}),
      attempts: 0,
      created_at: now,
      expires_at: now + link.ttl,
      consumed_at: null,
    });
    const url = target.boundTo ? appendQuery(target.boundTo.redirectUri, { [link.param]: token }) : `${this.config.authUrl}${link.hostedPath}?${new URLSearchParams({ token })}`;
    // Read whether or not the address has an account here: the same statements either way.
    const mailingApp = input.app ? await findApp(trx, input.app.id) : undefined;
    await this.mailer.enqueue(trx, {
      kind: link.mailKind,
      to: email,
      locale: input.locale,
      template: link.template,
      params: {
        link: url,
        ...(link.code ? { code: link.code } : {}),
        minutes: link.ttl / 60,
        app: input.app?.name ?? '',
        host: linkDestination(url),
      },
      discard: !target.user,
      app: target.boundTo ? mailingApp : undefined,
    });
    return target;
  }

  /**
   * Who a mail link request is for: the active account of the address (if any), and the app the link
   * is bound to — only when a whitelisted redirect URI was given and the account is an active user of
   * that app (a row in app_users, not blocked). The membership query runs for unknown addresses too.
   */
  private async mailTarget(
    trx: Kysely<Database>,
    email: string,
    input: { redirectUri?: string; app?: MailingApp },
  ): Promise<{ user?: UserRow; boundTo?: { id: string; redirectUri: string } }> {
    const found = await findUserByEmail(trx, email);
    const user = found && found.status === 'active' ? found : undefined;
    if (!input.redirectUri || !input.app) return { user };
    const membership = await findAppUser(trx, input.app.id, user?.id ?? '');
    const member = Boolean(user && membership?.status === 'active');
    return member ? { user, boundTo: { id: input.app.id, redirectUri: input.redirectUri } } : { user };
  }

  /**
   * Redeems a magic-link token (single use; also voids its code). Unknown, used or expired → 400
   * invalid_token; so is a token bound to an app (docs/reference/rest-api.md#magic-links-and-reset-links) presented without that app's client_id.
   */
  async consumeMagicToken(token: string, ctx: AccountContext): Promise<UserRow> {
    const now = this.clock.now();
    const row = await findOneTimeTokenByHash(this.db, KIND.magic, hashSecret(token));
    if (!row || row.consumed_at !== null || row.expires_at <= now) throw new AppError('invalid_token', { detail: 'magic token unknown, used or expired' });
    if (row.app_id !== null && row.app_id !== ctx.appId) throw new AppError('invalid_token', { detail: 'magic token bound to another app' });
    if (!(await consumeOneTimeToken(this.db, row.id, now))) throw new AppError('invalid_token', { detail: 'magic token used concurrently' });
    return this.finishMagic(row, ctx);
  }

  /**
   * Redeems the magic-link grant by email + 6-digit code. Wrong → 400 invalid_code with attempts_left
   * (CODE_MAX_ATTEMPTS wrong answers void the grant); no live grant (or one bound to another app) →
   * 400 code_expired; the address's daily budget of wrong codes spent → 429 rate_limited.
   */
  async consumeMagicCode(input: { email: string; code: string }, ctx: AccountContext): Promise<UserRow> {
    const email = normalizeEmail(input.email);
    const row = await findLiveOneTimeTokenByEmail(this.db, KIND.magic, email, this.clock.now());
    const usable = row && (row.app_id === null || row.app_id === ctx.appId) ? row : undefined;
    await this.checkCode(usable, input.code);
    return this.finishMagic(usable!, ctx);
  }

  /**
   * A redeemed magic link signs in (the caller issues the tokens afterwards). It proves the mailbox: an
   * account whose address was never proven is claimed first (`claimAccount`: the password and every
   * earlier sign-in of whoever registered the address are gone), so the tokens issued next are the only ones.
   */
  private async finishMagic(row: OneTimeTokenRow, ctx: AccountContext): Promise<UserRow> {
    const user = row.user_id ? await findUserById(this.db, row.user_id) : undefined;
    if (!user || user.email !== row.email) throw new AppError('invalid_token', { detail: 'magic link user gone or email changed' });
    // An account about to be claimed is not refused for a deletion its registrant scheduled: the claim cancels it.
    const refusal = mayAuthenticate(user.email_verified === 1 ? user : { ...user, deletion_scheduled_at: null });
    if (refusal) throw refusalError(refusal, 'api');
    return this.db.transaction().execute(async (trx) => {
      await this.afterSignIn(trx, user);
      const current = (await findUserById(trx, user.id)) ?? user;
      if (current.email_verified === 1) return current;
      // The event names an app only when the link was bound to it (never one the user does not belong to).
      await this.claimAccount(trx, current, 'magic_link', { ...ctx, appId: row.app_id });
      return (await findUserById(trx, user.id))!;
    });
  }

  // Claiming an account ------------------------------------------------------------------------------

  /**
   * The first proof of an address (a magic link or reset link reached its mailbox) on an account
   * created unverified: whoever set the password may not be the mailbox owner (pre-account takeover),
   * so everything they may hold is revoked — the password (cleared), every grant (refresh tokens,
   * session JWTs, unredeemed codes), browser session, consent, provider binding, second factor
   * (authenticator app, recovery codes, every passkey) and live single-use ticket — and the address is
   * marked verified; event `user.claimed` says what went. Runs inside the proving request's
   * transaction, before it issues anything. Verification by code (`confirmEmailVerification`) does not
   * claim: it needs the account's own credential and the mailed code together, which is the owner.
   */
  private async claimAccount(trx: Kysely<Database>, user: UserRow, via: 'magic_link' | 'password_reset', ctx: AccountContext): Promise<void> {
    const now = this.clock.now();
    const identities = await listIdentitiesOfUser(trx, user.id);
    for (const identity of identities) await deleteIdentityOfUser(trx, user.id, identity.issuer);
    await updateUser(trx, user.id, { email_verified: 1, password_hash: null, password_changed_at: now, updated_at: now });
    const factors = await deleteFactorsOfUser(trx, user.id);
    await revokeGrantsOfUser(trx, user.id, now, 'account_claimed');
    await revokeBrowserSessionsOfUser(trx, user.id, now);
    await revokeConsentsOfUser(trx, user.id);
    await voidOneTimeTokensOfUserOfKinds(trx, CLAIM_VOIDS, user.id, now);
    // A deletion scheduled by whoever registered the address is theirs to ask, not the owner's (docs/account/deletion.md).
    const deletionCancelled = await cancelUserDeletion(trx, user.id, now);
    if (deletionCancelled) {
      await appendEvent(trx, now, { type: 'user.deletion_cancelled', appId: ctx.appId ?? null, userId: user.id, ip: ctx.ip, userAgent: ctx.userAgent, data: { via: 'claim' } });
    }
    await appendEvent(trx, now, {
      type: 'user.claimed',
      appId: ctx.appId ?? null,
      userId: user.id,
      ip: ctx.ip,
      userAgent: ctx.userAgent,
      data: {
        via,
        password_cleared: user.password_hash !== null,
        identities_removed: identities.length,
        factors_removed: { totp: factors.totp, passkeys: factors.passkeys, recovery_codes: factors.recoveryCodes },
        deletion_cancelled: deletionCancelled,
      },
    });
  }

  // Password reset -----------------------------------------------------------------------------------

  /**
   * Mails a reset link (30 min, single use); the same answer, work and statements for every address
   * (an address without an active account gets a stand-in, as for magic links). Link (docs/reference/rest-api.md#magic-links-and-reset-links):
   * `redirectUri?reset_token=…` only for an active user of `app` when the caller verified `redirectUri`
   * against its whitelist — the token is then bound to the app: it resets only through it (client_id)
   * and only while the user is still an active user of it; for anyone else
   * `{auth_url}/password/reset?token=…` (not bound). The mail names the app and the link's host.
   */
  async requestPasswordReset(input: { email: string; locale: Locale; redirectUri?: string; app?: MailingApp }, ctx: AccountContext): Promise<void> {
    const email = normalizeEmail(input.email);
    const now = this.clock.now();
    await this.db.transaction().execute(async (trx) => {
      await this.throttle.hitMail(trx, 'reset', email);
      const target = await this.mailLink(trx, email, input, { kind: KIND.reset, prefix: 'pr', param: 'reset_token', hostedPath: '/password/reset', ttl: RESET_TTL, template: 'password_reset', mailKind: 'reset' });
      // Visible to an app's developer only when the link is bound to it (the user is its user): no account is revealed.
      await appendEvent(trx, now, { type: 'password.reset_requested', appId: target.boundTo?.id ?? null, userId: target.user?.id ?? null, ip: ctx.ip, userAgent: ctx.userAgent, data: {} });
    });
    this.mailer.nudge();
  }

  /** Whether a reset token can be used on the hosted page (live, for an account, not bound to an app). */
  async isResetTokenLive(token: string): Promise<boolean> {
    return (await this.hostedReset(token)) !== undefined;
  }

  /**
   * For the hosted reset page: the app an unbound link was asked through (its policy applies there,
   * the hosted page passing it as `ctx.appId` to resetPassword) and that policy, so the page can show
   * its rules; undefined when the token cannot be used there.
   */
  async hostedReset(token: string): Promise<{ appId: string | undefined; policy: PasswordPolicy } | undefined> {
    const row = await findOneTimeTokenByHash(this.db, KIND.reset, hashSecret(token));
    if (!row || row.consumed_at !== null || row.expires_at <= this.clock.now() || row.user_id === null || row.app_id !== null) return undefined;
    const appId = resetPolicyApp(row.data);
    return { appId, policy: await this.passwordPolicyOf(appId) };
  }

  /**
   * Sets a new password with a reset token: policy-checked first (a weak password does not burn the
   * token); then, in one transaction, the token is consumed, every grant (refresh tokens, session JWTs)
   * and browser session of the user is revoked, other reset tokens die, a notice mail is queued.
   * Never signs in. Unknown, used or expired token → 400 invalid_token; so is a token bound to an app
   * presented without that app's client_id (`ctx.appId`), or whose user is no longer an active user of
   * it. A reset proves the mailbox: an account never proven before is claimed (`claimAccount`) first.
   */
  async resetPassword(input: { token: string; password: string; locale: Locale }, ctx: AccountContext): Promise<UserRow> {
    const now = this.clock.now();
    const row = await findOneTimeTokenByHash(this.db, KIND.reset, hashSecret(input.token));
    if (!row || row.consumed_at !== null || row.expires_at <= now || !row.user_id) throw new AppError('invalid_token', { detail: 'reset token unknown, used or expired' });
    if (row.app_id !== null) {
      if (row.app_id !== ctx.appId) throw new AppError('invalid_token', { detail: 'reset token bound to another app' });
      const membership = await findAppUser(this.db, row.app_id, row.user_id);
      if (membership?.status !== 'active') throw new AppError('invalid_token', { detail: 'reset token of an app the user no longer belongs to' });
    }
    const user = await findUserById(this.db, row.user_id);
    if (!user || user.email !== row.email) throw new AppError('invalid_token', { detail: 'reset token user gone or email changed' });
    // The policy of the app the reset was asked through (the token's, or the app naming itself now).
    await this.checkNewPassword(input.password, { email: user.email, user }, await this.passwordPolicyOf(row.app_id ?? ctx.appId), ctx);
    // Events name the app only when the token is bound to it (never an app the user does not belong to).
    await this.setPassword(user, input.password, { ...ctx, appId: row.app_id }, {
      method: 'reset',
      locale: input.locale,
      consume: (trx) => consumeOneTimeToken(trx, row.id, this.clock.now()),
    });
    return (await findUserById(this.db, user.id))!;
  }

  // Email verification -------------------------------------------------------------------------------

  /**
   * One verification grant, answered by its code or by its link (whichever comes first uses it up). The
   * link confirms only in a browser signed in as this account (verifyEmailByLink): clicked by a mailbox
   * owner who never registered, it proves nothing for an account someone else made with that address.
   */
  private async issueVerifyCode(trx: Kysely<Database>, user: UserRow, locale: Locale, appId?: string | null): Promise<void> {
    const now = this.clock.now();
    await voidOneTimeTokensOfUser(trx, KIND.verify, user.id, now);
    const id = newId('ott');
    const code = newNumericCode(6);
    const link = newSecret('ev');
    const app = appId ? await findApp(trx, appId) : undefined;
    await insertOneTimeToken(trx, {
      id,
      kind: KIND.verify,
      token_hash: hashSecret(link),
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
    const url = `${this.config.authUrl}/verify-email?${new URLSearchParams({ token: link })}`;
    const params = { code, minutes: VERIFY_CODE_TTL / 60, link: url, host: linkDestination(url), app: app?.name ?? '' };
    await this.mailer.enqueue(trx, { kind: 'verify', to: user.email, locale, template: 'verify_code', params, app });
  }

  /** Mails a new 6-digit verification code (10 min; voids the previous one). Mail limit `verify`. Returns its lifetime. */
  async requestEmailVerification(userId: string, input: { locale: Locale }, ctx: AccountContext): Promise<{ expiresIn: number }> {
    const user = await findUserById(this.db, userId);
    if (!user || user.status !== 'active') throw new AppError('unauthorized', { detail: 'user gone or disabled' });
    await this.db.transaction().execute(async (trx) => {
      await this.throttle.hitMail(trx, 'verify', user.email);
      await this.issueVerifyCode(trx, user, input.locale, ctx.appId);
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
    return this.markEmailVerified(user, ctx, 'code');
  }

  /**
   * The mailed link, opened in a browser signed in as `userId`: verifies the address when the link is
   * this account's live grant for its current address, and uses it up; an address already verified
   * stays so. Anything else → 400 invalid_token.
   */
  async verifyEmailByLink(userId: string, token: string, ctx: AccountContext): Promise<UserRow> {
    const user = await findUserById(this.db, userId);
    if (!user || user.status !== 'active') throw new AppError('unauthorized', { detail: 'user gone or disabled' });
    if (user.email_verified === 1) return user; // a second click: nothing left to do
    const now = this.clock.now();
    const row = /^ev_[A-Za-z0-9_-]{20,80}$/.test(token) ? await findLiveOneTimeTokenByHash(this.db, KIND.verify, hashSecret(token), now) : undefined;
    const invalid = () => new AppError('invalid_token', { message: 'This link is not for the account you are signed in with, or it was used or has expired.' });
    if (!row || row.user_id !== user.id || row.email !== user.email) throw invalid();
    return this.markEmailVerified(user, ctx, 'link', async (trx) => {
      if (!(await consumeOneTimeToken(trx, row.id, now))) throw invalid();
    });
  }

  /** Marks the address verified (event `email.verified`), in one transaction with `consume` (the grant used up). */
  private async markEmailVerified(user: UserRow, ctx: AccountContext, method: 'code' | 'link', consume?: (trx: Kysely<Database>) => Promise<void>): Promise<UserRow> {
    const now = this.clock.now();
    await this.db.transaction().execute(async (trx) => {
      await consume?.(trx);
      await updateUser(trx, user.id, { email_verified: 1, updated_at: now });
      await appendEvent(trx, now, { type: 'email.verified', appId: ctx.appId ?? null, userId: user.id, ip: ctx.ip, userAgent: ctx.userAgent, data: { method } });
    });
    return { ...user, email_verified: 1, updated_at: now };
  }

  // Codes ----------------------------------------------------------------------------------------------


  /**
   * Checks a code against a live grant and consumes it; throws invalid_code / code_expired, or 429
   * rate_limited once the address has used up its daily budget of wrong codes (`reserveCodeTry`).
   */
  private async checkCode(row: OneTimeTokenRow | undefined, code: string): Promise<void> {
    const max = this.config.throttle.codeMaxAttempts;
    const now = this.clock.now();
    const reserveTry = (live: OneTimeTokenRow) => this.reserveCodeTry(live.email ?? `user:${live.user_id ?? live.id}`, now);
    const live = await checkOneTimeCode(this.db, row, code, { now, maxAttempts: max, codeHash: this.codeHash, reserveTry });
    if (!(await consumeOneTimeToken(this.db, live.id, now, max))) throw new AppError('code_expired', { detail: 'code used concurrently' });
  }

  /**
   * The daily budget of wrong codes per address, across every code grant (magic-link and verification
   * codes, reissued or not): at most CODE_MAX_FAILURES_PER_DAY wrong codes in any 24 hours. Counted in
   * the database (shared by all processes) in hourly buckets `code_fail:<address>:<hour>`; the window is
   * the current hour and the 24 before it, so a wrong code counts for 24–25 hours. Every check takes a
   * slot BEFORE the code is compared (one atomic increment, then the sum), so concurrent guesses cannot
   * overshoot; over budget → the slot is given back and 429 rate_limited with retry_after (the right
   * code is refused too until the window passes). Returns `release`, called when the try was not a
   * wrong code (right code, or grant gone), so only wrong codes keep their slot. Public: the email
   * change's codes count against the same budget (src/email-change).
   */
  async reserveCodeTry(address: string, now: number): Promise<() => Promise<void>> {
    const limit = this.config.throttle.codeMaxFailuresPerDay;
    const hour = Math.floor(now / 3600);
    const key = (h: number) => `code_fail:${address}:${h}`;
    await addToCounter(this.db, key(hour), now, 1);
    const release = () => addToCounter(this.db, key(hour), this.clock.now(), -1);
    const hours = Array.from({ length: 25 }, (_, i) => hour - 24 + i);
    const counts = new Map((await findCounters(this.db, hours.map(key))).map((c) => [c.key, c.count]));
    const total = hours.reduce((sum, h) => sum + (counts.get(key(h)) ?? 0), 0);
    if (total <= limit) return release;
    await release();
    // Wrong codes counted without this try; the oldest buckets leave the window first.
    let left = total - 1;
    let retryAfter = 3600;
    for (const h of hours) {
      left -= counts.get(key(h)) ?? 0;
      if (left < limit) {
        retryAfter = (h + 25) * 3600 - now;
        break;
      }
    }
    throw new AppError('rate_limited', { extra: { retry_after: Math.max(1, retryAfter) }, detail: 'daily budget of wrong codes used up for this address' });
  }
}


declare module 'fastify' {
  interface FastifyInstance {
    accounts: Accounts;
  }
}

async function accountsPlugin(app: FastifyInstance) {
  app.decorate('accounts', new Accounts(app.db, app.config, app.clock, app.throttle, app.mailer, app.log));
  app.addHook('onReady', async () => void (await prepareDummyHash()));
}

export default fp(accountsPlugin, { name: 'accounts', dependencies: ['db', 'throttle', 'mailer'] });
