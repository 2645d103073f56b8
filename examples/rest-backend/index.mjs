// Gatehouse quickstart: an app backend that signs people in over REST, refreshes their tokens and keeps
// a small profile document for them (docs/quickstart/rest-backend.md). Node 22+, no dependencies.
//
//   GATEHOUSE_URL=http://localhost:3000 CLIENT_ID=app_… CLIENT_SECRET=cs_… node examples/rest-backend/index.mjs
//
// The app must be confidential (it has a secret) with the "profile" feature on.

const base = process.env.GATEHOUSE_URL ?? 'http://localhost:3000';
const client = { client_id: required('CLIENT_ID'), client_secret: required('CLIENT_SECRET') };
const email = process.env.EMAIL ?? `quickstart.${Date.now()}@example.com`;
const password = process.env.PASSWORD ?? 'correct horse battery staple';

function required(name) {
  const value = process.env[name];
  if (!value) throw new Error(`set ${name}`);
  return value;
}

/** One call to Gatehouse; a refusal becomes an Error naming its catalogue code. */
async function call(method, path, { body, token } = {}) {
  const response = await fetch(new URL(path, base), {
    method,
    headers: {
      ...(body ? { 'content-type': 'application/json' } : {}),
      ...(token ? { authorization: `Bearer ${token}`, 'x-client-id': client.client_id } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await response.text();
  const json = text ? JSON.parse(text) : undefined;
  if (!response.ok) throw Object.assign(new Error(`${method} ${path}: ${response.status} ${json?.code}: ${json?.message}`), { code: json?.code });
  return json;
}

// 1. Register (an email already registered answers 409 email_taken: then sign in).
try {
  await call('POST', '/v1/auth/register', { body: { email, password, name: 'Quickstart User', ...client } });
  console.log(`registered ${email}`);
} catch (error) {
  if (error.code !== 'email_taken') throw error;
}

// 2. Sign in. `pending` means the app requires something first (a verified email, profile fields, a second factor).
const signIn = await call('POST', '/v1/auth/login', { body: { email, password, ...client } });
if (signIn.status !== 'ok') throw new Error(`sign-in is pending: ${signIn.next_step}`);
const userId = signIn.user.id;
console.log(`signed in as ${userId}; access token valid ${signIn.expires_in} s`);

// 3. Keep a small document for this person at this app.
const stored = await call('PUT', `/v1/profile/${userId}`, { token: signIn.access_token, body: { data: { theme: 'dark', onboarding: 'done' } } });
console.log(`profile stored, version ${stored.version}`);

// 4. Refresh: the refresh token rotates; keep the new one, the old one is used up.
const refreshed = await call('POST', '/v1/auth/refresh', { body: { refresh_token: signIn.refresh_token, ...client } });
console.log(`refreshed; the refresh token rotated: ${refreshed.refresh_token !== signIn.refresh_token}`);

// 5. Read the document back with the new access token.
const profile = await call('GET', `/v1/profile/${userId}`, { token: refreshed.access_token });
console.log(`profile read: ${JSON.stringify(profile.data)}`);

// 6. Sign out: the refresh token and the access tokens of this sign-in stop working.
await call('POST', '/v1/auth/logout', { body: { refresh_token: refreshed.refresh_token, client_id: client.client_id } });
try {
  await call('GET', `/v1/profile/${userId}`, { token: refreshed.access_token });
  throw new Error('the access token still works after sign-out');
} catch (error) {
  if (error.code !== 'unauthorized') throw error;
  console.log('signed out: the access token is refused (401 unauthorized)');
}
