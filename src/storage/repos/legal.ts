import type { Kysely } from 'kysely';
import { newId } from '../../shared/ids.js';
import type { Database } from '../schema.js';
import { COLUMNS } from '../columns.js';

/**
 * Legal documents: a document is (owner, docType) where owner is 'platform' or an app
 * id; it has versions per language, numbered 1, 2, … per (owner, docType, lang). Views are counted per
 * (owner, docType, lang, version, day) with an atomic upsert.
 */

export const PLATFORM_OWNER = 'platform';

export interface LegalDocument {
  owner: string;
  docType: string;
  defaultLang: string;
  createdAt: number;
  updatedAt: number;
}

export interface LegalVersion {
  id: string;
  owner: string;
  docType: string;
  lang: string;
  version: number;
  title: string;
  content: string;
  contentHtml: string;
  createdAt: number;
}

type VersionRow = Database['legal_versions'];
const toVersion = (r: VersionRow): LegalVersion => ({
  id: r.id,
  owner: r.owner,
  docType: r.doc_type,
  lang: r.lang,
  version: Number(r.version),
  title: r.title,
  content: r.content,
  contentHtml: r.content_html,
  createdAt: Number(r.created_at),
});

export async function findLegalDocument(db: Kysely<Database>, owner: string, docType: string): Promise<LegalDocument | undefined> {
  const r = await db.selectFrom('legal_documents').select(COLUMNS.legal_documents).where('owner', '=', owner).where('doc_type', '=', docType).executeTakeFirst();
  return r && { owner: r.owner, docType: r.doc_type, defaultLang: r.default_lang, createdAt: Number(r.created_at), updatedAt: Number(r.updated_at) };
}

export async function listLegalDocuments(db: Kysely<Database>, owner: string): Promise<LegalDocument[]> {
  const rows = await db.selectFrom('legal_documents').select(COLUMNS.legal_documents).where('owner', '=', owner).orderBy('doc_type').execute();
  return rows.map((r) => ({ owner: r.owner, docType: r.doc_type, defaultLang: r.default_lang, createdAt: Number(r.created_at), updatedAt: Number(r.updated_at) }));
}

/** Languages a document is published in, in the order they were first published. */
export async function listLegalLangs(db: Kysely<Database>, owner: string, docType: string): Promise<string[]> {
  const rows = await db
    .selectFrom('legal_versions')
    .select(['lang', (eb) => eb.fn.min('id').as('first')]) // ids are time-ordered
    .where('owner', '=', owner)
    .where('doc_type', '=', docType)
    .groupBy('lang')
    .orderBy('first')
    .orderBy('lang')
    .execute();
  return rows.map((r) => r.lang);
}

/** The newest version in one language (or a given version number). */
export async function findLegalVersion(db: Kysely<Database>, owner: string, docType: string, lang: string, version?: number): Promise<LegalVersion | undefined> {
  let q = db.selectFrom('legal_versions').select(COLUMNS.legal_versions).where('owner', '=', owner).where('doc_type', '=', docType).where('lang', '=', lang);
  if (version !== undefined) q = q.where('version', '=', version);
  const row = await q.orderBy('version', 'desc').limit(1).executeTakeFirst();
  return row && toVersion(row);
}

/**
 * Publishes a new version (call inside a transaction). The document is created on its first version,
 * whose language becomes the default; a later version with `makeDefault` moves the default to its language.
 */
export async function insertLegalVersion(
  db: Kysely<Database>,
  input: { owner: string; docType: string; lang: string; title: string; content: string; contentHtml: string; makeDefault: boolean; at: number },
): Promise<LegalVersion> {
  await db
    .insertInto('legal_documents')
    .values({ owner: input.owner, doc_type: input.docType, default_lang: input.lang, created_at: input.at, updated_at: input.at })
    .onConflict((oc) => oc.columns(['owner', 'doc_type']).doUpdateSet(input.makeDefault ? { updated_at: input.at, default_lang: input.lang } : { updated_at: input.at }))
    .execute();
  const last = await db
    .selectFrom('legal_versions')
    .select((eb) => eb.fn.max('version').as('v'))
    .where('owner', '=', input.owner)
    .where('doc_type', '=', input.docType)
    .where('lang', '=', input.lang)
    .executeTakeFirst();
  const row: VersionRow = {
    id: newId('lgv'),
    owner: input.owner,
    doc_type: input.docType,
    lang: input.lang,
    version: Number(last?.v ?? 0) + 1,
    title: input.title,
    content: input.content,
    content_html: input.contentHtml,
    created_at: input.at,
  };
  // The unique (owner, doc_type, lang, version) makes a concurrent publisher fail instead of forking.
  await db.insertInto('legal_versions').values(row).execute();
  return toVersion(row);
}

/** Counts one view: an atomic insert-or-increment. */
export async function recordLegalView(db: Kysely<Database>, input: { owner: string; docType: string; lang: string; version: number; day: string }): Promise<void> {
  await db
    .insertInto('legal_views')
    .values({ owner: input.owner, doc_type: input.docType, lang: input.lang, version: input.version, day: input.day, count: 1 })
    .onConflict((oc) => oc.columns(['owner', 'doc_type', 'lang', 'version', 'day']).doUpdateSet((eb) => ({ count: eb(eb.ref('legal_views.count'), '+', 1) })))
    .execute();
}

export interface LegalViewCount {
  docType: string;
  lang: string;
  version: number;
  day: string;
  count: number;
}

/** View counts of one owner between two days (inclusive, YYYY-MM-DD). */
export async function listLegalViews(db: Kysely<Database>, owner: string, from: string, to: string): Promise<LegalViewCount[]> {
  const rows = await db
    .selectFrom('legal_views')
    .select(COLUMNS.legal_views)
    .where('owner', '=', owner)
    .where('day', '>=', from)
    .where('day', '<=', to)
    .orderBy('day')
    .orderBy('doc_type')
    .orderBy('lang')
    .orderBy('version')
    .execute();
  return rows.map((r) => ({ docType: r.doc_type, lang: r.lang, version: Number(r.version), day: r.day, count: Number(r.count) }));
}
