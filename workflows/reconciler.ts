/**
 * reconcileSubscriptionsWorkflow: one pass of the reconciler, started by the Temporal Schedule
 * `reconcile-subscriptions` (src/temporal/schedules.ts). It pages through every pending or active
 * subscription (by id) with the reconcileSubscriptions activity, which restarts the workflow of
 * any subscription whose `subscription/<id>` workflow is missing or closed. Owns nothing; each run
 * ends after the last page. No timers: it only runs activities. Its start (the schedule's action)
 * is in reconciler.messages.ts.
 */
import { continueAsNew, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { ReconcileTotals, ReconcileWorkflowInput } from './reconciler.messages';

const { reconcileSubscriptions } = proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  // A pass that keeps failing ends (failed) instead of retrying forever: the schedule skips runs
  // while one is still going (overlap SKIP), and its next run starts over.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5 },
});

export async function reconcileSubscriptionsWorkflow(input: ReconcileWorkflowInput = {}): Promise<ReconcileTotals> {
  const totals: ReconcileTotals = input.totals ? { ...input.totals } : { pages: 0, checked: 0, restarted: 0, skipped: 0 };
  let afterId = input.afterId;
  for (;;) {
    const page = await reconcileSubscriptions({
      ...(afterId ? { afterId } : {}),
      ...(input.pageSize ? { pageSize: input.pageSize } : {}),
      ...(input.minAgeMs !== undefined ? { minAgeMs: input.minAgeMs } : {}),
    });
    totals.pages++;
    totals.checked += page.checked;
    totals.restarted += page.restarted;
    totals.skipped += page.skipped.length;
    if (page.nextAfterId === null) return totals;
    afterId = page.nextAfterId;
    if (workflowInfo().continueAsNewSuggested) {
      await continueAsNew<typeof reconcileSubscriptionsWorkflow>({ ...input, afterId, totals });
    }
  }
}
