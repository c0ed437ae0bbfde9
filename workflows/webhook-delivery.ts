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
import { localTime, showDetails } from './details';
import type { WebhookDeliveryInput } from './webhook-delivery.messages';
import { waitUntil } from './wait';

const { attemptWebhookDelivery, webhookDeliveryStart } = proxyActivities<Activities>({
  // The HTTP attempt itself is bounded at 10 s inside the activity; this covers the bookkeeping.
  startToCloseTimeout: '1 minute',
  // Only infrastructure failures (database) reach Temporal's retry; HTTP failures are outcomes.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

export type WebhookDeliveryResult = { status: 'succeeded' | 'failed' | 'abandoned'; attempts: number };

/** `30 s`, `2 min`, `1 h`: a backoff as the details say it. */
function delayLabel(ms: number): string {
  if (ms < 60_000) return `${Math.round(ms / 1000)} s`;
  if (ms < 3_600_000) return `${Math.round(ms / 60_000)} min`;
  return `${Math.round(ms / 3_600_000)} h`;
}

export async function webhookDeliveryWorkflow(input: WebhookDeliveryInput): Promise<WebhookDeliveryResult> {
  const labels = input.labels;
  const label = labels ? `Webhook delivery of ${labels.eventType} to ${labels.endpointHost}` : `Webhook delivery ${input.deliveryId}`;
  const target = labels?.endpointHost ?? 'the endpoint';
  const { firstAttempt, lastAttempt } = await webhookDeliveryStart.executeWithOptions({ summary: 'count the attempts made before' }, [
    input.deliveryId,
  ]);
  const done = (state: string, result: WebhookDeliveryResult): WebhookDeliveryResult => {
    showDetails(`${label} ${state}.`, 'nothing: the delivery is over');
    return result;
  };
  let lastError = '';
  for (let attempt = firstAttempt; attempt <= lastAttempt; attempt++) {
    const of = `${attempt} of ${lastAttempt}`;
    showDetails(`${label}: attempt ${of} under way.`, `the answer of ${target} (at most 10 s)`);
    const result = await attemptWebhookDelivery.executeWithOptions({ summary: `attempt ${of}: POST to ${target}` }, [
      {
        deliveryId: input.deliveryId,
        attempt,
        lastAttempt,
        attemptedAt: new Date().toISOString(),
      },
    ]);
    if (result.outcome === 'succeeded')
      return done(`succeeded at attempt ${of} (HTTP ${result.httpStatus})`, { status: 'succeeded', attempts: attempt });
    if (result.outcome === 'abandoned')
      return done(`abandoned before attempt ${of}: ${result.reason}`, { status: 'abandoned', attempts: attempt - 1 });
    lastError = result.error;
    if (attempt < lastAttempt) {
      const delay = webhookRetryDelayMs(attempt - firstAttempt + 1);
      const at = Date.now() + delay;
      showDetails(
        `${label}: attempt ${of} failed (${result.error}).`,
        `retry ${attempt - firstAttempt + 1} (attempt ${attempt + 1} of ${lastAttempt}) at ${localTime(at)}, after a ${delayLabel(delay)} backoff`,
      );
      await waitUntil(at, undefined, `retry: attempt ${attempt + 1} of ${lastAttempt}`);
    }
  }
  return done(`failed after attempt ${lastAttempt} of ${lastAttempt} (${lastError})`, { status: 'failed', attempts: lastAttempt });
}
