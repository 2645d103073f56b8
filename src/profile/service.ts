import type { FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import { AppError } from '../errors.js';
import type { RequestContext } from '../shared/request-context.js';
import { isoTime } from '../shared/time.js';
import { appendEvent } from '../storage/repos/events.js';
import { deleteProfile, type ProfileRecord, replaceProfileIf, upsertProfile } from '../storage/repos/profiles.js';
import type { Database } from '../storage/schema.js';
import { PROFILE_MAX_BYTES, PROFILE_MAX_DEPTH, type ProfileView } from './schemas.js';

export const toProfileView = (p: ProfileRecord): ProfileView => ({
  userId: p.userId,
  data: JSON.parse(p.data) as Record<string, unknown>,
  updated_at: isoTime(p.updatedAt),
  version: p.version,
});

export const etagOf = (version: number): string => `"${version}"`;

/**
 * `If-Match` (RFC 9110 §13.1.1): `*`, or a list of entity tags compared strongly. Our tags are
 * `"<version>"`; weak or foreign tags never match. undefined when the header is absent.
 */
export function parseIfMatch(request: FastifyRequest): number[] | 'any' | undefined {
  const raw = request.headers['if-match'];
  if (raw === undefined) return undefined;
  const value = Array.isArray(raw) ? raw.join(',') : raw;
  if (value.trim() === '*') return 'any';
  const versions: number[] = [];
  for (const part of value.split(',')) {
    const m = /^"([1-9][0-9]{0,14})"$/.exec(part.trim());
    if (m) versions.push(Number(m[1]));
  }
  return versions;
}

const FORBIDDEN_KEYS = new Set(['__proto__', 'constructor', 'prototype']);

/**
 * Checks the body shape `{"data": {…}}`, the nesting depth (data = level 1; iterative, so a hostile
 * document cannot exhaust the stack), forbidden keys, then the serialized size. Returns the JSON text.
 */
export function validateProfileBody(body: unknown): string {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new AppError('invalid_request', { details: [{ path: 'body', message: 'must be an object {"data": {…}}' }] });
  }
  const keys = Object.keys(body);
  if (keys.length !== 1 || keys[0] !== 'data') {
    throw new AppError('invalid_request', { details: [{ path: 'body', message: 'must have exactly one property, "data"' }] });
  }
  const data = (body as { data: unknown }).data;
  if (data === null || typeof data !== 'object' || Array.isArray(data)) {
    throw new AppError('invalid_request', { details: [{ path: 'data', message: 'must be a JSON object' }] });
  }

  const stack: Array<{ value: object; depth: number }> = [{ value: data, depth: 1 }];
  while (stack.length > 0) {
    const { value, depth } = stack.pop()!;
    if (depth > PROFILE_MAX_DEPTH) {
      throw new AppError('invalid_request', { details: [{ path: 'data', message: `nesting deeper than ${PROFILE_MAX_DEPTH} levels` }] });
    }
    const isArray = Array.isArray(value);
    for (const key of Object.keys(value)) {
      if (!isArray && FORBIDDEN_KEYS.has(key)) {
        throw new AppError('invalid_request', { details: [{ path: 'data', message: `the key "${key}" is not allowed` }] });
      }
      const child = (value as Record<string, unknown>)[key];
      if (child !== null && typeof child === 'object') stack.push({ value: child, depth: depth + 1 });
    }
  }

  const text = JSON.stringify(data);
  if (Buffer.byteLength(text, 'utf8') > PROFILE_MAX_BYTES) {
    throw new AppError('payload_too_large', { detail: `profile data over ${PROFILE_MAX_BYTES} bytes`, message: `Profile data must be at most ${PROFILE_MAX_BYTES} bytes when serialized.` });
  }
  return text;
}

export async function writeProfile(
  db: Kysely<Database>,
  input: { appId: string; userId: string; data: string; at: number; ifMatch: number[] | 'any' | undefined; ctx: RequestContext },
): Promise<ProfileRecord> {
  return db.transaction().execute(async (trx) => {
    const record =
      input.ifMatch === undefined
        ? await upsertProfile(trx, input)
        : await replaceProfileIf(trx, { ...input, versions: input.ifMatch });
    if (!record) throw new AppError('precondition_failed', { detail: 'If-Match did not match the stored version' });
    await appendEvent(trx, input.at, {
      type: 'profile.updated',
      appId: input.appId,
      userId: input.userId,
      ip: input.ctx.ip,
      userAgent: input.ctx.userAgent,
      data: { version: record.version },
    });
    return record;
  });
}

/** DELETE is idempotent (204 when nothing is stored); with If-Match it is conditional (412 on mismatch). */
export async function removeProfile(
  db: Kysely<Database>,
  input: { appId: string; userId: string; at: number; ifMatch: number[] | 'any' | undefined; ctx: RequestContext },
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    const deleted = await deleteProfile(trx, input.appId, input.userId, input.ifMatch);
    if (!deleted) {
      if (input.ifMatch !== undefined) throw new AppError('precondition_failed', { detail: 'If-Match did not match the stored version' });
      return;
    }
    await appendEvent(trx, input.at, { type: 'profile.deleted', appId: input.appId, userId: input.userId, ip: input.ctx.ip, userAgent: input.ctx.userAgent });
  });
}
