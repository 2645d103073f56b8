import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createLocalJWKSet, type JSONWebKeySet, jwtVerify, type JWTPayload } from 'jose';
import type { TestApp } from './app.js';

/**
 * What a relying party does with a logout token it receives: the validation steps of OpenID Connect
 * Back-Channel Logout 1.0 §2.6 (docs/guides/back-channel-logout.md), with jose. No installed library
 * offers them: `openid-client` 6 and `oauth4webapi` 3 have no logout-token API (openid-client issue
 * #225 was declined), and `oidc-provider` only issues logout tokens. So every test that receives one
 * validates it here, and test/backchannel-logout/logout-token-checks.test.ts shows each step refuses.
 */

export const BACKCHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';

export interface LogoutTokenExpectations {
  /** The OP's published keys (`/oauth/jwks`). */
  jwks: JSONWebKeySet;
  issuer: string;
  /** The receiving app's client_id. */
  audience: string;
  /** "Now" in epoch seconds (the injected clock the OP signs with). */
  now: number;
  /** The algorithms the app expects its ID tokens signed with (§2.6 step 2: as for ID tokens). */
  algorithms?: string[];
  /** A token issued longer ago than this is refused (§2.6 step 3: `iat` "recent"). */
  maxAgeSeconds?: number;
  /** `jti`s already received: a repeat is refused and a new one recorded (§2.6, optional replay check). */
  seen?: Set<string>;
}

export type LogoutClaims = JWTPayload & { jti: string; iat: number; exp: number; sub?: string; sid?: string };

/** Validates `token` as §2.6 says and returns its claims; throws (naming the step) when any check fails. */
export async function validateLogoutToken(token: string, expected: LogoutTokenExpectations): Promise<LogoutClaims> {
  // Step 1: a JWE (five parts) would need the ID-token encryption our apps never register.
  if (token.split('.').length !== 3) throw new Error('logout token: not a signed JWT (JWE or malformed)');
  // Steps 2–3: signature with the OP's keys and an ID-token algorithm, `iss`, `aud`, `iat` recent, `exp`, explicit `typ`.
  const { payload } = await jwtVerify(token, createLocalJWKSet(expected.jwks), {
    issuer: expected.issuer,
    audience: expected.audience,
    algorithms: expected.algorithms ?? ['RS256'],
    typ: 'logout+jwt',
    currentDate: new Date(expected.now * 1000),
    maxTokenAge: expected.maxAgeSeconds ?? 300,
    requiredClaims: ['iss', 'aud', 'iat', 'exp', 'jti'],
  });
  // Step 4: it names whom to sign out.
  if (typeof payload.sub !== 'string' && typeof payload.sid !== 'string') throw new Error('logout token: neither sub nor sid');
  // Step 5: the back-channel logout event, whose value is a JSON object.
  const events = payload.events;
  if (!events || typeof events !== 'object' || Array.isArray(events)) throw new Error('logout token: no events object');
  const event = (events as Record<string, unknown>)[BACKCHANNEL_LOGOUT_EVENT];
  if (!event || typeof event !== 'object' || Array.isArray(event)) throw new Error('logout token: no back-channel logout event');
  // Step 6: never a nonce (so an ID token cannot pass for a logout token).
  if ('nonce' in payload) throw new Error('logout token: carries a nonce');
  // Step 7 (optional): a token received before is not acted on twice.
  if (expected.seen) {
    if (expected.seen.has(payload.jti!)) throw new Error('logout token: jti already received');
    expected.seen.add(payload.jti!);
  }
  return payload as LogoutClaims;
}

/** §2.6 against a test app: its JWKS, its issuer and its clock. */
export async function validateLogoutTokenOf(t: TestApp, token: string, audience: string): Promise<LogoutClaims> {
  const jwks = (await t.app.inject({ url: '/oauth/jwks' })).json() as JSONWebKeySet;
  return validateLogoutToken(token, { jwks, issuer: t.config.baseUrl, audience, now: t.clock.now() });
}

export interface ReceivedLogout {
  path: string;
  contentType: string | undefined;
  /** The `logout_token` form parameter ('' when missing). */
  token: string;
}

export interface LogoutReceiver {
  /** `http://127.0.0.1:<port>`: an app's URI is this plus a path of the test's choosing. */
  base: string;
  received: ReceivedLogout[];
  /** The status the next requests are answered with (200 by default). */
  answer: number;
  close(): Promise<void>;
}

/** A loopback back-channel logout endpoint (§2.5: a form-encoded POST) recording what arrives. */
export async function startLogoutReceiver(): Promise<LogoutReceiver> {
  const receiver: LogoutReceiver = { base: '', received: [], answer: 200, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString('utf8')));
    req.on('end', () => {
      receiver.received.push({ path: req.url ?? '', contentType: req.headers['content-type'], token: new URLSearchParams(body).get('logout_token') ?? '' });
      res.statusCode = receiver.answer;
      res.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  receiver.base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  receiver.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  return receiver;
}
