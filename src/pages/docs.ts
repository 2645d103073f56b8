import type { RouteOptions } from 'fastify';
import { html, redirect, shareRouteDocs, text } from '../shared/responses.js';

/**
 * The hosted pages in the OpenAPI document (docs/guides/hosted-pages.md#pages-sessions-and-headers): every page route must have an entry here
 * (the pages scope refuses to register one without). A GET renders the page; a POST is a form
 * (`application/x-www-form-urlencoded`, field names of docs/guides/hosted-pages.md#stable-hooks, with the session's `csrf`)
 * that redirects (303) on success and renders the page again, with its message and the status of the
 * error, when it fails. Pages render errors as HTML.
 */

export interface PageDoc {
  operationId: string;
  summary: string;
  description?: string;
  /** A GET that answers with a redirect instead of a page. */
  redirects?: string;
  /** Statuses other than 200 at which the page itself is rendered, by the codes that cause them. */
  errors?: Record<number, string[]>;
  /** A file rather than a page: its description and media type. */
  file?: [description: string, mediaType: string];
}

export const form = (operationId: string, summary: string, errors: Record<number, string[]>, description?: string): PageDoc => ({ operationId, summary, errors, description });
const signInForm = { 400: ['invalid_request'], 401: ['invalid_credentials'], 403: ['user_disabled', 'user_blocked'], 429: ['rate_limited'] };

const PAGES: Record<string, PageDoc> = {
  'GET /assets/gatehouse.css': { operationId: 'getPagesStylesheet', summary: 'The stylesheet of the hosted pages', file: ['The stylesheet.', 'text/css'] },
  'GET /assets/recovery-codes.js': { operationId: 'getRecoveryCodesScript', summary: 'The optional script of the recovery-codes page (copy, download, print)', file: ['The script.', 'text/javascript'] },
  'GET /assets/brand/{file}': {
    operationId: 'getAppBrandStylesheet',
    summary: "An app's accent colour, as a stylesheet",
    description: '`{file}` is `{client_id}.css`; the hosted pages link it while a sign-in for that app is in flight.',
    file: ['The stylesheet.', 'text/css'],
    errors: { 400: ['invalid_request'], 404: ['not_found'] },
  },
  'GET /favicon.svg': { operationId: 'getFavicon', summary: 'The favicon of the hosted pages', file: ['The icon.', 'image/svg+xml'] },
  'GET /favicon.ico': { operationId: 'getFaviconIco', summary: 'The favicon, where browsers look for it unasked', file: ['The icon (SVG).', 'image/svg+xml'] },
  'POST /language': form('switchLanguage', 'Choose the language of the hosted pages', { 400: ['invalid_request'], 403: ['forbidden'] }, 'Fields `locale` (one of the hosted pages\' locales), `back` (the page to return to, a path on this site) and `csrf` when the browser has a session. Sets the `gh_locale` cookie and, for someone signed in, their saved locale; redirects (303) back with `ui_locales` rewritten.'),
  'GET /error': { operationId: 'errorPage', summary: 'The generic error page', errors: { 400: ['invalid_request'] } },
  'GET /login': { operationId: 'loginPage', summary: 'Sign-in page', description: 'Password, magic link, or "Continue with {IDP_NAME}". Carries the authorization request in its query.' },
  'POST /login': form('submitLogin', 'Sign in', signInForm, '`action`: `login`, `send_magic_link` or `idp`.'),
  'GET /register': { operationId: 'registerPage', summary: 'Registration page' },
  'POST /register': form('submitRegister', 'Register', { 400: ['invalid_request', 'weak_password'], 409: ['email_taken'], 429: ['rate_limited'] }, 'Fields `email`, `password`, `name`, `accept_terms`.'),
  'GET /consent': { operationId: 'consentPage', summary: 'Consent page', description: 'App name, scopes and legal documents, with Allow and Deny.' },
  'POST /consent': form('submitConsent', 'Allow or deny', {}, '`action`: `allow` or `deny`; both redirect (deny: to the app with `access_denied`).'),
  'GET /device': {
    operationId: 'devicePage',
    summary: 'Device sign-in: enter the user code (RFC 8628 §3.3)',
    description: 'The `verification_uri` of `POST /oauth/device_authorization`; with `user_code` (the `verification_uri_complete`) the field is filled in, and the person still submits it.',
  },
  'POST /device': form(
    'submitDeviceCode',
    'Enter a user code',
    { 400: ['invalid_request'], 429: ['rate_limited'] },
    '`user_code` (any case; dashes and spaces ignored). An unknown, used or expired code, or one of an app that cannot use the grant, gets the same message. 20 wrong codes per IP and 5 per browser session in 10 minutes, then 429. Redirects (303) to `/device/continue`.',
  ),
  'GET /device/continue': {
    operationId: 'deviceContinuePage',
    summary: 'Device sign-in: sign-in, second factor, approval, profile data',
    description: 'The steps of `/oauth/authorize` for the device request this browser entered the code of (sign-in, second factor, profile data, each page resuming here), and the approval page: the app, the scopes, the code and the warning to approve only a code from a device of your own. Then the done page. Without a live request: the code entry with a message (400).',
    redirects: '`/login`, `/mfa` or `/profile`, to come back here',
    errors: { 400: ['invalid_request'] },
  },
  'POST /device/continue': form('submitDeviceDecision', 'Approve or deny the device', { 400: ['invalid_request'] }, '`action`: `approve` (goes on with the remaining steps, 303 here) or `deny` (the done page; the device gets `access_denied`).'),
  'GET /profile': { operationId: 'profilePage', summary: 'Required profile data page' },
  'POST /profile': form('submitProfile', 'Supply required profile data', { 400: ['invalid_request'] }),
  'GET /oauth/logout': { operationId: 'logoutPage', summary: 'RP-initiated logout', description: 'Confirmation page, or a redirect to the whitelisted `post_logout_redirect_uri`.', redirects: 'the `post_logout_redirect_uri`' },
  'POST /oauth/logout': form('submitLogout', 'Sign out', { 400: ['invalid_request'] }),
  'GET /legal/platform/{docType}': { operationId: 'platformLegalPage', summary: 'A platform legal document, as a page', errors: { 404: ['not_found'] } },
  'GET /legal/apps/{appId}/{docType}': { operationId: 'appLegalPage', summary: "An app's legal document, as a page", errors: { 404: ['not_found'] } },
  'GET /continue': { operationId: 'continuePage', summary: 'Finish a native pending step, or bind first', errors: { 400: ['invalid_token'] } },
  'POST /continue': form('submitContinue', 'Continue', { ...signInForm, 400: ['invalid_request', 'invalid_token'] }, '`action`: `continue`, `bind`, `login` or `cancel`.'),
  'GET /account': { operationId: 'accountPage', summary: 'Account page', description: 'Profile, provider binding, password, sessions, connected apps. Signed out: the sign-in form.' },
  'POST /account': form('submitAccount', 'Sign in on the account page', signInForm),
  'POST /account/idp': form('submitAccountProvider', 'Bind or unbind the provider account', { 403: ['forbidden'] }, '`action`: `bind` (redirects to the provider) or `unbind`.'),
  'POST /account/profile': form('submitAccountProfile', 'Change profile data', { 400: ['invalid_request'] }),
  'POST /account/password': form('submitAccountPassword', 'Change the password', { 400: ['weak_password'], 403: ['invalid_credentials'], 429: ['rate_limited'] }),
  'POST /account/apps': form('submitAccountApps', 'Disconnect an app', {}),
  'POST /account/sessions': form(
    'submitAccountSessions',
    'Sign out of a session, or everywhere else',
    { 401: ['unauthorized'] },
    '`action=revoke` with `session_id` (an `id` of the "Where you\'re signed in" list) signs out of that browser session or app grant; `action=others` signs out every other browser session and every app grant, keeping this browser (docs/account/sessions.md).',
  ),
  'POST /account/email': form(
    'submitAccountEmail',
    'Change the email address',
    { 400: ['invalid_request', 'invalid_code', 'code_expired'], 403: ['invalid_credentials', 'forbidden'], 409: ['email_taken'], 429: ['rate_limited'] },
    '`action=request` with `new_email` and `current_password` (when the account has one) mails a code and a link to the new address; `action=confirm` with `email_code` moves the account (docs/account/email-change.md).',
  ),
  'GET /account/email/confirm': {
    operationId: 'emailChangeLinkPage',
    summary: 'Email change link page',
    description: 'With `token` (the link mailed to the new address): a page that changes nothing and offers a button that confirms, shown only to a browser signed in as the account the change is for.',
  },
  'POST /account/email/confirm': form('submitEmailChangeLink', 'Confirm the email change by its mailed link', { 400: ['invalid_token'], 401: ['unauthorized'], 409: ['email_taken'] }, '`token`: the link\'s, for the signed-in account only.'),
  'POST /account/deletion': form(
    'submitAccountDeletion',
    'Delete the account (after a grace period)',
    {},
    '`action=delete` with `deletion_password` (when the account has one; else a sign-in in the last 10 minutes), `deletion_code` (an authenticator-app or recovery code, when a second factor is enrolled) and `deletion_confirm=1`. ' +
      'Signs out everywhere and redirects to `/account/deletion/done`; a refusal redirects to `/account?deletion_error=…#delete-account` (docs/account/deletion.md).',
  ),
  'GET /account/deletion/done': { operationId: 'accountDeletionDonePage', summary: 'Account deletion scheduled', description: 'Says when the account will be deleted (`at`, epoch seconds, from the request that scheduled it), or that it was.' },
  'GET /account/deletion/scheduled': {
    operationId: 'accountDeletionHoldPage',
    summary: 'Keep an account scheduled for deletion?',
    description: 'Shown after a sign-in of an account whose deletion is scheduled: "Keep my account" or "Continue signing out". Without a held sign-in: a redirect to `/account`.',
    redirects: '`/account` when no sign-in is held',
  },
  'POST /account/deletion/scheduled': form('submitAccountDeletionHold', 'Keep the account, or leave signed out', {}, '`action`: `keep` (cancels the deletion, completes the sign-in and redirects on) or `leave` (the browser stays signed out; the deletion stays scheduled).'),
  'GET /account/export': {
    operationId: 'downloadAccountExport',
    summary: 'Download my data',
    description:
      'The export of the signed-in account (`AccountExport`, `coverage: full`: every app\'s profile document included) as an attachment `gatehouse-export-YYYY-MM-DD.json`, never cached. At most EXPORT_PER_HOUR (5) per account in any hour, `GET /v1/auth/account/export` included.',
    file: ['The export (JSON, an attachment).', 'application/json'],
    errors: { 401: ['unauthorized'], 403: ['forbidden'], 429: ['rate_limited'] },
  },
  'POST /account/passkeys': form(
    'submitAccountPasskeys',
    'Add, rename or remove a passkey',
    { 400: ['invalid_request', 'invalid_token'], 401: ['unauthorized'], 403: ['feature_disabled'], 404: ['not_found'], 409: ['conflict'], 429: ['rate_limited'] },
    '`action`: `add_passkey` (with `response`, the answer of `navigator.credentials.create()` as JSON, and an optional `name`), `rename_passkey` (`passkey_id`, `name`) or `remove_passkey` (`passkey_id`).',
  ),
  'POST /login/passkey': form(
    'submitPasskeySignIn',
    'Sign in with a passkey',
    { 400: ['invalid_request', 'invalid_token'], 401: ['invalid_credentials'], 403: ['feature_disabled', 'user_disabled'], 429: ['rate_limited'] },
    '`action=passkey` with `response`, the answer of `navigator.credentials.get()` as JSON; then on as after a password sign-in.',
  ),
  'GET /mfa': { operationId: 'secondFactorPage', summary: 'Second step of a sign-in', description: 'Asks for an authenticator-app or recovery code; sets up an authenticator app first when the app requires one the user lacks.', errors: { 400: ['invalid_request'] } },
  'POST /mfa': form('submitSecondFactor', 'Give the second factor', { 400: ['invalid_request', 'invalid_code'], 403: ['user_disabled', 'user_blocked'], 429: ['rate_limited'] }, '`action=verify` with `code`: six digits from the app, or a recovery code.'),
  'GET /account/mfa/totp': { operationId: 'totpSetupPage', summary: 'Set up an authenticator app', description: 'The QR code and the secret (`data-field="totp_secret"`), and the first code that confirms it.', errors: { 401: ['unauthorized'] } },
  'POST /account/mfa': form(
    'submitAccountMfa',
    'Manage second factors',
    { 400: ['invalid_request', 'invalid_code'], 401: ['unauthorized'], 429: ['rate_limited'] },
    '`action`: `setup_totp`, `verify` (with `code`), `remove_totp`, `regenerate_codes` (the new codes each in `data-field="recovery_code"`), or `reauth` (verify the second factor again).',
  ),
  'GET /magic-link/request': { operationId: 'magicLinkRequestPage', summary: 'Ask for a magic link' },
  'POST /magic-link/request': form('submitMagicLinkRequest', 'Mail a magic link', { 400: ['invalid_request'], 429: ['rate_limited'] }),
  'GET /magic-link': { operationId: 'magicLinkPage', summary: 'Magic-link landing page', description: 'A button, not an automatic sign-in: mail scanners fetch links.' },
  'POST /magic-link': form('submitMagicLink', 'Sign in with a magic link or code', { 400: ['invalid_token', 'invalid_code', 'code_expired'], 403: ['user_disabled', 'user_blocked'], 429: ['rate_limited'] }),
  'GET /password/forgot': { operationId: 'forgotPasswordPage', summary: 'Ask for a password reset' },
  'POST /password/forgot': form('submitForgotPassword', 'Mail a reset link', { 400: ['invalid_request'], 429: ['rate_limited'] }),
  'GET /password/reset': { operationId: 'resetPasswordPage', summary: 'Set a new password', errors: { 400: ['invalid_token'] } },
  'POST /password/reset': form('submitResetPassword', 'Set the new password', { 400: ['invalid_token', 'weak_password'], 429: ['rate_limited'] }),
  'GET /verify-email': { operationId: 'verifyEmailPage', summary: 'Email verification page', description: 'With `token` (the mailed link): a page that changes nothing and offers a button that confirms, shown only to a browser signed in as the account the mail was sent for.' },
  'POST /verify-email': form('submitVerifyEmail', 'Send or check an email code, or confirm the mailed link', { 400: ['invalid_code', 'code_expired', 'invalid_token'], 401: ['unauthorized'], 429: ['rate_limited'] }, '`action=verify` with `code`, `action=send_code`, or `action=confirm_link` with `token` (the link\'s, for the signed-in account only).'),
};

/** Fastify `/a/:id` → OpenAPI `/a/{id}`. */
const openapiPath = (url: string) => url.replace(/:(\w+)/g, '{$1}');

export function documentPage(route: RouteOptions): void {
  documentPageIn(PAGES, route);
}

/** Documents a page route from its entry in `pages` (the console has its own table). */
export function documentPageIn(pages: Record<string, PageDoc>, route: RouteOptions): void {
  const methods = [route.method].flat().filter((method) => method !== 'HEAD' && method !== 'OPTIONS');
  if (methods.length === 0) return;
  const key = `${methods.join(',')} ${openapiPath(route.url)}`;
  const page = pages[key];
  if (!page) throw new Error(`page ${key} has no entry in its docs table`);
  const schema = (route.schema ??= {});
  schema.operationId = page.operationId;
  schema.summary = page.summary;
  if (page.description) schema.description = page.description;
  const isForm = methods.includes('POST');
  if (isForm) schema.consumes = ['application/x-www-form-urlencoded'];
  const stylesheet = route.url.startsWith('/assets/') && route.url.endsWith('.css');
  const rendered = page.file ? text(...page.file) : stylesheet ? text('The stylesheet.', 'text/css') : html(isForm ? 'The page again, with a message.' : 'The page.');
  schema.response = {
    ...(schema.response as object | undefined),
    ...(route.url === '/error' ? {} : { 200: rendered }),
    ...(isForm ? { 303: redirect('the next step, the app, or the page itself') } : {}),
    ...(page.redirects ? { 302: redirect(page.redirects), 303: redirect(page.redirects) } : {}),
  };
  shareRouteDocs(route, { tags: ['pages'], errors: page.errors });
  // Added to the page's own codes, not in their place: every form refuses a forged post (CSRF), and is
  // rendered again when the server is busy (src/pages/form-state.ts), with Retry-After.
  if (isForm) shareRouteDocs(route, { tags: ['pages'], errors: { 403: ['forbidden'], 503: ['service_unavailable'] } });
}
