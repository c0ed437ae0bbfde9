import { ApplicationFailure } from '@temporalio/activity';
import type { Models } from '../src/db';
import { WEBHOOK_ATTEMPT_TIMEOUT_MS, WEBHOOK_MAX_ATTEMPTS } from '../src/domain/webhook-schedule';
import { emitEvent, type EmitDeps, type EmitEventInput, type EmittedEvent } from '../src/webhooks/emit-event';
import { signWebhook } from '../src/webhooks/signature';
import { webhookDeliveries, webhookDeliveryAttempts } from '../src/metrics/registry';

export interface WebhookActivityDeps extends EmitDeps {
  models: Models;
  /** HTTP client (global fetch in production). */
  fetch?: typeof fetch;
  /** Per-attempt timeout; 10 s (api-contract.md). */
  attemptTimeoutMs?: number;
}

export type DeliveryOutcome =
  /** 2xx: done. */
  | { outcome: 'succeeded'; httpStatus: number }
  /** Anything else; `final` when this was the last attempt (the delivery is now failed). */
  | { outcome: 'failed'; httpStatus: number | null; error: string; final: boolean }
  /** The endpoint was deleted or deactivated meanwhile: nothing more is sent. */
  | { outcome: 'abandoned'; reason: string };

export function createWebhookActivities(deps: WebhookActivityDeps) {
  const { Webhook, WebhookEndpoint } = deps.models;
  const doFetch = deps.fetch ?? fetch;
  const timeoutMs = deps.attemptTimeoutMs ?? WEBHOOK_ATTEMPT_TIMEOUT_MS;

  return {
    /** The one door for lifecycle events, for workflows (activities call emitEvent directly). */
    async emitLifecycleEvent(input: Omit<EmitEventInput, 'occurredAt'> & { occurredAt: string }): Promise<EmittedEvent> {
      return emitEvent(deps, { ...input, occurredAt: new Date(input.occurredAt) });
    },

    /**
     * One delivery attempt: POST the payload, signed with the endpoint's current secret, and
     * record the attempt on the Webhook record. `attempt` and `attemptedAt` come from the workflow,
     * so a retried activity records the same attempt once (the guard on `attempts`).
     * At least once: a retried activity may POST twice; receivers dedupe on the event id.
     */
    async attemptWebhookDelivery(input: {
      deliveryId: string;
      attempt: number;
      lastAttempt: number;
      attemptedAt: string;
    }): Promise<DeliveryOutcome> {
      const delivery = await Webhook.findById(input.deliveryId).lean();
      if (!delivery) throw ApplicationFailure.nonRetryable(`webhook delivery ${input.deliveryId} not found`, 'NotFound');
      if (delivery.status === 'succeeded') return { outcome: 'succeeded', httpStatus: delivery.http_status ?? 200 };

      const endpoint = await WebhookEndpoint.findOne({ _id: delivery.webhook_endpoint_id }).lean();
      if (!endpoint || endpoint.deleted_at || endpoint.status !== 'active') {
        const reason = !endpoint || endpoint.deleted_at ? 'endpoint deleted' : 'endpoint inactive';
        const abandoned = await Webhook.updateOne(
          { _id: delivery._id, status: 'pending' },
          { $set: { status: 'failed', last_error: reason } },
        );
        if (abandoned.modifiedCount > 0) webhookDeliveries.inc({ outcome: 'abandoned' });
        return { outcome: 'abandoned', reason };
      }

      const body = JSON.stringify(delivery.payload);
      const started = Date.now();
      let httpStatus: number | null = null;
      let error: string | null = null;
      try {
        const response = await doFetch(endpoint.url, {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            'user-agent': 'billing-service-webhooks/1',
            'x-billing-event-id': delivery.event_id,
            'x-billing-event-type': delivery.webhook_type,
            'x-billing-delivery-id': delivery._id,
            'x-billing-signature': signWebhook(endpoint.secret, body, Math.floor(Date.now() / 1000)),
          },
          body,
          redirect: 'manual',
          signal: AbortSignal.timeout(timeoutMs),
        });
        httpStatus = response.status;
        // Drain the body (bounded by the same timeout) so the connection can be reused.
        await response.arrayBuffer().catch(() => undefined);
        if (httpStatus < 200 || httpStatus >= 300) error = `HTTP ${httpStatus}`;
      } catch (err) {
        const e = err as Error;
        error = e.name === 'TimeoutError' || e.name === 'AbortError' ? `timeout after ${timeoutMs} ms` : `network error: ${e.message}`;
      }

      const succeeded = error === null;
      const final = !succeeded && input.attempt >= input.lastAttempt;
      const status = succeeded ? 'succeeded' : final ? 'failed' : 'pending';
      const recorded = await Webhook.updateOne(
        { _id: delivery._id, attempts: { $lt: input.attempt } },
        {
          $set: {
            attempts: input.attempt,
            // retries: failed attempts before this one (api-contract: each attempt updates it).
            retries: input.attempt - 1,
            http_status: httpStatus,
            last_error: error,
            last_attempt_at: new Date(input.attemptedAt),
            status,
          },
          $push: {
            attempt_log: {
              attempt: input.attempt,
              attempted_at: new Date(input.attemptedAt),
              http_status: httpStatus,
              error,
              duration_ms: Date.now() - started,
            },
          },
        },
      );
      // Counted with the attempt's record (the same guard): a retried activity counts it once.
      if (recorded.modifiedCount > 0) {
        webhookDeliveryAttempts.inc({ outcome: succeeded ? 'succeeded' : 'failed' });
        if (succeeded || final) webhookDeliveries.inc({ outcome: succeeded ? 'succeeded' : 'failed' });
      }
      return succeeded ? { outcome: 'succeeded', httpStatus: httpStatus! } : { outcome: 'failed', httpStatus, error: error!, final };
    },

    /** Where a new run of a delivery starts counting (POST /v1/webhooks/{id}/retry continues). */
    async webhookDeliveryStart(deliveryId: string): Promise<{ firstAttempt: number; lastAttempt: number }> {
      const delivery = await Webhook.findById(deliveryId, { attempts: 1 }).lean();
      const done = delivery?.attempts ?? 0;
      return { firstAttempt: done + 1, lastAttempt: done + WEBHOOK_MAX_ATTEMPTS };
    },
  };
}
