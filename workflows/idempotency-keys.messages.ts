/**
 * How a sweepIdempotencyKeysWorkflow is started: by the Temporal Schedule `sweep-idempotency-keys`
 * (src/temporal/schedules.ts), whose action is built here. It takes no signals, updates or queries.
 *
 * The workflow type is recorded in the schedule and in every history, so it never changes.
 *
 * Imported by workflow code: only @temporalio/workflow and types.
 */
import type { ScheduleOptionsStartWorkflowAction } from '@temporalio/client';
import type * as workflows from './index';

/** The workflow type (the function's name in workflows/index.ts, which the compiler checks). */
export const sweepIdempotencyKeysWorkflowType = 'sweepIdempotencyKeysWorkflow' satisfies keyof typeof workflows;
type SweepIdempotencyKeysWorkflow = (typeof workflows)[typeof sweepIdempotencyKeysWorkflowType];

/** The schedule's action: one sweep, under the schedule's id. */
export function sweepIdempotencyKeysScheduleAction(
  workflowId: string,
  taskQueue: string,
): ScheduleOptionsStartWorkflowAction<SweepIdempotencyKeysWorkflow> {
  return { type: 'startWorkflow', workflowType: sweepIdempotencyKeysWorkflowType, workflowId, args: [], taskQueue };
}
