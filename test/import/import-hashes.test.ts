import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findUserByEmail } from '../../src/storage/repos/users.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { adminHeaders } from '../helpers/dev-api.js';
import { Browser, makeClient, type TestClient, uniqueEmail } from '../helpers/oauth-flows.js';
import { FIREBASE_VECTOR, HASH_MAKERS } from './hashes.js';

// docs/guides/migrating-users.md: every accepted hash format signs in over REST and the hosted page,
// becomes our argon2id at that first sign-in, and refuses a wrong password.
describe('imported password hashes', () => {
  let t: TestApp;
  let client: TestClient;
  beforeAll(async () => {
    // Many sign-ins from one address in a minute: the per-IP limit is not what is tested here.
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '10000' } });
    client = await makeClient(t);
  });
  afterAll(async () => t.close());

  const importRows = async (body: unknown) => {
    const res = await t.app.inject({ method: 'POST', url: '/v1/admin/users/import', headers: adminHeaders, payload: body as object });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };

  const restLogin = (email: string, password: string) => t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email, password, client_id: client.app.id } });

  async function expectRehashedOnce(email: string, before: string) {
    const after = (await findUserByEmail(t.db, email))!.password_hash!;
    expect(after).not.toBe(before);
    expect(after).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
  }

  const formats = Object.entries(HASH_MAKERS).map(([name, make]) => [name, make] as const);

  it.each(formats)('%s: REST sign-in with the right password, wrong one refused, stored hash becomes argon2id', async (_name, make) => {
    const password = 'old system pass 1';
    const email = uniqueEmail('rest');
    const made = await make(password);
    const result = await importRows([{ email, email_verified: true, ...made }]);
    expect(result.summary).toEqual({ created: 1, unchanged: 0, conflict: 0, invalid: 0 });
    expect((await findUserByEmail(t.db, email))!.password_hash).toBe(made.password_hash);

    const wrong = await restLogin(email, 'old system pass 2');
    expect(wrong.statusCode).toBe(401);
    expect(wrong.json().code).toBe('invalid_credentials');
    expect((await findUserByEmail(t.db, email))!.password_hash).toBe(made.password_hash);

    const ok = await restLogin(email, password);
    expect(ok.statusCode, ok.body).toBe(200);
    await expectRehashedOnce(email, made.password_hash);
    // The re-hash is ours: the same password still signs in, a wrong one still fails.
    expect((await restLogin(email, password)).statusCode).toBe(200);
    expect((await restLogin(email, 'old system pass 2')).statusCode).toBe(401);
  });

  it.each(formats)('%s: hosted-page sign-in with the right password, wrong one refused, stored hash becomes argon2id', async (_name, make) => {
    const password = 'old system pass 1';
    const email = uniqueEmail('page');
    const made = await make(password);
    await importRows([{ email, email_verified: true, ...made }]);
    const browser = new Browser(t.app);
    const wrong = await browser.login(email, 'old system pass 2');
    expect(wrong.statusCode).not.toBe(303);
    expect((await findUserByEmail(t.db, email))!.password_hash).toBe(made.password_hash);
    const ok = await browser.login(email, password);
    expect(ok.statusCode, ok.body.slice(0, 300)).toBe(303);
    expect(String(ok.headers.location)).not.toContain('/login');
    await expectRehashedOnce(email, made.password_hash);
  });

  it("Firebase scrypt: the published test vector signs in over REST and the hosted page; a wrong project key never does", async () => {
    const emails = [uniqueEmail('fb-rest'), uniqueEmail('fb-page'), uniqueEmail('fb-wrongkey')];
    const rows = emails.slice(0, 2).map((email) => ({ email, email_verified: true, password_hash: FIREBASE_VECTOR.hash, password_salt: FIREBASE_VECTOR.salt }));
    expect((await importRows({ firebase_scrypt: FIREBASE_VECTOR.params, users: rows })).summary.created).toBe(2);
    // Another project's key (well-formed, wrong): the import cannot tell, the sign-in never succeeds and never crashes.
    const otherKey = Buffer.from(FIREBASE_VECTOR.params.base64_signer_key, 'base64').reverse().toString('base64');
    const wrongKey = await importRows({ firebase_scrypt: { ...FIREBASE_VECTOR.params, base64_signer_key: otherKey }, users: [{ email: emails[2], password_hash: FIREBASE_VECTOR.hash, password_salt: FIREBASE_VECTOR.salt }] });
    expect(wrongKey.summary.created).toBe(1);

    expect((await restLogin(emails[0]!, 'user2password')).statusCode).toBe(401);
    expect((await restLogin(emails[0]!, FIREBASE_VECTOR.password)).statusCode).toBe(200);
    expect((await findUserByEmail(t.db, emails[0]!))!.password_hash).toMatch(/^\$argon2id\$/);

    const browser = new Browser(t.app);
    expect((await browser.login(emails[1]!, FIREBASE_VECTOR.password)).statusCode).toBe(303);
    expect((await findUserByEmail(t.db, emails[1]!))!.password_hash).toMatch(/^\$argon2id\$/);

    expect((await restLogin(emails[2]!, FIREBASE_VECTOR.password)).statusCode).toBe(401);
    expect((await findUserByEmail(t.db, emails[2]!))!.password_hash).toMatch(/^\$firebase-scrypt\$/);
  });

  it('a user imported without a password cannot sign in with any password', async () => {
    const email = uniqueEmail('nopass');
    await importRows([{ email }]);
    expect((await findUserByEmail(t.db, email))!.password_hash).toBeNull();
    expect((await restLogin(email, 'anything at all 1')).statusCode).toBe(401);
  });

  it('a malformed stored hash (written around the import) is a wrong password, never a 500', async () => {
    for (const broken of ['$2b$10$short', '$scrypt$ln=14,r=8,p=1$!!!$@@@', '$pbkdf2-sha256$i=abc$x$y', '$firebase-scrypt$r=8,m=14$Bw==$a$b$c', '$argon2id$v=19$m=1,t=1,p=1$x$y', 'plain text']) {
      // One user each: five wrong passwords would lock one address.
      const email = uniqueEmail('broken');
      await importRows([{ email, ...(await HASH_MAKERS['bcrypt $2b$']!('pass word 123')) }]);
      await t.db.updateTable('users').set({ password_hash: broken }).where('email', '=', email).execute();
      const res = await restLogin(email, 'pass word 123');
      expect(res.statusCode, broken).toBe(401);
    }
  });

  it('never writes a password hash, salt or Firebase key to the log', async () => {
    const made = await HASH_MAKERS['pbkdf2-sha256 PHC']!('logged pass 1');
    await importRows([{ email: uniqueEmail('log'), ...made }, { email: 'not an email', ...made }]);
    await importRows({ firebase_scrypt: FIREBASE_VECTOR.params, users: [{ email: uniqueEmail('log'), password_hash: FIREBASE_VECTOR.hash, password_salt: FIREBASE_VECTOR.salt }] });
    const logs = t.logs.join('\n');
    for (const secret of [made.password_hash.split('$').pop()!, FIREBASE_VECTOR.hash, FIREBASE_VECTOR.params.base64_signer_key, FIREBASE_VECTOR.salt]) expect(logs).not.toContain(secret);
  });
});
