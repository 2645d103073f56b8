import type { Kysely } from 'kysely';
import { codeHasher } from '../shared/crypto.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import type { ResolvedConfig } from '../config.js';
import { AppError } from '../errors.js';
import type { Mailer } from '../mail/index.js';
import { formatDateTime, type Locale } from '../plugins/i18n.js';
import { hashSecret, newId, newNumericCode, newSecret } from '../shared/ids.js';
import type { RequestContext } from '../shared/request-context.js';
import type { Clock } from '../shared/time.js';
import { checkOneTimeCode } from '../sign-in/one-time-codes.js';
import { isValidEmailAddress } from '../shared/user-fields.js';
import { appendEvent } from '../storage/repos/events.js';
import { findApp } from '../storage/repos/apps.js';
import {
  consumeOneTimeToken,
  findLiveOneTimeTokenByHash,
  findLiveOneTimeTokenByUser,
  insertOneTimeToken,
  type OneTimeTokenRow,
  voidOneTimeTokensOfUser,
  voidOneTimeTokensOfUserOfKinds,
} from '../storage/repos/one-time-tokens.js';
import { findUserByEmail, findUserById, normalizeEmail, updateUser, type UserRow } from '../storage/repos/users.js';
import type { Database } from '../storage/schema.js';
import type { Throttle } from '../throttle/service.js';

/**
 * Changing a person's email address (docs/account/email-change.md). A request stores one pending
 * change (a single-use row of kind `email_change`: the link's hash and the 6-digit code's HMAC, bound to
 * the user and the new address, EMAIL_CHANGE_TTL) and mails the code and the link to the NEW address;
 * a newer request voids the older one. An address that belongs to another account gets exactly the
 * same work and answer (a pending row whose code is never sent, and a mail to that address saying it
 * is already in use), so the requester learns nothing. Confirmation, by the code or by the link, moves
 * the address in one transaction: the address is checked free again, `users.email` is set and marked
 * verified (the code proved the mailbox; the `app_users` copies follow by trigger), the sign-in links
 * and codes mailed to the old address die, event `user.email_changed` is appended, and the old address
 * is sent a notice with a way back in. Never logs or records a code or token.
 */

export const EMAIL_CHANGE_TTL = 20 * 60;
export const EMAIL_CHANGE_KIND = 'email_change';

/** The single-use rows mailed to the old address (or minted for it) that a change voids. */
const VOIDED_BY_CHANGE = ['magic_link', 'password_reset', 'email_verify'];

export type EmailChangeContext = RequestContext & { appId?: string | null; locale: Locale };

export class EmailChange {
  private readonly codeHash: (id: string, code: string) => string;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly config: ResolvedConfig,
    private readonly clock: Clock,
    private readonly throttle: Throttle,
    private readonly mailer: Mailer,
    /** The daily budget of wrong codes of an address, shared with the sign-in codes (Accounts.reserveCodeTry): takes a slot, returns its release. */
    private readonly reserveCodeTry: (address: string, now: number) => Promise<() => Promise<void>>,
  ) {
    this.codeHash = codeHasher(config.secretKey, 'email-change-codes');
  }

  /** The account asking, active, or 401. */
  async activeUser(userId: string): Promise<UserRow> {
    const user = await findUserById(this.db, userId);
    if (!user || user.status !== 'active') throw new AppError('unauthorized', { detail: 'user gone or disabled' });
    return user;
  }

  /**
   * Counts one change request of the account (both doors together, before the password is checked, so
   * wrong passwords are capped too): MAIL_PER_HOUR per hour, one per MAIL_INTERVAL_SECONDS; 429 over it.
   */
  async countRequest(userId: string): Promise<void> {
    await this.throttle.hitMail(this.db, 'email_change', `user:${userId}`);
  }

  /**
   * The new address, normalised and checked like registration's: not an address → 400 invalid_request;
   * the account's current address → 400 invalid_request (nothing would change).
   */
  checkNewAddress(user: UserRow, input: string): string {
    const email = normalizeEmail(input);
    if (!isValidEmailAddress(email)) throw new AppError('invalid_request', { message: 'Enter an email address.', details: [{ path: 'email', message: 'must be an email address' }] });
    if (email === user.email) {
      throw new AppError('invalid_request', { message: 'This is already your email address.', details: [{ path: 'email', message: 'is already the account’s address' }], detail: 'same address' });
    }
    return email;
  }

  /**
   * Stores the pending change and mails the new address (the code and the link); see the module comment
   * for an address that is taken. The caller has authorised the change (docs/account/email-change.md).
   * Returns the code's lifetime in seconds.
   */
  async request(user: UserRow, newEmail: string, ctx: EmailChangeContext): Promise<{ expiresIn: number }> {
    const email = this.checkNewAddress(user, newEmail);
    const now = this.clock.now();
    await this.db.transaction().execute(async (trx) => {
      // Per new address too: nobody mails an address more than MAIL_PER_HOUR times an hour this way.
      await this.throttle.hitMail(trx, 'email_change', email);
      const owner = await findUserByEmail(trx, email);
      await voidOneTimeTokensOfUser(trx, EMAIL_CHANGE_KIND, user.id, now);
      const id = newId('ott');
      const code = newNumericCode(6);
      const token = newSecret('ec');
      await insertOneTimeToken(trx, {
        id,
        kind: EMAIL_CHANGE_KIND,
        token_hash: hashSecret(token),
        code_hash: this.codeHash(id, code),
        user_id: user.id,
        email,
        app_id: null,
        data: '{}',
        attempts: 0,
        created_at: now,
        expires_at: now + EMAIL_CHANGE_TTL,
        consumed_at: null,
      });
      const link = `${this.config.authUrl}/account/email/confirm?${new URLSearchParams({ token })}`;
      // Read either way, so a taken address costs the same statements; only the person's own mail carries the app (docs/guides/app-mail.md).
      const mailingApp = ctx.appId ? await findApp(trx, ctx.appId) : undefined;
      if (owner) {
        // Taken: the same statements and a mail of the same kind, but it carries no code and no link.
        await this.mailer.enqueue(trx, { kind: 'notice', to: email, locale: ctx.locale, template: 'email_change_taken', params: { link: `${this.config.authUrl}/password/forgot` } });
      } else {
        await this.mailer.enqueue(trx, {
          kind: 'verify',
          to: email,
          locale: ctx.locale,
          template: 'email_change_code',
          params: { code, link, minutes: EMAIL_CHANGE_TTL / 60 },
          app: mailingApp,
        });
      }
    });
    this.mailer.nudge();
    return { expiresIn: EMAIL_CHANGE_TTL };
  }

  /**
   * Confirms the pending change with its code: wrong → 400 invalid_code with attempts_left
   * (CODE_MAX_ATTEMPTS wrong answers use it up); none live → 400 code_expired. Returns the updated user.
   */
  async confirmByCode(userId: string, code: string, ctx: EmailChangeContext): Promise<UserRow> {
    const user = await this.activeUser(userId);
    const now = this.clock.now();
    const max = this.config.throttle.codeMaxAttempts;
    const pending = await findLiveOneTimeTokenByUser(this.db, EMAIL_CHANGE_KIND, user.id, now);
    // Counted against the account's daily budget of wrong codes (its current address's), like every code.
    const reserveTry = () => this.reserveCodeTry(user.email, now);
    const row = await checkOneTimeCode(this.db, pending?.email ? pending : undefined, code, { now, maxAttempts: max, codeHash: this.codeHash, reserveTry });
    return this.apply(user, row, 'code', ctx);
  }

  /**
   * Confirms the pending change by its mailed link, in a browser signed in as `userId` (like
   * verifyEmailByLink): the link must be this account's live pending change. Anything else → 400 invalid_token.
   */
  async confirmByLink(userId: string, token: string, ctx: EmailChangeContext): Promise<UserRow> {
    const user = await this.activeUser(userId);
    const row = await this.pendingByLink(user.id, token);
    if (!row) throw new AppError('invalid_token', { message: 'This link is not for the account you are signed in with, or it was used or has expired.' });
    return this.apply(user, row, 'link', ctx);
  }

  /** The live pending change a link names, if it is `userId`'s. */
  async pendingByLink(userId: string, token: string): Promise<OneTimeTokenRow | undefined> {
    if (!/^ec_[A-Za-z0-9_-]{20,80}$/.test(token)) return undefined;
    const row = await findLiveOneTimeTokenByHash(this.db, EMAIL_CHANGE_KIND, hashSecret(token), this.clock.now());
    return row && row.user_id === userId && row.email ? row : undefined;
  }

  /** The new address of the account's live pending change, if any (the account page shows the code form). */
  async pendingAddress(userId: string): Promise<string | undefined> {
    const row = await findLiveOneTimeTokenByUser(this.db, EMAIL_CHANGE_KIND, userId, this.clock.now());
    return row && row.attempts < this.config.throttle.codeMaxAttempts ? (row.email ?? undefined) : undefined;
  }

  /** The change itself, in one transaction (see the module comment). */
  private async apply(user: UserRow, row: OneTimeTokenRow, method: 'code' | 'link', ctx: EmailChangeContext): Promise<UserRow> {
    const now = this.clock.now();
    const newEmail = row.email!;
    const oldEmail = user.email;
    await this.db.transaction().execute(async (trx) => {
      if (!(await consumeOneTimeToken(trx, row.id, now, this.config.throttle.codeMaxAttempts))) throw new AppError('code_expired', { detail: 'email change used concurrently' });
      const owner = await findUserByEmail(trx, newEmail);
      // The person has just proven the mailbox: saying it is taken tells them nothing they could not know.
      if (owner && owner.id !== user.id) throw new AppError('email_taken', { message: 'This email address now belongs to another account.', detail: 'address taken before confirmation' });
      try {
        await updateUser(trx, user.id, { email: newEmail, email_verified: 1, updated_at: now });
      } catch (error) {
        if (isUniqueViolation(error)) throw new AppError('email_taken', { message: 'This email address now belongs to another account.', detail: 'address taken concurrently' });
        throw error;
      }
      await voidOneTimeTokensOfUserOfKinds(trx, VOIDED_BY_CHANGE, user.id, now);
      await appendEvent(trx, now, {
        type: 'user.email_changed',
        appId: ctx.appId ?? null,
        userId: user.id,
        ip: ctx.ip,
        userAgent: ctx.userAgent,
        data: { old_email: oldEmail, new_email: newEmail, was_verified: user.email_verified === 1, method },
      });
      await this.mailer.enqueue(trx, {
        kind: 'notice',
        to: oldEmail,
        locale: ctx.locale,
        template: 'email_changed',
        params: { new: maskAddress(newEmail), when: formatDateTime(ctx.locale, now), account: `${this.config.authUrl}/account` },
        app: ctx.appId ? await findApp(trx, ctx.appId) : undefined,
      });
    });
    this.mailer.nudge();
    return { ...user, email: newEmail, email_verified: 1, updated_at: now };
  }

}

/**
 * The new address as the notice to the old one shows it: enough for the owner to recognise it, not the
 * whole address for whoever else reads the old mailbox (`a•••e@example.com`).
 */
export function maskAddress(email: string): string {
  const at = email.lastIndexOf('@');
  const local = email.slice(0, at);
  const shown = local.length <= 2 ? `${local[0] ?? ''}•••` : `${local[0]}•••${local[local.length - 1]}`;
  return `${shown}${email.slice(at)}`;
}

