import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { type Amr, parseAmr } from '../shared/acr.js';
import { requestContext } from '../shared/request-context.js';
import { type FlowState, pendingMfa, STEP_UP } from '../shared/pending-flow.js';
import { deviceOf } from '../shared/ip-area.js';
import { consentIsImplied, missingRequiredFields } from '../sign-in/policy.js';
import { DEFAULT_SCOPE, joinScope, scopeList, unknownScopes } from '../shared/scopes.js';
import { appendQuery } from '../shared/url.js';
import { type App, findApp } from '../storage/repos/apps.js';
import { findGrant } from '../storage/repos/grants.js';
import { findUserById, type UserRow } from '../storage/repos/users.js';
import { checkChallenge } from '../sign-in/pkce.js';
import { isRegisteredRedirectUri, unregisteredRedirectUri } from '../shared/redirect-uri-match.js';
import { duplicatedParams, type Params } from './params.js';
import { consumePushedRequest } from '../storage/repos/pushed-requests.js';
import { sha256 } from '../shared/sha256.js';
import { joinedResourceParam, MAX_RESOURCES, resourceList, resourceUriProblem, unallowedResources } from '../shared/resources.js';

/**
 * GET /oauth/authorize (docs/reference/oauth.md#endpoints, docs/reference/oauth.md#openid-connect-what-is-implemented) as a pipeline of small named checks, in
 * order: client → (a pushed request's parameters, RFC 9126) → redirect_uri (both: HTML 400, never a redirect) → from then on errors redirect back
 * with `error`, `state`, `iss` → parameter hygiene → request objects (not supported) → response_type →
 * PKCE → scope → prompt, max_age and the other parameters → who is signed in, and whether they must
 * authenticate again → blocked/disabled → consent → required profile data → code.
 * POST /oauth/authorize (OIDC Core §3.1.2.1) runs the same checks on its form body.
 */

const PROMPTS = new Set(['none', 'login', 'consent']);
const RESPONSE_MODES = new Set(['query', 'code', 'session']);
const LIMITS: Record<string, number> = { state: 4096, nonce: 512, login_hint: 320, ui_locales: 100, session: 4096 };

export interface AuthorizeRequest {
  app: App;
  redirectUri: string;
  state?: string;
  scope: string;
  codeChallenge: string | null;
  nonce?: string;
  prompt: Set<string>;
  maxAge?: number;
  loginHint?: string;
  uiLocales?: string;
  session?: string;
  /** RFC 9449 §10: the thumbprint of the DPoP key that must redeem the code. */
  dpopJkt?: string;
  /** RFC 8707: the resources the tokens may be for (the app's declared ones, or Gatehouse's own); empty: none named. */
  resources: string[];
  params: Params;
  /** Pushed by the client (RFC 9126), or the resumption of a pushed request this browser session holds. */
  pushed: boolean;
}

interface SignedIn {
  user: UserRow;
  authTime: number;
  amr: Amr[];
  viaSessionJwt: boolean;
}

// Steps 1–2: client and redirect_uri. Nothing is redirected until both are verified.
async function checkClient(app: FastifyInstance, raw: unknown): Promise<App> {
  const clientId = (raw as Record<string, unknown>).client_id;
  if (typeof clientId !== 'string' || clientId === '') {
    throw new AppError('invalid_request', { message: 'The client_id parameter is missing or repeated.' });
  }
  const client = clientId.length <= 200 ? await findApp(app.db, clientId) : undefined;
  if (!client || client.disabled) {
    throw new AppError('invalid_client', { status: 400, message: 'This application is unknown or disabled.', reason: client ? 'client_disabled' : 'client_unknown' });
  }
  return client;
}

function checkRedirectUri(client: App, raw: unknown, production: boolean): string {
  const redirectUri = (raw as Record<string, unknown>).redirect_uri;
  if (typeof redirectUri !== 'string' || redirectUri === '') {
    throw new AppError('invalid_request', { message: 'The redirect_uri parameter is missing or repeated.' });
  }
  if (!isRegisteredRedirectUri(client.redirectUris, redirectUri)) {
    throw unregisteredRedirectUri(client.redirectUris, redirectUri, { production, message: 'The redirect_uri is not registered for this application.' });
  }
  return redirectUri;
}

// Step 3 onwards: errors now go back to the verified redirect_uri.
function checkHygiene(raw: unknown): Params {
  // `resource` alone may repeat (RFC 8707 §2); it is kept space-separated, which no URI contains.
  const duplicated = duplicatedParams(raw).filter((name) => name !== 'resource');
  if (duplicated.length) throw new AppError('invalid_request', { message: `Parameters must not be repeated: ${duplicated.slice(0, 5).join(', ')}.` });
  const resource = joinedResourceParam((raw as Record<string, unknown>).resource);
  const params = { ...(raw as Params) };
  if (resource === undefined) delete params.resource;
  else params.resource = resource;
  for (const [name, max] of Object.entries(LIMITS)) {
    if ((params[name]?.length ?? 0) > max) throw new AppError('invalid_request', { message: `The ${name} parameter is too long.` });
  }
  return params;
}

// OIDC Core §6.1, §6.2: Gatehouse takes its parameters only from the request itself (discovery says so).
function refuseRequestObjects(params: Params): void {
  if (params.request !== undefined) throw new AppError('request_not_supported');
  if (params.request_uri !== undefined) throw new AppError('request_uri_not_supported');
}

function checkResponseType(params: Params): void {
  if (!params.response_type) throw new AppError('invalid_request', { message: 'The response_type parameter is required.' });
  if (params.response_type !== 'code') throw new AppError('unsupported_response_type');
  if (params.response_mode !== undefined && !RESPONSE_MODES.has(params.response_mode)) {
    throw new AppError('invalid_request', { message: 'Unsupported response_mode.' });
  }
}

function checkPkce(client: App, params: Params): string | null {
  const result = checkChallenge(params.code_challenge, params.code_challenge_method, client.type === 'public');
  if (!result.ok) throw new AppError('invalid_request', { message: `PKCE: ${result.reason}.` });
  return result.challenge;
}

/** The requested scope, checked and normalised (default `openid profile email`); shared with /oauth/device_authorization. */
export function checkScope(params: Params): string {
  const scope = params.scope === undefined || params.scope.trim() === '' ? DEFAULT_SCOPE : params.scope;
  if (/[^\x21\x23-\x5b\x5d-\x7e ]/.test(scope)) throw new AppError('invalid_scope');
  const unknown = unknownScopes(scope);
  if (unknown.length) throw new AppError('invalid_scope', { message: `Unknown scope: ${unknown.slice(0, 3).join(' ')}.` });
  return joinScope(scopeList(scope));
}

function checkPrompt(params: Params): Set<string> {
  const prompt = new Set((params.prompt ?? '').split(' ').filter(Boolean));
  for (const p of prompt) if (!PROMPTS.has(p)) throw new AppError('invalid_request', { message: `Unsupported prompt value: ${p.slice(0, 20)}.` });
  if (prompt.has('none') && prompt.size > 1) throw new AppError('invalid_request', { message: 'prompt=none cannot be combined with other values.' });
  if (params.consent !== undefined && params.consent !== '1') throw new AppError('invalid_request', { message: 'consent must be 1.' });
  return prompt;
}

/** A SHA-256 JWK thumbprint, base64url (RFC 7638): 43 characters. */
const JKT = /^[A-Za-z0-9_-]{43}$/;

function checkDpopJkt(params: Params): string | undefined {
  if (params.dpop_jkt === undefined) return undefined;
  if (!JKT.test(params.dpop_jkt)) throw new AppError('invalid_request', { message: 'dpop_jkt must be a SHA-256 JWK thumbprint (base64url).' });
  return params.dpop_jkt;
}

/** Where the developer declared the resource server (settings), or Gatehouse itself (`own`); else `invalid_target` (RFC 8707 §2). */
export function checkResources(client: App, joined: string | undefined, own: string, production: boolean): string[] {
  const resources = resourceList(joined);
  if (resources.length > MAX_RESOURCES) throw new AppError('invalid_target', { message: `At most ${MAX_RESOURCES} resources.` });
  for (const resource of resources) {
    const problem = resourceUriProblem(resource, production);
    if (problem) throw new AppError('invalid_target', { message: `A resource ${problem}.`, detail: 'malformed resource' });
  }
  if (unallowedResources(resources, client.resourceUris, own).length) {
    throw new AppError('invalid_target', { message: 'A requested resource is not one this application declared.', detail: 'resource not declared' });
  }
  return resources;
}

function checkMaxAge(params: Params): number | undefined {
  if (params.max_age === undefined) return undefined;
  if (!/^\d{1,9}$/.test(params.max_age)) throw new AppError('invalid_request', { message: 'max_age must be a whole number of seconds.' });
  return Number(params.max_age);
}

/** The prefix of the `request_uri` values `/oauth/par` hands out (RFC 9126 §2.2). */
export const REQUEST_URI_PREFIX = 'urn:ietf:params:oauth:request_uri:';

/** True when `value` is a request_uri of ours (anything else stays an unsupported request object by reference). */
export function isPushedRequestUri(value: unknown): value is string {
  return typeof value === 'string' && value.startsWith(REQUEST_URI_PREFIX);
}

/** How `/oauth/authorize` stores a request_uri (only its hash). */
export function requestUriHash(requestUri: string): string {
  return sha256(requestUri, 'base64url');
}

/**
 * RFC 9126 §4: the pushed request a request_uri names, used up by this very look-up whatever follows;
 * unknown, used, expired or pushed by another client → `invalid_request_uri` (the HTML page: no
 * redirect_uri is verified). Only client_id and request_uri of the query count; the rest is ignored.
 */
async function pushedParams(app: FastifyInstance, client: App, requestUri: string): Promise<Record<string, unknown>> {
  const pushed = requestUri.length <= 200 ? await consumePushedRequest(app.db, requestUriHash(requestUri), app.clock.now()) : undefined;
  if (!pushed) throw new AppError('invalid_request_uri', { detail: 'request_uri unknown or used' });
  if (pushed.expiresAt <= app.clock.now()) throw new AppError('invalid_request_uri', { detail: 'request_uri expired' });
  if (pushed.appId !== client.id) throw new AppError('invalid_request_uri', { detail: 'request_uri pushed by another client' });
  return { ...pushed.params, client_id: client.id };
}

/**
 * Steps 2 onwards for a known client: redirect_uri, then every parameter. Shared by `/oauth/authorize`
 * (which then redirects its errors: `onRedirectVerified`) and `/oauth/par` (which answers them as JSON).
 */
export function checkAuthorizeParams(client: App, raw: Record<string, unknown>, settings: { production: boolean; baseUrl: string }, onRedirectVerified?: (redirect: { redirectUri: string; state?: string }) => void): Omit<AuthorizeRequest, 'pushed'> {
  // A request object may be what carries redirect_uri: then the refusal can only be the HTML page.
  if (raw.redirect_uri === undefined) refuseRequestObjects(raw as Params);
  const redirectUri = checkRedirectUri(client, raw, settings.production);
  // A repeated state is not echoed (which one would be right?); the error says why.
  onRedirectVerified?.({ redirectUri, state: typeof raw.state === 'string' ? raw.state : undefined });

  const params = checkHygiene(raw);
  refuseRequestObjects(params);
  checkResponseType(params);
  if (!client.features.auth) throw new AppError('unauthorized_client', { message: 'This application cannot sign users in.' });
  const codeChallenge = checkPkce(client, params);
  const scope = checkScope(params);
  const prompt = checkPrompt(params);
  const maxAge = checkMaxAge(params);
  const dpopJkt = checkDpopJkt(params);
  const resources = checkResources(client, params.resource, settings.baseUrl, settings.production);
  return {
    app: client,
    redirectUri,
    state: params.state,
    scope,
    codeChallenge,
    nonce: params.nonce || undefined,
    prompt,
    maxAge,
    loginHint: params.login_hint || undefined,
    uiLocales: params.ui_locales || undefined,
    session: params.session || undefined,
    dpopJkt,
    resources,
    params,
  };
}

/**
 * Validates the whole request, from the query (GET) or the form body (POST); docs/reference/oauth.md#endpoints: before the login step.
 * `vouched`: the browser session holds this exact path as the resumption of a pushed request.
 */
export async function parseAuthorizeRequest(app: FastifyInstance, request: FastifyRequest, input: unknown, vouched = false): Promise<AuthorizeRequest> {
  let raw = (input ?? {}) as Record<string, unknown>;
  const client = await checkClient(app, raw);
  const pushed = isPushedRequestUri(raw.request_uri);
  if (pushed) raw = await pushedParams(app, client, raw.request_uri as string);
  const req = checkAuthorizeParams(client, raw, app.config, (redirect) => {
    request.errorRedirect = redirect;
  });
  // RFC 9126 §6: this app's requests come only by reference (or resume one that did).
  if (client.oauth.requirePushedAuthorizationRequests && !pushed && !vouched) {
    throw new AppError('invalid_request', { message: 'This application requires pushed authorization requests (POST /oauth/par, then request_uri).', detail: 'PAR required' });
  }
  return { ...req, pushed: pushed || vouched };
}

/** The parameters an authorization request may carry that Gatehouse reads; others are ignored (RFC 6749 §3.1) and never stored. */
export const KNOWN_PARAMS = new Set([
  'response_type', 'client_id', 'redirect_uri', 'scope', 'state', 'response_mode', 'nonce', 'code_challenge',
  'code_challenge_method', 'prompt', 'max_age', 'login_hint', 'ui_locales', 'session', 'consent', 'dpop_jkt', 'resource',
]);

/** The authorize query to come back to, minus what must not repeat (a forced login or consent once done). */
export function resumePath(params: Params, drop: { prompt?: string; session?: boolean } = {}): string {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (!KNOWN_PARAMS.has(k)) continue;
    // Checked when the request arrived; the authentication it may have demanded is the one the resumed request uses.
    if (k === 'max_age') continue;
    if (k === 'session' && drop.session) continue;
    if (k === 'resource') {
      for (const resource of resourceList(v)) query.append(k, resource);
      continue;
    }
    if (k === 'prompt' && drop.prompt) {
      const rest = v.split(' ').filter((p) => p && p !== drop.prompt);
      if (rest.length) query.append(k, rest.join(' '));
      continue;
    }
    query.append(k, v);
  }
  return `/oauth/authorize?${query.toString()}`;
}

function hostedUrl(app: FastifyInstance, path: string, req: AuthorizeRequest, extra: Record<string, string | undefined> = {}): string {
  return appendQuery(`${app.config.authUrl}${path}`, { client_id: req.app.id, ui_locales: req.uiLocales, ...extra });
}

async function signedInUser(app: FastifyInstance, request: FastifyRequest, req: AuthorizeRequest): Promise<SignedIn | null> {
  if (req.session) {
    // Only a session JWT (typ session+jwt) for this app: an access token is never a session.
    const claims = await app.tokens.checkSession(req.session, req.app.id);
    if (claims) {
      const user = await findUserById(app.db, claims.sub);
      const grant = await findGrant(app.db, claims.grantId);
      if (user && grant) return { user, authTime: grant.auth_time, amr: parseAmr(grant.amr), viaSessionJwt: true };
    }
  }
  const session = request.browserSession;
  if (session?.user_id) {
    const user = await findUserById(app.db, session.user_id);
    if (user) return { user, authTime: session.auth_time ?? session.created_at, amr: parseAmr(session.amr), viaSessionJwt: false };
  }
  return null;
}

async function writeFlow(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, req: AuthorizeRequest, update: (state: FlowState) => FlowState): Promise<void> {
  await app.browserSessions.ensure(request, reply);
  const state = update(app.browserSessions.readData<FlowState>(request) as FlowState);
  // The resumption of a pushed request is vouched for by this session, so an app that requires PAR accepts it.
  await app.browserSessions.writeData(request, reply, { ...state, pushedResume: req.pushed ? state.resume : undefined });
}

export async function authorize(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  reply.header('cache-control', 'no-store');
  request.browserSession = await app.browserSessions.load(request);
  const pushedResume = request.browserSession ? app.browserSessions.readData<FlowState>(request).pushedResume : undefined;
  const req = await parseAuthorizeRequest(app, request, request.query, pushedResume !== undefined && pushedResume === request.url);

  // Who is signed in (browser session, or a session JWT for this app), and recently enough.
  let who = await signedInUser(app, request, req);
  if (who && app.signIn.mustReauthenticate({ promptLogin: req.prompt.has('login'), maxAge: req.maxAge }, who.authTime)) who = null;
  if (!who) {
    if (req.prompt.has('none')) throw new AppError('login_required');
    // Resumed as the user who signs in now: without prompt=login, and without a session JWT, which
    // either identified nobody or was not fresh enough.
    const resume = resumePath(req.params, { prompt: 'login', session: true });
    await writeFlow(app, request, reply, req, (s) => ({ ...s, resume, consent: undefined, profile: undefined, mfa: undefined }));
    return reply.redirect(hostedUrl(app, '/login', req, { login_hint: req.loginHint }), 302);
  }
  const { user } = who;

  // The sign-in policy: may this user sign in to this app, and what is still to do.
  const grant = { requestedScope: req.scope, forceConsent: req.prompt.has('consent'), amr: who.amr };
  let step = await app.signIn.admit(app.db, user, req.app, grant, 'authorize');
  if (step === 'consent' && consentIsImplied(req.app) && !grant.forceConsent) {
    const consent = { appId: req.app.id, userId: user.id, scope: req.scope, via: 'first_party' };
    await app.db.transaction().execute((trx) => app.signIn.grantConsent(trx, consent, requestContext(request)));
    step = await app.signIn.nextStep(app.db, user, req.app, grant);
  }

  // A second factor this sign-in lacks (enrolled since, or the app requires one): the /mfa page.
  if (step === 'mfa') {
    if (req.prompt.has('none')) throw new AppError('interaction_required', { message: 'The user must confirm a second factor.' });
    const resume = resumePath(req.params, { session: true });
    await writeFlow(app, request, reply, req, (s) => ({
      ...s,
      resume,
      consent: undefined,
      profile: undefined,
      mfa: pendingMfa(user.id, { method: STEP_UP, amr: who.amr }, { via: 'authorize', since: app.clock.now() }),
    }));
    return reply.redirect(hostedUrl(app, '/mfa', req), 302);
  }

  if (step === 'consent') {
    if (req.prompt.has('none')) throw new AppError('consent_required');
    const resume = resumePath(req.params, { prompt: 'consent' });
    await writeFlow(app, request, reply, req, (s) => ({
      ...s,
      resume,
      profile: undefined,
      consent: {
        appId: req.app.id,
        userId: user.id,
        scope: req.scope,
        redirectUri: req.redirectUri,
        state: req.state,
        resume,
        viaSessionJwt: who.viaSessionJwt,
      },
    }));
    return reply.redirect(hostedUrl(app, '/consent', req), 302);
  }

  // The app's required profile data (and a verified address, which the profile page explains).
  if (step === 'profile' || step === 'verify_email') {
    if (req.prompt.has('none')) throw new AppError('interaction_required', { message: 'The user must complete their profile.' });
    const resume = resumePath(req.params);
    const missing = missingRequiredFields(req.app, user);
    await writeFlow(app, request, reply, req, (s) => ({
      ...s,
      resume,
      consent: undefined,
      profile: { appId: req.app.id, userId: user.id, fields: missing, resume, viaSessionJwt: who.viaSessionJwt },
    }));
    return reply.redirect(hostedUrl(app, '/profile', req), 302);
  }

  // Done: a code bound to client, redirect_uri and challenge.
  const code = await app.db.transaction().execute((trx) =>
    app.signIn.issueCode(trx, {
      app: req.app,
      user,
      redirectUri: req.redirectUri,
      scope: req.scope,
      codeChallenge: req.codeChallenge,
      nonce: req.nonce ?? null,
      authTime: who.authTime,
      amr: who.amr,
      device: deviceOf(requestContext(request)),
      dpopJkt: req.dpopJkt,
      resources: req.resources,
      // The browser session's sid when it is this user's (a session JWT's sign-in has none of its own).
      sid: request.browserSession?.user_id === user.id ? request.browserSession.sid : null,
    }),
  );
  if (request.browserSession) {
    const state = app.browserSessions.readData<FlowState>(request);
    if (state.resume || state.consent || state.profile || state.pushedResume) {
      await app.browserSessions.writeData(request, reply, { ...state, resume: undefined, consent: undefined, profile: undefined, pushedResume: undefined });
    }
  }
  request.log.info({ client_id: req.app.id, user_id: user.id, ...requestContext(request) }, 'authorization code issued');
  return reply.redirect(appendQuery(req.redirectUri, { code, state: req.state, iss: app.config.baseUrl }), 302);
}

/**
 * POST /oauth/authorize (OIDC Core §3.1.2.1: the endpoint MUST accept form-serialized POST): the same
 * checks on the form body, then a 303 to the same request as a GET, with the parameters Gatehouse
 * reads. The browser follows it as a top-level GET, which carries the SameSite=Lax session cookie a
 * cross-site POST does not: a signed-in user is recognised exactly as with GET, and no new anonymous
 * session replaces theirs. Nothing is stored or issued here.
 */
export async function authorizeByPost(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  reply.header('cache-control', 'no-store');
  const body = (request.body ?? {}) as Record<string, unknown>;
  // A pushed request is used up only by the GET it is sent on to (RFC 9126 §4: client_id and request_uri count).
  if (isPushedRequestUri(body.request_uri)) {
    const client = await checkClient(app, body);
    return reply.redirect(`/oauth/authorize?${new URLSearchParams({ client_id: client.id, request_uri: body.request_uri })}`, 303);
  }
  const req = await parseAuthorizeRequest(app, request, request.body);
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(req.params)) {
    if (!KNOWN_PARAMS.has(name)) continue;
    for (const one of name === 'resource' ? resourceList(value) : [value]) query.append(name, one);
  }
  return reply.redirect(`/oauth/authorize?${query.toString()}`, 303);
}
