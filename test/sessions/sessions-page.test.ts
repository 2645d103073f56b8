import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { Browser, authorizeAndGetCode, csrfOf, exchangeCode, makeClient, refresh, type TestClient, userinfo } from '../helpers/oauth-flows.js';

/**
 * The "Where you're signed in" section of /account (docs/account/sessions.md): browser sessions and
 * app grants with device, network area and times, sign-out per entry and everywhere else, as CSRF
 * protected POST forms confirmed by a flash message; English and Simplified Chinese.
 */

const MAC_CHROME = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';
const WIN_FIREFOX = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0';

class Device extends Browser {
  constructor(
    t: TestApp,
    private readonly headers: Record<string, string>,
  ) {
    super(t.app);
  }
  override get(url: string, headers: Record<string, string> = {}) {
    return super.get(url, { ...this.headers, ...headers });
  }
  override post(url: string, form: Record<string, string>, headers: Record<string, string> = {}) {
    return super.post(url, form, { ...this.headers, ...headers });
  }
}

let t: TestApp;
let notes: TestClient;

beforeAll(async () => {
  t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000', TRUST_PROXY: '127.0.0.1' } });
  notes = await makeClient(t, { name: 'Notes' });
});
afterAll(async () => t?.close());

async function setUp() {
  const laptop = new Device(t, { 'user-agent': MAC_CHROME, 'x-forwarded-for': '203.0.113.7' });
  const { email } = await laptop.register();
  const desktop = new Device(t, { 'user-agent': WIN_FIREFOX, 'x-forwarded-for': '198.51.100.23' });
  expect((await desktop.login(email)).statusCode).toBe(303);
  const { code, verifier, redirectUri } = await authorizeAndGetCode(desktop, notes);
  const tokens = (await exchangeCode(t.app, notes, code, verifier, redirectUri)).json() as { access_token: string; refresh_token: string };
  const user = await t.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow();
  return { laptop, desktop, tokens, userId: user.id };
}

/** The `<form>` of one entry, by its device or app text. */
function entryForm(html: string, containing: string): { id: string; html: string } {
  const forms = [...html.matchAll(/<form method="post" action="[^"]+" class="item" data-session="(ses_[^"]+)"[^>]*>([\s\S]*?)<\/form>/g)];
  const found = forms.find((m) => m[2]!.includes(containing));
  if (!found) throw new Error(`no entry with ${containing}`);
  return { id: found[1]!, html: found[0] };
}

const section = (html: string) => html.slice(html.indexOf('<section class="section" aria-labelledby="sessions">'), html.indexOf('aria-labelledby="your-data"'));

describe('/account: where you are signed in', () => {
  it('lists both browsers (this one marked) and the app, with device, network area and first/last seen; never the full address', async () => {
    const { laptop } = await setUp();
    const page = await laptop.get('/account');
    expect(page.statusCode).toBe(200);
    const html = section(page.body);
    const mine = entryForm(html, 'Chrome on macOS');
    expect(mine.html).toContain('This browser');
    expect(mine.html).toContain('data-current');
    expect(mine.html).toContain('Network 203.0.113.x');
    expect(mine.html).toMatch(/First seen [A-Z][a-z]{2} \d+, \d{4}/);
    expect(mine.html).toContain('Last seen');
    const other = entryForm(html, 'Firefox on Windows');
    expect(other.html).not.toContain('This browser');
    expect(other.html).toContain('Network 198.51.100.x');
    const app = entryForm(html, 'data-app-name>Notes<');
    expect(app.html).toContain('Firefox on Windows');
    expect(html).toContain('Sign out everywhere else');
    expect(page.body).not.toContain('203.0.113.7');
    expect(page.body).not.toContain('198.51.100.23');
    expect(page.body).not.toContain(laptop.sessionCookie()!);
  });

  it('signs out another browser: confirmed once, that browser is signed out, this one is not', async () => {
    const { laptop, desktop } = await setUp();
    const page = await laptop.get('/account');
    const other = entryForm(section(page.body), 'Firefox on Windows');
    const res = await laptop.post('/account/sessions', { csrf: csrfOf(page.body), action: 'revoke', session_id: other.id });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/account?done=session_revoked#sessions');
    const after = await laptop.get('/account?done=session_revoked');
    expect(after.body).toContain('Signed out of Firefox on Windows.');
    expect(section(after.body)).not.toContain('Firefox on Windows</strong>');
    // Shown once: a reload says nothing.
    expect((await laptop.get('/account?done=session_revoked')).body).not.toContain('Signed out of Firefox');
    expect((await desktop.get('/account')).body).not.toContain('data-field="email"');
    expect((await laptop.get('/account')).body).toContain('data-field="email"');
  });

  it("signs out of an app's grant: its refresh token and access token stop working", async () => {
    const { laptop, tokens } = await setUp();
    const page = await laptop.get('/account');
    const app = entryForm(section(page.body), 'data-app-name>Notes<');
    const res = await laptop.post('/account/sessions', { csrf: csrfOf(page.body), action: 'revoke', session_id: app.id });
    expect(res.statusCode).toBe(303);
    expect((await laptop.get('/account?done=session_revoked')).body).toContain('Signed out of Notes.');
    expect((await userinfo(t.app, tokens.access_token)).statusCode).toBe(401);
    expect((await refresh(t.app, notes, tokens.refresh_token)).json()).toMatchObject({ error: 'invalid_grant' });
  });

  it('signs out everywhere else: every other browser and every app, this browser stays', async () => {
    const { laptop, desktop, tokens, userId } = await setUp();
    const page = await laptop.get('/account');
    const res = await laptop.post('/account/sessions', { csrf: csrfOf(page.body), action: 'others' });
    expect(res.statusCode).toBe(303);
    const after = await laptop.get('/account?done=sessions_others');
    expect(after.body).toContain('Signed out everywhere else.');
    const html = section(after.body);
    expect(html).toContain('This browser');
    expect(html).not.toContain('Firefox on Windows');
    expect(html).toContain('You are not signed in to any app.');
    expect(html).not.toContain('data-sign-out-others');
    expect((await desktop.get('/account')).body).not.toContain('data-field="email"');
    expect((await userinfo(t.app, tokens.access_token)).statusCode).toBe(401);
    const events = await t.db.selectFrom('events').select(['data']).where('user_id', '=', userId).where('type', '=', 'session.revoked').execute();
    expect(events.map((e) => JSON.parse(e.data)).sort((a, b) => a.kind.localeCompare(b.kind))).toEqual([
      { kind: 'browser', app: null },
      { kind: 'grant', app: notes.app.id },
    ]);
  });

  it('without the CSRF token nothing is signed out (403); an unknown id says it had already ended', async () => {
    const { laptop, desktop } = await setUp();
    const page = await laptop.get('/account');
    const other = entryForm(section(page.body), 'Firefox on Windows');
    expect((await laptop.post('/account/sessions', { action: 'revoke', session_id: other.id })).statusCode).toBe(403);
    expect((await laptop.post('/account/sessions', { action: 'others' })).statusCode).toBe(403);
    expect((await desktop.get('/account')).body).toContain('data-field="email"');
    const gone = await laptop.post('/account/sessions', { csrf: csrfOf(page.body), action: 'revoke', session_id: 'ses_AAAAAAAAAAAAAAAAAAAAAAAAAAA' });
    expect(gone.headers.location).toBe('/account?done=session_gone#sessions');
    expect((await laptop.get('/account?done=session_gone')).body).toContain('That session had already ended.');
    // This browser is not signed out through the per-entry form (its own sign-out does that).
    const mine = entryForm(section(page.body), 'Chrome on macOS');
    expect(mine.html).toContain('action="/account"');
    expect(mine.html).toContain('value="logout"');
  });

  it('speaks Simplified Chinese', async () => {
    const { laptop } = await setUp();
    const page = await laptop.get('/account?ui_locales=zh-CN');
    const html = section(page.body);
    expect(html).toContain('你在哪里登录');
    expect(html).toContain('macOS 上的 Chrome');
    expect(html).toContain('当前浏览器');
    expect(html).toContain('网络 203.0.113.x');
    expect(html).toContain('退出其他所有登录');
    expect(html).toMatch(/首次出现 \d{4}年/);
  });
});
