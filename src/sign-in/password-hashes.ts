import { verify as argon2Verify } from '@node-rs/argon2';
import bcrypt from 'bcryptjs';
import { createCipheriv, pbkdf2, scrypt, timingSafeEqual } from 'node:crypto';
import { promisify } from 'node:util';

/**
 * Password hashes brought in by a user import (docs/guides/migrating-users.md): which formats are
 * accepted, the bounds on their cost parameters, and how each is verified. One rule for every door:
 * `auth/passwords.ts` verifies through it, the import checks rows with it.
 *
 * - bcrypt `$2a$`, `$2b$`, `$2y$` (bcryptjs; `$2y$` is PHP's name for `$2b$`);
 * - argon2id and argon2i PHC strings (`@node-rs/argon2`);
 * - scrypt PHC `$scrypt$ln=…,r=…,p=…$salt$hash` (node:crypto);
 * - PBKDF2-SHA256/SHA512 PHC (`$pbkdf2-sha256$i=…$salt$hash`, also passlib's `$pbkdf2-sha256$29000$…`)
 *   and Django's `pbkdf2_sha256$iterations$salt$hash` (node:crypto);
 * - Firebase's modified scrypt, stored as `$firebase-scrypt$r=…,m=…$separator$signerKey$salt$hash`
 *   (all standard base64): scrypt of the password with salt+separator, then AES-256-CTR of the project's
 *   signer key under that key (as github.com/firebase/scrypt).
 *
 * Cost parameters are bounded so that one stored hash cannot make a sign-in take seconds or hundreds of
 * megabytes. Verification compares in constant time and never throws: a malformed stored hash is a
 * wrong password.
 */

export type HashFormat = 'argon2id' | 'argon2i' | 'bcrypt' | 'scrypt' | 'pbkdf2-sha256' | 'pbkdf2-sha512' | 'django-pbkdf2-sha256' | 'firebase-scrypt';

/** Bounds on imported cost parameters (see above). */
export const HASH_BOUNDS = {
  bcryptCost: { min: 4, max: 15 },
  /** KiB of an argon2 computation. */
  argon2MemoryKiB: 131_072,
  argon2Passes: 1024,
  /** Memory (KiB) times passes: many passes over little memory (Logto's argon2i) or few over much, never both. */
  argon2Work: 4 * 1024 * 1024,
  argon2Lanes: 8,
  /** Bytes of an scrypt computation (128·N·r). */
  scryptMemoryBytes: 128 * 1024 * 1024,
  scryptParallel: 4,
  pbkdf2Iterations: 2_000_000,
} as const;

/** The parameters of a Firebase project's password hashes (its console's "password hash parameters"). */
export interface FirebaseScryptParams {
  signerKey: Buffer;
  saltSeparator: Buffer;
  rounds: number;
  memCost: number;
}

type Parsed =
  | { format: 'argon2id' | 'argon2i'; phc: string }
  | { format: 'bcrypt'; hash: string }
  | { format: 'scrypt'; n: number; r: number; p: number; salt: Buffer; hash: Buffer }
  | { format: 'pbkdf2-sha256' | 'pbkdf2-sha512' | 'django-pbkdf2-sha256'; digest: 'sha256' | 'sha512'; iterations: number; salt: Buffer; hash: Buffer }
  | { format: 'firebase-scrypt'; params: FirebaseScryptParams; salt: Buffer; hash: Buffer };

const B64 = /^[A-Za-z0-9+/.]*={0,2}$/;

/** Standard base64 with or without padding; passlib's "adapted" base64 writes `.` for `+`. */
function base64(text: string | undefined): Buffer | null {
  if (text === undefined || !B64.test(text)) return null;
  return Buffer.from(text.replace(/\./g, '+'), 'base64');
}

const int = (text: string | undefined): number | null => (text !== undefined && /^[0-9]{1,9}$/.test(text) ? Number(text) : null);

function phcParams(text: string | undefined): Map<string, number> | null {
  if (!text) return null;
  const out = new Map<string, number>();
  for (const part of text.split(',')) {
    const [key, value] = part.split('=');
    const n = int(value);
    if (!key || n === null) return null;
    out.set(key, n);
  }
  return out;
}

// The parameters in any order: the C reference implementation writes `m=…,p=…,t=…`.
const ARGON2 = /^\$(argon2id|argon2i)\$v=19\$([mtp]=[0-9]{1,9},[mtp]=[0-9]{1,9},[mtp]=[0-9]{1,9})\$[A-Za-z0-9+/]{11,}\$[A-Za-z0-9+/]{16,}$/;
const BCRYPT = /^\$2[aby]\$([0-9]{2})\$[./A-Za-z0-9]{53}$/;

function scryptOk(n: number, r: number, p: number): boolean {
  return n >= 2 && (n & (n - 1)) === 0 && r >= 1 && p >= 1 && p <= HASH_BOUNDS.scryptParallel && 128 * n * r <= HASH_BOUNDS.scryptMemoryBytes;
}

export function firebaseParamsOk(params: FirebaseScryptParams): boolean {
  return (
    params.signerKey.length >= 16 &&
    params.signerKey.length <= 128 &&
    params.saltSeparator.length <= 64 &&
    Number.isInteger(params.rounds) &&
    Number.isInteger(params.memCost) &&
    params.memCost >= 1 &&
    params.memCost <= 30 &&
    scryptOk(2 ** params.memCost, params.rounds, 1)
  );
}

/** The stored form of a Firebase hash: the user's salt and hash with the project's parameters. */
export function firebaseStoredHash(params: FirebaseScryptParams, salt: Buffer, hash: Buffer): string {
  return `$firebase-scrypt$r=${params.rounds},m=${params.memCost}$${params.saltSeparator.toString('base64')}$${params.signerKey.toString('base64')}$${salt.toString('base64')}$${hash.toString('base64')}`;
}

/** The stored hash parsed, or null when it is no accepted format or its parameters are out of bounds. */
export function parsePasswordHash(stored: string): Parsed | null {
  if (stored.length > 1024) return null;
  const argon = ARGON2.exec(stored);
  if (argon) {
    const params = phcParams(argon[2]);
    const [m, t, p] = [params?.get('m') ?? 0, params?.get('t') ?? 0, params?.get('p') ?? 0];
    if (m < 8 * p || m > HASH_BOUNDS.argon2MemoryKiB || t < 1 || t > HASH_BOUNDS.argon2Passes || m * t > HASH_BOUNDS.argon2Work || p < 1 || p > HASH_BOUNDS.argon2Lanes) return null;
    return { format: argon[1] as 'argon2id' | 'argon2i', phc: stored };
  }
  const bc = BCRYPT.exec(stored);
  if (bc) {
    const cost = Number(bc[1]);
    if (cost < HASH_BOUNDS.bcryptCost.min || cost > HASH_BOUNDS.bcryptCost.max) return null;
    return { format: 'bcrypt', hash: stored };
  }
  const parts = stored.split('$');
  if (stored.startsWith('pbkdf2_sha256$') && parts.length === 4) {
    // Django: the salt is used as its text, the hash is standard base64.
    const iterations = int(parts[1]);
    const hash = base64(parts[3]);
    if (iterations === null || !parts[2] || !hash || hash.length < 16) return null;
    if (iterations < 1 || iterations > HASH_BOUNDS.pbkdf2Iterations) return null;
    return { format: 'django-pbkdf2-sha256', digest: 'sha256', iterations, salt: Buffer.from(parts[2], 'utf8'), hash };
  }
  if (parts[0] !== '') return null;
  const kind = parts[1];
  if ((kind === 'pbkdf2-sha256' || kind === 'pbkdf2-sha512') && parts.length === 5) {
    const iterations = parts[2]?.startsWith('i=') ? int(parts[2].slice(2)) : int(parts[2]);
    const salt = base64(parts[3]);
    const hash = base64(parts[4]);
    if (iterations === null || iterations < 1 || iterations > HASH_BOUNDS.pbkdf2Iterations || !salt || !hash || hash.length < 16) return null;
    return { format: kind, digest: kind === 'pbkdf2-sha256' ? 'sha256' : 'sha512', iterations, salt, hash };
  }
  if (kind === 'scrypt' && parts.length === 5) {
    const params = phcParams(parts[2]);
    const ln = params?.get('ln');
    const r = params?.get('r');
    const p = params?.get('p');
    const salt = base64(parts[3]);
    const hash = base64(parts[4]);
    if (ln === undefined || r === undefined || p === undefined || ln > 30 || !salt || !hash || hash.length < 16 || !scryptOk(2 ** ln, r, p)) return null;
    return { format: 'scrypt', n: 2 ** ln, r, p, salt, hash };
  }
  if (kind === 'firebase-scrypt' && parts.length === 7) {
    const params = phcParams(parts[2]);
    const rounds = params?.get('r');
    const memCost = params?.get('m');
    const [saltSeparator, signerKey, salt, hash] = [base64(parts[3]), base64(parts[4]), base64(parts[5]), base64(parts[6])];
    if (rounds === undefined || memCost === undefined || !saltSeparator || !signerKey || !salt || !hash || hash.length !== signerKey.length) return null;
    const fb = { signerKey, saltSeparator, rounds, memCost };
    if (!firebaseParamsOk(fb)) return null;
    return { format: 'firebase-scrypt', params: fb, salt, hash };
  }
  return null;
}

const scryptAsync = promisify(scrypt) as (password: Buffer, salt: Buffer, keylen: number, options: { N: number; r: number; p: number; maxmem: number }) => Promise<Buffer>;
const pbkdf2Async = promisify(pbkdf2);

const equal = (a: Buffer, b: Buffer): boolean => a.length === b.length && timingSafeEqual(a, b);

async function firebaseHash(password: Buffer, params: FirebaseScryptParams, salt: Buffer): Promise<Buffer> {
  const n = 2 ** params.memCost;
  const key = await scryptAsync(password, Buffer.concat([salt, params.saltSeparator]), 32, { N: n, r: params.rounds, p: 1, maxmem: 256 * n * params.rounds });
  const cipher = createCipheriv('aes-256-ctr', key, Buffer.alloc(16));
  return Buffer.concat([cipher.update(params.signerKey), cipher.final()]);
}

async function verifyParsed(parsed: Parsed, password: string): Promise<boolean> {
  const secret = Buffer.from(password, 'utf8');
  switch (parsed.format) {
    case 'argon2id':
    case 'argon2i':
      return argon2Verify(parsed.phc, password);
    case 'bcrypt':
      return bcrypt.compare(password, parsed.hash.replace(/^\$2y\$/, '$2b$'));
    case 'scrypt': {
      const key = await scryptAsync(secret, parsed.salt, parsed.hash.length, { N: parsed.n, r: parsed.r, p: parsed.p, maxmem: 256 * parsed.n * parsed.r });
      return equal(key, parsed.hash);
    }
    case 'pbkdf2-sha256':
    case 'pbkdf2-sha512':
    case 'django-pbkdf2-sha256':
      return equal(await pbkdf2Async(secret, parsed.salt, parsed.iterations, parsed.hash.length, parsed.digest), parsed.hash);
    case 'firebase-scrypt':
      return equal(await firebaseHash(secret, parsed.params, parsed.salt), parsed.hash);
  }
}

/**
 * Whether `password` matches a stored hash of any accepted format. False, never a throw, for a hash
 * that is malformed or out of bounds (a bad row from an old import cannot break sign-in).
 */
export async function verifyAnyPasswordHash(stored: string, password: string): Promise<boolean> {
  const parsed = parsePasswordHash(stored);
  if (!parsed) return false;
  try {
    return await verifyParsed(parsed, password);
  } catch {
    return false;
  }
}

/** The argon2 variant and parameters of a stored argon2 hash (any parameter order), or null. */
export function argon2Parameters(stored: string): { variant: 'argon2id' | 'argon2i'; m: number; t: number; p: number } | null {
  const argon = ARGON2.exec(stored);
  const params = argon && phcParams(argon[2]);
  if (!argon || !params) return null;
  return { variant: argon[1] as 'argon2id' | 'argon2i', m: params.get('m') ?? 0, t: params.get('t') ?? 0, p: params.get('p') ?? 0 };
}

/** The format of an accepted stored hash, or null. */
export const passwordHashFormat = (stored: string): HashFormat | null => parsePasswordHash(stored)?.format ?? null;

/** Computes a Firebase hash for the password (tests and documentation: the export of a Firebase project). */
export const firebaseScryptHash = (password: string, params: FirebaseScryptParams, salt: Buffer): Promise<Buffer> => firebaseHash(Buffer.from(password, 'utf8'), params, salt);
