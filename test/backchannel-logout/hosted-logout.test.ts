import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { type LogoutReceiver, startLogoutReceiver, validateLogoutTokenOf } from '../helpers/logout-tokens.js';
import { authorizeAndGetCode, csrfOf, exchangeCode, makeClient, refresh, signedInWithTokens } from '../helpers/oauth-flows.js';

/**
 * The hosted sign-out (`POST /oauth/logout`, docs/guides/back-channel-logout.md): it ends the browser
 * session and every app sign-in made through it — both apps of this browser get a logout token whose
 * `sid` is the one their ID tokens carry (the same for both: one browser session) — and records
 * `user.signed_out` (so the webhook fires). Real database, no mocks.
 */

let t: TestApp;
let receiver: LogoutReceiver;
let base: string;

beforeAll(async () => {
  receiver = await startLogoutReceiver();
  receiver.answer = 204;
  base = receiver.base;
  t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000' } });
});

afterAll(async () => {
  await t?.close();
  await receiver?.close();
});

describe('hosted sign-out', () => {
  it('logs both apps of the browser out with the ID tokens’ sid, revokes their grants and records user.signed_out', async () => {
    const appA = await makeClient(t, { backchannelLogout: { uri: `${base}/a`, sessionRequired: true } });
    const appB = await makeClient(t, { backchannelLogout: { uri: `${base}/b`, sessionRequired: true } });
    const { browser, tokens } = await signedInWithTokens(t, appA);
    const { code, verifier, redirectUri } = await authorizeAndGetCode(browser, appB);
    const tokensB = (await exchangeCode(t.app, appB, code, verifier, redirectUri)).json();
    const sid = decodeJwt(tokens.id_token!).sid as string;
    expect(sid).toMatch(/^sid_/);
    expect(decodeJwt(tokensB.id_token).sid).toBe(sid);
    const userId = decodeJwt(tokens.id_token!).sub!;

    const page = await browser.get(`/oauth/logout?client_id=${appA.app.id}`);
    const done = await browser.post('/oauth/logout', { csrf: csrfOf(page.body), action: 'logout', client_id: appA.app.id });
    expect(done.statusCode).toBe(200);

    // The background deliverer may hold a row's lease while this drain runs: wait for both to arrive.
    await t.app.logoutDeliverer.drain();
    const received = receiver.received;
    for (let i = 0; i < 100 && received.filter((r) => r.path === '/a' || r.path === '/b').length < 2; i++) await new Promise((r) => setTimeout(r, 50));
    for (const [path, client] of [['/a', appA], ['/b', appB]] as const) {
      const got = received.filter((r) => r.path === path);
      expect(got, path).toHaveLength(1);
      expect(await validateLogoutTokenOf(t, got[0]!.token, client.app.id)).toMatchObject({ sub: userId, sid });
    }
    // The apps' sign-ins through this browser ended with it.
    expect((await refresh(t.app, appA, tokens.refresh_token)).statusCode).toBe(400);
    expect((await refresh(t.app, appB, tokensB.refresh_token)).statusCode).toBe(400);
    const signedOut = await t.db.selectFrom('events').select(['app_id']).where('type', '=', 'user.signed_out').where('user_id', '=', userId).orderBy('app_id').execute();
    expect(signedOut.map((e) => e.app_id).sort()).toEqual([appA.app.id, appB.app.id].sort());
  });
});
