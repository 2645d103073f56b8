import { Ajv2020 } from 'ajv/dist/2020.js';
import ajvFormats from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EXAMPLE } from '../../src/shared/examples.js';
import { hashSecret } from '../../src/shared/ids.js';
import { insertDeveloper } from '../../src/storage/repos/developers.js';
import { buildTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.js';
import { makeApp, makeUser } from '../helpers/factories.js';

/**
 * The contract test: every example in the served OpenAPI document, replayed against the running
 * service, must answer the status its example is documented under, with a body that its documented
 * schema accepts (response schemas forbid undocumented fields, so a leaked field fails here too).
 * The database is seeded with what the examples name (the example app, user and developer); tokens
 * in examples stand for live ones, minted per request.
 */

const METHODS = ['get', 'put', 'post', 'delete', 'patch'];
const DEVELOPER_KEY = 'dk_contract-test-developer-key-0123456789abcdef';

type Media = { schema: Record<string, unknown>; examples?: Record<string, { value: unknown }> };
interface Operation {
  operationId: string;
  security?: Array<Record<string, string[]>>;
  parameters?: Array<{ name: string; in: 'path' | 'query' | 'header'; examples?: Record<string, { value: string }> }>;
  requestBody?: { content: Record<string, Media> };
  responses: Record<string, { content?: Record<string, Media>; 'x-examples'?: Record<string, unknown> }>;
}
interface Document {
  paths: Record<string, Record<string, Operation>>;
  components: Record<string, unknown>;
}

interface Call {
  name: string;
  method: string;
  path: string;
  operation: Operation;
  status: number;
}

/** Every example of every operation, DELETEs last (they remove what other examples use). */
function examplesOf(document: Document): Call[] {
  const calls: Call[] = [];
  for (const [path, item] of Object.entries(document.paths)) {
    for (const [method, operation] of Object.entries(item)) {
      if (!METHODS.includes(method)) continue;
      for (const [status, response] of Object.entries(operation.responses)) {
        const names = [...Object.values(response.content ?? {}).flatMap((media) => Object.keys(media.examples ?? {})), ...Object.keys(response['x-examples'] ?? {})];
        for (const name of new Set(names)) calls.push({ name, method, path, operation, status: Number(status) });
      }
    }
  }
  return calls.sort((a, b) => Number(a.method === 'delete') - Number(b.method === 'delete'));
}

describe('documented examples replayed against the service', () => {
  let t: TestApp;
  let document: Document;
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  ajvFormats.default(ajv);

  /** Tokens of a fresh sign-in of the example user at the example app. */
  const signIn = async (): Promise<{ access_token: string; refresh_token: string }> => {
    const res = await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: EXAMPLE.email, password: EXAMPLE.password, client_id: EXAMPLE.appId } });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };

  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '10000' } });
    document = t.app.openapi().document as unknown as Document;
    const { db } = t;
    await insertDeveloper(db, { id: EXAMPLE.developerId, email: 'dev@example.com', name: 'Example developer', createdAt: t.clock.now() }, hashSecret(DEVELOPER_KEY));
    await makeApp(db, { id: EXAMPLE.appId, developerId: EXAMPLE.developerId, name: 'Example app', redirectUris: [EXAMPLE.redirectUri] });
    await makeApp(db, { id: EXAMPLE.confidentialAppId, developerId: EXAMPLE.developerId, name: 'Example service', redirectUris: [EXAMPLE.redirectUri], clientSecret: 'cs_contract-test-secret' });
    await makeUser(t.app, { id: EXAMPLE.userId, email: EXAMPLE.email, password: EXAMPLE.password, name: 'Ada Lovelace', email_verified: 1 });
    const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    const terms = await t.app.inject({ method: 'PUT', url: '/v1/admin/legal/terms?lang=en', headers: admin, payload: { title: 'Terms of service', content: '# Terms' } });
    expect(terms.statusCode, terms.body).toBe(201);
    const { access_token } = await signIn();
    const profile = await t.app.inject({
      method: 'PUT',
      url: `/v1/profile/${EXAMPLE.userId}`,
      headers: { authorization: `Bearer ${access_token}`, 'x-client-id': EXAMPLE.appId },
      payload: { data: { theme: 'dark' } },
    });
    expect(profile.statusCode, profile.body).toBe(200);
  });
  afterAll(async () => t?.close());

  it('has examples for the main operations', () => {
    const documented = new Set(examplesOf(document).map((call) => call.operation.operationId));
    for (const operationId of ['register', 'login', 'refreshTokens', 'token', 'revoke', 'userinfo', 'getProfile', 'putProfile', 'createApp', 'listAppUsers', 'createDeveloper', 'listUsers', 'getOpenidConfiguration', 'getJwks']) {
      expect(documented, operationId).toContain(operationId);
    }
  });

  it('answers every example with its documented status and a body its schema accepts', async () => {
    const calls = examplesOf(document);
    expect(calls.length).toBeGreaterThan(30);
    const failures: string[] = [];
    for (const call of calls) {
      const where = `${call.method.toUpperCase()} ${call.path} (${call.name})`;
      const { operation } = call;
      const example = <T>(examples: Record<string, { value: T }> | undefined) => examples?.[call.name]?.value;

      let url = call.path;
      const query = new URLSearchParams();
      const headers: Record<string, string> = {};
      for (const parameter of operation.parameters ?? []) {
        const value = example(parameter.examples);
        if (value === undefined) continue;
        if (parameter.in === 'path') url = url.replace(`{${parameter.name}}`, encodeURIComponent(value));
        else if (parameter.in === 'query') query.set(parameter.name, value);
        else headers[parameter.name] = value;
      }
      const scheme = Object.keys(operation.security?.find((requirement) => Object.keys(requirement).length > 0) ?? {})[0];
      if (scheme === 'developerKey') headers.authorization = `Bearer ${DEVELOPER_KEY}`;
      if (scheme === 'adminToken') headers.authorization = `Bearer ${TEST_ADMIN_TOKEN}`;
      if (scheme === 'accessToken') headers.authorization = `Bearer ${(await signIn()).access_token}`;

      let payload: string | undefined;
      const [mediaType, media] = Object.entries(operation.requestBody?.content ?? {})[0] ?? [];
      let body = example(media?.examples);
      if (body !== undefined) {
        // The example's refresh token stands for a live one.
        if (JSON.stringify(body).includes(EXAMPLE.refreshToken)) body = JSON.parse(JSON.stringify(body).replace(EXAMPLE.refreshToken, (await signIn()).refresh_token));
        headers['content-type'] = mediaType!;
        payload = mediaType === 'application/x-www-form-urlencoded' ? new URLSearchParams(body as Record<string, string>).toString() : JSON.stringify(body);
      }

      const res = await t.app.inject({ method: call.method.toUpperCase() as 'GET', url: query.size ? `${url}?${query}` : url, headers, payload });
      if (res.statusCode !== call.status) {
        failures.push(`${where}: ${res.statusCode} instead of ${call.status}: ${res.body.slice(0, 300)}`);
        continue;
      }
      const documented = operation.responses[String(call.status)]!;
      const contentType = String(res.headers['content-type'] ?? '').split(';')[0]!;
      const responseMedia = documented.content?.[contentType];
      if (!documented.content) {
        if (res.body !== '') failures.push(`${where}: a body where none is documented`);
        continue;
      }
      if (!responseMedia) {
        failures.push(`${where}: ${contentType} is not a documented media type of ${call.status}`);
        continue;
      }
      const validate = ajv.compile({ ...responseMedia.schema, components: document.components });
      if (!validate(res.json())) failures.push(`${where}: body does not match its schema: ${ajv.errorsText(validate.errors)}; ${res.body.slice(0, 300)}`);
    }
    expect(failures).toEqual([]);
  });
});
