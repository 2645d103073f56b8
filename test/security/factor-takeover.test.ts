import { decodeJwt } from 'jose';
import { generateSync } from 'otplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, FrozenClock, nextWindowStart, type TestApp } from '../helpers/app.js';
import { countAll } from '../helpers/db.js';
import { makeUser } from '../helpers/factories.js';
import { authorizeUrl, Browser, csrfOf, makeClient, PASSWORD, relative, type TestClient, uniqueEmail } from '../helpers/oauth-flows.js';
import { SoftAuthenticator } from '../passkeys/soft-authenticator.js';

/**
 * Account takeover through second factors, each attack first and then the legitimate path:
 * - a squatter who registered someone else's address cannot enrol a factor (an unproven address enrols
 *   nothing), and whatever factors an unproven account holds are gone when the mailbox owner claims it
 *   (`user.claimed` says what went), so the owner is never asked for a stranger's factor;
 * - an app that requires MFA asks an unproven account to prove its address first, then to enrol;
 * - an authenticator app being set up belongs to the session or pending sign-in that started it: it is
 *   never shown to another, never confirmed by another, and expires.
 * The clock is frozen at the start of a 30-second step, so no TOTP code straddles a step edge.
 */

const AUTH_ORIGIN = 'http://localhost:3000';

let t: TestApp;
let clock: FrozenClock;
let strict: TestClient;
let plain: TestClient;

beforeAll(async () => {
  clock = new FrozenClock(nextWindowStart(30) + 3);
  t = await buildTestApp({ clock, env: { IP_AUTH_PER_MINUTE: '100000', MAIL_PER_HOUR: '1000', MAIL_INTERVAL_SECONDS: '0' } });
  strict = await makeClient(t, { name: 'Strict Bank', mfa: 'required' });
  plain = await makeClient(t, { name: 'Plain App' });
});

afterAll(async () => {
  await t?.close();
});

const post = (url: string, payload: Record<string, unknown>, headers: Record<string, string> = {}) => t.app.inject({ method: 'POST', url, payload, headers });
const codeFor = (secret: string) => generateSync({ secret, epoch: clock.now() });
const fieldValues = (html: string, field: string) => [...html.matchAll(new RegExp(`data-field="${field}">([^<]+)<`, 'g'))].map((m) => m[1]!);
const pageOptions = (browser: Browser, url: string, csrf: string) =>
  t.app.inject({ method: 'POST', url, headers: { ...browser.jar.header(), 'content-type': 'application/json' }, payload: { csrf } });

/** The newest mailed six-digit code to `to` (the outbox, as the dev mailbox reads it). */
async function mailedCode(to: string, kind: string): Promise<string> {
  const mail = (await t.app.mailer.recent(200)).find((m) => m.to === to && m.kind === kind);
  if (!mail) throw new Error(`no ${kind} mail to ${to}`);
  return /\b(\d{6})\b/.exec(mail.text)![1]!;
}

const userId = async (email: string) => (await t.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow()).id;

describe('a squatter cannot keep factors on an address they do not own', () => {
  it('an unproven account enrols nothing: no passkey on /account, no authenticator app on /account or during a sign-in', async () => {
    const squatter = new Browser(t.app);
    const { email } = await squatter.register(uniqueEmail('victim'));
    const account = await squatter.get('/account');
    expect(account.body).not.toContain('id="passkey-add"');
    expect(account.body).not.toContain('value="setup_totp"');
    const csrf = csrfOf(account.body);
    expect((await pageOptions(squatter, '/account/passkeys/options', csrf)).json()).toMatchObject({ code: 'forbidden' });
    const totp = await squatter.post('/account/mfa', { csrf, action: 'setup_totp' });
    expect(totp.headers.location).toBe('/account?mfa_error=verify_email#mfa');
    // At an app that requires MFA the sign-in asks for the address, not for an enrolment.
    const login = (await post('/v1/auth/login', { email, password: PASSWORD, client_id: strict.app.id })).json();
    expect(login).toMatchObject({ status: 'pending', next_step: 'verify_email', required_fields: ['email_verified'] });
    const setup = await post('/v1/auth/mfa/totp/setup', { session: login.session, client_id: strict.app.id });
    expect(setup.json()).toMatchObject({ code: 'invalid_token' });
    const id = await userId(email);
    expect(await countAll(t.db, 'one_time_tokens', { user_id: id, kind: 'totp_enrolment' })).toBe(0);
    expect(await t.app.mfa.overview(t.db, id)).toMatchObject({ totp: false, passkeys: 0, recoveryCodes: 0 });
  });

  it('the owner\'s claim (a magic link) removes every factor an unproven account holds; the stranger\'s passkey no longer signs in', async () => {
    // An unproven account with a passkey, an authenticator app and recovery codes: what an earlier
    // version let a squatter add. Made through the real pages while the address counted as proven.
    const squatter = new Browser(t.app);
    const { email } = await squatter.register(uniqueEmail('claimed'));
    const id = await userId(email);
    await t.db.updateTable('users').set({ email_verified: 1 }).where('id', '=', id).execute();
    let page = await squatter.get('/account');
    const key = new SoftAuthenticator({ origin: AUTH_ORIGIN });
    const creation = (await pageOptions(squatter, '/account/passkeys/options', csrfOf(page.body))).json();
    expect((await squatter.post('/account/passkeys', { csrf: csrfOf(page.body), action: 'add_passkey', response: JSON.stringify(key.create(creation)) })).statusCode).toBe(200);
    await t.db.updateTable('users').set({ email_verified: 0 }).where('id', '=', id).execute();
    expect(await t.app.mfa.overview(t.db, id)).toMatchObject({ passkeys: 1, recoveryCodes: 10 });

    // Without the claim, the owner's first sign-in would be asked for the squatter's passkey.
    expect((await post('/v1/auth/magic-link/request', { email, client_id: plain.app.id })).statusCode).toBe(202);
    const owner = await post('/v1/auth/magic-link/verify', { email, code: await mailedCode(email, 'magic_link'), client_id: plain.app.id });
    expect(owner.statusCode, owner.body).toBe(200);
    expect(owner.json()).toMatchObject({ status: 'ok', user: { email_verified: true } });

    expect(await t.app.mfa.overview(t.db, id)).toMatchObject({ totp: false, passkeys: 0, recoveryCodes: 0 });
    expect(await countAll(t.db, 'passkeys', { user_id: id })).toBe(0);
    const claimed = await t.db.selectFrom('events').selectAll().where('type', '=', 'user.claimed').where('user_id', '=', id).executeTakeFirstOrThrow();
    expect(JSON.parse(claimed.data)).toMatchObject({ via: 'magic_link', password_cleared: true, factors_removed: { totp: false, passkeys: 1, recovery_codes: 10 } });

    // The squatter's key is refused at the hosted sign-in.
    const stranger = new Browser(t.app);
    const loginCsrf = csrfOf((await stranger.get('/login')).body);
    const request = (await pageOptions(stranger, '/login/passkey/options', loginCsrf)).json();
    const refused = await stranger.post('/login/passkey', { csrf: loginCsrf, action: 'passkey', response: JSON.stringify(key.get(request)) });
    expect(refused.statusCode).toBe(401);
  });

  it('the claim voids an email change the squatter left pending: the owner is never shown, nor moved by, the squatter\'s new address', async () => {
    const squatter = new Browser(t.app);
    const { email } = await squatter.register(uniqueEmail('moved'));
    const id = await userId(email);
    const theirs = uniqueEmail('squatter');
    const page = await squatter.get('/account');
    const asked = await squatter.post('/account/email', { csrf: csrfOf(page.body), action: 'request', new_email: theirs, current_password: PASSWORD });
    expect(asked.statusCode).toBe(303);
    expect(await t.app.emailChange.pendingAddress(id)).toBe(theirs);

    expect((await post('/v1/auth/magic-link/request', { email, client_id: plain.app.id })).statusCode).toBe(202);
    const owner = await post('/v1/auth/magic-link/verify', { email, code: await mailedCode(email, 'magic_link'), client_id: plain.app.id });
    expect(owner.statusCode, owner.body).toBe(200);

    // The account page's code form reads the pending change: there is none for the owner.
    expect(await t.app.emailChange.pendingAddress(id)).toBeUndefined();
    expect((await t.db.selectFrom('users').select('email').where('id', '=', id).executeTakeFirstOrThrow()).email).toBe(email);
  });

  it('the claim also removes an authenticator app and its recovery codes', async () => {
    const { email, secret } = await enrolledThenUnproven('claimtotp');
    const id = await userId(email);
    expect(await t.app.mfa.overview(t.db, id)).toMatchObject({ totp: true, recoveryCodes: 10 });
    expect((await post('/v1/auth/magic-link/request', { email, client_id: plain.app.id })).statusCode).toBe(202);
    const owner = await post('/v1/auth/magic-link/verify', { email, code: await mailedCode(email, 'magic_link'), client_id: plain.app.id });
    expect(owner.json()).toMatchObject({ status: 'ok' });
    expect(await t.app.mfa.overview(t.db, id)).toMatchObject({ totp: false, passkeys: 0, recoveryCodes: 0 });
    const claimed = await t.db.selectFrom('events').selectAll().where('type', '=', 'user.claimed').where('user_id', '=', id).executeTakeFirstOrThrow();
    expect(JSON.parse(claimed.data).factors_removed).toEqual({ totp: true, passkeys: 0, recovery_codes: 10 });
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
  });
});

/** A user who proved the address and set up an authenticator app on /account, then (as an earlier version allowed) left unproven. */
async function enrolledThenUnproven(prefix: string) {
  const browser = new Browser(t.app);
  const { email } = await browser.register(uniqueEmail(prefix));
  await t.db.updateTable('users').set({ email_verified: 1 }).where('email', '=', email).execute();
  const account = await browser.get('/account');
  await browser.post('/account/mfa', { csrf: csrfOf(account.body), action: 'setup_totp' });
  const page = await browser.get('/account/mfa/totp');
  const [secret] = fieldValues(page.body, 'totp_secret');
  const confirmed = await browser.post('/account/mfa', { csrf: csrfOf(page.body), action: 'verify', code: codeFor(secret!) });
  expect(confirmed.statusCode).toBe(200);
  clock.advance(30);
  await t.db.updateTable('users').set({ email_verified: 0 }).where('email', '=', email).execute();
  return { email, secret: secret! };
}

describe('an app that requires MFA, for an account whose address is not proven yet', () => {
  it('REST: the address first (with the pending session), then the authenticator app, then tokens', async () => {
    const email = uniqueEmail('restfirst');
    const reg = await post('/v1/auth/register', { email, password: PASSWORD, client_id: strict.app.id });
    expect(reg.statusCode, reg.body).toBe(201);
    const pending = reg.json();
    expect(pending).toMatchObject({ status: 'pending', next_step: 'verify_email', required_fields: ['email_verified'] });
    expect((await post('/v1/email_verify/request', {}, { authorization: `Bearer ${pending.session}` })).statusCode).toBe(202);
    const confirmed = await post('/v1/email_verify/confirm', { code: await mailedCode(email, 'verify') }, { authorization: `Bearer ${pending.session}` });
    expect(confirmed.statusCode, confirmed.body).toBe(200);

    const next = await post('/v1/auth/profile/complete', { session: pending.session, client_id: strict.app.id });
    expect(next.json()).toMatchObject({ status: 'pending', next_step: 'mfa', methods: [], enroll: ['totp'] });
    // The session now waits for its second factor: no longer good for email verification.
    expect((await post('/v1/email_verify/request', {}, { authorization: `Bearer ${next.json().session}` })).statusCode).toBe(401);
    const setup = await post('/v1/auth/mfa/totp/setup', { session: next.json().session, client_id: strict.app.id });
    expect(setup.statusCode, setup.body).toBe(200);
    const ok = await post('/v1/auth/mfa/verify', { session: next.json().session, client_id: strict.app.id, code: codeFor(setup.json().secret) });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'ok', user: { email_verified: true } });
    expect(ok.json().recovery_codes).toHaveLength(10);
    expect(decodeJwt(ok.json().id_token)).toMatchObject({ amr: ['pwd', 'otp', 'mfa'] });
    clock.advance(30);
  });

  it('hosted: the sign-in goes to the address check, then /mfa sets up the app, then on to the app', async () => {
    const seed = new Browser(t.app);
    const { email } = await seed.register(uniqueEmail('hostedfirst'));
    const browser = new Browser(t.app);
    const start = await browser.get(authorizeUrl(strict).url);
    const login = await browser.submit(relative(String(start.headers.location)), { email, password: PASSWORD, action: 'login' });
    // The password signs the browser in; the authorization request then asks for the address.
    expect(login.headers.location).toMatch(/^\/oauth\/authorize\?/);
    const toProfile = await browser.get(String(login.headers.location));
    expect(relative(String(toProfile.headers.location))).toMatch(/^\/profile/);
    expect((await browser.get(relative(String(toProfile.headers.location)))).body).toContain('href="/verify-email"');

    const verify = await browser.get('/verify-email');
    await browser.post('/verify-email', { csrf: csrfOf(verify.body), action: 'send_code' });
    const verified = await browser.post('/verify-email', { csrf: csrfOf(verify.body), action: 'verify', code: await mailedCode(email, 'verify') });
    expect(verified.headers.location).toMatch(/^\/oauth\/authorize\?/);
    const toMfa = await browser.get(String(verified.headers.location));
    expect(relative(String(toMfa.headers.location))).toMatch(/^\/mfa/);
    const mfa = await browser.get(relative(String(toMfa.headers.location)));
    const [secret] = fieldValues(mfa.body, 'totp_secret');
    expect(secret).toBeTruthy();
    const done = await browser.post('/mfa', { csrf: csrfOf(mfa.body), action: 'verify', code: codeFor(secret!) });
    expect(done.statusCode).toBe(200);
    expect(fieldValues(done.body, 'recovery_code')).toHaveLength(10);
    clock.advance(30);
  });
});

describe('an authenticator app being set up belongs to whoever started it', () => {
  it('a secret planted through the REST door is never shown to the owner\'s /mfa, and the owner\'s confirmed app makes it worthless', async () => {
    const user = await makeUser(t.app, { email_verified: 1 });
    // The attacker knows the password and starts a setup during a sign-in at an app that requires MFA.
    const attacker = (await post('/v1/auth/login', { email: user.email, password: user.password, client_id: strict.app.id })).json();
    expect(attacker).toMatchObject({ next_step: 'mfa', enroll: ['totp'] });
    const planted = (await post('/v1/auth/mfa/totp/setup', { session: attacker.session, client_id: strict.app.id })).json().secret as string;

    // The owner signs in on the hosted pages: /mfa shows a secret of the owner's own session.
    const owner = new Browser(t.app);
    const start = await owner.get(authorizeUrl(strict).url);
    const login = await owner.submit(relative(String(start.headers.location)), { email: user.email, password: user.password, action: 'login' });
    const page = await owner.get(relative(String(login.headers.location)));
    const [shown] = fieldValues(page.body, 'totp_secret');
    expect(shown).toMatch(/^[A-Z2-7]{32}$/);
    expect(shown).not.toBe(planted);
    // Reloading shows the same (the owner's) secret again.
    expect(fieldValues((await owner.get(relative(String(login.headers.location)))).body, 'totp_secret')).toEqual([shown]);
    // A code of the planted secret does not confirm the owner's setup.
    const wrong = await owner.post('/mfa', { csrf: csrfOf(page.body), action: 'verify', code: codeFor(planted) });
    expect(wrong.statusCode).toBe(400);
    const done = await owner.post('/mfa', { csrf: csrfOf(page.body), action: 'verify', code: codeFor(shown!) });
    expect(done.statusCode).toBe(200);
    clock.advance(30);

    // The attacker's setup can no longer be confirmed, and its codes open nothing.
    const late = await post('/v1/auth/mfa/verify', { session: attacker.session, client_id: strict.app.id, code: codeFor(planted) });
    expect(late.statusCode).toBe(400);
    const again = (await post('/v1/auth/login', { email: user.email, password: user.password, client_id: strict.app.id })).json();
    expect(again).toMatchObject({ next_step: 'mfa', methods: ['totp', 'recovery_code'] });
    expect(again.enroll).toBeUndefined();
    const withPlanted = await post('/v1/auth/mfa/verify', { session: again.session, client_id: strict.app.id, code: codeFor(planted) });
    expect(withPlanted.json()).toMatchObject({ code: 'invalid_code' });
    clock.advance(30);
  });

  it('the owner\'s setup in progress on /account is never shown to the attacker\'s /mfa, nor confirmed by it', async () => {
    const user = await makeUser(t.app, { email_verified: 1 });
    const owner = new Browser(t.app);
    await owner.submit('/account', { email: user.email, password: user.password, action: 'login' });
    await owner.post('/account/mfa', { csrf: csrfOf((await owner.get('/account')).body), action: 'setup_totp' });
    const ownerPage = await owner.get('/account/mfa/totp');
    const [ownerSecret] = fieldValues(ownerPage.body, 'totp_secret');

    const attacker = new Browser(t.app);
    const start = await attacker.get(authorizeUrl(strict).url);
    const login = await attacker.submit(relative(String(start.headers.location)), { email: user.email, password: user.password, action: 'login' });
    const attackerPage = await attacker.get(relative(String(login.headers.location)));
    const [attackerSecret] = fieldValues(attackerPage.body, 'totp_secret');
    expect(attackerSecret).toBeTruthy();
    expect(attackerSecret).not.toBe(ownerSecret);
    const stolen = await attacker.post('/mfa', { csrf: csrfOf(attackerPage.body), action: 'verify', code: codeFor(ownerSecret!) });
    expect(stolen.statusCode).toBe(400);

    // Positive control: the owner confirms their own.
    const confirmed = await owner.post('/account/mfa', { csrf: csrfOf(ownerPage.body), action: 'verify', code: codeFor(ownerSecret!) });
    expect(confirmed.statusCode).toBe(200);
    clock.advance(30);
  });

  it('a setup expires after ten minutes', async () => {
    const user = await makeUser(t.app, { email_verified: 1 });
    const browser = new Browser(t.app);
    await browser.submit('/account', { email: user.email, password: user.password, action: 'login' });
    await browser.post('/account/mfa', { csrf: csrfOf((await browser.get('/account')).body), action: 'setup_totp' });
    const page = await browser.get('/account/mfa/totp');
    const [secret] = fieldValues(page.body, 'totp_secret');
    clock.advance(601);
    const late = await browser.post('/account/mfa', { csrf: csrfOf(page.body), action: 'verify', code: codeFor(secret!) });
    expect(late.headers.location).toBe('/account?mfa_error=setup_expired#mfa');
    expect((await browser.get(late.headers.location!)).body).toContain('The authenticator app setup expired');
    expect((await t.app.mfa.overview(t.db, user.id)).totp).toBe(false);
    clock.advance(30 - ((clock.now() - 3) % 30));
  });
});
