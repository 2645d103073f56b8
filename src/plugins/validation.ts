import fastJsonStringify from 'fast-json-stringify';
import type { FastifySerializerCompiler } from 'fastify';
import { z, type ZodType } from 'zod';

/**
 * Route schemas are zod schemas (fastify-type-provider-zod): `schema: { body, querystring, params,
 * headers, response }`.
 * - Input: fastify-type-provider-zod's validator. A failure becomes Fastify's validation error, which the
 *   error handler turns into 400 `invalid_request` with `details`; the parsed value replaces the input.
 * - Output: the response schema's JSON Schema (the one the OpenAPI document shows) compiled with
 *   fast-json-stringify, so no field leaves the service that its schema does not name. A payload that is
 *   already a string (HTML, YAML, a stored token response) is sent as it is.
 */
export { validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';

/**
 * Compiled serializers, per zod schema. Shared schemas (the error body, a page) are compiled once per
 * process, not once per route and app: the test suite builds hundreds of apps.
 */
const serializers = new WeakMap<ZodType, (data: unknown) => string>();

/**
 * The output JSON Schema without component references or annotations: an empty metadata registry
 * inlines every registered schema, which fast-json-stringify needs.
 */
function serializationSchema(schema: ZodType): fastJsonStringify.Schema {
  return z.toJSONSchema(schema, { io: 'output', target: 'draft-7', unrepresentable: 'any', metadata: z.registry() }) as fastJsonStringify.Schema;
}

export const serializerCompiler: FastifySerializerCompiler<ZodType> = ({ schema }) => {
  let serialize = serializers.get(schema);
  if (!serialize) {
    serialize = fastJsonStringify(serializationSchema(schema)) as (data: unknown) => string;
    serializers.set(schema, serialize);
  }
  return serialize;
};
