/**
 * How a webhookDeliveryWorkflow (`webhook/<id>`) is started. It takes no signals, updates or
 * queries. src/webhooks uses this, so nothing starts it by a string name.
 *
 * The workflow type is recorded in every history: running executions and
 * test/workflows/histories depend on it, so it never changes.
 *
 * Imported by workflow code: only @temporalio/workflow, the pure id and search-attribute helpers,
 * and types.
 */
import type { TemporalClient } from '../src/temporal/client';
import { entitySearchAttributes } from '../src/temporal/search-attributes';
import { workflowIds } from '../src/temporal/workflow-ids';
import type * as workflows from './index';

/** The workflow type (the function's name in workflows/index.ts, which the compiler checks). */
export const webhookDeliveryWorkflowType = 'webhookDeliveryWorkflow' satisfies keyof typeof workflows;
type WebhookDeliveryWorkflow = (typeof workflows)[typeof webhookDeliveryWorkflowType];

export interface WebhookDeliveryInput {
  deliveryId: string;
  /** What names the delivery to an operator (absent in executions started before them). */
  labels?: WebhookDeliveryLabels;
}

/** The event's type, the endpoint's host and the customer the event is about, for search attributes and summaries. */
export interface WebhookDeliveryLabels {
  eventType: string;
  /** The host (and port) of the endpoint's URL: not its path, which may carry a token. */
  endpointHost: string;
  endpointId: string;
  eventId: string;
  /** Null: the event is not about a customer, or not known (a retry). */
  customerExternalId: string | null;
}

/** The host (and port) of an endpoint's URL, `?` when it does not parse. */
export function endpointHostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '?';
  }
}

/**
 * Starts a delivery's workflow; a running one is kept (USE_EXISTING). `first`: a delivery that
 * ran already (even to completion) is not run again (REJECT_DUPLICATE: the start throws
 * WorkflowExecutionAlreadyStartedError), so a retried emission never re-sends. `again`: a new run
 * with the same workflow id after the previous one ended (POST /v1/webhooks/{id}/retry).
 */
export function startWebhookDeliveryWorkflow(
  temporal: TemporalClient,
  input: WebhookDeliveryInput,
  owner: { organizationId: string; customerId: string | null },
  mode: 'first' | 'again',
) {
  return temporal.client.workflow.start<WebhookDeliveryWorkflow>(webhookDeliveryWorkflowType, {
    workflowId: workflowIds.webhook(input.deliveryId),
    taskQueue: temporal.taskQueue,
    args: [input],
    workflowIdReusePolicy: mode === 'first' ? 'REJECT_DUPLICATE' : 'ALLOW_DUPLICATE',
    workflowIdConflictPolicy: 'USE_EXISTING',
    typedSearchAttributes: entitySearchAttributes({
      ...owner,
      entityType: 'webhook',
      customerExternalId: input.labels?.customerExternalId,
    }),
    ...(input.labels
      ? {
          staticSummary: `Webhook delivery of ${input.labels.eventType} to ${input.labels.endpointHost}${input.labels.customerExternalId ? ` (customer ${input.labels.customerExternalId})` : ''}`,
          staticDetails: [
            mode === 'first' ? 'First series of attempts.' : 'Another series of attempts (POST /v1/webhooks/{id}/retry).',
            `Ids: delivery ${input.deliveryId}, event ${input.labels.eventId}, endpoint ${input.labels.endpointId}${owner.customerId ? `, customer ${owner.customerId}` : ''}, organization ${owner.organizationId}.`,
          ].join('\n'),
        }
      : {}),
  });
}
