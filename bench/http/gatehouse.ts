import { createHash, randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { SERVER_START_ARGS } from '../../src/node-flags.js';
import { parallel, startServer, type ServerProcess } from './proc.js';

/**
 * Gatehouse side of `npm run bench -- http`: starting the production build, setting up a developer,
 * a confidential app and users through the public API, and minting pools of one-use authorization
 * codes and refresh tokens through the server's own flows (hosted sign-in once per user, then
 * `GET /oauth/authorize` with that browser session for each code, and `POST /oauth/token` to turn a
 * code into a refresh token).
 */

export const SECRET_KEY = 'bench-http-secret-key-0123456789abcdef-0123456789';
export const ADMIN_TOKEN = 'bench-http-admin-token-0123456789abcdef-0123456789';
/** Production refuses a non-https BASE_URL; nothing resolves this host, it is only the issuer and the hosted pages' origin. */
export const BASE_URL = 'https://gatehouse.bench.test';
export const REDIRECT_URI = 'https://bench.example/cb';
export const PKCE_VERIFIER = 'gatehouse-bench-verifier-0123456789abcdefghijklmnopqrstuvwxyz-AB';
export const PKCE_CHALLENGE = createHash('sha256').update(PKCE_VERIFIER).digest('base64url');

export interface GatehouseEnv {
  /** The checkout whose production build (dist/) runs. */
  root: string;
  /** What node is given before the entry (that build's own flags); SERVER_START_ARGS when not given. */
  startArgs?: readonly string[];
  databaseUrl: string;
  dataDir: string;
  /** WORKERS for the server (cluster workers sharing its port); the server's default when unset. */
  workers?: number;
}

export async function startGatehouse(
  env: GatehouseEnv,
  opts: { port: number; logFile: string; name: string; cpuProfDir?: string; env?: Record<string, string> },
): Promise<ServerProcess> {
  const nodeArgs = opts.cpuProfDir ? ['--cpu-prof', `--cpu-prof-dir=${opts.cpuProfDir}`] : [];
  return startServer({
    name: opts.name,
    command: process.execPath,
    args: [...(env.startArgs ?? SERVER_START_ARGS), ...nodeArgs, 'dist/src/server.js'],
    cwd: env.root,
    port: opts.port,
    logFile: opts.logFile,
    readyPath: '/healthz',
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      NODE_ENV: 'production',
      HOST: '127.0.0.1',
      PORT: String(opts.port),
      BASE_URL,
      DATABASE_URL: env.databaseUrl,
      DATA_DIR: env.dataDir,
      SECRET_KEY,
      ADMIN_TOKEN,
      // The per-IP limit on auth requests would otherwise throttle a benchmark from one address.
      IP_AUTH_PER_MINUTE: '1000000000',
      ...(env.workers !== undefined ? { WORKERS: String(env.workers) } : {}),
      ...opts.env,
    },
  });
}

export interface BenchUser {
  id: string;
  email: string;
  password: string;
  /** Browser session cookie (`name=value`) of a hosted sign-in, for minting codes. */
  cookie: string;
}

export interface GatehouseSetup {
  clientId: string;
  clientSecret: string;
  basic: string;
  users: BenchUser[];
}

async function call(url: string, init: RequestInit & { expect?: number[] } = {}): Promise<Response> {
  const res = await fetch(url, { redirect: 'manual', ...init });
  const expect = init.expect ?? [200];
  if (!expect.includes(res.status)) {
    const body = await res.text();
    throw new Error(`${init.method ?? 'GET'} ${url} → ${res.status} ${body.slice(0, 400)}`);
  }
  return res;
}

/** The cookies a browser would send after `res`: `jar` (a Cookie header) updated by its Set-Cookie lines. */
function cookieOf(res: Response, jar = ''): string {
  const cookies = new Map(jar ? jar.split('; ').map((c) => [c.slice(0, c.indexOf('=')), c] as const) : []);
  for (const line of res.headers.getSetCookie()) {
    const pair = line.split(';')[0]!;
    const name = pair.slice(0, pair.indexOf('='));
    if (/max-age=0|expires=thu, 01 jan 1970/i.test(line)) cookies.delete(name);
    else cookies.set(name, pair);
  }
  return [...cookies.values()].join('; ');
}

export const authorizeQuery = (clientId: string, scope: string, state = 'bench') =>
  new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT_URI,
    scope,
    state,
    code_challenge: PKCE_CHALLENGE,
    code_challenge_method: 'S256',
  }).toString();

/** Local URL for a location the server built on BASE_URL. */
const local = (server: string, location: string) => (location.startsWith(BASE_URL) ? server + location.slice(BASE_URL.length) : location.startsWith('/') ? server + location : location);

/**
 * A developer, one confidential app (Auth + Profile, client_secret_basic) and `userCount` users
 * registered through `/v1/auth/register` (which also records their consent to the default scopes),
 * each signed in once on the hosted login page to get a browser session for `/oauth/authorize`.
 */
export async function setupGatehouse(server: string, userCount: number): Promise<GatehouseSetup> {
  const dev = (await (
    await call(`${server}/v1/admin/developers`, {
      method: 'POST',
      headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ email: 'bench-dev@bench.test', name: 'Bench developer' }),
      expect: [201],
    })
  ).json()) as { api_key: string };
  const created = (await (
    await call(`${server}/v1/dev/apps`, {
      method: 'POST',
      headers: { authorization: `Bearer ${dev.api_key}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Bench app', redirect_uris: [REDIRECT_URI], type: 'confidential', features: { auth: true, profile: true } }),
      expect: [201],
    })
  ).json()) as { id: string; client_secret: string };
  const basic = `Basic ${Buffer.from(`${encodeURIComponent(created.id)}:${encodeURIComponent(created.client_secret)}`).toString('base64')}`;
  const tag = randomBytes(3).toString('hex');
  const users = await parallel(userCount, 4, async (i) => {
    const password = `Bench user ${i} pass ${tag} violin-harbour`;
    // A retried registration uses a new address: a failed answer may still have created the account.
    const { email, reg } = await withRetry('register', async (attempt) => {
      const email = `bench-user-${tag}-${i}${attempt > 1 ? `-${attempt}` : ''}@bench.test`;
      const res = await call(`${server}/v1/auth/register`, {
        method: 'POST',
        headers: { authorization: basic, 'content-type': 'application/json' },
        body: JSON.stringify({ email, password, name: `Bench User ${i}` }),
        expect: [201],
      });
      return { email, reg: (await res.json()) as { status: string; user: { id: string } } };
    });
    if (reg.status !== 'ok') throw new Error(`register of ${email}: status ${reg.status} (the app requires data the user lacks?)`);
    const cookie = await withRetry('hosted sign-in', () => hostedSignIn(server, created.id, email, password));
    return { id: reg.user.id, email, password, cookie };
  });
  return { clientId: created.id, clientSecret: created.client_secret, basic, users };
}

/** The hosted sign-in a browser does: authorize → /login form (CSRF) → POST → back to authorize. Returns the session cookie. */
async function hostedSignIn(server: string, clientId: string, email: string, password: string): Promise<string> {
  const start = await call(`${server}/oauth/authorize?${authorizeQuery(clientId, 'openid profile email')}`, { expect: [302, 303] });
  let cookie = cookieOf(start);
  const loginUrl = local(server, start.headers.get('location') ?? '');
  const page = await call(loginUrl, { headers: { cookie } });
  cookie = cookieOf(page, cookie);
  const html = await page.text();
  const csrf = /name="csrf"\s+value="([^"]+)"/.exec(html)?.[1] ?? /value="([^"]+)"\s+name="csrf"/.exec(html)?.[1];
  if (!csrf) throw new Error('no CSRF token on the hosted login page');
  const form = new URLSearchParams({ csrf, email, password, action: 'login' });
  const posted = await call(loginUrl, { method: 'POST', headers: { cookie, 'content-type': 'application/x-www-form-urlencoded' }, body: form.toString(), expect: [302, 303] });
  cookie = cookieOf(posted, cookie);
  // The flow resumes at /oauth/authorize and ends with a code: proof that the session can mint codes.
  const back = await call(local(server, posted.headers.get('location') ?? ''), { headers: { cookie }, expect: [302, 303] });
  if (!/[?&]code=/.test(back.headers.get('location') ?? '')) throw new Error(`hosted sign-in did not end with a code: ${back.headers.get('location')}`);
  return cookieOf(back, cookie);
}

/** One authorization code for `user` (scope as given), via `GET /oauth/authorize` with the user's browser session. */
export async function mintCode(server: string, setup: GatehouseSetup, user: BenchUser, scope: string): Promise<string> {
  const res = await call(`${server}/oauth/authorize?${authorizeQuery(setup.clientId, scope)}`, { headers: { cookie: user.cookie }, expect: [302] });
  const location = res.headers.get('location') ?? '';
  const code = new URL(location).searchParams.get('code');
  if (!code) throw new Error(`authorize did not answer a code: ${location.slice(0, 300)}`);
  return code;
}

export const codeBody = (code: string) =>
  new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT_URI, code_verifier: PKCE_VERIFIER }).toString();
export const refreshBody = (refreshToken: string) => new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken }).toString();

export interface TokenResponse {
  access_token: string;
  refresh_token: string;
  id_token?: string;
  scope: string;
}

export async function exchangeCode(server: string, setup: GatehouseSetup, code: string): Promise<TokenResponse> {
  const res = await call(`${server}/oauth/token`, {
    method: 'POST',
    headers: { authorization: setup.basic, 'content-type': 'application/x-www-form-urlencoded' },
    body: codeBody(code),
  });
  return (await res.json()) as TokenResponse;
}

export async function refreshOnce(server: string, setup: GatehouseSetup, refreshToken: string): Promise<TokenResponse> {
  const res = await call(`${server}/oauth/token`, {
    method: 'POST',
    headers: { authorization: setup.basic, 'content-type': 'application/x-www-form-urlencoded' },
    body: refreshBody(refreshToken),
  });
  return (await res.json()) as TokenResponse;
}

export interface MintStats {
  made: number;
  seconds: number;
  stoppedBy: 'count' | 'time';
  /** Mint requests that failed with a 5xx and were retried (they are not part of any measurement). */
  failures?: number;
  /** The first such failure (method, path and status), for the report. */
  firstFailure?: string;
  /** What the minting server logged as errors (from its log, by kind). */
  serverErrors?: string[];
}

/** `GET /oauth/authorize → 500` from one of `call`'s errors (no query string, no HTML body). */
function shortError(error: Error): string {
  const m = /^(\w+) https?:\/\/[^/]+(\/[^?\s]*)\S* → (\d{3})/.exec(error.message);
  return m ? `${m[1]} ${m[2]} → ${m[3]}` : error.message.replace(/\s+/g, ' ').slice(0, 120);
}

/** A request of ours answered with a server error (`call` throws these). */
const isServerError = (error: unknown) => error instanceof Error && / → 5\d\d /.test(error.message);

/** Setup steps (not measured): a 5xx is retried a few times, and said on stderr. */
export async function withRetry<T>(what: string, fn: (attempt: number) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await fn(attempt);
    } catch (error) {
      if (!isServerError(error) || attempt >= 5) throw error;
      console.error(`  (${what}: server error, retrying: ${shortError(error as Error)})`);
    }
  }
}

/**
 * Mints up to `count` items with `concurrency` requests in flight, but stops after `maxSeconds`
 * (codes live 60 s, and a pool is only useful when it can be used). Round-robin over the users.
 */
export async function mintPool(
  count: number,
  maxSeconds: number,
  concurrency: number,
  users: BenchUser[],
  one: (user: BenchUser) => Promise<string>,
): Promise<{ items: string[]; stats: MintStats }> {
  const started = Date.now();
  const deadline = started + maxSeconds * 1000;
  let timeUp = false;
  let failures = 0;
  let firstFailure: string | undefined;
  const items = await parallel(
    count,
    concurrency,
    async (i) => {
      // A server error while minting is retried (a few times) and counted: the pool is still made of
      // fresh one-use items, and the count is reported, since the same error may show in the runs.
      for (let attempt = 1; ; attempt++) {
        try {
          return await one(users[i % users.length]!);
        } catch (error) {
          if (!isServerError(error) || attempt >= 5) throw error;
          failures++;
          firstFailure ??= shortError(error as Error);
        }
      }
    },
    () => (timeUp ||= Date.now() > deadline),
  );
  return { items, stats: { made: items.length, seconds: (Date.now() - started) / 1000, stoppedBy: timeUp ? 'time' : 'count', failures, firstFailure } };
}

export const logPath = (dir: string, name: string) => join(dir, `${name}.log`);
