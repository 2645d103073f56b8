import { createPrivateKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Worker } from 'node:worker_threads';
import { Es256Signer, startSigningWorker } from '../../src/plugins/es256-signer.js';
import { signingInput, verifyEs256 } from '../../src/plugins/jwt-node-crypto.js';

// The ES256 signer (src/plugins/es256-signer.ts): signatures asked together are made on a worker thread
// in batches, a lone one inline, and whatever the worker does not answer is signed on the main thread.
// Every JWT it answers must carry its own input and verify under the key it was asked to sign with.

const ISS = 'https://gatehouse.test';
const NOW = 1_800_000_000;
const k1 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const k2 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const PUBLIC: Record<string, KeyObject> = { k1: k1.publicKey, k2: k2.publicKey };

const inputFor = (kid: string, sub: string) => signingInput('ES256', { kid, typ: 'at+jwt' }, { sub, iss: ISS, iat: NOW, exp: NOW + 300 });

/** The claims of `jwt` once verified under the public key of the `kid` it names; throws when it does not verify. */
const verified = (jwt: string) =>
  verifyEs256(jwt, { keyFor: (kid) => PUBLIC[kid], issuer: ISS, typ: 'at+jwt', now: NOW, tolerance: 30 });

/** `count` signatures asked in one turn of the event loop, alternating the two keys. */
function signMany(signer: Es256Signer, count: number, tag = 'usr'): Array<{ input: string; jwt: Promise<string> }> {
  return Array.from({ length: count }, (_, i) => {
    const [kid, key] = i % 2 === 0 ? ['k1', k1.privateKey] : ['k2', k2.privateKey];
    const input = inputFor(kid, `${tag}_${i}`);
    return { input, jwt: signer.sign(input, kid, key) };
  });
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

describe('ES256 signer', () => {
  const signers: Es256Signer[] = [];
  const make = (onStop?: (error: Error) => void, startWorker?: () => Worker) => {
    const signer = new Es256Signer(onStop, startWorker);
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
    await expect(signer.sign(inputFor('k1', 'usr_public'), 'k9', k1.publicKey)).rejects.toThrow();
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
