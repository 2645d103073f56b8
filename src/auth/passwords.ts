import { hash as argon2Hash, verify as argon2Verify, type Algorithm, type Options as Argon2Options } from '@node-rs/argon2';
import { availableParallelism } from 'node:os';
import { argon2Parameters, verifyAnyPasswordHash } from '../sign-in/password-hashes.js';
import { PASSWORD_MAX } from '../sign-in/password-policy.js';
import { threadPoolSize } from '../shared/thread-pool.js';
import { createTurns, type TurnStats, type TurnTerms } from '../shared/turns.js';

/**
 * Password hashing (docs/reference/rest-api.md#passwords, docs/security/checklist.md#passwords); the rules a
 * new password must meet are sign-in/password-policy.ts (per app, docs/guides/password-policy.md):
 * - NFC-normalised before hashing and before every comparison;
 * - argon2id, memory 19 MiB, 2 passes, parallelism 1 (OWASP minimum), version 0x13, a 16-byte salt
 *   and a 32-byte output, stored as a PHC string (`$argon2id$v=19$m=19456,t=2,p=1$…`).
 *
 * The implementation is `@node-rs/argon2` (RustCrypto's argon2, which picks its AVX2 code at run time):
 * the same parameters and PHC strings as the C reference implementation (`argon2` on npm, used before),
 * in about half its time on this project's machines (docs/adr/0009-password-line.md). Hashes stored by
 * either verify with the other.
 */

/** A request field longer than this (UTF-16 units) cannot be a valid password: refused before any hashing. */
export const PASSWORD_FIELD_MAX = PASSWORD_MAX * 2;

/** `Algorithm` is a const enum the package does not export at run time; 2 is its `Argon2id`. */
const ARGON2ID = 2 as Algorithm;

export const ARGON2_OPTIONS: Readonly<Argon2Options> = { algorithm: ARGON2ID, memoryCost: 19456, timeCost: 2, parallelism: 1, outputLen: 32 };

export const normalizePassword = (password: string): string => password.normalize('NFC');

/**
 * How many argon2 computations run at once: one per core plus one, but never on every thread of
 * libuv's pool (and never none).
 *
 * Each computation is CPU-bound, so more at once gain no throughput. The one extra keeps the cores busy
 * while a finished computation's turn is handed on by the main thread (which may be in a COMMIT's fsync
 * just then): with exactly one per core, a quarter of the argon2 ceiling was lost in those gaps
 * (bench/RESULTS.md, "http"). The free thread is for everything else the pool runs: ES256
 * verifications, RS256 signatures, file reads. Were every thread holding a 13 ms computation, a login
 * burst would delay them all, and on a host of three cores or more the default pool of four threads is
 * exactly that. Server processes start with a pool one thread larger than the line
 * (bin/thread-pool-size.cjs); a smaller UV_THREADPOOL_SIZE set by the operator shortens the line instead
 * (docs/adr/0009-password-line.md).
 */
export function passwordChecksAtOnce(cores: number, poolThreads: number): number {
  return Math.max(1, Math.min(cores + 1, poolThreads - 1));
}

/**
 * The argon2 line: computations beyond passwordChecksAtOnce wait in arrival order. A computation is
 * skipped when its turn comes if its client has gone (it would cost ~13 ms of a core for an answer
 * nobody reads) or if it has waited over its bound (the line is overloaded: the caller answers 503 with
 * Retry-After rather than hang).
 */
const argon2Turns = createTurns(passwordChecksAtOnce(availableParallelism(), threadPoolSize(process.env.UV_THREADPOOL_SIZE)));

/** The argon2 queue as `/metrics` shows it: how many may run at once, running and waiting, done and skipped. */
export const passwordHashingStats = (): TurnStats => argon2Turns.stats();

/** Hashes a password; rejects with a TurnSkipped when `terms` say so at its turn. */
export async function hashPassword(password: string, terms?: TurnTerms): Promise<string> {
  return argon2Turns.run(() => argon2Hash(normalizePassword(password), ARGON2_OPTIONS), terms);
}

/**
 * Verifies a password against a stored hash; false (never a throw) for malformed hashes. Rejects with
 * a TurnSkipped, never false, when `terms` say so at its turn: nothing was evaluated.
 */
export async function verifyPassword(hash: string, password: string, terms?: TurnTerms): Promise<boolean> {
  if (hash.startsWith(OUR_ARGON2_PREFIX)) return argon2Turns.run(() => argon2Verify(hash, normalizePassword(password)).catch(() => false), terms);
  return argon2Turns.run(() => verifyImportedHash(hash, password), terms);
}

/** The PHC prefix of the hashes this version makes: any other stored hash is re-hashed at the next sign-in. */
const OUR_ARGON2_PREFIX = `$argon2id$v=19$m=${ARGON2_OPTIONS.memoryCost},t=${ARGON2_OPTIONS.timeCost},p=${ARGON2_OPTIONS.parallelism}$`;

/** Whether a stored hash is not one this version makes (imported, or other parameters): re-hash it at sign-in. */
export function needsRehash(hash: string): boolean {
  if (hash.startsWith(OUR_ARGON2_PREFIX)) return false;
  const argon = argon2Parameters(hash);
  return !(argon?.variant === 'argon2id' && argon.m === ARGON2_OPTIONS.memoryCost && argon.t === ARGON2_OPTIONS.timeCost && argon.p === ARGON2_OPTIONS.parallelism);
}

/**
 * An imported hash (src/sign-in/password-hashes.ts): the system it came from may not have normalised
 * passwords, so the password as typed is tried, then its NFC form when that differs.
 */
async function verifyImportedHash(hash: string, password: string): Promise<boolean> {
  if (await verifyAnyPasswordHash(hash, password)) return true;
  const normalized = normalizePassword(password);
  return normalized !== password && verifyAnyPasswordHash(hash, normalized);
}

let dummyHash: Promise<string> | undefined;

/**
 * One argon2 verification against a fixed dummy hash: the unknown-email path costs what the
 * known-email path costs (docs/security/checklist.md#enumeration-and-timing).
 */
export async function dummyVerify(password: string, terms?: TurnTerms): Promise<void> {
  await verifyPassword(await prepareDummyHash(), password, terms);
}

/** Computes the dummy hash once, ahead of the first login, so that request isn't slower than the rest. */
export function prepareDummyHash(): Promise<string> {
  return (dummyHash ??= argon2Turns.run(() => argon2Hash('gatehouse-dummy-password-for-timing', ARGON2_OPTIONS)));
}
