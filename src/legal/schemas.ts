import { z } from 'zod';

/** docs/reference/rest-api.md#legal-documents: `terms` and `privacy` are the standard ones; any lowercase slug is allowed. */
export const DOC_TYPE = /^[a-z][a-z0-9-]{0,39}$/;
/** A BCP 47 language tag, syntactically (canonicalised with Intl afterwards). */
export const LANG_TAG = /^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8}){0,7}$/;

export const DocTypeParams = z.strictObject({ docType: z.string().regex(DOC_TYPE, 'must match ^[a-z][a-z0-9-]{0,39}$') });
export const AppParams = z.strictObject({ appId: z.string().min(1).max(200) });
export const AppDocParams = z.strictObject({ appId: z.string().min(1).max(200), docType: z.string().regex(DOC_TYPE, 'must match ^[a-z][a-z0-9-]{0,39}$') });
export const LangQuery = z.object({
  // Checked when the document is resolved: a tag that is not BCP 47 names no document (404).
  lang: z.string().max(64).optional().meta({ pattern: LANG_TAG.source, description: "BCP 47 tag; resolved exact → primary subtag → the document's default language." }),
});

export const ViewBody = z.strictObject({
  docType: z.string().regex(DOC_TYPE, 'must match ^[a-z][a-z0-9-]{0,39}$'),
  lang: z.string().max(64).optional(),
  version: z.number().int().min(1).max(1_000_000_000).optional(),
});

/** Limits of a published version (nesting and render time: `markdown.ts`, `renderer.ts`). */
export const TITLE_MAX = 200;
export const CONTENT_MAX = 60_000;

export const PublishBody = z.strictObject({
  title: z.string().trim().min(1).max(TITLE_MAX),
  content: z.string().min(1).max(CONTENT_MAX, `must be at most ${CONTENT_MAX} characters of Markdown`),
  default: z.boolean().optional(),
});
export type PublishInput = z.infer<typeof PublishBody>;
/** `?lang=` of a publish (default `en`). */
export const PublishQuery = z.strictObject({ lang: z.string().min(2).max(64).regex(LANG_TAG, 'must be a BCP 47 language tag').optional().describe('BCP 47 tag (default `en`).') });

const versionFields = {
  docType: z.string(),
  appId: z.string().optional().describe('Absent for platform documents.'),
  lang: z.string(),
  version: z.number().int(),
  title: z.string(),
  content: z.string().describe('Markdown.'),
  content_html: z.string().describe('Sanitized HTML rendering of `content`.'),
  updated_at: z.string().describe('RFC 3339 UTC.'),
  url: z.string().describe('The hosted HTML page.'),
};

export const LegalVersion = z.object(versionFields).meta({ id: 'LegalVersion', description: 'A published version of a legal document.' });

export const LegalDocument = z
  .object({ ...versionFields, available_langs: z.array(z.string()) })
  .meta({ id: 'LegalDocument', description: 'The current version of a legal document in the resolved language (docs/reference/rest-api.md#legal-documents).' });

const LegalSummary = z
  .object({ docType: z.string(), title: z.string(), version: z.number().int(), langs: z.array(z.string()), updated_at: z.string(), url: z.string() })
  .meta({ id: 'LegalSummary' });

export const LegalCenter = z.object({
  appId: z.string(),
  app_name: z.string(),
  documents: z.array(LegalSummary).describe("The app's documents."),
  platform: z.array(LegalSummary).describe('Every published platform document.'),
});

export const ViewRecorded = z.object({ status: z.literal('recorded'), docType: z.string(), lang: z.string(), version: z.number().int() });

export interface LegalDocumentView {
  docType: string;
  appId?: string;
  lang: string;
  available_langs: string[];
  version: number;
  title: string;
  content: string;
  content_html: string;
  updated_at: string;
  url: string;
}

export interface LegalSummaryView {
  docType: string;
  title: string;
  version: number;
  langs: string[];
  updated_at: string;
  url: string;
}
