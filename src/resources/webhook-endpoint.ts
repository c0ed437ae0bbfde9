// The webhook endpoint resource as the API returns it. Its deliveries (the Webhook resource) are
// another resource.
import { z } from 'zod';
import type { WebhookEndpointDoc } from '../db/models/webhook-endpoint';
import { iso, nullableTimestamp, timestamp } from './format';

export const webhookEndpointResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    url: z.string(),
    signature_algo: z.literal('hmac'),
    status: z.enum(['active', 'inactive']),
    event_types: z.array(z.string()),
    deleted_at: nullableTimestamp,
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'WebhookEndpoint' });

export type WebhookEndpointResource = z.output<typeof webhookEndpointResource>;

/** The endpoint as answered at creation and rotation, the only times its secret is shown. */
export const webhookEndpointWithSecret = webhookEndpointResource
  .extend({ secret: z.string().describe('The HMAC signing secret, shown at creation and rotation only') })
  .meta({ id: 'WebhookEndpointWithSecret' });

export type WebhookEndpointWithSecret = z.output<typeof webhookEndpointWithSecret>;

export function toWebhookEndpointResource(doc: WebhookEndpointDoc): WebhookEndpointResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    url: doc.url,
    signature_algo: doc.signature_algo,
    status: doc.status,
    event_types: doc.event_types ?? [],
    deleted_at: iso(doc.deleted_at),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
