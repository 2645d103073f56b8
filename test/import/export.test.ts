import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run } from '../../src/cli/run.js';
import { findUserByEmail } from '../../src/storage/repos/users.js';
import { buildTestApp, TEST_SECRET_KEY, type TestApp } from '../helpers/app.js';
import { adminHeaders } from '../helpers/dev-api.js';
import { makeClient, PASSWORD, type TestClient, uniqueEmail } from '../helpers/oauth-flows.js';
import { childEnv, freshDatabaseUrl } from '../helpers/processes.js';
import { HASH_MAKERS } from './hashes.js';

// docs/guides/migrating-users.md: the export has the import's shape; hashes only when asked, and recorded.
describe('user export, and the CLI import and export', { timeout: 120_000 }, () => {
  let t: TestApp;
  let client: TestClient;
  let dir: string;
  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '10000' } });
    client = await makeClient(t);
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-import-'));
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const exportLines = async (query = '') => {
    const res = await t.app.inject({ url: `/v1/admin/users/export${query}`, headers: adminHeaders });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/x-ndjson/);
    return res.body.trim().split('\n').filter(Boolean).map((line) => JSON.parse(line));
  };
  const exportEvents = () => t.db.selectFrom('events').select(['data']).where('type', '=', 'users.exported').orderBy('id').execute();

  it('streams users without hashes unless include_password_hashes=true, and records every export', async () => {
    const made = await HASH_MAKERS['bcrypt $2b$']!('exported pass 1');
    const email = uniqueEmail('exp');
    const res = await t.app.inject({ method: 'POST', url: `/v1/admin/users/import?app=${client.app.id}`, headers: adminHeaders, payload: [{ email, external_id: 'e-1', name: 'Ex Port', totp_secret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP', ...made }] });
    expect(res.json().summary.created).toBe(1);

    const plain = (await exportLines()).find((u) => u.email === email);
    expect(plain).toMatchObject({ email, email_verified: false, name: 'Ex Port', external_id: 'e-1', status: 'active' });
    expect(plain.password_hash).toBeUndefined();
    expect(plain.totp_secret).toBeUndefined();
    expect((await exportEvents()).map((e) => JSON.parse(e.data))).toEqual([{ via: 'api', include_password_hashes: false, include_apps: false }]);

    const full = (await exportLines(`?include_password_hashes=true&include_apps=true&app=${client.app.id}`));
    expect(full).toEqual([{ ...plain, password_hash: made.password_hash, totp_secret: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP', apps: [{ client_id: client.app.id }] }]);
    expect((await exportEvents()).map((e) => JSON.parse(e.data)).at(-1)).toEqual({ via: 'api', include_password_hashes: true, include_apps: true });
    expect(t.logs.join('\n')).not.toContain(made.password_hash);

    // Bad parameters answer before anything is streamed or recorded.
    const before = (await exportEvents()).length;
    expect((await t.app.inject({ url: '/v1/admin/users/export?app=nope', headers: adminHeaders })).statusCode).toBe(400);
    expect((await t.app.inject({ url: '/v1/admin/users/export?include_password_hashes=yes', headers: adminHeaders })).statusCode).toBe(400);
    expect((await t.app.inject({ url: '/v1/admin/users/export' })).statusCode).toBe(401);
    expect((await exportEvents()).length).toBe(before);
  });

  it('CLI: `user import FILE` in parts of 10,000 with a progress line, duplicates found across parts; `--dry-run` writes nothing', async () => {
    const file = join(dir, 'users.ndjson');
    const made = await HASH_MAKERS['bcrypt $2b$']!('cli pass 12');
    const first = uniqueEmail('cli');
    const rows = [JSON.stringify({ email: first, ...made }), ...Array.from({ length: 10_001 }, (_, i) => JSON.stringify({ email: `cli-${i}@bulk.example` })), JSON.stringify({ email: first.toUpperCase() }), '{"email": "trunc'];
    writeFileSync(file, `${rows.join('\n')}\n`);
    // The CLI runs on a database of its own (a file or a new PostgreSQL database), as an operator's would.
    const database = await freshDatabaseUrl();
    try {
      const progress: string[] = [];
      let stdout = '';
      const io = { env: childEnv({ DATABASE_URL: database.url, SECRET_KEY: TEST_SECRET_KEY }), out: (s: string) => (stdout += s), err: () => undefined, progress: (s: string) => progress.push(s) };
      expect(await run(['user', 'import', file, '--dry-run', '--json'], io)).toBe(0);
      expect(JSON.parse(stdout)).toMatchObject({ dry_run: true, summary: { created: 10_002, invalid: 2 } });
      stdout = '';
      expect(await run(['user', 'import', file], io)).toBe(0);
      expect(stdout).toContain('10004 rows: 10002 created, 0 unchanged, 0 conflict, 2 invalid');
      expect(stdout).toMatch(/line 10003: invalid duplicate_email/);
      expect(stdout).toMatch(/line 10004: invalid invalid_json/);
      expect(progress).toContain('10000 rows: 10000 created, 0 unchanged, 0 conflict, 0 invalid');
      stdout = '';
      expect(await run(['user', 'import', file], io)).toBe(0);
      expect(stdout).toContain('10004 rows: 0 created, 10002 unchanged, 0 conflict, 2 invalid');
      stdout = '';
      expect(await run(['user', 'export', '--include-password-hashes', '--output', join(dir, 'out.ndjson')], io)).toBe(0);
      expect(stdout).toContain('Exported 10002 users');
      const exported = readFileSync(join(dir, 'out.ndjson'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      expect(exported).toHaveLength(10_002);
      expect(exported.find((u) => u.email === first).password_hash).toBe(made.password_hash);
    } finally {
      await database.drop();
    }
  });

  it('CLI: a missing file or bad usage → a clear error, not a stack trace', async () => {
    const database = await freshDatabaseUrl();
    try {
      let stderr = '';
      const io = { env: childEnv({ DATABASE_URL: database.url, SECRET_KEY: TEST_SECRET_KEY }), out: () => undefined, err: (s: string) => (stderr += s) };
      expect(await run(['user', 'import', join(dir, 'nope.ndjson')], io)).toBe(1);
      expect(stderr).toContain('cannot read');
      stderr = '';
      expect(await run(['user', 'import'], io)).toBe(1);
      expect(stderr).toContain('FILE');
    } finally {
      await database.drop();
    }
  });

  it('a user exported after signing in (now argon2id) and a registered user sign in again after the import elsewhere', async () => {
    const registered = uniqueEmail('native');
    expect((await t.app.inject({ method: 'POST', url: '/v1/auth/register', payload: { email: registered, password: PASSWORD, client_id: client.app.id } })).statusCode).toBeLessThan(300);
    const lines = (await exportLines('?include_password_hashes=true')).filter((u) => u.email === registered);
    expect(lines[0].password_hash).toMatch(/^\$argon2id\$/);
    const target = await buildTestApp();
    try {
      const targetClient = await makeClient(target);
      const res = await target.app.inject({ method: 'POST', url: '/v1/admin/users/import', headers: { ...adminHeaders, 'content-type': 'application/x-ndjson' }, payload: lines.map((l) => JSON.stringify(l)).join('\n') });
      expect(res.json().summary.created).toBe(1);
      const login = await target.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: registered, password: PASSWORD, client_id: targetClient.app.id } });
      expect(login.statusCode, login.body).toBe(200);
      expect((await findUserByEmail(target.db, registered))!.password_hash).toBe(lines[0].password_hash);
    } finally {
      await target.close();
    }
  });
});
