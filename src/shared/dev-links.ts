import type { Config } from '../config.js';

/**
 * Where a developer finds things on this instance: the first-start banner (src/bootstrap.ts) and the
 * development landing page (src/home) show the same list. `demo` and `mailbox` only where they are
 * served: outside production, and the mailbox only while mail stays in the outbox (no SMTP_URL).
 */
export interface DeveloperLinks {
  console: string;
  demo?: string;
  mailbox?: string;
  discovery: string;
  docs: string;
}

export function developerLinks(config: Pick<Config, 'production' | 'baseUrl' | 'authUrl' | 'smtpUrl'>): DeveloperLinks {
  return {
    console: `${config.authUrl}/console`,
    ...(config.production ? {} : { demo: `${config.baseUrl}/demo` }),
    ...(config.production || config.smtpUrl ? {} : { mailbox: `${config.baseUrl}/dev/mailbox` }),
    discovery: `${config.baseUrl}/.well-known/openid-configuration`,
    docs: `${config.baseUrl}/docs`,
  };
}
