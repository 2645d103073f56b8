import { z } from 'zod';

/**
 * Configuration: every environment variable (docs/reference/configuration.md), parsed once.
 * This is the only module that reads environment variables (it is handed `process.env` by its callers).
 */

const seconds = (fallback: number) => z.coerce.number().int().positive().default(fallback);
const count = (fallback: number) => z.coerce.number().int().positive().default(fallback);
const optionalText = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === '' ? undefined : v.trim()));

const LOOPBACK_HOSTS = new Set(['127.0.0.1', '[::1]', 'localhost']);

const httpUrl = (name: string) =>
  z.string().refine((v) => {
    try {
      const u = new URL(v);
      return (u.protocol === 'http:' || u.protocol === 'https:') && !u.search && !u.hash && !u.username;
    } catch {
      return false;
    }
  }, `${name} must be an absolute http(s) URL without query, fragment or credentials`);

/** Every environment variable, as docs/reference/configuration.md lists them (a test keeps the page in step). */
export const envSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: z.coerce.number().int().min(0).max(65535).default(3000),
  HOST: z.string().min(1).default('127.0.0.1'),
  BASE_URL: optionalText.pipe(httpUrl('BASE_URL').optional()),
  AUTH_URL: optionalText.pipe(httpUrl('AUTH_URL').optional()),
  DATABASE_URL: z
    .string()
    .default('sqlite:./data/gatehouse.db')
    .refine((v) => /^sqlite:.+/.test(v) || /^postgres(ql)?:\/\/.+/.test(v), 'DATABASE_URL must be sqlite:<path> or postgres://…'),
  REDIS_URL: optionalText.pipe(z.string().regex(/^rediss?:\/\/.+/, 'REDIS_URL must be redis://…').optional()),
  SMTP_URL: optionalText.pipe(z.string().regex(/^smtps?:\/\/.+/, 'SMTP_URL must be smtp://… or smtps://…').optional()),
  EMAIL_FROM: z
    .string()
    .default('no-reply@localhost')
    .refine((v) => /^[^<>@\s]+@[^<>@\s]+$/.test(v) || /^[^<>]*<[^<>@\s]+@[^<>@\s]+>$/.test(v), 'EMAIL_FROM must be an address or "Name <address>"'),
  IDP_ISSUER: optionalText,
  IDP_CLIENT_ID: optionalText,
  IDP_CLIENT_SECRET: optionalText,
  IDP_AUDIENCES: optionalText,
  IDP_NAME: optionalText,
  ADMIN_TOKEN: optionalText.pipe(z.string().min(32, 'ADMIN_TOKEN must be at least 32 characters').optional()),
  SECRET_KEY: optionalText.pipe(z.string().min(32, 'SECRET_KEY must be at least 32 characters').optional()),
  WORKERS: z.coerce.number().int().min(1).max(64).default(1),
  SHUTDOWN_DRAIN_SECONDS: z.coerce.number().min(0).max(600).default(10),
  TRUST_PROXY: optionalText,
  ACCESS_TOKEN_TTL: seconds(900),
  REFRESH_TOKEN_TTL: seconds(2592000),
  REFRESH_FAMILY_TTL: seconds(7776000),
  SESSION_TTL: seconds(600),
  REFRESH_REUSE_GRACE: z.coerce.number().int().min(0).default(10),
  BROWSER_SESSION_TTL: seconds(1209600),
  BROWSER_SESSION_IDLE: seconds(86400),
  LOGIN_MAX_FAILURES: count(5),
  LOGIN_LOCK_SECONDS: seconds(900),
  PASSWORD_MAX_WAIT_MS: z.coerce.number().int().min(0).max(600_000).default(5000),
  PASSWORD_MIN_LENGTH: z.coerce.number().int().min(8).max(128).default(8),
  HIBP_RANGE_URL: optionalText.pipe(z.url({ protocol: /^https?$/ }).optional()),
  HIBP_TIMEOUT_MS: z.coerce.number().int().min(100).max(10_000).default(1500),
  IP_AUTH_PER_MINUTE: count(30),
  MAIL_PER_HOUR: count(5),
  EXPORT_PER_HOUR: count(5),
  MAIL_INTERVAL_SECONDS: z.coerce.number().int().min(0).default(60),
  CODE_MAX_ATTEMPTS: count(5),
  CODE_MAX_FAILURES_PER_DAY: count(20),
  METRICS: z.enum(['0', '1']).default('0'),
  METRICS_PORT: z.coerce.number().int().min(1).max(65535).default(9464),
  METRICS_HOST: z.string().min(1).default('127.0.0.1'),
  METRICS_TOKEN: optionalText.pipe(z.string().min(32, 'METRICS_TOKEN must be at least 32 characters').optional()),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  DATA_DIR: z.string().min(1).default('./data'),
  PURGE_INTERVAL_SECONDS: z.coerce.number().int().min(0).max(604800).default(3600),
  PURGE_BATCH_SIZE: z.coerce.number().int().min(1).max(10000).default(1000),
  EVENT_RETENTION_DAYS: z.coerce.number().int().min(0).default(365),
  OUTBOX_RETENTION_DAYS: z.coerce.number().int().min(1).default(7),
  ACCOUNT_DELETION_GRACE_DAYS: z.coerce.number().int().min(0).max(365).default(7),
  WEBHOOK_ALLOW_PRIVATE: z.enum(['0', '1']).optional(),
  DPOP_NONCES: z.enum(['0', '1']).default('1'),
  DPOP_NONCE_WINDOW: z.coerce.number().int().min(10).max(3600).default(300),
  DYNAMIC_REGISTRATION: z.enum(['0', '1']).default('0'),
  OPEN_REGISTRATION: z.enum(['0', '1']).default('0'),
  OPEN_REGISTRATION_PER_HOUR: z.coerce.number().int().min(1).max(1000).default(10),
});

export interface IdpEnvConfig {
  issuer: string;
  clientId: string;
  clientSecret?: string;
  audiences: string[];
  name: string;
}

export interface Config {
  production: boolean;
  port: number;
  host: string;
  /** {base_url}: also the `iss` of every token this service signs. No trailing slash. */
  baseUrl: string;
  /** {auth_url}: where hosted pages live. No trailing slash. */
  authUrl: string;
  databaseUrl: string;
  redisUrl?: string;
  smtpUrl?: string;
  emailFrom: string;
  /** Provider configuration from the environment; when set, it wins over the admin API. */
  idp?: IdpEnvConfig;
  adminToken?: string;
  /** Undefined only before `resolveSecretKey` ran (development without SECRET_KEY). */
  secretKey?: string;
  dataDir: string;
  workers: number;
  /**
   * After SIGTERM: how long /readyz answers 503 while requests are still served (each answer with
   * `Connection: close`), so a proxy's health check takes the process out before it stops accepting.
   */
  shutdownDrainMs: number;
  trustProxy: string[] | false;
  ttl: {
    accessToken: number;
    refreshToken: number;
    refreshFamily: number;
    session: number;
    refreshReuseGrace: number;
    browserSession: number;
    browserSessionIdle: number;
    authorizationCode: number;
  };
  /**
   * The longest a password check waits for its turn at argon2 before it is refused with 503 and
   * Retry-After (0: no bound). Only an overloaded server makes anyone wait that long.
   */
  passwordMaxWaitMs: number;
  /** The platform floor of every app's minimum password length (docs/guides/password-policy.md). */
  passwordMinLength: number;
  /** The Have I Been Pwned range API, when set (best effort; docs/guides/password-policy.md). */
  hibp?: { rangeUrl: string; timeoutMs: number };
  throttle: {
    loginMaxFailures: number;
    loginLockSeconds: number;
    ipAuthPerMinute: number;
    mailPerHour: number;
    mailIntervalSeconds: number;
    codeMaxAttempts: number;
    /** Wrong email codes per address per 24 h, across every code grant (magic-link and verification codes). */
    codeMaxFailuresPerDay: number;
    /** Data exports per account in any hour (docs/account/data-export.md), REST and the account page together. */
    exportPerHour: number;
  };
  /** Webhook deliveries (docs/webhooks.md). */
  webhooks: {
    /**
     * Only https URLs that resolve to public addresses (the SSRF rules). On in production, off in
     * development and tests; WEBHOOK_ALLOW_PRIVATE=0 turns it on anywhere, =1 off anywhere.
     */
    publicOnly: boolean;
  };
  /** The purge of expired rows (src/maintenance). */
  purge: {
    /** Seconds between runs in each process; 0 turns the background job off (`gatehouse purge` still works). */
    intervalSeconds: number;
    /** Rows per DELETE statement. */
    batchSize: number;
    /** Days events are kept; 0 keeps them forever. */
    eventRetentionDays: number;
    /** Days delivered (or abandoned) mails stay in the outbox. */
    outboxRetentionDays: number;
  };
  /**
   * Days between a person asking to delete their account and its purge (docs/account/deletion.md);
   * signing in meanwhile offers to keep it. 0: purged at once.
   */
  accountDeletionGraceDays: number;
  /**
   * DPoP (docs/reference/oauth.md): whether proofs must carry a server nonce, and how long one nonce
   * window lasts (a nonce is accepted in its window and the next).
   */
  dpop: { nonces: boolean; nonceWindowSeconds: number };
  /**
   * Dynamic client registration (docs/reference/oauth.md#dynamic-client-registration-rfc-7591): off, on with a
   * developer's initial access token, and `open` (no token: public clients only, quarantined until the
   * operator approves them, at most `openPerHour` per IP).
   */
  registration: { enabled: boolean; open: boolean; openPerHour: number };
  /**
   * Prometheus metrics (METRICS=1), served apart from the API: on their own port, on a loopback address
   * unless told otherwise, and behind `Authorization: Bearer <token>` when a token is set (required off
   * loopback). Undefined when off: nothing is collected or served.
   */
  metrics?: { port: number; host: string; token?: string };
  logLevel: string;
  /** Request body limit in bytes (docs/reference/errors.md: 64 KiB). */
  bodyLimit: number;
  connectionTimeoutMs: number;
  requestTimeoutMs: number;
}

export type ResolvedConfig = Config & { secretKey: string };

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.join('\n')}`);
  }
}

const stripSlash = (u: string) => u.replace(/\/+$/, '');

/** A host name or address (`::1` or `[::1]` for IPv6) that only this machine can reach. */
const isLoopbackHost = (host: string): boolean => LOOPBACK_HOSTS.has(host === '::1' ? '[::1]' : host);

function isLoopbackOrHttps(url: string): boolean {
  try {
    const u = new URL(url);
    return u.protocol === 'https:' || (u.protocol === 'http:' && isLoopbackHost(u.hostname));
  } catch {
    return false;
  }
}

/** Parses the environment into a frozen Config, or throws ConfigError listing every problem (one line each). */
export function parseConfig(env: Record<string, string | undefined>): Config {
  const parsed = envSchema.safeParse(env);
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join('.') || 'environment'}: ${i.message}`));
  }
  const e = parsed.data;
  const problems: string[] = [];
  const production = e.NODE_ENV === 'production';

  const baseUrl = stripSlash(e.BASE_URL ?? `http://localhost:${e.PORT}`);
  const authUrl = stripSlash(e.AUTH_URL ?? baseUrl);

  let idp: IdpEnvConfig | undefined;
  if (e.IDP_ISSUER || e.IDP_CLIENT_ID) {
    if (!e.IDP_ISSUER || !e.IDP_CLIENT_ID) problems.push('IDP_ISSUER: IDP_ISSUER and IDP_CLIENT_ID must be set together');
    else if (!isLoopbackOrHttps(e.IDP_ISSUER)) problems.push('IDP_ISSUER: must be https (http only for loopback hosts)');
    else {
      const audiences = (e.IDP_AUDIENCES ?? e.IDP_CLIENT_ID).split(',').map((a) => a.trim()).filter(Boolean);
      idp = {
        issuer: e.IDP_ISSUER,
        clientId: e.IDP_CLIENT_ID,
        clientSecret: e.IDP_CLIENT_SECRET,
        audiences,
        name: e.IDP_NAME ?? 'Identity provider',
      };
    }
  }

  if (e.METRICS === '1') {
    if (e.METRICS_PORT === e.PORT) problems.push('METRICS_PORT: must differ from PORT (metrics are never served on the API port)');
    if (!isLoopbackHost(e.METRICS_HOST) && !e.METRICS_TOKEN) problems.push('METRICS_TOKEN: required when METRICS_HOST is not a loopback address');
  }
  if (production && !e.SECRET_KEY) problems.push('SECRET_KEY: required when NODE_ENV=production (at least 32 characters)');
  if (production && !baseUrl.startsWith('https://')) problems.push('BASE_URL: must be https when NODE_ENV=production');

  if (e.OPEN_REGISTRATION === '1' && e.DYNAMIC_REGISTRATION !== '1') problems.push('OPEN_REGISTRATION: needs DYNAMIC_REGISTRATION=1');

  if (problems.length) throw new ConfigError(problems);

  const config: Config = {
    production,
    port: e.PORT,
    host: e.HOST,
    baseUrl,
    authUrl,
    databaseUrl: e.DATABASE_URL,
    redisUrl: e.REDIS_URL,
    smtpUrl: e.SMTP_URL,
    emailFrom: e.EMAIL_FROM,
    idp,
    adminToken: e.ADMIN_TOKEN,
    secretKey: e.SECRET_KEY,
    dataDir: e.DATA_DIR,
    workers: e.WORKERS,
    shutdownDrainMs: Math.round(e.SHUTDOWN_DRAIN_SECONDS * 1000),
    trustProxy: e.TRUST_PROXY ? e.TRUST_PROXY.split(',').map((s) => s.trim()).filter(Boolean) : false,
    ttl: {
      accessToken: e.ACCESS_TOKEN_TTL,
      refreshToken: e.REFRESH_TOKEN_TTL,
      refreshFamily: Math.max(e.REFRESH_FAMILY_TTL, e.REFRESH_TOKEN_TTL),
      session: e.SESSION_TTL,
      refreshReuseGrace: e.REFRESH_REUSE_GRACE,
      browserSession: e.BROWSER_SESSION_TTL,
      browserSessionIdle: e.BROWSER_SESSION_IDLE,
      authorizationCode: 60,
    },
    passwordMaxWaitMs: e.PASSWORD_MAX_WAIT_MS,
    passwordMinLength: e.PASSWORD_MIN_LENGTH,
    hibp: e.HIBP_RANGE_URL ? { rangeUrl: e.HIBP_RANGE_URL, timeoutMs: e.HIBP_TIMEOUT_MS } : undefined,
    throttle: {
      loginMaxFailures: e.LOGIN_MAX_FAILURES,
      loginLockSeconds: e.LOGIN_LOCK_SECONDS,
      ipAuthPerMinute: e.IP_AUTH_PER_MINUTE,
      mailPerHour: e.MAIL_PER_HOUR,
      mailIntervalSeconds: e.MAIL_INTERVAL_SECONDS,
      codeMaxAttempts: e.CODE_MAX_ATTEMPTS,
      codeMaxFailuresPerDay: e.CODE_MAX_FAILURES_PER_DAY,
      exportPerHour: e.EXPORT_PER_HOUR,
    },
    webhooks: { publicOnly: e.WEBHOOK_ALLOW_PRIVATE === undefined ? production : e.WEBHOOK_ALLOW_PRIVATE === '0' },
    purge: {
      intervalSeconds: e.PURGE_INTERVAL_SECONDS,
      batchSize: e.PURGE_BATCH_SIZE,
      eventRetentionDays: e.EVENT_RETENTION_DAYS,
      outboxRetentionDays: e.OUTBOX_RETENTION_DAYS,
    },
    accountDeletionGraceDays: e.ACCOUNT_DELETION_GRACE_DAYS,
    dpop: { nonces: e.DPOP_NONCES === '1', nonceWindowSeconds: e.DPOP_NONCE_WINDOW },
    registration: { enabled: e.DYNAMIC_REGISTRATION === '1', open: e.OPEN_REGISTRATION === '1', openPerHour: e.OPEN_REGISTRATION_PER_HOUR },
    metrics: e.METRICS === '1' ? { port: e.METRICS_PORT, host: e.METRICS_HOST, token: e.METRICS_TOKEN } : undefined,
    logLevel: e.LOG_LEVEL,
    bodyLimit: 64 * 1024,
    connectionTimeoutMs: 10_000,
    requestTimeoutMs: 30_000,
  };
  return Object.freeze(config);
}
