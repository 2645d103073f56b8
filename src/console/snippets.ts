import type { App } from '../storage/repos/apps.js';

/** Copy-paste integration code for an app (the console's integration tab), from its real settings. */
export function integrationSnippets(issuer: string, app: App) {
  const redirectUri = app.redirectUris.find((uri) => uri.startsWith('http')) ?? app.redirectUris[0] ?? 'https://app.example/callback';
  const auth =
    app.type === 'confidential'
      ? `\n  process.env.GATEHOUSE_CLIENT_SECRET, // shown once in the console`
      : `\n  undefined,\n  client.None(), // a public app: PKCE, no secret`;
  // openid-client refuses a plain-http issuer unless told to: only a development server has one.
  const insecure = issuer.startsWith('http:') ? `${app.type === 'confidential' ? '\n  undefined,' : ''}\n  { execute: [client.allowInsecureRequests] }, // http: development only` : '';
  const openidClient = `import * as client from 'openid-client';

const config = await client.discovery(
  new URL('${issuer}'),
  '${app.id}',${auth}${insecure}
);

// 1. Send the user to Gatehouse (keep verifier and state in the user's session).
const verifier = client.randomPKCECodeVerifier();
const state = client.randomState();
const url = client.buildAuthorizationUrl(config, {
  redirect_uri: '${redirectUri}',
  scope: 'openid email profile',
  code_challenge: await client.calculatePKCECodeChallenge(verifier),
  code_challenge_method: 'S256',
  state,
});

// 2. On ${redirectUri}: exchange the code (currentUrl: the URL the user came back to).
const tokens = await client.authorizationCodeGrant(config, new URL(currentUrl), {
  pkceCodeVerifier: verifier,
  expectedState: state,
});
console.log(tokens.claims()?.sub);`;
  const oidcClientTs = `import { UserManager } from 'oidc-client-ts';

const users = new UserManager({
  authority: '${issuer}',
  client_id: '${app.id}',
  redirect_uri: '${redirectUri}',
  scope: 'openid email profile',
});

// Sign in (authorization code + PKCE, done for you).
await users.signinRedirect();

// On ${redirectUri}:
const user = await users.signinRedirectCallback();
console.log(user.profile.sub);`;
  return { discoveryUrl: `${issuer}/.well-known/openid-configuration`, openidClient, oidcClientTs };
}
