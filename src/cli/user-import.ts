import { createReadStream, createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import type { Kysely } from 'kysely';
import { AppError } from '../errors.js';
import type { Database } from '../storage/schema.js';
import { addNdjsonLine, exportLines, IMPORT_MAX_USERS, importUsers, type ParsedImport, parseImportBody, startExport } from '../user-import/index.js';
import type { CliResult } from './listing.js';

/**
 * `gatehouse user import FILE` and `gatehouse user export` (docs/guides/migrating-users.md): the admin
 * API's import and export run on the configured database. A file of any size is imported in parts of
 * 10,000 users (the API's limit), read line by line, so memory stays flat; duplicates are found across
 * the whole file.
 */

export interface ImportCliOptions {
  file: string;
  app?: string;
  dryRun: boolean;
  /** A progress line (a terminal's stderr), rewritten in place; absent: no progress shown. */
  progress?: (text: string) => void;
}

type Summary = { created: number; unchanged: number; conflict: number; invalid: number };

const describe = (s: Summary, rows: number) => `${rows} rows: ${s.created} created, ${s.unchanged} unchanged, ${s.conflict} conflict, ${s.invalid} invalid`;

/** Whether the file is one JSON document (array or `{ users }`) rather than NDJSON: its first character says. */
async function isJsonDocument(file: string): Promise<boolean> {
  const stream = createReadStream(file, { encoding: 'utf8', start: 0, end: 4095 });
  let head = '';
  for await (const chunk of stream) head += chunk;
  const first = head.trimStart()[0];
  if (first === '[') return true;
  if (first !== '{') return false;
  // `{"firebase_scrypt": …}` alone on the first line is NDJSON; `{"users": […` is one document.
  return /^\s*\{\s*"users"/.test(head) || /^\s*\{\s*"firebase_scrypt"[\s\S]*"users"\s*:/.test(head.split('\n')[0] ?? '');
}

export async function userImport(db: Kysely<Database>, secretKey: string, now: number, options: ImportCliOptions): Promise<CliResult> {
  const summary: Summary = { created: 0, unchanged: 0, conflict: 0, invalid: 0 };
  const problems: Array<Record<string, unknown>> = [];
  const seen = { emails: new Map<string, number>(), externalIds: new Map<string, number>() };
  let rows = 0;
  const runPart = async (part: ParsedImport) => {
    const result = await importUsers({ db, secretKey, now }, part, { dryRun: options.dryRun, app: options.app, via: 'cli', seen });
    for (const key of Object.keys(summary) as Array<keyof Summary>) summary[key] += result.summary[key];
    for (const r of result.results) if (r.status === 'conflict' || r.status === 'invalid') problems.push(r);
    rows += part.rows.length;
    options.progress?.(describe(summary, rows));
  };

  let missing = false;
  try {
    if (await isJsonDocument(options.file)) {
      const whole = parseImportBody(JSON.parse(await readFile(options.file, 'utf8')) as unknown);
      for (let i = 0; i < whole.rows.length; i += IMPORT_MAX_USERS) await runPart({ rows: whole.rows.slice(i, i + IMPORT_MAX_USERS), firebase: whole.firebase });
    } else {
      const lines = createInterface({ input: createReadStream(options.file, { encoding: 'utf8' }), crlfDelay: Infinity });
      let part: ParsedImport = { rows: [], firebase: null };
      let firebase: ParsedImport['firebase'] = null;
      let line = 0;
      for await (const text of lines) {
        addNdjsonLine(part, text, ++line);
        firebase ??= part.firebase;
        if (part.rows.length === IMPORT_MAX_USERS) {
          await runPart(part);
          // The Firebase parameters of the first line hold for the whole file.
          part = { rows: [], firebase };
        }
      }
      if (part.rows.length) await runPart(part);
    }
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'EISDIR' || code === 'EACCES') missing = true;
    else if (error instanceof SyntaxError) throw new AppError('invalid_json', { details: [{ path: options.file, message: 'not a JSON document (use one user per line for NDJSON)' }] });
    else throw error;
  }
  if (missing) throw new AppError('invalid_request', { details: [{ path: 'FILE', message: `cannot read ${options.file}` }] });

  const lines = [
    `${options.dryRun ? 'Dry run (nothing written): ' : ''}${describe(summary, rows)}`,
    ...problems.slice(0, 1000).map((p) => `  line ${p.line}: ${p.status} ${p.reason ?? ''}${p.email ? ` (${p.email})` : ''}${Array.isArray(p.details) ? ` — ${p.details.map((d: { path: string; message: string }) => `${d.path}: ${d.message}`).join('; ')}` : ''}`),
    ...(problems.length > 1000 ? [`  … and ${problems.length - 1000} more (--json lists them all)`] : []),
  ];
  return { json: { dry_run: options.dryRun, summary, problems }, lines };
}

export interface ExportCliOptions {
  app?: string;
  includePasswordHashes: boolean;
  includeApps: boolean;
  /** A file to write; absent: standard output. */
  output?: string;
}

export async function userExport(db: Kysely<Database>, secretKey: string, now: number, options: ExportCliOptions, out: (text: string) => void): Promise<CliResult> {
  const deps = { db, secretKey, now };
  const exportOptions = { app: options.app, includePasswordHashes: options.includePasswordHashes, includeApps: options.includeApps, via: 'cli' as const };
  await startExport(deps, exportOptions);
  const file = options.output ? createWriteStream(options.output, { mode: 0o600 }) : null;
  let users = 0;
  for await (const chunk of exportLines(deps, exportOptions)) {
    users += chunk.split('\n').length - 1;
    if (!file) out(chunk);
    else if (!file.write(chunk)) await once(file, 'drain');
  }
  if (file) await new Promise<void>((resolve, reject) => file.end((error?: Error | null) => (error ? reject(error) : resolve())));
  return { json: { exported: users, output: options.output ?? null }, lines: [`Exported ${users} users${options.output ? ` to ${options.output}` : ''}.`] };
}
