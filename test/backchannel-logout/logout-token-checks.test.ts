import { exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from 'jose';
import { beforeAll, describe, expect, it } from 'vitest';
import { BACKCHANNEL_LOGOUT_EVENT as OUR_EVENT } from '../../src/backchannel-logout/index.js';
import { BACKCHANNEL_LOGOUT_EVENT, validateLogoutToken } from '../helpers/logout-tokens.js';

/**
 * The relying party's checks of a logout token (test/helpers/logout-tokens.ts, OpenID Connect
 * Back-Channel Logout 1.0 §2.6; docs/guides/back-channel-logout.md) refuse each defect on its own: the
 * tests that accept our logout tokens with them could otherwise pass whatever was sent.
 */

const ISSUER = 'https://op.example';
const AUDIENCE = 'app_receiver';
const NOW = 1_800_000_000;
let jwks: { keys: JWK[] };
let sign: (claims: JWTPayload, header?: { typ?: string | null; alg?: string; key?: 'other' }) => Promise<string>;

beforeAll(async () => {
  const published = await generateKeyPair('RS256');
  const other = await generateKeyPair('RS256');
  const es = await generateKeyPair('ES256');
  jwks = { keys: [{ ...(await exportJWK(published.publicKey)), kid: 'k1', alg: 'RS256', use: 'sig' }, { ...(await exportJWK(es.publicKey)), kid: 'k2', alg: 'ES256', use: 'sig' }] };
  sign = (claims, header = {}) => {
    const alg = header.alg ?? 'RS256';
    const typ = header.typ === null ? {} : { typ: header.typ ?? 'logout+jwt' };
    const key = alg === 'ES256' ? es.privateKey : header.key === 'other' ? other.privateKey : published.privateKey;
    return new SignJWT(claims).setProtectedHeader({ alg, kid: alg === 'ES256' ? 'k2' : 'k1', ...typ }).sign(key);
  };
});

const GOOD: JWTPayload = { iss: ISSUER, aud: AUDIENCE, iat: NOW - 10, exp: NOW + 110, jti: 'lgo_1', sub: 'usr_1', sid: 'sid_1', events: { [BACKCHANNEL_LOGOUT_EVENT]: {} } };
const check = (token: string, extra: { seen?: Set<string> } = {}) => validateLogoutToken(token, { jwks, issuer: ISSUER, audience: AUDIENCE, now: NOW, ...extra });
const without = (claim: string): JWTPayload => Object.fromEntries(Object.entries(GOOD).filter(([k]) => k !== claim));

describe('logout token checks (§2.6)', () => {
  it('accept a well-formed token and return its claims; the event URI is the one the server sends', async () => {
    expect(await check(await sign(GOOD))).toMatchObject({ sub: 'usr_1', sid: 'sid_1', jti: 'lgo_1' });
    expect(await check(await sign(without('sid')))).toMatchObject({ sub: 'usr_1' });
    expect(await check(await sign(without('sub')))).toMatchObject({ sid: 'sid_1' });
    expect(OUR_EVENT).toBe(BACKCHANNEL_LOGOUT_EVENT);
  });

  const defects: Array<[string, () => Promise<string>]> = [
    ['signed by a key the OP does not publish', () => sign(GOOD, { key: 'other' })],
    ['signed with an algorithm the app does not use for ID tokens', () => sign(GOOD, { alg: 'ES256' })],
    ['unsigned (alg none)', async () => `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'logout+jwt' })).toString('base64url')}.${Buffer.from(JSON.stringify(GOOD)).toString('base64url')}.`],
    ['encrypted (a JWE)', async () => 'eyJhbGciOiJSU0EtT0FFUCJ9.a.b.c.d'],
    ['another issuer', () => sign({ ...GOOD, iss: 'https://evil.example' })],
    ['another audience', () => sign({ ...GOOD, aud: 'app_other' })],
    ['no iat', () => sign(without('iat'))],
    ['issued too long ago', () => sign({ ...GOOD, iat: NOW - 3600, exp: NOW + 60 })],
    ['expired', () => sign({ ...GOOD, iat: NOW - 200, exp: NOW - 80 })],
    ['no exp', () => sign(without('exp'))],
    ['no jti', () => sign(without('jti'))],
    ['no typ (an ID token passed off)', () => sign(GOOD, { typ: null })],
    ['typ JWT', () => sign(GOOD, { typ: 'JWT' })],
    ['neither sub nor sid', () => sign(Object.fromEntries(Object.entries(GOOD).filter(([k]) => k !== 'sub' && k !== 'sid')))],
    ['no events', () => sign(without('events'))],
    ['events without the back-channel logout member', () => sign({ ...GOOD, events: { 'http://schemas.openid.net/event/other': {} } })],
    ['the event member not a JSON object', () => sign({ ...GOOD, events: { [BACKCHANNEL_LOGOUT_EVENT]: true } })],
    ['a nonce', () => sign({ ...GOOD, nonce: 'n-1' })],
  ];
  for (const [what, make] of defects) {
    it(`refuse a token with ${what}`, async () => {
      await expect(check(await make())).rejects.toThrow();
    });
  }

  it('refuse a jti received before when the receiver keeps them', async () => {
    const seen = new Set<string>();
    const token = await sign(GOOD);
    await check(token, { seen });
    await expect(check(token, { seen })).rejects.toThrow(/jti already received/);
  });
});
