import { sql } from 'kysely';
import { afterAll, describe, expect, it } from 'vitest';
import { startServersOnOneDatabase } from '../helpers/processes.js';
import { call, LOAD_ENV, pause, provision, report } from './harness.js';

// The first step of a rolling deploy (docs/operations/migrations.md): the next version's additive
// migration runs while this version serves. Two server processes on one PostgreSQL database take a
// steady mix of refresh grants (both doors), bearer reads, logins and registrations; a nullable column
// is added to every table those paths read, and an index is built concurrently. From 2 s after the
// migration, every request succeeds: no statement of the running version notices the new columns.

/** The tables the load's requests read or write. */
const TABLES = [
  'apps', 'users', 'app_users', 'consents', 'grants', 'refresh_tokens', 'authorization_codes', 'one_time_tokens', 'throttle_counters',
  'browser_sessions', 'profiles', 'signing_keys', 'events', 'outbox', 'developers', 'developer_api_keys', 'totp_factors', 'passkeys',
  'provider_identities', 'settings', 'legal_documents', 'legal_versions', 'legal_acceptances',
];

type Kind = 'register' | 'login' | 'refresh-rest' | 'refresh-oauth' | 'profile';

interface Outcome {
  kind: Kind;
  at: number;
  status: number | 'network';
  body: unknown;
}

describe('an additive migration under a running version (rolling deploy, PostgreSQL)', () => {
  let stop: (() => Promise<void>) | undefined;
  afterAll(async () => stop?.());

  it('no request fails from 2 s after a column is added to every table the hot paths read', async () => {
    // One public address for both, as behind a load balancer: each accepts the tokens the other issued.
    const started = await startServersOnOneDatabase(2, { ...LOAD_ENV, BASE_URL: 'http://gatehouse.test' });
    stop = started.stop;
    const bases = started.servers.map((s) => `http://127.0.0.1:${s.port}`);
    const { clientId } = await provision(bases[0]!);
    const outcomes: Outcome[] = [];
    let serial = 0;
    let running = true;

    const record = (kind: Kind, res: Awaited<ReturnType<typeof call>>) => {
      outcomes.push({ kind, at: performance.now(), status: res.status, body: res.body });
      return res;
    };

    /** One client: registers a user, then refreshes (both doors), reads its profile and signs in again, on both servers in turn. */
    const lane = async (lane: number) => {
      let step = 0;
      const base = () => bases[(lane + step) % bases.length]!;
      const email = `rolling-${lane}-${(serial += 1)}@example.com`;
      const password = `rolling deploy passphrase ${lane}`;
      const registered = record('register', await call(`${base()}/v1/auth/register`, { method: 'POST', json: { email, password, client_id: clientId } }));
      if (registered.status !== 201) throw new Error(`setup registration: ${registered.status} ${JSON.stringify(registered.body)}`);
      const userId = registered.body.user.id as string;
      let { access_token: accessToken, refresh_token: refreshToken } = registered.body as { access_token: string; refresh_token: string };
      const profileHeaders = () => ({ authorization: `Bearer ${accessToken}`, 'x-client-id': clientId });
      const put = await call(`${base()}/v1/profile/${userId}`, { method: 'PUT', headers: profileHeaders(), json: { data: { lane } } });
      if (put.status !== 200) throw new Error(`setup profile: ${put.status} ${JSON.stringify(put.body)}`);
      while (running) {
        step += 1;
        const kind = (['refresh-rest', 'profile', 'refresh-oauth', 'profile', 'login', 'register'] as const)[step % 6]!;
        if (kind === 'refresh-rest' || kind === 'refresh-oauth') {
          const res = record(
            kind,
            kind === 'refresh-rest'
              ? await call(`${base()}/v1/auth/refresh`, { method: 'POST', json: { refresh_token: refreshToken, client_id: clientId } })
              : await call(`${base()}/oauth/token`, {
                  method: 'POST',
                  headers: { 'content-type': 'application/x-www-form-urlencoded' },
                  body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshToken, client_id: clientId }).toString(),
                }),
          );
          if (res.status === 200) ({ access_token: accessToken, refresh_token: refreshToken } = res.body as { access_token: string; refresh_token: string });
        } else if (kind === 'profile') {
          record(kind, await call(`${base()}/v1/profile/${userId}`, { headers: profileHeaders() }));
        } else if (kind === 'login') {
          record(kind, await call(`${base()}/v1/auth/login`, { method: 'POST', json: { email, password, client_id: clientId } }));
        } else {
          record(kind, await call(`${base()}/v1/auth/register`, { method: 'POST', json: { email: `rolling-${lane}-${(serial += 1)}@example.com`, password, client_id: clientId } }));
        }
      }
    };

    const lanes = Array.from({ length: 6 }, (_, i) => lane(i));
    // Every pooled connection of both processes has run the hot statements before the migration.
    await pause(3000);
    const migrationStarted = performance.now();
    for (const table of TABLES) await sql.raw(`alter table ${table} add column rolling_deploy_probe text`).execute(started.storage.db);
    await sql.raw('create index concurrently refresh_tokens_rolling_deploy_probe_idx on refresh_tokens (rolling_deploy_probe)').execute(started.storage.db);
    const migrated = performance.now();
    await pause(7000);
    running = false;
    await Promise.all(lanes);

    const settled = outcomes.filter((o) => o.at >= migrated + 2000);
    const failed = settled.filter((o) => o.status === 'network' || o.status >= 300);
    const around = outcomes.filter((o) => o.at >= migrationStarted && o.at < migrated + 2000);
    report('rolling deploy', {
      requests: outcomes.length,
      migrationMs: Math.round(migrated - migrationStarted),
      duringAndFirst2s: { requests: around.length, failed: around.filter((o) => o.status === 'network' || o.status >= 300).length },
      after: { requests: settled.length, failed: failed.length },
      before: outcomes.filter((o) => o.at < migrationStarted).map((o) => `${o.kind}:${o.status}`).reduce<Record<string, number>>((n, k) => ((n[k] = (n[k] ?? 0) + 1), n), {}),
      afterByKind: settled.map((o) => `${o.kind}:${o.status}`).reduce<Record<string, number>>((n, k) => ((n[k] = (n[k] ?? 0) + 1), n), {}),
    });
    expect(new Set(settled.map((o) => o.kind))).toEqual(new Set(['register', 'login', 'refresh-rest', 'refresh-oauth', 'profile']));
    expect(settled.length).toBeGreaterThan(50);
    expect(failed.slice(0, 5).map((o) => `${o.kind} ${o.status} ${JSON.stringify(o.body).slice(0, 200)}`)).toEqual([]);
  });
});
