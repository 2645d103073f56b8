import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { BlockList, isIP } from 'node:net';
import { authenticateAdmin } from '../plugins/admin-token.js';
import { AppError } from '../errors.js';
import { formatDateTime } from '../plugins/i18n.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { localeOf, renderPage } from '../plugins/views.js';
import { isoTime } from '../shared/time.js';
import { HtmlPage } from '../shared/responses.js';
import { z } from 'zod';

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** 127.0.0.0/8 or ::1 (an IPv4-mapped `::ffff:127.x.y.z` too). */
export function isLoopbackAddress(ip: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip)?.[1];
  const address = mapped ?? ip;
  const family = isIP(address);
  return family === 4 ? LOOPBACK.check(address, 'ipv4') : family === 6 ? LOOPBACK.check(address, 'ipv6') : false;
}

/** Headers a reverse proxy adds: a proxied request is not a local caller, whatever address it comes from. */
const FORWARDING_HEADERS = ['forwarded', 'x-forwarded-for', 'x-real-ip'];

/**
 * Who may read the mailbox (SECURITY hardening item 7): a caller on this machine (a loopback address
 * and no proxy forwarding headers: behind a local reverse proxy without TRUST_PROXY every visitor
 * would come from 127.0.0.1), or one presenting ADMIN_TOKEN (checked by the admin API's own
 * `authenticateAdmin`: constant-time, wrong tokens count toward its per-IP guessing limit). Everyone
 * else gets the plain 404 of an unknown route, so the mailbox is not revealed.
 */
async function allowMailboxCaller(request: FastifyRequest): Promise<void> {
  const forwarded = FORWARDING_HEADERS.some((name) => request.headers[name] !== undefined);
  if (!forwarded && isLoopbackAddress(request.ip)) return;
  if (request.headers.authorization !== undefined) {
    try {
      await authenticateAdmin(request);
      return;
    } catch {
      // wrong, missing or rate-limited admin token: indistinguishable from no mailbox at all
    }
  }
  throw new AppError('not_found', { detail: `${request.method} ${request.url.split('?')[0]}` });
}

const MailboxList = z.object({
  items: z.array(
    z.object({
      id: z.string(),
      kind: z.string(),
      to: z.string(),
      subject: z.string(),
      text: z.string(),
      html: z.string(),
      created_at: z.string(),
      sent_at: z.string().nullable(),
      attempts: z.number().int(),
      last_error: z.string().nullable(),
    }),
  ),
});

const MailboxQuery = z.object({ to: z.string().trim().max(320).optional().describe('Only the mails to this address (case-insensitive).') });
const MailParams = z.object({ id: z.string().min(1).max(100) });

/** The links a mail carries, from its text part (to click without opening the mail). */
const linksOf = (text: string): string[] => [...new Set(text.match(/https?:\/\/[^\s<>"]+/g) ?? [])];

/**
 * A mail's own HTML, framed by the mailbox page: its inline styles are allowed, nothing else is (no
 * script, no fetch, a CSP sandbox without scripts or same-origin); it may be framed by this origin
 * only. Its links open in a new tab (`<base target="_blank">`), which the frame's sandbox allows.
 */
function sendMailHtml(reply: FastifyReply, html: string) {
  reply.header('content-security-policy', "default-src 'none'; style-src 'unsafe-inline'; img-src https: data:; frame-ancestors 'self'; base-uri 'none'; form-action 'none'; sandbox allow-popups allow-popups-to-escape-sandbox");
  reply.header('x-frame-options', 'SAMEORIGIN');
  reply.header('referrer-policy', 'no-referrer');
  reply.header('cache-control', 'no-store');
  const framed = html.includes('<head>') ? html.replace('<head>', '<head><base target="_blank">') : `<base target="_blank">${html}`;
  return reply.type('text/html; charset=utf-8').send(framed);
}

/**
 * `GET /dev/mailbox` (docs/guides/run-and-test.md#run-it): every mail in the outbox, newest first (`?to=` keeps one
 * address's), as a page (each mail's HTML in a sandboxed frame from `GET /dev/mailbox/{id}/html`, its
 * links listed, its text part below), or as JSON with `Accept: application/json` — `{items: [{id,
 * kind, to, subject, text, html, created_at, sent_at, attempts, last_error}]}` with RFC 3339 times.
 * It exists only outside production AND without SMTP_URL (then mail really is delivered, and the
 * outbox holds other people's links and codes), and answers only local callers or the admin token
 * (`allowMailboxCaller`).
 */
export default async function mailboxRoutes(scope: FastifyInstance) {
  if (scope.config.production || scope.config.smtpUrl) return;
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/dev/mailbox',
    {
      onRequest: allowMailboxCaller,
      schema: {
        operationId: 'getDevMailbox',
        tags: ['development'],
        summary: 'The dev mailbox',
        description: 'Only outside production and without SMTP_URL; for local callers or the admin token (404 otherwise). JSON with `Accept: application/json`.',
        querystring: MailboxQuery,
        response: {
          200: {
            description: 'Every mail in the outbox (or to `to`), newest first.',
            content: { 'text/html': { schema: HtmlPage }, 'application/json': { schema: MailboxList } },
          },
        },
        errors: { 400: ['invalid_request'], 404: ['not_found'] },
      },
    },
    async (request, reply) => {
      const to = request.query.to || undefined;
      const items = (await app.mailer.recent(100, to)).map((m) => ({
        ...m,
        created_at: isoTime(m.created_at),
        sent_at: m.sent_at === null ? null : isoTime(m.sent_at),
      }));
      reply.header('cache-control', 'no-store');
      const accept = request.headers.accept ?? '';
      if (accept.includes('application/json') && !accept.includes('text/html')) return reply.send({ items });
      const locale = localeOf(request);
      const mails = items.map((m) => ({
        id: m.id,
        subject: m.subject,
        to: m.to,
        kind: m.kind,
        text: m.text,
        links: linksOf(m.text),
        when: formatDateTime(locale, m.created_at),
        delivered: m.sent_at !== null,
        attempts: m.attempts,
        frame: `/dev/mailbox/${encodeURIComponent(m.id)}/html`,
      }));
      return renderPage(request, reply, 'mailbox', { titleKey: 'mailbox.title', mails, to: to ?? '', wide: true }, { frames: true });
    },
  );

  app.get(
    '/dev/mailbox/:id/html',
    {
      onRequest: allowMailboxCaller,
      schema: {
        operationId: 'getDevMailboxMailHtml',
        tags: ['development'],
        summary: "One mail's HTML, as the mailbox page frames it",
        description: 'Sandboxed by its Content-Security-Policy (no script); frameable by this origin only. Same access rule as the mailbox.',
        params: MailParams,
        response: { 200: { description: "The mail's HTML part.", content: { 'text/html': { schema: HtmlPage } } } },
        errors: { 400: ['invalid_request'], 404: ['not_found'] },
      },
    },
    async (request, reply) => {
      const mail = await app.mailer.one(request.params.id);
      if (!mail) throw new AppError('not_found');
      return sendMailHtml(reply, mail.html);
    },
  );
}
