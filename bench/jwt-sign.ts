import { generateKeyPairSync, type KeyObject } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { SignJWT } from 'jose';
import { type SigningAlg, signingInput, signJws } from '../src/plugins/jws.js';

/**
 * `npm run bench -- jwt-sign [--count N]`: our JWT signatures through node:crypto (src/plugins/jws.ts)
 * against jose's SignJWT with the same KeyObject, 16 at a time as a busy server asks them. Prints
 * signatures per second and the main thread's busy time per signature (event-loop utilisation), the
 * share of a grant's main thread a signature takes (docs/adr/0006-node-crypto-jwt-signing.md).
 */

const CLAIMS = { sub: 'usr_01hzzzzzzzzzzzzzzzzzzzzzzz', aud: 'app_01hzzzzzzzzzzzzzzzzzzzzzzz', client_id: 'app_01hzzzzzzzzzzzzzzzzzzzzzzz', scope: 'openid profile email', jti: 'at_01hzzzzzzzzzzzzzzzzzzzzzzz', sid: 'grt_01hzzzzzzzzzzzzzzzzzzzzzzz' };
const AT_ONCE = 16;

type Signer = (alg: SigningAlg, key: KeyObject) => Promise<string>;

const nodeCrypto: Signer = (alg, key) => {
  const now = Math.floor(Date.now() / 1000);
  return signJws(alg, signingInput(alg, { kid: 'k1', typ: 'at+jwt' }, { ...CLAIMS, iss: 'https://gatehouse.bench.test', iat: now, exp: now + 900 }), key);
};

const jose: Signer = (alg, key) =>
  new SignJWT(CLAIMS).setProtectedHeader({ alg, typ: 'at+jwt', kid: 'k1' }).setIssuer('https://gatehouse.bench.test').setIssuedAt().setExpirationTime('15m').sign(key);

async function measure(sign: Signer, alg: SigningAlg, key: KeyObject, count: number): Promise<{ perSecond: number; mainUs: number }> {
  let next = 0;
  const worker = async () => {
    while (next++ < count) await sign(alg, key);
  };
  const elu = performance.eventLoopUtilization();
  const start = performance.now();
  await Promise.all(Array.from({ length: AT_ONCE }, worker));
  const ms = performance.now() - start;
  const busy = performance.eventLoopUtilization(elu);
  return { perSecond: (count / ms) * 1000, mainUs: (busy.active * 1000) / count };
}

export async function main(args: string[]): Promise<void> {
  const i = args.indexOf('--count');
  const count = i >= 0 ? Number(args[i + 1]) : 20_000;
  const keys: Record<SigningAlg, KeyObject> = {
    ES256: generateKeyPairSync('ec', { namedCurve: 'P-256' }).privateKey,
    RS256: generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey,
  };
  for (const alg of ['ES256', 'RS256'] as const) {
    const n = alg === 'RS256' ? Math.max(1, Math.floor(count / 10)) : count;
    for (const [name, sign] of [['node:crypto', nodeCrypto], ['jose', jose]] as const) {
      await measure(sign, alg, keys[alg], Math.min(n, 500)); // warm-up
      const r = await measure(sign, alg, keys[alg], n);
      console.log(`${alg} ${name.padEnd(11)} ${r.perSecond.toFixed(0).padStart(6)} signatures/s, main thread ${r.mainUs.toFixed(1).padStart(6)} µs a signature (${n} signatures, ${AT_ONCE} at once)`);
    }
  }
}
