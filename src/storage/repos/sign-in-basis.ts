import type { Kysely } from 'kysely';
import { precompiled } from '../precompiled.js';
import type { Database } from '../schema.js';
import { type FactorSummary, factorSummaryColumns, toFactorSummary } from './factors.js';

/**
 * What the sign-in policy judges a user's sign-in to an app on, besides the user row: the user's
 * membership of the app (a developer may have blocked them), the scope they consented to there, and
 * the second factors they have set up.
 */
export interface SignInBasis {
  membership: { status: 'active' | 'blocked' } | undefined;
  consentedScope: string;
  factors: FactorSummary;
}

// One statement: every door asks this of every sign-in (a password login is one of its hot paths).
const selectSignInBasis = precompiled((db, appId: string, userId: string) =>
  db.selectNoFrom((eb) => [
    eb.selectFrom('app_users').select('status').where('app_id', '=', appId).where('user_id', '=', userId).as('m_status'),
    eb.selectFrom('consents').select('scope').where('app_id', '=', appId).where('user_id', '=', userId).as('k_scope'),
    ...factorSummaryColumns(eb, userId),
  ]),
);

export async function findSignInBasis(db: Kysely<Database>, appId: string, userId: string): Promise<SignInBasis> {
  const row = (await selectSignInBasis(db, appId, userId)).rows[0]!;
  return {
    membership: row.m_status === null ? undefined : { status: row.m_status },
    consentedScope: row.k_scope ?? '',
    factors: toFactorSummary(row),
  };
}
