// Gatehouse quickstart: a single-page app (docs/quickstart/spa.md). Authorization code + PKCE as a public
// client with oidc-client-ts; the refresh token renews the access token without a page load.

/* global oidc, GATEHOUSE */
const here = window.location.origin;
const mgr = new oidc.UserManager({
  authority: GATEHOUSE.authority,
  client_id: GATEHOUSE.client_id,
  redirect_uri: `${here}/callback`,
  post_logout_redirect_uri: `${here}/`,
  scope: 'openid profile email offline_access', // offline_access: a refresh token, for renewing
  automaticSilentRenew: true, // renews shortly before the access token expires
});

const $ = (id) => document.getElementById(id);
function show(user, message) {
  $('status').textContent = message ?? (user ? `Signed in as ${user.profile.email}` : 'You are not signed in.');
  $('sign-in').hidden = Boolean(user);
  $('renew').hidden = !user;
  $('sign-out').hidden = !user;
}

$('sign-in').addEventListener('click', () => mgr.signinRedirect());
$('renew').addEventListener('click', async () => {
  const before = (await mgr.getUser())?.access_token;
  const user = await mgr.signinSilent(); // a POST to /oauth/token with the refresh token (CORS: this app's origin)
  show(user, `Renewed: ${user.access_token !== before ? 'a new access token' : 'the same token'} for ${user.profile.email}`);
});
$('sign-out').addEventListener('click', () => mgr.signoutRedirect()); // Gatehouse asks the person to confirm

(async () => {
  try {
    if (window.location.pathname === '/callback') {
      await mgr.signinRedirectCallback(); // checks state, exchanges the code with PKCE, validates the ID token
      window.history.replaceState({}, '', '/');
    }
    show(await mgr.getUser());
  } catch (error) {
    show(null, `Sign-in failed: ${error.message}`);
  }
})();
