import { createPrivateKey, generateKeyPairSync, type KeyObject, verify } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Worker } from 'node:worker_threads';
import { JwsSigner, startSigningWorker } from '../../src/plugins/jws-signer.js';
import { signingInput, signRs256, verifyEs256 } from '../../src/plugins/jwt-node-crypto.js';

// The JWT signers (src/plugins/jws-signer.ts), one per algorithm: signatures asked together are made on
// a worker thread in batches, a lone one inline (ES256) or on the thread pool (RS256), and whatever the
// worker does not answer is signed without it. Every JWT a signer answers must carry its own input and
// verify under the key it was asked to sign with; an RS256 one is the very JWT signRs256 makes (RS256
// is deterministic).

const ISS = 'https://gatehouse.test';
const NOW = 1_800_000_000;
const k1 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const k2 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const r1 = generateKeyPairSync('rsa', { modulusLength: 2048 });
const PUBLIC: Record<string, KeyObject> = { k1: k1.publicKey, k2: k2.publicKey };

const inputFor = (kid: string, sub: string) => signingInput('ES256', { kid, typ: 'at+jwt' }, { sub, iss: ISS, iat: NOW, exp: NOW + 300 });

/** The claims of `jwt` once verified under the public key of the `kid` it names; throws when it does not verify. */
const verified = (jwt: string) =>
  verifyEs256(jwt, { keyFor: (kid) => PUBLIC[kid], issuer: ISS, typ: 'at+jwt', now: NOW, tolerance: 30 });

/** `count` ES256 signatures asked in one turn of the event loop, alternating the two keys. */
function signMany(signer: JwsSigner, count: number, tag = 'usr'): Array<{ input: string; jwt: Promise<string> }> {
  return Array.from({ length: count }, (_, i) => {
    const [kid, key] = i % 2 === 0 ? ['k1', k1.privateKey] : ['k2', k2.privateKey];
    const input = inputFor(kid, `${tag}_${i}`);
    return { input, jwt: signer.sign(input, kid, key) };
  });
}

/** `count` RS256 signatures (ID tokens) asked in one turn of the event loop, with the key `r1`. */
function signManyRs256(signer: JwsSigner, count: number, tag = 'id'): Array<{ input: string; jwt: Promise<string> }> {
  return Array.from({ length: count }, (_, i) => {
    const input = signingInput('RS256', { kid: 'r1', typ: 'JWT' }, { sub: `${tag}_${i}`, iss: ISS, iat: NOW, exp: NOW + 300 });
    return { input, jwt: signer.sign(input, 'r1', r1.privateKey) };
  });
}

/** Checks that each RS256 JWT is the one signRs256 makes of its input, and that it verifies under `r1`. */
async function expectSignedRs256(asked: Array<{ input: string; jwt: Promise<string> }>): Promise<void> {
  for (const { input, jwt } of asked) {
    const token = await jwt;
    expect(token).toBe(await signRs256(input, r1.privateKey));
    expect(verify('sha256', Buffer.from(input), r1.publicKey, Buffer.from(token.slice(input.length + 1), 'base64url'))).toBe(true);
  }
}

/** Checks that each JWT is its own input, signed, and verifies under its key. */
async function expectSigned(asked: Array<{ input: string; jwt: Promise<string> }>): Promise<void> {
  for (const { input, jwt } of asked) {
    const token = await jwt;
    expect(token.slice(0, token.lastIndexOf('.'))).toBe(input);
    const sub = JSON.parse(Buffer.from(input.split('.')[1]!, 'base64url').toString()).sub as string;
    expect((await verified(token)).sub).toBe(sub);
  }
}

describe('JWT signers', () => {
  const signers: JwsSigner[] = [];
  const make = (onStop?: (error: Error) => void, startWorker?: () => Worker, alg: 'ES256' | 'RS256' = 'ES256') => {
    const signer = new JwsSigner(alg, onStop, startWorker);
    signers.push(signer);
    return signer;
  };
  afterEach(async () => {
    await Promise.all(signers.splice(0).map((s) => s.close()));
  });

  it('signs a lone signature inline, without starting the worker', async () => {
    const signer = make();
    await expectSigned(signMany(signer, 1));
    await expectSigned(signMany(signer, 1));
    expect(signer.onWorker).toBe(false);
  });

  it('signs signatures asked together on the worker, each with its own input and key, in batches and across them', async () => {
    const signer = make();
    const asked = signMany(signer, 21); // two full batches and a part one
    expect(signer.onWorker).toBe(true);
    await expectSigned(asked);
    await expectSigned(signMany(signer, 5, 'again'));
  });

  it('RS256: signs a lone signature on the thread pool without starting the worker, and several together on it', async () => {
    const signer = make(undefined, undefined, 'RS256');
    const es256 = make();
    await expectSignedRs256(signManyRs256(signer, 1));
    // A login's tokens: one signature of each algorithm in the same turn, each alone in its signer.
    const login = [signMany(es256, 1, 'login'), signManyRs256(signer, 1, 'login')] as const;
    await expectSigned(login[0]);
    await expectSignedRs256(login[1]);
    expect([signer.onWorker, es256.onWorker]).toEqual([false, false]);
    const together = signManyRs256(signer, 11); // a full batch and a part one
    expect(signer.onWorker).toBe(true);
    await expectSignedRs256(together);
  });

  it('signs with a key reloaded under the same kid (a new key object), and with a key the worker was not sent before', async () => {
    const signer = make();
    await expectSigned(signMany(signer, 4));
    // As KeyStore.reload makes them: the same key, a new object.
    const reloaded = createPrivateKey({ key: k1.privateKey.export({ format: 'jwk' }), format: 'jwk' });
    const k3 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    PUBLIC.k3 = k3.publicKey;
    const inputs = [inputFor('k1', 'usr_reloaded'), inputFor('k3', 'usr_new')];
    const jwts = [signer.sign(inputs[0]!, 'k1', reloaded), signer.sign(inputs[1]!, 'k3', k3.privateKey)];
    await expectSigned(inputs.map((input, i) => ({ input, jwt: jwts[i]! })));
  });

  it('refuses only the signature it cannot make; the rest of its batch is signed', async () => {
    const signer = make();
    const asked = signMany(signer, 3);
    // A public key cannot sign.
    const refused = signer.sign(inputFor('k1', 'usr_public'), 'k9', k1.publicKey);
    await expect(refused).rejects.toThrow(/ES256 signing failed/);
    await expectSigned(asked);
    // A lone signature that cannot be made is refused inline as well.
    await expect(signer.sign(inputFor('k1', 'usr_public'), 'k9', k1.publicKey)).rejects.toThrow(/ES256 signing failed/);
    // RS256: in a batch on the worker, and alone on the thread pool.
    const rs256Signer = make(undefined, undefined, 'RS256');
    const rs256 = signManyRs256(rs256Signer, 2);
    const refusedRs256 = rs256Signer.sign(rs256[0]!.input, 'r9', r1.publicKey);
    await expect(refusedRs256).rejects.toThrow(/RS256 signing failed/);
    await expectSignedRs256(rs256);
    await expect(rs256Signer.sign(rs256[0]!.input, 'r9', r1.publicKey)).rejects.toThrow(/RS256 signing failed/);
  });

  it('signs what the worker owed on the main thread when it stops, tells why, and signs there from then on', async () => {
    const stops: Error[] = [];
    const workers: Worker[] = [];
    const signer = make(
      (error) => stops.push(error),
      () => workers[workers.push(startSigningWorker()) - 1]!,
    );
    await expectSigned(signMany(signer, 2));
    expect(workers).toHaveLength(1);
    // A full batch is sent at once; one large input keeps the worker busy while it is stopped.
    const big = inputFor('k1', 'x'.repeat(4 * 1024 * 1024));
    const asked = [{ input: big, jwt: signer.sign(big, 'k1', k1.privateKey) }, ...signMany(signer, 7, 'owed')];
    await workers[0]!.terminate();
    const tokens = await Promise.all(asked.map((a) => a.jwt));
    expect(tokens[0]!.startsWith(`${big}.`)).toBe(true);
    await expectSigned(asked.slice(1));
    expect(stops).toHaveLength(1);
    expect(signer.onWorker).toBe(false);
    await expectSigned(signMany(signer, 9, 'after'));
    expect(signer.onWorker).toBe(false);
    expect(workers).toHaveLength(1);
  });

  it('signs on the main thread when the worker cannot be started, and tells why once', async () => {
    const stops: Error[] = [];
    let starts = 0;
    const signer = make(
      (error) => stops.push(error),
      () => {
        starts += 1;
        throw new Error('no thread for the worker');
      },
    );
    await expectSigned(signMany(signer, 8)); // full: sent from inside sign
    await expectSigned(signMany(signer, 3)); // sent at the end of the turn
    expect(stops.map((e) => e.message)).toEqual(['no thread for the worker']);
    expect(starts).toBe(1);
    expect(signer.onWorker).toBe(false);
    // RS256's batches then go to the thread pool.
    const rs256 = make(
      (error) => stops.push(error),
      () => {
        starts += 1;
        throw new Error('no thread for the RS256 worker');
      },
      'RS256',
    );
    await expectSignedRs256(signManyRs256(rs256, 8));
    await expectSignedRs256(signManyRs256(rs256, 3));
    expect(stops.map((e) => e.message)).toEqual(['no thread for the worker', 'no thread for the RS256 worker']);
    expect(starts).toBe(2);
  });

  it('signs what the worker owed on the main thread when closed, and everything after', async () => {
    const signer = make();
    const asked = signMany(signer, 8); // full: sent at once
    expect(signer.onWorker).toBe(true);
    await signer.close();
    expect(signer.onWorker).toBe(false);
    await expectSigned(asked);
    await expectSigned(signMany(signer, 3, 'closed'));
    expect(signer.onWorker).toBe(false);
  });
});
