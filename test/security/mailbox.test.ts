import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.js';
import { bearer } from '../helpers/dev-api.js';
import { makeApp, makeUser } from '../helpers/factories.js';
import { uniqueEmail } from '../helpers/oauth-flows.js';
import { startSmtp, type TestSmtp } from '../helpers/smtp.js';

/**
 * Security hardening item 7: `GET /dev/mailbox` shows other people's reset links. It exists only when
 * mail is not really delivered (no SMTP_URL, outside production) and answers only callers on this
 * machine or holding ADMIN_TOKEN; everyone else gets the 404 of a route that does not exist.
 */

const REMOTE = '203.0.113.7';

async function requestReset(t: TestApp): Promise<string> {
  const client = await makeApp(t.db);
  const user = await makeUser(t.app, { email: uniqueEmail('mailbox') });
  const res = await t.app.inject({ method: 'POST', url: '/v1/auth/password/forgot', payload: { email: user.email, client_id: client.id } });
  expect(res.statusCode).toBe(202);
  return user.email;
}

/** Status, content type and body of a GET, to compare with a path that was never registered. */
async function answer(t: TestApp, url: string, options: { remoteAddress?: string; headers?: Record<string, string>; method?: 'GET' | 'HEAD' } = {}) {
  const res = await t.app.inject({ method: options.method ?? 'GET', url, remoteAddress: options.remoteAddress, headers: { accept: 'application/json', ...options.headers } });
  return { status: res.statusCode, type: res.headers['content-type'], body: res.body };
}
const notRegistered = (t: TestApp, options: Parameters<typeof answer>[2] = {}) => answer(t, '/dev/mailbox-not-a-route', options);

describe('dev mailbox with SMTP_URL configured', () => {
  let smtp: TestSmtp;
  let t: TestApp;
  beforeAll(async () => {
    smtp = await startSmtp();
    t = await buildTestApp({ env: { SMTP_URL: smtp.url } });
  });
  afterAll(async () => {
    await t.close();
    await smtp.close();
  });

  it('does not exist: 404 like an unknown path, even for a loopback caller or the admin token', async () => {
    const to = await requestReset(t);
    await smtp.waitFor((mail) => JSON.stringify(mail.to).includes(to));
    for (const options of [{}, { headers: bearer(TEST_ADMIN_TOKEN) }, { remoteAddress: REMOTE }]) {
      const res = await answer(t, '/dev/mailbox', options);
      expect(res.status).toBe(404);
      expect(res).toEqual(await notRegistered(t, options));
      expect(res.body).not.toContain(to);
    }
  });
});

describe('dev mailbox without SMTP_URL', () => {
  let t: TestApp;
  let to: string;
  beforeAll(async () => {
    t = await buildTestApp();
    to = await requestReset(t);
    // The sender delivers to the dev mailbox in the background.
    for (let i = 0; i < 100 && !(await t.db.selectFrom('outbox').select('id').where('sent_at', 'is not', null).executeTakeFirst()); i++) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
  afterAll(async () => t.close());

  it('a remote caller gets the 404 of an unknown path (GET and HEAD, JSON and HTML)', async () => {
    for (const accept of ['application/json', 'text/html']) {
      const res = await answer(t, '/dev/mailbox', { remoteAddress: REMOTE, headers: { accept } });
      expect(res.status).toBe(404);
      expect(res).toEqual(await notRegistered(t, { remoteAddress: REMOTE, headers: { accept } }));
      expect(res.body).not.toContain(to);
    }
    const head = await answer(t, '/dev/mailbox', { remoteAddress: REMOTE, method: 'HEAD' });
    expect(head.status).toBe(404);
  });

  it('a remote caller with a wrong admin token, or a loopback hop forwarding a remote visitor, gets 404', async () => {
    for (const headers of [bearer('not-the-admin-token-0123456789'), { authorization: TEST_ADMIN_TOKEN }, bearer(`${TEST_ADMIN_TOKEN}x`)]) {
      const res = await answer(t, '/dev/mailbox', { remoteAddress: REMOTE, headers });
      expect(res.status).toBe(404);
      expect(res.body).not.toContain(to);
    }
    // A reverse proxy on this machine (no TRUST_PROXY): the socket is loopback, the visitor is not.
    for (const headers of [{ 'x-forwarded-for': REMOTE }, { forwarded: `for=${REMOTE}` }, { 'x-real-ip': REMOTE }] as Array<Record<string, string>>) {
      expect((await answer(t, '/dev/mailbox', { headers })).status).toBe(404);
    }
    // Addresses that merely look local are not loopback.
    for (const remoteAddress of ['10.0.0.1', '::ffff:10.0.0.1', '128.0.0.1', 'fe80::1']) {
      expect((await answer(t, '/dev/mailbox', { remoteAddress })).status, remoteAddress).toBe(404);
    }
  });

  it('wrong tokens sent to the mailbox count toward the admin token guessing limit', async () => {
    const guesser = '198.51.100.23';
    for (let i = 0; i < 25; i++) await answer(t, '/dev/mailbox', { remoteAddress: guesser, headers: bearer(`guess-${i}-0123456789abcdef`) });
    const admin = await t.app.inject({ url: '/v1/admin/developers', remoteAddress: guesser, headers: bearer(TEST_ADMIN_TOKEN) });
    expect(admin.statusCode).toBe(429);
    // ...and the right token at the mailbox is refused too while the IP is over the limit.
    expect((await answer(t, '/dev/mailbox', { remoteAddress: guesser, headers: bearer(TEST_ADMIN_TOKEN) })).status).toBe(404);
  });

  it('control: loopback callers (127.0.0.0/8, ::1, IPv4-mapped) and the admin token read it', async () => {
    for (const remoteAddress of [undefined, '127.0.0.1', '127.8.9.10', '::1', '::ffff:127.0.0.1']) {
      const res = await answer(t, '/dev/mailbox', { remoteAddress });
      expect(res.status, String(remoteAddress)).toBe(200);
      expect(res.body).toContain(to);
    }
    const html = await answer(t, '/dev/mailbox', { headers: { accept: 'text/html' } });
    expect(html.status).toBe(200);
    expect(html.type).toContain('text/html');
    const admin = await answer(t, '/dev/mailbox', { remoteAddress: '192.0.2.44', headers: bearer(TEST_ADMIN_TOKEN) });
    expect(admin.status).toBe(200);
    expect(admin.body).toContain(to);
  });
});

describe('dev mailbox in production', () => {
  it('does not exist, even for a loopback caller', async () => {
    const t = await buildTestApp({ env: { NODE_ENV: 'production', BASE_URL: 'https://auth.example.com' } });
    try {
      const res = await answer(t, '/dev/mailbox');
      expect(res.status).toBe(404);
      expect(res).toEqual(await notRegistered(t));
    } finally {
      await t.close();
    }
  });
});
