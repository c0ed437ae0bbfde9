/**
 * testClockAdvanceWorkflow: one advance of a test clock (`test-clock/<id>/advance/<target>`).
 *
 * The clock's frozen_time is already the target (every workflow started meanwhile starts there).
 * Rounds: deliver the time to every running workflow of the clock's customers and wait until each
 * has caught up; a step may start new workflows (a period's invoice), so rounds repeat until one
 * confirms exactly the workflows the previous one did. Then the clock is ready.
 * No timers, no signals; it ends when the clock is ready.
 */
import { proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';

const acts = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

export interface TestClockAdvanceInput {
  clockId: string;
  target: string;
}

export async function testClockAdvanceWorkflow(input: TestClockAdvanceInput): Promise<{ rounds: number; workflows: number }> {
  let previous = '';
  let rounds = 0;
  let confirmed: string[] = [];
  for (;;) {
    confirmed = await acts.advanceTestClockRound(input.clockId, input.target);
    rounds++;
    const key = confirmed.join(',');
    if (key === previous) break;
    previous = key;
  }
  await acts.markTestClockReady(input.clockId, input.target);
  return { rounds, workflows: confirmed.length };
}
