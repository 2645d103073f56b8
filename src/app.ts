import formbody from '@fastify/formbody';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, LogController } from 'fastify';
import { randomUUID } from 'node:crypto';
import type { ResolvedConfig } from './config.js';
import { whenClientLeaves } from './shared/request-context.js';
import { systemClock, type Clock } from './shared/time.js';
import { createStorage, type Storage } from './storage/connect.js';
import { migrateToLatest } from './storage/migrator.js';
// App-wide plugins (decorators and hooks every feature may use).
import accountsPlugin from './auth/accounts.js';
import corePlugin from './plugins/db.js';
import errorHandler, { answerClientError, sendError, toAppError } from './plugins/error-handler.js';
import { useJsonBodyParser } from './plugins/json-body.js';
import keysPlugin from './plugins/keys.js';
import pino from 'pino';
import { accessLogOptions, isQuietWhenOk, loggerOptions } from './plugins/logger.js';
import errorResponsesPlugin from './plugins/error-responses.js';
import lifecyclePlugin from './plugins/lifecycle.js';
import routeListPlugin from './plugins/route-list.js';
import throttlePlugin from './throttle/index.js';
import tokensPlugin from './tokens/index.js';
import signInPlugin from './sign-in/index.js';
import mfaPlugin from './mfa/index.js';
import { serializerCompiler, validatorCompiler } from './plugins/validation.js';
import mailerPlugin from './mail/index.js';
import metricsPlugin from './metrics/index.js';
import maintenancePlugin from './maintenance/index.js';
import browserSessionsPlugin from './plugins/browser-sessions.js';
import allAppOriginsPlugin from './plugins/cors.js';
import hostedPages from './pages/index.js';
import passkeyRoutes, { passkeysPlugin } from './passkeys/index.js';
import viewsPlugin, { renderHtmlError } from './plugins/views.js';
// Features, each in its own scope.
import adminApi from './admin/index.js';
import { userImportRoutes } from './user-import/index.js';
import adminLegalRoutes from './admin/legal.js';
import authRoutes from './auth/index.js';
import consolePages from './console/index.js';
import consoleAdminRoutes from './console/admin.js';
import demoRoutes from './demo/index.js';
import homeRoutes from './home/index.js';
import devAppUsersRoutes from './dev/app-users.js';
import devEventsRoutes from './dev/events.js';
import devApi from './dev/index.js';
import devLegalRoutes from './dev/legal.js';
import emailVerifyRoutes from './email-verify/index.js';
import healthRoutes from './health/index.js';
import idpPlugin, { idpAdminRoutes } from './idp/index.js';
import legalRoutes from './legal/index.js';
import discoveryRoutes from './oauth/discovery-routes.js';
import registrationRoutes, { initialAccessTokenRoutes, registrationAdminRoutes } from './registration/index.js';
import oauthRoutes from './oauth/index.js';
import openapiPlugin from './openapi/index.js';
import profileRoutes from './profile/index.js';
import accountExportRoutes from './account-export/index.js';
import emailChangeRoutes, { emailChangePlugin } from './email-change/index.js';
import sessionsRoutes, { sessionsPlugin } from './sessions/index.js';
import accountDeletionRoutes, { accountDeletionPlugin } from './account-deletion/index.js';
import webhookDevRoutes, { webhooksServicePlugin } from './webhooks/index.js';
import { backchannelLogoutServicePlugin } from './backchannel-logout/index.js';

export interface BuildOptions {
  /** An already-open storage (tests); otherwise DATABASE_URL is opened and closed with the app. */
  storage?: Storage;
  clock?: Clock;
  /** Run migrations while building (default true). */
  migrate?: boolean;
  /** Log destination (tests capture logs); `false` turns logging off. Default: stdout. */
  logStream?: { write(line: string): void } | false;
}

/**
 * Standard output written asynchronously: a synchronous write per log line costs a busy server a large
 * share of its time. Lines that arrive while a write is under way go out together with the next one;
 * at low traffic each line is written at once. What is still buffered is written when the process exits.
 */
function asyncStdout(): pino.DestinationStream {
  const destination = pino.destination({ dest: 1, sync: false });
  process.once('exit', () => {
    try {
      destination.flushSync();
    } catch {
      // not open yet, or stdout already gone: nothing more can be written
    }
  });
  return destination;
}

/** What the access line records as the status of a request whose client closed the connection first. */
const CLIENT_CLOSED_REQUEST = { statusCode: 499 };

/**
 * One access line per request, the request and its outcome together (Fastify's default writes two),
 * through `accessLog` (no redaction walk: see accessLogOptions). Errors go through the request's own
 * logger, redaction included, since an error may carry anything.
 */
class AccessLog extends LogController {
  constructor(private readonly accessLog: pino.Logger | undefined) {
    super();
  }

  /** A request whose client leaves before its answer gets a line of its own, with nginx's 499. */
  override incomingRequest(request: FastifyRequest, reply: FastifyReply): void {
    const accessLog = this.accessLog;
    if (accessLog) whenClientLeaves(reply, () => accessLog.info({ reqId: request.id, req: request, res: CLIENT_CLOSED_REQUEST, responseTime: reply.elapsedTime }, 'request abandoned'));
  }

  override requestCompleted(error: Error | null | undefined, request: FastifyRequest, reply: FastifyReply): void {
    if (error) reply.log.error({ req: request, res: reply, err: error, responseTime: reply.elapsedTime }, 'request errored');
    else if (reply.statusCode >= 400 || !isQuietWhenOk(request)) this.accessLog?.info({ reqId: request.id, req: request, res: reply, responseTime: reply.elapsedTime }, 'request completed');
  }
}

/** Builds the whole application as a Fastify instance. It never listens: server.ts and tests do that. */
export async function buildApp(config: ResolvedConfig, options: BuildOptions = {}): Promise<FastifyInstance> {
  const logStream = options.logStream === false ? undefined : (options.logStream ?? asyncStdout());
  const errorOptions = { issuer: config.baseUrl, production: config.production, renderHtmlError };
  const app = Fastify({
    logger: logStream ? { ...loggerOptions(config.logLevel), stream: logStream } : false,
    logController: new AccessLog(logStream && pino(accessLogOptions(config.logLevel), logStream)),
    bodyLimit: config.bodyLimit,
    connectionTimeout: config.connectionTimeoutMs,
    requestTimeout: config.requestTimeoutMs,
    trustProxy: config.trustProxy === false ? false : config.trustProxy,
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    onProtoPoisoning: 'error',
    onConstructorPoisoning: 'error',
    // Requests that reach a closing server (on a connection it already had) are served, not refused
    // with Fastify's own 503 body: the proxy sent them before it saw /readyz fail (server.ts).
    return503OnClosing: false,
    routerOptions: { ignoreTrailingSlash: false, maxParamLength: 200 },
    // Refusals before any route runs answer in the catalogue's shape too (docs/reference/errors.md).
    frameworkErrors: (error, request, reply) => sendError(request, reply, toAppError(error), errorOptions),
    clientErrorHandler: answerClientError,
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  await app.register(routeListPlugin);
  await app.register(errorResponsesPlugin);
  await app.register(lifecyclePlugin);
  // Callback style: an async hook costs every request a promise.
  app.addHook('onSend', (request, reply, payload, done) => {
    reply.header('x-request-id', request.id);
    reply.header('x-content-type-options', 'nosniff');
    done(null, payload);
  });
  // Only JSON and (per route) form bodies are parsed; text/plain bodies get 415.
  app.removeContentTypeParser('text/plain');
  useJsonBodyParser(app);

  const storage = options.storage ?? createStorage(config.databaseUrl);
  if (options.migrate !== false) await migrateToLatest(storage);

  await app.register(corePlugin, { config, storage, clock: options.clock ?? systemClock, ownsStorage: !options.storage });
  await app.register(errorHandler, errorOptions);
  // Before any route: the OpenAPI document is generated from the routes as they are registered.
  await app.register(openapiPlugin);
  await app.register(formbody);
  await app.register(keysPlugin);
  await app.register(tokensPlugin);
  await app.register(viewsPlugin);
  await app.register(browserSessionsPlugin);
  await app.register(allAppOriginsPlugin);
  await app.register(throttlePlugin);
  await app.register(mfaPlugin);
  await app.register(signInPlugin);
  await app.register(mailerPlugin);
  await app.register(webhooksServicePlugin);
  await app.register(backchannelLogoutServicePlugin);
  await app.register(accountsPlugin);
  await app.register(emailChangePlugin);
  await app.register(sessionsPlugin);
  await app.register(accountDeletionPlugin);
  await app.register(idpPlugin);
  await app.register(metricsPlugin);
  await app.register(maintenancePlugin);
  await app.register(passkeysPlugin);

  // Features, each in its own scope.
  await app.register(hostedPages);
  await app.register(consolePages);
  await app.register(authRoutes, { prefix: '/v1/auth' });
  await app.register(accountExportRoutes, { prefix: '/v1/auth/account' });
  await app.register(accountDeletionRoutes, { prefix: '/v1/auth/account' });
  await app.register(emailChangeRoutes, { prefix: '/v1/auth/email' });
  await app.register(sessionsRoutes, { prefix: '/v1/auth/sessions' });
  await app.register(emailVerifyRoutes, { prefix: '/v1/email_verify' });
  await app.register(passkeyRoutes);

  await app.register(discoveryRoutes);
  await app.register(oauthRoutes);
  await app.register(registrationRoutes);
  if (!config.production) await app.register(demoRoutes);
  if (!config.production) await app.register(homeRoutes);
  await app.register(profileRoutes, { prefix: '/v1/profile' });
  await app.register(legalRoutes, { prefix: '/v1/legal' });
  await app.register(devApi, { prefix: '/v1/dev', routes: [devAppUsersRoutes, devEventsRoutes, devLegalRoutes, webhookDevRoutes, initialAccessTokenRoutes] });
  await app.register(adminApi, { prefix: '/v1/admin', routes: [idpAdminRoutes, adminLegalRoutes, consoleAdminRoutes, userImportRoutes, registrationAdminRoutes] });

  await app.register(healthRoutes);
  return app;
}
