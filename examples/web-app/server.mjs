// Gatehouse quickstart: a server-rendered web app that signs people in with Gatehouse's hosted pages
// (docs/quickstart/web-app.md): authorization code + PKCE as a confidential client, a session cookie,
// and sign-out. Node 22+, one dependency: openid-client.
//
//   GATEHOUSE_URL=http://localhost:3000 CLIENT_ID=app_… CLIENT_SECRET=cs_… APP_URL=http://localhost:4000 \
//     node examples/web-app/server.mjs
//
// Register both `${APP_URL}/callback` and `${APP_URL}/` as the app's redirect URIs.

import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import * as oidc from 'openid-client';

const issuer = new URL(process.env.GATEHOUSE_URL ?? 'http://localhost:3000');
const appUrl = new URL(process.env.APP_URL ?? 'http://localhost:4000');
const callback = new URL('/callback', appUrl).href;
// Plain http is for a Gatehouse on your own machine only.
const insecure = issuer.protocol === 'http:' ? { execute: [oidc.allowInsecureRequests] } : undefined;
const config = await oidc.discovery(issuer, process.env.CLIENT_ID, process.env.CLIENT_SECRET, undefined, insecure);

/** Sessions by an unguessable cookie value. A real app keeps them in its store, not in memory. */
const sessions = new Map();
const cookieOf = (request) => /(?:^|;\s*)sid=([^;]+)/.exec(request.headers.cookie ?? '')?.[1];
const escape = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(response, body) {
  response.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  response.end(`<!doctype html><meta charset="utf-8"><title>My app</title>${body}`);
}

function redirect(response, location, cookie) {
  response.writeHead(303, { location, ...(cookie ? { 'set-cookie': cookie } : {}) });
  response.end();
}

const server = createServer(async (request, response) => {
  const url = new URL(request.url, appUrl);
  const sid = cookieOf(request);
  const session = sid ? sessions.get(sid) : undefined;
  try {
    if (request.method === 'GET' && url.pathname === '/') {
      if (session?.user) {
        return page(response, `<p>Signed in as <strong>${escape(session.user.email)}</strong></p><form method="post" action="/logout"><button>Sign out</button></form>`);
      }
      return page(response, '<p>You are not signed in.</p><p><a href="/login">Sign in</a></p>');
    }
    if (request.method === 'GET' && url.pathname === '/login') {
      // PKCE, state and nonce for this one sign-in, kept in a fresh session.
      const pending = { verifier: oidc.randomPKCECodeVerifier(), state: oidc.randomState(), nonce: oidc.randomNonce() };
      const id = randomBytes(32).toString('base64url');
      sessions.set(id, { pending });
      const to = oidc.buildAuthorizationUrl(config, {
        redirect_uri: callback,
        scope: 'openid email profile',
        code_challenge: await oidc.calculatePKCECodeChallenge(pending.verifier),
        code_challenge_method: 'S256',
        state: pending.state,
        nonce: pending.nonce,
      });
      return redirect(response, to.href, `sid=${id}; HttpOnly; SameSite=Lax; Path=/`);
    }
    if (request.method === 'GET' && url.pathname === '/callback') {
      if (!session?.pending) return redirect(response, '/');
      // Checks state, the issuer (RFC 9207), the code with PKCE, and the ID token (signature, aud, nonce).
      const tokens = await oidc.authorizationCodeGrant(config, url, {
        pkceCodeVerifier: session.pending.verifier,
        expectedState: session.pending.state,
        expectedNonce: session.pending.nonce,
        idTokenExpected: true,
      });
      const claims = tokens.claims();
      sessions.set(sid, { user: { id: claims.sub, email: claims.email }, idToken: tokens.id_token });
      return redirect(response, '/');
    }
    if (request.method === 'POST' && url.pathname === '/logout') {
      sessions.delete(sid);
      if (!session?.idToken) return redirect(response, '/', 'sid=; Max-Age=0; Path=/');
      // Gatehouse asks the person to confirm, ends its own session, and sends them back here.
      const to = oidc.buildEndSessionUrl(config, { id_token_hint: session.idToken, post_logout_redirect_uri: new URL('/', appUrl).href });
      return redirect(response, to.href, 'sid=; Max-Age=0; Path=/');
    }
    response.writeHead(404).end();
  } catch (error) {
    // A refused sign-in (access_denied, a wrong state…) ends here; the message never holds a token.
    response.writeHead(400, { 'content-type': 'text/plain' }).end(`Sign-in failed: ${error.error ?? error.message}`);
  }
});

server.listen(Number(appUrl.port || 4000), appUrl.hostname, () => console.log(`listening on ${appUrl.origin}`));
