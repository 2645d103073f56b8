// Gatehouse quickstart: a command-line or desktop app that signs its user in through the system browser
// (docs/quickstart/cli-app.md; RFC 8252 "OAuth 2.0 for Native Apps" with a loopback redirect). A public
// client: authorization code + PKCE, nothing secret in the app. Node 22+, one dependency: openid-client.
//
//   GATEHOUSE_URL=http://localhost:3000 CLIENT_ID=app_… node examples/cli-app/index.mjs
//
// Register `http://127.0.0.1:8765/callback` as the app's redirect URI (Gatehouse matches it exactly, port included).

import { execFile } from 'node:child_process';
import { createServer } from 'node:http';
import * as oidc from 'openid-client';

const issuer = new URL(process.env.GATEHOUSE_URL ?? 'http://localhost:3000');
const port = Number(process.env.CALLBACK_PORT ?? 8765);
const redirectUri = `http://127.0.0.1:${port}/callback`;
const insecure = issuer.protocol === 'http:' ? { execute: [oidc.allowInsecureRequests] } : undefined; // a local Gatehouse only
const config = await oidc.discovery(issuer, process.env.CLIENT_ID, undefined, oidc.None(), insecure);

const verifier = oidc.randomPKCECodeVerifier();
const state = oidc.randomState();
const authorizeUrl = oidc.buildAuthorizationUrl(config, {
  redirect_uri: redirectUri,
  scope: 'openid email offline_access',
  code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
  code_challenge_method: 'S256',
  state,
});

// Wait for the browser to come back to the loopback address with the code (one request, then close).
const callbackUrl = await new Promise((resolve, reject) => {
  const server = createServer((request, response) => {
    const url = new URL(request.url, redirectUri);
    if (url.pathname !== '/callback') return response.writeHead(404).end();
    response.writeHead(200, { 'content-type': 'text/plain; charset=utf-8' }).end('Signed in. You can close this tab and go back to the app.');
    server.close();
    resolve(url);
  });
  server.on('error', reject);
  server.listen(port, '127.0.0.1', () => {
    console.log(`Open this address to sign in: ${authorizeUrl.href}`);
    if (process.env.NO_BROWSER !== '1') {
      const opener = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open';
      execFile(opener, [authorizeUrl.href], () => undefined); // no browser to open: the printed address is enough
    }
  });
});

// Checks state and the issuer, redeems the code with the PKCE verifier, validates the ID token.
const tokens = await oidc.authorizationCodeGrant(config, callbackUrl, { pkceCodeVerifier: verifier, expectedState: state, idTokenExpected: true });
console.log(`Signed in as ${tokens.claims().email}`);
console.log(`Got a refresh token to keep in the system keychain: ${Boolean(tokens.refresh_token)}`);

// Later, without the browser: a new access token from the refresh token (which rotates).
const renewed = await oidc.refreshTokenGrant(config, tokens.refresh_token);
console.log(`Renewed: ${renewed.access_token !== tokens.access_token && renewed.refresh_token !== tokens.refresh_token}`);
