import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeUser } from '../helpers/factories.js';
import { authorizeAndGetCode, authorizeUrl, Browser, makeClient, relative, type TestClient } from '../helpers/oauth-flows.js';

/**
 * An app's name, logo and links appear only on the pages of its own sign-in flow: a cross-site
 * `GET /oauth/authorize?client_id=A` (a drive-by: an image, an iframe, a link) stores A's request in
 * the victim's browser session, but the pages the victim later opens on their own stay Gatehouse's,
 * and `/account?client_id=A` builds no "Back to A" link for anyone who is not A's user.
 */
describe('branding follows the flow that chose it', () => {
  let t: TestApp;
  let evil: TestClient;
  const LOGO = 'https://tracker.example/pixel.svg';
  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000' } });
    evil = await makeClient(t, { name: 'Totally Gatehouse Support', redirectUris: ['https://evil.example/cb'], branding: { logoUrl: LOGO, logoUrlDark: null, accentColor: '#ff0000' } });
  });
  afterAll(async () => {
    await t?.close();
  });

  const branded = (html: string) => html.includes('Totally Gatehouse Support') || html.includes(LOGO) || html.includes(`/assets/brand/${evil.app.id}.css`);

  it('a drive-by authorization request brands none of the pages the victim opens afterwards', async () => {
    const victim = new Browser(t.app);
    const driveBy = await victim.get(authorizeUrl(evil).url);
    const flowPage = relative(String(driveBy.headers.location));
    expect(flowPage).toMatch(/^\/login\?client_id=/);
    for (const path of ['/login', '/account', '/password/forgot', '/magic-link/request', '/register']) {
      const page = await victim.get(path);
      expect(page.statusCode, path).toBe(200);
      expect(branded(page.body), path).toBe(false);
    }
    // Positive control: the flow's own page, which names its client, is the app's.
    expect(branded((await victim.get(flowPage)).body)).toBe(true);
  });

  it('/account?client_id=A links back to A only for A\'s own signed-in users', async () => {
    const back = (html: string) => /data-back-to-app/.test(html);
    const anonymous = await new Browser(t.app).get(`/account?client_id=${evil.app.id}`);
    expect(back(anonymous.body)).toBe(false);
    expect(branded(anonymous.body)).toBe(false);

    const stranger = await makeUser(t.app);
    const browser = new Browser(t.app);
    await browser.submit('/account', { email: stranger.email, password: stranger.password, action: 'login' });
    expect(back((await browser.get(`/account?client_id=${evil.app.id}`)).body)).toBe(false);

    // Once the user has signed in to A, the account page opened for A offers the way back.
    await authorizeAndGetCode(browser, evil);
    const member = await browser.get(`/account?client_id=${evil.app.id}`);
    expect(member.body).toContain('<a class="back" href="https://evil.example/" data-back-to-app>');
  });
});
