/**
 * webhookDeliveryWorkflow: one delivery of one lifecycle event to one endpoint (`webhook/<id>`).
 * Timers: the retry backoff between failed attempts (30 s, doubling, at most 1 h; 10 attempts).
 * Signals/updates: none. Ends succeeded, failed after the last attempt, or abandoned when the
 * endpoint is deleted or deactivated. POST /v1/webhooks/{id}/retry starts a new run, which
 * continues the attempt count. Its start options are in webhook-delivery.messages.ts.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { webhookRetryDelayMs } from '../src/domain/webhook-schedule';
import type { WebhookDeliveryInput } from './webhook-delivery.messages';
import { waitUntil } from './wait';

const { attemptWebhookDelivery, webhookDeliveryStart } = proxyActivities<Activities>({
  // The HTTP attempt itself is bounded at 10 s inside the activity; this covers the bookkeeping.
  startToCloseTimeout: '1 minute',
  // Only infrastructure failures (database) reach Temporal's retry; HTTP failures are outcomes.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

export type WebhookDeliveryResult = { status: 'succeeded' | 'failed' | 'abandoned'; attempts: number };

export async function webhookDeliveryWorkflow(input: WebhookDeliveryInput): Promise<WebhookDeliveryResult> {
  const { firstAttempt, lastAttempt } = await webhookDeliveryStart(input.deliveryId);
  for (let attempt = firstAttempt; attempt <= lastAttempt; attempt++) {
    const result = await attemptWebhookDelivery({
      deliveryId: input.deliveryId,
      attempt,
      lastAttempt,
      attemptedAt: new Date().toISOString(),
    });
    if (result.outcome === 'succeeded') return { status: 'succeeded', attempts: attempt };
    if (result.outcome === 'abandoned') return { status: 'abandoned', attempts: attempt - 1 };
    if (attempt < lastAttempt) await waitUntil(Date.now() + webhookRetryDelayMs(attempt - firstAttempt + 1));
  }
  return { status: 'failed', attempts: lastAttempt };
}
