// Temporal Schedules of the service (workflows.md): global sweeps that are not one entity's timer.
import { ScheduleAlreadyRunning, ScheduleOverlapPolicy, type Client } from '@temporalio/client';
import type { Duration } from '@temporalio/common';
import { sweepIdempotencyKeysScheduleAction } from '../../workflows/idempotency-keys.messages';
import { reconcileSubscriptionsScheduleAction } from '../../workflows/reconciler.messages';

export const RECONCILER_SCHEDULE_ID = 'reconcile-subscriptions';

/**
 * Creates the `reconcile-subscriptions` schedule (reconcileSubscriptionsWorkflow every `every`)
 * unless it exists. Idempotent: every worker calls it at start; the first one creates it and an
 * existing schedule is left as it is (an operator may have paused or retimed it). Overlap SKIP: a
 * run still going when the next is due makes that one skip. Resolves true when it created it.
 */
export async function ensureReconcilerSchedule(client: Client, taskQueue: string, every: Duration = '10 minutes'): Promise<boolean> {
  try {
    await client.schedule.create({
      scheduleId: RECONCILER_SCHEDULE_ID,
      spec: { intervals: [{ every }] },
      action: reconcileSubscriptionsScheduleAction(RECONCILER_SCHEDULE_ID, taskQueue),
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute' },
    });
    return true;
  } catch (err) {
    if (err instanceof ScheduleAlreadyRunning) return false;
    throw err;
  }
}

export const IDEMPOTENCY_KEY_SWEEP_SCHEDULE_ID = 'sweep-idempotency-keys';

/**
 * Creates the `sweep-idempotency-keys` schedule (sweepIdempotencyKeysWorkflow every `every`)
 * unless it exists, like ensureReconcilerSchedule: idempotent, an existing schedule is left as it
 * is, overlap SKIP. Resolves true when it created it.
 */
export async function ensureIdempotencyKeySweepSchedule(client: Client, taskQueue: string, every: Duration = '1 hour'): Promise<boolean> {
  try {
    await client.schedule.create({
      scheduleId: IDEMPOTENCY_KEY_SWEEP_SCHEDULE_ID,
      spec: { intervals: [{ every }] },
      action: sweepIdempotencyKeysScheduleAction(IDEMPOTENCY_KEY_SWEEP_SCHEDULE_ID, taskQueue),
      policies: { overlap: ScheduleOverlapPolicy.SKIP, catchupWindow: '1 minute' },
    });
    return true;
  } catch (err) {
    if (err instanceof ScheduleAlreadyRunning) return false;
    throw err;
  }
}
