#!/usr/bin/env node
// Converts another system's user export into Gatehouse's import format (NDJSON, one user per line), as
// docs/guides/migrating-users.md describes field by field. No dependencies: plain Node.js 20+.
//
//   node examples/import/convert.mjs own-table  own-table.source.ndjson  > users.ndjson
//   node examples/import/convert.mjs auth0      auth0.source.ndjson      > users.ndjson
//   node examples/import/convert.mjs firebase   firebase.source.json --firebase-params firebase.hash-parameters.json > users.ndjson
//   node examples/import/convert.mjs supabase   supabase.source.ndjson   > users.ndjson
//   node examples/import/convert.mjs keycloak   keycloak.source.json     > users.ndjson
//   node examples/import/convert.mjs logto      logto.source.ndjson      > users.ndjson
//
// then: npx gatehouse user import users.ndjson --dry-run   (and again without --dry-run)
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const ndjson = (text) => text.split('\n').filter((line) => line.trim()).map((line) => JSON.parse(line));
const iso = (value) => (value === null || value === undefined ? undefined : new Date(typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value).toISOString());
const clean = (row) => Object.fromEntries(Object.entries(row).filter(([, v]) => v !== undefined && v !== null && v !== ''));

/** One mapping per source: the source's records in, Gatehouse import rows out. */
const SOURCES = {
  // `psql -At -c "select row_to_json(u) from (select id, email, password_digest, full_name, confirmed_at, created_at from users) u"`
  'own-table': (text) =>
    ndjson(text).map((u) => clean({ email: u.email, email_verified: u.confirmed_at !== null, name: u.full_name, created_at: iso(u.created_at), external_id: String(u.id), password_hash: u.password_digest })),

  // The password hash export Auth0 support sends (NDJSON, MongoDB-style ids); the Management API's user
  // export has the same users without hashes.
  auth0: (text) =>
    ndjson(text).map((u) => clean({ email: u.email, email_verified: u.email_verified === true, external_id: `auth0|${u._id.$oid}`, password_hash: u.passwordHash })),

  // `firebase auth:export users.json --format=json`; the project's hash parameters from the console.
  firebase: (text, options) => {
    if (!options['firebase-params']) throw new Error('firebase needs --firebase-params FILE (console → Authentication → Users → ⋮ → Password hash parameters)');
    const params = JSON.parse(readFileSync(options['firebase-params'], 'utf8'));
    const users = JSON.parse(text).users.map((u) =>
      clean({
        email: u.email,
        email_verified: u.emailVerified === true,
        name: u.displayName,
        phone_number: u.phoneNumber,
        created_at: iso(u.createdAt),
        status: u.disabled ? 'disabled' : undefined,
        external_id: u.localId,
        password_hash: u.passwordHash,
        password_salt: u.passwordHash ? u.salt : undefined,
      }),
    );
    return [{ firebase_scrypt: params }, ...users];
  },

  // `psql -At -c "select row_to_json(u) from (select id, email, encrypted_password, email_confirmed_at, phone, raw_user_meta_data, created_at, banned_until from auth.users where deleted_at is null) u"`
  supabase: (text) =>
    ndjson(text).map((u) =>
      clean({
        email: u.email,
        email_verified: u.email_confirmed_at !== null,
        name: u.raw_user_meta_data?.full_name ?? u.raw_user_meta_data?.name,
        // Supabase stores phone numbers without the plus sign.
        phone_number: u.phone ? `+${u.phone.replace(/^\+/, '')}` : undefined,
        created_at: iso(u.created_at),
        status: u.banned_until && new Date(u.banned_until) > new Date() ? 'disabled' : undefined,
        external_id: u.id,
        password_hash: u.encrypted_password,
      }),
    ),

  // `kc.sh export --realm acme --file realm.json --users realm_file`: PBKDF2 credentials as PHC strings.
  keycloak: (text) =>
    JSON.parse(text).users.map((u) => {
      const credential = (u.credentials ?? []).find((c) => c.type === 'password');
      let password_hash;
      if (credential) {
        const secret = JSON.parse(credential.secretData);
        const data = JSON.parse(credential.credentialData);
        if (data.algorithm !== 'pbkdf2-sha256' && data.algorithm !== 'pbkdf2-sha512') throw new Error(`${u.email}: Keycloak algorithm ${data.algorithm} is not converted here`);
        password_hash = `$${data.algorithm}$i=${data.hashIterations}$${secret.salt}$${secret.value}`;
      }
      return clean({
        email: u.email,
        email_verified: u.emailVerified === true,
        name: [u.firstName, u.lastName].filter(Boolean).join(' ') || undefined,
        created_at: iso(u.createdTimestamp),
        status: u.enabled === false ? 'disabled' : undefined,
        external_id: u.id,
        password_hash,
      });
    }),

  // `psql -At -c "select row_to_json(u) from (select id, primary_email, primary_phone, password_encrypted, password_encryption_method, name, created_at, is_suspended from users) u"`
  logto: (text) =>
    ndjson(text).map((u) => {
      if (u.password_encrypted && !['Argon2i', 'Argon2id', 'Bcrypt'].includes(u.password_encryption_method)) throw new Error(`${u.primary_email}: Logto method ${u.password_encryption_method} is not accepted`);
      return clean({
        email: u.primary_email,
        // Logto verifies an address before it becomes the primary one.
        email_verified: true,
        name: u.name,
        phone_number: u.primary_phone ? `+${u.primary_phone.replace(/^\+/, '')}` : undefined,
        created_at: iso(u.created_at),
        status: u.is_suspended ? 'disabled' : undefined,
        external_id: u.id,
        password_hash: u.password_encrypted,
      });
    }),
};

export function convert(source, text, options = {}) {
  const mapping = SOURCES[source];
  if (!mapping) throw new Error(`unknown source ${source}; one of ${Object.keys(SOURCES).join(', ')}`);
  return mapping(text, options).filter((row) => row.firebase_scrypt || row.email);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { positionals, values } = parseArgs({ allowPositionals: true, options: { 'firebase-params': { type: 'string' } } });
  const [source, file] = positionals;
  if (!source || !file) {
    process.stderr.write('usage: node convert.mjs <own-table|auth0|firebase|supabase|keycloak|logto> FILE [--firebase-params FILE]\n');
    process.exit(2);
  }
  for (const row of convert(source, readFileSync(file, 'utf8'), values)) process.stdout.write(`${JSON.stringify(row)}\n`);
}
