import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/shared/crypto.js';
import { hashSecret } from '../../src/shared/ids.js';
import { createStorage, type Storage } from '../../src/storage/connect.js';
import { TEST_SECRET_KEY } from '../helpers/app.js';
import { childEnv, freshDatabaseUrl, runCli, runCliInProcess } from '../helpers/processes.js';

/**
 * The `gatehouse` CLI. The first test runs it as a real process through bin/gatehouse.cjs (tsx): the
 * wiring, exit code and output streams; the others run the same command code in-process (a process
 * start costs seconds each). Tests run in order and share one database.
 */
describe('CLI', { timeout: 120_000 }, () => {
  let env: Record<string, string>;
  let storage: Storage;
  let drop: () => Promise<void>;

  beforeAll(async () => {
    const database = await freshDatabaseUrl();
    drop = database.drop;
    env = childEnv({ DATABASE_URL: database.url, DATA_DIR: database.dataDir, SECRET_KEY: TEST_SECRET_KEY });
    storage = createStorage(database.url);
  });
  afterAll(async () => {
    await storage.close();
    await drop();
  });

  const json = (stdout: string) => JSON.parse(stdout);

  it('bad configuration → exit 2, one line per problem, no stack trace', async () => {
    const result = await runCli(['migrate'], { ...env, PORT: 'abc', DATABASE_URL: 'mysql://db/x', ADMIN_TOKEN: 'short' });
    expect(result.code).toBe(2);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(3);
    for (const line of lines) expect(line).toMatch(/^config error: (PORT|DATABASE_URL|ADMIN_TOKEN): /);
    expect(result.stderr).not.toMatch(/\n\s+at /);
  });

  it('production without SECRET_KEY and with an http BASE_URL → exit 2', async () => {
    const { SECRET_KEY: _omit, ...withoutKey } = env;
    const result = await runCliInProcess(['migrate'], { ...withoutKey, NODE_ENV: 'production', BASE_URL: 'http://auth.example' });
    expect(result.code).toBe(2);
    expect(result.stderr).toMatch(/config error: SECRET_KEY/);
    expect(result.stderr).toMatch(/config error: BASE_URL/);
  });

  it('unknown commands and options → exit 2 with the usage', async () => {
    const unknown = await runCliInProcess(['frobnicate'], env);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/Usage: gatehouse/);
    expect((await runCliInProcess(['developer', 'create', '--bogus'], env)).code).toBe(2);
    const help = await runCliInProcess(['--help'], env);
    expect(help.code).toBe(0);
    expect(help.stdout).toMatch(/developer create/);
  });

  it('migrate applies the migrations once', async () => {
    const migrated = await runCliInProcess(['migrate', '--json'], env);
    expect(migrated.code).toBe(0);
    expect(json(migrated.stdout).applied.length).toBeGreaterThan(0);
    expect(json((await runCliInProcess(['migrate', '--json'], env)).stdout)).toEqual({ applied: [] });
  });

  let developer: { id: string; api_key: string };

  it('developer create prints the API key once; only its hash is stored', async () => {
    const created = await runCliInProcess(['developer', 'create', '--email', 'Ops@Example.com', '--name', 'Ops', '--json'], env);
    expect(created.code).toBe(0);
    developer = json(created.stdout);
    expect(developer).toMatchObject({ id: expect.stringMatching(/^dev_/), email: 'ops@example.com', name: 'Ops', api_key: expect.stringMatching(/^dk_/) });
    const devRow = await storage.db.selectFrom('developers').selectAll().where('id', '=', developer.id).executeTakeFirstOrThrow();
    expect(devRow.api_key_hash).toBe(hashSecret(developer.api_key));

    const duplicate = await runCliInProcess(['developer', 'create', '--email', 'ops@example.com', '--json'], env);
    expect(duplicate.code).toBe(1);
    expect(json(duplicate.stdout)).toMatchObject({ code: 'conflict' });
  });

  it('app create applies the redirect-URI rules; --developer defaults to the only developer', async () => {
    const app = await runCliInProcess(
      ['app', 'create', '--name', 'Backend', '--redirect-uri', 'https://a.example/cb', '--redirect-uri', 'http://127.0.0.1:8080/cb', '--type', 'confidential', '--json'],
      env,
    );
    expect(app.code).toBe(0);
    const appBody = json(app.stdout);
    expect(appBody).toMatchObject({ name: 'Backend', type: 'confidential', redirect_uris: ['https://a.example/cb', 'http://127.0.0.1:8080/cb'], client_secret: expect.stringMatching(/^cs_/) });
    expect(appBody.client_id).toBe(appBody.id);

    const badUri = await runCliInProcess(['app', 'create', '--developer', developer.id, '--name', 'Bad', '--redirect-uri', 'javascript:alert(1)'], env);
    expect(badUri.code).toBe(1);
    expect(badUri.stderr).toMatch(/--redirect-uri\.0: the javascript: scheme is not allowed/);
    expect((await runCliInProcess(['app', 'create', '--developer', 'dev_missing', '--name', 'X', '--redirect-uri', 'https://a.example/cb'], env)).code).toBe(1);

    // The list commands run in-process in cli-lists.test.ts; this is their process wiring.
    const listed = await runCliInProcess(['app', 'list'], env);
    expect(listed.code, listed.stderr).toBe(0);
    expect(listed.stdout).toMatch(new RegExp(`^CLIENT_ID\\s+NAME\\s+TYPE\\s+DEVELOPER\\s+STATUS\\s+REDIRECT_URIS\\n${appBody.client_id}\\s+Backend\\s+confidential\\s+${developer.id}\\s+active\\s+https://a.example/cb http://127.0.0.1:8080/cb\\n$`));
  });

  it('keys rotate adds new active keys', async () => {
    const rotated = await runCliInProcess(['keys', 'rotate', '--json'], env);
    expect(rotated.code).toBe(0);
    const { kids } = json(rotated.stdout);
    expect(kids).toHaveLength(2);
    const active = await storage.db.selectFrom('signing_keys').select('kid').where('retired_at', 'is', null).execute();
    expect(active.map((k) => k.kid).sort()).toEqual([...kids].sort());
  });

  it('idp set stores the provider with its secret sealed', async () => {
    const idp = await runCliInProcess(['idp', 'set', '--issuer', 'https://idp.example', '--client-id', 'gatehouse', '--client-secret', 'idp-secret-value', '--audience', 'gatehouse', '--audience', 'ios-app', '--json'], env);
    expect(idp.code).toBe(0);
    expect(json(idp.stdout)).toEqual({ issuer: 'https://idp.example', client_id: 'gatehouse', has_client_secret: true, audiences: ['gatehouse', 'ios-app'], name: 'Identity provider' });
    expect(idp.stdout).not.toContain('idp-secret-value');
    const setting = await storage.db.selectFrom('settings').selectAll().where('key', '=', 'idp').executeTakeFirstOrThrow();
    expect(setting.value).not.toContain('idp-secret-value');
    const stored = JSON.parse(setting.value);
    expect(new SecretBox(TEST_SECRET_KEY, 'idp-client-secret').open(stored.client_secret_sealed)).toBe('idp-secret-value');

    const insecure = await runCliInProcess(['idp', 'set', '--issuer', 'http://idp.example', '--client-id', 'x'], env);
    expect(insecure.code).toBe(1);
    expect(insecure.stderr).toMatch(/--issuer/);
  });
});
