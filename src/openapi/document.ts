import type { FastifyDynamicSwaggerOptions, SwaggerTransform } from '@fastify/swagger';
import { jsonSchemaTransform, jsonSchemaTransformObject } from 'fastify-type-provider-zod';
import { stringify } from 'yaml';
import type { OperationExample } from '../shared/responses.js';

/**
 * The OpenAPI 3.1 document, generated from the route schemas by @fastify/swagger with
 * fastify-type-provider-zod's transforms. Written by hand here only what no schema says: the
 * document's info, tags and security schemes.
 */

export type OpenApiDocument = Record<string, unknown> & { paths: Record<string, Record<string, Operation>> };

interface Operation {
  parameters?: Array<{ name: string; in: string; examples?: Record<string, unknown> }>;
  requestBody?: { content: Record<string, { examples?: Record<string, unknown> }> };
  responses: Record<string, { content?: Record<string, { examples?: Record<string, unknown> }>; 'x-examples'?: Record<string, unknown> }>;
  [EXAMPLES]?: Record<string, OperationExample>;
}

/** The interface's version (CHANGELOG.md): minor for additions, major for anything a client must change for. */
export const INTERFACE_VERSION = '1.2.0';

/** Where a route's `schema.examples` travel through @fastify/swagger (which keeps `x-` keys of a route schema). */
const EXAMPLES = 'x-gatehouse-examples';

const DESCRIPTION = `OAuth 2.0 / OpenID Connect authorization server for end-user sign-in: hosted pages, REST sign-in,
native provider sign-in, a per-app profile cache, email verification, legal documents, and the developer
and admin APIs.

**Errors.** JSON routes answer \`{"code", "message"}\` (plus \`details\`, \`retry_after\`, \`attempts_left\`,
\`hosted_url\` where they apply: the \`Error\` schema); \`/oauth/token\`, \`/oauth/revoke\`, \`/oauth/introspect\`
and \`/oauth/userinfo\` answer RFC 6749 \`{"error", "error_description"}\`; hosted pages answer an HTML error
page. Every operation lists the codes it can answer by status. A known path called with a method it does
not have answers 405 \`method_not_allowed\` with an \`Allow\` header; an unknown path answers 404 \`not_found\`.
Refusals made before any operation runs answer in the same shape: a path segment longer than 200 characters
414 \`uri_too_long\`, a malformed percent-escape in the path 400 \`invalid_request\`, request headers over
16 KiB 431 \`headers_too_large\` and a request that does not arrive in time 408 \`request_timeout\` (these
two close the connection). Rate limits are checked before a body is validated, so an operation that
lists 429 may answer it to a malformed request too.
Bodies are JSON (forms where an operation says so); JSON keys \`__proto__\` and \`constructor\` are refused
with 400 \`invalid_request\`.

**Metrics** are not part of this interface: with \`METRICS=1\`, Prometheus text is served at \`GET /metrics\`
on \`METRICS_PORT\` (loopback unless \`METRICS_HOST\` says otherwise; with \`METRICS_TOKEN\`, only to
\`Authorization: Bearer <token>\`, else 401 \`unauthorized\` in the \`Error\` shape). The API itself answers
\`/metrics\` with 404 \`not_found\`.`;

export const TAGS = [
  { name: 'oauth', description: 'OAuth 2.0 and OpenID Connect endpoints (docs/reference/oauth.md#endpoints).' },
  { name: 'provider', description: 'Sign-in with the external OpenID Connect provider (docs/guides/identity-provider.md#start-and-callback, docs/guides/identity-provider.md#native-exchange-and-resume).' },
  { name: 'auth', description: 'End-user REST sign-in and email verification (docs/reference/rest-api.md#end-user-sign-in, docs/reference/rest-api.md#email-verification).' },
  { name: 'profile', description: 'The per-(app, user) profile cache (docs/reference/rest-api.md#profile-cache).' },
  { name: 'legal', description: 'Public legal documents (docs/reference/rest-api.md#legal-documents).' },
  { name: 'developer', description: 'Apps, their users, events and legal documents, for developers (docs/reference/rest-api.md#developers).' },
  { name: 'admin', description: 'Platform administration (docs/reference/rest-api.md#admin).' },
  { name: 'pages', description: 'Hosted HTML pages under {auth_url} (docs/guides/hosted-pages.md#pages-sessions-and-headers).' },
  { name: 'operations', description: 'Health and this interface description.' },
  { name: 'development', description: 'Only outside production: the demo client and the dev mailbox (docs/guides/run-and-test.md#run-it).' },
];

const SECURITY_SCHEMES = {
  clientBasic: {
    type: 'http',
    scheme: 'basic',
    description: '`client_secret_basic`: the form-urlencoded client_id and client secret (RFC 6749 §2.3.1). Confidential apps only.',
  },
  accessToken: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'An access token (RFC 9068 JWT) issued to an app.' },
  sessionToken: {
    type: 'http',
    scheme: 'bearer',
    bearerFormat: 'JWT',
    description: 'A session JWT (`typ: session+jwt`) from a pending sign-in, for the app in its `aud`.',
  },
  developerKey: {
    type: 'http',
    scheme: 'bearer',
    description:
      'A developer API key (`dk_…`), only in the Authorization header. After 20 wrong keys from an IP within a minute, every `/v1/dev` request from that IP answers 429 until the minute ends.',
  },
  adminToken: {
    type: 'http',
    scheme: 'bearer',
    description:
      'The `ADMIN_TOKEN`; without one configured every `/v1/admin` route answers 401. After 20 wrong tokens from an IP within a minute, every admin request from that IP answers 429 until the minute ends.',
  },
};

/**
 * fastify-type-provider-zod's route transform, plus what it leaves out: the headers of a response in
 * content form (`Retry-After`, `WWW-Authenticate`, `Location`), and the route's examples.
 */
const transform: SwaggerTransform = (input) => {
  const output = jsonSchemaTransform(input);
  const schema = output.schema as Record<string, unknown> & { response?: Record<string, Record<string, unknown>> };
  if (schema.hide) return output;
  const declared = (input.schema.response ?? {}) as Record<string, { headers?: unknown; content?: unknown }>;
  for (const [status, response] of Object.entries(declared)) {
    if (response.content && response.headers && schema.response?.[status]) schema.response[status].headers = response.headers;
  }
  const { examples, errors: _errors, ...rest } = schema;
  // No credential named: a public operation, said explicitly (an empty requirement list).
  return { url: output.url, schema: { security: [], ...rest, ...(examples ? { [EXAMPLES]: examples } : {}) } };
};

export function swaggerOptions(baseUrl: string): FastifyDynamicSwaggerOptions {
  return {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Gatehouse', version: INTERFACE_VERSION, description: DESCRIPTION },
      servers: [{ url: baseUrl, description: '{base_url}' }],
      tags: TAGS,
      components: { securitySchemes: SECURITY_SCHEMES } as never,
    },
    transform,
    transformObject: (input) => placeExamples(keepReferencedSchemas(jsonSchemaTransformObject(input) as unknown as OpenApiDocument)),
  };
}

/**
 * fastify-type-provider-zod adds every registered schema in both its input and output form; keeps
 * those the document refers to (directly or through other schemas), sorted by name. The registry lists
 * them in the order their modules were loaded, which differs between `npm run openapi` and a test
 * worker that loaded other modules first: the checked-in document would seem stale at random.
 */
function keepReferencedSchemas(document: OpenApiDocument): OpenApiDocument {
  const schemas = (document.components as { schemas?: Record<string, unknown> } | undefined)?.schemas;
  if (!schemas) return document;
  const referenced = new Set<string>();
  const visit = (node: unknown): void => {
    const found = JSON.stringify(node).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g);
    for (const [, name] of found) {
      if (referenced.has(name!)) continue;
      referenced.add(name!);
      visit(schemas[name!]);
    }
  };
  visit(document.paths);
  (document.components as { schemas: Record<string, unknown> }).schemas = Object.fromEntries([...referenced].sort().map((name) => [name, schemas[name]]));
  return document;
}

/**
 * Places each route's examples where OpenAPI keeps them: the request body, the parameters, and the
 * response of the example's status (a response without a body lists the example names in `x-examples`).
 * Examples pair by name: `login` in the request body is answered by `login` in a response.
 */
export function placeExamples(document: OpenApiDocument): OpenApiDocument {
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      const examples = operation[EXAMPLES];
      if (!examples) continue;
      delete operation[EXAMPLES];
      const where = `${method.toUpperCase()} ${path}`;
      for (const [name, example] of Object.entries(examples)) {
        const named = <T>(value: T) => ({ summary: example.summary, value });
        for (const [location, values] of [['path', example.params], ['query', example.query], ['header', example.headers]] as const) {
          for (const [key, value] of Object.entries(values ?? {})) {
            const parameter = operation.parameters?.find((p) => p.in === location && p.name.toLowerCase() === key.toLowerCase());
            if (!parameter) throw new Error(`${where}: example ${name} sets ${location} parameter ${key}, which is not documented`);
            (parameter.examples ??= {})[name] = named(value);
          }
        }
        if (example.body !== undefined) {
          const media = Object.values(operation.requestBody?.content ?? {})[0];
          if (!media) throw new Error(`${where}: example ${name} has a body, but the operation takes none`);
          (media.examples ??= {})[name] = named(example.body);
        }
        const response = operation.responses[String(example.status)];
        if (!response) throw new Error(`${where}: example ${name} answers ${example.status}, which is not documented`);
        const media = Object.values(response.content ?? {})[0];
        if (media) {
          if (example.response === undefined) throw new Error(`${where}: example ${name} answers ${example.status} without the body`);
          (media.examples ??= {})[name] = named(example.response);
        } else {
          (response['x-examples'] ??= {})[name] = { summary: example.summary };
        }
      }
    }
  }
  return document;
}

const HEADER = `# Gatehouse interface description (OpenAPI 3.1, docs/reference/rest-api.md#interface-description), served at GET /openapi.yaml and
# /openapi.json. GENERATED from the route schemas (src/openapi/document.ts): do not edit by hand.
# Regenerate with \`npm run openapi\`; test/openapi/document.test.ts fails when this file is stale.
`;

/** The document as YAML, as checked in at openapi.yaml. */
export const toYaml = (document: OpenApiDocument): string => HEADER + stringify(document, { lineWidth: 0, aliasDuplicateObjects: false });
