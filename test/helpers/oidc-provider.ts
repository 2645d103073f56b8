import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from 'jose';
// @ts-expect-error -- oidc-provider ships no type declarations
import Provider from 'oidc-provider';

/**
 * A real OpenID Connect provider (panva/oidc-provider) on 127.0.0.1, playing the external provider P.
 * Gatehouse is registered as a confidential client (client_secret_basic, PKCE). Any login works at the
 * provider's development sign-in form (`login` = the subject). Consent at the provider is implicit.
 * `sign()` mints arbitrary id_tokens with the provider's own signing key; `rotate()` swaps in a new key.
 */

export interface TestProvider {
  issuer: string;
  clientId: string;
  clientSecret: string;
  /** The current signing key (private JWK, with kid). */
  signingKey: JWK;
  /** How many times the JWKS was fetched. */
  jwksHits: number;
  sign(claims: Record<string, unknown>, options?: { key?: JWK; header?: Record<string, unknown> }): Promise<string>;
  /** Standard id_token claims for `sub` (iss, aud, iat, exp). */
  claims(sub: string, extra?: Record<string, unknown>): Record<string, unknown>;
  rotate(): Promise<JWK>;
  close(): Promise<void>;
}

export async function newRsaJwk(): Promise<JWK> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk = await exportJWK(privateKey);
  return { ...jwk, kid: `k-${randomBytes(6).toString('hex')}`, alg: 'RS256', use: 'sig' };
}

export async function startProvider(options: { redirectUris: string[]; clientId?: string }): Promise<TestProvider> {
  const clientId = options.clientId ?? 'gatehouse-client';
  const clientSecret = `secret-${randomBytes(16).toString('hex')}`;
  let keys: JWK[] = [await newRsaJwk()];
  let handler: (req: import('node:http').IncomingMessage, res: import('node:http').ServerResponse) => void = () => undefined;
  const state = { jwksHits: 0 };
  const server: Server = createServer((req, res) => {
    if (req.url?.startsWith('/jwks')) state.jwksHits++;
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const build = () => {
    const provider = new Provider(issuer, {
      clients: [
        {
          client_id: clientId,
          client_secret: clientSecret,
          redirect_uris: options.redirectUris,
          grant_types: ['authorization_code'],
          response_types: ['code'],
          token_endpoint_auth_method: 'client_secret_basic',
        },
      ],
      jwks: { keys },
      cookies: { keys: ['test-cookie-key-0123456789'] },
      claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
      findAccount: async (_ctx: unknown, id: string) => ({
        accountId: id,
        claims: async () => ({ sub: id, email: `${id}@idp.test`, email_verified: true, name: `User ${id}` }),
      }),
      features: { devInteractions: { enabled: true } },
      pkce: { required: () => true },
      // Implicit consent at the provider: Gatehouse is a first-party client here.
      loadExistingGrant: async (ctx: any) => {
        const grantId = ctx.oidc.result?.consent?.grantId || ctx.oidc.session.grantIdFor(ctx.oidc.client.clientId);
        if (grantId) return ctx.oidc.provider.Grant.find(grantId);
        const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client.clientId, accountId: ctx.oidc.session.accountId });
        grant.addOIDCScope('openid email profile');
        grant.addOIDCClaims(['email', 'email_verified', 'name']);
        await grant.save();
        return grant;
      },
    } as any);
    provider.on('server_error', () => undefined);
    handler = provider.callback() as typeof handler;
  };
  build();

  const api: TestProvider = {
    issuer,
    clientId,
    clientSecret,
    get signingKey() {
      return keys[0]!;
    },
    get jwksHits() {
      return state.jwksHits;
    },
    claims(sub, extra = {}) {
      const now = Math.floor(Date.now() / 1000);
      return { iss: issuer, sub, aud: clientId, iat: now, exp: now + 300, ...extra };
    },
    async sign(claims, opts = {}) {
      const jwk = opts.key ?? keys[0]!;
      const key = await importJWK(jwk, 'RS256');
      return new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: jwk.kid, typ: 'JWT', ...(opts.header ?? {}) }).sign(key);
    },
    async rotate() {
      const fresh = await newRsaJwk();
      keys = [fresh, ...keys];
      build();
      return fresh;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  return api;
}
