import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeUser } from '../helpers/factories.js';
import { Browser, csrfOf } from '../helpers/oauth-flows.js';
import { mailTo, startSmtp, type TestSmtp } from '../helpers/smtp.js';

/** Mails speak the page's language, Arabic right to left, with counts in the language's plural forms (real SMTP, mailparser). */
describe('mails in Spanish and Arabic', () => {
  let smtp: TestSmtp;
  let t: TestApp;
  beforeAll(async () => {
    smtp = await startSmtp();
    t = await buildTestApp({ env: { SMTP_URL: smtp.url, IP_AUTH_PER_MINUTE: '1000', MAIL_INTERVAL_SECONDS: '0' } });
  });
  afterAll(async () => {
    await t.close();
    await smtp.close();
  });

  it('a password reset asked for on a Spanish page comes in Spanish', async () => {
    const user = await makeUser(t.app, { email: 'lucia@example.com' });
    await new Browser(t.app).submit('/password/forgot?ui_locales=es', { email: user.email, action: 'reset' });
    const mail = await smtp.waitFor((m) => mailTo(m) === user.email);
    expect(mail.subject).toBe('Restablece tu contraseña');
    expect(mail.text).toContain('Abre este enlace para elegir una nueva');
    expect(mail.html).toContain('<html lang="es" dir="ltr">');
  });

  it('the sign-in link mail of a visitor who chose Arabic with the switcher is Arabic, right to left, with the plural of minutes', async () => {
    const user = await makeUser(t.app, { email: 'layla@example.com' });
    const b = new Browser(t.app);
    const page = await b.get('/magic-link/request');
    await b.post('/language', { csrf: csrfOf(page.body), locale: 'ar', back: '/magic-link/request' });
    const res = await b.submit('/magic-link/request', { email: user.email, action: 'send_magic_link' });
    expect(res.statusCode).toBeLessThan(500);
    const mail = await smtp.waitFor((m) => mailTo(m) === user.email);
    expect(mail.subject).toBe('رابط تسجيل الدخول الخاص بك');
    expect(mail.html).toContain('<html lang="ar" dir="rtl">');
    expect(mail.text).toMatch(/تنتهي صلاحيته خلال (\S+ دقيقة|\S+ دقائق|دقيقتين|دقيقة واحدة)/);
  });
});
