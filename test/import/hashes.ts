import { hash as argon2Hash, type Algorithm } from '@node-rs/argon2';
import bcrypt from 'bcryptjs';
import { pbkdf2Sync, randomBytes, scryptSync } from 'node:crypto';

/**
 * Password hashes made by each format's own library, as the system a user comes from stored them
 * (docs/guides/migrating-users.md). Cheap parameters: the tests verify formats, not cost.
 */

const b64 = (buffer: Buffer): string => buffer.toString('base64').replace(/=+$/, '');

/** Firebase's published test vector (github.com/firebase/scrypt, README): the hash of `user1password`. */
export const FIREBASE_VECTOR = {
  params: {
    base64_signer_key: 'jxspr8Ki0RYycVU8zykbdLGjFQ3McFUH0uiiTvC8pVMXAn210wjLNmdZJzxUECKbm0QsEmYUSDzZvpjeJ9WmXA==',
    base64_salt_separator: 'Bw==',
    rounds: 8,
    mem_cost: 14,
  },
  salt: '42xEC+ixf3L2lw==',
  hash: 'lSrfV15cpx95/sZS2W9c9Kp6i/LVgQNDNC/qzrCnh1SAyZvqmZqAjTdn3aoItz+VHjoZilo78198JAdRuid5lQ==',
  password: 'user1password',
};

export type MadeHash = { password_hash: string; password_salt?: string };

/** One maker per accepted format: the password in, the row's hash fields out. */
export const HASH_MAKERS: Record<string, (password: string) => Promise<MadeHash>> = {
  'bcrypt $2b$': async (password) => ({ password_hash: await bcrypt.hash(password, 4) }),
  // PHP and older libraries write the same algorithm under $2y$ and $2a$.
  'bcrypt $2y$': async (password) => ({ password_hash: (await bcrypt.hash(password, 5)).replace(/^\$2b\$/, '$2y$') }),
  'bcrypt $2a$': async (password) => ({ password_hash: (await bcrypt.hash(password, 4)).replace(/^\$2b\$/, '$2a$') }),
  argon2id: async (password) => ({ password_hash: await argon2Hash(password, { algorithm: 2 as Algorithm, memoryCost: 8192, timeCost: 1, parallelism: 1 }) }),
  argon2i: async (password) => ({ password_hash: await argon2Hash(password, { algorithm: 1 as Algorithm, memoryCost: 8192, timeCost: 2, parallelism: 1 }) }),
  'scrypt PHC': async (password) => {
    const salt = randomBytes(16);
    const key = scryptSync(password, salt, 32, { N: 2 ** 14, r: 8, p: 1 });
    return { password_hash: `$scrypt$ln=14,r=8,p=1$${b64(salt)}$${b64(key)}` };
  },
  'pbkdf2-sha256 PHC': async (password) => {
    const salt = randomBytes(16);
    return { password_hash: `$pbkdf2-sha256$i=20000$${b64(salt)}$${b64(pbkdf2Sync(password, salt, 20000, 32, 'sha256'))}` };
  },
  'pbkdf2-sha512 PHC': async (password) => {
    const salt = randomBytes(16);
    return { password_hash: `$pbkdf2-sha512$i=20000$${b64(salt)}$${b64(pbkdf2Sync(password, salt, 20000, 64, 'sha512'))}` };
  },
  'Django pbkdf2_sha256': async (password) => {
    // Django: an alphanumeric salt used as text, the hash in padded base64.
    const salt = randomBytes(9).toString('hex');
    return { password_hash: `pbkdf2_sha256$30000$${salt}$${pbkdf2Sync(password, salt, 30000, 32, 'sha256').toString('base64')}` };
  },
};
