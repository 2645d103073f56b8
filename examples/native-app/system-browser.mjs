// Gatehouse quickstart: a mobile app signing in through the system browser (docs/quickstart/native-app.md,
// path B; RFC 8252 with a private-use URI scheme, as AppAuth does it). A public client: authorization
// code + PKCE. This script stands in for the app's network layer; the browser part is the OS's.
//
//   GATEHOUSE_URL=http://localhost:3000 CLIENT_ID=app_… node examples/native-app/system-browser.mjs
//
// Register `com.example.app:/oauth2redirect` as the app's redirect URI (Gatehouse matches it exactly).

import { once } from 'node:events';
import { createInterface } from 'node:readline';
import * as oidc from 'openid-client';

const issuer = new URL(process.env.GATEHOUSE_URL ?? 'http://localhost:3000');
const redirectUri = 'com.example.app:/oauth2redirect';
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
console.log(`Open in the system browser: ${authorizeUrl.href}`);

// The OS hands the redirect to com.example.app:/oauth2redirect?code=… to the app; here it is typed in.
const lines = createInterface({ input: process.stdin });
const [redirect] = await once(lines, 'line');
lines.close();

// Checks state and the issuer, redeems the code with the PKCE verifier, validates the ID token.
const tokens = await oidc.authorizationCodeGrant(config, new URL(redirect.trim()), { pkceCodeVerifier: verifier, expectedState: state, idTokenExpected: true });
console.log(`Signed in as ${tokens.claims().email}`);

// Later, without the browser: a new access token from the refresh token (which rotates: store the new one).
const renewed = await oidc.refreshTokenGrant(config, tokens.refresh_token);
console.log(`Renewed: ${renewed.access_token !== tokens.access_token && renewed.refresh_token !== tokens.refresh_token}`);
