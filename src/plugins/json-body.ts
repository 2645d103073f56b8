import type { FastifyInstance, FastifyRequest } from 'fastify';
import sjson from 'secure-json-parse';
import { AppError } from '../errors.js';

/**
 * The JSON body parser. Fastify's own answers every refused body with one error, so well-formed JSON
 * with a `__proto__` or `constructor.prototype` key would be `invalid_json`, while the features that
 * refuse such keys deeper down (the profile document) answer `invalid_request`. Here: unparseable is
 * `invalid_json`; parseable but carrying those keys is `invalid_request`, like everywhere else.
 */
function parseJsonBody(_request: FastifyRequest, body: string, done: (error: Error | null, value?: unknown) => void): void {
  if (body.length === 0) return done(new AppError('invalid_json', { detail: 'empty JSON body' }));
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (error) {
    return done(new AppError('invalid_json', { detail: (error as Error).message }));
  }
  try {
    // Checks the parsed value; JSON.parse itself keeps `__proto__` as a plain own key, so nothing was polluted.
    if (value !== null && typeof value === 'object') sjson.scan(value, { protoAction: 'error', constructorAction: 'error' });
  } catch (error) {
    return done(new AppError('invalid_request', { message: 'JSON keys __proto__ and constructor.prototype are not accepted.', detail: (error as Error).message }));
  }
  done(null, value);
}

export function useJsonBodyParser(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => parseJsonBody(request, body as string, done));
}
