import type { LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import type { App } from '../../src/storage/repos/apps.js';
import { buildTestApp, FrozenClock, nextWindowStart, type TestApp } from '../helpers/app.js';
import { bearer } from '../helpers/dev-api.js';
import { makeApp, makeDeveloper, makeUser } from '../helpers/factories.js';
import { addMember } from '../helpers/members.js';
import { StatementRecorder } from '../helpers/statements.js';
import { Browser, authorizeUrl, makeClient, uniqueEmail, userinfo } from '../helpers/oauth-flows.js';

/**
 * Issue "Security hardening", items 2, 3, 10 and 12 (docs/reference/rest-api.md#magic-links-and-reset-links):
 * - 2: a reset or magic link goes to an app's redirect URI only for an active user of that app, and is
 *   then bound to it (redeemed only with its client_id); for anyone else it goes to {auth_url}. Mails
 *   name the app and the link's host.
 * - 3: the first proof of an address by magic link or reset link claims an account created unverified:
 *   the registrant's password, tokens, browser sessions and consents die; the proving sign-in proceeds.
 *   The registrant confirming the code with their own credential is the owner and keeps everything.
 * - 10: at most CODE_MAX_FAILURES_PER_DAY wrong codes per address per 24 h across every code grant.
 * - 12: `/magic-link/request` and `/password/forgot` do the same database work for every address.
 * Each test runs the attack first, then the legitimate path. Time moves only through the app's clock
 * (frozen at an hour boundary here, so the hourly buckets of item 10 are deterministic).
 */

const opened: TestApp[] = [];
afterEach(async () => {
  for (const t of opened.splice(0)) await t.close();
});

/** The real app on a fresh database, clock frozen at an hour boundary; optionally every statement recorded. */
async function mailApp(env: Record<string, string> = {}, recorder?: StatementRecorder): Promise<TestApp> {
  const t = await buildTestApp({
    env: { IP_AUTH_PER_MINUTE: '100000', MAIL_PER_HOUR: '1000', MAIL_INTERVAL_SECONDS: '0', ...env },
    clock: new FrozenClock(nextWindowStart(3600)),
    withDb: recorder ? (db) => db.withPlugin(recorder) : undefined,
  });
  opened.push(t);
  return t;
}

const post = (t: TestApp, url: string, payload: Record<string, unknown>, headers: Record<string, string> = {}) =>
  t.app.inject({ method: 'POST', url, payload, headers });

interface Mail {
  to: string;
  kind: string;
  subject: string;
  text: string;
  html: string;
}

/** The newest mail of `kind` to `to` (read from the outbox through the mailer, as the dev mailbox does). */
async function lastMail(t: TestApp, to: string, kind: string): Promise<Mail> {
  const mail = (await t.app.mailer.recent(200)).find((m) => m.to === to && m.kind === kind);
  if (!mail) throw new Error(`no ${kind} mail to ${to}`);
  return mail;
}

const linkOf = (mail: Mail): string => /(?:^|\s)([a-z][a-z0-9+.-]*:\/\S+)/.exec(mail.text)![1]!;
const codeOf = (mail: Mail): string => /\b(\d{6})\b/.exec(mail.text)![1]!;
const wrongCode = (code: string) => (code === '000000' ? '111111' : '000000');

function expectError(res: LightMyRequestResponse, status: number, code: string) {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.json().code).toBe(code);
}

/** Two apps of two developers: the user's own app (with its developer's API key), and someone else's. */
async function twoApps(t: TestApp): Promise<{ mine: App; theirs: App; developerKey: string }> {
  const developer = await makeDeveloper(t.db);
  const mine = await makeApp(t.db, { developerId: developer.id, name: 'Acme Notes', redirectUris: ['https://notes.example/cb', 'com.acme.notes:/auth'] });
  const theirs = await makeApp(t.db, { developerId: (await makeDeveloper(t.db)).id, name: 'Other Dev App', redirectUris: ['https://evil.example/cb'] });
  return { mine, theirs, developerKey: developer.apiKey };
}

// Item 2 --------------------------------------------------------------------------------------------

describe('item 2: mailed links reach an app only for its users, and are bound to it', () => {
  it("another developer's app cannot get a user's reset link delivered to its domain; the link goes to the hosted page and still works there", async () => {
    const t = await mailApp();
    const { mine, theirs } = await twoApps(t);
    const user = await makeUser(t.app, { email: uniqueEmail('victim') });
    await addMember(t, mine, user);

    // Attack: forgot through the other developer's app and its redirect URI.
    expect((await post(t, '/v1/auth/password/forgot', { email: user.email, client_id: theirs.id, redirect_uri: 'https://evil.example/cb' })).statusCode).toBe(202);
    const mail = await lastMail(t, user.email, 'reset');
    const link = linkOf(mail);
    expect(link).not.toContain('evil.example');
    expect(link.startsWith(`${t.config.authUrl}/password/reset?token=pr_`)).toBe(true);
    // The mail says which app asked and where the link goes.
    expect(mail.text).toContain('Other Dev App');
    expect(mail.text).toContain(`This link opens ${new URL(t.config.authUrl).host}.`);
    expect(mail.html).toContain('Other Dev App');

    // Legitimate: the hosted page accepts the (unbound) token, and so does the API without a client.
    const token = new URL(link).searchParams.get('token')!;
    expect((await t.app.inject({ url: `/password/reset?token=${token}` })).statusCode).toBe(200);
    expect((await post(t, '/v1/auth/password/reset', { reset_token: token, password: 'a fresh new passphrase' })).statusCode).toBe(204);
    expect((await post(t, '/v1/auth/login', { email: user.email, password: 'a fresh new passphrase', client_id: mine.id })).statusCode).toBe(200);
  });

  it("a reset token mailed to an app's redirect URI resets only through that app (client_id or X-Client-Id), only while the user belongs to it", async () => {
    const t = await mailApp();
    const { mine, theirs, developerKey } = await twoApps(t);
    const user = await makeUser(t.app, { email: uniqueEmail('member') });
    await addMember(t, mine, user);

    expect((await post(t, '/v1/auth/password/forgot', { email: user.email, client_id: mine.id, redirect_uri: 'https://notes.example/cb' })).statusCode).toBe(202);
    const mail = await lastMail(t, user.email, 'reset');
    const link = linkOf(mail);
    expect(link.startsWith('https://notes.example/cb?reset_token=pr_')).toBe(true);
    expect(mail.text).toContain('Acme Notes');
    expect(mail.text).toContain('This link opens notes.example.');
    const token = new URL(link).searchParams.get('reset_token')!;

    // Attack: the token used without the app, with another app, or on the hosted page.
    expectError(await post(t, '/v1/auth/password/reset', { reset_token: token, password: 'attacker chosen passphrase' }), 400, 'invalid_token');
    expectError(await post(t, '/v1/auth/password/reset', { reset_token: token, password: 'attacker chosen passphrase', client_id: theirs.id }), 400, 'invalid_token');
    expectError(await post(t, '/v1/auth/password/reset', { reset_token: token, password: 'attacker chosen passphrase' }, { 'x-client-id': theirs.id }), 400, 'invalid_token');
    expect((await t.app.inject({ url: `/password/reset?token=${token}` })).statusCode).toBe(400);
    const browser = new Browser(t.app);
    const page = await browser.get(`/password/reset?token=${token}`);
    expect(page.statusCode).toBe(400);

    // Legitimate: through the app (X-Client-Id), the token works once.
    expect((await post(t, '/v1/auth/password/reset', { reset_token: token, password: 'the owner new passphrase' }, { 'x-client-id': mine.id })).statusCode).toBe(204);
    expect((await post(t, '/v1/auth/login', { email: user.email, password: 'the owner new passphrase', client_id: mine.id })).statusCode).toBe(200);

    // A user the app has blocked no longer belongs to it: a bound token dies, and new links go to the hosted page.
    await post(t, '/v1/auth/password/forgot', { email: user.email, client_id: mine.id, redirect_uri: 'https://notes.example/cb' });
    const bound = new URL(linkOf(await lastMail(t, user.email, 'reset'))).searchParams.get('reset_token')!;
    expect((await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${mine.id}/users/${user.id}`, headers: bearer(developerKey), payload: { status: 'blocked' } })).statusCode).toBe(200);
    expectError(await post(t, '/v1/auth/password/reset', { reset_token: bound, password: 'blocked user passphrase', client_id: mine.id }), 400, 'invalid_token');
    await post(t, '/v1/auth/password/forgot', { email: user.email, client_id: mine.id, redirect_uri: 'https://notes.example/cb' });
    expect(linkOf(await lastMail(t, user.email, 'reset')).startsWith(`${t.config.authUrl}/password/reset?token=`)).toBe(true);
  });

  it('magic links follow the same rule: a non-member gets the hosted link; a member gets a link bound to the app (token and code)', async () => {
    const t = await mailApp();
    const { mine, theirs } = await twoApps(t);
    const user = await makeUser(t.app, { email: uniqueEmail('magic'), email_verified: 1 });
    await addMember(t, mine, user);

    // Attack 1: another developer's app asks for the user's magic link to its redirect URI.
    await post(t, '/v1/auth/magic-link/request', { email: user.email, client_id: theirs.id, redirect_uri: 'https://evil.example/cb' });
    const hosted = await lastMail(t, user.email, 'magic_link');
    expect(linkOf(hosted)).not.toContain('evil.example');
    expect(linkOf(hosted).startsWith(`${t.config.authUrl}/magic-link?token=ml_`)).toBe(true);
    expect(hosted.text).toContain('Other Dev App');

    // The user's own app gets a bound link to its (private-use scheme) redirect URI.
    await post(t, '/v1/auth/magic-link/request', { email: user.email, client_id: mine.id, redirect_uri: 'com.acme.notes:/auth' });
    const mail = await lastMail(t, user.email, 'magic_link');
    expect(linkOf(mail).startsWith('com.acme.notes:/auth?magic_token=ml_')).toBe(true);
    expect(mail.text).toContain('Acme Notes');
    expect(mail.text).toContain('This link opens com.acme.notes:.');
    const token = new URL(linkOf(mail)).searchParams.get('magic_token')!;
    const code = codeOf(mail);

    // Attack 2: the bound token or its code redeemed through another app, or on the hosted page.
    expectError(await post(t, '/v1/auth/magic-link/verify', { token, client_id: theirs.id }), 400, 'invalid_token');
    expectError(await post(t, '/v1/auth/magic-link/verify', { email: user.email, code, client_id: theirs.id }), 400, 'code_expired');
    const browser = new Browser(t.app);
    const landing = await browser.get(`/magic-link?token=${token}`);
    const used = await browser.post('/magic-link', { csrf: /name="csrf" value="([^"]+)"/.exec(landing.body)![1]!, token, action: 'use_magic_link' });
    expect(used.statusCode).toBe(400);

    // Legitimate: through the app it signs in.
    const ok = await post(t, '/v1/auth/magic-link/verify', { token, client_id: mine.id });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'ok', user: { email: user.email } });
    // And the hosted link (not bound) works through any app.
    await post(t, '/v1/auth/magic-link/request', { email: user.email, client_id: theirs.id, redirect_uri: 'https://evil.example/cb' });
    const again = await lastMail(t, user.email, 'magic_link');
    expect((await post(t, '/v1/auth/magic-link/verify', { email: user.email, code: codeOf(again), client_id: mine.id })).statusCode).toBe(200);
  });
});

// Item 3 --------------------------------------------------------------------------------------------

describe('item 3: proving the address by magic link or reset claims an account registered by someone else', () => {
  it("a magic-link sign-in by the mailbox owner revokes the squatter's password, refresh tokens, access tokens, browser session and consent", async () => {
    const t = await mailApp();
    const legit = await makeClient(t, { name: 'Legit app', redirectUris: ['https://legit.example/cb'] });
    const squat = await makeClient(t, { name: 'Squatter app', redirectUris: ['https://squat.example/cb'] });
    const victimEmail = uniqueEmail('victim');
    const squatterPassword = 'squatter chosen passphrase';

    // The squatter registers the victim's address (REST records consent for the squatter's app) and signs a browser in.
    const reg = await post(t, '/v1/auth/register', { email: victimEmail, password: squatterPassword, client_id: squat.app.id });
    expect(reg.statusCode).toBe(201);
    const squatter = reg.json();
    const squatterBrowser = new Browser(t.app);
    expect((await squatterBrowser.login(victimEmail, squatterPassword)).statusCode).toBe(303);

    // The victim signs in by magic link on the hosted page (proves the mailbox).
    const victim = new Browser(t.app);
    expect((await victim.submit('/magic-link/request', { email: victimEmail, action: 'send_magic_link' })).statusCode).toBe(200);
    const token = new URL(linkOf(await lastMail(t, victimEmail, 'magic_link'))).searchParams.get('token')!;
    expect((await victim.submit(`/magic-link?token=${token}`, { token, action: 'use_magic_link' })).statusCode).toBe(303);

    // Attack: everything the squatter held still works?
    expectError(await post(t, '/v1/auth/refresh', { refresh_token: squatter.refresh_token, client_id: squat.app.id }), 400, 'invalid_grant');
    expect((await userinfo(t.app, squatter.access_token)).statusCode).toBe(401);
    expectError(await post(t, '/v1/auth/login', { email: victimEmail, password: squatterPassword, client_id: squat.app.id }), 401, 'invalid_credentials');
    const squatterAccount = await squatterBrowser.get('/account');
    expect(squatterAccount.body).not.toContain('value="logout"');
    // The consent the squatter gave its app is gone: the victim's browser is not silently signed in to it.
    const silent = await victim.get(authorizeUrl(squat, { extra: { prompt: 'none' } }).url);
    expect(silent.statusCode).toBe(302);
    expect(String(silent.headers.location)).toContain('error=consent_required');
    expect(String(silent.headers.location)).not.toContain('code=');
    const claimed = await t.db.selectFrom('events').select(['type', 'data']).where('type', '=', 'user.claimed').execute();
    expect(claimed).toHaveLength(1);
    expect(JSON.parse(claimed[0]!.data)).toMatchObject({ via: 'magic_link', password_cleared: true });

    // Legitimate: the victim is signed in, verified, and gets working tokens by magic link through an app.
    const account = await victim.get('/account');
    expect(account.body).toContain('value="logout"');
    await post(t, '/v1/auth/magic-link/request', { email: victimEmail, client_id: legit.app.id });
    const signIn = await post(t, '/v1/auth/magic-link/verify', { email: victimEmail, code: codeOf(await lastMail(t, victimEmail, 'magic_link')), client_id: legit.app.id });
    expect(signIn.statusCode).toBe(200);
    expect(signIn.json()).toMatchObject({ status: 'ok', user: { email: victimEmail, email_verified: true } });
    expect((await userinfo(t.app, signIn.json().access_token)).statusCode).toBe(200);
    expect((await post(t, '/v1/auth/refresh', { refresh_token: signIn.json().refresh_token, client_id: legit.app.id })).statusCode).toBe(200);
    // A second proof claims nothing more (the address is verified now).
    expect(await t.db.selectFrom('events').select('id').where('type', '=', 'user.claimed').execute()).toHaveLength(1);
  });

  it("a REST magic-link sign-in claims the account first, then issues its own tokens; the registrant confirming the code with their own token keeps everything", async () => {
    const t = await mailApp();
    const client = await makeApp(t.db);
    const email = uniqueEmail('victim');
    const squatter = (await post(t, '/v1/auth/register', { email, password: 'squatter chosen passphrase', client_id: client.id })).json();

    await post(t, '/v1/auth/magic-link/request', { email, client_id: client.id });
    const res = await post(t, '/v1/auth/magic-link/verify', { token: new URL(linkOf(await lastMail(t, email, 'magic_link'))).searchParams.get('token'), client_id: client.id });
    expect(res.statusCode).toBe(200);
    // Attack: the squatter's refresh token.
    expectError(await post(t, '/v1/auth/refresh', { refresh_token: squatter.refresh_token, client_id: client.id }), 400, 'invalid_grant');
    // Legitimate: the tokens of the proving sign-in were issued after the revocation and work.
    expect((await post(t, '/v1/auth/refresh', { refresh_token: res.json().refresh_token, client_id: client.id })).statusCode).toBe(200);
    expect((await userinfo(t.app, res.json().access_token)).statusCode).toBe(200);

    // Legitimate: a registrant who confirms the registration code with their own access token is the
    // owner (credential + mailbox): session, refresh token and password all stay.
    const ownerEmail = uniqueEmail('owner');
    const password = 'owner chosen passphrase';
    const reg = (await post(t, '/v1/auth/register', { email: ownerEmail, password, client_id: client.id })).json();
    const code = codeOf(await lastMail(t, ownerEmail, 'verify'));
    expect((await post(t, '/v1/email_verify/confirm', { code }, bearer(reg.access_token))).statusCode).toBe(200);
    expect((await userinfo(t.app, reg.access_token)).statusCode).toBe(200);
    expect((await post(t, '/v1/auth/refresh', { refresh_token: reg.refresh_token, client_id: client.id })).statusCode).toBe(200);
    const again = await post(t, '/v1/auth/login', { email: ownerEmail, password, client_id: client.id });
    expect(again.statusCode).toBe(200);
    expect(again.json().user.email_verified).toBe(true);
    expect(await t.db.selectFrom('events').select('id').where('type', '=', 'user.claimed').where('user_id', '=', reg.user.id).execute()).toHaveLength(0);
  });

  it("a password reset on an unproven account also drops the squatter's consent and records the claim", async () => {
    const t = await mailApp();
    const squat = await makeClient(t, { name: 'Squatter app', redirectUris: ['https://squat.example/cb'] });
    const email = uniqueEmail('victim');
    expect((await post(t, '/v1/auth/register', { email, password: 'squatter chosen passphrase', client_id: squat.app.id })).statusCode).toBe(201);

    // The victim resets the password from the hosted pages, then signs in with it.
    const victim = new Browser(t.app);
    await victim.submit('/password/forgot', { email, action: 'reset' });
    const token = new URL(linkOf(await lastMail(t, email, 'reset'))).searchParams.get('token')!;
    expect((await victim.submit(`/password/reset?token=${token}`, { token, new_password: 'victim own passphrase', action: 'reset' })).statusCode).toBe(200);
    expect((await victim.login(email, 'victim own passphrase')).statusCode).toBe(303);

    // Attack: the squatter's consent for its app still lets it sign the victim in silently.
    const silent = await victim.get(authorizeUrl(squat, { extra: { prompt: 'none' } }).url);
    expect(String(silent.headers.location)).toContain('error=consent_required');
    const claimed = await t.db.selectFrom('events').select('data').where('type', '=', 'user.claimed').execute();
    expect(claimed.map((e) => JSON.parse(e.data).via)).toEqual(['password_reset']);

    // Legitimate: the account is verified and the new password works over REST too.
    const login = await post(t, '/v1/auth/login', { email, password: 'victim own passphrase', client_id: squat.app.id });
    expect(login.statusCode).toBe(200);
    expect(login.json().user.email_verified).toBe(true);
  });

  it('a registrant who signs in by magic link before confirming is not locked out: signed in, and a reset sets a password again', async () => {
    const t = await mailApp();
    const client = await makeApp(t.db);
    const email = uniqueEmail('hasty');
    expect((await post(t, '/v1/auth/register', { email, password: 'first chosen passphrase', client_id: client.id })).statusCode).toBe(201);
    await post(t, '/v1/auth/magic-link/request', { email, client_id: client.id });
    const signIn = await post(t, '/v1/auth/magic-link/verify', { email, code: codeOf(await lastMail(t, email, 'magic_link')), client_id: client.id });
    expect(signIn.statusCode).toBe(200);
    // The password set before the address was proven is gone (it could have been anyone's) …
    expectError(await post(t, '/v1/auth/login', { email, password: 'first chosen passphrase', client_id: client.id }), 401, 'invalid_credentials');
    // … and the owner sets one again by reset.
    await post(t, '/v1/auth/password/forgot', { email, client_id: client.id });
    const token = new URL(linkOf(await lastMail(t, email, 'reset'))).searchParams.get('token')!;
    expect((await post(t, '/v1/auth/password/reset', { reset_token: token, password: 'second chosen passphrase' })).statusCode).toBe(204);
    expect((await post(t, '/v1/auth/login', { email, password: 'second chosen passphrase', client_id: client.id })).statusCode).toBe(200);
  });
});

// Item 10 -------------------------------------------------------------------------------------------

describe('item 10: a daily budget of wrong codes per address, across every code grant', () => {
  it('after CODE_MAX_FAILURES_PER_DAY wrong magic-link and verification codes, even the right code is refused until the window passes', async () => {
    const t = await mailApp();
    const client = await makeApp(t.db);
    // Verified already: a magic-link sign-in does not claim (and revoke) the account in the middle of the test.
    const user = await makeUser(t.app, { email: uniqueEmail('guessed'), email_verified: 1 });
    const login = (await post(t, '/v1/auth/login', { email: user.email, password: user.password, client_id: client.id })).json();
    const limit = t.config.throttle.codeMaxFailuresPerDay;
    expect(limit).toBe(20);

    const magicCode = async () => {
      expect((await post(t, '/v1/auth/magic-link/request', { email: user.email, client_id: client.id })).statusCode).toBe(202);
      return codeOf(await lastMail(t, user.email, 'magic_link'));
    };
    const verifyCode = async () => {
      expect((await post(t, '/v1/email_verify/request', {}, bearer(login.access_token))).statusCode).toBe(202);
      return codeOf(await lastMail(t, user.email, 'verify'));
    };
    const tryMagic = (code: string) => post(t, '/v1/auth/magic-link/verify', { email: user.email, code, client_id: client.id });
    const tryVerify = (code: string) => post(t, '/v1/email_verify/confirm', { code }, bearer(login.access_token));

    // Attack: fresh grants keep coming (5 wrong tries each), alternating magic-link and verification codes.
    let wrongs = 0;
    for (let grant = 0; wrongs < limit - 1; grant++) {
      const magic = grant % 2 === 0;
      const code = magic ? await magicCode() : await verifyCode();
      for (let i = 0; i < t.config.throttle.codeMaxAttempts && wrongs < limit - 1; i++, wrongs++) {
        expectError(await (magic ? tryMagic : tryVerify)(wrongCode(code)), 400, 'invalid_code');
      }
    }
    // Legitimate before the budget is spent: the right code still works (and does not count).
    const good = await magicCode();
    expect((await tryMagic(good)).statusCode).toBe(200);
    // The last wrong code of the day …
    const next = await magicCode();
    expectError(await tryMagic(wrongCode(next)), 400, 'invalid_code');
    // … and from now on every code for this address is refused, the right ones included, across kinds.
    const refused = await tryMagic(next);
    expectError(refused, 429, 'rate_limited');
    const retryAfter = refused.json().retry_after as number;
    expect(retryAfter).toBeGreaterThanOrEqual(24 * 3600);
    expect(retryAfter).toBeLessThanOrEqual(25 * 3600);
    expect(refused.headers['retry-after']).toBe(String(retryAfter));
    const vcode = await verifyCode();
    expectError(await tryVerify(vcode), 429, 'rate_limited');
    expectError(await tryVerify(wrongCode(vcode)), 429, 'rate_limited');
    const fresh = await magicCode();
    expectError(await tryMagic(fresh), 429, 'rate_limited');

    // Another address is not affected.
    const other = await makeUser(t.app, { email: uniqueEmail('other') });
    await post(t, '/v1/auth/magic-link/request', { email: other.email, client_id: client.id });
    expect((await post(t, '/v1/auth/magic-link/verify', { email: other.email, code: codeOf(await lastMail(t, other.email, 'magic_link')), client_id: client.id })).statusCode).toBe(200);

    // Legitimate: once the window has passed, codes work again.
    t.clock.advance(retryAfter);
    const later = await magicCode();
    expect((await tryMagic(later)).statusCode).toBe(200);
  });

  it('concurrent wrong codes cannot overshoot the budget', async () => {
    const t = await mailApp({ CODE_MAX_FAILURES_PER_DAY: '3', CODE_MAX_ATTEMPTS: '10' });
    const client = await makeApp(t.db);
    const user = await makeUser(t.app, { email: uniqueEmail('raced') });
    await post(t, '/v1/auth/magic-link/request', { email: user.email, client_id: client.id });
    const code = codeOf(await lastMail(t, user.email, 'magic_link'));
    // Attack: ten wrong guesses at once.
    const answers = await Promise.all(Array.from({ length: 10 }, () => post(t, '/v1/auth/magic-link/verify', { email: user.email, code: wrongCode(code), client_id: client.id })));
    const statuses = answers.map((r) => r.statusCode);
    expect(statuses.every((s) => s === 400 || s === 429)).toBe(true);
    let wrong = statuses.filter((s) => s === 400).length;
    expect(wrong).toBeLessThanOrEqual(3);
    // Slots a refused try took are given back: sequential guesses fill the budget to exactly 3, no more.
    for (;;) {
      const res = await post(t, '/v1/auth/magic-link/verify', { email: user.email, code: wrongCode(code), client_id: client.id });
      if (res.statusCode === 429) break;
      expectError(res, 400, 'invalid_code');
      wrong++;
    }
    expect(wrong).toBe(3);
    // Legitimate: another day, the right code.
    t.clock.advance(25 * 3600);
    await post(t, '/v1/auth/magic-link/request', { email: user.email, client_id: client.id });
    expect((await post(t, '/v1/auth/magic-link/verify', { email: user.email, code: codeOf(await lastMail(t, user.email, 'magic_link')), client_id: client.id })).statusCode).toBe(200);
  });
});

// Item 12 -------------------------------------------------------------------------------------------

describe('item 12: mail requests do the same work for known and unknown addresses', () => {
  it('magic-link/request and password/forgot send the same statements, table by table, for an account and for no account', async () => {
    const recorder = new StatementRecorder();
    const t = await mailApp({}, recorder);
    await t.app.mailer.stop(); // no background delivery mixed into the recording
    const client = await makeApp(t.db, { redirectUris: ['https://notes.example/cb'] });
    const cases: Array<{ url: string; redirect?: string }> = [
      { url: '/v1/auth/magic-link/request' },
      { url: '/v1/auth/magic-link/request', redirect: 'https://notes.example/cb' },
      { url: '/v1/auth/password/forgot' },
      { url: '/v1/auth/password/forgot', redirect: 'https://notes.example/cb' },
    ];
    for (const c of cases) {
      const known = await makeUser(t.app, { email: uniqueEmail('known') });
      await addMember(t, client, known);
      const unknown = uniqueEmail('nobody');
      const payload = (email: string) => ({ email, client_id: client.id, ...(c.redirect ? { redirect_uri: c.redirect } : {}) });
      let knownRes: LightMyRequestResponse | undefined;
      let unknownRes: LightMyRequestResponse | undefined;
      const forKnown = await recorder.during(async () => (knownRes = await post(t, c.url, payload(known.email))));
      const forUnknown = await recorder.during(async () => (unknownRes = await post(t, c.url, payload(unknown))));
      expect(knownRes!.statusCode).toBe(202);
      expect(unknownRes!.body).toBe(knownRes!.body);
      expect(forUnknown, `${c.url} ${c.redirect ?? ''}`).toEqual(forKnown);
      expect(forKnown).toContain('insert outbox');
      expect(forKnown).toContain('insert one_time_tokens');
    }
  });

  it('the stand-in mail for an unknown address is never delivered, and its code answers like a real one', async () => {
    const t = await mailApp();
    const client = await makeApp(t.db);
    const known = await makeUser(t.app, { email: uniqueEmail('known'), email_verified: 1 });
    const unknown = uniqueEmail('nobody');
    for (const email of [known.email, unknown]) {
      expect((await post(t, '/v1/auth/magic-link/request', { email, client_id: client.id })).statusCode).toBe(202);
      expect((await post(t, '/v1/auth/password/forgot', { email, client_id: client.id })).statusCode).toBe(202);
    }
    // Attack (enumeration by code): a wrong code answers the same for both addresses.
    const probe = async (email: string) => (await post(t, '/v1/auth/magic-link/verify', { email, code: '123456', client_id: client.id })).body;
    const knownCode = codeOf(await lastMail(t, known.email, 'magic_link'));
    if (knownCode !== '123456') expect(await probe(unknown)).toBe(await probe(known.email));

    // Every request wrote one outbox row; the sender drops the stand-ins unsent.
    await expect.poll(() => t.app.mailer.pending(), { timeout: 5000 }).toBe(0);
    const rows = await t.db.selectFrom('outbox').select(['kind', 'to_address', 'sent_at']).execute();
    expect(rows).toHaveLength(4);
    expect(rows.every((r) => r.sent_at !== null)).toBe(true);
    expect(rows.filter((r) => r.to_address === unknown)).toHaveLength(0);
    const listed = await t.app.mailer.recent(100);
    expect(listed.map((m) => m.to).sort()).toEqual([known.email, known.email]);

    // Legitimate: the known address's mails are real and their links work.
    expect((await post(t, '/v1/auth/magic-link/verify', { email: known.email, code: knownCode, client_id: client.id })).statusCode).toBe(200);
  });
});
