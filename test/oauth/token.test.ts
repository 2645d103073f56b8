import { type KyselyPlugin, type PluginTransformQueryArgs, type PluginTransformResultArgs, type QueryId, type QueryResult, type RootOperationNode, sql, type Transaction, type UnknownRow } from 'kysely';
import type { Database } from '../../src/storage/schema.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, TEST_DIALECT, type TestApp } from '../helpers/app.js';
import { hashSecret, newSecret } from '../../src/shared/ids.js';
import { StatementRecorder } from '../helpers/statements.js';
import { eventually } from '../helpers/concurrency.js';
import {
  authorizeAndGetCode,
  Browser,
  exchangeCode,
  makeClient,
  pkcePair,
  refresh,
  tokenRequest,
  userinfo,
  type TestClient,
} from '../helpers/oauth-flows.js';

function expectOAuthError(res: { statusCode: number; headers: Record<string, unknown>; json(): unknown; body: string }, error: string, status = 400) {
  expect(res.statusCode).toBe(status);
  expect(res.json()).toMatchObject({ error });
  expect(res.headers['cache-control']).toBe('no-store');
  expect(res.headers['pragma']).toBe('no-cache');
  expect(res.body).not.toMatch(/stack|at .*\.ts|SELECT|sqlite|postgres/i);
}

describe('POST /oauth/token', () => {
  let t: TestApp;
  let appA: TestClient;
  let appB: TestClient;
  let appC: TestClient;
  let alice: Browser;

  beforeAll(async () => {
    t = await buildTestApp();
    appA = await makeClient(t, { redirectUris: ['https://a.example/cb/', 'com.example.a:/oauth2redirect'] });
    appB = await makeClient(t, { redirectUris: ['https://b.example/cb'] });
    appC = await makeClient(t, { type: 'confidential', redirectUris: ['https://c.example/cb?env=prod'] });
    alice = new Browser(t.app);
    await alice.register();
  });
  afterAll(async () => t.close());

  const codeFor = (client: TestClient, options: Parameters<typeof authorizeAndGetCode>[2] = {}) => authorizeAndGetCode(alice, client, { scope: 'openid profile email', ...options });

  it('exchanges a code for the token response of docs/reference/tokens.md, with no-store headers', async () => {
    const { code, verifier } = await codeFor(appA);
    const res = await exchangeCode(t.app, appA, code, verifier);
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['pragma']).toBe('no-cache');
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const body = res.json();
    expect(Object.keys(body).sort()).toEqual(['access_token', 'expires_in', 'id_token', 'refresh_token', 'scope', 'token_type']);
    expect(body).toMatchObject({ token_type: 'Bearer', expires_in: 900, scope: 'email openid profile' });
    expect(body.refresh_token).toMatch(/^rt_[0-9a-hjkmnp-tv-z]{10}[A-Za-z0-9_-]{43}$/);
  });

  it('accepts a JSON body too', async () => {
    const { code, verifier } = await codeFor(appA);
    const res = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      payload: { grant_type: 'authorization_code', code, redirect_uri: appA.app.redirectUris[0], client_id: appA.app.id, code_verifier: verifier },
    });
    expect(res.statusCode).toBe(200);
  });

  describe('PKCE (docs/security/checklist.md#pkce)', () => {
    it('item 12: wrong verifier → invalid_grant, and the code is burned', async () => {
      const { code, verifier } = await codeFor(appA);
      expectOAuthError(await exchangeCode(t.app, appA, code, pkcePair().verifier), 'invalid_grant');
      expectOAuthError(await exchangeCode(t.app, appA, code, verifier), 'invalid_grant');
    });

    it('item 12: no code_verifier for a code with a challenge → invalid_grant', async () => {
      const { code } = await codeFor(appA);
      expectOAuthError(await exchangeCode(t.app, appA, code, undefined), 'invalid_grant');
    });

    it('item 12: a verifier whose hash shares a prefix with the challenge → invalid_grant', async () => {
      const pkce = pkcePair();
      const { code } = await codeFor(appA, { pkce });
      const near = `${pkce.verifier.slice(0, -1)}${pkce.verifier.endsWith('A') ? 'B' : 'A'}`;
      expectOAuthError(await exchangeCode(t.app, appA, code, near), 'invalid_grant');
    });

    it.each([
      ['42 chars', 'a'.repeat(42)],
      ['129 chars', 'a'.repeat(129)],
      ['space', `${'a'.repeat(42)} b`],
      ['plus', `${'a'.repeat(43)}+`],
      ['slash', `${'a'.repeat(43)}/`],
      ['equals', `${'a'.repeat(43)}=`],
      ['percent', `${'a'.repeat(43)}%`],
      ['non-ASCII', `${'a'.repeat(43)}é`],
    ])('item 13: verifier syntax (%s) → invalid_grant, never 200 or 5xx', async (_n, verifier) => {
      const { code } = await codeFor(appA);
      expectOAuthError(await exchangeCode(t.app, appA, code, verifier), 'invalid_grant');
    });

    it('item 14: a code_verifier for a code issued without a challenge (downgrade) → invalid_grant', async () => {
      const { code } = await codeFor(appC, { pkce: null, redirectUri: 'https://c.example/cb?env=prod' });
      expectOAuthError(await exchangeCode(t.app, appC, code, pkcePair().verifier, 'https://c.example/cb?env=prod'), 'invalid_grant');
    });

    it('a confidential app without PKCE exchanges with its secret', async () => {
      const { code } = await codeFor(appC, { pkce: null, redirectUri: 'https://c.example/cb?env=prod' });
      const res = await exchangeCode(t.app, appC, code, undefined, 'https://c.example/cb?env=prod');
      expect(res.statusCode).toBe(200);
    });
  });

  describe('codes (docs/security/checklist.md#authorization-codes-and-the-authorize-endpoint)', () => {
    it('item 16: a replayed code fails and revokes what it produced', async () => {
      const { code, verifier } = await codeFor(appA);
      const first = await exchangeCode(t.app, appA, code, verifier);
      expect(first.statusCode).toBe(200);
      const tokens = first.json();
      expect((await userinfo(t.app, tokens.access_token)).statusCode).toBe(200);
      expectOAuthError(await exchangeCode(t.app, appA, code, verifier), 'invalid_grant');
      t.clock.advance(30);
      expectOAuthError(await exchangeCode(t.app, appA, code, verifier), 'invalid_grant');
      const ui = await userinfo(t.app, tokens.access_token);
      expect(ui.statusCode).toBe(401);
      expect(ui.headers['www-authenticate']).toContain('invalid_token');
      expectOAuthError(await refresh(t.app, appA, tokens.refresh_token), 'invalid_grant');
      const events = await t.db.selectFrom('events').selectAll().where('type', '=', 'code.replay_detected').execute();
      expect(events.length).toBeGreaterThanOrEqual(2);
      expect(events[0]!.data).not.toContain(code);
    });

    it('item 17: a code works at TTL − 5 s and fails at TTL + 1 s', async () => {
      const a = await codeFor(appA);
      t.clock.advance(55);
      expect((await exchangeCode(t.app, appA, a.code, a.verifier)).statusCode).toBe(200);
      const b = await codeFor(appA);
      t.clock.advance(61);
      expectOAuthError(await exchangeCode(t.app, appA, b.code, b.verifier), 'invalid_grant');
    });

    it('item 18: a code is bound to its client (not burned for another client)', async () => {
      const { code, verifier } = await codeFor(appA);
      expectOAuthError(await exchangeCode(t.app, appB, code, verifier), 'invalid_grant');
      expect((await exchangeCode(t.app, appA, code, verifier)).statusCode).toBe(200);
    });

    it('item 18: a confidential app’s code redeemed by another app without secret → invalid_grant / invalid_client', async () => {
      const { code } = await codeFor(appC, { pkce: null, redirectUri: 'https://c.example/cb?env=prod' });
      const asA = await tokenRequest(t.app, { grant_type: 'authorization_code', code, redirect_uri: 'https://c.example/cb?env=prod', client_id: appA.app.id });
      expectOAuthError(asA, 'invalid_grant');
      const noSecret = await tokenRequest(t.app, { grant_type: 'authorization_code', code, redirect_uri: 'https://c.example/cb?env=prod', client_id: appC.app.id });
      expectOAuthError(noSecret, 'invalid_client', 401);
    });

    it('item 19: a code is bound to its redirect_uri', async () => {
      const a = await codeFor(appA, { redirectUri: 'com.example.a:/oauth2redirect' });
      expectOAuthError(await exchangeCode(t.app, appA, a.code, a.verifier, 'https://a.example/cb/'), 'invalid_grant');
      const b = await codeFor(appA, { redirectUri: 'com.example.a:/oauth2redirect' });
      const omitted = await tokenRequest(t.app, { grant_type: 'authorization_code', code: b.code, client_id: appA.app.id, code_verifier: b.verifier! });
      expectOAuthError(omitted, 'invalid_request');
    });

    it('item 20b: random codes fail cleanly', async () => {
      for (const code of ['', 'a', 'ac_'.padEnd(46, 'x'), 'x'.repeat(10_000)]) {
        const res = await exchangeCode(t.app, appA, code, pkcePair().verifier);
        expect(res.statusCode).toBe(400);
        expect(['invalid_grant', 'invalid_request']).toContain(res.json().error);
      }
    });

    describe('keys in the order of minting, and secrets minted before them (docs/adr/0012-time-ordered-secret-keys.md)', () => {
      const ORDERED = /^(rt|ac)_([0-9a-hjkmnp-tv-z]{10})[A-Za-z0-9_-]{43}$/;

      it('codes and refresh tokens carry their minting time, and are stored under a key that begins with it', async () => {
        const { code, verifier } = await codeFor(appA);
        const tokens = (await exchangeCode(t.app, appA, code, verifier)).json();
        for (const [secret, table, column] of [[code, 'authorization_codes', 'code_hash'], [tokens.refresh_token, 'refresh_tokens', 'token_hash']] as const) {
          const time = ORDERED.exec(secret)?.[2];
          expect(time).toBeDefined();
          const keys = await t.db.selectFrom(table).select(column).where(column, 'like', `${time}%`).execute();
          expect(keys.map((row) => Object.values(row)[0])).toContain(hashSecret(secret));
        }
      });

      it('a refresh token minted before keeps refreshing, rotates to the ordered layout, and its replay still revokes', async () => {
        const { code, verifier } = await codeFor(appA);
        const issued = (await exchangeCode(t.app, appA, code, verifier)).json();
        // Re-key the stored token as the plain layout stored it: the SHA-256 of the whole secret.
        // newSecret mints the plain layout every code and refresh token had before the ordered one.
        const legacy = newSecret('rt');
        expect(hashSecret(legacy)).toHaveLength(43);
        await t.db.updateTable('refresh_tokens').set({ token_hash: hashSecret(legacy) }).where('token_hash', '=', hashSecret(issued.refresh_token)).execute();
        expectOAuthError(await refresh(t.app, appA, issued.refresh_token), 'invalid_grant');

        const rotated = await refresh(t.app, appA, legacy);
        expect(rotated.statusCode).toBe(200);
        const successor = rotated.json().refresh_token;
        expect(successor).toMatch(ORDERED);
        t.clock.advance(120);
        expectOAuthError(await refresh(t.app, appA, legacy), 'invalid_grant');
        expectOAuthError(await refresh(t.app, appA, successor), 'invalid_grant');
      });

      it('a code minted before still redeems, once', async () => {
        const { code, verifier } = await codeFor(appA);
        const legacy = newSecret('ac');
        await t.db.updateTable('authorization_codes').set({ code_hash: hashSecret(legacy) }).where('code_hash', '=', hashSecret(code)).execute();
        const res = await exchangeCode(t.app, appA, legacy, verifier);
        expect(res.statusCode).toBe(200);
        expect((await refresh(t.app, appA, res.json().refresh_token)).statusCode).toBe(200);
        expectOAuthError(await exchangeCode(t.app, appA, legacy, verifier), 'invalid_grant');
      });
    });

    describe('statements per grant (round trips on PostgreSQL)', () => {
      // On PostgreSQL a grant's first read starts from the keys of its batch (unnest), which the recorder cannot name.
      const clientRead = TEST_DIALECT === 'postgres' ? 'select -' : 'select apps';
      // A rotation: on PostgreSQL one statement shared by the rotations in flight (docs/adr/0004-coalesced-statements.md);
      // on SQLite a transaction of the conditional UPDATE and the successor's INSERT.
      const rotation = TEST_DIALECT === 'postgres' ? ['rawnode -'] : ['update refresh_tokens', 'insert refresh_tokens'];
      const recorder = new StatementRecorder();
      let r: TestApp;
      let client: TestClient;
      let browser: Browser;
      beforeAll(async () => {
        r = await buildTestApp({ withDb: (db) => db.withPlugin(recorder) });
        await r.app.mailer.stop(); // no background delivery mixed into the recordings
        client = await makeClient(r, { redirectUris: ['https://r.example/cb'] });
        browser = new Browser(r.app);
        await browser.register();
      });
      afterAll(async () => r.close());

      it('a redemption reads its client, the code and its basis in one statement, and consumes and stores in as few as the database allows', async () => {
        const { code, verifier } = await authorizeAndGetCode(browser, client, { scope: 'openid profile email' });
        let res: Awaited<ReturnType<typeof exchangeCode>> | undefined;
        const seen = await recorder.during(async () => {
          res = await exchangeCode(r.app, client, code, verifier);
        });
        expect(res!.statusCode).toBe(200);
        // The client with the code and its user, membership and consent; then the redemption: on PostgreSQL
        // one statement (no transaction) consumes and links the code, stores grant and refresh token and
        // returns the basis it saw; on SQLite one transaction.
        const redeem =
          TEST_DIALECT === 'postgres'
            ? ['select consumed']
            : ['update authorization_codes', 'select authorization_codes', 'insert grants', 'insert refresh_tokens'];
        expect(seen).toEqual([clientRead, ...redeem]);
        // What it stored is what it answered: the refresh token works and the code now names its grant.
        expect((await refresh(r.app, client, res!.json().refresh_token)).statusCode).toBe(200);
        const stored = await r.db.selectFrom('authorization_codes').select(['grant_id', 'consumed_at']).where('code_hash', '=', hashSecret(code)).executeTakeFirstOrThrow();
        expect(stored.grant_id).toMatch(/^grt_/);
        expect(stored.consumed_at).not.toBeNull();
      });


      it('a refresh reads its client and the token\'s family in one statement, and rotates in one statement on PostgreSQL', async () => {
        const { code, verifier } = await authorizeAndGetCode(browser, client, { scope: 'openid profile email' });
        const first = (await exchangeCode(r.app, client, code, verifier)).json();
        let res: Awaited<ReturnType<typeof refresh>> | undefined;
        const seen = await recorder.during(async () => {
          res = await refresh(r.app, client, first.refresh_token);
        });
        expect(res!.statusCode).toBe(200);
        expect(seen).toEqual([clientRead, ...rotation]);
        // The successor works; the rotated token, replayed after the grace window, revokes the family.
        expect((await refresh(r.app, client, res!.json().refresh_token)).statusCode).toBe(200);
        r.clock.advance(120);
        expectOAuthError(await refresh(r.app, client, first.refresh_token), 'invalid_grant');
      });
      it('a client id the database refuses (a NUL byte) fails only its own request, not the grants it was batched with', async () => {
        const { code, verifier } = await authorizeAndGetCode(browser, client, { scope: 'profile email' });
        const token = (await exchangeCode(r.app, client, code, verifier)).json().refresh_token;
        const [good, bad] = await Promise.all([refresh(r.app, client, token), refresh(r.app, client, token, { client_id: 'app_\u0000x', client_secret: 'x' })]);
        expect(good.statusCode).toBe(200);
        expect([400, 401]).toContain(bad.statusCode);
      });

      it('concurrent redemptions: on PostgreSQL one read and one redemption for all; a code presented twice among them redeems once, and the replay revokes what it produced', async () => {
        const codes: Array<{ code: string; verifier?: string }> = [];
        for (let i = 0; i < 3; i++) codes.push(await authorizeAndGetCode(browser, client, { scope: 'profile email' }));
        const presented = [...codes, codes[0]!];
        let answers: Array<Awaited<ReturnType<typeof exchangeCode>>> = [];
        const seen = await recorder.during(async () => {
          answers = await Promise.all(presented.map(({ code, verifier }) => exchangeCode(r.app, client, code, verifier)));
        });
        // The code presented twice: one call redeemed it, the other is a replay.
        const twice = [answers[0]!, answers[3]!];
        expect(twice.map((a) => a.statusCode).sort()).toEqual([200, 400]);
        expectOAuthError(twice.find((a) => a.statusCode === 400)!, 'invalid_grant');
        expect([answers[1]!.statusCode, answers[2]!.statusCode]).toEqual([200, 200]);
        const count = (statement: string) => seen.filter((s) => s === statement).length;
        if (TEST_DIALECT === 'postgres') expect([count(clientRead), count('select consumed')]).toEqual([1, 1]);
        // SQLite: one client read per grant, and the replay's revocation reads which apps take back-channel logouts.
        else expect([count(clientRead), count('insert grants')]).toEqual([4 + 1, 3]);
        // What the others stored works; what the twice-presented code produced was revoked by the replay.
        for (const a of answers.slice(1, 3)) expect((await refresh(r.app, client, a.json().refresh_token)).statusCode).toBe(200);
        expectOAuthError(await refresh(r.app, client, twice.find((a) => a.statusCode === 200)!.json().refresh_token), 'invalid_grant');
      });

      it('concurrent refreshes: on PostgreSQL one read for all; the same token twice among them rotates once, both answered alike', async () => {
        const tokens: string[] = [];
        for (let i = 0; i < 3; i++) {
          const { code, verifier } = await authorizeAndGetCode(browser, client, { scope: 'profile email' });
          tokens.push((await exchangeCode(r.app, client, code, verifier)).json().refresh_token);
        }
        const presented = [...tokens, tokens[0]!];
        let answers: Array<Awaited<ReturnType<typeof refresh>>> = [];
        const seen = await recorder.during(async () => {
          answers = await Promise.all(presented.map((token) => refresh(r.app, client, token)));
        });
        expect(answers.map((a) => a.statusCode)).toEqual([200, 200, 200, 200]);
        // The token presented twice: one rotation won, the other call replays its answer (grace window).
        expect(answers[3]!.body).toBe(answers[0]!.body);
        const successors = answers.slice(0, 3).map((a) => a.json().refresh_token as string);
        expect(new Set(successors).size).toBe(3);
        const count = (statement: string) => seen.filter((s) => s === statement).length;
        // On PostgreSQL the reads share one statement. The rotations wait for their access tokens' signatures
        // (thread pool), which come back in turns of their own, so how many share a statement is the
        // machine's business (batched-grant-writes.pg.test.ts shows a shared one deciding as each alone).
        if (TEST_DIALECT === 'postgres') expect(count(clientRead)).toBe(1);
        // On SQLite each call reads on its own (the second call of the token may read it already rotated).
        else expect([count(clientRead), count('insert refresh_tokens')]).toEqual([4, 3]);
        // Every successor was stored: each rotates in its turn.
        for (const successor of successors) expect((await refresh(r.app, client, successor)).statusCode).toBe(200);
      });
    });

    describe('a basis that changes between the read and the redemption', () => {
      /** Shows the first read of a code grant (its client, code and basis) with the membership still active. */
      class StaleMembershipRead implements KyselyPlugin {
        armed = false;
        private readonly reads = new Set<QueryId>();
        transformQuery(args: PluginTransformQueryArgs): RootOperationNode {
          if (this.armed && args.node.kind === 'SelectQueryNode') this.reads.add(args.queryId);
          return args.node;
        }
        async transformResult(args: PluginTransformResultArgs): Promise<QueryResult<UnknownRow>> {
          const row = args.result.rows[0];
          if (!this.reads.delete(args.queryId) || !row || !('m_status' in row)) return args.result;
          this.armed = false;
          return { ...args.result, rows: [{ ...row, m_status: 'active' }] };
        }
      }
      const stale = new StaleMembershipRead();
      let r: TestApp;
      let client: TestClient;
      let browser: Browser;
      beforeAll(async () => {
        r = await buildTestApp({ withDb: (db) => db.withPlugin(stale) });
        client = await makeClient(r, { redirectUris: ['https://r.example/cb'] });
        browser = new Browser(r.app);
        await browser.register();
      });
      afterAll(async () => r.close());

      it('refuses the code, and revokes the grant the redemption stored before anything is answered', async () => {
        const { code, verifier } = await authorizeAndGetCode(browser, client, { scope: 'openid profile email' });
        const { user_id: userId } = await r.db.selectFrom('authorization_codes').select('user_id').where('code_hash', '=', hashSecret(code)).executeTakeFirstOrThrow();
        // The app blocks the user after the grant's first read saw the membership active.
        await r.db.updateTable('app_users').set({ status: 'blocked' }).where('app_id', '=', client.app.id).where('user_id', '=', userId).execute();
        stale.armed = true;
        // The test clock follows the wall clock: the revocation's stamp is read between these two.
        const exchangeStarted = r.clock.now();
        const res = await exchangeCode(r.app, client, code, verifier);
        const exchangeAnswered = r.clock.now();
        expect(stale.armed).toBe(false); // the stale read was served
        expectOAuthError(res, 'invalid_grant');
        const grants = await r.db.selectFrom('grants').select(['revoked_at', 'revoked_reason']).where('app_id', '=', client.app.id).where('user_id', '=', userId).execute();
        expect(grants).toEqual([{ revoked_at: expect.any(Number), revoked_reason: 'code_basis_changed' }]);
        expect(grants[0]!.revoked_at).toBeGreaterThanOrEqual(exchangeStarted);
        expect(grants[0]!.revoked_at).toBeLessThanOrEqual(exchangeAnswered);
        // The code was consumed: it never redeems again, even once the user is unblocked.
        await r.db.updateTable('app_users').set({ status: 'active' }).where('app_id', '=', client.app.id).where('user_id', '=', userId).execute();
        expectOAuthError(await exchangeCode(r.app, client, code, verifier), 'invalid_grant');
      });

      it('redeems when the basis still holds (the stale read changed nothing)', async () => {
        const { code, verifier } = await authorizeAndGetCode(browser, client, { scope: 'openid profile email' });
        stale.armed = true;
        const res = await exchangeCode(r.app, client, code, verifier);
        expect(stale.armed).toBe(false);
        expect(res.statusCode).toBe(200);
        expect((await userinfo(r.app, res.json().access_token)).statusCode).toBe(200);
      });
    });

    it('item 95: concurrent redemptions of one code have exactly one winner', async () => {
      const { code, verifier } = await codeFor(appA);
      const results = await Promise.all(Array.from({ length: 20 }, () => exchangeCode(t.app, appA, code, verifier)));
      const ok = results.filter((r) => r.statusCode === 200);
      expect(ok).toHaveLength(1);
      for (const r of results.filter((x) => x.statusCode !== 200)) expectOAuthError(r, 'invalid_grant');
      // Policy (docs/security/checklist.md#authorization-codes-and-the-authorize-endpoint, docs/security/checklist.md#reliability-under-faults-and-concurrency): a replay revokes the winner's grant too.
      expect((await refresh(t.app, appA, ok[0]!.json().refresh_token)).statusCode).toBe(400);
      const grants = await t.db.selectFrom('authorization_codes').select('grant_id').where('grant_id', 'is not', null).execute();
      expect(grants.length).toBeGreaterThan(0);
    });
  });

  describe('grant types and parameter hygiene (items 21, 22)', () => {
    it.each([
      [{ grant_type: 'password', username: 'alice', password: 'x' }],
      [{ grant_type: 'foo' }],
      [{ grant_type: 'constructor' }],
      [{ grant_type: '__proto__' }],
    ])('item 21: %j → unsupported_grant_type', async (form) => {
      expectOAuthError(await tokenRequest(t.app, { client_id: appA.app.id, ...form }), 'unsupported_grant_type');
    });

    it('no grant_type → invalid_request', async () => {
      expectOAuthError(await tokenRequest(t.app, { client_id: appA.app.id }), 'invalid_request');
    });

    it('item 22c: GET /oauth/token is refused', async () => {
      const res = await t.app.inject({ method: 'GET', url: '/oauth/token' });
      expect([400, 404, 405]).toContain(res.statusCode);
    });

    it('duplicated parameters → invalid_request', async () => {
      const { code, verifier } = await codeFor(appA);
      const payload = `grant_type=authorization_code&code=${code}&code=${code}&redirect_uri=${encodeURIComponent(appA.app.redirectUris[0]!)}&client_id=${appA.app.id}&code_verifier=${verifier}`;
      const res = await t.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload });
      expectOAuthError(res, 'invalid_request');
    });

    it('text/plain bodies and broken JSON → invalid_request, never 5xx', async () => {
      const a = await t.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'text/plain' }, payload: 'grant_type=x' });
      expect(a.statusCode).toBeGreaterThanOrEqual(400);
      expect(a.statusCode).toBeLessThan(500);
      const b = await t.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/json' }, payload: '{"grant_type":' });
      expectOAuthError(b, 'invalid_request');
      const c = await t.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/json' }, payload: '[1,2]' });
      expect(c.statusCode).toBe(400);
      const d = await t.app.inject({ method: 'POST', url: '/oauth/token', payload: { grant_type: 'refresh_token', refresh_token: { $ne: 1 }, client_id: appA.app.id } });
      expectOAuthError(d, 'invalid_request');
    });

    it('item 22e: wrong secret in Basic → 401 invalid_client with WWW-Authenticate', async () => {
      const basic = Buffer.from(`${appC.app.id}:wrong`).toString('base64');
      const res = await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: 'rt_x' }, { authorization: `Basic ${basic}` });
      expectOAuthError(res, 'invalid_client', 401);
      expect(String(res.headers['www-authenticate'])).toMatch(/^Basic/);
    });

    it('a real code with a wrong or missing secret → 401 invalid_client, and the code is not burned', async () => {
      const redirectUri = 'https://c.example/cb?env=prod';
      const a = await codeFor(appC, { pkce: null, redirectUri });
      const params = { grant_type: 'authorization_code', code: a.code, redirect_uri: redirectUri, client_id: appC.app.id };
      expectOAuthError(await tokenRequest(t.app, { ...params, client_secret: 'cs_wrong' }), 'invalid_client', 401);
      expectOAuthError(await tokenRequest(t.app, params), 'invalid_client', 401);
      expect((await tokenRequest(t.app, { ...params, client_secret: appC.secret! })).statusCode).toBe(200);
    });

    it('client_secret_basic and client_secret_post both work; both at once is refused', async () => {
      const a = await codeFor(appC, { pkce: null, redirectUri: 'https://c.example/cb?env=prod' });
      const basic = Buffer.from(`${encodeURIComponent(appC.app.id)}:${encodeURIComponent(appC.secret!)}`).toString('base64');
      const viaBasic = await tokenRequest(
        t.app,
        { grant_type: 'authorization_code', code: a.code, redirect_uri: 'https://c.example/cb?env=prod' },
        { authorization: `Basic ${basic}` },
      );
      expect(viaBasic.statusCode).toBe(200);
      const both = await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: viaBasic.json().refresh_token, client_secret: appC.secret! }, { authorization: `Basic ${basic}` });
      expectOAuthError(both, 'invalid_request');
      const viaPost = await refresh(t.app, appC, viaBasic.json().refresh_token);
      expect(viaPost.statusCode).toBe(200);
    });

    it('unknown client → 401 invalid_client; a public app sending a secret → invalid_client', async () => {
      expectOAuthError(await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: 'x', client_id: 'nope' }), 'invalid_client', 401);
      expectOAuthError(await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: 'x', client_id: appA.app.id, client_secret: 's' }), 'invalid_client', 401);
      expectOAuthError(await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: 'x' }), 'invalid_client', 401);
    });
  });

  describe('CORS (docs/reference/rest-api.md#cors)', () => {
    it('allows the app’s redirect-URI origins, and nobody else', async () => {
      const { code, verifier } = await codeFor(appA);
      const res = await t.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { origin: 'https://a.example', 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: appA.app.redirectUris[0]!, client_id: appA.app.id, code_verifier: verifier! }).toString(),
      });
      expect(res.statusCode).toBe(200);
      expect(res.headers['access-control-allow-origin']).toBe('https://a.example');
      expect(res.headers['access-control-allow-credentials']).toBeUndefined();
      const evil = await t.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { origin: 'https://evil.example', 'content-type': 'application/x-www-form-urlencoded' },
        payload: `grant_type=refresh_token&refresh_token=x&client_id=${appA.app.id}`,
      });
      expect(evil.headers['access-control-allow-origin']).toBeUndefined();
      const error = await t.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { origin: 'https://a.example', 'content-type': 'application/x-www-form-urlencoded' },
        payload: `grant_type=refresh_token&refresh_token=x&client_id=${appA.app.id}`,
      });
      expect(error.statusCode).toBe(400);
      expect(error.headers['access-control-allow-origin']).toBe('https://a.example');
    });

    it('answers preflights for known origins only', async () => {
      const ok = await t.app.inject({ method: 'OPTIONS', url: '/oauth/token', headers: { origin: 'https://b.example', 'access-control-request-method': 'POST' } });
      expect(ok.statusCode).toBe(204);
      expect(ok.headers['access-control-allow-origin']).toBe('https://b.example');
      expect(ok.headers['access-control-allow-methods']).toContain('POST');
      const evil = await t.app.inject({ method: 'OPTIONS', url: '/oauth/token', headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' } });
      expect(evil.headers['access-control-allow-origin']).toBeUndefined();
    });
  });
});

// The code grant signs its tokens while its redemption runs (src/oauth/grants/authorization-code.ts):
// the signed response must still wait for the redemption's commit, and be dropped if it lost.
describe.runIf(TEST_DIALECT === 'postgres')('a code grant answers only once its redemption has committed (PostgreSQL)', () => {
  let t: TestApp;
  let client: TestClient;
  let alice: Browser;

  beforeAll(async () => {
    t = await buildTestApp();
    client = await makeClient(t, { redirectUris: ['https://a.example/cb'] });
    alice = new Browser(t.app);
    await alice.register();
  });
  afterAll(async () => t.close());

  /**
   * Exchanges `code` while another transaction holds its row (locked, then changed by `hold`); lets go
   * once the redemption waits for the lock and has had time to answer if it did not wait for it.
   */
  async function exchangeWhileHeld(code: string, verifier: string | undefined, hold: (trx: Transaction<Database>) => Promise<void>) {
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let held!: () => void;
    const isHeld = new Promise<void>((resolve) => (held = resolve));
    const holder = t.db.transaction().execute(async (trx) => {
      await sql`select 1 from authorization_codes where code_hash = ${hashSecret(code)} for update`.execute(trx);
      await hold(trx);
      held();
      await released;
    });
    await isHeld;
    let answered = false;
    const answer = exchangeCode(t.app, client, code, verifier).finally(() => (answered = true));
    try {
      const waitsForLock = async () =>
        (await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'`.execute(t.db)).rows[0]!.n > 0;
      expect(await eventually(waitsForLock, 15_000), 'the redemption never waited for the held row').toBe(true);
      // Real time on purpose: no rule here depends on the clock; this only gives a build that answered
      // without waiting for the commit the chance to do so.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(answered, 'answered before the redemption could commit').toBe(false);
    } finally {
      release();
      await holder;
    }
    return answer;
  }

  it('answers its tokens after the redemption commits', async () => {
    const { code, verifier } = await authorizeAndGetCode(alice, client, { scope: 'openid email' });
    const res = await exchangeWhileHeld(code, verifier, async () => undefined);
    expect(res.statusCode).toBe(200);
    const stored = await t.db.selectFrom('refresh_tokens').select('grant_id').where('token_hash', '=', hashSecret(res.json().refresh_token)).executeTakeFirst();
    expect(stored).toBeDefined();
  });

  it('answers no tokens when a concurrent redemption consumed the code first', async () => {
    const { code, verifier } = await authorizeAndGetCode(alice, client, { scope: 'openid email' });
    const grantsBefore = await t.db.selectFrom('grants').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    const res = await exchangeWhileHeld(code, verifier, async (trx) => {
      await trx.updateTable('authorization_codes').set({ consumed_at: t.clock.now() }).where('code_hash', '=', hashSecret(code)).execute();
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_grant' });
    expect(res.body).not.toContain('access_token');
    const grantsAfter = await t.db.selectFrom('grants').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    expect(Number(grantsAfter.n)).toBe(Number(grantsBefore.n));
  });
});
