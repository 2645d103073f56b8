import { z } from 'zod';
import { WEBHOOK_TYPES } from '../shared/webhook-events.js';
import { PageLimit } from '../shared/schemas.js';

/** Request and response schemas of the webhook routes (docs/webhooks.md). Unknown keys are refused. */

export const MAX_ENDPOINTS_PER_APP = 10;
const MAX_URL = 2048;

export const WebhookType = z.enum(WEBHOOK_TYPES).describe('A webhook type (docs/webhooks.md lists each with its payload).');

const Url = z.string().trim().min(1).max(MAX_URL).describe('Where deliveries are POSTed: https, resolving to a public address (in production).');
const EventTypes = z
  .array(WebhookType)
  .max(WEBHOOK_TYPES.length)
  .refine((types) => new Set(types).size === types.length, 'must not contain duplicates')
  .describe('The types this endpoint receives; empty: every type.');
const Description = z.string().trim().max(200).describe('A note for the developer (at most 200 characters).');

export const CreateWebhookBody = z.strictObject({
  url: Url,
  event_types: EventTypes.default([]),
  description: Description.nullable().default(null),
  enabled: z.boolean().default(true),
});

export const UpdateWebhookBody = z.strictObject({
  url: Url.optional(),
  event_types: EventTypes.optional(),
  description: Description.nullable().optional(),
  enabled: z.boolean().optional().describe('Enabling an endpoint the server disabled clears the reason and its run of failures.'),
});

export const RotateSecretBody = z
  .strictObject({
    overlap_seconds: z
      .number()
      .int()
      .min(0)
      .max(7 * 86400)
      .default(86400)
      .describe('How long the previous secret keeps signing beside the new one (default 24 h; 0 ends it now).'),
  })
  .default({ overlap_seconds: 86400 });

export const WebhookParams = z.strictObject({ id: z.string().min(1).max(200), webhookId: z.string().min(1).max(200) });
export const DeliveryParams = z.strictObject({ id: z.string().min(1).max(200), webhookId: z.string().min(1).max(200), deliveryId: z.string().min(1).max(200) });
export const AppOnlyParams = z.strictObject({ id: z.string().min(1).max(200) });

export const DeliveriesQuery = z.strictObject({
  status: z.enum(['pending', 'delivered', 'failed']).optional(),
  before: z.string().regex(/^msg_[0-9a-z]{26}$/, 'must be a cursor returned as next_cursor').optional(),
  limit: PageLimit,
});

export const WebhookEndpoint = z
  .object({
    id: z.string(),
    app_id: z.string(),
    url: z.string(),
    description: z.string().nullable(),
    event_types: z.array(z.string()).describe('Empty: every type.'),
    enabled: z.boolean(),
    disabled_reason: z.enum(['failing']).nullable().describe('`failing`: the server disabled it after 3 days of failed deliveries; null otherwise.'),
    disabled_at: z.string().nullable(),
    failing_since: z.string().nullable().describe('When the current run of failed attempts began; null after a success.'),
    previous_secret_expires_at: z.string().nullable().describe('Until when the secret before the last rotation still signs.'),
    created_at: z.string(),
    updated_at: z.string(),
  })
  .meta({ id: 'WebhookEndpoint', description: "An app's webhook endpoint. Its secret is shown only when made or rotated." });

export const WebhookEndpointWithSecret = WebhookEndpoint.extend({
  secret: z.string().describe('The signing secret, `whsec_…` (shown only here): verify deliveries with it.'),
}).meta({ id: 'WebhookEndpointWithSecret', description: 'An endpoint with its signing secret, shown once.' });

export const WebhookEndpointList = z.object({ items: z.array(WebhookEndpoint) });

export const WebhookDelivery = z
  .object({
    id: z.string().describe('The `webhook-id` header: the same on every attempt and redelivery.'),
    endpoint_id: z.string(),
    type: z.string(),
    event_id: z.string().nullable().describe('The audit event it reports; null for a test event.'),
    status: z.enum(['pending', 'delivered', 'failed']),
    attempts: z.number().int(),
    created_at: z.string(),
    next_attempt_at: z.string().nullable().describe('When a pending delivery is tried next.'),
    last_attempt_at: z.string().nullable(),
    last_status_code: z.number().int().nullable(),
    last_error: z.string().nullable(),
    last_response: z.string().nullable().describe('The start of the last response body (at most 300 characters).'),
    delivered_at: z.string().nullable(),
    payload: z.string().describe('The JSON body sent.'),
  })
  .meta({ id: 'WebhookDelivery', description: 'One message to one endpoint, with its last attempt.' });

export const WebhookDeliveryPage = z.object({
  items: z.array(WebhookDelivery),
  next_cursor: z.string().nullable().describe('Pass as `before` for older deliveries; null at the end.'),
});
