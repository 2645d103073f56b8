import type { FastifySchemaCompiler, FastifyTypeProvider } from 'fastify';
import type { input, output, ZodType } from 'zod';

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

/**
 * The matching type provider: `app.withTypeProvider<ZodTypeProvider>()` gives handlers the parsed
 * (output) type of their zod schemas, so no handler casts its input.
 */
export interface ZodTypeProvider extends FastifyTypeProvider {
  validator: this['schema'] extends ZodType ? output<this['schema']> : unknown;
  serializer: this['schema'] extends ZodType ? input<this['schema']> : unknown;
}
