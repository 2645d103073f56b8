import { createPrivateKey, generateKeyPairSync, type KeyObject, verify } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import type { Worker } from 'node:worker_threads';
import { JwsSigner, startSigningWorker } from '../../src/plugins/jws-signer.js';
import { signingInput, signRs256, verifyEs256 } from '../../src/plugins/jwt-node-crypto.js';

// The JWT signer (src/plugins/jws-signer.ts): signatures of one algorithm asked together are made on its
// one worker thread in batches, a lone one inline (ES256) or on the thread pool (RS256), and whatever the
// worker does not answer is signed without it. Every JWT it answers must carry its own input and verify
// under the key it was asked to sign with; an RS256 one is the very JWT signRs256 makes (RS256 is
// deterministic).

const ISS = 'https://gatehouse.test';
const NOW = 1_800_000_000;
const k1 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const k2 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const r1 = generateKeyPairSync('rsa', { modulusLength: 2048 });
const PUBLIC: Record<string, KeyObject> = { k1: k1.publicKey, k2: k2.publicKey };

const inputFor = (kid: string, sub: string) => signingInput('ES256', { kid, typ: 'at+jwt' }, { sub, iss: ISS, iat: NOW, exp: NOW + 300 });
const rs256InputFor = (sub: string) => signingInput('RS256', { kid: 'r1', typ: 'JWT' }, { sub, iss: ISS, iat: NOW, exp: NOW + 300 });

/** The claims of `jwt` once verified under the public key of the `kid` it names; throws when it does not verify. */
const verified = (jwt: string) =>
  verifyEs256(jwt, { keyFor: (kid) => PUBLIC[kid], issuer: ISS, typ: 'at+jwt', now: NOW, tolerance: 30 });

type Asked = Array<{ input: string; jwt: Promise<string> }>;

/** `count` ES256 signatures asked in one turn of the event loop, alternating the two keys. */
function signMany(signer: JwsSigner, count: number, tag = 'usr'): Asked {
  return Array.from({ length: count }, (_, i) => {
    const [kid, key] = i % 2 === 0 ? ['k1', k1.privateKey] : ['k2', k2.privateKey];
    const input = inputFor(kid, `${tag}_${i}`);
    return { input, jwt: signer.sign('ES256', input, kid, key) };
  });
}

/** `count` RS256 signatures (ID tokens) asked in one turn of the event loop, with the key `r1`. */
function signManyRs256(signer: JwsSigner, count: number, tag = 'id'): Asked {
  return Array.from({ length: count }, (_, i) => {
    const input = rs256InputFor(`${tag}_${i}`);
    return { input, jwt: signer.sign('RS256', input, 'r1', r1.privateKey) };
  });
}

/** Checks that each JWT is its own input, signed, and verifies under its key. */
async function expectSigned(asked: Asked): Promise<void> {
  for (const { input, jwt } of asked) {
    const token = await jwt;
    expect(token.slice(0, token.lastIndexOf('.'))).toBe(input);
    const sub = JSON.parse(Buffer.from(input.split('.')[1]!, 'base64url').toString()).sub as string;
    expect((await verified(token)).sub).toBe(sub);
  }
}

/** Checks that each RS256 JWT is the one signRs256 makes of its input, and that it verifies under `r1`. */
async function expectSignedRs256(asked: Asked): Promise<void> {
  for (const { input, jwt } of asked) {
    const token = await jwt;
    expect(token).toBe(await signRs256(input, r1.privateKey));
    expect(verify('sha256', Buffer.from(input), r1.publicKey, Buffer.from(token.slice(input.length + 1), 'base64url'))).toBe(true);
  }
}

describe('JWT signer', () => {
  const signers: JwsSigner[] = [];
  const make = (onStop?: (error: Error) => void, startWorker?: () => Worker) => {
    const signer = new JwsSigner(onStop, startWorker);
    signers.push(signer);
    return signer;
  };
  afterEach(async () => {
    await Promise.all(signers.splice(0).map((s) => s.close()));
  });

  it('signs a lone signature of each algorithm without starting the worker (a login asks one of each)', async () => {
    const signer = make();
    await expectSigned(signMany(signer, 1));
    await expectSignedRs256(signManyRs256(signer, 1));
    const login = [signMany(signer, 1, 'login'), signManyRs256(signer, 1, 'login')] as const;
    await expectSigned(login[0]);
    await expectSignedRs256(login[1]);
    expect(signer.onWorker).toBe(false);
  });

  it('signs signatures asked together on the worker, each with its own input and key, in batches and across them', async () => {
    const signer = make();
    const asked = signMany(signer, 21); // two full batches and a part one
    const idTokens = signManyRs256(signer, 11); // a full batch and a part one, on the same worker
    expect(signer.onWorker).toBe(true);
    await expectSigned(asked);
    await expectSignedRs256(idTokens);
    await expectSigned(signMany(signer, 5, 'again'));
    await expectSignedRs256(signManyRs256(signer, 3, 'again'));
  });

  it('signs an ES256 batch that arrives while the worker has RS256 work queued before that work is done', async () => {
    const signer = make();
    // Large inputs make each RSA signature long (hashing 4 MiB), so the queue is still being signed
    // when the ES256 batch, sent at the end of this turn, reaches the worker.
    const big = Array.from({ length: 8 }, (_, i) => rs256InputFor(`${i}_${'x'.repeat(4 * 1024 * 1024)}`));
    const finished: string[] = [];
    const idTokens = Promise.all(big.map((input) => signer.sign('RS256', input, 'r1', r1.privateKey))).then((jwts) => {
      finished.push('RS256');
      return jwts;
    });
    const accessTokens = signMany(signer, 2);
    void Promise.all(accessTokens.map((a) => a.jwt)).then(() => finished.push('ES256'));
    await expectSignedRs256(big.map((input, i) => ({ input, jwt: idTokens.then((jwts) => jwts[i]!) })));
    await expectSigned(accessTokens);
    expect(finished).toEqual(['ES256', 'RS256']);
  });

  it('signs with a key reloaded under the same kid (a new key object), and with a key the worker was not sent before', async () => {
    const signer = make();
    await expectSigned(signMany(signer, 4));
    // As KeyStore.reload makes them: the same key, a new object.
    const reloaded = createPrivateKey({ key: k1.privateKey.export({ format: 'jwk' }), format: 'jwk' });
    const k3 = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    PUBLIC.k3 = k3.publicKey;
    const inputs = [inputFor('k1', 'usr_reloaded'), inputFor('k3', 'usr_new')];
    const jwts = [signer.sign('ES256', inputs[0]!, 'k1', reloaded), signer.sign('ES256', inputs[1]!, 'k3', k3.privateKey)];
    await expectSigned(inputs.map((input, i) => ({ input, jwt: jwts[i]! })));
  });

  it('refuses only the signature it cannot make; the rest of its batch is signed', async () => {
    const signer = make();
    const asked = signMany(signer, 3);
    const idTokens = signManyRs256(signer, 2);
    // A public key cannot sign.
    const refused = signer.sign('ES256', inputFor('k1', 'usr_public'), 'k9', k1.publicKey);
    const refusedRs256 = signer.sign('RS256', rs256InputFor('id_public'), 'r9', r1.publicKey);
    await expect(refused).rejects.toThrow(/ES256 signing failed/);
    await expect(refusedRs256).rejects.toThrow(/RS256 signing failed/);
    await expectSigned(asked);
    await expectSignedRs256(idTokens);
    // A lone signature that cannot be made is refused without the worker as well.
    await expect(signer.sign('ES256', inputFor('k1', 'usr_public'), 'k9', k1.publicKey)).rejects.toThrow(/ES256 signing failed/);
    await expect(signer.sign('RS256', rs256InputFor('id_public'), 'r9', r1.publicKey)).rejects.toThrow(/RS256 signing failed/);
  });

  it('signs what the worker owed without it when it stops, tells why, and signs without it from then on', async () => {
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
    const asked = [{ input: big, jwt: signer.sign('ES256', big, 'k1', k1.privateKey) }, ...signMany(signer, 7, 'owed')];
    const idTokens = signManyRs256(signer, 8, 'owed');
    await workers[0]!.terminate();
    const tokens = await Promise.all(asked.map((a) => a.jwt));
    expect(tokens[0]!.startsWith(`${big}.`)).toBe(true);
    await expectSigned(asked.slice(1));
    await expectSignedRs256(idTokens);
    expect(stops).toHaveLength(1);
    expect(signer.onWorker).toBe(false);
    await expectSigned(signMany(signer, 9, 'after'));
    await expectSignedRs256(signManyRs256(signer, 3, 'after'));
    expect(signer.onWorker).toBe(false);
    expect(workers).toHaveLength(1);
  });

  it('signs without the worker when it cannot be started, and tells why once', async () => {
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
    await expectSignedRs256(signManyRs256(signer, 3));
    expect(stops.map((e) => e.message)).toEqual(['no thread for the worker']);
    expect(starts).toBe(1);
    expect(signer.onWorker).toBe(false);
  });

  it('signs what the worker owed without it when closed, and everything after', async () => {
    const signer = make();
    const asked = signMany(signer, 8); // full: sent at once
    const idTokens = signManyRs256(signer, 8);
    expect(signer.onWorker).toBe(true);
    await signer.close();
    expect(signer.onWorker).toBe(false);
    await expectSigned(asked);
    await expectSignedRs256(idTokens);
    await expectSigned(signMany(signer, 3, 'closed'));
    await expectSignedRs256(signManyRs256(signer, 3, 'closed'));
    expect(signer.onWorker).toBe(false);
  });
});
