import type { ParsedMail } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_MAIL_BRAND } from '../../src/mail/index.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeUser } from '../helpers/factories.js';
import { Browser, makeClient, signedInWithTokens, type TestClient } from '../helpers/oauth-flows.js';
import { codeIn, mailTo, startSmtp, type TestSmtp } from '../helpers/smtp.js';

// docs/guides/app-mail.md#platform-mails: a mail no app causes opens with the platform's name and accent,
// never an app's; a mail an app causes through its own API (an address change, its notice) carries the
// app's name, logo, colour, Reply-To and override. Real SMTP deliveries parsed by mailparser, in Japanese
// and German.
let t: TestApp;
let smtp: TestSmtp;
let client: TestClient;
const LOGO = 'https://fjord.example/logo.png';

beforeAll(async () => {
  smtp = await startSmtp();
  t = await buildTestApp({ env: { SMTP_URL: smtp.url, IP_AUTH_PER_MINUTE: '1000', MAIL_INTERVAL_SECONDS: '0', MAIL_PER_HOUR: '100' } });
  client = await makeClient(t, {
    name: 'Fjord Reisen',
    branding: { logoUrl: LOGO, logoUrlDark: null, accentColor: '#7c2d12' },
    mail: { replyTo: 'hilfe@fjord.example', overrides: { email_change_code: { de: { subject: 'Fjord: neue Adresse bestätigen' } } } },
  });
});
afterAll(async () => {
  await t.close();
  await smtp.close();
});

/** The platform's brand and no app's: the platform's name heads both parts, in its accent; no logo, no app colour, no Reply-To. */
function expectPlatformBrand(mail: ParsedMail): void {
  const html = String(mail.html);
  expect(mail.text?.startsWith(`${PLATFORM_MAIL_BRAND.brandName}\n\n`)).toBe(true);
  expect(html).toContain(`color:${PLATFORM_MAIL_BRAND.accent}">${PLATFORM_MAIL_BRAND.brandName}</p>`);
  expect(html).not.toContain('<img');
  expect(html).not.toContain('#7c2d12');
  // At most the plain "Requested through <app>" line names an app: it never heads the mail.
  expect(mail.text?.split('\n')[0]).not.toContain('Fjord');
  expect(mail.replyTo).toBeUndefined();
}

describe('mails no app causes carry the platform brand', () => {
  it('a reset asked for on the hosted page, in Japanese', async () => {
    const user = await makeUser(t.app, { email: 'haruto@example.com' });
    await new Browser(t.app).submit('/password/forgot?ui_locales=ja', { email: user.email, action: 'reset' });
    const mail = await smtp.waitFor((m) => mailTo(m) === user.email);
    expect(String(mail.html)).toContain('<html lang="ja" dir="ltr">');
    expect(mail.subject).toBe('パスワードの再設定');
    expectPlatformBrand(mail);
  });

  it('a reset that names an app for someone who is not its user (attack: an app brands a mail to a stranger)', async () => {
    const stranger = await makeUser(t.app, { email: 'stranger@example.com' });
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/auth/password/forgot',
      headers: { 'accept-language': 'de', 'x-forwarded-for': '1.1.1.4' },
      payload: { email: stranger.email, client_id: client.app.id, redirect_uri: client.app.redirectUris[0] },
    });
    expect(res.statusCode).toBeLessThan(300);
    const mail = await smtp.waitFor((m) => mailTo(m) === stranger.email);
    expect(String(mail.html)).toContain('<html lang="de" dir="ltr">');
    expectPlatformBrand(mail);
  });
});

describe('mails an app causes through its own API carry the app', () => {
  it('an address change in German: the code mail and the notice to the old address, with the override, logo, colour and Reply-To', async () => {
    const { user, tokens } = await signedInWithTokens(t, client);
    const auth = { authorization: `Bearer ${tokens.access_token}`, 'accept-language': 'de-DE' };
    const asked = await t.app.inject({ method: 'POST', url: '/v1/auth/email/change', headers: auth, payload: { email: 'neu@example.com', password: user.password } });
    expect(asked.statusCode, asked.body).toBe(202);
    const codeMail = await smtp.waitFor((m) => mailTo(m) === 'neu@example.com');
    expect(codeMail.subject).toBe('Fjord: neue Adresse bestätigen');
    expect(codeMail.replyTo?.value[0]?.address).toBe('hilfe@fjord.example');
    expect(codeMail.text?.startsWith('Fjord Reisen\n\n')).toBe(true);
    const html = String(codeMail.html);
    expect(html).toContain(`src="${LOGO}"`);
    expect(html).toContain('background:#7c2d12');
    expect(html).toContain('<html lang="de" dir="ltr">');
    // The override changes the subject only: the code is in both parts.
    const code = codeIn(codeMail);
    expect(code).toMatch(/^\d{6}$/);
    expect(html).toContain(code);

    const confirmed = await t.app.inject({ method: 'POST', url: '/v1/auth/email/change/confirm', headers: auth, payload: { code } });
    expect(confirmed.statusCode, confirmed.body).toBe(200);
    const notice = await smtp.waitFor((m) => mailTo(m) === user.email && m.subject === 'Ihre E-Mail-Adresse wurde geändert');
    expect(notice.replyTo?.value[0]?.address).toBe('hilfe@fjord.example');
    expect(String(notice.html)).toContain(`src="${LOGO}"`);
    expect(notice.text?.startsWith('Fjord Reisen\n\n')).toBe(true);
  });

});

it('the verification code after registering on the hosted page without an app is the platform’s', async () => {
  const who = await new Browser(t.app).register();
  expectPlatformBrand(await smtp.waitFor((m) => mailTo(m) === who.email));
});
