import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from 'jose';

/**
 * A scripted OpenID provider on 127.0.0.1: discovery, a JWKS and a token endpoint that redeems the
 * codes a test hands it (once each) for the id_token the test chose. It lets a test do what a real
 * provider does at its edges — e.g. answer two codes with the very same id_token, as panva/oidc-provider
 * does for two sign-ins of one user within one second — without a browser at the provider.
 */
export interface ScriptedProvider {
  issuer: string;
  /** Codes the token endpoint redeems (once each) for the given id_token. */
  codes: Map<string, string>;
  /** How many times the token endpoint was called. */
  tokenCalls: number;
  /** How the token endpoint fails, when it does: a JSON 500, an HTML 502, a dropped connection, or no answer at all. */
  tokenOutage: 'json500' | 'html502' | 'reset' | 'hang' | null;
  sign(claims: Record<string, unknown>): Promise<string>;
  close(): Promise<void>;
}

/** `client_id:client_secret` of a Basic header, each part form-urldecoded (RFC 6749 §2.3.1). */
const basicCredentials = (header: string | undefined): string | undefined => {
  const [scheme, encoded] = (header ?? '').split(' ');
  if (scheme !== 'Basic' || !encoded) return undefined;
  const decode = (part: string) => decodeURIComponent(part.replace(/\+/g, ' '));
  const [id = '', secret = ''] = Buffer.from(encoded, 'base64').toString().split(':');
  return `${decode(id)}:${decode(secret)}`;
};

export async function startScriptedProvider(client: { clientId: string; clientSecret: string }): Promise<ScriptedProvider> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  const jwk: JWK = { ...(await exportJWK(privateKey)), kid: `k-${randomBytes(6).toString('hex')}`, alg: 'RS256', use: 'sig' };
  const { d: _d, p: _p, q: _q, dp: _dp, dq: _dq, qi: _qi, ...publicJwk } = jwk;
  const state: { tokenCalls: number; tokenOutage: ScriptedProvider['tokenOutage'] } = { tokenCalls: 0, tokenOutage: null };
  const codes = new Map<string, string>();
  const json = (res: ServerResponse, status: number, body: unknown) =>
    res.writeHead(status, { 'content-type': 'application/json', 'cache-control': 'no-store' }).end(JSON.stringify(body));

  let issuer = '';
  const handler = (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === '/.well-known/openid-configuration') {
      return json(res, 200, {
        issuer,
        authorization_endpoint: `${issuer}/auth`,
        token_endpoint: `${issuer}/token`,
        jwks_uri: `${issuer}/jwks`,
        response_types_supported: ['code'],
        subject_types_supported: ['public'],
        id_token_signing_alg_values_supported: ['RS256'],
        token_endpoint_auth_methods_supported: ['client_secret_basic'],
        code_challenge_methods_supported: ['S256'],
      });
    }
    if (req.method === 'GET' && path === '/jwks') return json(res, 200, { keys: [publicJwk] });
    if (req.method === 'POST' && path === '/token') {
      let body = '';
      req.on('data', (chunk) => (body += chunk));
      req.on('end', () => {
        state.tokenCalls++;
        switch (state.tokenOutage) {
          case 'json500':
            return json(res, 500, { error: 'server_error' });
          case 'html502':
            return res.writeHead(502, { 'content-type': 'text/html' }).end('<h1>Bad gateway</h1>');
          case 'reset':
            return req.socket.destroy();
          case 'hang':
            return undefined;
        }
        if (basicCredentials(req.headers.authorization) !== `${client.clientId}:${client.clientSecret}`) return json(res, 401, { error: 'invalid_client' });
        const form = new URLSearchParams(body);
        const code = form.get('code') ?? '';
        const idToken = form.get('grant_type') === 'authorization_code' ? codes.get(code) : undefined;
        if (!idToken) return json(res, 400, { error: 'invalid_grant' });
        codes.delete(code); // single use, as at any provider
        return json(res, 200, { access_token: randomBytes(16).toString('hex'), token_type: 'Bearer', expires_in: 300, id_token: idToken });
      });
      return undefined;
    }
    res.writeHead(404).end();
  };
  const server: Server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const key = await importJWK(jwk, 'RS256');
  return {
    issuer,
    codes,
    get tokenCalls() {
      return state.tokenCalls;
    },
    get tokenOutage() {
      return state.tokenOutage;
    },
    set tokenOutage(outage) {
      state.tokenOutage = outage;
    },
    sign: (claims) => new SignJWT(claims).setProtectedHeader({ alg: 'RS256', kid: jwk.kid!, typ: 'JWT' }).sign(key),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
