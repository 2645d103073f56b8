import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJwt } from 'jose';
import { buildTestApp, FrozenClock, nextWindowStart, type TestApp } from '../helpers/app.js';
import { Browser, csrfOf, makeClient, PASSWORD, type TestClient } from '../helpers/oauth-flows.js';
import { makeUser } from '../helpers/factories.js';
import { generateSync } from 'otplib';
import { normalizeUserCode } from '../../src/shared/user-code.js';
import { hashSecret } from '../../src/shared/ids.js';
import { appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';

/**
 * The device authorization grant (RFC 8628, docs/reference/oauth.md#device-authorization-grant-rfc-8628) through
 * the endpoints and the `/device` pages, and the attacks on it: a phished or guessed user code, a device
 * code polled too fast, reused, expired, denied, or redeemed by another app, and an app without the switch.
 */

const GRANT = 'urn:ietf:params:oauth:grant-type:device_code';
const ON = { dpopBoundAccessTokens: false, requirePushedAuthorizationRequests: false, deviceAuthorizationGrant: true };

interface Codes {
  device_code: string;
  user_code: string;
  verification_uri: string;
  verification_uri_complete: string;
  expires_in: number;
  interval: number;
}

describe('device authorization grant', () => {
  let t: TestApp;
  let tv: TestClient;
  let other: TestClient;
  let cli: TestClient;

  beforeAll(async () => {
    t = await buildTestApp({ clock: new FrozenClock(nextWindowStart(600)) });
    tv = await makeClient(t, { name: 'Living Room TV', oauth: ON });
    other = await makeClient(t, { name: 'Other TV', oauth: ON });
    cli = await makeClient(t, { name: 'Deploy CLI', type: 'confidential', oauth: ON });
  });
  afterAll(async () => t?.close());

  const start = async (client: TestClient, payload: Record<string, string> = {}) => {
    const res = await t.app.inject({ method: 'POST', url: '/oauth/device_authorization', payload: { client_id: client.app.id, ...(client.secret ? { client_secret: client.secret } : {}), ...payload } });
    return res;
  };
  const codes = async (client: TestClient, payload: Record<string, string> = {}): Promise<Codes> => {
    const res = await start(client, payload);
    expect(res.statusCode, res.body).toBe(200);
    return res.json<Codes>();
  };
  const poll = (client: TestClient, deviceCode: string) =>
    t.app.inject({ method: 'POST', url: '/oauth/token', payload: { grant_type: GRANT, device_code: deviceCode, client_id: client.app.id, ...(client.secret ? { client_secret: client.secret } : {}) } });

  /** A person signed in on a browser of their own enters the code and approves (or denies). */
  async function decide(userCode: string, action: 'approve' | 'deny', browser?: Browser): Promise<Browser> {
    const b = browser ?? new Browser(t.app);
    if (!browser) await b.register();
    const entered = await b.submit('/device', { user_code: userCode });
    expect(entered.statusCode, entered.body.slice(0, 300)).toBe(303);
    const confirm = await b.get(String(entered.headers.location));
    expect(confirm.statusCode, confirm.body.slice(0, 300)).toBe(200);
    const posted = await b.post(String(entered.headers.location), { csrf: csrfOf(confirm.body), action });
    if (action === 'approve') {
      expect(posted.statusCode).toBe(303);
      const done = await b.get(String(posted.headers.location));
      expect(done.body).toContain('data-device-done="approved"');
    } else {
      expect(posted.body).toContain('data-device-done="denied"');
    }
    return b;
  }

  it('answers the RFC 8628 §3.2 fields: a high-entropy device code and an XXXX-XXXX user code from the unambiguous alphabet', async () => {
    const res = await start(tv);
    expect(res.headers['cache-control']).toContain('no-store');
    const body = res.json<Codes>();
    expect(body.device_code.length).toBeGreaterThanOrEqual(43);
    expect(body.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    expect(body.verification_uri).toBe(`${t.config.authUrl}/device`);
    expect(body.verification_uri_complete).toBe(`${t.config.authUrl}/device?user_code=${body.user_code}`);
    expect(body).toMatchObject({ expires_in: 600, interval: 5 });
    // Stored hashed only: neither code is in the table.
    const rows = await t.db.selectFrom('device_authorizations').select(['device_code_hash', 'user_code_hash']).execute();
    expect(JSON.stringify(rows)).not.toContain(body.device_code);
    expect(JSON.stringify(rows)).not.toContain(body.user_code.replace('-', ''));
  });

  it('user codes are read in any case, with or without the dash or spaces; anything else is no code', () => {
    const cases: Array<[string, string | null]> = [
      ['BCDF-GHJK', 'BCDFGHJK'],
      ['bcdfghjk', 'BCDFGHJK'],
      [' bcdf ghjk ', 'BCDFGHJK'],
      ['BCDF-GHJA', null], // a vowel is not in the alphabet
      ['BCDF-GHJ', null],
      ['BCDF-GHJK-L', null],
      ['', null],
    ];
    for (const [typed, expected] of cases) expect(normalizeUserCode(typed), typed).toBe(expected);
  });

  it('the whole flow: pending, the person signs in through /login and approves, tokens once (refresh, ID token with openid)', async () => {
    const c = await codes(tv, { scope: 'openid profile email offline_access' });
    const pending = await poll(tv, c.device_code);
    expect(pending.statusCode).toBe(400);
    expect(pending.json().error).toBe('authorization_pending');

    // The person opens verification_uri_complete: the code is filled in, not yet used.
    const person = new Browser(t.app);
    const user = await makeUser(t.app, { password: PASSWORD, email_verified: 1 });
    const page = await person.get(c.verification_uri_complete);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain(`value="${c.user_code}"`);
    const entered = await person.post('/device', { csrf: csrfOf(page.body), user_code: c.user_code.toLowerCase().replace('-', '') });
    expect(entered.statusCode).toBe(303);
    // Not signed in: the hosted login, which resumes the device flow.
    const toLogin = await person.get(String(entered.headers.location));
    expect(toLogin.statusCode).toBe(302);
    expect(String(toLogin.headers.location)).toMatch(/^\/login\?client_id=/);
    const loggedIn = await person.submit(String(toLogin.headers.location), { email: user.email, password: PASSWORD, action: 'login' });
    expect(loggedIn.statusCode).toBe(303);
    expect(String(loggedIn.headers.location)).toMatch(/^\/device\/continue\?client_id=/);
    const confirm = await person.get(String(loggedIn.headers.location));
    // The phishing defence: the app, what it asks, the code, and the warning.
    expect(confirm.body).toContain('Living Room TV');
    expect(confirm.body).toContain(c.user_code);
    expect(confirm.body).toContain('data-device-warning');
    expect(confirm.body).toContain('data-scope="offline_access"');
    // Still pending until Approve.
    t.clock.advance(5);
    expect((await poll(tv, c.device_code)).json().error).toBe('authorization_pending');
    const approved = await person.post(String(loggedIn.headers.location), { csrf: csrfOf(confirm.body), action: 'approve' });
    const done = await person.get(String(approved.headers.location));
    expect(done.body).toContain('data-device-done="approved"');

    t.clock.advance(5);
    const tokens = await poll(tv, c.device_code);
    expect(tokens.statusCode, tokens.body).toBe(200);
    const body = tokens.json();
    expect(body.token_type).toBe('Bearer');
    expect(body.refresh_token).toBeTruthy();
    expect(decodeJwt(body.id_token)).toMatchObject({ sub: user.id, aud: tv.app.id });
    expect(decodeJwt(body.access_token)).toMatchObject({ sub: user.id, client_id: tv.app.id, scope: 'email offline_access openid profile' });
    // The refresh token works like any other.
    const refreshed = await t.app.inject({ method: 'POST', url: '/oauth/token', payload: { grant_type: 'refresh_token', refresh_token: body.refresh_token, client_id: tv.app.id } });
    expect(refreshed.statusCode).toBe(200);

    // Redeemable once.
    t.clock.advance(5);
    const again = await poll(tv, c.device_code);
    expect(again.statusCode).toBe(400);
    expect(again.json().error).toBe('invalid_grant');
    // A decided request is no longer on offer to the page.
    const reused = await new Browser(t.app).submit('/device', { user_code: c.user_code });
    expect(reused.statusCode).toBe(400);
  });

  it('an app that requires a second factor: the person sets one up on the hosted /mfa page, which resumes the device flow', async () => {
    const strict = await makeClient(t, { name: 'Bank TV', mfa: 'required', oauth: ON });
    const c = await codes(strict);
    const person = new Browser(t.app);
    const { email } = await person.register();
    await t.db.updateTable('users').set({ email_verified: 1 }).where('email', '=', email).execute();
    const entered = await person.submit('/device', { user_code: c.user_code });
    const toMfa = await person.get(String(entered.headers.location));
    expect(toMfa.statusCode).toBe(302);
    expect(String(toMfa.headers.location)).toMatch(/^\/mfa\?client_id=/);
    const mfaPage = await person.get(String(toMfa.headers.location));
    const secret = /data-field="totp_secret">([^<]+)</.exec(mfaPage.body)?.[1];
    expect(secret).toBeTruthy();
    const verified = await person.post(String(toMfa.headers.location), { csrf: csrfOf(mfaPage.body), action: 'verify', code: generateSync({ secret: secret!, epoch: t.clock.now() }) });
    // New recovery codes are shown once, with the way on: back into the device flow.
    const next = verified.statusCode === 303 ? String(verified.headers.location) : /href="(\/device\/continue[^"]*)"/.exec(verified.body)?.[1]?.replace(/&amp;/g, '&');
    expect(next).toMatch(/^\/device\/continue\?client_id=/);
    const confirm = await person.get(next!);
    expect(confirm.statusCode).toBe(200);
    expect(confirm.body).toContain('Bank TV');
    const approved = await person.post(next!, { csrf: csrfOf(confirm.body), action: 'approve' });
    expect((await person.get(String(approved.headers.location))).body).toContain('data-device-done="approved"');
    t.clock.advance(5);
    const tokens = await poll(strict, c.device_code);
    expect(tokens.statusCode, tokens.body).toBe(200);
    expect(decodeJwt(tokens.json().id_token).amr).toContain('otp');
  });

  it('the developer API sets, shows and changes device_authorization_grant (default false)', async () => {
    const dev = await createDeveloperViaApi(t);
    const created = await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(dev.apiKey), payload: appBody() });
    expect(created.json().device_authorization_grant).toBe(false);
    const id = created.json().id as string;
    const patched = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${id}`, headers: bearer(dev.apiKey), payload: { device_authorization_grant: true } });
    expect(patched.statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: `/v1/dev/apps/${id}`, headers: bearer(dev.apiKey) })).json().device_authorization_grant).toBe(true);
    const started = await t.app.inject({ method: 'POST', url: '/oauth/device_authorization', payload: { client_id: id } });
    expect(started.statusCode).toBe(200);
    const bad = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${id}`, headers: bearer(dev.apiKey), payload: { device_authorization_grant: 'yes' } });
    expect(bad.statusCode).toBe(400);
  });

  it('polling faster than the interval is slow_down, and the interval then grows by 5 s', async () => {
    const c = await codes(tv);
    expect((await poll(tv, c.device_code)).json().error).toBe('authorization_pending');
    const fast = await poll(tv, c.device_code);
    expect(fast.json().error).toBe('slow_down');
    // The interval is 10 s now: 5 s later is still too fast.
    t.clock.advance(5);
    expect((await poll(tv, c.device_code)).json().error).toBe('slow_down');
    t.clock.advance(15);
    expect((await poll(tv, c.device_code)).json().error).toBe('authorization_pending');
    const row = await t.db.selectFrom('device_authorizations').select('poll_interval').where('device_code_hash', '=', hashSecret(c.device_code)).executeTakeFirstOrThrow();
    expect(row.poll_interval).toBe(15);
  });

  it('a denied request answers access_denied; an expired one expired_token, and its code no longer opens the page', async () => {
    const denied = await codes(tv);
    await decide(denied.user_code, 'deny');
    t.clock.advance(5);
    expect((await poll(tv, denied.device_code)).json().error).toBe('access_denied');

    const late = await codes(tv);
    t.clock.advance(601);
    expect((await poll(tv, late.device_code)).json().error).toBe('expired_token');
    const page = await new Browser(t.app).submit('/device', { user_code: late.user_code });
    expect(page.statusCode).toBe(400);
    expect(page.body).toContain('id="form-error"');
  });

  it("a device code of app A is invalid_grant for app B, and does not spoil A's", async () => {
    const c = await codes(tv);
    await decide(c.user_code, 'approve');
    t.clock.advance(5);
    const stolen = await poll(other, c.device_code);
    expect(stolen.statusCode).toBe(400);
    expect(stolen.json().error).toBe('invalid_grant');
    const unknown = await poll(other, 'dc_not-a-code');
    expect(unknown.json()).toEqual(stolen.json());
    expect((await poll(tv, c.device_code)).statusCode).toBe(200);
  });

  it('a confidential app authenticates; a wrong secret is invalid_client at both endpoints', async () => {
    const c = await codes(cli, { scope: 'openid' });
    const wrong = await t.app.inject({ method: 'POST', url: '/oauth/device_authorization', payload: { client_id: cli.app.id, client_secret: 'nope' } });
    expect(wrong.statusCode).toBe(401);
    await decide(c.user_code, 'approve');
    t.clock.advance(5);
    const noSecret = await t.app.inject({ method: 'POST', url: '/oauth/token', payload: { grant_type: GRANT, device_code: c.device_code, client_id: cli.app.id } });
    expect(noSecret.statusCode).toBe(401);
    const ok = await poll(cli, c.device_code);
    expect(ok.statusCode, ok.body).toBe(200);
  });

  it('an app without device_authorization_grant is unauthorized_client (public or confidential), and its codes are not honoured later', async () => {
    const off = await makeClient(t, { name: 'No devices' });
    const refused = await start(off);
    expect(refused.statusCode).toBe(400);
    expect(refused.json().error).toBe('unauthorized_client');
    const polled = await poll(off, 'dc_whatever');
    expect(polled.json().error).toBe('unauthorized_client');
    expect((await start(tv, { scope: 'openid admin' })).json().error).toBe('invalid_scope');

    // Switched off after the code was issued: the page treats the code as unknown.
    const switched = await makeClient(t, { name: 'Switched', oauth: ON });
    const c = await codes(switched);
    await t.db.updateTable('apps').set({ device_authorization_grant: 0 }).where('id', '=', switched.app.id).execute();
    const page = await new Browser(t.app).submit('/device', { user_code: c.user_code });
    expect(page.statusCode).toBe(400);
  });

  it('a blocked user cannot approve: the policy of the authorize path refuses them', async () => {
    const c = await codes(tv);
    const person = new Browser(t.app);
    const { email } = await person.register();
    const user = await t.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow();
    await t.db.insertInto('app_users').values({ app_id: tv.app.id, user_id: user.id, status: 'blocked', created_at: t.clock.now(), last_login_at: null, email, name: null, user_status: 'active', list_status: 'blocked' } as never).execute();
    const entered = await person.submit('/device', { user_code: c.user_code });
    const page = await person.get(String(entered.headers.location));
    expect(page.statusCode).toBe(400);
    t.clock.advance(5);
    expect((await poll(tv, c.device_code)).json().error).toBe('authorization_pending');
  });

  it('user-code guessing: wrong codes from one browser hit the limit (429), and no answer tells whether a code exists', async () => {
    const c = await codes(other);
    const guesser = new Browser(t.app);
    const statuses: number[] = [];
    const messages = new Set<string>();
    for (let i = 0; i < 6; i++) {
      const res = await guesser.submit('/device', { user_code: `BCDF-GH${'JKLMNP'[i]}Z` });
      statuses.push(res.statusCode);
      if (res.statusCode === 400) messages.add(/id="form-error"><p>([^<]*)</.exec(res.body)?.[1] ?? '');
    }
    expect(statuses).toEqual([400, 400, 400, 400, 400, 429]);
    expect(messages.size).toBe(1);
    // Once limited, even the right code is refused (a limit the right code passed would tell a guesser).
    const right = await guesser.submit('/device', { user_code: c.user_code });
    expect(right.statusCode).toBe(429);
    expect(right.headers['retry-after']).toBeDefined();

    // Fresh browsers from the same IP: the per-IP limit (20 in 10 minutes) stops them too.
    let limited = 0;
    for (let i = 0; i < 16; i++) {
      const res = await new Browser(t.app).submit('/device', { user_code: 'ZZZZ-ZZZZ' });
      if (res.statusCode === 429) limited++;
    }
    expect(limited).toBeGreaterThan(0);
    t.clock.advance(601);
  });

  it('the page never shows a code of another app than the one it names, and posting without CSRF changes nothing', async () => {
    const c = await codes(tv);
    const person = new Browser(t.app);
    await person.register();
    await person.get('/device');
    const forged = await person.post('/device', { user_code: c.user_code });
    expect(forged.statusCode).toBe(403);
    // A decision without an entered code is refused.
    const page = await person.get('/device');
    const blind = await person.post('/device/continue', { csrf: csrfOf(page.body), action: 'approve' });
    expect(blind.statusCode).toBe(400);
    t.clock.advance(5);
    expect((await poll(tv, c.device_code)).json().error).toBe('authorization_pending');
  });

  it('discovery names the endpoint and the grant type; no log line carries a code', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/.well-known/openid-configuration' })).json();
    expect(doc.device_authorization_endpoint).toBe(`${t.config.baseUrl}/oauth/device_authorization`);
    expect(doc.grant_types_supported).toContain(GRANT);
    const c = await codes(tv);
    await poll(tv, c.device_code);
    await new Browser(t.app).get(c.verification_uri_complete);
    const logs = t.logs.join('\n');
    expect(logs).not.toContain(c.device_code);
    expect(logs).not.toContain(c.user_code);
  });
});
