import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { buildTestApp } from '../helpers/app.js';
import { makeApp, makeUser } from '../helpers/factories.js';
import { codeIn, linkIn, mailTo, startSmtp } from '../helpers/smtp.js';

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

describe('outbox and delivery', () => {
  it('an SMTP outage delays a magic-link mail; once SMTP is back it arrives exactly once, with no new request', async () => {
    const port = await freePort();
    const t = await buildTestApp({ env: { SMTP_URL: `smtp://127.0.0.1:${port}` } });
    try {
      const client = await makeApp(t.db);
      const user = await makeUser(t.app, { email: 'outage@example.com', password: 'outage passphrase' });
      const res = await t.app.inject({ method: 'POST', url: '/v1/auth/magic-link/request', payload: { email: user.email, client_id: client.id } });
      expect(res.statusCode).toBe(202);
      // The first attempt fails (nothing listens) and is rescheduled with backoff.
      await expect.poll(async () => (await t.db.selectFrom('outbox').select(['attempts', 'last_error']).executeTakeFirst())?.attempts, { timeout: 8000 }).toBeGreaterThanOrEqual(1);
      const row = await t.db.selectFrom('outbox').selectAll().executeTakeFirstOrThrow();
      expect(row.sent_at).toBeNull();
      expect(row.text_body).not.toContain('magic-link'); // sealed at rest

      const smtp = await startSmtp(port);
      try {
        t.clock.advance(60); // past the backoff
        const mail = await smtp.waitFor((m) => mailTo(m) === user.email, 10_000);
        const token = new URL(linkIn(mail)).searchParams.get('token')!;
        const verify = await t.app.inject({ method: 'POST', url: '/v1/auth/magic-link/verify', payload: { token, client_id: client.id } });
        expect(verify.statusCode).toBe(200);
        await new Promise((r) => setTimeout(r, 1500));
        expect(smtp.mails.filter((m) => mailTo(m) === user.email)).toHaveLength(1);
        const sent = await t.db.selectFrom('outbox').selectAll().executeTakeFirstOrThrow();
        expect(sent.sent_at).not.toBeNull();
        expect(t.logs.join('\n')).not.toContain(token);
        expect(t.logs.join('\n')).not.toContain(codeIn(mail));
      } finally {
        await smtp.close();
      }
    } finally {
      await t.close();
    }
  });

  it('without SMTP_URL mails land in the dev mailbox (HTML and JSON), logged without their secrets', async () => {
    const t = await buildTestApp();
    try {
      const client = await makeApp(t.db);
      const user = await makeUser(t.app, { email: 'devbox@example.com', password: 'dev box passphrase' });
      await t.app.inject({ method: 'POST', url: '/v1/auth/magic-link/request', payload: { email: user.email, client_id: client.id } });
      await t.app.inject({ method: 'POST', url: '/v1/auth/password/forgot', payload: { email: user.email, client_id: client.id } });
      await expect.poll(async () => (await t.db.selectFrom('outbox').select('id').where('sent_at', 'is not', null).execute()).length, { timeout: 5000 }).toBe(2);
      const json = await t.app.inject({ method: 'GET', url: '/dev/mailbox', headers: { accept: 'application/json' } });
      expect(json.statusCode).toBe(200);
      const items = json.json().items as Array<{ kind: string; to: string; text: string; html: string; subject: string }>;
      expect(items.map((i) => i.kind)).toEqual(['reset', 'magic_link']); // newest first
      expect(items[1]!.text).toContain('/magic-link?token=ml_');
      const html = await t.app.inject({ method: 'GET', url: '/dev/mailbox', headers: { accept: 'text/html' } });
      expect(html.headers['content-type']).toContain('text/html');
      expect(html.body).toContain('Reset your password');
      const token = /token=(ml_[\w-]+)/.exec(items[1]!.text)![1]!;
      const resetToken = /token=(pr_[\w-]+)/.exec(items[0]!.text)![1]!;
      const logs = t.logs.join('\n');
      expect(logs).toContain('dev mailbox');
      expect(logs).not.toContain(token);
      expect(logs).not.toContain(resetToken);
    } finally {
      await t.close();
    }
  });

  it('mails in Simplified Chinese when the request prefers it', async () => {
    const smtp = await startSmtp();
    const t = await buildTestApp({ env: { SMTP_URL: smtp.url } });
    try {
      const client = await makeApp(t.db);
      await t.app.inject({ method: 'POST', url: '/v1/auth/register', headers: { 'accept-language': 'zh-CN,zh;q=0.9' }, payload: { email: 'zh@example.com', password: 'zhong wen mi ma', client_id: client.id } });
      const mail = await smtp.waitFor((m) => mailTo(m) === 'zh@example.com');
      expect(mail.subject).toContain('验证码');
      expect(mail.html).toContain('lang="zh-CN"');
    } finally {
      await t.close();
      await smtp.close();
    }
  });
});
