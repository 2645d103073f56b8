import type { FastifySchemaCompiler } from 'fastify';
import type { ZodType } from 'zod';

/**
 * Route schemas are zod schemas: `schema: { body: Z, querystring: Z, params: Z }`. A failure becomes
 * Fastify's validation error, which the error handler turns into 400 `invalid_request` with `details`.
 * The parsed (and transformed) value replaces the raw input.
 */
export const validatorCompiler: FastifySchemaCompiler<ZodType> = ({ schema }) => (data) => {
  const result = schema.safeParse(data);
  if (result.success) return { value: result.data };
  const error = Object.assign(new Error('validation failed'), {
    validation: result.error.issues.map((issue) => ({
      instancePath: `/${issue.path.join('/')}`,
      message: issue.message,
      params: { path: issue.path },
    })),
  });
  return { error };
};
