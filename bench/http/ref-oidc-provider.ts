import { createServer } from 'node:http';
import { createHash } from 'node:crypto';
import { exportJWK, generateKeyPair } from 'jose';
// @ts-expect-error -- oidc-provider ships no type declarations
import Provider from 'oidc-provider';
// oidc-provider's own in-memory adapter, over a larger LRU: its default store keeps 1,000 entries,
// which would evict a pool of tens of thousands of codes or refresh tokens before the run.
// @ts-expect-error -- no type declarations
import MemoryAdapter from 'oidc-provider/lib/adapters/memory_adapter.js';
// @ts-expect-error -- no type declarations
import LRU from 'oidc-provider/lib/helpers/lru.js';

/**
 * The `oidc-provider` (v9) reference of `npm run bench -- http`, one process, NODE_ENV=production:
 * memory adapter, ES256 JWT access tokens (resource indicators with a default resource whose access
 * token format is `jwt`), RS256 ID tokens, refresh-token rotation on, PKCE required, one confidential
 * client with client_secret_basic.
 *
 * `POST /__bench/mint?kind=code|refresh|refresh-openid&n=N` mints pools directly through the
 * provider's models (a Grant per item, then an AuthorizationCode or a RefreshToken) and answers them
 * as a JSON array; it is outside the provider's routes and not part of the measured work.
 * Usage: node --import tsx bench/http/ref-oidc-provider.ts <port>
 */

const port = Number(process.argv[2]);
const ISSUER = 'https://oidc.bench.test';
const RESOURCE = 'https://api.bench.test';
const REF_CLIENT = { id: 'bench', secret: 'bench-client-secret-0123456789abcdef', redirectUri: 'https://bench.example/cb' };
const REF_PKCE = { verifier: 'bench-code-verifier-0123456789abcdefghijklmnopqrstuvwxyz-ABCDEF', challenge: '' };

const es = await generateKeyPair('ES256', { extractable: true });
const rs = await generateKeyPair('RS256', { extractable: true });
const jwks = { keys: [{ ...(await exportJWK(es.privateKey)), kid: 'es1', alg: 'ES256', use: 'sig' }, { ...(await exportJWK(rs.privateKey)), kid: 'rs1', alg: 'RS256', use: 'sig' }] };

const store = new LRU({ maxSize: 5_000_000 });

const provider = new Provider(ISSUER, {
  adapter: (name: string) => new MemoryAdapter(name, store),
  clients: [
    {
      client_id: REF_CLIENT.id,
      client_secret: REF_CLIENT.secret,
      redirect_uris: [REF_CLIENT.redirectUri],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  jwks,
  cookies: { keys: ['bench-cookie-key-0123456789abcdef'] },
  claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
  findAccount: async (_ctx: unknown, sub: string) => ({
    accountId: sub,
    claims: async () => ({ sub, email: `${sub}@bench.test`, email_verified: true, name: `User ${sub}` }),
  }),
  features: {
    devInteractions: { enabled: false },
    resourceIndicators: {
      enabled: true,
      defaultResource: async () => RESOURCE,
      useGrantedResource: async () => true,
      getResourceServerInfo: async () => ({
        scope: 'api',
        audience: RESOURCE,
        accessTokenTTL: 900,
        accessTokenFormat: 'jwt',
        jwt: { sign: { alg: 'ES256' } },
      }),
    },
  },
  pkce: { required: () => true },
  rotateRefreshToken: true,
  ttl: { AccessToken: 900, AuthorizationCode: 60, IdToken: 900, RefreshToken: 2_592_000, Grant: 2_592_000 },
} as never);

type AnyModel = { save(): Promise<string> } & Record<string, unknown>;
const models = provider as unknown as {
  Client: { find(id: string): Promise<unknown> };
  Grant: new (init: Record<string, unknown>) => AnyModel & { addOIDCScope(s: string): void; addResourceScope(r: string, s: string): void };
  AuthorizationCode: new (init: Record<string, unknown>) => AnyModel;
  RefreshToken: new (init: Record<string, unknown>) => AnyModel;
};

REF_PKCE.challenge = createHash('sha256').update(REF_PKCE.verifier).digest('base64url');

async function mint(kind: string, n: number): Promise<string[]> {
  const client = await models.Client.find(REF_CLIENT.id);
  const out: string[] = [];
  const authTime = Math.floor(Date.now() / 1000);
  for (let i = 0; i < n; i++) {
    const accountId = `usr_${i % 64}`;
    const openid = kind !== 'refresh';
    const oidcScope = openid ? 'openid offline_access profile email' : 'offline_access';
    const grant = new models.Grant({ accountId, clientId: REF_CLIENT.id });
    grant.addOIDCScope(oidcScope);
    grant.addResourceScope(RESOURCE, 'api');
    const grantId = await grant.save();
    const scope = `${oidcScope} api`;
    if (kind === 'code') {
      const code = new models.AuthorizationCode({
        accountId,
        acr: '0',
        authTime,
        client,
        codeChallenge: REF_PKCE.challenge,
        codeChallengeMethod: 'S256',
        grantId,
        redirectUri: REF_CLIENT.redirectUri,
        resource: RESOURCE,
        scope,
      });
      out.push(await code.save());
    } else {
      const rt = new models.RefreshToken({
        accountId,
        acr: '0',
        authTime,
        client,
        grantId,
        gty: 'authorization_code',
        resource: RESOURCE,
        rotations: 0,
        scope,
      });
      out.push(await rt.save());
    }
  }
  return out;
}

const callback = provider.callback();
const server = createServer((req, res) => {
  if (req.url?.startsWith('/__bench/')) {
    const url = new URL(req.url, 'http://x');
    if (url.pathname === '/__bench/ready') return void res.end('{"ok":true}');
    if (url.pathname === '/__bench/setup') return void res.end(JSON.stringify({ client: REF_CLIENT, pkce: REF_PKCE }));
    if (url.pathname === '/__bench/mint') {
      mint(url.searchParams.get('kind') ?? 'code', Number(url.searchParams.get('n') ?? 1)).then(
        (items) => res.end(JSON.stringify(items)),
        (error: unknown) => {
          res.statusCode = 500;
          res.end(String(error instanceof Error ? error.stack : error));
        },
      );
      return;
    }
  }
  callback(req, res);
});
server.listen(port, '127.0.0.1');
const shutdown = () => server.close(() => process.exit(0));
process.once('SIGTERM', shutdown);
process.once('SIGINT', shutdown);
