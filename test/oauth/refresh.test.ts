import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeClient, refresh, signedInWithTokens, userinfo, type TestClient } from '../helpers/oauth-flows.js';
import { SecretBox } from '../../src/shared/crypto.js';
import { hashSecret } from '../../src/shared/ids.js';

describe('grant_type=refresh_token (docs/security/checklist.md#refresh-tokens)', () => {
  let t: TestApp;
  let appA: TestClient;
  let appB: TestClient;
  let appC: TestClient;

  beforeAll(async () => {
    t = await buildTestApp();
    appA = await makeClient(t);
    appB = await makeClient(t, { redirectUris: ['https://b.example/cb'] });
    appC = await makeClient(t, { type: 'confidential', redirectUris: ['https://c.example/cb'] });
  });
  afterAll(async () => t.close());

  it('item 25: refresh rotates', async () => {
    const { tokens } = await signedInWithTokens(t, appA);
    const res = await refresh(t.app, appA, tokens.refresh_token);
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['pragma']).toBe('no-cache');
    const next = res.json();
    expect(next.refresh_token).not.toBe(tokens.refresh_token);
    expect(next.access_token).not.toBe(tokens.access_token);
    expect((await userinfo(t.app, next.access_token)).statusCode).toBe(200);
  });

  it('item 26: reuse of a rotated token after the grace window revokes the whole family', async () => {
    const { tokens } = await signedInWithTokens(t, appA);
    const rt2 = (await refresh(t.app, appA, tokens.refresh_token)).json();
    t.clock.advance(11);
    const reuse = await refresh(t.app, appA, tokens.refresh_token);
    expect(reuse.statusCode).toBe(400);
    expect(reuse.json().error).toBe('invalid_grant');
    expect((await refresh(t.app, appA, rt2.refresh_token)).json().error).toBe('invalid_grant');
    expect((await userinfo(t.app, rt2.access_token)).statusCode).toBe(401);
    const events = await t.db.selectFrom('events').selectAll().where('type', '=', 'token.refresh_reuse_detected').execute();
    expect(events.length).toBeGreaterThanOrEqual(1);
  });

  it('item 27: a refresh token of another client → invalid_grant, and the family survives (policy)', async () => {
    const { tokens } = await signedInWithTokens(t, appA);
    const res = await refresh(t.app, appB, tokens.refresh_token);
    expect(res.statusCode).toBe(400);
    expect(res.json().error).toBe('invalid_grant');
    expect((await refresh(t.app, appA, tokens.refresh_token)).statusCode).toBe(200);
  });

  it('item 27: a confidential app must authenticate to refresh', async () => {
    const { tokens } = await signedInWithTokens(t, appC, { pkce: null });
    const none = await refresh(t.app, { app: appC.app }, tokens.refresh_token);
    expect(none.statusCode).toBe(401);
    expect(none.json().error).toBe('invalid_client');
    const wrong = await refresh(t.app, { app: appC.app, secret: 'cs_wrong' }, tokens.refresh_token);
    expect(wrong.statusCode).toBe(401);
    expect((await refresh(t.app, appC, tokens.refresh_token)).statusCode).toBe(200);
  });

  it('item 28: scope cannot grow; a narrowed refresh keeps the granted scope on the new token', async () => {
    const { tokens } = await signedInWithTokens(t, appA, { scope: 'openid profile' });
    const wider = await refresh(t.app, appA, tokens.refresh_token, { scope: 'openid profile email' });
    expect(wider.statusCode).toBe(400);
    expect(wider.json().error).toBe('invalid_scope');
    const unknown = await refresh(t.app, appA, tokens.refresh_token, { scope: 'openid admin' });
    expect(unknown.json().error).toBe('invalid_scope');
    const narrow = await refresh(t.app, appA, tokens.refresh_token, { scope: 'openid' });
    expect(narrow.statusCode).toBe(200);
    expect(narrow.json().scope).toBe('openid');
    expect(decodeJwt(narrow.json().access_token).scope).toBe('openid');
    const again = await refresh(t.app, appA, narrow.json().refresh_token);
    expect(again.json().scope).toBe('openid profile');
  });

  it('item 31: forged or malformed refresh tokens fail cleanly', async () => {
    const { tokens } = await signedInWithTokens(t, appA);
    const flipped = `${tokens.refresh_token.slice(0, -1)}${tokens.refresh_token.endsWith('A') ? 'B' : 'A'}`;
    for (const rt of ['a', 'x'.repeat(10_000), flipped, tokens.access_token, 'ac_notacode']) {
      const res = await refresh(t.app, appA, rt);
      expect(res.statusCode).toBe(400);
      expect(['invalid_grant', 'invalid_request']).toContain(res.json().error);
    }
    const empty = await refresh(t.app, appA, '');
    expect(empty.json().error).toBe('invalid_request');
    expect((await refresh(t.app, appA, tokens.refresh_token)).statusCode).toBe(200);
  });

  it('item 96: 20 concurrent refreshes get the identical body and exactly one successor exists', async () => {
    const { tokens } = await signedInWithTokens(t, appA);
    const results = await Promise.all(Array.from({ length: 20 }, () => refresh(t.app, appA, tokens.refresh_token)));
    for (const r of results) expect(r.statusCode).toBe(200);
    expect(new Set(results.map((r) => r.body)).size).toBe(1);
    const grantId = decodeJwt(tokens.access_token).sid as string;
    const rows = await t.db.selectFrom('refresh_tokens').selectAll().where('grant_id', '=', grantId).execute();
    expect(rows).toHaveLength(2);
    expect(rows.filter((r) => r.consumed_at === null)).toHaveLength(1);
    // The successor stays valid.
    expect((await refresh(t.app, appA, results[0]!.json().refresh_token)).statusCode).toBe(200);
  });

  // A rotation stores the ID token of its response as a signing input and signs it again on a replay
  // (src/tokens/service.ts, PreparedTokens.sealedReplay): the replay must be the same text, and a valid token.
  it('item 96: a replay in the grace window answers the first body, its ID token valid, across a key rotation', async () => {
    const { tokens } = await signedInWithTokens(t, appA);
    const first = await refresh(t.app, appA, tokens.refresh_token);
    expect(first.statusCode).toBe(200);
    expect(first.json().id_token).toMatch(/^[\w-]+\.[\w-]+\.[\w-]{300,}$/);
    await t.app.keys.rotate();
    t.clock.advance(5);
    const replay = await refresh(t.app, appA, tokens.refresh_token);
    expect(replay.statusCode).toBe(200);
    expect(replay.body).toBe(first.body);
    const stored = await t.db.selectFrom('refresh_tokens').select('successor_response').where('token_hash', '=', hashSecret(tokens.refresh_token)).executeTakeFirstOrThrow();
    expect(stored.successor_response).not.toContain(first.json().id_token.split('.')[2]);
    expect(await t.app.keys.verify(replay.json().id_token, { typ: 'JWT', algorithms: ['RS256'], audience: appA.app.id })).toMatchObject({ sub: decodeJwt(tokens.id_token!).sub });
  });

  it('item 96: a replay response stored whole (no ID token to sign again) is answered as stored', async () => {
    const { tokens } = await signedInWithTokens(t, appA, { scope: 'profile' });
    const first = await refresh(t.app, appA, tokens.refresh_token);
    expect(first.statusCode).toBe(200);
    expect(first.json().id_token).toBeUndefined();
    const whole = JSON.stringify({ ...first.json(), id_token: 'e30.e30.c2ln' });
    await t.db
      .updateTable('refresh_tokens')
      .set({ successor_response: new SecretBox(t.config.secretKey, 'refresh-replay').seal(whole) })
      .where('token_hash', '=', hashSecret(tokens.refresh_token))
      .execute();
    const replay = await refresh(t.app, appA, tokens.refresh_token);
    expect(replay.statusCode).toBe(200);
    expect(replay.body).toBe(whole);
  });

  it('item 29: refresh tokens expire (absolute family lifetime)', async () => {
    const { tokens } = await signedInWithTokens(t, appA);
    t.clock.advance(t.config.ttl.refreshToken + 1);
    expect((await refresh(t.app, appA, tokens.refresh_token)).json().error).toBe('invalid_grant');
  });
});
