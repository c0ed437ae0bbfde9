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
    typedSearchAttributes: entitySearchAttributes({ ...owner, entityType: 'webhook' }),
  });
}
