// The lifecycle event as webhook receivers get it: the body POSTed (and signed) for each delivery
// (api-contract.md, Outgoing webhooks), and the `payload` of the webhook resource.
import { z } from 'zod';
import type { LifecycleEventDoc } from '../db/models/lifecycle-event';
import { iso, timestamp } from './format';

export const lifecycleEventPayload = z.object({
  id: z.string().describe('The event id: receivers dedupe on it'),
  type: z.string().describe('e.g. invoice.finalized'),
  created_at: timestamp.describe('When it happened (workflow or test-clock time)'),
  organization_id: z.string(),
  data: z.object({ object: z.record(z.string(), z.unknown()).describe('The resource as the API returns it') }),
});

export type LifecycleEventPayload = z.output<typeof lifecycleEventPayload>;

export function toLifecycleEventPayload(
  event: Pick<LifecycleEventDoc, '_id' | 'type' | 'occurred_at' | 'organization_id' | 'object'>,
): LifecycleEventPayload {
  return {
    id: event._id,
    type: event.type,
    created_at: iso(event.occurred_at),
    organization_id: event.organization_id,
    data: { object: event.object },
  };
}
