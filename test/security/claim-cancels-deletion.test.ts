import { afterEach, describe, expect, it } from 'vitest';
import { buildTestApp, FrozenClock, nextWindowStart, type TestApp } from '../helpers/app.js';
import { bearer } from '../helpers/dev-api.js';
import { makeApp } from '../helpers/factories.js';
import { uniqueEmail } from '../helpers/oauth-flows.js';

/**
 * A squatter who registered someone else's address (unverified) and scheduled the account's deletion
 * must not get to delete it once the mailbox owner claims it (docs/account/deletion.md, "Claiming an
 * account"): the claim revokes whatever the registrant did, the scheduled deletion among it. The attack
 * runs first; time moves only through the app's clock.
 */

const opened: TestApp[] = [];
afterEach(async () => {
  for (const t of opened.splice(0)) await t.close();
});

const DAY = 86400;

describe('an account claim cancels a deletion the registrant scheduled', () => {
  it('squatter registers, schedules deletion; the owner proves the address by magic link; the purge after the grace deletes nothing', async () => {
    const t = await buildTestApp({
      env: { IP_AUTH_PER_MINUTE: '100000', MAIL_PER_HOUR: '1000', MAIL_INTERVAL_SECONDS: '0', ACCOUNT_DELETION_GRACE_DAYS: '7' },
      clock: new FrozenClock(nextWindowStart(3600)),
    });
    opened.push(t);
    const client = await makeApp(t.db);
    const email = uniqueEmail('victim');
    const password = 'squatter chosen passphrase';
    const post = (url: string, payload: Record<string, unknown>, headers: Record<string, string> = {}) => t.app.inject({ method: 'POST', url, payload, headers });

    // Attack: register the victim's address and schedule the account's deletion with the squatter's own credential.
    const squatter = (await post('/v1/auth/register', { email, password, client_id: client.id })).json();
    const scheduled = await t.app.inject({ method: 'DELETE', url: '/v1/auth/account', payload: { password }, headers: bearer(squatter.access_token) });
    expect(scheduled.statusCode, scheduled.body).toBe(202);
    const userId = squatter.user.id as string;
    const row = () => t.db.selectFrom('users').select(['id', 'deletion_scheduled_at', 'email_verified']).where('id', '=', userId).executeTakeFirst();
    expect((await row())!.deletion_scheduled_at).not.toBeNull();

    // The owner proves the address (REST magic link): the claim.
    await post('/v1/auth/magic-link/request', { email, client_id: client.id });
    const mail = (await t.app.mailer.recent(50)).find((m) => m.to === email && m.kind === 'magic_link')!;
    const token = new URL(/(?:^|\s)([a-z][a-z0-9+.-]*:\/\S+)/.exec(mail.text)![1]!).searchParams.get('token');
    const claimed = await post('/v1/auth/magic-link/verify', { token, client_id: client.id });
    expect(claimed.statusCode, claimed.body).toBe(200);
    expect(await row()).toMatchObject({ deletion_scheduled_at: null, email_verified: 1 });
    const cancelled = await t.db.selectFrom('events').select(['type', 'data']).where('user_id', '=', userId).where('type', '=', 'user.deletion_cancelled').execute();
    expect(cancelled.map((e) => JSON.parse(e.data).via)).toEqual(['claim']);

    // After the grace the purge finds nothing to delete: the owner keeps the account.
    t.clock.advance(8 * DAY);
    await t.app.accountDeletion.purgeDue(t.db, t.clock.now(), 100);
    expect(await row()).toBeDefined();
    expect(await t.db.selectFrom('events').select('id').where('user_id', '=', userId).where('type', '=', 'user.deleted').execute()).toHaveLength(0);
  });
});
