import type { App } from '../../src/storage/repos/apps.js';
import { recordAppSignIn } from '../../src/storage/repos/app-users.js';
import { newId } from '../../src/shared/ids.js';
import type { UserRow } from '../../src/storage/repos/users.js';
import type { TestApp } from './app.js';
import { insertTestUser } from './factories.js';

/**
 * Fast fixtures for profile / listing / legal tests: users without a password hash (no argon2 cost),
 * app membership as a completed sign-in records it, and tokens minted by the real token service.
 */

export function quickUser(t: TestApp, overrides: Partial<UserRow> = {}): Promise<UserRow> {
  return insertTestUser(t.db, { email: `u-${newId('x').slice(-12)}@example.com`, ...overrides }, t.clock.now());
}

/** Makes `user` a user of `app` at time `at` (default now), like a completed sign-in. */
export async function addMember(t: TestApp, app: App, user: UserRow, at = t.clock.now()): Promise<void> {
  await recordAppSignIn(t.db, app.id, user.id, at);
}

/** A real token response (access + refresh) for user at app, as after a sign-in. */
export async function tokensFor(t: TestApp, app: App, user: UserRow, scope = 'openid profile email') {
  const { response, grantId } = await t.app.tokens.issueTokens(t.db, { app, user, scope, authTime: t.clock.now(), amr: ['pwd'] });
  return { ...response, grantId };
}
