import { form, type PageDoc } from '../pages/index.js';

/**
 * The console's pages in the OpenAPI document (like the hosted pages, src/pages/docs.ts): a GET renders
 * a page (signed out: a redirect to the console sign-in), a POST is a form with the session's `csrf`
 * and an `action` of docs/guides/console.md (console hooks).
 */
const signedIn = 'the console sign-in when signed out';
const page = (operationId: string, summary: string, description?: string, errors: Record<number, string[]> = {}): PageDoc => ({
  operationId,
  summary,
  description,
  redirects: signedIn,
  errors: { 403: ['forbidden'], ...errors },
});
const owned = { 404: ['not_found'] };

export const CONSOLE_PAGES: Record<string, PageDoc> = {
  'GET /assets/console.css': { operationId: 'getConsoleStylesheet', summary: 'The stylesheet of the console', file: ['The stylesheet.', 'text/css'] },
  'GET /assets/console.js': { operationId: 'getConsoleScript', summary: 'The console\'s optional script (copy buttons, colour picker)', file: ['The script.', 'text/javascript'] },
  'GET /console/login': { operationId: 'consoleSignIn', summary: 'Start a console sign-in', description: 'Redirects to `/oauth/authorize` as the console app (`app_gatehouse_console`, code + PKCE); `return` is the console path to come back to.', redirects: '/oauth/authorize' },
  'GET /console/callback': { operationId: 'consoleCallback', summary: 'Console sign-in callback', description: 'Exchanges the code at `/oauth/token` and signs in to the console (its own cookie `gh_console`).', redirects: 'the console page the sign-in started from', errors: { 400: ['invalid_request'] } },
  'POST /console/logout': form('consoleSignOut', 'Sign out of the console', {}),
  'GET /console/invitation': page('consoleInvitationPage', 'An invitation to become a developer account', 'Opened signed in, `token` from `POST /v1/admin/developers/{id}/invitation`.'),
  'POST /console/invitation': form('acceptConsoleInvitation', 'Accept an invitation', { 400: ['invalid_token'] }, '`token`, `action=accept`: the signed-in user becomes the developer account (once).'),
  'POST /console/become-developer': form('consoleBecomeDeveloper', 'Make the signed-in account a developer (development only)', { 404: ['not_found'], 409: ['conflict'] }, 'Only on a development server (not production) whose BASE_URL is a loopback host, asked from this machine; elsewhere 404. `action=become_developer`: a developer with the account\'s email, linked to it; 409 when a developer with that email exists (ask its owner for an invitation).'),
  'GET /console': page('consoleApps', "The developer's apps, and a form to create one", 'A signed-in user who is no developer gets 403 with a page saying so.'),
  'POST /console/apps': form('consoleCreateApp', 'Create an app', { 400: ['invalid_request'] }, 'Fields of `POST /v1/dev/apps`: `name`, `redirect_uris` and `allowed_origins` one a line, `type`, `features` and `required_fields` (checkboxes), `mfa`; `action=create`. Answers 303 to the app page, which shows `data-field="client_id"` and a confidential app\'s `data-field="client_secret"` once (a reload shows it no more).'),
  'GET /console/apps/{id}': page('consoleAppPage', "An app's settings", undefined, owned),
  'POST /console/apps/{id}': form('consoleSaveApp', 'Change an app or rotate its secret', { 400: ['invalid_request'], 404: ['not_found'] }, '`action=save` with the fields of `PATCH /v1/dev/apps/{id}` (the password policy as `password_min_length`, `password_character_classes`, `password_max_age_days` (empty: none), `password_history_count`; checkboxes `backchannel_logout_session_required`, `dpop_bound_access_tokens`, `require_pushed_authorization_requests`, `device_authorization_grant`), or `action=rotate_secret` (303 to the app page, the new secret in `data-field="client_secret"` shown once).'),
  'GET /console/apps/{id}/mail': page('consoleAppMail', "An app's mails: Reply-To, text overrides and a preview", '`kind` and `locale` choose the mail whose subject and intro the form edits and the preview shows.', { 400: ['invalid_request'], 404: ['not_found'] }),
  'GET /console/apps/{id}/mail/preview': { operationId: 'consoleAppMailPreview', summary: "The HTML part of one of an app's mails, with sample values", description: '`kind`, `locale`; sandboxed (CSP `sandbox`), framed only by the console.', redirects: signedIn, errors: { 400: ['invalid_request'], 403: ['forbidden'], 404: ['not_found'] } },
  'POST /console/apps/{id}/mail': form('consoleSaveAppMail', "Change an app's mail settings", { 400: ['invalid_request'], 404: ['not_found'] }, '`action=save` with `reply_to`, and `subject`, `intro` of the mail `kind` in `locale` (both empty: that override is removed), as `mail` of `PATCH /v1/dev/apps/{id}`.'),
  'GET /console/apps/{id}/delete': page('consoleDeleteAppPage', 'Confirm deleting an app', undefined, owned),
  'POST /console/apps/{id}/delete': form('consoleDeleteApp', 'Delete an app', { 400: ['invalid_request'], 404: ['not_found'] }, '`action=delete`.'),
  'GET /console/apps/{id}/integration': page('consoleIntegrationPage', 'Integration snippets of an app', 'Discovery URL, client id, `openid-client` and `oidc-client-ts` examples.', owned),
  'GET /console/apps/{id}/users': page('consoleAppUsers', "An app's users", '`q`, `status`, `page` as `GET /v1/dev/apps/{id}/users`.', { 400: ['invalid_request'], 404: ['not_found'] }),
  'GET /console/apps/{id}/users/{userId}': page('consoleAppUser', 'One user of an app', 'Their address, name, status, dates and latest events at the app; block or unblock.', { 404: ['not_found'] }),
  'POST /console/apps/{id}/users': form('consoleBlockUser', 'Block or unblock a user', { 400: ['invalid_request'], 404: ['not_found'] }, '`user_id`, `action=block` or `unblock`.'),
  'GET /console/apps/{id}/events': page('consoleAppEvents', "An app's audit events", '`type`, `after` as `GET /v1/dev/apps/{id}/events`.', { 400: ['invalid_request'], 404: ['not_found'] }),
  'GET /console/apps/{id}/webhooks': page('consoleAppWebhooks', "An app's webhook endpoints, and a form to add one", 'Each endpoint with its URL, types, state (a server-disabled one says why) and its latest delivery.', owned),
  'POST /console/apps/{id}/webhooks': form('consoleCreateWebhook', 'Add a webhook endpoint', { 400: ['invalid_request'], 404: ['not_found'] }, '`url`, `description`, `event_types` (checkboxes; none: every type); `action=create`. Answers 303 to the endpoint page, which shows the signing secret once in `data-field="webhook_secret"`.'),
  'GET /console/apps/{id}/webhooks/{webhookId}': page('consoleAppWebhook', 'One webhook endpoint and its delivery log', 'Settings, secret rotation, a test event, and the latest deliveries (status, attempts, last response code and time, the start of the response body) with a redeliver button. `before` pages back.', { 400: ['invalid_request'], 404: ['not_found'] }),
  'POST /console/apps/{id}/webhooks/{webhookId}': form('consoleChangeWebhook', 'Change, test or delete a webhook endpoint', { 400: ['invalid_request'], 404: ['not_found'], 409: ['conflict'] }, '`action=save` with `url`, `description`, `event_types`, `enabled`; `action=rotate_secret` (the new secret shown once, the old one signing 24 h more); `action=test`; `action=redeliver` with `delivery_id`; `action=delete`.'),
  'GET /console/apps/{id}/legal': page('consoleAppLegal', "An app's legal documents and their views", undefined, owned),
  'POST /console/apps/{id}/legal': form('consolePublishLegal', 'Preview or publish a legal version', { 400: ['invalid_request'], 404: ['not_found'] }, '`docType`, `lang`, `title`, `content`; `action=preview` (the sanitized HTML) or `publish`.'),
  'GET /console/keys': page('consoleApiKeys', "The developer's API keys"),
  'POST /console/keys': form('consoleApiKey', 'Create or revoke an API key', { 400: ['invalid_request'], 404: ['not_found'] }, '`action=create_key` with `name` (303 to the keys page, the key shown once in `data-field="api_key"`), or `action=revoke_key` with `key_id`.'),
  'GET /console/operator': { operationId: 'consoleOperatorSignIn', summary: 'The operator view: the ADMIN_TOKEN form', redirects: 'the developers page once the token was given' },
  'POST /console/operator': form('consoleOperatorToken', 'Give the ADMIN_TOKEN, or leave the operator view', { 401: ['unauthorized'], 429: ['rate_limited'] }, '`action=login` with `admin_token` (the same check and per-IP limit as the admin API), or `action=logout`.'),
  'GET /console/operator/developers': { operationId: 'consoleOperatorDevelopers', summary: 'Developers (operator)', redirects: 'the ADMIN_TOKEN form' },
  'POST /console/operator/developers': form('consoleOperatorDeveloper', 'Create a developer or an invitation (operator)', { 400: ['invalid_request'], 404: ['not_found'], 409: ['conflict'] }, '`action=create` with `email`, `name`, or `action=invite` with `developer_id`: 303 to the developers page, which shows the new API key (`data-field="api_key"`) or the link (`data-field="invitation_url"`) once.'),
  'GET /console/operator/users': { operationId: 'consoleOperatorUsers', summary: 'Users platform-wide (operator)', description: '`q`, `status`, `page` as `GET /v1/admin/users`.', redirects: 'the ADMIN_TOKEN form', errors: { 400: ['invalid_request'] } },
  'POST /console/operator/users': form('consoleOperatorUserStatus', 'Disable or enable a user (operator)', { 400: ['invalid_request'], 404: ['not_found'] }, '`user_id`, `action=block` (disable platform-wide) or `unblock` (enable).'),
};
