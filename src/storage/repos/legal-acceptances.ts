import type { Kysely } from 'kysely';
import { newId } from '../../shared/ids.js';
import type { Database } from '../schema.js';

/**
 * Records that a user accepted the current version of each named platform document (registration,
 * docs/reference/rest-api.md#legal-documents): the newest version in the document's default language. Unpublished documents are skipped.
 * Returns what was accepted.
 */
export async function acceptCurrentPlatformDocuments(
  db: Kysely<Database>,
  userId: string,
  docTypes: string[],
  at: number,
): Promise<Array<{ docType: string; lang: string; version: number }>> {
  const accepted: Array<{ docType: string; lang: string; version: number }> = [];
  for (const docType of docTypes) {
    const doc = await db.selectFrom('legal_documents').select('default_lang').where('owner', '=', 'platform').where('doc_type', '=', docType).executeTakeFirst();
    if (!doc) continue;
    const version = await db
      .selectFrom('legal_versions')
      .select(['lang', 'version'])
      .where('owner', '=', 'platform')
      .where('doc_type', '=', docType)
      .where('lang', '=', doc.default_lang)
      .orderBy('version', 'desc')
      .executeTakeFirst();
    if (!version) continue;
    await db
      .insertInto('legal_acceptances')
      .values({ id: newId('acc'), user_id: userId, owner: 'platform', doc_type: docType, lang: version.lang, version: version.version, accepted_at: at })
      .execute();
    accepted.push({ docType, lang: version.lang, version: version.version });
  }
  return accepted;
}
