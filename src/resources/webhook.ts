// The webhook resource: one delivery of a lifecycle event to one endpoint, with its attempts, as
// the API returns it (GET /v1/webhooks).
import { z } from 'zod';
import type { WebhookAttempt, WebhookDoc } from '../db/models/webhook';
import { iso, nullableTimestamp, timestamp } from './format';

export const webhookAttemptResource = z.object({
  attempt: z.number().int(),
  attempted_at: timestamp,
  http_status: z.number().int().nullable(),
  error: z.string().nullable(),
  duration_ms: z.number(),
});

export type WebhookAttemptResource = z.output<typeof webhookAttemptResource>;

export const webhookResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    webhook_endpoint_id: z.string(),
    event_id: z.string(),
    webhook_type: z.string(),
    payload: z.record(z.string(), z.unknown()),
    status: z.enum(['pending', 'succeeded', 'failed']),
    retries: z.number().int(),
    attempts: z.number().int(),
    http_status: z.number().int().nullable(),
    last_error: z.string().nullable(),
    last_attempt_at: nullableTimestamp,
    attempt_log: z.array(webhookAttemptResource),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Webhook' });

export type WebhookResource = z.output<typeof webhookResource>;

export function toWebhookAttemptResource(attempt: WebhookAttempt): WebhookAttemptResource {
  return {
    attempt: attempt.attempt,
    attempted_at: iso(attempt.attempted_at),
    http_status: attempt.http_status ?? null,
    error: attempt.error ?? null,
    duration_ms: attempt.duration_ms,
  };
}

export function toWebhookResource(doc: WebhookDoc): WebhookResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    webhook_endpoint_id: doc.webhook_endpoint_id,
    event_id: doc.event_id,
    webhook_type: doc.webhook_type,
    payload: doc.payload,
    status: doc.status,
    retries: doc.retries,
    attempts: doc.attempts,
    http_status: doc.http_status ?? null,
    last_error: doc.last_error ?? null,
    last_attempt_at: iso(doc.last_attempt_at),
    attempt_log: (doc.attempt_log ?? []).map(toWebhookAttemptResource),
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}
