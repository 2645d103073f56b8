// Gatehouse quickstart: an API that accepts Gatehouse access tokens (docs/quickstart/verify-tokens.md).
// Node 22+, one dependency: jose.
//
//   GATEHOUSE_URL=http://localhost:3000 CLIENT_ID=app_… PORT=4000 node examples/verify-tokens/server.mjs
//   curl -H "Authorization: Bearer <access token>" http://localhost:4000/me

import { createServer } from 'node:http';
import { createRemoteJWKSet, jwtVerify } from 'jose';

const issuer = (process.env.GATEHOUSE_URL ?? 'http://localhost:3000').replace(/\/$/, '');
const audience = process.env.CLIENT_ID; // tokens issued to your app carry its client id as `aud`
if (!audience) throw new Error('set CLIENT_ID');

// Discovery names the key set; jose fetches it once, caches it, and refetches when a new key id appears.
const discovery = await (await fetch(`${issuer}/.well-known/openid-configuration`)).json();
const keys = createRemoteJWKSet(new URL(discovery.jwks_uri));

/** The verified claims of a request's bearer token, or null. */
async function caller(request) {
  const [scheme, token] = (request.headers.authorization ?? '').split(' ');
  if (scheme !== 'Bearer' || !token) return null;
  try {
    const { payload } = await jwtVerify(token, keys, { issuer: discovery.issuer, audience, typ: 'at+jwt', algorithms: ['ES256'] });
    return payload;
  } catch {
    return null; // expired, another app's token, a forged or altered one
  }
}

const server = createServer(async (request, response) => {
  const claims = await caller(request);
  if (!claims) {
    response.writeHead(401, { 'content-type': 'application/json', 'www-authenticate': 'Bearer error="invalid_token"' });
    return response.end(JSON.stringify({ error: 'invalid_token' }));
  }
  response.writeHead(200, { 'content-type': 'application/json' });
  response.end(JSON.stringify({ user: claims.sub, scope: claims.scope }));
});

server.listen(Number(process.env.PORT ?? 4000), '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${server.address().port}`));
