import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import type { Transporter } from 'nodemailer';
import type { ResolvedConfig } from '../config.js';
import { formatDateTime, type Locale, type Translate } from '../plugins/i18n.js';
import { VIEWS_DIR } from '../plugins/views.js';
import { SecretBox } from '../shared/crypto.js';
import { newId } from '../shared/ids.js';
import type { Clock } from '../shared/time.js';
import {
  claimMail,
  countPendingMail,
  findMail,
  insertOutboxMail,
  listDueMail,
  listRecentMail,
  markMailAbandoned,
  markMailFailed,
  markMailSent,
  type OutboxRow,
} from '../storage/repos/outbox.js';
import type { Database } from '../storage/schema.js';
import { MailRenderer, type RenderedMail } from './render.js';
import mailboxRoutes from './mailbox.js';
import { BackgroundPasses } from '../shared/background-passes.js';
import { brandPalette } from '../shared/brand-colours.js';
import type { App, MailTextOverride } from '../storage/repos/apps.js';

/**
 * Reliable mail (docs/guides/run-and-test.md#run-it dev mailbox, docs/reference/tokens.md#storage-and-durability outbox; docs/security/checklist.md#logging-and-errors, docs/security/checklist.md#reliability-under-faults-and-concurrency):
 * `enqueue` renders the mail and writes it to the `outbox` in the caller's transaction (bodies sealed
 * with SECRET_KEY, since they carry links and codes). A background sender, started when the app is
 * ready and stopped when it closes, polls every second (and is nudged after each enqueue), claims due
 * rows with `locked_until` (so two processes never send one mail twice), and delivers them:
 * - with SMTP_URL: through nodemailer SMTP; a failure is retried with exponential backoff
 *   (5 s, 10 s, 20 s, … capped at 1 h), and a mail still undelivered after 24 h is abandoned;
 * - without SMTP_URL: the dev mailbox: the mail is marked delivered and logged at info level with its
 *   kind, recipient and id only (never its link or code), and `GET /dev/mailbox` shows it outside production.
 * A mail enqueued with `discard: true` (the stand-in that `/magic-link/request` and `/password/forgot`
 * render for an address without a deliverable account, so both answers cost the same) is written like
 * any other, but with kind `discard` and no recipient: the sender claims it and drops it unsent, and the
 * dev mailbox never lists it.
 */

export type MailKindName = 'verify' | 'magic_link' | 'reset' | 'notice';

/** What a mail takes from the app it is sent for (docs/guides/app-mail.md). */
export type MailingAppSettings = Pick<App, 'name' | 'branding' | 'mail' | 'disabled'>;

/**
 * The message keys an override's `intro` replaces, per mail: the opening line, never a line that
 * carries a link or a code (those are template parameters, outside any message).
 */
const INTRO_KEYS: Record<string, readonly string[]> = {
  verify_code: ['mail.verify_code.intro_app', 'mail.verify_code.intro_link'],
};
const introKeys = (template: string): readonly string[] => INTRO_KEYS[template] ?? [`mail.${template}.intro`];

/** The translator with an app's override of one mail in one locale: its subject and intro, nothing else. */
export function withOverride(t: Translate, template: string, override: MailTextOverride | undefined): Translate {
  if (!override) return t;
  const intros = introKeys(template);
  return (key, params) => {
    if (override.subject !== undefined && key === `mail.${template}.subject`) return override.subject;
    if (override.intro !== undefined && intros.includes(key)) return override.intro;
    return t(key, params);
  };
}

/**
 * The platform's own brand, for mails no app causes (an address change, an account deletion, a link
 * asked for by someone who is not the app's user): the name and accent of the hosted pages without an
 * app (views/layout.eta, gatehouse.css), so every mail opens with whose it is (docs/guides/app-mail.md#platform-mails).
 */
export const PLATFORM_MAIL_BRAND: Readonly<Record<string, string>> = Object.freeze({ brandName: 'Gatehouse', accent: '#2457d6', accentContrast: '#ffffff' });

/** The app's name, logo and accent (with a text colour chosen for contrast) as mail template parameters; the platform's without one. */
export function mailBrandParams(app: MailingAppSettings | undefined): Record<string, string> {
  if (!app || app.disabled) return { ...PLATFORM_MAIL_BRAND };
  const { logoUrl, accentColor } = app.branding;
  const palette = accentColor ? brandPalette(accentColor).light : undefined;
  return { brandName: app.name, ...(logoUrl ? { logo: logoUrl } : {}), ...(palette ? { accent: palette.accent, accentContrast: palette.accentContrast } : {}) };
}

export interface MailRequest {
  kind: MailKindName;
  to: string;
  locale: Locale;
  /** `views/emails/<template>.{text,html}.eta`; subject from the message `mail.<template>.subject`. */
  template: string;
  params: Record<string, string | number>;
  /** Render and store it like any other mail, but never send it (see `DISCARD_KIND`). */
  discard?: boolean;
  /**
   * The app the mail is for: its name, logo and colour, its Reply-To and its text overrides. Only an
   * app the person belongs to or registers through: a flow that merely names an app must not put that
   * app's words in a mail to a stranger.
   */
  app?: MailingAppSettings;
}

/** The outbox kind of a discarded stand-in mail: no recipient, dropped by the sender unsent. */
export const DISCARD_KIND = 'discard';

export interface MailboxEntry {
  id: string;
  kind: string;
  to: string;
  subject: string;
  text: string;
  html: string;
  created_at: number;
  sent_at: number | null;
  attempts: number;
  last_error: string | null;
}

const CLAIM_SECONDS = 120;
const GIVE_UP_AFTER = 24 * 3600;
const backoff = (attempts: number) => Math.min(5 * 2 ** Math.max(0, attempts - 1), 3600);

export class Mailer {
  private readonly box: SecretBox;
  private readonly renderer: MailRenderer;
  private transport: Transporter | null = null;
  private readonly passes = new BackgroundPasses(() => this.drain(), (error) => this.app.log.error({ err: error }, 'mail sender pass failed'));

  constructor(
    private readonly app: FastifyInstance,
    private readonly db: Kysely<Database>,
    private readonly config: ResolvedConfig,
    private readonly clock: Clock,
  ) {
    this.box = new SecretBox(config.secretKey, 'outbox');
    this.renderer = new MailRenderer(VIEWS_DIR, config.production);
  }

  /**
   * The mail `template` as this app's users would get it in `locale`, with its overrides and branding,
   * filled with sample values (docs/guides/app-mail.md#preview): the same renderer and translator as `enqueue`.
   */
  preview(app: MailingAppSettings, template: string, locale: Locale): RenderedMail {
    const t = withOverride(this.app.messages.translator(locale), template, app.mail.overrides[template]?.[locale]);
    const link = `${this.config.authUrl}/preview?token=example`;
    const sample = {
      code: '123456',
      minutes: 15,
      days: 30,
      link,
      host: new URL(this.config.authUrl).host,
      app: app.name,
      account: `${this.config.authUrl}/account`,
      new: 'new@example.com',
      when: formatDateTime(locale, this.clock.now()),
    };
    return this.renderer.render(template, locale, t, { ...mailBrandParams(app), ...sample });
  }

  /** Renders a mail and writes it to the outbox inside `trx`. Returns the outbox id. Call `nudge()` after commit. */
  async enqueue(trx: Kysely<Database>, mail: MailRequest): Promise<string> {
    const settings = mail.app && !mail.app.disabled ? mail.app : undefined;
    const t = withOverride(this.app.messages.translator(mail.locale), mail.template, settings?.mail.overrides[mail.template]?.[mail.locale]);
    const rendered = this.renderer.render(mail.template, mail.locale, t, { ...mailBrandParams(settings), ...mail.params });
    const id = newId('mail');
    const now = this.clock.now();
    await insertOutboxMail(trx, {
      id,
      kind: mail.discard ? DISCARD_KIND : mail.kind,
      to_address: mail.discard ? '' : mail.to,
      subject: rendered.subject,
      text_body: this.box.seal(rendered.text),
      html_body: this.box.seal(rendered.html),
      created_at: now,
      attempts: 0,
      next_attempt_at: now,
      locked_until: null,
      sent_at: null,
      last_error: null,
      reply_to: mail.discard ? null : (settings?.mail.replyTo ?? null),
    });
    // The caller's transaction has usually committed by the time this fires; the poll catches the rest.
    setTimeout(() => this.nudge(), 25).unref();
    return id;
  }

  /** Runs a delivery pass now (after a commit); harmless when one is running. */
  nudge(): void {
    this.passes.nudge();
  }

  /** Delivers every due mail once (exposed for tests and the CLI). */
  async drain(): Promise<void> {
    for (;;) {
      const now = this.clock.now();
      const due = await listDueMail(this.db, now, 20);
      if (due.length === 0) return;
      let claimedAny = false;
      await Promise.all(
        due.map(async (row) => {
          if (!(await claimMail(this.db, row.id, now, now + CLAIM_SECONDS))) return;
          claimedAny = true;
          await this.deliver(row);
        }),
      );
      if (!claimedAny || this.passes.isStopped) return;
    }
  }

  private async deliver(row: OutboxRow): Promise<void> {
    const now = this.clock.now();
    if (now - row.created_at > GIVE_UP_AFTER) {
      await markMailAbandoned(this.db, row.id, 'undelivered for 24 h');
      this.app.log.warn({ mail_id: row.id, kind: row.kind }, 'mail abandoned after 24 h of failed delivery');
      return;
    }
    if (row.kind === DISCARD_KIND) {
      await markMailSent(this.db, row.id, now);
      this.app.log.debug({ mail_id: row.id }, 'stand-in mail dropped unsent');
      return;
    }
    if (!this.config.smtpUrl) {
      await markMailSent(this.db, row.id, now);
      this.app.log.info({ mail_id: row.id, kind: row.kind, to: row.to_address, subject: row.subject }, 'mail delivered to the dev mailbox (GET /dev/mailbox)');
      return;
    }
    try {
      const transport = await this.smtpTransport(this.config.smtpUrl);
      await transport.sendMail({
        from: this.config.emailFrom,
        to: row.to_address,
        subject: row.subject,
        text: this.box.open(row.text_body),
        html: this.box.open(row.html_body),
        ...(row.reply_to ? { replyTo: row.reply_to } : {}),
        messageId: `<${row.id}@gatehouse>`,
        headers: { 'X-Gatehouse-Mail-Id': row.id },
      });
      await markMailSent(this.db, row.id, this.clock.now());
      this.app.log.info({ mail_id: row.id, kind: row.kind }, 'mail sent');
    } catch (error) {
      const attempts = row.attempts + 1;
      const retryIn = backoff(attempts);
      const message = error instanceof Error ? error.message : String(error);
      await markMailFailed(this.db, row.id, this.clock.now() + retryIn, message);
      this.app.log.warn({ mail_id: row.id, kind: row.kind, attempts, retry_in: retryIn, error: message }, 'mail delivery failed; will retry');
    }
  }

  /** The SMTP transport, made for the first mail sent: nodemailer loads only then, so a server without SMTP_URL never holds it. */
  private async smtpTransport(smtpUrl: string): Promise<Transporter> {
    if (this.transport) return this.transport;
    const { default: nodemailer } = await import('nodemailer');
    return (this.transport ??= nodemailer.createTransport(smtpUrl, {
      from: this.config.emailFrom,
      connectionTimeout: 10_000,
      greetingTimeout: 10_000,
      socketTimeout: 30_000,
    } as never));
  }

  start(): void {
    this.passes.start();
  }

  async stop(): Promise<void> {
    await this.passes.stop();
    this.transport?.close();
    this.transport = null;
  }

  /** The newest mails with their bodies, optionally only those to one address (dev mailbox; never exposed in production). */
  async recent(limit = 50, to?: string): Promise<MailboxEntry[]> {
    const rows = (await listRecentMail(this.db, limit, to)).filter((row) => row.kind !== DISCARD_KIND);
    return rows.map((row) => this.entry(row));
  }

  /** One mail with its bodies (dev mailbox), or undefined (unknown id, or a discarded stand-in). */
  async one(id: string): Promise<MailboxEntry | undefined> {
    const row = await findMail(this.db, id);
    return row && row.kind !== DISCARD_KIND ? this.entry(row) : undefined;
  }

  private entry(row: OutboxRow): MailboxEntry {
    return {
      id: row.id,
      kind: row.kind,
      to: row.to_address,
      subject: row.subject,
      text: this.box.open(row.text_body),
      html: this.box.open(row.html_body),
      created_at: row.created_at,
      sent_at: row.sent_at,
      attempts: row.attempts,
      last_error: row.last_error,
    };
  }

  pending(): Promise<number> {
    return countPendingMail(this.db);
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    mailer: Mailer;
  }
}

async function mailerPlugin(app: FastifyInstance) {
  const mailer = new Mailer(app, app.db, app.config, app.clock);
  app.decorate('mailer', mailer);
  app.addHook('onReady', async () => mailer.start());
  app.addHook('onClose', async () => mailer.stop());
  if (!app.config.production) await app.register(mailboxRoutes);
}

export default fp(mailerPlugin, { name: 'mailer', dependencies: ['db', 'views'] });
