import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { createHash, randomBytes } from 'node:crypto';
import { newSecret } from '../../src/shared/ids.js';
import type { App } from '../../src/storage/repos/apps.js';
import type { TestApp } from './app.js';
import { makeApp } from './factories.js';

/**
 * OAuth flow helpers (STYLE.md "Tests"): app factory, PKCE pairs, a cookie jar that drives the hosted
 * forms through `app.inject`, and `authorizeAndGetCode` / `exchangeCode` / `refresh`.
 */

export const PASSWORD = 'correct horse battery staple 42';

export interface TestClient {
  app: App;
  /** Plain client secret (confidential apps). */
  secret?: string;
}

/** A developer-owned app (factories.ts `makeApp`) with OAuth-test defaults: public, Auth on, one https redirect URI. */
export async function makeClient(t: TestApp, overrides: Partial<App> = {}): Promise<TestClient> {
  const type = overrides.type ?? 'public';
  const secret = type === 'confidential' ? newSecret('cs') : undefined;
  const now = t.clock.now();
  const { clientSecret: _shownOnce, ...app } = await makeApp(t.db, {
    name: 'Test App',
    redirectUris: ['https://a.example/cb/'],
    createdAt: now,
    updatedAt: now,
    ...overrides,
    type,
    clientSecret: secret,
  });
  return { app, secret };
}

export function pkcePair(): { verifier: string; challenge: string } {
  const verifier = randomBytes(48).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

export const uniqueEmail = (prefix = 'user'): string => `${prefix}.${randomBytes(5).toString('hex')}@example.com`;

/** Cookies of one browser, for `app.inject`. */
export class CookieJar {
  readonly cookies = new Map<string, string>();
  header(): Record<string, string> {
    return this.cookies.size ? { cookie: [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ') } : {};
  }
  store(res: LightMyRequestResponse): void {
    for (const c of res.cookies as Array<{ name: string; value: string; maxAge?: number; expires?: Date }>) {
      if (c.value === '' || c.maxAge === 0 || (c.expires && c.expires.getTime() < Date.now())) this.cookies.delete(c.name);
      else this.cookies.set(c.name, c.value);
    }
  }
}

/** A browser: inject with the jar's cookies, remembering what the server sets. */
export class Browser {
  readonly jar = new CookieJar();
  constructor(readonly app: FastifyInstance) {}

  async get(url: string, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    const res = await this.app.inject({ method: 'GET', url: relative(url), headers: { ...this.jar.header(), ...headers } });
    this.jar.store(res);
    return res;
  }

  async post(url: string, form: Record<string, string>, headers: Record<string, string> = {}): Promise<LightMyRequestResponse> {
    const res = await this.app.inject({
      method: 'POST',
      url: relative(url),
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...this.jar.header(), ...headers },
      payload: new URLSearchParams(form).toString(),
    });
    this.jar.store(res);
    return res;
  }

  /** GETs a form page and POSTs it back with its CSRF token plus `form`. */
  async submit(url: string, form: Record<string, string>): Promise<LightMyRequestResponse> {
    const page = await this.get(url);
    if (page.statusCode !== 200) throw new Error(`GET ${url} → ${page.statusCode}: ${page.body.slice(0, 300)}`);
    return this.post(url, { csrf: csrfOf(page.body), ...form });
  }

  async register(email = uniqueEmail(), password = PASSWORD, name = 'Alice Example'): Promise<{ email: string; password: string }> {
    const res = await this.submit('/register', { email, password, name, action: 'register' });
    if (res.statusCode !== 303) throw new Error(`register → ${res.statusCode}: ${res.body.slice(0, 500)}`);
    return { email, password };
  }

  async login(email: string, password = PASSWORD): Promise<LightMyRequestResponse> {
    return this.submit('/login', { email, password, action: 'login' });
  }

  /** The browser session cookie value. */
  sessionCookie(): string | undefined {
    return this.jar.cookies.get('gh_sid') ?? this.jar.cookies.get('__Host-gh_sid');
  }
}

/** Strips the origin of an absolute URL (inject takes paths). */
export function relative(url: string): string {
  if (url.startsWith('/')) return url;
  const u = new URL(url);
  return `${u.pathname}${u.search}`;
}

export function csrfOf(html: string): string {
  const m = /name="csrf" value="([^"]+)"/.exec(html);
  if (!m) throw new Error(`no csrf field in page: ${html.slice(0, 300)}`);
  return m[1]!;
}

/**
 * Follows an authorization URL in a signed-in `browser` (allowing consent when asked) to the redirect
 * that leaves for `callback`, and returns that URL: for real clients that build the URL themselves.
 */
export async function followToCallback(browser: Browser, url: string, callback: string): Promise<URL> {
  let res = await browser.get(relative(url));
  for (let i = 0; i < 6; i++) {
    const location = String(res.headers.location ?? '');
    if (location.startsWith(callback)) return new URL(location);
    const path = relative(location);
    if (path.startsWith('/consent')) {
      const allowed = await browser.submit(path, { action: 'allow' });
      res = await browser.get(String(allowed.headers.location));
    } else if (path.startsWith('/oauth/authorize')) res = await browser.get(path);
    else throw new Error(`authorize stopped at ${res.statusCode} ${location} ${res.body.slice(0, 300)}`);
  }
  throw new Error('authorize did not reach the callback');
}

export interface AuthorizeOptions {
  redirectUri?: string;
  scope?: string;
  state?: string;
  pkce?: { verifier: string; challenge: string } | null;
  extra?: Record<string, string>;
}

export function authorizeUrl(client: TestClient, options: AuthorizeOptions = {}): { url: string; verifier?: string } {
  const pkce = options.pkce === undefined ? pkcePair() : options.pkce;
  const q = new URLSearchParams({
    response_type: 'code',
    client_id: client.app.id,
    redirect_uri: options.redirectUri ?? client.app.redirectUris[0]!,
    state: options.state ?? 'st1',
    ...(options.scope !== undefined ? { scope: options.scope } : { scope: 'openid profile email' }),
    ...(pkce ? { code_challenge: pkce.challenge, code_challenge_method: 'S256' } : {}),
    ...(options.extra ?? {}),
  });
  return { url: `/oauth/authorize?${q.toString()}`, verifier: pkce?.verifier };
}

/**
 * Runs /oauth/authorize for a signed-in browser, allowing consent when asked, and returns the
 * code from the final redirect (throws when the flow ends anywhere else).
 */
export async function authorizeAndGetCode(
  browser: Browser,
  client: TestClient,
  options: AuthorizeOptions = {},
): Promise<{ code: string; verifier?: string; location: string; redirectUri: string }> {
  const { url, verifier } = authorizeUrl(client, options);
  const redirectUri = options.redirectUri ?? client.app.redirectUris[0]!;
  let res = await browser.get(url);
  for (let i = 0; i < 5 && res.statusCode >= 300 && res.statusCode < 400; i++) {
    const location = String(res.headers.location);
    if (location.startsWith(redirectUri)) {
      const code = new URL(location).searchParams.get('code');
      if (!code) throw new Error(`redirect without code: ${location}`);
      return { code, verifier, location, redirectUri };
    }
    const path = relative(location);
    if (path.startsWith('/consent')) {
      const allowed = await browser.submit(path, { action: 'allow' });
      res = await browser.get(String(allowed.headers.location));
    } else if (path.startsWith('/oauth/authorize')) {
      res = await browser.get(path);
    } else {
      throw new Error(`authorize flow stopped at ${location}`);
    }
  }
  throw new Error(`authorize flow ended with ${res.statusCode}: ${res.body.slice(0, 300)}`);
}

export function tokenRequest(
  app: FastifyInstance,
  form: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return app.inject({
    method: 'POST',
    url: '/oauth/token',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    payload: new URLSearchParams(form).toString(),
  });
}

export function exchangeCode(
  app: FastifyInstance,
  client: TestClient,
  code: string,
  verifier: string | undefined,
  redirectUri = client.app.redirectUris[0]!,
  extra: Record<string, string> = {},
): Promise<LightMyRequestResponse> {
  return tokenRequest(app, {
    grant_type: 'authorization_code',
    code,
    redirect_uri: redirectUri,
    client_id: client.app.id,
    ...(verifier !== undefined ? { code_verifier: verifier } : {}),
    ...(client.secret ? { client_secret: client.secret } : {}),
    ...extra,
  });
}

export function refresh(app: FastifyInstance, client: TestClient, refreshToken: string, extra: Record<string, string> = {}): Promise<LightMyRequestResponse> {
  return tokenRequest(app, {
    grant_type: 'refresh_token',
    refresh_token: refreshToken,
    client_id: client.app.id,
    ...(client.secret ? { client_secret: client.secret } : {}),
    ...extra,
  });
}

/** A signed-in browser (fresh registration) with tokens for `client`. */
export async function signedInWithTokens(t: TestApp, client: TestClient, options: AuthorizeOptions = {}) {
  const browser = new Browser(t.app);
  const user = await browser.register();
  const { code, verifier, redirectUri } = await authorizeAndGetCode(browser, client, options);
  const res = await exchangeCode(t.app, client, code, verifier, redirectUri);
  if (res.statusCode !== 200) throw new Error(`token exchange → ${res.statusCode}: ${res.body}`);
  const tokens = res.json() as { access_token: string; refresh_token: string; id_token?: string; scope: string; expires_in: number };
  return { browser, user, tokens };
}

export const userinfo = (app: FastifyInstance, accessToken: string) =>
  app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${accessToken}` } });
