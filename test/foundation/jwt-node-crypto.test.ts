import { createPublicKey, generateKeyPairSync, type KeyObject, sign } from 'node:crypto';
import { errors, importJWK, jwtVerify, SignJWT, type JWTPayload } from 'jose';
import { describe, expect, it } from 'vitest';
import { CheckedSignatures, signEs256, signingInput, signRs256, verifyEs256 } from '../../src/plugins/jwt-node-crypto.js';

// The node:crypto path for our own JWTs (src/plugins/jwt-node-crypto.ts). ES256 access tokens and
// session JWTs: interchangeable with jose in both directions, and every malformed, forged or out-of-time
// token is a jose error (callers treat any JOSEError as "invalid"). RS256 ID tokens: jose verifies them.

const ISS = 'https://gatehouse.test';
const NOW = 1_800_000_000;
const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const other = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const b64 = (value: unknown) => Buffer.from(typeof value === 'string' ? value : JSON.stringify(value)).toString('base64url');

/** A token with any header and payload, signed with `key` (or carrying `signature` as given). */
function craft(header: object, payload: object, key: KeyObject = privateKey, signature?: string): string {
  const input = `${b64(header)}.${b64(payload)}`;
  return `${input}.${signature ?? sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`;
}

const claims = (extra: Record<string, unknown> = {}): JWTPayload => ({ sub: 'usr_1', iss: ISS, iat: NOW, exp: NOW + 300, ...extra });
const header = (extra: Record<string, unknown> = {}) => ({ alg: 'ES256', typ: 'at+jwt', kid: 'k1', ...extra });
const check = (token: string, extra: Partial<Parameters<typeof verifyEs256>[1]> = {}, checked?: CheckedSignatures) =>
  verifyEs256(token, { keyFor: (kid) => (kid === 'k1' ? publicKey : undefined), issuer: ISS, typ: 'at+jwt', now: NOW, tolerance: 30, ...extra }, checked);

describe('ES256 through node:crypto', () => {
  it('verifies what it signed, and jose agrees in both directions', async () => {
    const token = signEs256(signingInput('ES256', { kid: 'k1', typ: 'at+jwt' }, claims({ scope: 'openid' })), privateKey);
    expect(await check(token)).toMatchObject({ sub: 'usr_1', scope: 'openid' });

    const joseKey = await importJWK({ ...publicKey.export({ format: 'jwk' }), alg: 'ES256' }, 'ES256');
    const { payload, protectedHeader } = await jwtVerify(token, joseKey, { issuer: ISS, typ: 'at+jwt', currentDate: new Date(NOW * 1000) });
    expect(payload.sub).toBe('usr_1');
    expect(protectedHeader).toEqual({ alg: 'ES256', typ: 'at+jwt', kid: 'k1' });

    const joseSigned = await new SignJWT(claims()).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: 'k1' }).sign(privateKey);
    expect((await check(joseSigned)).sub).toBe('usr_1');
  });

  const refused: Array<[string, () => string, Partial<Parameters<typeof verifyEs256>[1]>?]> = [
    ['a changed payload', () => { const [h, , s] = craft(header(), claims()).split('.'); return `${h}.${b64(claims({ sub: 'usr_2' }))}.${s}`; }],
    ['a signature by another key', () => craft(header(), claims(), other.privateKey)],
    ['alg none', () => `${b64({ alg: 'none', typ: 'at+jwt', kid: 'k1' })}.${b64(claims())}.`],
    ['alg none with a signature', () => craft(header({ alg: 'none' }), claims())],
    ['alg HS256', () => craft(header({ alg: 'HS256' }), claims())],
    ['alg ES384', () => craft(header({ alg: 'ES384' }), claims())],
    ['another typ', () => craft(header({ typ: 'session+jwt' }), claims())],
    ['no typ', () => craft({ alg: 'ES256', kid: 'k1' }, claims())],
    ['an unknown kid', () => craft(header({ kid: 'k2' }), claims())],
    ['no kid', () => craft({ alg: 'ES256', typ: 'at+jwt' }, claims())],
    ['a crit header', () => craft(header({ crit: ['exp'] }), claims())],
    ['b64: false', () => craft(header({ b64: false }), claims())],
    ['a DER signature', () => { const t = craft(header(), claims()); const [h, p] = t.split('.'); return `${h}.${p}.${sign('sha256', Buffer.from(`${h}.${p}`), privateKey).toString('base64url')}`; }],
    ['a truncated signature', () => craft(header(), claims()).slice(0, -4)],
    ['two segments', () => craft(header(), claims()).split('.').slice(0, 2).join('.')],
    ['four segments', () => `${craft(header(), claims())}.x`],
    ['padding in a segment', () => craft(header(), claims()).replace('.', '=.')],
    ['a header that is not JSON', () => `${b64('not json')}.${b64(claims())}.${b64('sig')}`],
    ['a payload that is an array', () => craft(header(), [claims()])],
    ['expired beyond the tolerance', () => craft(header(), claims({ exp: NOW - 31 }))],
    ['not yet valid beyond the tolerance', () => craft(header(), claims({ nbf: NOW + 31 }))],
    ['no exp', () => craft(header(), claims({ exp: undefined }))],
    ['exp as a string', () => craft(header(), claims({ exp: String(NOW + 300) }))],
    ['no iat', () => craft(header(), claims({ iat: undefined }))],
    ['no sub', () => craft(header(), claims({ sub: undefined }))],
    ['another issuer', () => craft(header(), claims({ iss: 'https://evil.test' }))],
    ['no issuer', () => craft(header(), claims({ iss: undefined }))],
    ['another audience', () => craft(header(), claims({ aud: 'app_2' })), { audience: 'app_1' }],
    ['no audience when one is required', () => craft(header(), claims()), { audience: 'app_1' }],
  ];
  it.each(refused)('refuses %s with a jose error', async (_name, token, options) => {
    await expect(check(token(), options)).rejects.toThrow(errors.JOSEError);
  });

  it('accepts the edges it should: skew within the tolerance, typ in another case, an audience list', async () => {
    expect((await check(craft(header(), claims({ exp: NOW - 29 })))).sub).toBe('usr_1');
    expect((await check(craft(header(), claims({ nbf: NOW + 29 })))).sub).toBe('usr_1');
    expect((await check(craft(header({ typ: 'AT+JWT' }), claims()))).sub).toBe('usr_1');
    expect((await check(craft(header(), claims({ aud: ['app_2', 'app_1'] })), { audience: 'app_1' })).sub).toBe('usr_1');
  });

  it('an expired token is JWTExpired with its claims (as jose reports it)', async () => {
    try {
      await check(craft(header(), claims({ exp: NOW - 100 })));
      expect.unreachable();
    } catch (error) {
      expect(error).toBeInstanceOf(errors.JWTExpired);
      expect((error as errors.JWTExpired).claim).toBe('exp');
    }
  });

  describe('with checked signatures remembered', () => {
    it('a remembered token skips only the signature: typ, issuer, audience and time are checked on every call', async () => {
      const checked = new CheckedSignatures(10);
      const token = craft(header(), claims({ aud: 'app_1' }));
      expect((await check(token, { audience: 'app_1' }, checked)).sub).toBe('usr_1');
      expect(checked.size).toBe(1);
      await expect(check(token, { audience: 'app_2' }, checked)).rejects.toThrow(errors.JWTClaimValidationFailed);
      await expect(check(token, { typ: 'session+jwt' }, checked)).rejects.toThrow(errors.JWTClaimValidationFailed);
      await expect(check(token, { issuer: 'https://other.test' }, checked)).rejects.toThrow(errors.JWTClaimValidationFailed);
      await expect(check(token, { now: NOW + 400 }, checked)).rejects.toThrow(errors.JWTExpired);
      expect((await check(token, { audience: 'app_1' }, checked)).sub).toBe('usr_1');
    });

    it('counts only while its kid names the same key: a reloaded or withdrawn key checks again', async () => {
      const checked = new CheckedSignatures(10);
      const token = craft(header(), claims());
      await check(token, {}, checked);
      // The key was withdrawn: no key under the kid.
      await expect(check(token, { keyFor: () => undefined }, checked)).rejects.toThrow(errors.JWKSNoMatchingKey);
      // Another key now stands under the same kid: the signature is checked again, and fails.
      await expect(check(token, { keyFor: () => other.publicKey }, checked)).rejects.toThrow(errors.JWSSignatureVerificationFailed);
      // The same key reloaded (a new KeyObject of the same key): checked again, and passes.
      const reloaded = createPublicKey({ key: publicKey.export({ format: 'jwk' }), format: 'jwk' });
      expect((await check(token, { keyFor: () => reloaded }, checked)).sub).toBe('usr_1');
      // …and is remembered under the reloaded key from then on.
      expect(checked.recall(token)?.key).toBe(reloaded);
      expect(checked.size).toBe(1);
    });

    it('remembers only tokens that passed, and a forged twin of a remembered token is checked in full', async () => {
      const checked = new CheckedSignatures(10);
      await expect(check(craft(header(), claims(), other.privateKey), {}, checked)).rejects.toThrow(errors.JOSEError);
      await expect(check(craft(header(), claims({ exp: NOW - 100 })), {}, checked)).rejects.toThrow(errors.JWTExpired);
      expect(checked.size).toBe(0);
      const token = craft(header(), claims());
      await check(token, {}, checked);
      const [h, , s] = token.split('.');
      await expect(check(`${h}.${b64(claims({ sub: 'usr_2' }))}.${s}`, {}, checked)).rejects.toThrow(errors.JWSSignatureVerificationFailed);
    });

    it('keeps at most its capacity, the oldest leaving first', async () => {
      const checked = new CheckedSignatures(3);
      const tokens = ['a', 'b', 'c', 'd'].map((jti) => craft(header(), claims({ jti })));
      for (const token of tokens) await check(token, {}, checked);
      expect(checked.size).toBe(3);
      expect(checked.recall(tokens[0]!)).toBeUndefined();
      expect(checked.recall(tokens[3]!)?.payload.jti).toBe('d');
    });
  });
});

describe('RS256 through node:crypto', () => {
  const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });

  it('signs what jose verifies with the public key, with exactly our header and claims', async () => {
    const token = await signRs256(signingInput('RS256', { kid: 'r1', typ: 'JWT' }, claims({ aud: 'app_1', nonce: 'n-1' })), rsa.privateKey);
    const joseKey = await importJWK({ ...rsa.publicKey.export({ format: 'jwk' }), alg: 'RS256' }, 'RS256');
    const { payload, protectedHeader } = await jwtVerify(token, joseKey, { issuer: ISS, audience: 'app_1', algorithms: ['RS256'], currentDate: new Date(NOW * 1000) });
    expect(protectedHeader).toEqual({ alg: 'RS256', typ: 'JWT', kid: 'r1' });
    expect(payload).toEqual(claims({ aud: 'app_1', nonce: 'n-1' }));
    // The same bytes jose would sign (PKCS#1 v1.5 is deterministic): the padding is RS256's, not PSS.
    const joseSigned = await new SignJWT(claims({ aud: 'app_1', nonce: 'n-1' })).setProtectedHeader({ alg: 'RS256', typ: 'JWT', kid: 'r1' }).sign(rsa.privateKey);
    expect(token).toBe(joseSigned);
  });

  it('signs a stored signing input again to the very same JWT (what a refresh replay relies on)', async () => {
    const input = signingInput('RS256', { kid: 'r1', typ: 'JWT' }, claims({ aud: 'app_1' }));
    const token = await signRs256(input, rsa.privateKey);
    expect(token.startsWith(`${input}.`)).toBe(true);
    expect(await signRs256(input, rsa.privateKey)).toBe(token);
    expect(await signRs256(input, generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey)).not.toBe(token);
  });

  it('is refused by another key', async () => {
    const token = await signRs256(signingInput('RS256', { kid: 'r1', typ: 'JWT' }, claims()), rsa.privateKey);
    const stranger = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const joseKey = await importJWK({ ...stranger.publicKey.export({ format: 'jwk' }), alg: 'RS256' }, 'RS256');
    await expect(jwtVerify(token, joseKey, { currentDate: new Date(NOW * 1000) })).rejects.toBeInstanceOf(errors.JWSSignatureVerificationFailed);
  });
});
