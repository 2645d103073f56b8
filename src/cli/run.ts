import { parseArgs } from 'node:util';
import type { Kysely } from 'kysely';
import { CreateDeveloperBody } from '../admin/schemas.js';
import { createDeveloper } from '../admin/service.js';
import { buildApp } from '../app.js';
import { ConfigError, parseConfig, type ResolvedConfig } from '../config.js';
import { CreateAppBody } from '../dev/schemas.js';
import { createApp } from '../dev/service.js';
import { backup, restore } from './backup.js';
import { appList, type CliResult, developerList, parseInput, resolveDeveloper, userList } from './listing.js';
import { userExport, userImport } from './user-import.js';
import { AppError } from '../errors.js';
import { isValidIssuer, saveProviderSetting } from '../idp/provider.js';
import { IdpSettingBody } from '../idp/schemas.js';
import { start } from '../server.js';
import { resolveSecretKey } from '../shared/secret-key.js';
import { systemClock } from '../shared/time.js';
import { BackupError } from '../storage/backup.js';
import { createStorage, type Dialect } from '../storage/connect.js';
import { migrateToLatest } from '../storage/migrator.js';
import type { Database } from '../storage/schema.js';

/**
 * `gatehouse <command>` (docs/reference/cli.md): the operator's CLI. Configuration comes from the environment,
 * exactly as for the server (a bad value: one line per problem, exit code 2). `--json` prints the
 * result as JSON on every command. Exit codes: 0 ok, 1 the command failed, 2 bad usage or configuration.
 */

const USAGE = `Usage: gatehouse <command> [options]

Commands:
  serve                                    Run the server (WORKERS>1: one process per worker)
  migrate                                  Apply pending database migrations
  developer create --email E [--name N]    Create a developer; prints its API key once
  developer list                           List the developers (id, email, name, number of apps)
  app create [--developer ID] --name N --redirect-uri U [--redirect-uri U2 ...] [--type public|confidential]
                                           Create an app (confidential: prints its client secret once);
                                           --developer may be left out while there is only one developer
  app list [--developer ID]                List the apps (of one developer, or of all)
  user list [--app ID] [--search TEXT] [--status S] [--page N] [--page-size N]
                                           List the users of an app (with the last sign-in), or of the platform
  user import FILE [--app ID] [--dry-run]  Import users with their password hashes from NDJSON or a JSON array
                                           (docs/guides/migrating-users.md); a progress line on a terminal
  user export [--app ID] [--include-password-hashes] [--include-apps] [--output FILE]
                                           Export users as NDJSON in the import's shape (standard output by default)
  keys rotate                              Add new signing keys and retire the previous ones
  purge                                    Delete expired codes, tokens, sessions, counters, old mail and events once
  idp set --issuer URL --client-id ID [--client-secret S] [--audience A ...] [--name N]
                                           Configure the external OpenID Connect provider
  backup FILE                              Write a consistent backup of the database while it serves
                                           (SQLite: a copy; PostgreSQL: pg_dump --format=custom).
                                           SECRET_KEY is not in it: keep it, a restore needs it
  restore FILE [--force]                   Restore a backup into a new database (SQLite --force: replace
                                           a file no server has open); needs the backed-up SECRET_KEY

Options:
  --json                                   Print the result as JSON
  --help                                   Show this help
`;

const OPTIONS = {
  json: { type: 'boolean' },
  help: { type: 'boolean' },
  email: { type: 'string' },
  name: { type: 'string' },
  developer: { type: 'string' },
  'redirect-uri': { type: 'string', multiple: true },
  type: { type: 'string' },
  issuer: { type: 'string' },
  'client-id': { type: 'string' },
  'client-secret': { type: 'string' },
  audience: { type: 'string', multiple: true },
  app: { type: 'string' },
  search: { type: 'string' },
  status: { type: 'string' },
  page: { type: 'string' },
  'page-size': { type: 'string' },
  force: { type: 'boolean' },
  'dry-run': { type: 'boolean' },
  'include-password-hashes': { type: 'boolean' },
  'include-apps': { type: 'boolean' },
  output: { type: 'string' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

/** Opens the configured database (migrated) for one command, and closes it afterwards. */
async function withDatabase<T>(config: ResolvedConfig, fn: (db: Kysely<Database>, now: number, dialect: Dialect) => Promise<T>): Promise<T> {
  const storage = createStorage(config.databaseUrl);
  try {
    await migrateToLatest(storage);
    return await fn(storage.db, systemClock.now(), storage.dialect);
  } finally {
    await storage.close();
  }
}

async function migrate(config: ResolvedConfig): Promise<CliResult> {
  const storage = createStorage(config.databaseUrl);
  try {
    const applied = await migrateToLatest(storage);
    return { json: { applied }, lines: [applied.length ? `Applied: ${applied.join(', ')}` : 'The database is up to date.'] };
  } finally {
    await storage.close();
  }
}

async function developerCreate(config: ResolvedConfig, values: Values): Promise<CliResult> {
  const input = parseInput(CreateDeveloperBody, { email: values.email, name: values.name }, { email: '--email', name: '--name' });
  const developer = await withDatabase(config, (db, now) => createDeveloper(db, now, input));
  return {
    json: developer,
    lines: [`Developer ${developer.id} (${developer.email})`, `API key (shown once, store it now): ${developer.api_key}`],
  };
}

async function appCreate(config: ResolvedConfig, values: Values): Promise<CliResult> {
  const input = parseInput(
    CreateAppBody,
    { name: values.name, redirect_uris: values['redirect-uri'] ?? [], type: values.type ?? 'public' },
    { name: '--name', redirect_uris: '--redirect-uri', type: '--type' },
  );
  const app = await withDatabase(config, async (db, now) => createApp(db, now, (await resolveDeveloper(db, values.developer)).id, input));
  const lines = [`App ${app.client_id} (${app.name}, ${app.type})`, ...app.redirect_uris.map((uri) => `  redirect URI: ${uri}`)];
  if (app.client_secret) lines.push(`Client secret (shown once, store it now): ${app.client_secret}`);
  return { json: app, lines };
}

async function keysRotate(config: ResolvedConfig): Promise<CliResult> {
  // The same key store the server uses (sealing, retirement), so the rotation is exactly the admin API's.
  const app = await buildApp(config, { logStream: false });
  try {
    const kids = await app.keys.rotate();
    return { json: { kids }, lines: [`New signing keys: ${kids.join(', ')}`] };
  } finally {
    await app.close();
  }
}

async function purge(config: ResolvedConfig): Promise<CliResult> {
  const app = await buildApp(config, { logStream: false });
  try {
    const counts = await app.purge.runOnce();
    if (!counts) return { json: { skipped: true }, lines: ['Another instance is purging right now; nothing done.'] };
    return { json: counts, lines: Object.entries(counts).map(([table, n]) => `${table}: ${n} deleted`) };
  } finally {
    await app.close();
  }
}

async function idpSet(config: ResolvedConfig, values: Values): Promise<CliResult> {
  const input = parseInput(
    IdpSettingBody,
    { issuer: values.issuer, client_id: values['client-id'], client_secret: values['client-secret'], audiences: values.audience, name: values.name ?? 'Identity provider' },
    { issuer: '--issuer', client_id: '--client-id', client_secret: '--client-secret', audiences: '--audience', name: '--name' },
  );
  if (!isValidIssuer(input.issuer)) throw new AppError('invalid_request', { details: [{ path: '--issuer', message: 'must be https (http only for 127.0.0.1, [::1], localhost), without query or fragment' }] });
  const setting = await withDatabase(config, (db, now) => saveProviderSetting(db, config, input, now));
  const shown = { issuer: setting.issuer, client_id: setting.client_id, has_client_secret: setting.client_secret_sealed !== null, audiences: setting.audiences, name: setting.name };
  const lines = [`Provider "${shown.name}" set: ${shown.issuer} (client ${shown.client_id})`];
  if (config.idp) lines.push('Note: IDP_* is set in the environment and takes precedence over this setting.');
  return { json: shown, lines };
}

/** Where a CLI run reads its configuration and writes its output: the process, or a test. */
export interface CliIo {
  env: Record<string, string | undefined>;
  out: (text: string) => void;
  err: (text: string) => void;
  /** A progress line rewritten in place, when there is a terminal to show it on. */
  progress?: (text: string) => void;
}

export const PROCESS_IO: CliIo = {
  env: process.env,
  out: (text) => process.stdout.write(text),
  err: (text) => process.stderr.write(text),
  ...(process.stderr.isTTY ? { progress: (text: string) => process.stderr.write(`\r\x1b[K${text}`) } : {}),
};

/** Runs one CLI command; returns the exit code (0 ok, 1 the command failed, 2 bad usage or configuration). */
export async function run(argv: string[], io: CliIo = PROCESS_IO): Promise<number> {
  let positionals: string[];
  let values: Values;
  try {
    ({ positionals, values } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true }));
  } catch (error) {
    io.err(`${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  // `backup FILE` / `restore FILE` / `user import FILE`: the file is the command's argument, not part of its name.
  const withFile = positionals[0] === 'backup' || positionals[0] === 'restore';
  if (withFile && positionals.length > 2) {
    io.err(`${positionals[0]} takes one file name\n\n${USAGE}`);
    return 2;
  }
  const command = withFile ? positionals[0]! : positionals[0] === 'user' && positionals[1] === 'import' ? 'user import' : positionals.join(' ');
  const file = withFile ? positionals[1] : undefined;
  if (values.help || command === '') {
    io.out(USAGE);
    return values.help ? 0 : 2;
  }
  const commands: Record<string, (config: ResolvedConfig) => Promise<CliResult>> = {
    migrate,
    'developer create': (config) => developerCreate(config, values),
    'developer list': (config) => withDatabase(config, (db) => developerList(db)),
    'app create': (config) => appCreate(config, values),
    'app list': (config) => withDatabase(config, (db) => appList(db, values.developer)),
    'user list': (config) =>
      withDatabase(config, (db, _now, dialect) =>
        userList(db, dialect, { app: values.app, search: values.search, status: values.status, page: values.page, pageSize: values['page-size'] }),
      ),
    'user import': (config) => {
      const [file, ...extra] = positionals.slice(2);
      if (!file || extra.length) throw new AppError('invalid_request', { details: [{ path: 'FILE', message: 'give exactly one file: gatehouse user import FILE' }] });
      return withDatabase(config, (db, now) => userImport(db, config.secretKey, now, { file, app: values.app, dryRun: values['dry-run'] ?? false, progress: io.progress }));
    },
    'user export': (config) =>
      withDatabase(config, (db, now) =>
        userExport(db, config.secretKey, now, { app: values.app, includePasswordHashes: values['include-password-hashes'] ?? false, includeApps: values['include-apps'] ?? false, output: values.output }, io.out),
      ),
    'keys rotate': keysRotate,
    purge,
    'idp set': (config) => idpSet(config, values),
    backup: (config) => backup(config, io.env, file),
    restore: (config) => restore(config, io.env, file, values.force === true),
  };

  const handler = commands[command];
  if (!handler && command !== 'serve') {
    io.err(`unknown command: ${command}\n\n${USAGE}`);
    return 2;
  }
  let config: ResolvedConfig;
  try {
    config = resolveSecretKey(parseConfig(io.env), (message) => io.err(`warning: ${message}\n`));
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    for (const problem of error.problems) io.err(`config error: ${problem}\n`);
    return 2;
  }
  if (!handler) {
    await start(config);
    return 0;
  }
  try {
    const result = await handler(config);
    if (command === 'user import' && io.progress) io.err('\n');
    // An export to standard output keeps it for the users: its summary goes to standard error.
    const print = command === 'user export' && !values.output ? io.err : io.out;
    print(values.json ? `${JSON.stringify(result.json, null, 2)}\n` : `${result.lines.join('\n')}\n`);
    return 0;
  } catch (error) {
    if (error instanceof BackupError) {
      if (values.json) io.out(`${JSON.stringify({ message: error.message }, null, 2)}\n`);
      else io.err(`error: ${error.message}\n`);
      return 1;
    }
    if (!(error instanceof AppError)) throw error;
    const body = { code: error.code, message: error.publicMessage, ...(error.details ? { details: error.details } : {}) };
    if (values.json) io.out(`${JSON.stringify(body, null, 2)}\n`);
    else io.err([`error: ${body.message}`, ...(error.details ?? []).map((d) => `  ${d.path}: ${d.message}`)].join('\n') + '\n');
    return 1;
  }
}
