import type { FastifyInstance, FastifyRequest } from 'fastify';
import { BlockList, isIP } from 'node:net';
import { authenticateAdmin } from '../plugins/admin-token.js';
import { AppError } from '../errors.js';
import { setPageHeaders } from '../plugins/views.js';
import { isoTime } from '../shared/time.js';
import { HtmlPage } from '../shared/responses.js';
import { z } from 'zod';

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

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

/**
 * `GET /dev/mailbox` (CONTRACT §0): every mail in the outbox, newest first, as HTML, or as JSON with
 * `Accept: application/json` — `{items: [{id, kind, to, subject, text, html, created_at, sent_at,
 * attempts, last_error}]}` with RFC 3339 times. It exists only outside production AND without
 * SMTP_URL (then mail really is delivered, and the outbox holds other people's links and codes), and
 * answers only local callers or the admin token (`allowMailboxCaller`).
 */
export default async function mailboxRoutes(app: FastifyInstance) {
  if (app.config.production || app.config.smtpUrl) return;
  app.get(
    '/dev/mailbox',
    {
      onRequest: allowMailboxCaller,
      schema: {
        operationId: 'getDevMailbox',
        tags: ['development'],
        summary: 'The dev mailbox',
        description: 'Only outside production and without SMTP_URL; for local callers or the admin token (404 otherwise). JSON with `Accept: application/json`.',
        response: {
          200: {
            description: 'Every mail in the outbox, newest first.',
            content: { 'text/html': { schema: HtmlPage }, 'application/json': { schema: MailboxList } },
          },
        },
        errors: { 404: ['not_found'] },
      },
    },
    async (request, reply) => {
      const items = (await app.mailer.recent(100)).map((m) => ({
        ...m,
        created_at: isoTime(m.created_at),
        sent_at: m.sent_at === null ? null : isoTime(m.sent_at),
      }));
      reply.header('cache-control', 'no-store');
      const accept = request.headers.accept ?? '';
      if (accept.includes('application/json') && !accept.includes('text/html')) return reply.send({ items });
      setPageHeaders(reply, false);
      const list = items
        .map(
          (m) => `<article class="mail"><h2>${escapeHtml(m.subject)}</h2>
  <p class="muted">${escapeHtml(m.created_at)} · ${escapeHtml(m.kind)} · to ${escapeHtml(m.to)} · ${m.sent_at ? 'delivered' : `pending (${m.attempts} attempts)`}</p>
  <pre>${escapeHtml(m.text)}</pre></article>`,
        )
        .join('\n');
      return reply
        .type('text/html; charset=utf-8')
        .send(`<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer"><title>Dev mailbox · Gatehouse</title><link rel="stylesheet" href="/assets/gatehouse.css"></head><body><main class="card"><h1>Dev mailbox</h1>${list || '<p>No mail yet.</p>'}</main></body></html>`);
    },
  );
}
