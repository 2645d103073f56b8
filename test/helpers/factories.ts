import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { hashPassword } from '../../src/auth/passwords.js';
import { hashSecret, newId, newSecret } from '../../src/shared/ids.js';
import { epochSeconds } from '../../src/shared/time.js';
import { type App, defaultAppSettings, insertApp } from '../../src/storage/repos/apps.js';
import { insertDeveloper, type Developer } from '../../src/storage/repos/developers.js';
import { insertUser, normalizeEmail, type UserRow } from '../../src/storage/repos/users.js';
import type { Database } from '../../src/storage/schema.js';

/**
 * Test factories: rows inserted through the repos, with overrides. Generic on purpose: any feature's
 * tests may use them.
 */

export async function makeDeveloper(db: Kysely<Database>, overrides: Partial<Developer> = {}): Promise<Developer & { apiKey: string }> {
  const apiKey = newSecret('dk');
  const developer: Developer = { id: newId('dev'), email: `dev-${newId('x').slice(-8)}@example.com`, name: 'Test developer', createdAt: epochSeconds(), ...overrides };
  await insertDeveloper(db, developer, hashSecret(apiKey));
  return { ...developer, apiKey };
}

/** An app (public by default, Auth on, Profile on, no required fields). Pass `clientSecret` for a confidential one. */
export async function makeApp(db: Kysely<Database>, overrides: Partial<App> & { clientSecret?: string } = {}): Promise<App & { clientSecret?: string }> {
  const { clientSecret, ...rest } = overrides;
  const developerId = rest.developerId ?? (await makeDeveloper(db)).id;
  const now = epochSeconds();
  const app: App = {
    id: newId('app'),
    developerId,
    name: 'Test app',
    type: clientSecret ? 'confidential' : 'public',
    clientSecretHash: clientSecret ? hashSecret(clientSecret) : null,
    redirectUris: ['https://app.example/cb'],
    allowedOrigins: [],
    features: { auth: true, profile: true },
    requiredFields: [],
    mfa: 'optional',
    branding: { logoUrl: null, logoUrlDark: null, accentColor: null },
    defaultLocale: null,
    oauth: { dpopBoundAccessTokens: false, requirePushedAuthorizationRequests: false, deviceAuthorizationGrant: false },
    resourceUris: [],
    clientCredentials: { enabled: false, scopes: [], notBefore: null },
    backchannelLogout: { uri: null, sessionRequired: false },
    ...defaultAppSettings(),
    disabled: false,
    createdAt: now,
    updatedAt: now,
    ...rest,
  };
  await insertApp(db, app);
  return { ...app, clientSecret };
}

/**
 * An end user inserted through the repo, without a password (no argon2 cost). Overrides win; `now`
 * stamps the times (pass the test clock's time when expiry matters).
 */
export async function insertTestUser(db: Kysely<Database>, overrides: Partial<UserRow> = {}, now = epochSeconds()): Promise<UserRow> {
  const user: UserRow = {
    id: newId('usr'),
    email: `user-${newId('x').slice(-10)}@example.com`,
    email_verified: 0,
    password_hash: null,
    name: null,
    phone_number: null,
    birthdate: null,
    status: 'active',
    password_changed_at: null,
    created_at: now,
    updated_at: now,
    deletion_scheduled_at: null,
    locale: null,
    ...overrides,
  };
  await insertUser(db, user);
  return user;
}

/** A registered end user with a password (argon2id, like real registrations). */
export async function makeUser(
  app: FastifyInstance | { db: Kysely<Database> },
  input: { email?: string; password?: string } & Partial<Omit<UserRow, 'email' | 'password_hash'>> = {},
): Promise<UserRow & { password: string }> {
  const { email, password, ...rest } = input;
  const plain = password ?? 'correct horse battery staple';
  const user = await insertTestUser(app.db, {
    ...(email !== undefined ? { email: normalizeEmail(email) } : {}),
    password_hash: await hashPassword(plain),
    password_changed_at: epochSeconds(),
    ...rest,
  });
  return { ...user, password: plain };
}
