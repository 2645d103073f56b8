import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStorage, type Storage } from '../../src/storage/connect.js';
import { findUserByEmail } from '../../src/storage/repos/users.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { adminHeaders } from '../helpers/dev-api.js';
import { makeClient, PASSWORD, uniqueEmail } from '../helpers/oauth-flows.js';
import { FIREBASE_VECTOR, HASH_MAKERS } from './hashes.js';

// docs/guides/migrating-users.md: export from a SQLite instance → import into a fresh PostgreSQL one →
// the same users sign in with the same passwords (imported hashes not yet re-hashed, re-hashed ones, registered ones).
describe('export → import round trip, SQLite → PostgreSQL', { timeout: 120_000 }, () => {
  let sqliteStorage: Storage;
  let source: TestApp;
  let target: TestApp;
  beforeAll(async () => {
    sqliteStorage = createStorage('sqlite::memory:');
    source = await buildTestApp({ storage: sqliteStorage, env: { IP_AUTH_PER_MINUTE: '10000' } });
    target = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '10000' } });
  });
  afterAll(async () => {
    await source.close();
    await sqliteStorage.close();
    await target.close();
  });

  it('every user signs in on PostgreSQL with the password they had on SQLite', async () => {
    expect(source.storage.dialect).toBe('sqlite');
    expect(target.storage.dialect).toBe('postgres');
    const sourceClient = await makeClient(source);
    const password = 'round trip pass 1';
    const rows: Array<Record<string, unknown>> = [];
    const expected: Array<[string, string]> = [];
    for (const [name, make] of Object.entries(HASH_MAKERS)) {
      const email = uniqueEmail(name.replace(/[^a-z0-9]/gi, '').toLowerCase());
      rows.push({ email, email_verified: true, name: 'Round Trip', external_id: `ext-${email}`, ...(await make(password)) });
      expected.push([email, password]);
    }
    const imported = await source.app.inject({ method: 'POST', url: '/v1/admin/users/import', headers: adminHeaders, payload: rows });
    expect(imported.json().summary.created).toBe(rows.length);
    const firebaseEmail = uniqueEmail('firebase');
    await source.app.inject({ method: 'POST', url: '/v1/admin/users/import', headers: adminHeaders, payload: { firebase_scrypt: FIREBASE_VECTOR.params, users: [{ email: firebaseEmail, password_hash: FIREBASE_VECTOR.hash, password_salt: FIREBASE_VECTOR.salt }] } });
    expected.push([firebaseEmail, FIREBASE_VECTOR.password]);
    const registered = uniqueEmail('registered');
    await source.app.inject({ method: 'POST', url: '/v1/auth/register', payload: { email: registered, password: PASSWORD, client_id: sourceClient.app.id } });
    expected.push([registered, PASSWORD]);
    // One imported user signs in on the source first: exported with our argon2id hash.
    const first = expected[0]!;
    expect((await source.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: first[0], password: first[1], client_id: sourceClient.app.id } })).statusCode).toBe(200);

    const exported = await source.app.inject({ url: '/v1/admin/users/export?include_password_hashes=true', headers: adminHeaders });
    expect(exported.statusCode).toBe(200);
    const result = await target.app.inject({ method: 'POST', url: '/v1/admin/users/import', headers: { ...adminHeaders, 'content-type': 'application/x-ndjson' }, payload: exported.body });
    expect(result.json().summary).toEqual({ created: expected.length, unchanged: 0, conflict: 0, invalid: 0 });

    const targetClient = await makeClient(target);
    for (const [email, pw] of expected) {
      const wrong = await target.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email, password: `${pw}x`, client_id: targetClient.app.id } });
      expect(wrong.statusCode, email).toBe(401);
      const login = await target.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email, password: pw, client_id: targetClient.app.id } });
      expect(login.statusCode, `${email}: ${login.body}`).toBe(200);
      expect((await findUserByEmail(target.db, email))!.password_hash).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    }
    // The same export again: every user is already there and unchanged.
    const again = await target.app.inject({ method: 'POST', url: '/v1/admin/users/import', headers: { ...adminHeaders, 'content-type': 'application/x-ndjson' }, payload: exported.body });
    expect(again.json().summary).toEqual({ created: 0, unchanged: expected.length, conflict: 0, invalid: 0 });
  });
});
