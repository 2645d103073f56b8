import { z } from 'zod';

/** `/v1/auth/sessions` (docs/account/sessions.md). */

export const SessionItem = z
  .object({
    id: z.string().describe('Opaque, unguessable id of this entry (`ses_…`): neither a cookie nor a token, and not the `sid` of its tokens.'),
    kind: z.enum(['browser', 'grant']).describe('`browser`: a session of the hosted pages (first-party tokens only); `grant`: a sign-in to an app.'),
    current: z.boolean().describe('True for the grant the calling token belongs to.'),
    app: z.object({ id: z.string(), name: z.string() }).nullable().describe('The app of a grant; null for a browser session.'),
    browser: z.string().nullable().describe('The browser the sign-in came from, from its user agent (e.g. `Chrome`); null when unknown.'),
    os: z.string().nullable().describe('Its operating system (e.g. `macOS`); null when unknown.'),
    device_type: z.string().nullable().describe('`desktop`, `mobile`, `tablet`, …; null when unknown.'),
    ip_area: z.string().nullable().describe('The coarse area of the address it came from: IPv4 /24 (`203.0.113.x`) or IPv6 /48 (`2001:db8:1::/48`). Never the full address.'),
    created_at: z.string().describe('First seen (ISO 8601, UTC).'),
    last_seen_at: z.string().describe('Last seen (ISO 8601, UTC): for a grant, its latest token refresh.'),
  })
  .meta({ id: 'Session' });

export const SessionList = z.object({ sessions: z.array(SessionItem) }).meta({ id: 'SessionList' });

export const SessionParams = z.object({ id: z.string().min(1).max(100).describe('The `id` of an entry of `GET /v1/auth/sessions`.') });
