import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { createDeveloperViaApi } from '../helpers/dev-api.js';
import { codeIn, linkIn, mailTo, startSmtp, type TestSmtp } from '../helpers/smtp.js';

// docs/guides/app-mail.md: the app's name, logo, colour, Reply-To and text overrides in the mails it
// causes, checked on real SMTP deliveries parsed by mailparser.
let t: TestApp;
let smtp: TestSmtp;
let key: string;
let appId: string;

const post = (url: string, payload: Record<string, unknown>, headers: Record<string, string> = {}) =>
  t.app.inject({ method: 'POST', url, payload, headers: { 'x-forwarded-for': '1.1.1.3', ...headers } });
const dev = (method: 'POST' | 'PATCH', url: string, payload: Record<string, unknown>) => t.app.inject({ method, url, payload, headers: { authorization: `Bearer ${key}` } });

beforeAll(async () => {
  smtp = await startSmtp();
  t = await buildTestApp({ env: { SMTP_URL: smtp.url, IP_AUTH_PER_MINUTE: '1000', MAIL_INTERVAL_SECONDS: '0', MAIL_PER_HOUR: '100' } });
  key = (await createDeveloperViaApi(t)).apiKey;
  const created = await dev('POST', '/v1/dev/apps', {
    name: 'Harbour & Co <Bank>',
    type: 'public',
    redirect_uris: ['https://harbour.example/cb'],
    logo_url: 'https://harbour.example/logo.png',
    accent_color: '#0A7B5C',
    mail: {
      reply_to: 'help@harbour.example',
      overrides: {
        verify_code: { en: { subject: 'Welcome aboard Harbour', intro: 'Thanks for joining <Harbour>: confirm your address.' }, 'zh-CN': { subject: '欢迎加入 Harbour', intro: '感谢加入 Harbour：请确认你的邮箱地址。' } },
      },
    },
  });
  expect(created.statusCode, created.body).toBe(201);
  appId = created.json().id;
});
afterAll(async () => {
  await t.close();
  await smtp.close();
});

describe('mails an app causes', () => {
  it('carry its name, logo and colour, its Reply-To and its English override; the code and link stay', async () => {
    const res = await post('/v1/auth/register', { email: 'mail-en@example.com', password: 'tabby violin harbour', client_id: appId });
    expect(res.statusCode).toBe(201);
    const mail = await smtp.waitFor((m) => mailTo(m) === 'mail-en@example.com');
    expect(mail.subject).toBe('Welcome aboard Harbour');
    expect(mail.replyTo?.value[0]?.address).toBe('help@harbour.example');
    const html = String(mail.html);
    expect(html).toContain('src="https://harbour.example/logo.png"');
    expect(html).toContain('alt="Harbour &amp; Co &lt;Bank&gt;"');
    expect(html).toContain('background:#0a7b5c');
    // The override is text: escaped in HTML, as is in the text part; both parts say it.
    expect(html).toContain('Thanks for joining &lt;Harbour&gt;: confirm your address.');
    expect(html).not.toContain('<Harbour>');
    expect(mail.text).toContain('Thanks for joining <Harbour>: confirm your address.');
    expect(mail.text?.startsWith('Harbour & Co <Bank>\n')).toBe(true);
    // What an override cannot remove: the code and the link, in both parts.
    const code = codeIn(mail);
    expect(code).toMatch(/^\d{6}$/);
    expect(html).toContain(code);
    expect(linkIn(mail)).toMatch(/\/verify-email\?token=/);
    expect(html).toContain(linkIn(mail).replace(/&/g, '&amp;'));
  });

  it('in Simplified Chinese, with the zh-CN override', async () => {
    const res = await post('/v1/auth/register', { email: 'mail-zh@example.com', password: 'tabby violin harbour', client_id: appId }, { 'accept-language': 'zh-CN' });
    expect(res.statusCode).toBe(201);
    const mail = await smtp.waitFor((m) => mailTo(m) === 'mail-zh@example.com');
    expect(mail.subject).toBe('欢迎加入 Harbour');
    expect(mail.text).toContain('感谢加入 Harbour：请确认你的邮箱地址。');
    expect(String(mail.html)).toContain('感谢加入 Harbour：请确认你的邮箱地址。');
    expect(codeIn(mail)).toMatch(/^\d{6}$/);
  });

  it('a mail kind without an override keeps the standard text, with the branding', async () => {
    await post('/v1/auth/login', { email: 'mail-en@example.com', password: 'tabby violin harbour', client_id: appId });
    await post('/v1/auth/password/forgot', { email: 'mail-en@example.com', client_id: appId, redirect_uri: 'https://harbour.example/cb' });
    const mail = await smtp.waitFor((m) => mailTo(m) === 'mail-en@example.com' && m.subject === 'Reset your password');
    expect(mail.text).toContain('Someone asked to reset the password');
    expect(String(mail.html)).toContain('src="https://harbour.example/logo.png"');
    expect(mail.replyTo?.value[0]?.address).toBe('help@harbour.example');
  });

  it('refuses a bad Reply-To or override with a clear error and changes nothing', async () => {
    for (const mail of [
      { reply_to: 'not an address' },
      { reply_to: 'a@example.com\r\nBcc: x@example.com' },
      { overrides: { verify_code: { en: { subject: 'Line one\nBcc: x@example.com' } } } },
      { overrides: { verify_code: { en: { intro: 'x'.repeat(601) } } } },
      { overrides: { not_a_mail: { en: { subject: 'x' } } } },
      { overrides: { verify_code: { xx: { subject: 'x' } } } },
    ]) {
      const res = await dev('PATCH', `/v1/dev/apps/${appId}`, { mail });
      expect(res.statusCode, JSON.stringify(mail)).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
    const unchanged = await t.app.inject({ method: 'GET', url: `/v1/dev/apps/${appId}`, headers: { authorization: `Bearer ${key}` } });
    expect(unchanged.json().mail.reply_to).toBe('help@harbour.example');
  });
});
