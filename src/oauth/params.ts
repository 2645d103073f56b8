import { AppError } from '../errors.js';
import { joinedResourceParam } from '../shared/resources.js';

/**
 * Request parameters of the OAuth endpoints: every parameter may appear at most once (RFC 6749 §3.1,
 * §3.2) and every value is a string. Unknown parameters are kept (callers ignore them).
 */
export type Params = Record<string, string>;

/** Parameter names present more than once (Fastify parses a repeated key into an array). */
export function duplicatedParams(raw: unknown): string[] {
  if (!raw || typeof raw !== 'object') return [];
  return Object.entries(raw as Record<string, unknown>).filter(([, v]) => Array.isArray(v)).map(([k]) => k);
}

/** The first value of a parameter, or undefined (used before duplicates are refused). */
export function firstValue(raw: unknown, name: string): string | undefined {
  if (!raw || typeof raw !== 'object') return undefined;
  const v = (raw as Record<string, unknown>)[name];
  if (typeof v === 'string') return v;
  if (Array.isArray(v) && typeof v[0] === 'string') return v[0];
  return undefined;
}

/** Single-valued string parameters, or `invalid_request` naming the offending ones. */
export function singleParams(raw: unknown): Params {
  if (raw === undefined || raw === null) return {};
  if (typeof raw !== 'object' || Array.isArray(raw)) throw new AppError('invalid_request', { message: 'The request parameters must be an object.' });
  const out: Params = {};
  const bad: string[] = [];
  for (const [k, v] of Object.entries(raw as Record<string, unknown>)) {
    if (typeof v === 'string') out[k] = v;
    else bad.push(k);
  }
  if (bad.length) {
    throw new AppError('invalid_request', {
      message: `Parameters must be sent once, as strings: ${bad.slice(0, 5).join(', ')}.`,
      detail: 'duplicated or non-string parameters',
    });
  }
  return out;
}

/**
 * singleParams, except that `resource` may repeat (RFC 8707 §2): its values kept space-separated in
 * `resource` (no URI contains a space; shared/resources.ts reads them).
 */
export function paramsWithResource(raw: unknown): Params {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return singleParams(raw);
  const { resource, ...rest } = raw as Record<string, unknown>;
  const params = singleParams(rest);
  if (resource === undefined) return params;
  const resources = joinedResourceParam(resource);
  if (resources === undefined) throw new AppError('invalid_request', { message: 'resource must be one or more strings.' });
  return { ...params, resource: resources };
}

/** A required parameter, or `invalid_request`. */
export function required(params: Params, name: string): string {
  const v = params[name];
  if (v === undefined || v === '') throw new AppError('invalid_request', { message: `The ${name} parameter is required.` });
  return v;
}
