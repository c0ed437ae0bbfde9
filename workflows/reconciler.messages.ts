/**
 * How a reconcileSubscriptionsWorkflow is started: by the Temporal Schedule
 * `reconcile-subscriptions` (src/temporal/schedules.ts), whose action is built here. It takes no
 * signals, updates or queries.
 *
 * The workflow type is recorded in the schedule and in every history, so it never changes.
 *
 * Imported by workflow code: only @temporalio/workflow and types.
 */
import type { ScheduleOptionsStartWorkflowAction } from '@temporalio/client';
import type * as workflows from './index';

/** The workflow type (the function's name in workflows/index.ts, which the compiler checks). */
export const reconcileSubscriptionsWorkflowType = 'reconcileSubscriptionsWorkflow' satisfies keyof typeof workflows;
type ReconcileSubscriptionsWorkflow = (typeof workflows)[typeof reconcileSubscriptionsWorkflowType];

export interface ReconcileWorkflowInput {
  pageSize?: number;
  /** See ReconcileInput.minAgeMs. */
  minAgeMs?: number;
  /** Carried through continue-as-new: where the pass resumes, and its totals so far. */
  afterId?: string;
  totals?: ReconcileTotals;
}

export interface ReconcileTotals {
  pages: number;
  checked: number;
  restarted: number;
  skipped: number;
}

/** The schedule's action: one full pass (no input), under the schedule's id. */
export function reconcileSubscriptionsScheduleAction(
  workflowId: string,
  taskQueue: string,
): ScheduleOptionsStartWorkflowAction<ReconcileSubscriptionsWorkflow> {
  return { type: 'startWorkflow', workflowType: reconcileSubscriptionsWorkflowType, workflowId, args: [{}], taskQueue };
}
