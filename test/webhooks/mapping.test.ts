import { describe, expect, it } from 'vitest';
import { endpointWants, payloadFor, webhookFor, WEBHOOK_TYPES } from '../../src/shared/webhook-events.js';

// The mapping from audit events to webhooks and the payload shaping (docs/webhooks.md, "Events").

const U = 'usr_1';
const A = 'app_1';

describe('which audit event becomes which webhook', () => {
  const cases: Array<[string, { appId?: string | null; data?: Record<string, unknown> }, { type: string; scope: string; data: Record<string, unknown> } | null]> = [
    ['user.registered', { appId: A, data: { method: 'password' } }, { type: 'user.created', scope: 'user', data: { method: 'password' } }],
    ['email.verified', { data: { method: 'code' } }, { type: 'user.updated', scope: 'user', data: { fields: ['email_verified'] } }],
    ['profile.updated', { appId: A, data: { fields: ['name'], via: 'hosted' } }, { type: 'user.updated', scope: 'user', data: { fields: ['name'] } }],
    ['profile.updated', { appId: A, data: { version: 3 } }, { type: 'profile.updated', scope: 'app', data: { version: 3 } }],
    ['profile.updated', { appId: null, data: { version: 3 } }, null],
    ['user.email_changed', { data: { old_email: 'a@x.example', new_email: 'b@x.example', was_verified: true, method: 'code' } }, { type: 'user.email_changed', scope: 'user', data: { email: 'b@x.example', previous_email: 'a@x.example' } }],
    ['app.user_blocked', { appId: A, data: { developer_id: 'dev_1' } }, { type: 'user.blocked', scope: 'app', data: {} }],
    ['app.user_unblocked', { appId: A }, { type: 'user.unblocked', scope: 'app', data: {} }],
    ['user.disabled', {}, { type: 'user.disabled', scope: 'user', data: {} }],
    ['user.deletion_scheduled', { data: { scheduled_at: '2026-12-15T10:00:00.000Z', grace_days: 7, via: 'api' } }, { type: 'user.deletion_scheduled', scope: 'user', data: { purge_at: '2026-12-15T10:00:00.000Z' } }],
    ['user.deletion_cancelled', {}, { type: 'user.deletion_cancelled', scope: 'user', data: {} }],
    ['user.deleted', { appId: 'app_1' }, { type: 'user.deleted', scope: 'app', data: {} }],
    ['user.login_succeeded', { appId: A, data: { method: 'password', amr: ['pwd'] } }, { type: 'user.signed_in', scope: 'app', data: { method: 'password', amr: ['pwd'] } }],
    ['user.login_succeeded', { appId: null, data: { method: 'password' } }, null],
    ['user.signed_out', { appId: A }, { type: 'user.signed_out', scope: 'app', data: {} }],
    ['session.revoked', { appId: A, data: { grant_id: 'gr_1' } }, { type: 'grant.revoked', scope: 'app', data: { grant_id: 'gr_1', reason: 'session_revoked' } }],
    ['session.revoked', { appId: null, data: { session_id: 's' } }, null],
    ['token.refresh_reuse_detected', { appId: A, data: { grant_id: 'x' } }, { type: 'grant.revoked', scope: 'app', data: { reason: 'refresh_reuse' } }],
    ['mfa.enrolled', { data: { method: 'totp' } }, { type: 'mfa.enrolled', scope: 'user', data: { method: 'totp' } }],
    ['mfa.removed', { data: { method: 'totp', via: 'account' } }, { type: 'mfa.removed', scope: 'user', data: { method: 'totp' } }],
    ['mfa.reset', { data: { by: 'admin', totp: true } }, { type: 'mfa.removed', scope: 'user', data: { method: 'all', reason: 'admin_reset' } }],
    ['passkey.registered', { appId: null, data: { passkey_id: 'pk_1', scope: 'account', device_type: 'multiDevice' } }, { type: 'passkey.registered', scope: 'user', data: { passkey_id: 'pk_1' } }],
    ['passkey.registered', { appId: A, data: { passkey_id: 'pk_1', scope: 'app' } }, { type: 'passkey.registered', scope: 'app', data: { passkey_id: 'pk_1' } }],
    ['passkey.removed', { data: { passkey_id: 'pk_1' } }, { type: 'passkey.removed', scope: 'user', data: { passkey_id: 'pk_1' } }],
    ['consent.granted', { appId: A, data: { scope: 'openid email', via: 'consent' } }, { type: 'consent.granted', scope: 'app', data: { scope: 'openid email' } }],
    ['consent.revoked', { appId: A, data: { via: 'account' } }, { type: 'consent.revoked', scope: 'app', data: {} }],
    ['legal.accepted', { appId: A, data: { owner: 'platform', doc_type: 'terms', version: 2, lang: 'en' } }, { type: 'legal.accepted', scope: 'app', data: { document: 'terms', version: 2, lang: 'en', owner: 'platform' } }],
    ['user.login_failed', { appId: A, data: { known_user: true } }, null],
    ['password.reset_requested', { appId: A }, null],
    ['app.updated', { appId: A }, null],
  ];
  it.each(cases)('%s %j', (type, event, expected) => {
    expect(webhookFor({ type, userId: U, ...event })).toEqual(expected);
  });

  it('makes no webhook of a type named like an Object property', () => {
    expect(webhookFor({ type: 'constructor', appId: A, userId: U })).toBeNull();
    expect(webhookFor({ type: 'toString', appId: A, userId: U })).toBeNull();
  });

  it('makes no webhook of an event without a user', () => {
    expect(webhookFor({ type: 'user.registered', appId: A, userId: null })).toBeNull();
  });

  it('covers every webhook type the issue names', () => {
    for (const type of ['user.created', 'user.updated', 'user.email_changed', 'user.blocked', 'user.unblocked', 'user.disabled', 'user.deletion_scheduled', 'user.deleted', 'user.signed_in', 'user.signed_out', 'grant.revoked', 'mfa.enrolled', 'mfa.removed', 'passkey.registered', 'passkey.removed', 'consent.granted', 'consent.revoked', 'profile.updated', 'legal.accepted']) {
      expect(WEBHOOK_TYPES).toContain(type);
    }
  });
});

describe('the payload', () => {
  it('is {type, timestamp, data} with the receiving app and the user, and never the audit row\'s private fields', () => {
    const message = webhookFor({ type: 'user.login_succeeded', appId: A, userId: U, data: { method: 'password', amr: ['pwd'], ip: '203.0.113.9', token: 'rt_x', password_hash: '$argon2', code: '123456' } })!;
    const body = JSON.parse(payloadFor(message, U, A, 1_700_000_000));
    expect(body).toEqual({ type: 'user.signed_in', timestamp: '2023-11-14T22:13:20.000Z', data: { app_id: A, user_id: U, method: 'password', amr: ['pwd'] } });
  });

  it('names the receiving app, not the one the change happened at (a user-wide event reaches other apps)', () => {
    const message = webhookFor({ type: 'user.email_changed', appId: 'app_other', userId: U, data: { old_email: 'a@x.example', new_email: 'b@x.example' } })!;
    expect(JSON.parse(payloadFor(message, U, A, 0)).data).toEqual({ app_id: A, user_id: U, email: 'b@x.example', previous_email: 'a@x.example' });
  });

  it('keeps unknown grant-revocation reasons out', () => {
    expect(webhookFor({ type: 'grant.revoked', appId: A, userId: U, data: { reason: 'secret internal thing' } })!.data).toEqual({ reason: 'revoked' });
  });
});

describe('endpoint filters', () => {
  it.each([
    [[], 'user.created', true],
    [['user.created'], 'user.created', true],
    [['user.deleted'], 'user.created', false],
  ] as const)('%j wants %s: %s', (types, type, wanted) => {
    expect(endpointWants(types, type)).toBe(wanted);
  });
});
