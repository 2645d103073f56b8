import { generateKeyPair as dpopKeyPair, generateProof } from 'dpop';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import { accessTokenHash, checkDpopProof, type ProofExpectations } from '../../src/tokens/dpop-proof.js';

/** The pure DPoP proof check (docs/reference/oauth.md "DPoP"), one rule a row, proofs made with the `dpop` package or by hand. */

const URL_TOKEN = 'https://id.example/oauth/token';
const now = () => Math.floor(Date.now() / 1000);
const expect_ = (over: Partial<ProofExpectations> = {}): ProofExpectations => ({ method: 'POST', url: URL_TOKEN, now: now(), ...over });

/** A proof signed by hand: any header and payload. */
async function handMade(header: Record<string, unknown>, payload: Record<string, unknown>, alg = 'ES256'): Promise<string> {
  const { privateKey } = await generateKeyPair(alg, { extractable: true });
  return new SignJWT(payload).setProtectedHeader({ alg, ...header }).sign(privateKey);
}

describe('checkDpopProof', () => {
  it('accepts a proof from the dpop package and returns the RFC 7638 thumbprint', async () => {
    const keys = await dpopKeyPair('ES256');
    const result = await checkDpopProof(await generateProof(keys, URL_TOKEN, 'POST'), expect_());
    expect(result).toMatchObject({ ok: true });
    const { calculateThumbprint } = await import('dpop');
    expect(result.ok && result.jkt).toBe(await calculateThumbprint(keys.publicKey));
  });

  it.each(['Ed25519', 'RS256', 'PS256'] as const)('accepts %s', async (alg) => {
    const keys = await dpopKeyPair(alg);
    expect((await checkDpopProof(await generateProof(keys, URL_TOKEN, 'POST'), expect_())).ok).toBe(true);
  });

  it('compares htu without query and fragment', async () => {
    const keys = await dpopKeyPair('ES256');
    expect((await checkDpopProof(await generateProof(keys, `${URL_TOKEN}?x=1#f`, 'POST'), expect_())).ok).toBe(true);
  });

  const refusals: Array<[string, () => Promise<string>, Partial<ProofExpectations>, string]> = [
    ['wrong htu', async () => generateProof(await dpopKeyPair('ES256'), 'https://evil.example/oauth/token', 'POST'), {}, 'htu'],
    ['htu of another endpoint', async () => generateProof(await dpopKeyPair('ES256'), 'https://id.example/oauth/userinfo', 'POST'), {}, 'htu'],
    ['wrong htm', async () => generateProof(await dpopKeyPair('ES256'), URL_TOKEN, 'GET'), {}, 'htm'],
    ['stale iat', async () => generateProof(await dpopKeyPair('ES256'), URL_TOKEN, 'POST'), { now: now() + 600 }, 'iat'],
    ['iat far in the future', async () => generateProof(await dpopKeyPair('ES256'), URL_TOKEN, 'POST'), { now: now() - 600 }, 'iat'],
    ['missing ath at a resource', async () => generateProof(await dpopKeyPair('ES256'), URL_TOKEN, 'POST'), { accessToken: 'at' }, 'ath'],
    ['ath of another token', async () => generateProof(await dpopKeyPair('ES256'), URL_TOKEN, 'POST', undefined, 'other'), { accessToken: 'at' }, 'ath'],
    [
      'HS256',
      async () => new SignJWT({ jti: 'j'.repeat(16), htm: 'POST', htu: URL_TOKEN, iat: now() }).setProtectedHeader({ alg: 'HS256', typ: 'dpop+jwt', jwk: { kty: 'oct', k: 'c2VjcmV0' } as never }).sign(new TextEncoder().encode('secret')),
      {},
      'algorithm',
    ],
    ['alg none', async () => `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'dpop+jwt' })).toString('base64url')}.${Buffer.from('{}').toString('base64url')}.`, {}, 'compact'],
    [
      'private key in jwk',
      async () => {
        const { privateKey } = await generateKeyPair('ES256', { extractable: true });
        const jwk = await exportJWK(privateKey);
        return new SignJWT({ jti: 'j'.repeat(16), htm: 'POST', htu: URL_TOKEN, iat: now() }).setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk }).sign(privateKey);
      },
      {},
      'private',
    ],
    ['typ JWT', async () => handMade({ typ: 'JWT' }, { jti: 'j'.repeat(16), htm: 'POST', htu: URL_TOKEN, iat: now() }), {}, 'typ'],
    [
      'signature by another key than jwk',
      async () => {
        const { publicKey } = await generateKeyPair('ES256', { extractable: true });
        return handMade({ typ: 'dpop+jwt', jwk: await exportJWK(publicKey) }, { jti: 'j'.repeat(16), htm: 'POST', htu: URL_TOKEN, iat: now() });
      },
      {},
      'signature',
    ],
    ['not a JWS', async () => 'not.a-proof', {}, 'compact'],
  ];

  it.each(refusals)('refuses: %s', async (_name, make, over, reason) => {
    const result = await checkDpopProof(await make(), expect_(over));
    expect(result.ok).toBe(false);
    expect(!result.ok && result.error).toBe('invalid_dpop_proof');
    expect(!result.ok && result.reason).toContain(reason);
  });

  it('asks for a nonce (use_dpop_nonce) when nonces are on and the proof has none or a stale one', async () => {
    const keys = await dpopKeyPair('ES256');
    const acceptsNonce = (n: string) => n === 'good';
    expect(await checkDpopProof(await generateProof(keys, URL_TOKEN, 'POST'), expect_({ acceptsNonce }))).toMatchObject({ ok: false, error: 'use_dpop_nonce' });
    expect(await checkDpopProof(await generateProof(keys, URL_TOKEN, 'POST', 'stale'), expect_({ acceptsNonce }))).toMatchObject({ ok: false, error: 'use_dpop_nonce' });
    expect(await checkDpopProof(await generateProof(keys, URL_TOKEN, 'POST', 'good'), expect_({ acceptsNonce }))).toMatchObject({ ok: true });
  });

  it('ath is base64url(SHA-256(token))', async () => {
    const keys = await dpopKeyPair('ES256');
    const proof = await generateProof(keys, URL_TOKEN, 'POST', undefined, 'the-token');
    expect(await checkDpopProof(proof, expect_({ accessToken: 'the-token' }))).toMatchObject({ ok: true });
    expect(accessTokenHash('the-token')).toMatch(/^[A-Za-z0-9_-]{43}$/);
  });
});
