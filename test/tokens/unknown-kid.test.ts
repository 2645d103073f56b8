import { generateKeyPair, SignJWT } from 'jose';
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp } from '../helpers/factories.js';
import { addMember, quickUser, tokensFor } from '../helpers/members.js';
import { StatementRecorder } from '../helpers/statements.js';

// The key store (src/plugins/keys.ts) reads the keys again on an unknown `kid`, so a key another
// instance added is picked up; made-up `kid`s must not turn that into a read per request.

const BURST = 1000;

/** Well-formed access tokens for `userId` at `appId`, each under a made-up `kid` and signed by a key of no one's. */
async function forgedTokens(t: TestApp, appId: string, userId: string, count: number): Promise<string[]> {
  const { privateKey } = await generateKeyPair('ES256');
  const now = t.clock.now();
  return Promise.all(
    Array.from({ length: count }, () =>
      new SignJWT({ sub: userId, aud: appId, client_id: appId, scope: 'openid profile email', jti: `at_${randomBytes(8).toString('hex')}`, sid: 'grt_made_up' })
        .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid: randomBytes(8).toString('base64url') })
        .setIssuer(t.app.keys.issuer)
        .setIssuedAt(now)
        .setExpirationTime(now + 600)
        .sign(privateKey),
    ),
  );
}

describe('access tokens under an unknown kid', () => {
  it(`a burst of ${BURST} reads the keys at most twice, each is 401 invalid_token, and a valid token read meanwhile succeeds`, async () => {
    const recorder = new StatementRecorder();
    const t = await buildTestApp({ withDb: (db) => db.withPlugin(recorder) });
    try {
      await t.app.mailer.stop(); // no background delivery mixed into the recording
      const app = await makeApp(t.db, {});
      const user = await quickUser(t);
      await addMember(t, app, user);
      const { access_token } = await tokensFor(t, app, user);
      const forged = await forgedTokens(t, app.id, user.id, BURST);
      const read = (token: string) => t.app.inject({ url: '/oauth/userinfo', headers: { authorization: `Bearer ${token}` } });
      // The keys were read when the app started: move past the interval, so the burst may read them once.
      t.clock.advance(5);

      let valid: Awaited<ReturnType<typeof read>> | undefined;
      let answers: Array<Awaited<ReturnType<typeof read>>> = [];
      const seen = await recorder.during(async () => {
        const half = BURST / 2;
        const first = forged.slice(0, half).map(read);
        valid = await read(access_token);
        answers = await Promise.all([...first, ...forged.slice(half).map(read)]);
      });

      expect(valid!.statusCode).toBe(200);
      expect(answers).toHaveLength(BURST);
      for (const res of answers) {
        expect(res.statusCode).toBe(401);
        expect(res.headers['www-authenticate']).toContain('error="invalid_token"');
      }
      const keyReads = seen.filter((s) => s === 'select signing_keys').length;
      expect(keyReads).toBeGreaterThanOrEqual(1);
      expect(keyReads).toBeLessThanOrEqual(2);

      // Within the interval, an unknown kid fails at once without a read; the valid token keeps working.
      const again = await recorder.during(async () => {
        expect((await read(forged[0]!)).statusCode).toBe(401);
        expect((await read(access_token)).statusCode).toBe(200);
      });
      expect(again.filter((s) => s === 'select signing_keys')).toEqual([]);
    } finally {
      await t.close();
    }
  });

  it('a token signed with a key another instance added on the same database is accepted once the keys are read again', async () => {
    const a = await buildTestApp();
    const b = await buildTestApp({ storage: a.storage, clock: a.clock });
    try {
      const app = await makeApp(a.db, {});
      const user = await quickUser(a);
      await addMember(a, app, user);
      await b.app.keys.rotate();
      const { access_token } = await tokensFor(b, app, user);
      const read = (t: TestApp) => t.app.inject({ url: '/oauth/userinfo', headers: { authorization: `Bearer ${access_token}` } });
      expect((await read(b)).statusCode).toBe(200);
      a.clock.advance(5);
      expect((await read(a)).statusCode).toBe(200);
    } finally {
      await b.close();
      await a.close();
    }
  });
});
