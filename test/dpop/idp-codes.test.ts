import { createHash, randomBytes } from 'node:crypto';
import { generateKeyPair, generateProof, type KeyPair } from 'dpop';
import { calculateJwkThumbprint, decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/shared/ids.js';
import { DEFAULT_SCOPE } from '../../src/shared/scopes.js';
import { grantConsent } from '../../src/storage/repos/consents.js';
import { insertIdentity } from '../../src/storage/repos/idp.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { countAll } from '../helpers/db.js';
import { insertTestUser, makeApp } from '../helpers/factories.js';
import { tokenRequest } from '../helpers/oauth-flows.js';
import { type ScriptedProvider, startScriptedProvider } from '../helpers/scripted-provider.js';

/**
 * DPoP-bound codes of the native provider doors (docs/guides/identity-provider.md#native-exchange-and-resume,
 * docs/guides/dpop.md): a proof (or `dpop_jkt`) at `/oauth/idp/exchange` or `/oauth/idp/resume` with
 * `response_mode=code` binds the code, which then redeems at `/oauth/token` only with a proof by that key.
 * The attack: an app's code intercepted on its way (custom-scheme redirect, logs) redeemed by someone
 * without the app's key.
 */

const BASE = 'http://localhost:3000';
const REDIRECT = 'com.example.app://cb';
const CLIENT_ID = 'gatehouse-client';
const CLIENT_SECRET = `secret-${randomBytes(12).toString('hex')}`;

let p: ScriptedProvider;
let t: TestApp;
let appId: string;

beforeAll(async () => {
  p = await startScriptedProvider({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
  t = await buildTestApp({ env: { IDP_ISSUER: p.issuer, IDP_CLIENT_ID: CLIENT_ID, IDP_CLIENT_SECRET: CLIENT_SECRET, IP_AUTH_PER_MINUTE: '100000', DPOP_NONCES: '0' } });
  appId = (await makeApp(t.db, { redirectUris: [REDIRECT] })).id;
});
afterAll(async () => {
  await t?.close();
  await p?.close();
});

const pkce = () => {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};

/** A consented user bound to a fresh provider subject, and an id_token of that subject. */
async function signedInAtProvider(clientId = appId): Promise<{ idToken: string; userId: string }> {
  const sub = `sub-${randomBytes(5).toString('hex')}`;
  const user = await insertTestUser(t.db, { email: `${sub}@example.com` }, t.clock.now());
  await insertIdentity(t.db, { id: newId('pid'), userId: user.id, issuer: p.issuer, subject: sub, email: null, createdAt: t.clock.now() });
  await grantConsent(t.db, clientId, user.id, DEFAULT_SCOPE, t.clock.now());
  const now = t.clock.now();
  return { idToken: await p.sign({ iss: p.issuer, sub, aud: CLIENT_ID, iat: now, exp: now + 300, jti: randomBytes(8).toString('hex') }), userId: user.id };
}

const proofFor = (keys: KeyPair, path: string) => generateProof(keys, `${BASE}${path}`, 'POST');

const native = async (door: 'exchange' | 'resume', body: Record<string, unknown>, keys?: KeyPair) =>
  t.app.inject({
    method: 'POST',
    url: `/oauth/idp/${door}`,
    headers: keys ? { dpop: await proofFor(keys, `/oauth/idp/${door}`) } : {},
    payload: { client_id: appId, redirect_uri: REDIRECT, ...body },
  });

const redeem = async (code: string, verifier: string, keys?: KeyPair, clientId = appId) =>
  tokenRequest(t.app, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier }, keys ? { dpop: await proofFor(keys, '/oauth/token') } : {});

/** The three redemptions of a bound code: none, another key (both refused, the code not burned), its key. */
async function expectBoundTo(code: string, verifier: string, keys: KeyPair): Promise<void> {
  const bare = await redeem(code, verifier);
  expect(bare.statusCode).toBe(400);
  expect(bare.json().error).toBe('invalid_dpop_proof');
  const thief = await redeem(code, verifier, await generateKeyPair('ES256'));
  expect(thief.json().error).toBe('invalid_dpop_proof');
  const owner = await redeem(code, verifier, keys);
  expect(owner.statusCode, owner.body).toBe(200);
  expect(owner.json().token_type).toBe('DPoP');
  expect(decodeJwt(owner.json().access_token).cnf).toEqual({ jkt: await calculateJwkThumbprint(keys.publicKey as never) });
}

describe('DPoP-bound codes at /oauth/idp/exchange and /oauth/idp/resume', () => {
  it('a proof at exchange binds the code: it redeems only with that key', async () => {
    const keys = await generateKeyPair('ES256');
    const { idToken } = await signedInAtProvider();
    const { verifier, challenge } = pkce();
    const res = await native('exchange', { id_token: idToken, response_mode: 'code', code_challenge: challenge, code_challenge_method: 'S256' }, keys);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json()).toMatchObject({ status: 'ok', response_mode: 'code' });
    await expectBoundTo(res.json().code, verifier, keys);
  });

  it('dpop_jkt at resume binds the code without a proof; a proof at resume binds it too', async () => {
    const { idToken } = await signedInAtProvider();
    const session = (await native('exchange', { id_token: idToken })).json().session as string;
    const keys = await generateKeyPair('ES256');
    const jkt = await calculateJwkThumbprint(keys.publicKey as never);
    const first = pkce();
    const byParam = await native('resume', { session, response_mode: 'code', code_challenge: first.challenge, code_challenge_method: 'S256', dpop_jkt: jkt });
    expect(byParam.statusCode, byParam.body).toBe(200);
    await expectBoundTo(byParam.json().code, first.verifier, keys);

    const second = pkce();
    const byProof = await native('resume', { session, response_mode: 'code', code_challenge: second.challenge, code_challenge_method: 'S256' }, keys);
    expect(byProof.statusCode, byProof.body).toBe(200);
    await expectBoundTo(byProof.json().code, second.verifier, keys);
  });

  it('refuses a dpop_jkt naming another key than the proof, a malformed one, and a bad proof, using nothing up', async () => {
    const { idToken, userId } = await signedInAtProvider();
    const { verifier, challenge } = pkce();
    const request = { id_token: idToken, response_mode: 'code', code_challenge: challenge, code_challenge_method: 'S256' };
    const keys = await generateKeyPair('ES256');
    const otherJkt = await calculateJwkThumbprint((await generateKeyPair('ES256')).publicKey as never);

    const mismatch = await native('exchange', { ...request, dpop_jkt: otherJkt }, keys);
    expect(mismatch.statusCode).toBe(400);
    expect(mismatch.json().code).toBe('invalid_dpop_proof');
    const malformed = await native('exchange', { ...request, dpop_jkt: 'not-a-thumbprint' });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().code).toBe('invalid_request');
    // A proof for another endpoint (htu), and one replayed (jti).
    const elsewhere = await t.app.inject({ method: 'POST', url: '/oauth/idp/exchange', headers: { dpop: await proofFor(keys, '/oauth/token') }, payload: { client_id: appId, redirect_uri: REDIRECT, ...request } });
    expect(elsewhere.json().code).toBe('invalid_dpop_proof');
    expect(await countAll(t.db, 'authorization_codes', { user_id: userId })).toBe(0);

    // The id_token was not used up by any of these: with a good proof it signs in, once.
    const proof = await proofFor(keys, '/oauth/idp/exchange');
    const send = () => t.app.inject({ method: 'POST', url: '/oauth/idp/exchange', headers: { dpop: proof }, payload: { client_id: appId, redirect_uri: REDIRECT, ...request } });
    const ok = await send();
    expect(ok.statusCode, ok.body).toBe(200);
    const replayed = await send();
    expect(replayed.statusCode).toBe(400);
    expect(replayed.json().code).toBe('invalid_dpop_proof');
    await expectBoundTo(ok.json().code, verifier, keys);
  });

  it('an app with dpop_bound_access_tokens: a code from exchange does not redeem without a proof', async () => {
    const strictId = (await makeApp(t.db, { redirectUris: [REDIRECT], oauth: { dpopBoundAccessTokens: true, requirePushedAuthorizationRequests: false, deviceAuthorizationGrant: false } })).id;
    const { idToken } = await signedInAtProvider(strictId);
    const { verifier, challenge } = pkce();
    const res = await t.app.inject({ method: 'POST', url: '/oauth/idp/exchange', payload: { client_id: strictId, redirect_uri: REDIRECT, id_token: idToken, response_mode: 'code', code_challenge: challenge, code_challenge_method: 'S256' } });
    expect(res.statusCode, res.body).toBe(200);
    const bare = await redeem(res.json().code, verifier, undefined, strictId);
    expect(bare.json().error).toBe('invalid_dpop_proof');
    const keys = await generateKeyPair('ES256');
    const bound = await redeem(res.json().code, verifier, keys, strictId);
    expect(bound.statusCode, bound.body).toBe(200);
    expect(bound.json().token_type).toBe('DPoP');
  });
});
