import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { countAll } from '../helpers/db.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp, makeUser } from '../helpers/factories.js';
import { codeIn, linkIn, mailTo, startSmtp, type TestSmtp } from '../helpers/smtp.js';
import type { App } from '../../src/storage/repos/apps.js';

// docs/security/checklist.md#reliability-under-faults-and-concurrency: check-then-act flows are race-free. Twenty identical requests at once; exactly one wins.
const N = 20;

let t: TestApp;
let smtp: TestSmtp;
let client: App;

const post = (url: string, payload: Record<string, unknown>, headers: Record<string, string> = {}) =>
  t.app.inject({ method: 'POST', url, payload, headers });

const statuses = (responses: Array<{ statusCode: number }>) => responses.map((r) => r.statusCode).sort();

beforeAll(async () => {
  smtp = await startSmtp();
  t = await buildTestApp({ env: { SMTP_URL: smtp.url, IP_AUTH_PER_MINUTE: '10000', MAIL_INTERVAL_SECONDS: '0', MAIL_PER_HOUR: '1000' } });
  client = await makeApp(t.db);
});

afterAll(async () => {
  await t.close();
  await smtp.close();
});

describe('concurrent check-then-act', () => {
  it('registering one email twenty times at once creates exactly one account', async () => {
    const email = 'racer@example.com';
    const results = await Promise.all(
      Array.from({ length: N }, () => post('/v1/auth/register', { email, password: 'a long enough passphrase', client_id: client.id })),
    );
    expect(statuses(results).filter((s) => s === 201)).toHaveLength(1);
    expect(statuses(results).filter((s) => s === 409)).toHaveLength(N - 1);
    for (const r of results) if (r.statusCode === 409) expect(r.json().code).toBe('email_taken');
    expect(await countAll(t.db, 'users', { email })).toBe(1);
  });

  it('one magic-link token redeemed twenty times at once signs in exactly once', async () => {
    const user = await makeUser(t.app, { email: 'magic-racer@example.com' });
    expect((await post('/v1/auth/magic-link/request', { email: user.email, client_id: client.id })).statusCode).toBe(202);
    const mail = await smtp.waitFor((m) => mailTo(m) === user.email);
    const token = new URL(linkIn(mail)).searchParams.get('token')!;
    const results = await Promise.all(Array.from({ length: N }, () => post('/v1/auth/magic-link/verify', { token, client_id: client.id })));
    expect(statuses(results).filter((s) => s === 200)).toHaveLength(1);
    for (const r of results) if (r.statusCode !== 200) expect(r.json().code).toBe('invalid_token');
  });

  it('one reset token used twenty times at once changes the password exactly once', async () => {
    const user = await makeUser(t.app, { email: 'reset-racer@example.com' });
    expect((await post('/v1/auth/password/forgot', { email: user.email, client_id: client.id })).statusCode).toBe(202);
    const mail = await smtp.waitFor((m) => mailTo(m) === user.email);
    const token = new URL(linkIn(mail)).searchParams.get('token')!;
    const results = await Promise.all(
      Array.from({ length: N }, (_, i) => post('/v1/auth/password/reset', { reset_token: token, password: `brand new passphrase ${i}` })),
    );
    const winners = results.map((r, i) => ({ r, i })).filter(({ r }) => r.statusCode === 204);
    expect(winners).toHaveLength(1);
    for (const r of results) if (r.statusCode !== 204) expect(r.json().code).toBe('invalid_token');
    // The winner's password is the one in force.
    const login = await post('/v1/auth/login', { email: user.email, password: `brand new passphrase ${winners[0]!.i}`, client_id: client.id });
    expect(login.statusCode).toBe(200);
  });

  it('one email code confirmed twenty times at once verifies exactly once', async () => {
    const reg = await post('/v1/auth/register', { email: 'verify-racer@example.com', password: 'a long enough passphrase', client_id: client.id });
    expect(reg.statusCode).toBe(201);
    const code = codeIn(await smtp.waitFor((m) => mailTo(m) === 'verify-racer@example.com'));
    const auth = { authorization: `Bearer ${reg.json().access_token}` };
    const results = await Promise.all(Array.from({ length: N }, () => post('/v1/email_verify/confirm', { code }, auth)));
    expect(statuses(results).filter((s) => s === 200)).toHaveLength(1);
    for (const r of results) if (r.statusCode !== 200) expect(r.json().code).toBe('code_expired');
    expect(await countAll(t.db, 'events', { type: 'email.verified' })).toBe(1);
  });
});
