import type { Kysely } from 'kysely';
import type { ResolvedConfig } from '../config.js';
import { AppError } from '../errors.js';
import type { Mailer } from '../mail/index.js';
import { formatDateTime, type Locale } from '../plugins/i18n.js';
import type { RequestContext } from '../shared/request-context.js';
import { isoTime, type Clock } from '../shared/time.js';
import { cancelUserDeletion, listDueDeletions, purgeDeletedAccount, scheduleUserDeletion } from '../storage/repos/account-deletion.js';
import { findApp } from '../storage/repos/apps.js';
import { revokeBrowserSessionsOfUser } from '../storage/repos/browser-sessions.js';
import { appendEvent } from '../storage/repos/events.js';
import { revokeGrantsOfUser } from '../storage/repos/grants.js';
import { voidOneTimeTokensOfUserOfKinds } from '../storage/repos/one-time-tokens.js';
import type { UserRow } from '../storage/repos/users.js';
import type { Database } from '../storage/schema.js';

/**
 * Account deletion with a grace period (docs/account/deletion.md). `schedule` marks the account for
 * purge ACCOUNT_DELETION_GRACE_DAYS later and signs the person out everywhere in the same transaction
 * (every grant — so every refresh token and access token checked against it — and every browser
 * session revoked, pending single-use secrets voided), records `user.deletion_scheduled` and mails the
 * address the date and how to keep the account. `cancel` lifts it (`user.deletion_cancelled`). The
 * maintenance loop calls `purgeDue`: each due account is purged in its own transaction
 * (storage/repos/account-deletion.ts), `user.deleted` recorded per app it belonged to. With a grace of 0
 * `schedule` purges at once and mails nothing (the purge removes mail to the address).
 */

const DAY = 86400;

/** The single-use secrets of the account that scheduling voids: nothing mailed or started before may sign in or change it. */
const VOIDED_BY_SCHEDULING = [
  'magic_link', 'password_reset', 'email_verify', 'email_change', 'idp_state', 'idp_continue', 'idp_bind',
  'passkey_registration', 'passkey_authentication', 'totp_enrolment',
];

/** Who asked: the account page, an app over REST (its id), or at a sign-in. */
export type DeletionVia = 'account' | 'api' | 'sign_in' | 'admin';

export type DeletionContext = RequestContext & { appId?: string | null; locale: Locale };

export class AccountDeletion {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly config: ResolvedConfig,
    private readonly clock: Clock,
    private readonly mailer: Mailer,
  ) {}

  get graceDays(): number {
    return this.config.accountDeletionGraceDays;
  }

  /**
   * Schedules the deletion of `user` (the caller has authorised it: index.ts `authoriseDeletion`).
   * Returns when the account is purged, and whether it already was (a grace of 0). 409 `conflict` when a
   * deletion is already scheduled; 401 when the account is not active.
   */
  async schedule(user: UserRow, via: DeletionVia, ctx: DeletionContext): Promise<{ scheduledAt: number; deleted: boolean }> {
    const now = this.clock.now();
    const dueAt = now + this.graceDays * DAY;
    await this.db.transaction().execute(async (trx) => {
      if (!(await scheduleUserDeletion(trx, user.id, dueAt, now))) {
        if (user.deletion_scheduled_at !== null) throw new AppError('conflict', { message: 'The deletion of this account is already scheduled.', detail: 'deletion already scheduled' });
        throw new AppError('unauthorized', { detail: 'account not active' });
      }
      await revokeGrantsOfUser(trx, user.id, now, 'account_deletion');
      await revokeBrowserSessionsOfUser(trx, user.id, now);
      await voidOneTimeTokensOfUserOfKinds(trx, VOIDED_BY_SCHEDULING, user.id, now);
      await appendEvent(trx, now, {
        type: 'user.deletion_scheduled',
        appId: ctx.appId ?? null,
        userId: user.id,
        ip: ctx.ip,
        userAgent: ctx.userAgent,
        data: { scheduled_at: isoTime(dueAt), grace_days: this.graceDays, via },
      });
      if (this.graceDays > 0) {
        await this.mailer.enqueue(trx, {
          kind: 'notice',
          to: user.email,
          locale: ctx.locale,
          template: 'account_deletion_scheduled',
          params: { when: formatDateTime(ctx.locale, dueAt), account: `${this.config.authUrl}/account`, days: this.graceDays },
          app: ctx.appId ? await findApp(trx, ctx.appId) : undefined,
        });
      }
    });
    if (this.graceDays === 0) {
      await this.purgeOne(user.id, now);
      return { scheduledAt: dueAt, deleted: true };
    }
    this.mailer.nudge();
    return { scheduledAt: dueAt, deleted: false };
  }

  /** Lifts a scheduled deletion and records `user.deletion_cancelled`; false when none was scheduled. */
  async cancel(userId: string, via: DeletionVia, ctx: RequestContext & { appId?: string | null }): Promise<boolean> {
    const now = this.clock.now();
    return this.db.transaction().execute(async (trx) => {
      if (!(await cancelUserDeletion(trx, userId, now))) return false;
      await appendEvent(trx, now, { type: 'user.deletion_cancelled', appId: ctx.appId ?? null, userId, ip: ctx.ip, userAgent: ctx.userAgent, data: { via } });
      return true;
    });
  }

  /** Purges one account if its deletion is due at `now` (idempotent: false when it is not). */
  async purgeOne(userId: string, now: number, db: Kysely<Database> = this.db): Promise<boolean> {
    return db.transaction().execute((trx) => purgeDeletedAccount(trx, userId, now));
  }

  /**
   * The maintenance loop's step (src/maintenance): purges every account due at `now`, `batch` at a time,
   * on the connection `db` it is given; returns how many were purged. Another process purging the same
   * account meanwhile makes this one's a no-op.
   */
  async purgeDue(db: Kysely<Database>, now: number, batch: number): Promise<number> {
    let purged = 0;
    for (;;) {
      const due = await listDueDeletions(db, now, batch);
      let done = 0;
      for (const id of due) if (await this.purgeOne(id, now, db)) done += 1;
      purged += done;
      // Stop when the list is exhausted, or when nothing of it could be purged (another process has them).
      if (due.length < batch || done === 0) return purged;
    }
  }
}
