import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { newId } from '../../src/shared/ids.js';
import { createStorage } from '../../src/storage/connect.js';
import { insertIdentity } from '../../src/storage/repos/idp.js';
import { TEST_ADMIN_TOKEN } from '../helpers/app.js';
import { type ScriptedProvider, startScriptedProvider } from '../helpers/scripted-provider.js';
import { call, isAlive, launch, MixedLoad, pause, PrivatePostgres, provision, report, type Server, until, verifyAcknowledged } from './harness.js';

// A PostgreSQL instance of the suite's own, stopped with `pg_ctl stop -m immediate` under load and
// started again: Gatehouse never dies, answers only 503 (+ Retry-After) while the database is gone —
// never 401 for a credential it cannot check — says so in /readyz within a second, and recovers by
// itself, with every acknowledged write kept.
describe('PostgreSQL stopped and restarted under load', () => {
  const postgres = new PrivatePostgres();
  const dataDir = mkdtempSync(join(tmpdir(), 'gh-fault-data-'));
  let server: Server | undefined;
  let provider: ScriptedProvider | undefined;

  afterAll(async () => {
    await provider?.close();
    if (server && isAlive(server)) server.child.kill('SIGKILL');
    await server?.done;
    postgres.destroy();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('answers 503 while it is down, never 401 or a crash, and recovers without a restart', async () => {
    await postgres.init();
    postgres.start();
    const idpClient = { clientId: 'gatehouse-at-idp', clientSecret: `secret-${randomBytes(12).toString('hex')}` };
    provider = await startScriptedProvider(idpClient);
    server = await launch({ url: postgres.url, dataDir }, { IDP_ISSUER: provider.issuer, IDP_CLIENT_ID: idpClient.clientId, IDP_CLIENT_SECRET: idpClient.clientSecret });
    const base = server.url;
    const { clientId, developerKey, confidential } = await provision(base);


    // One user with every kind of credential: access token, refresh token, hosted-page session.
    const email = 'outage@example.com';
    const password = 'outage test passphrase';
    const registered = await call(`${base}/v1/auth/register`, { method: 'POST', json: { email, password, client_id: clientId } });
    expect(registered.status).toBe(201);
    const accessToken = registered.body.access_token as string;
    const userId = registered.body.user.id as string;
    // A session JWT from the native sign-in door: the user's provider account, bound (as /account
    // would bind it), then an id_token of the provider exchanged for a session.
    const storage = createStorage(postgres.url);
    await insertIdentity(storage.db, { id: newId('pid'), userId, issuer: provider.issuer, subject: 'outage-native', email: null, createdAt: Math.floor(Date.now() / 1000) });
    await storage.close();
    const now = Math.floor(Date.now() / 1000);
    const idToken = await provider.sign({ iss: provider.issuer, sub: 'outage-native', aud: idpClient.clientId, iat: now, exp: now + 300, email: 'native@example.com', email_verified: true });
    const exchanged = await call(`${base}/oauth/idp/exchange`, { method: 'POST', json: { client_id: clientId, redirect_uri: 'https://app.example/cb', id_token: idToken } });
    expect(exchanged.status, JSON.stringify(exchanged.body)).toBe(200);
    const sessionJwt = exchanged.body.session as string;
    const signInPage = await call(`${base}/account`);
    const anonymous = /gh_sid=([^;]+)/.exec(signInPage.headers!.get('set-cookie') ?? '')![1]!;
    const csrf = /name="csrf" value="([^"]+)"/.exec(signInPage.body as string)![1]!;
    const signedIn = await fetch(`${base}/account`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: `gh_sid=${anonymous}`, 'content-type': 'application/x-www-form-urlencoded', origin: base },
      body: new URLSearchParams({ csrf, email, password, action: 'login' }),
    });
    expect(signedIn.status).toBe(303);
    const browserCookie = `gh_sid=${/gh_sid=([^;]+)/.exec(signedIn.headers.get('set-cookie') ?? '')![1]}`;

    const checks = {
      'access token (PUT /v1/profile)': () =>
        call(`${base}/v1/profile/${userId}`, { method: 'PUT', headers: { authorization: `Bearer ${accessToken}`, 'x-client-id': clientId }, json: { data: { a: 1 } } }),
      'access token (GET /oauth/userinfo)': () => call(`${base}/oauth/userinfo`, { headers: { authorization: `Bearer ${accessToken}` } }),
      'session JWT (POST /v1/email_verify/request)': () => call(`${base}/v1/email_verify/request`, { method: 'POST', headers: { authorization: `Bearer ${sessionJwt}` }, json: {} }),
      'developer API key': () => call(`${base}/v1/dev/apps`, { headers: { authorization: `Bearer ${developerKey}` } }),
      'admin token': () => call(`${base}/v1/admin/developers`, { headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` } }),
      'client secret (POST /oauth/token)': () =>
        call(`${base}/oauth/token`, {
          method: 'POST',
          headers: { authorization: `Basic ${Buffer.from(`${confidential.id}:${confidential.secret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
          body: 'grant_type=refresh_token&refresh_token=rt_whatever',
        }),
      'browser session (GET /account)': () => fetch(`${base}/account`, { redirect: 'manual', headers: { cookie: browserCookie } }).then((r) => ({ status: r.status, headers: r.headers })),
    };
    // Positive control: with the database up, every credential is accepted (not 401).
    for (const [name, check] of Object.entries(checks)) expect([name, (await check()).status]).not.toEqual([name, 401]);

    const load = new MixedLoad(base, clientId, 'pg-outage');
    load.start(4);
    await pause(1500);
    const before = { ...load.statuses };

    postgres.stopImmediately();
    const readyzMs = await until(async () => (await call(`${base}/readyz`)).status === 503, 5000, 20);
    const healthz = await call(`${base}/healthz`);
    const duringChecks: Record<string, number | string> = {};
    for (const [name, check] of Object.entries(checks)) {
      const res = await check();
      duringChecks[name] = res.status;
      expect([name, res.status]).toEqual([name, 503]);
      expect([name, res.headers?.get('retry-after')]).toEqual([name, '5']);
    }
    await pause(1500);
    const down = { ...load.statuses };

    postgres.start();
    const recoverMs = await until(async () => (await checks['access token (PUT /v1/profile)']()).status === 200, 30_000, 50);
    await pause(1000);
    await load.stop();

    const duringOutage = Object.fromEntries(Object.entries(down).map(([status, n]) => [status, n - (before[status] ?? 0)]).filter(([, n]) => (n as number) > 0));
    const verified = await verifyAcknowledged(base, clientId, load.users);
    report('PostgreSQL stop -m immediate', {
      requests: load.requests,
      acknowledged: load.acknowledged,
      lost: verified.lost.length,
      statusesDuringOutage: duringOutage,
      statuses: load.statuses,
      readyzMs: Math.round(readyzMs),
      recoverMs: Math.round(recoverMs),
    });

    expect(isAlive(server), server.output().stderr.slice(-2000)).toBe(true);
    expect(healthz.status).toBe(200);
    expect(readyzMs).toBeLessThan(1000);
    // While the database was gone: answers the service had already written (2xx), then only 503.
    const failures = server.output().stdout.split('\n').filter((line) => line.includes('"level":50')).slice(0, 5);
    expect(Object.keys(duringOutage).filter((status) => !/^2\d\d$|^503$/.test(status)), failures.join('\n')).toEqual([]);
    expect(duringOutage['503']).toBeGreaterThan(0);
    expect(verified.lost).toEqual([]);
    expect((await call(`${base}/readyz`)).status).toBe(200);
  });
});
