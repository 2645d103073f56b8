import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendEvent } from '../../src/storage/repos/events.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { bearer } from '../helpers/dev-api.js';
import { makeApp, makeDeveloper, makeUser } from '../helpers/factories.js';
import { addMember } from '../helpers/members.js';
import { uniqueEmail } from '../helpers/oauth-flows.js';

/**
 * Security hardening item 8: a developer names its own app in `/v1/auth/login` with any address and
 * reads `GET /v1/dev/apps/{id}/events`. Those events must not tell whether the address has an account,
 * nor the id of someone who is not a user of the app.
 */

interface DevEvent {
  id: string;
  type: string;
  app_id: string;
  user_id: string | null;
  ip: string;
  user_agent: string | null;
  at: string;
  data: Record<string, unknown>;
}

describe('developer events do not reveal accounts', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t.close());

  const failLogin = (clientId: string, email: string) =>
    t.app.inject({ method: 'POST', url: '/v1/auth/login', headers: { 'user-agent': 'probe' }, payload: { client_id: clientId, email, password: 'wrong password 123456' } });
  const events = async (apiKey: string, appId: string, query = ''): Promise<DevEvent[]> => {
    const res = await t.app.inject({ url: `/v1/dev/apps/${appId}/events${query}`, headers: bearer(apiKey) });
    expect(res.statusCode).toBe(200);
    return res.json().items as DevEvent[];
  };
  /** What a developer can compare between two events. */
  const shape = (e: DevEvent) => ({ type: e.type, app_id: e.app_id, user_id: e.user_id, ip: e.ip, user_agent: e.user_agent, data: e.data });

  it('a failed login with an existing address looks exactly like one with an unknown address', async () => {
    const dev = await makeDeveloper(t.db);
    const probe = await makeApp(t.db, { developerId: dev.id });
    // The victim has an account (and uses some other app), but never used the developer's app.
    const victim = await makeUser(t.app, { email: uniqueEmail('victim') });
    await addMember(t, await makeApp(t.db), victim);

    expect((await failLogin(probe.id, victim.email)).statusCode).toBe(401);
    expect((await failLogin(probe.id, uniqueEmail('nobody'))).statusCode).toBe(401);

    const seen = await events(dev.apiKey, probe.id, '?type=user.login_failed');
    expect(seen).toHaveLength(2);
    const [known, unknown] = seen;
    expect(shape(known!)).toEqual(shape(unknown!));
    expect(known!.user_id).toBeNull();
    expect(known!.data).not.toHaveProperty('known_user');
    expect(JSON.stringify(seen)).not.toContain(victim.id);
  });

  it('a lockout of an existing address looks like the lockout of an unknown one', async () => {
    const dev = await makeDeveloper(t.db);
    const probe = await makeApp(t.db, { developerId: dev.id });
    const victim = await makeUser(t.app, { email: uniqueEmail('victim') });
    const nobody = uniqueEmail('nobody');
    for (let i = 0; i < t.config.throttle.loginMaxFailures; i++) {
      await failLogin(probe.id, victim.email);
      await failLogin(probe.id, nobody);
    }
    const locked = await events(dev.apiKey, probe.id, '?type=user.locked');
    expect(locked).toHaveLength(2);
    expect(shape(locked[0]!)).toEqual(shape(locked[1]!));
    expect(JSON.stringify(await events(dev.apiKey, probe.id, '?limit=100'))).not.toContain(victim.id);
  });

  it('rows written before the fix, with known_user and a stranger’s user id, are filtered when read', async () => {
    const dev = await makeDeveloper(t.db);
    const probe = await makeApp(t.db, { developerId: dev.id });
    const stranger = await makeUser(t.app, { email: uniqueEmail('stranger') });
    const now = t.clock.now();
    // As the old code wrote them (and as any writer might attribute events to the app named by a caller).
    await appendEvent(t.db, now, { type: 'user.login_failed', appId: probe.id, userId: stranger.id, ip: '203.0.113.9', data: { reason: 'invalid_credentials', known_user: true } });
    await appendEvent(t.db, now, { type: 'user.login_failed', appId: probe.id, userId: null, ip: '203.0.113.9', data: { reason: 'invalid_credentials', known_user: false } });
    // Only ever written for an existing account: its mere presence would reveal the address.
    await appendEvent(t.db, now, { type: 'password.reset_requested', appId: probe.id, userId: stranger.id, ip: '203.0.113.9', data: {} });

    const seen = await events(dev.apiKey, probe.id);
    expect(seen.map((e) => e.type)).toEqual(['user.login_failed', 'user.login_failed']);
    expect(shape(seen[0]!)).toEqual(shape(seen[1]!));
    expect(seen[0]!.data).toEqual({ reason: 'invalid_credentials' });
    expect(JSON.stringify(seen)).not.toContain(stranger.id);
    expect(JSON.stringify(seen)).not.toContain('known_user');
    // The type filter cannot dig the hidden row out either.
    expect(await events(dev.apiKey, probe.id, '?type=password.reset_requested')).toEqual([]);
  });

  it('hidden rows do not shorten a page: the filter runs in the query', async () => {
    const dev = await makeDeveloper(t.db);
    const own = await makeApp(t.db, { developerId: dev.id });
    const member = await makeUser(t.app, { email: uniqueEmail('member') });
    await addMember(t, own, member);
    const now = t.clock.now();
    await appendEvent(t.db, now, { type: 'profile.updated', appId: own.id, userId: member.id, ip: '203.0.113.9', data: { version: 1 } });
    for (let i = 0; i < 3; i++) await appendEvent(t.db, now, { type: 'password.reset_requested', appId: own.id, userId: 'usr_someone_else', ip: '203.0.113.9', data: {} });
    await appendEvent(t.db, now, { type: 'profile.updated', appId: own.id, userId: member.id, ip: '203.0.113.9', data: { version: 2 } });
    const res = (await t.app.inject({ url: `/v1/dev/apps/${own.id}/events?limit=2`, headers: bearer(dev.apiKey) })).json();
    expect(res.items.map((e: DevEvent) => e.data)).toEqual([{ version: 1 }, { version: 2 }]);
    expect(res.next_cursor).toBeNull();
  });

  it('control: the app’s own users keep their user id on their events, failed logins included', async () => {
    const dev = await makeDeveloper(t.db);
    const own = await makeApp(t.db, { developerId: dev.id });
    const member = await makeUser(t.app, { email: uniqueEmail('member') });
    await addMember(t, own, member);
    await appendEvent(t.db, t.clock.now(), { type: 'password.reset_requested', appId: own.id, userId: member.id, ip: '203.0.113.9', data: {} });
    expect((await failLogin(own.id, member.email)).statusCode).toBe(401);

    const seen = await events(dev.apiKey, own.id);
    expect(seen.map((e) => [e.type, e.user_id])).toEqual([
      ['password.reset_requested', member.id],
      ['user.login_failed', member.id],
    ]);
    expect(seen[1]!.data.reason).toBe('invalid_credentials');
  });
});
