/**
 * How a pingWorkflow (`diagnostic/<id>`) is started. It takes no signals, updates or queries.
 *
 * The workflow type is recorded in every history, so it never changes.
 *
 * Imported by workflow code: only @temporalio/workflow, the pure id and search-attribute helpers,
 * and types.
 */
import type { TemporalClient } from '../src/temporal/client';
import { entitySearchAttributes } from '../src/temporal/search-attributes';
import { workflowIds } from '../src/temporal/workflow-ids';
import type * as workflows from './index';

/** The workflow type (the function's name in workflows/index.ts, which the compiler checks). */
export const pingWorkflowType = 'pingWorkflow' satisfies keyof typeof workflows;
type PingWorkflow = (typeof workflows)[typeof pingWorkflowType];

/** Starts a ping of an organization under `diagnostic/<diagnosticId>`; customerId and status only label it. */
export function startPingWorkflow(
  temporal: TemporalClient,
  organizationId: string,
  label: { diagnosticId: string; customerId?: string; status?: string },
) {
  return temporal.client.workflow.start<PingWorkflow>(pingWorkflowType, {
    workflowId: workflowIds.diagnostic(label.diagnosticId),
    taskQueue: temporal.taskQueue,
    args: [organizationId],
    typedSearchAttributes: entitySearchAttributes({
      organizationId,
      entityType: 'diagnostic',
      customerId: label.customerId,
      status: label.status,
    }),
  });
}
