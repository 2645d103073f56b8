import { randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { sha256, sha256Bytes } from './sha256.js';

/** 256-bit random secret, base64url, with a short type prefix. Only its hash is stored. */
export function newSecret(prefix: string): string {
  return `${prefix}_${randomBytes(32).toString('base64url')}`;
}

/**
 * A secret as newSecret, whose 256 random bits follow the millisecond it was minted (10 Crockford
 * characters, as in newId). Its stored key (hashSecret) begins with that time, so the secrets a table
 * stores one after another are keyed in order: a new row's key lands at the end of its index instead of
 * on a random page, and a SQLite commit of a batch of refreshes writes a third to a half fewer pages.
 * For the secrets minted on every sign-in and refresh: codes and refresh
 * tokens. The wall clock, not the injectable one: the time only orders keys (its seconds would not).
 */
export function newOrderedSecret(prefix: string): string {
  return orderedSecretOf(prefix, randomBytes(32));
}

/**
 * newOrderedSecret from 32 random bytes the caller drew (crypto.randomBytes) together with the other
 * random values of one response: one call to the generator instead of one per value
 * (docs/adr/0014-one-random-draw-per-token-response.md). The bytes must be fresh and used for nothing else.
 */
export function orderedSecretOf(prefix: string, random: Uint8Array): string {
  if (random.length !== 32) throw new Error('an ordered secret takes 32 random bytes');
  return `${prefix}_${encodeTime(Date.now())}${Buffer.from(random.buffer, random.byteOffset, 32).toString('base64url')}`;
}

/** A secret of newOrderedSecret's layout: prefix, time, and 43 base64url characters (256 bits). */
const ORDERED_SECRET = /^[a-z]{2,3}_([0-9a-hjkmnp-tv-z]{10})[A-Za-z0-9_-]{43}$/;

/**
 * The form in which a secret (code, token, key) is stored and looked up: its SHA-256 (base64url), preceded
 * by its time when it has newOrderedSecret's layout. The hash covers the whole secret, time included, so
 * changing the time gives another key; the time itself is no secret (the row records it anyway). Secrets
 * of the plain layout, including those minted before the ordered one existed, keep their plain key.
 */
export function hashSecret(value: string): string {
  const digest = sha256(value, 'base64url');
  const ordered = ORDERED_SECRET.exec(value);
  return ordered ? `${ordered[1]}${digest}` : digest;
}

const CROCKFORD = '0123456789abcdefghjkmnpqrstvwxyz';
let lastTime = 0;
let lastRandom: number[] = [];

/** A time (ms since the epoch) as 10 Crockford base32 characters (50 bits), which sort as the times do. */
function encodeTime(ms: number): string {
  let time = '';
  for (let t = ms, k = 0; k < 10; k++, t = Math.floor(t / 32)) time = CROCKFORD[t % 32] + time;
  return time;
}

/**
 * Opaque, time-ordered identifier (ULID layout, lowercase Crockford base32) with a type prefix.
 * Ids minted later in one process sort after earlier ones, so cursors and "newest first" can use them.
 */
export function newId(prefix: string): string {
  let now = Date.now();
  if (now <= lastTime) {
    now = lastTime;
    let i = lastRandom.length - 1;
    while (i >= 0 && lastRandom[i] === 31) lastRandom[i--] = 0;
    if (i >= 0) lastRandom[i]! += 1;
  } else {
    lastTime = now;
    lastRandom = Array.from(randomBytes(16), (b) => b & 31);
  }
  return `${prefix}_${encodeTime(now)}${lastRandom.map((d) => CROCKFORD[d]).join('')}`;
}

/**
 * An identifier of newId's layout from 16 random bytes the caller drew (as orderedSecretOf), for values
 * that must only be unique, never ordered (an access token's `jti`): unlike newId, two minted in the same
 * millisecond need not sort in the order they were minted.
 */
export function idOf(prefix: string, random: Uint8Array): string {
  if (random.length !== 16) throw new Error('an id takes 16 random bytes');
  let text = `${prefix}_${encodeTime(Date.now())}`;
  for (let i = 0; i < 16; i++) text += CROCKFORD[random[i]! & 31];
  return text;
}

/** A uniformly random numeric code (email codes, magic-link codes). */
export function newNumericCode(digits = 6): string {
  return String(randomInt(0, 10 ** digits)).padStart(digits, '0');
}

/** Constant-time string comparison (different lengths compare unequal without leaking where). */
export function safeEqual(a: string, b: string): boolean {
  return timingSafeEqual(sha256Bytes(a), sha256Bytes(b)) && a.length === b.length;
}
