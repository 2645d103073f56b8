import type { Kysely } from 'kysely';
import { z } from 'zod';
import { AppError } from '../errors.js';
import { SecretBox } from '../shared/crypto.js';
import { newId } from '../shared/ids.js';
import { DEFAULT_SCOPE, joinScope } from '../shared/scopes.js';
import { isoTime } from '../shared/time.js';
import { type FirebaseScryptParams, firebaseParamsOk, firebaseStoredHash, parsePasswordHash } from '../sign-in/password-hashes.js';
import { isValidProfileValue, normalizeProfileValue } from '../sign-in/profile-data.js';
import { findApp } from '../storage/repos/apps.js';
import { appendEvent, appendEvents } from '../storage/repos/events.js';
import { type ExistingUser, exportPage, findExternalIds, findUsersForImport, type ImportedUserRows, insertImportedUsers } from '../storage/repos/user-import.js';
import { normalizeEmail } from '../storage/repos/users.js';
import type { Database } from '../storage/schema.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import { FirebaseScryptParameters, IMPORT_MAX_USERS, ImportUser, type ImportResultView, type ImportRowResultView, type ImportUserInput } from './schemas.js';

/**
 * Bulk user import and export (docs/guides/migrating-users.md).
 *
 * Every row is checked alone (registration's rules for the email, name, phone and birthdate; a known
 * hash format within bounds); a bad row is reported with its line and never written. Rows are matched
 * to existing users by email and by external id: the same user again is `unchanged`, anything else
 * that meets an existing user is a `conflict` — an import never changes an existing account, least of
 * all its credentials. Hashes are stored as given (re-hashed at the user's first sign-in), never logged.
 */

export interface ParsedImport {
  rows: Array<{ line: number; value: unknown } | { line: number; error: string }>;
  firebase: FirebaseScryptParams | null;
}

const base64 = (text: string): Buffer | null => (/^[A-Za-z0-9+/_-]*={0,2}$/.test(text) ? Buffer.from(text, 'base64') : null);

function firebaseParams(input: z.output<typeof FirebaseScryptParameters>): FirebaseScryptParams {
  const signerKey = base64(input.base64_signer_key);
  const saltSeparator = base64(input.base64_salt_separator);
  const params = signerKey && saltSeparator ? { signerKey, saltSeparator, rounds: input.rounds, memCost: input.mem_cost } : null;
  if (!params || !firebaseParamsOk(params)) {
    throw new AppError('invalid_request', { details: [{ path: 'firebase_scrypt', message: 'must be the base64 signer key and salt separator with rounds and mem_cost of a Firebase project' }] });
  }
  return params;
}

function parseFirebase(value: unknown, path: string): FirebaseScryptParams {
  const parsed = FirebaseScryptParameters.safeParse(value);
  if (!parsed.success) throw new AppError('invalid_request', { details: parsed.error.issues.map((i) => ({ path: [path, ...i.path].join('.'), message: i.message })) });
  return firebaseParams(parsed.data);
}

const tooMany = () => new AppError('invalid_request', { message: `At most ${IMPORT_MAX_USERS} users per request.`, details: [{ path: 'body', message: `at most ${IMPORT_MAX_USERS} users; split the file` }] });

/**
 * Adds one NDJSON line to `parsed`: blank lines are skipped, a line that is not JSON is that row's
 * error, and a first line `{"firebase_scrypt": {…}}` gives the Firebase parameters (a bad one throws).
 */
export function addNdjsonLine(parsed: ParsedImport, raw: string, line: number): void {
  const text = raw.trim();
  if (!text) return;
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    parsed.rows.push({ line, error: 'invalid_json' });
    return;
  }
  if (parsed.rows.length === 0 && !parsed.firebase && value !== null && typeof value === 'object' && 'firebase_scrypt' in value && Object.keys(value).length === 1) {
    parsed.firebase = parseFirebase((value as { firebase_scrypt: unknown }).firebase_scrypt, `line ${line}: firebase_scrypt`);
    return;
  }
  parsed.rows.push({ line, value });
}

/**
 * The rows of an import body: a JSON array, `{ users, firebase_scrypt }`, or NDJSON text (one user per
 * line; blank lines skipped; a line that is not JSON is that row's error). Request errors (too many
 * rows, bad Firebase parameters) throw `invalid_request`.
 */
export function parseImportBody(body: unknown): ParsedImport {
  if (Array.isArray(body)) {
    if (body.length > IMPORT_MAX_USERS) throw tooMany();
    return { rows: body.map((value, i) => ({ line: i + 1, value })), firebase: null };
  }
  if (typeof body === 'string') {
    const parsed: ParsedImport = { rows: [], firebase: null };
    const lines = body.split('\n');
    for (let i = 0; i < lines.length; i++) {
      addNdjsonLine(parsed, lines[i]!, i + 1);
      if (parsed.rows.length > IMPORT_MAX_USERS) throw tooMany();
    }
    return parsed;
  }
  const envelope = body as { users: unknown[]; firebase_scrypt?: unknown };
  if (envelope.users.length > IMPORT_MAX_USERS) throw tooMany();
  return { rows: envelope.users.map((value, i) => ({ line: i + 1, value })), firebase: envelope.firebase_scrypt === undefined ? null : parseFirebase(envelope.firebase_scrypt, 'firebase_scrypt') };
}

export interface ImportDeps {
  db: Kysely<Database>;
  secretKey: string;
  now: number;
}

export interface ImportOptions {
  dryRun: boolean;
  /** A client id every imported user becomes a user of. */
  app?: string;
  /** Who ran it, for the `users.imported` event. */
  via: 'api' | 'cli';
  /** The emails and external ids of earlier parts of the same file (the CLI imports a large file in parts), by line. */
  seen?: { emails: Map<string, number>; externalIds: Map<string, number> };
}

interface ValidRow {
  line: number;
  input: ImportUserInput;
  email: string;
  passwordHash: string | null;
  profile: { name: string | null; phone_number: string | null; birthdate: string | null };
  createdAt: number;
  appIds: Array<{ appId: string; consent: boolean }>;
}

type Checked = { ok: true; row: ValidRow } | { ok: false; result: ImportRowResultView };

const invalid = (line: number, reason: string, extra: Partial<ImportRowResultView> = {}): Checked => ({ ok: false, result: { line, status: 'invalid', reason, ...extra } });

/** One row checked on its own, without the database (apps are checked against `knownApps`). */
function checkRow(line: number, value: unknown, firebase: FirebaseScryptParams | null, now: number, knownApps: Map<string, boolean>, defaultApp: string | undefined): Checked {
  const parsed = ImportUser.safeParse(value);
  if (!parsed.success) {
    const email = value !== null && typeof value === 'object' && typeof (value as { email?: unknown }).email === 'string' ? normalizeEmail((value as { email: string }).email).slice(0, 254) : undefined;
    return invalid(line, 'invalid_fields', { ...(email ? { email } : {}), details: parsed.error.issues.map((i) => ({ path: i.path.join('.') || '(row)', message: i.message })) });
  }
  const input = parsed.data;
  const email = normalizeEmail(input.email);
  const problems: Array<{ path: string; message: string }> = [];
  const profile = { name: input.name?.trim() || null, phone_number: null as string | null, birthdate: null as string | null };
  for (const field of ['phone_number', 'birthdate'] as const) {
    const raw = input[field];
    if (raw === undefined || raw === null || raw === '') continue;
    const normalized = normalizeProfileValue(field, raw);
    if (isValidProfileValue(field, normalized, now)) profile[field] = normalized;
    else problems.push({ path: field, message: field === 'phone_number' ? 'must be an E.164 phone number' : 'must be a date YYYY-MM-DD, not in the future' });
  }
  let createdAt = now;
  if (input.created_at) {
    createdAt = Math.floor(Date.parse(input.created_at) / 1000);
    if (createdAt > now) problems.push({ path: 'created_at', message: 'must not be in the future' });
  }
  let passwordHash: string | null = null;
  if (input.password_salt !== undefined) {
    // A Firebase row: the user's salt and hash with the import's project parameters.
    const salt = base64(input.password_salt);
    const hash = input.password_hash ? base64(input.password_hash) : null;
    if (!firebase) problems.push({ path: 'password_salt', message: 'a Firebase hash needs the firebase_scrypt parameters of the import' });
    else if (!salt || !hash || hash.length !== firebase.signerKey.length) problems.push({ path: 'password_hash', message: 'must be the base64 Firebase scrypt hash of the project' });
    else passwordHash = firebaseStoredHash(firebase, salt, hash);
  } else if (input.password_hash) {
    if (parsePasswordHash(input.password_hash)) passwordHash = input.password_hash;
    else problems.push({ path: 'password_hash', message: 'unknown hash format, or its cost parameters are out of bounds' });
  }
  const appIds: ValidRow['appIds'] = [];
  for (const app of [...(defaultApp ? [{ client_id: defaultApp }] : []), ...(input.apps ?? [])]) {
    if (!knownApps.get(app.client_id)) problems.push({ path: 'apps', message: `unknown app ${app.client_id.slice(0, 60)}` });
    const existing = appIds.find((a) => a.appId === app.client_id);
    if (existing) existing.consent ||= Boolean('consent' in app && app.consent);
    else appIds.push({ appId: app.client_id, consent: Boolean('consent' in app && app.consent) });
  }
  if (problems.length) return invalid(line, problems.some((p) => p.path === 'password_hash') ? 'unknown_hash_format' : 'invalid_fields', { email, details: problems });
  return { ok: true, row: { line, input, email, passwordHash, profile, createdAt, appIds } };
}

/** What an existing user differs in from a row (empty: the same user). */
function differences(existing: ExistingUser, row: ValidRow): string[] {
  const u = existing.user;
  const out: string[] = [];
  if ((existing.imported?.externalId ?? null) !== (row.input.external_id ?? null)) out.push('external_id');
  if (u.email_verified !== (row.input.email_verified ? 1 : 0)) out.push('email_verified');
  if (u.name !== row.profile.name) out.push('name');
  if (u.phone_number !== row.profile.phone_number) out.push('phone_number');
  if (u.birthdate !== row.profile.birthdate) out.push('birthdate');
  if (u.status !== (row.input.status ?? 'active')) out.push('status');
  return out;
}

/** Rows looked up and written together. */
const BATCH = 1000;

/** Imports parsed rows; one result per row, in order. */
export async function importUsers(deps: ImportDeps, parsed: ParsedImport, options: ImportOptions): Promise<ImportResultView> {
  const { db, now } = deps;
  const box = new SecretBox(deps.secretKey, 'totp');
  const knownApps = new Map<string, boolean>();
  const wantedApps = new Set<string>(options.app ? [options.app] : []);
  for (const row of parsed.rows) {
    if ('value' in row && row.value && typeof row.value === 'object' && Array.isArray((row.value as { apps?: unknown }).apps)) {
      for (const a of (row.value as { apps: unknown[] }).apps) if (a && typeof a === 'object' && typeof (a as { client_id?: unknown }).client_id === 'string') wantedApps.add((a as { client_id: string }).client_id);
    }
  }
  // The apps with a maximum password age: an imported password is renewed at the first sign-in to them.
  const renewingApps = new Set<string>();
  for (const id of [...wantedApps].slice(0, 1000)) {
    const found = await findApp(db, id);
    knownApps.set(id, Boolean(found));
    if (found && found.passwordPolicy.maxAgeDays !== null) renewingApps.add(id);
  }
  if (options.app && !knownApps.get(options.app)) throw new AppError('invalid_request', { details: [{ path: 'app', message: 'no app has this client id' }] });

  const results: ImportRowResultView[] = new Array(parsed.rows.length);
  const seenEmails = options.seen?.emails ?? new Map<string, number>();
  const seenExternal = options.seen?.externalIds ?? new Map<string, number>();
  const valid: Array<{ index: number; row: ValidRow }> = [];
  parsed.rows.forEach((raw, index) => {
    if ('error' in raw) {
      results[index] = { line: raw.line, status: 'invalid', reason: raw.error };
      return;
    }
    const checked = checkRow(raw.line, raw.value, parsed.firebase, now, knownApps, options.app);
    if (!checked.ok) {
      results[index] = checked.result;
      return;
    }
    const { row } = checked;
    const firstEmail = seenEmails.get(row.email);
    const firstExternal = row.input.external_id ? seenExternal.get(row.input.external_id) : undefined;
    if (firstEmail !== undefined || firstExternal !== undefined) {
      results[index] = { line: row.line, status: 'invalid', email: row.email, ...(firstEmail !== undefined
          ? { reason: 'duplicate_email', details: [{ path: 'email', message: `the same email as line ${firstEmail}` }] }
          : { reason: 'duplicate_external_id', details: [{ path: 'external_id', message: `the same external_id as line ${firstExternal}` }] }) };
      return;
    }
    seenEmails.set(row.email, row.line);
    if (row.input.external_id) seenExternal.set(row.input.external_id, row.line);
    valid.push({ index, row });
  });

  for (let start = 0; start < valid.length; start += BATCH) {
    const batch = valid.slice(start, start + BATCH);
    const [byEmail, byExternal] = await Promise.all([
      findUsersForImport(db, batch.map((b) => b.row.email)),
      findExternalIds(db, batch.flatMap((b) => (b.row.input.external_id ? [b.row.input.external_id] : []))),
    ]);
    const toCreate: Array<{ index: number; row: ValidRow; rows: ImportedUserRows }> = [];
    for (const { index, row } of batch) {
      const existing = byEmail.get(row.email);
      const externalOwner = row.input.external_id ? byExternal.get(row.input.external_id) : undefined;
      if (externalOwner && externalOwner !== existing?.user.id) {
        results[index] = { line: row.line, status: 'conflict', email: row.email, user_id: externalOwner, reason: 'external_id_taken', details: [{ path: 'external_id', message: 'belongs to another user' }] };
      } else if (existing && !existing.imported) {
        results[index] = { line: row.line, status: 'conflict', email: row.email, user_id: existing.user.id, reason: 'email_taken', details: [{ path: 'email', message: 'an account with this email exists (not from an import); it is left as it is' }] };
      } else if (existing) {
        const diff = differences(existing, row);
        results[index] = diff.length
          ? { line: row.line, status: 'conflict', email: row.email, user_id: existing.user.id, reason: 'differs', details: diff.map((path) => ({ path, message: 'differs from the user imported before; it is left as it is' })) }
          : { line: row.line, status: 'unchanged', email: row.email, user_id: existing.user.id };
      } else {
        toCreate.push({ index, row, rows: newUserRows(row, box, now) });
      }
    }
    if (!toCreate.length) continue;
    if (options.dryRun) {
      for (const c of toCreate) results[c.index] = { line: c.row.line, status: 'created', email: c.row.email, ...renewalNote(c.row, renewingApps) };
      continue;
    }
    try {
      await db.transaction().execute((trx) => writeUsers(trx, toCreate, now));
      for (const c of toCreate) results[c.index] = { line: c.row.line, status: 'created', email: c.row.email, user_id: c.rows.user.id, ...renewalNote(c.row, renewingApps) };
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      // Someone registered one of these addresses meanwhile: each row alone, so only that one is a conflict.
      for (const c of toCreate) {
        try {
          await db.transaction().execute((trx) => writeUsers(trx, [c], now));
          results[c.index] = { line: c.row.line, status: 'created', email: c.row.email, user_id: c.rows.user.id, ...renewalNote(c.row, renewingApps) };
        } catch (rowError) {
          if (!isUniqueViolation(rowError)) throw rowError;
          results[c.index] = { line: c.row.line, status: 'conflict', email: c.row.email, reason: 'email_taken', details: [{ path: 'email', message: 'an account with this email or external_id was created meanwhile' }] };
        }
      }
    }
  }

  const summary = { created: 0, unchanged: 0, conflict: 0, invalid: 0 };
  for (const r of results) summary[r.status]++;
  if (!options.dryRun && summary.created) await appendEvent(db, now, { type: 'users.imported', data: { via: options.via, ...summary } });
  return { dry_run: options.dryRun, summary, results };
}

/**
 * What the password policy of the row's apps does with its imported password: a hash cannot be checked
 * for length or breaches, so an app with a maximum age asks for a new password, checked under its
 * policy, at the first sign-in (docs/guides/password-policy.md#imported-passwords).
 */
function renewalNote(row: ValidRow, renewingApps: ReadonlySet<string>): Pick<ImportRowResultView, 'details'> {
  if (!row.passwordHash) return {};
  const apps = row.appIds.filter((a) => renewingApps.has(a.appId));
  if (!apps.length) return {};
  return { details: apps.map((a) => ({ path: 'password_hash', message: `the password policy of app ${a.appId} asks for a new password at the first sign-in to it` })) };
}

function newUserRows(row: ValidRow, box: SecretBox, now: number): ImportedUserRows {
  const id = newId('usr');
  return {
    user: {
      id,
      email: row.email,
      email_verified: row.input.email_verified ? 1 : 0,
      password_hash: row.passwordHash,
      name: row.profile.name,
      phone_number: row.profile.phone_number,
      birthdate: row.profile.birthdate,
      status: row.input.status ?? 'active',
      // Not set here, so no policy has checked it: an app with a maximum age renews it (passwordExpired).
      password_changed_at: null,
      created_at: row.createdAt,
      updated_at: now,
    },
    externalId: row.input.external_id ?? null,
    apps: row.appIds.map((a) => ({ appId: a.appId, consentScope: a.consent ? joinScope([DEFAULT_SCOPE]) : null })),
    totpSecretSealed: row.input.totp_secret ? box.seal(row.input.totp_secret) : null,
  };
}

async function writeUsers(trx: Kysely<Database>, rows: Array<{ row: ValidRow; rows: ImportedUserRows }>, now: number): Promise<void> {
  await insertImportedUsers(trx, rows.map((r) => r.rows), now);
  // The account's creation is recorded as a registration by import (the user.created webhook).
  await appendEvents(
    trx,
    now,
    rows.flatMap(({ rows: r }) => [
      { type: 'user.registered' as const, userId: r.user.id, data: { method: 'import' } },
      ...r.apps.flatMap((app) => (app.consentScope ? [{ type: 'consent.granted' as const, appId: app.appId, userId: r.user.id, data: { scope: app.consentScope, via: 'import' } }] : [])),
    ]),
  );
}

// Export ---------------------------------------------------------------------------------------------

export interface ExportOptions {
  app?: string;
  includePasswordHashes: boolean;
  includeApps: boolean;
  via: 'api' | 'cli';
}

/** Checks an export's options and records it (always: who exported what, and whether hashes left). */
export async function startExport(deps: ImportDeps, options: ExportOptions): Promise<void> {
  if (options.app && !(await findApp(deps.db, options.app))) throw new AppError('invalid_request', { details: [{ path: 'app', message: 'no app has this client id' }] });
  await appendEvent(deps.db, deps.now, {
    type: 'users.exported',
    appId: options.app ?? null,
    data: { via: options.via, include_password_hashes: options.includePasswordHashes, include_apps: options.includeApps },
  });
}

/** The export, one NDJSON line per user (the import's shape), read a page at a time. */
export async function* exportLines(deps: ImportDeps, options: ExportOptions): AsyncGenerator<string> {
  const box = new SecretBox(deps.secretKey, 'totp');
  let afterId = '';
  for (;;) {
    const page = await exportPage(deps.db, { appId: options.app, afterId, limit: 1000, withApps: options.includeApps });
    if (!page.length) return;
    let chunk = '';
    for (const { user, externalId, totpSecretSealed, appIds } of page) {
      const line: Record<string, unknown> = {
        email: user.email,
        email_verified: user.email_verified === 1,
        name: user.name,
        phone_number: user.phone_number,
        birthdate: user.birthdate,
        created_at: isoTime(user.created_at),
        status: user.status,
        external_id: externalId ?? user.id,
      };
      if (options.includePasswordHashes) {
        if (user.password_hash) line.password_hash = user.password_hash;
        const secret = totpSecretSealed ? openQuietly(box, totpSecretSealed) : null;
        if (secret) line.totp_secret = secret;
      }
      if (options.includeApps && appIds.length) line.apps = appIds.map((client_id) => ({ client_id }));
      chunk += `${JSON.stringify(line)}\n`;
    }
    yield chunk;
    afterId = page[page.length - 1]!.user.id;
  }
}

/** A sealed secret under another SECRET_KEY cannot be exported; the rest of the user can. */
function openQuietly(box: SecretBox, sealed: string): string | null {
  try {
    return box.open(sealed);
  } catch {
    return null;
  }
}
