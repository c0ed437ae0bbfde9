// Which Temporal activity is writing: recorded on an invoice when it is issued and finalized, so an
// operator can go from an invoice to the workflow run and activity that wrote it (GET
// /v1/invoices/{id}/explain). Billing code also runs outside activities (an API request creating a
// one-off invoice): there is no activity context then, and the origin is null.
import { Context } from '@temporalio/activity';
import type { InvoiceOrigin } from '../db/models/invoice';

/**
 * The current activity's workflow run and activity, or null outside an activity. `recorded_at` is
 * wall-clock time (not billing time, which a test clock may hold back): it is what the workflow's
 * event history shows.
 */
export function activityOrigin(): InvoiceOrigin | null {
  let info: Context['info'];
  try {
    info = Context.current().info;
  } catch {
    return null;
  }
  if (!info.workflowExecution) return null;
  return {
    workflow_id: info.workflowExecution.workflowId,
    run_id: info.workflowExecution.runId,
    workflow_type: info.workflowType ?? null,
    activity_type: info.activityType,
    activity_id: info.activityId,
    attempt: info.attempt,
    task_queue: info.taskQueue,
    recorded_at: new Date(),
  };
}
