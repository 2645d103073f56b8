// Gatehouse quickstart: a mobile app that signed in with the provider's own SDK (Sign in with Apple,
// Google Sign-In…) and trades the provider's id_token for Gatehouse tokens (docs/quickstart/native-app.md,
// path A). This script stands in for the app's network layer. Node 22+, no dependencies.
//
//   GATEHOUSE_URL=http://localhost:3000 CLIENT_ID=app_… ID_TOKEN=eyJ… NONCE=… node examples/native-app/provider-token.mjs
//
// ID_TOKEN is what the SDK returned; NONCE is the raw nonce the app gave the SDK (it may have put its SHA-256 in the token).

import { createHash, randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { createInterface } from 'node:readline';

const base = process.env.GATEHOUSE_URL ?? 'http://localhost:3000';
const verifier = randomBytes(32).toString('base64url');
const params = {
  client_id: process.env.CLIENT_ID,
  redirect_uri: 'com.example.app:/oauth2redirect',
  response_mode: 'code',
  code_challenge: createHash('sha256').update(verifier).digest('base64url'),
  code_challenge_method: 'S256',
  state: randomBytes(16).toString('base64url'),
};

async function post(path, body) {
  const response = await fetch(new URL(path, base), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const answer = await response.json();
  if (!response.ok) throw new Error(`${response.status} ${answer.code}: ${answer.message}${answer.hosted_url ? ` (${answer.hosted_url})` : ''}`);
  return answer;
}

let answer = await post('/oauth/idp/exchange', { ...params, id_token: process.env.ID_TOKEN, nonce: process.env.NONCE });
if (answer.status === 'pending' && answer.hosted_url) {
  // Consent or profile data is missing: show the hosted page, and resume once it navigates to /oauth/authorize?…&consent=1.
  console.log(`Step "${answer.next_step}": open in a web view: ${answer.hosted_url}`);
  const lines = createInterface({ input: process.stdin });
  const [reached] = await once(lines, 'line');
  lines.close();
  if (new URL(reached).searchParams.get('consent') !== '1') throw new Error('The hosted step was not completed.');
  answer = await post('/oauth/idp/resume', { ...params, session: answer.session, consent: '1' });
}
if (answer.status !== 'ok' || answer.state !== params.state) throw new Error(`Not signed in: ${JSON.stringify(answer)}`);

// The code is an ordinary authorization code: redeem it with the PKCE verifier.
const response = await fetch(new URL('/oauth/token', base), {
  method: 'POST',
  body: new URLSearchParams({ grant_type: 'authorization_code', code: answer.code, redirect_uri: params.redirect_uri, client_id: params.client_id, code_verifier: verifier }),
});
const tokens = await response.json();
if (!response.ok) throw new Error(`${tokens.error}: ${tokens.error_description}`);
const me = await (await fetch(new URL('/oauth/userinfo', base), { headers: { authorization: `Bearer ${tokens.access_token}` } })).json();
console.log(`Signed in as ${me.email}`);
console.log(`Got a refresh token to keep in the keychain: ${Boolean(tokens.refresh_token)}`);
