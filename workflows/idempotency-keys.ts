/**
 * sweepIdempotencyKeysWorkflow: removes the `Idempotency-Key` answers whose 24 hours have passed,
 * started by the Temporal Schedule `sweep-idempotency-keys` (src/temporal/schedules.ts). Owns
 * nothing. No timers, no signals: one activity, then it ends. Its start (the schedule's action) is
 * in idempotency-keys.messages.ts.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

const { deleteExpiredIdempotencyKeys } = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  // A sweep that keeps failing ends (failed) instead of retrying forever: the next run starts over,
  // and the API treats an expired row as absent meanwhile.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5 },
});

export async function sweepIdempotencyKeysWorkflow(): Promise<{ deleted: number }> {
  return deleteExpiredIdempotencyKeys();
}
