import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';

/**
 * Which legal documents are published, for the hosted register and consent pages (links only; the
 * documents themselves are served by the legal feature). `owner` is 'platform' or an app id.
 */
export async function listPublishedDocTypes(db: Kysely<Database>, owner: string): Promise<string[]> {
  const rows = await db
    .selectFrom('legal_documents')
    .innerJoin('legal_versions', (join) =>
      join.onRef('legal_versions.owner', '=', 'legal_documents.owner').onRef('legal_versions.doc_type', '=', 'legal_documents.doc_type'),
    )
    .select('legal_documents.doc_type')
    .distinct()
    .where('legal_documents.owner', '=', owner)
    .orderBy('legal_documents.doc_type')
    .execute();
  return rows.map((r) => r.doc_type);
}
