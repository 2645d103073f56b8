import type { Kysely } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { Database } from '../../src/storage/schema.js';
import {
  AWAITING,
  findRefreshToken,
  insertAuthorizationCode,
  insertGrant,
  insertRefreshToken,
  redeemAuthorizationCodes,
  rotateRefreshTokens,
  type Redemption,
  type Rotation,
} from '../../src/storage/repos/grants.js';
import { makeApp, insertTestUser } from '../helpers/factories.js';
import { StatementRecorder } from '../helpers/statements.js';
import { TEST_DIALECT, useMigratedTestStorage } from '../helpers/app.js';

// Concurrent rotations and redemptions share one write: on PostgreSQL one statement, on SQLite one
// transaction (docs/adr/0004-coalesced-statements.md). What each one decides must be what it
// would decide alone: exactly one winner per token or code, nothing stored for a loser, the basis it saw.

const NOW = 1_800_000_000;
let serial = 0;
const unique = (prefix: string) => `${prefix}_${process.pid}_${++serial}`;

async function grantWithToken(db: Kysely<Database>, appId: string, userId: string): Promise<{ grantId: string; tokenHash: string }> {
  const grantId = unique('grt');
  await insertGrant(db, { id: grantId, app_id: appId, user_id: userId, scope: 'openid', auth_time: NOW, amr: null, nonce: null, created_at: NOW, expires_at: NOW + 3600, revoked_at: null, revoked_reason: null, awaiting_completion: AWAITING.nothing });
  const tokenHash = unique('rth');
  await insertRefreshToken(db, { token_hash: tokenHash, grant_id: grantId, app_id: appId, scope: 'openid', created_at: NOW, expires_at: NOW + 3600 });
  return { grantId, tokenHash };
}

const rotation = (tokenHash: string, grantId: string, appId: string): Rotation => ({
  tokenHash,
  at: NOW + 10,
  sealedResponse: `sealed-${tokenHash}`,
  successor: { token_hash: unique('succ'), grant_id: grantId, app_id: appId, scope: 'openid', created_at: NOW + 10, expires_at: NOW + 3600 },
});

describe('batched grant writes', () => {
  const database = useMigratedTestStorage();

  it('rotations in one statement: each token rotates once, a token asked twice or already rotated stores no second successor', async () => {
    const db = database.storage.db;
    const app = await makeApp(db);
    const user = await insertTestUser(db);
    const [a, b, c] = [await grantWithToken(db, app.id, user.id), await grantWithToken(db, app.id, user.id), await grantWithToken(db, app.id, user.id)];
    const early = rotation(c.tokenHash, c.grantId, app.id);
    expect(await rotateRefreshTokens(db, TEST_DIALECT, [early])).toEqual(new Set([early.successor.token_hash]));

    const asked = [rotation(a.tokenHash, a.grantId, app.id), rotation(b.tokenHash, b.grantId, app.id), rotation(a.tokenHash, a.grantId, app.id), rotation(c.tokenHash, c.grantId, app.id)];
    const recorder = new StatementRecorder();
    let won = new Set<string>();
    const seen = await recorder.during(async () => {
      won = await rotateRefreshTokens(db.withPlugin(recorder), TEST_DIALECT, asked);
    });
    // SQLite: each rotation's conditional UPDATE, and the successor's INSERT for the winners, in one transaction.
    expect(seen).toEqual(TEST_DIALECT === 'postgres' ? ['rawnode -'] : ['update refresh_tokens', 'insert refresh_tokens', 'update refresh_tokens', 'insert refresh_tokens', 'update refresh_tokens', 'update refresh_tokens']);
    // b won; of a's two rotations exactly one; c was rotated before.
    expect(won.has(asked[1]!.successor.token_hash)).toBe(true);
    expect([won.has(asked[0]!.successor.token_hash), won.has(asked[2]!.successor.token_hash)].filter(Boolean)).toHaveLength(1);
    expect(won.has(asked[3]!.successor.token_hash)).toBe(false);
    expect(won.size).toBe(2);
    // What won is stored and linked; what lost is not.
    const rotatedA = await findRefreshToken(db, a.tokenHash);
    const winnerA = won.has(asked[0]!.successor.token_hash) ? asked[0]! : asked[2]!;
    expect(rotatedA).toMatchObject({ consumed_at: NOW + 10, successor_hash: winnerA.successor.token_hash, successor_response: `sealed-${a.tokenHash}` });
    for (const lost of [asked[0]!, asked[2]!, asked[3]!].filter((r) => !won.has(r.successor.token_hash))) expect(await findRefreshToken(db, lost.successor.token_hash)).toBeUndefined();
    expect((await findRefreshToken(db, c.tokenHash))?.successor_hash).toBe(early.successor.token_hash);
  });

  it('redemptions in one statement: each code redeems once, with the basis the statement saw; a loser stores no grant', async () => {
    const db = database.storage.db;
    const app = await makeApp(db);
    const user = await insertTestUser(db);
    const codeHashes = [unique('ach'), unique('ach')];
    for (const code_hash of codeHashes) {
      await insertAuthorizationCode(db, {
        code_hash, app_id: app.id, user_id: user.id, redirect_uri: 'https://r.example/cb', scope: 'openid', code_challenge: null, nonce: null,
        auth_time: NOW, amr: null, created_at: NOW, expires_at: NOW + 60, consumed_at: null, grant_id: null,
      });
    }
    const redemption = (codeHash: string): Redemption => {
      const grantId = unique('grt');
      return {
        codeHash,
        at: NOW + 5,
        grant: { id: grantId, app_id: app.id, user_id: user.id, scope: 'openid', auth_time: NOW, amr: null, nonce: null, created_at: NOW + 5, expires_at: NOW + 3600, revoked_at: null, revoked_reason: null, awaiting_completion: AWAITING.nothing },
        refreshToken: { token_hash: unique('rth'), grant_id: grantId, app_id: app.id, scope: 'openid', created_at: NOW + 5, expires_at: NOW + 3600 },
      };
    };
    const asked = [redemption(codeHashes[0]!), redemption(codeHashes[1]!), redemption(codeHashes[0]!)];
    const recorder = new StatementRecorder();
    let won = new Map<string, unknown>();
    const seen = await recorder.during(async () => {
      won = await redeemAuthorizationCodes(db.withPlugin(recorder), TEST_DIALECT, asked);
    });
    const redeem = ['update authorization_codes', 'select authorization_codes', 'insert grants', 'insert refresh_tokens'];
    expect(seen).toEqual(TEST_DIALECT === 'postgres' ? ['select consumed'] : [...redeem, ...redeem, 'update authorization_codes']);
    expect(won.size).toBe(2);
    expect(won.get(asked[1]!.grant.id)).toMatchObject({ code: { code_hash: codeHashes[1], consumed_at: NOW + 5, grant_id: asked[1]!.grant.id }, user: { id: user.id } });
    const firstCodeWinner = [asked[0]!, asked[2]!].filter((r) => won.has(r.grant.id));
    expect(firstCodeWinner).toHaveLength(1);
    const loser = [asked[0]!, asked[2]!].find((r) => !won.has(r.grant.id))!;
    const grants = await db.selectFrom('grants').select('id').where('id', 'in', asked.map((r) => r.grant.id)).execute();
    expect(grants.map((g) => g.id).sort()).toEqual([firstCodeWinner[0]!.grant.id, asked[1]!.grant.id].sort());
    expect(await findRefreshToken(db, loser.refreshToken.token_hash)).toBeUndefined();
    // A code already consumed is not redeemed again.
    expect((await redeemAuthorizationCodes(db, TEST_DIALECT, [redemption(codeHashes[1]!)])).size).toBe(0);
  });
});
