/**
 * Which audit event becomes which webhook, who may receive it, and what its payload says (docs/webhooks.md).
 * Pure: appendEvent (storage/repos/events.ts) calls it for every event, inside the change's transaction.
 *
 * A payload is built from an allow-list of fields per type, never by copying the audit data: the audit
 * row also holds the IP, the user agent and fields kept for the platform's own trail, and an app must
 * never learn another app's data (which app a sign-in was at, another app's profile or consent).
 */

export const WEBHOOK_TYPES = [
  'user.created',
  'user.updated',
  'user.email_changed',
  'user.blocked',
  'user.unblocked',
  'user.disabled',
  'user.enabled',
  'user.deletion_scheduled',
  'user.deletion_cancelled',
  'user.deleted',
  'user.signed_in',
  'user.signed_out',
  'grant.revoked',
  'mfa.enrolled',
  'mfa.removed',
  'passkey.registered',
  'passkey.removed',
  'consent.granted',
  'consent.revoked',
  'profile.updated',
  'legal.accepted',
] as const;

export type WebhookType = (typeof WEBHOOK_TYPES)[number];

/** The type of the message "send test event" sends to one endpoint; never the result of an audit event. */
export const WEBHOOK_TEST_TYPE = 'webhook.test';

/**
 * Who receives a webhook:
 * - `app`: only the app the audit event names (a sign-in, a consent, a block at that app): the event is
 *   about the user's relation with that app alone;
 * - `user`: every app the user is a user of at the moment of the change (an `app_users` row), and the
 *   app the event names (the one a registration happened at): the event is about the account itself.
 */
export type WebhookScope = 'app' | 'user';

export interface AuditEventInput {
  type: string;
  appId?: string | null;
  userId?: string | null;
  data?: Record<string, unknown>;
}

export interface WebhookMessage {
  type: WebhookType;
  scope: WebhookScope;
  /** The payload's `data` without `app_id` (added per receiving app: `payloadFor`). */
  data: Record<string, unknown>;
}

type Data = Record<string, unknown>;

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);
const textList = (value: unknown): string[] | undefined => (Array.isArray(value) && value.every((v) => typeof v === 'string') ? (value as string[]) : undefined);
const num = (value: unknown): number | undefined => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);

/** `fields` with only the keys whose value is defined (so a missing audit field is absent, not null). */
function defined(fields: Data): Data {
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value !== undefined));
}

/** The reasons a grant revocation may carry in a payload (never a token or its hash). */
const GRANT_REVOKE_REASONS = new Set(['signed_out', 'revoked', 'refresh_reuse', 'blocked', 'user_disabled', 'consent_revoked', 'session_revoked', 'password_changed', 'deleted']);

/** One rule per audit event type that becomes a webhook; `null` from a rule: no webhook for this one. */
type Rule = (data: Data, event: AuditEventInput) => WebhookMessage | null;

const app = (type: WebhookType, data: Data): WebhookMessage => ({ type, scope: 'app', data: defined(data) });
const user = (type: WebhookType, data: Data): WebhookMessage => ({ type, scope: 'user', data: defined(data) });

const RULES: Record<string, Rule> = {
  'user.registered': (d) => user('user.created', { method: text(d.method) }),
  'email.verified': () => user('user.updated', { fields: ['email_verified'] }),
  // Two writers record `profile.updated`: the account's own fields (with `fields`), and an app's profile
  // document (with `version`), which is that app's data alone.
  'profile.updated': (d) => {
    const fields = textList(d.fields);
    if (fields) return user('user.updated', { fields });
    return app('profile.updated', { version: num(d.version) });
  },
  'profile.deleted': () => app('profile.updated', { deleted: true }),
  'user.email_changed': (d) => user('user.email_changed', { email: text(d.new_email), previous_email: text(d.old_email) }),
  'app.user_blocked': () => app('user.blocked', {}),
  'app.user_unblocked': () => app('user.unblocked', {}),
  'user.disabled': () => user('user.disabled', {}),
  'user.enabled': () => user('user.enabled', {}),
  'user.deletion_scheduled': (d) => user('user.deletion_scheduled', { purge_at: text(d.scheduled_at) }),
  'user.deletion_cancelled': () => user('user.deletion_cancelled', {}),
  // The purge records one per app the person belonged to (docs/account/deletion.md): each goes to its app.
  'user.deleted': () => app('user.deleted', {}),
  'user.login_succeeded': (d) => app('user.signed_in', { method: text(d.method), amr: textList(d.amr) }),
  'user.signed_out': () => app('user.signed_out', {}),
  'session.revoked': (d, e) => (e.appId ? app('grant.revoked', { grant_id: text(d.grant_id) ?? text(d.session_id), reason: 'session_revoked' }) : null),
  'token.refresh_reuse_detected': () => app('grant.revoked', { reason: 'refresh_reuse' }),
  'grant.revoked': (d) => {
    const reason = text(d.reason);
    return app('grant.revoked', { grant_id: text(d.grant_id), reason: reason && GRANT_REVOKE_REASONS.has(reason) ? reason : 'revoked' });
  },
  'mfa.enrolled': (d) => user('mfa.enrolled', { method: text(d.method) ?? 'totp' }),
  'mfa.removed': (d) => user('mfa.removed', { method: text(d.method) ?? 'totp' }),
  'mfa.reset': () => user('mfa.removed', { method: 'all', reason: 'admin_reset' }),
  // A passkey registered through an app's token signs in only there: that app's business alone.
  'passkey.registered': (d, e) => (d.scope === 'app' && e.appId ? app : user)('passkey.registered', { passkey_id: text(d.passkey_id) }),
  'passkey.removed': (d, e) => (d.scope === 'app' && e.appId ? app : user)('passkey.removed', { passkey_id: text(d.passkey_id) }),
  'consent.granted': (d) => app('consent.granted', { scope: text(d.scope) }),
  'consent.revoked': () => app('consent.revoked', {}),
  'legal.accepted': (d) => app('legal.accepted', { document: text(d.doc_type), version: num(d.version), lang: text(d.lang), owner: d.owner === 'platform' ? 'platform' : 'app' }),
};

/** The webhook an audit event becomes, or null (not every audit event is one; none without a user). */
export function webhookFor(event: AuditEventInput): WebhookMessage | null {
  if (!event.userId) return null;
  if (!Object.hasOwn(RULES, event.type)) return null;
  const rule = RULES[event.type]!;
  const message = rule(event.data ?? {}, event);
  if (message?.scope === 'app' && !event.appId) return null;
  return message;
}

/** Whether an audit event type can become a webhook at all (cheap: no payload built). */
export function mayBecomeWebhook(type: string): boolean {
  return Object.hasOwn(RULES, type);
}

/** The JSON body delivered to `appId` (Standard Webhooks: `{type, timestamp, data}`). */
export function payloadFor(message: Pick<WebhookMessage, 'type' | 'data'> | { type: string; data: Data }, userId: string | null, appId: string, at: number): string {
  return JSON.stringify({ type: message.type, timestamp: new Date(at * 1000).toISOString(), data: { app_id: appId, ...(userId ? { user_id: userId } : {}), ...message.data } });
}

/** Whether an endpoint listening to `types` ([] = all) wants `type`. */
export function endpointWants(types: readonly string[], type: string): boolean {
  return types.length === 0 || types.includes(type);
}
