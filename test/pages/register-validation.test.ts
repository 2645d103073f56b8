import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countAll } from '../helpers/db.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { Browser, PASSWORD } from '../helpers/oauth-flows.js';

// The hosted register form applies the same email and name rule as the REST API, on every database.
describe('hosted /register input rules', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t.close());

  it.each([
    ['a malformed email', { email: 'not-an-email', name: 'Alice' }],
    ['a NUL byte in the name', { email: 'nul-name@example.com', name: 'a\u0000b' }],
    ['a NUL byte in the email', { email: 'nul\u0000@example.com', name: 'Alice' }],
  ])('refuses %s with a 400 form error and creates no account', async (_case, fields) => {
    const res = await new Browser(t.app).submit('/register', { ...fields, password: PASSWORD, action: 'register' });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect(await countAll(t.db, 'users')).toBe(0);
  });
});
