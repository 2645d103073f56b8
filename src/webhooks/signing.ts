import { createHmac, randomBytes } from 'node:crypto';

/**
 * Standard Webhooks signatures (docs/webhooks.md): the secret is `whsec_` + base64 of random bytes; a
 * signature is `v1,` + base64 HMAC-SHA256, under the secret's bytes, of `<webhook-id>.<webhook-timestamp>.<body>`.
 */

const SECRET_PREFIX = 'whsec_';

/** A new signing secret: `whsec_` + base64 of 32 random bytes. */
export function newSigningSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(32).toString('base64')}`;
}

function secretBytes(secret: string): Buffer {
  return Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64');
}

/** One `v1,<signature>` of a message under one secret. */
export function sign(secret: string, id: string, timestamp: number, body: string): string {
  return `v1,${createHmac('sha256', secretBytes(secret)).update(`${id}.${timestamp}.${body}`).digest('base64')}`;
}

/** The `webhook-signature` header: one signature per secret that signs now (two during a rotation's overlap), space-separated. */
export function signatureHeader(secrets: readonly string[], id: string, timestamp: number, body: string): string {
  return secrets.map((secret) => sign(secret, id, timestamp, body)).join(' ');
}
