import type { FastifyInstance } from 'fastify';
import { setPageHeaders } from '../plugins/views.js';
import { isoTime } from '../shared/time.js';

const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/**
 * `GET /dev/mailbox` (CONTRACT §0, non-production only): every mail in the outbox, newest first, as
 * HTML, or as JSON with `Accept: application/json` — `{items: [{id, kind, to, subject, text, html,
 * created_at, sent_at, attempts, last_error}]}` with RFC 3339 times.
 */
export default async function mailboxRoutes(app: FastifyInstance) {
  app.get('/dev/mailbox', async (request, reply) => {
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
  });
}
