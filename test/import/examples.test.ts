import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error -- a plain JavaScript example without type declarations
import { convert } from '../../examples/import/convert.mjs';
import { findUserByEmail } from '../../src/storage/repos/users.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { adminHeaders } from '../helpers/dev-api.js';
import { Browser, makeClient, type TestClient } from '../helpers/oauth-flows.js';

const DIR = 'examples/import';

/** The worked examples of docs/guides/migrating-users.md: source file, converted file, and one person who signs in. */
const EXAMPLES = [
  { source: 'own-table', file: 'own-table.source.ndjson', email: 'ada@example.com', password: 'correct horse battery staple', users: 2 },
  { source: 'auth0', file: 'auth0.source.ndjson', email: 'grace@example.com', password: 'cobol rules forever', users: 2 },
  { source: 'firebase', file: 'firebase.source.json', email: 'katherine@example.com', password: 'user1password', users: 1, options: { 'firebase-params': `${DIR}/firebase.hash-parameters.json` } },
  { source: 'supabase', file: 'supabase.source.ndjson', email: 'margaret@example.com', password: 'apollo guidance 11', users: 1 },
  { source: 'keycloak', file: 'keycloak.source.json', email: 'alonzo@example.com', password: 'lambda calculus 1936', users: 1 },
  { source: 'logto', file: 'logto.source.ndjson', email: 'barbara@example.com', password: 'clu language 1974', users: 1 },
] as const;

describe('migration guide examples (examples/import)', () => {
  let t: TestApp;
  let client: TestClient;
  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '10000' } });
    client = await makeClient(t);
  });
  afterAll(async () => t.close());

  it.each(EXAMPLES)('$source: the converter gives the committed file, which imports, and its user signs in', async (example) => {
    const converted: unknown[] = convert(example.source, readFileSync(`${DIR}/${example.file}`, 'utf8'), 'options' in example ? example.options : {});
    const committed = readFileSync(`${DIR}/${example.source}.ndjson`, 'utf8');
    expect(converted.map((row) => JSON.stringify(row)).join('\n') + '\n').toBe(committed);

    const res = await t.app.inject({ method: 'POST', url: '/v1/admin/users/import', headers: { ...adminHeaders, 'content-type': 'application/x-ndjson' }, payload: committed });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json().summary, res.body).toEqual({ created: example.users, unchanged: 0, conflict: 0, invalid: 0 });

    const wrong = await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: example.email, password: `${example.password}!`, client_id: client.app.id } });
    expect(wrong.statusCode).toBe(401);
    // Over the hosted page: the door most migrated users meet first.
    const browser = new Browser(t.app);
    expect((await browser.login(example.email, example.password)).statusCode).toBe(303);
    expect((await findUserByEmail(t.db, example.email))!.password_hash).toMatch(/^\$argon2id\$v=19\$m=19456/);
    const login = await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: example.email, password: example.password, client_id: client.app.id } });
    expect(login.statusCode, login.body).toBe(200);
  });
});
