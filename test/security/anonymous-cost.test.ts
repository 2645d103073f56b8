import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/shared/ids.js';
import { defaultAppSettings, insertApp } from '../../src/storage/repos/apps.js';
import { MAX_APPS_PER_DEVELOPER } from '../../src/dev/service.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { appBody, createDeveloperViaApi } from '../helpers/dev-api.js';
import { makeApp, makeDeveloper } from '../helpers/factories.js';
import { StatementRecorder } from '../helpers/statements.js';

/**
 * What one anonymous request may cost: a CORS preflight, or discovery/JWKS with an `Origin`, allows
 * the origins of every app — read from memory, rebuilt only when an app changed (a one-row version
 * stamp tells), never by reading the apps table per request. And what a developer can add to that is
 * capped: apps per developer, origins and redirect URIs per app, each refused with a clear 400.
 */
describe('anonymous requests do not read every app', () => {
  const recorder = new StatementRecorder();
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ withDb: (db) => db.withPlugin(recorder) });
    // 1,500 apps with 20 origins each: what a few developers could have made before the caps.
    const developers = await Promise.all(Array.from({ length: 15 }, () => makeDeveloper(t.db)));
    const now = t.clock.now();
    for (let i = 0; i < 1500; i++) {
      await insertApp(t.db, {
        id: newId('app'), developerId: developers[i % 15]!.id, name: `App ${i}`, type: 'public', clientSecretHash: null,
        redirectUris: [`https://a${i}.example/cb`], allowedOrigins: Array.from({ length: 20 }, (_, j) => `https://o${j}.a${i}.example`),
        features: { auth: true, profile: false }, requiredFields: [], mfa: 'optional', branding: { logoUrl: null, logoUrlDark: null, accentColor: null }, defaultLocale: null, disabled: false, createdAt: now, updatedAt: now,
        oauth: { dpopBoundAccessTokens: false, requirePushedAuthorizationRequests: false, deviceAuthorizationGrant: false },
        resourceUris: [], clientCredentials: { enabled: false, scopes: [], notBefore: null },
        backchannelLogout: { uri: null, sessionRequired: false },
        ...defaultAppSettings(),
      });
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  const preflight = (origin: string, url = '/oauth/token') =>
    t.app.inject({ method: 'OPTIONS', url, headers: { origin, 'access-control-request-method': 'POST' } });

  it('preflights and public metadata read one row, not the apps table; the answer is still every app\'s origins', async () => {
    await preflight('https://o3.a7.example'); // warm
    for (const [method, url] of [['OPTIONS', '/oauth/token'], ['GET', '/.well-known/openid-configuration'], ['GET', '/oauth/jwks'], ['OPTIONS', '/v1/profile/usr_x']] as const) {
      let res: Awaited<ReturnType<typeof preflight>> | undefined;
      const statements = await recorder.during(async () => {
        res = await t.app.inject({ method, url, headers: { origin: 'https://o19.a1499.example', 'access-control-request-method': 'GET' } });
      });
      // The version stamp; never the apps (a key reload may happen beside it: it reads signing keys only).
      expect(statements, `${method} ${url}`).toContain('select settings');
      expect(statements.filter((s) => s.endsWith(' apps')), `${method} ${url}`).toEqual([]);
      expect(res!.headers['access-control-allow-origin'], `${method} ${url}`).toBe('https://o19.a1499.example');
    }
    expect((await preflight('https://evil.example')).headers['access-control-allow-origin']).toBeUndefined();
  });

  it('a change to any app shows at once, on this process and on another one sharing the database', async () => {
    const other = await buildTestApp({ storage: t.storage, clock: t.clock });
    try {
      expect((await other.app.inject({ method: 'OPTIONS', url: '/oauth/token', headers: { origin: 'https://fresh.example', 'access-control-request-method': 'POST' } })).headers['access-control-allow-origin']).toBeUndefined();
      await makeApp(t.db, { redirectUris: ['https://fresh.example/cb'] });
      for (const instance of [t, other]) {
        const res = await instance.app.inject({ method: 'OPTIONS', url: '/oauth/token', headers: { origin: 'https://fresh.example', 'access-control-request-method': 'POST' } });
        expect(res.headers['access-control-allow-origin']).toBe('https://fresh.example');
      }
      // One rebuild after the change, then memory again.
      const statements = await recorder.during(() => preflight('https://fresh.example'));
      expect(statements.filter((s) => s.endsWith(' apps'))).toEqual([]);
    } finally {
      await other.close();
    }
  });
});

describe('what a developer can add is capped, each with a clear 400', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => {
    await t?.close();
  });

  it(`at most ${MAX_APPS_PER_DEVELOPER} apps per developer, 20 allowed origins and 20 redirect URIs per app`, async () => {
    const developer = await createDeveloperViaApi(t);
    const create = (body: Record<string, unknown>) => t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: { authorization: `Bearer ${developer.apiKey}` }, payload: body });
    const tooManyOrigins = await create(appBody({ allowed_origins: Array.from({ length: 21 }, (_, i) => `https://o${i}.example`) }));
    expect(tooManyOrigins.statusCode).toBe(400);
    expect(tooManyOrigins.json()).toMatchObject({ code: 'invalid_request', details: [expect.objectContaining({ path: 'body.allowed_origins' })] });
    const tooManyUris = await create(appBody({ redirect_uris: Array.from({ length: 21 }, (_, i) => `https://r.example/cb${i}`) }));
    expect(tooManyUris.statusCode).toBe(400);
    expect(tooManyUris.json().code).toBe('invalid_request');

    for (let i = 0; i < MAX_APPS_PER_DEVELOPER; i++) expect((await create(appBody({ name: `App ${i}` }))).statusCode).toBe(201);
    const over = await create(appBody({ name: 'One too many' }));
    expect(over.statusCode).toBe(400);
    expect(over.json()).toEqual({ code: 'invalid_request', message: `A developer may have at most ${MAX_APPS_PER_DEVELOPER} apps. Delete one you no longer use first.` });
    expect(await t.db.selectFrom('apps').select('id').where('name', '=', 'One too many').executeTakeFirst()).toBeUndefined();
  });
});
