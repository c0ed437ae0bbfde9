import { heartbeat } from '@temporalio/activity';
import { clockWorkflowIds, deliverClockTime, markClockReady, type TestClockDeps } from '../src/test-clocks/advance';

/** The testClockAdvanceWorkflow's steps. */
export function createTestClockActivities(deps: TestClockDeps) {
  return {
    /** One round: every running workflow of the clock's customers, told the time and caught up. */
    async advanceTestClockRound(clockId: string, target: string): Promise<string[]> {
      const timer = setInterval(() => heartbeat(), 5_000);
      try {
        return await deliverClockTime(deps, await clockWorkflowIds(deps.db, clockId), target);
      } finally {
        clearInterval(timer);
      }
    },
    async markTestClockReady(clockId: string, target: string): Promise<void> {
      await markClockReady(deps.db, clockId, new Date(target));
    },
  };
}
