import type { Kysely } from 'kysely';
import { AppError } from '../errors.js';
import type { RequestContext } from '../shared/request-context.js';
import { appendQuery } from '../shared/url.js';
import { appendEvent } from '../storage/repos/events.js';
import { isoTime } from '../shared/time.js';
import {
  findLegalDocument,
  findLegalVersion,
  insertLegalVersion,
  type LegalVersion,
  listLegalDocuments,
  listLegalLangs,
  PLATFORM_OWNER,
  recordLegalView,
} from '../storage/repos/legal.js';
import type { Database } from '../storage/schema.js';
import type { MarkdownRenderer } from './renderer.js';
import { LANG_TAG, type LegalDocumentView, type LegalSummaryView, type PublishInput } from './schemas.js';

export { PLATFORM_OWNER };

/** Canonical form of a BCP 47 tag (`EN-us` → `en-US`), or undefined when it is not one. */
export function canonicalLang(tag: string): string | undefined {
  if (!LANG_TAG.test(tag)) return undefined;
  try {
    return Intl.getCanonicalLocales(tag)[0];
  } catch {
    return undefined;
  }
}

const primary = (tag: string): string => tag.split('-')[0]!.toLowerCase();

/**
 * The language served for a request (docs/reference/rest-api.md#legal-documents): the exact tag, then the primary subtag (a version
 * published as `de` for `de-AT`, else another `de-*`), then the document's default language.
 */
export function resolveLang(requested: string | undefined, langs: string[], defaultLang: string): string {
  if (requested) {
    const wanted = requested.toLowerCase();
    const exact = langs.find((l) => l.toLowerCase() === wanted);
    if (exact) return exact;
    const p = primary(requested);
    const byPrimary = langs.find((l) => l.toLowerCase() === p) ?? (primary(defaultLang) === p ? defaultLang : langs.find((l) => primary(l) === p));
    if (byPrimary) return byPrimary;
  }
  return langs.includes(defaultLang) ? defaultLang : langs[0]!;
}

/** `{auth_url}/legal/…`: the hosted HTML page of a document. */
export function hostedLegalUrl(authUrl: string, owner: string, docType: string, lang?: string): string {
  const base = authUrl.replace(/\/+$/, '');
  const path = owner === PLATFORM_OWNER ? `/legal/platform/${docType}` : `/legal/apps/${encodeURIComponent(owner)}/${docType}`;
  return appendQuery(`${base}${path}`, { lang });
}

export interface ResolvedDocument {
  version: LegalVersion;
  langs: string[];
  defaultLang: string;
}

/**
 * The newest version of a document in the resolved language; 404 `not_found` when the document does
 * not exist, or when `lang` is not a language tag at all (it can name nothing).
 */
export async function resolveDocument(db: Kysely<Database>, owner: string, docType: string, lang: string | undefined): Promise<ResolvedDocument> {
  const requested = lang === undefined || lang === '' ? undefined : canonicalLang(lang);
  if (lang && !requested) throw new AppError('not_found', { detail: 'lang is not a BCP 47 tag' });
  const doc = await findLegalDocument(db, owner, docType);
  if (!doc) throw new AppError('not_found', { detail: `no ${owner}/${docType}` });
  const langs = await listLegalLangs(db, owner, docType);
  if (langs.length === 0) throw new AppError('not_found', { detail: `no versions of ${owner}/${docType}` });
  const chosen = resolveLang(requested, langs, doc.defaultLang);
  const version = await findLegalVersion(db, owner, docType, chosen);
  if (!version) throw new AppError('not_found');
  return { version, langs, defaultLang: doc.defaultLang };
}

export function toDocumentView(authUrl: string, resolved: ResolvedDocument): LegalDocumentView {
  const { lang, ...rest } = toVersionView(authUrl, resolved.version);
  return { ...rest, lang, available_langs: resolved.langs };
}

/** Summaries of every document of an owner (legal center), each in the language resolved for `lang`. */
export async function listDocumentSummaries(db: Kysely<Database>, authUrl: string, owner: string, lang: string | undefined): Promise<LegalSummaryView[]> {
  const requested = lang ? canonicalLang(lang) : undefined;
  const out: LegalSummaryView[] = [];
  for (const doc of await listLegalDocuments(db, owner)) {
    const langs = await listLegalLangs(db, owner, doc.docType);
    if (langs.length === 0) continue;
    const chosen = resolveLang(requested, langs, doc.defaultLang);
    const version = await findLegalVersion(db, owner, doc.docType, chosen);
    if (!version) continue;
    out.push({
      docType: doc.docType,
      title: version.title,
      version: version.version,
      langs,
      updated_at: isoTime(version.createdAt),
      url: hostedLegalUrl(authUrl, owner, doc.docType, version.lang),
    });
  }
  return out;
}

const UNIQUE_VIOLATION = /unique|duplicate key/i;

/**
 * Publishes a new version (developer or admin PUT). The Markdown is rendered by `renderer` (a worker
 * pool with a time limit; content it cannot render is 400 `invalid_request`). A concurrent publisher of
 * the same language retries once.
 */
export async function publishVersion(
  db: Kysely<Database>,
  renderer: MarkdownRenderer,
  input: { owner: string; docType: string; lang: string; body: PublishInput; at: number; ctx?: RequestContext },
): Promise<LegalVersion> {
  const lang = canonicalLang(input.lang);
  if (!lang) throw new AppError('invalid_request', { details: [{ path: 'querystring.lang', message: 'must be a BCP 47 language tag' }] });
  const contentHtml = await renderer.render(input.body.content);
  const attempt = () =>
    db.transaction().execute(async (trx) => {
      const version = await insertLegalVersion(trx, {
        owner: input.owner,
        docType: input.docType,
        lang,
        title: input.body.title,
        content: input.body.content,
        contentHtml,
        makeDefault: input.body.default === true,
        at: input.at,
      });
      await appendEvent(trx, input.at, {
        type: 'legal.published',
        appId: input.owner === PLATFORM_OWNER ? null : input.owner,
        ip: input.ctx?.ip,
        userAgent: input.ctx?.userAgent,
        data: { doc_type: version.docType, lang: version.lang, version: version.version },
      });
      return version;
    });
  try {
    return await attempt();
  } catch (error) {
    if (!UNIQUE_VIOLATION.test(String((error as Error)?.message))) throw error;
    try {
      return await attempt();
    } catch (again) {
      if (UNIQUE_VIOLATION.test(String((again as Error)?.message))) throw new AppError('conflict', { detail: 'concurrent legal publish' });
      throw again;
    }
  }
}

/** The body of a 201 for a published version. */
export function toVersionView(authUrl: string, v: LegalVersion) {
  return {
    docType: v.docType,
    ...(v.owner === PLATFORM_OWNER ? {} : { appId: v.owner }),
    lang: v.lang,
    version: v.version,
    title: v.title,
    content: v.content,
    content_html: v.contentHtml,
    updated_at: isoTime(v.createdAt),
    url: hostedLegalUrl(authUrl, v.owner, v.docType, v.lang),
  };
}

/** UTC day of an epoch-seconds time. */
export const dayOf = (seconds: number): string => new Date(seconds * 1000).toISOString().slice(0, 10);

/** Per-IP limit on counted views (the POST and hosted-page opens share it). */
export const VIEW_LIMIT_PER_MINUTE = 60;

/** Counts a view of a resolved version. */
export async function countView(db: Kysely<Database>, v: LegalVersion, at: number): Promise<void> {
  await recordLegalView(db, { owner: v.owner, docType: v.docType, lang: v.lang, version: v.version, day: dayOf(at) });
}

/** Resolves the version a `POST …/view` names (a specific version must exist; else the current one). */
export async function resolveViewedVersion(
  db: Kysely<Database>,
  owner: string,
  input: { docType: string; lang?: string; version?: number },
): Promise<LegalVersion> {
  const resolved = await resolveDocument(db, owner, input.docType, input.lang);
  if (input.version === undefined || input.version === resolved.version.version) return resolved.version;
  const specific = await findLegalVersion(db, owner, input.docType, resolved.version.lang, input.version);
  if (!specific) throw new AppError('not_found', { detail: 'no such version' });
  return specific;
}
