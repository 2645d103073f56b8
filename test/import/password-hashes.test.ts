import { describe, expect, it } from 'vitest';
import { needsRehash } from '../../src/auth/passwords.js';
import { passwordHashFormat } from '../../src/sign-in/password-hashes.js';

// src/sign-in/password-hashes.ts: which stored hashes are accepted (within bounds), and which are re-hashed at sign-in.
describe('imported hash formats', () => {
  const salt = 'c2FsdHNhbHRzYWx0c2FsdA';
  const hash = 'aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaGhhc2g';
  it.each([
    [`$2b$10$${'a'.repeat(53)}`, 'bcrypt'],
    [`$2y$12$${'a'.repeat(53)}`, 'bcrypt'],
    [`$2b$03$${'a'.repeat(53)}`, null],
    [`$2b$16$${'a'.repeat(53)}`, null],
    [`$2x$10$${'a'.repeat(53)}`, null],
    [`$argon2id$v=19$m=19456,t=2,p=1$${salt}$${hash}`, 'argon2id'],
    [`$argon2id$v=19$m=19456,p=1,t=2$${salt}$${hash}`, 'argon2id'],
    [`$argon2i$v=19$m=4096,t=256,p=1$${salt}$${hash}`, 'argon2i'],
    [`$argon2id$v=19$m=262144,t=2,p=1$${salt}$${hash}`, null],
    [`$argon2id$v=19$m=131072,t=64,p=1$${salt}$${hash}`, null],
    [`$argon2d$v=19$m=19456,t=2,p=1$${salt}$${hash}`, null],
    [`$argon2id$v=16$m=19456,t=2,p=1$${salt}$${hash}`, null],
    [`$scrypt$ln=14,r=8,p=1$${salt}$${hash}`, 'scrypt'],
    [`$scrypt$ln=20,r=8,p=1$${salt}$${hash}`, null],
    [`$pbkdf2-sha256$i=600000$${salt}$${hash}`, 'pbkdf2-sha256'],
    [`$pbkdf2-sha256$29000$${salt.replace('c', '.')}$${hash}`, 'pbkdf2-sha256'],
    [`$pbkdf2-sha512$i=210000$${salt}$${hash}`, 'pbkdf2-sha512'],
    [`$pbkdf2-sha256$i=2000001$${salt}$${hash}`, null],
    [`$pbkdf2-sha1$i=1000$${salt}$${hash}`, null],
    ['pbkdf2_sha256$870000$abcdefghijkl$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaA==', 'django-pbkdf2-sha256'],
    ['pbkdf2_sha1$870000$abcdefghijkl$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaA==', null],
    ['5f4dcc3b5aa765d61d8327deb882cf99', null],
    ['', null],
    [`$2b$10$${'a'.repeat(2000)}`, null],
  ])('%s → %s', (stored, format) => {
    expect(passwordHashFormat(stored)).toBe(format);
  });

  it.each([
    [`$argon2id$v=19$m=19456,t=2,p=1$${salt}$${hash}`, false],
    [`$argon2id$v=19$m=19456,p=1,t=2$${salt}$${hash}`, false],
    [`$argon2id$v=19$m=65536,t=3,p=4$${salt}$${hash}`, true],
    [`$argon2i$v=19$m=19456,t=2,p=1$${salt}$${hash}`, true],
    [`$2b$10$${'a'.repeat(53)}`, true],
    ['not a hash', true],
  ])('needsRehash(%s) → %s', (stored, expected) => {
    expect(needsRehash(stored)).toBe(expected);
  });
});
