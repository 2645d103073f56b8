import { copyFileSync, existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { TEST_DIALECT, TEST_SECRET_KEY } from '../helpers/app.js';
import { childEnv, freshDatabaseUrl, runCli, runCliInProcess } from '../helpers/processes.js';
import { call, isAlive, launch, MixedLoad, pause, provision, report, type Server } from '../faults/harness.js';

// `gatehouse backup` while a server takes a steady write load, `gatehouse restore` into a fresh database,
// a server started on the restored data: users sign in with the refresh and access tokens they held
// before the backup (docs/operations/backup.md).

/** Clients writing in parallel: each has at most one request in flight. */
const LANES = 3;

interface HeldUser {
  email: string;
  password: string;
  userId: string;
  accessToken: string;
  refreshToken: string;
}

const envFor = (database: { url: string; dataDir: string }, extra: Record<string, string> = {}) =>
  childEnv({ DATABASE_URL: database.url, DATA_DIR: database.dataDir, SECRET_KEY: TEST_SECRET_KEY, ...extra });

/** How many tables the database of a URL holds (0 for a SQLite file that does not exist). */
async function tableCount(url: string): Promise<number> {
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length);
    if (!existsSync(path)) return 0;
    const db = new SQLite(path, { readonly: true });
    try {
      return (db.prepare(`select count(*) as n from sqlite_master where type = 'table'`).get() as { n: number }).n;
    } finally {
      db.close();
    }
  }
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<{ n: number }>(`select count(*)::int as n from pg_tables where schemaname = 'public'`)).rows[0]!.n;
  } finally {
    await client.end();
  }
}

describe(`backup and restore (${TEST_DIALECT})`, { timeout: 300_000 }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-backup-'));
  const databases: Array<Awaited<ReturnType<typeof freshDatabaseUrl>>> = [];
  const servers: Server[] = [];
  const fresh = async () => {
    const database = await freshDatabaseUrl();
    databases.push(database);
    return database;
  };
  let backupFile = '';
  let source: Awaited<ReturnType<typeof freshDatabaseUrl>>;
  let first: Server;

  afterAll(async () => {
    for (const server of servers) if (isAlive(server)) server.child.kill('SIGKILL');
    await Promise.all(servers.map((s) => s.done));
    for (const database of databases) await database.drop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('backs up under write load; a fresh instance on the restored data signs users in with tokens issued before the backup', async () => {
    source = await fresh();
    first = await launch(source);
    servers.push(first);
    const { clientId } = await provision(first.url);

    // Users who hold tokens from before the backup and do nothing until after the restore.
    const held: HeldUser[] = [];
    for (let i = 0; i < 4; i++) {
      const email = `held-${TEST_DIALECT}-${i}@example.com`;
      const password = `held user passphrase ${i}`;
      const registered = await call(`${first.url}/v1/auth/register`, { method: 'POST', json: { email, password, client_id: clientId } });
      expect(registered.status).toBe(201);
      const rotated = await call(`${first.url}/v1/auth/refresh`, { method: 'POST', json: { refresh_token: registered.body.refresh_token, client_id: clientId } });
      expect(rotated.status).toBe(200);
      held.push({ email, password, userId: registered.body.user.id, accessToken: rotated.body.access_token, refreshToken: rotated.body.refresh_token });
    }

    const load = new MixedLoad(first.url, clientId, `backup-${TEST_DIALECT}`);
    load.start(LANES);
    await pause(1500);
    const requestsBefore = load.requests;
    backupFile = join(dir, TEST_DIALECT === 'sqlite' ? 'gatehouse.db.backup' : 'gatehouse.dump');
    const backup = await runCli(['backup', backupFile], envFor(source));
    const requestsDuring = load.requests - requestsBefore;
    const usersAtBackupEnd = load.users.length;
    // Keep writing until a few users exist that registered after the backup had finished (a busy machine is slow).
    for (let waited = 0; waited < 20_000 && load.users.length < usersAtBackupEnd + LANES + 3; waited += 250) await pause(250);
    await load.stop();

    expect(backup.stderr).toBe('');
    expect(backup.code).toBe(0);
    expect(backup.stdout).toContain('It does NOT hold SECRET_KEY');
    expect(statSync(backupFile).mode & 0o077).toBe(0); // readable by its owner only
    // The server kept answering writes while the backup ran, and none of them failed.
    expect(requestsDuring).toBeGreaterThan(10);
    expect(Object.keys(load.statuses).filter((s) => s === 'network' || Number(s) >= 500)).toEqual([]);
    // Users registered after the backup had finished (past the ones whose request was in flight, one per lane).
    const latecomers = load.users.slice(usersAtBackupEnd + LANES);
    expect(latecomers.length).toBeGreaterThan(0);

    const target = await fresh();
    expect(await tableCount(target.url)).toBe(0);
    const restored = await runCli(['restore', backupFile], envFor(target));
    expect(restored.stderr).toBe('');
    expect(restored.code).toBe(0);

    // The same issuer as before (an operator restores behind the same BASE_URL): tokens name it.
    const second = await launch(target, { BASE_URL: first.url });
    servers.push(second);
    const failures: string[] = [];
    for (const user of held) {
      // The access token signed before the backup verifies (the signing keys came along, and opened) and the restored database takes writes.
      const profile = await call(`${second.url}/v1/profile/${user.userId}`, {
        method: 'PUT',
        headers: { authorization: `Bearer ${user.accessToken}`, 'x-client-id': clientId },
        json: { data: { restored: true } },
      });
      if (profile.status !== 200) failures.push(`${user.email}: profile write with the old access token ${profile.status} ${JSON.stringify(profile.body)}`);
      const refreshed = await call(`${second.url}/v1/auth/refresh`, { method: 'POST', json: { refresh_token: user.refreshToken, client_id: clientId } });
      if (refreshed.status !== 200) failures.push(`${user.email}: refresh ${refreshed.status} ${JSON.stringify(refreshed.body)}`);
      const login = await call(`${second.url}/v1/auth/login`, { method: 'POST', json: { email: user.email, password: user.password, client_id: clientId } });
      if (login.status !== 200) failures.push(`${user.email}: login ${login.status}`);
    }
    // The restored data is the backup's moment: users registered after it do not exist there.
    for (const user of latecomers) {
      const login = await call(`${second.url}/v1/auth/login`, { method: 'POST', json: { email: user.email, password: user.password, client_id: clientId } });
      if (login.status !== 401) failures.push(`${user.email} (registered after the backup): login ${login.status}`);
    }
    report(`backup under load (${TEST_DIALECT})`, { requests: load.requests, requestsDuringBackup: requestsDuring, users: load.users.length, latecomers: latecomers.length, backupBytes: statSync(backupFile).size });
    expect(failures).toEqual([]);
  });

  it('refuses to restore over the database a running server uses, and leaves it alone', async () => {
    const before = await tableCount(source.url);
    const args = TEST_DIALECT === 'sqlite' ? ['restore', backupFile, '--force'] : ['restore', backupFile];
    const refused = await runCliInProcess(args, envFor(source));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(TEST_DIALECT === 'sqlite' ? /is in use \(a server has it open\)/ : /is not empty/);
    expect(await tableCount(source.url)).toBe(before);
    expect((await call(`${first.url}/readyz`)).status).toBe(200);
  });

  it('refuses a backup whose signing keys do not open with SECRET_KEY, and writes nothing', async () => {
    const target = await fresh();
    const refused = await runCliInProcess(['restore', backupFile], envFor(target, { SECRET_KEY: 'another-secret-key-0123456789abcdef-0123456789' }));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/do not open with SECRET_KEY .*it is not in the backup/);
    expect(await tableCount(target.url)).toBe(0);
  });

  it('refuses a file that is not a Gatehouse backup, and never overwrites a file with a backup', async () => {
    const junk = join(dir, 'junk');
    writeFileSync(junk, 'not a database at all\n'.repeat(100));
    const target = await fresh();
    const refused = await runCliInProcess(['restore', junk], envFor(target));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(TEST_DIALECT === 'sqlite' ? /is not a SQLite database/ : /is not a pg_dump custom-format archive/);
    expect(await tableCount(target.url)).toBe(0);

    const overwrite = await runCliInProcess(['backup', junk], envFor(source));
    expect(overwrite.code).toBe(1);
    expect(overwrite.stderr).toMatch(/already exists/);
    expect(statSync(junk).size).toBe(2200);
  });

  it.runIf(TEST_DIALECT === 'sqlite')('refuses a SQLite file without Gatehouse tables, and a backup made by a newer version', async () => {
    const empty = join(dir, 'empty.db');
    new SQLite(empty).exec('create table notes (body text)');
    const target = await fresh();
    const notOurs = await runCliInProcess(['restore', empty], envFor(target));
    expect(notOurs.code).toBe(1);
    expect(notOurs.stderr).toMatch(/is not a Gatehouse database/);

    const newer = join(dir, 'newer.db');
    copyFileSync(backupFile, newer);
    const db = new SQLite(newer);
    db.prepare('insert into kysely_migration (name, timestamp) values (?, ?)').run('2099-01-01T0000_from_the_future', new Date().toISOString());
    db.close();
    const refused = await runCliInProcess(['restore', newer], envFor(target));
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/made by a newer Gatehouse .*2099-01-01T0000_from_the_future/);
    expect(await tableCount(target.url)).toBe(0);
  });
});
