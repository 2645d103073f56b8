import type { Kysely } from 'kysely';
import type { ZodType } from 'zod';
import { listDeveloperViews, listUsers } from '../admin/service.js';
import { UserListQuery as PlatformUserListQuery } from '../admin/schemas.js';
import { toListItem, UserListQuery as AppUserListQuery } from '../dev/app-users.js';
import { toAppView } from '../dev/service.js';
import { AppError } from '../errors.js';
import type { Dialect } from '../storage/connect.js';
import { listAppUsers } from '../storage/repos/app-user-listing.js';
import { findApp, listAllApps, listAppsOfDeveloper } from '../storage/repos/apps.js';
import { type Developer, findDeveloper, listDevelopers } from '../storage/repos/developers.js';
import type { Database } from '../storage/schema.js';

/**
 * The CLI's list commands (`developer list`, `app list`, `user list`) and the `--developer` default,
 * as functions of an open database so they run in-process (src/cli.ts is only the process wrapper).
 * Each result has its JSON form (what `--json` prints, shaped like the HTTP API's lists) and a table.
 */

/** A command's result: the JSON form, and the lines a person reads. */
export interface CliResult {
  json: unknown;
  lines: string[];
}

/** Validates flags with the same schema as the HTTP API; a problem names the flag (`--redirect-uri.1: …`). */
export function parseInput<T>(schema: ZodType<T>, input: unknown, flagOf: Record<string, string>): T {
  const parsed = schema.safeParse(input);
  if (parsed.success) return parsed.data;
  const details = parsed.error.issues.map((issue) => {
    const [field, ...rest] = issue.path.map(String);
    const flag = field ? (flagOf[field] ?? field) : 'input';
    return { path: [flag, ...rest].join('.'), message: issue.message };
  });
  throw new AppError('invalid_request', { details });
}

/** Left-aligned columns under a header; `(none)` for no rows. */
export function table(header: string[], rows: string[][]): string[] {
  if (rows.length === 0) return ['(none)'];
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) => cells.map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i]!))).join('  ');
  return [line(header), ...rows.map(line)];
}

/** `2026-11-24T13:17:55.000Z` → `2026-11-24 13:17` (UTC), for tables. */
const shortTime = (iso: string | null): string => (iso === null ? '-' : `${iso.slice(0, 10)} ${iso.slice(11, 16)}`);

const describeDeveloper = (d: Developer) => `${d.id} (${d.email})`;

/**
 * The developer a command acts for: `--developer ID` when given (it must exist), otherwise the only
 * developer there is. None, or several, is an error that says what to do (and names the choices).
 */
export async function resolveDeveloper(db: Kysely<Database>, given: string | undefined): Promise<Developer> {
  if (given !== undefined) {
    const developer = await findDeveloper(db, given);
    if (!developer) throw new AppError('not_found', { message: `No developer with id ${given}. List them with \`gatehouse developer list\`.` });
    return developer;
  }
  const developers = await listDevelopers(db);
  if (developers.length === 1) return developers[0]!;
  if (developers.length === 0) {
    throw new AppError('invalid_request', { message: 'There is no developer yet: create one with `gatehouse developer create --email E`.' });
  }
  throw new AppError('invalid_request', {
    message: `There are ${developers.length} developers: choose one with --developer ID.`,
    details: developers.map((d) => ({ path: '--developer', message: describeDeveloper(d) })),
  });
}

/** `developer list`: every developer, newest first, with how many apps each owns. */
export async function developerList(db: Kysely<Database>): Promise<CliResult> {
  const [developers, apps] = await Promise.all([listDeveloperViews(db), listAllApps(db)]);
  const appCount = (id: string) => apps.filter((a) => a.developerId === id).length;
  const items = developers.map((d) => ({ ...d, app_count: appCount(d.id) }));
  return {
    json: { items },
    lines: table(
      ['ID', 'EMAIL', 'NAME', 'APPS', 'CREATED'],
      items.map((d) => [d.id, d.email, d.name, String(d.app_count), shortTime(d.created_at)]),
    ),
  };
}

/** `app list [--developer ID]`: the apps of one developer, or of every developer. */
export async function appList(db: Kysely<Database>, developerId: string | undefined): Promise<CliResult> {
  const apps = developerId === undefined ? await listAllApps(db) : await listAppsOfDeveloper(db, (await resolveDeveloper(db, developerId)).id);
  const items = apps.map((app) => ({ ...toAppView(app), developer_id: app.developerId }));
  return {
    json: { items },
    lines: table(
      ['CLIENT_ID', 'NAME', 'TYPE', 'DEVELOPER', 'STATUS', 'REDIRECT_URIS'],
      items.map((a) => [a.client_id, a.name, a.type, a.developer_id, a.disabled ? 'disabled' : 'active', a.redirect_uris.join(' ')]),
    ),
  };
}

export interface UserListOptions {
  app?: string;
  search?: string;
  status?: string;
  page?: string;
  pageSize?: string;
}

const USER_FLAGS = { q: '--search', status: '--status', page: '--page', pageSize: '--page-size' };

/**
 * `user list [--app ID] [--search TEXT] [--status S] [--page N] [--page-size N]`: the users of one app
 * (as `GET /v1/dev/apps/{id}/users`, with the last sign-in), or every user of the platform (as
 * `GET /v1/admin/users`). Newest first.
 */
export async function userList(db: Kysely<Database>, dialect: Dialect, options: UserListOptions): Promise<CliResult> {
  const query = { q: options.search, status: options.status, page: options.page, pageSize: options.pageSize };
  if (options.app === undefined) {
    const input = parseInput(PlatformUserListQuery, query, USER_FLAGS);
    const result = await listUsers(db, input);
    return {
      json: result,
      lines: [
        ...table(
          ['ID', 'EMAIL', 'NAME', 'STATUS', 'VERIFIED', 'CREATED'],
          result.items.map((u) => [u.id, u.email, u.name ?? '-', u.status, u.email_verified ? 'yes' : 'no', shortTime(u.created_at)]),
        ),
        pageLine(result.page, result.pageSize, result.total),
      ],
    };
  }
  const input = parseInput(AppUserListQuery, query, USER_FLAGS);
  const app = options.app.length <= 200 ? await findApp(db, options.app) : undefined;
  if (!app) throw new AppError('not_found', { message: `No app with client_id ${options.app}. List them with \`gatehouse app list\`.` });
  const page = input.page ?? 1;
  const pageSize = input.pageSize ?? 20;
  const { items, total } = await listAppUsers(db, dialect, { appId: app.id, q: input.q, status: input.status, page, pageSize });
  const shown = items.map(toListItem);
  return {
    json: { items: shown, page, pageSize, total },
    lines: [
      ...table(
        ['ID', 'EMAIL', 'NAME', 'STATUS', 'VERIFIED', 'LAST_SIGN_IN'],
        shown.map((u) => [u.id, u.email, u.name ?? '-', u.status, u.email_verified ? 'yes' : 'no', shortTime(u.last_login_at)]),
      ),
      pageLine(page, pageSize, total),
    ],
  };
}

const pageLine = (page: number, pageSize: number, total: number) => `Page ${page} (${pageSize} per page) of ${total} user${total === 1 ? '' : 's'}.`;
