// The usage event resource as the API returns it.
import { z } from 'zod';
import type { EventDoc } from '../db/models/event';
import { iso, timestamp } from './format';

export const eventResource = z
  .object({
    id: z.string(),
    transaction_id: z.string(),
    external_customer_id: z.string(),
    customer_id: z.string(),
    external_subscription_id: z.string().nullable(),
    subscription_ids: z.array(z.string()),
    code: z.string(),
    billable_metric_id: z.string(),
    timestamp,
    properties: z.record(z.string(), z.unknown()),
    created_at: timestamp,
  })
  .meta({ id: 'Event' });

export type EventResource = z.output<typeof eventResource>;

export function toEventResource(doc: EventDoc): EventResource {
  return {
    id: doc._id,
    transaction_id: doc.transaction_id,
    external_customer_id: doc.external_customer_id,
    customer_id: doc.customer_id,
    external_subscription_id: doc.external_subscription_id ?? null,
    subscription_ids: doc.subscription_ids ?? [],
    code: doc.code,
    billable_metric_id: doc.billable_metric_id,
    timestamp: iso(doc.timestamp),
    properties: doc.properties ?? {},
    created_at: iso(doc.created_at),
  };
}
