import { heartbeat } from '@temporalio/activity';
import {
  advanceClockTo,
  clockWorkflowIds,
  deliverClockTime,
  markClockReady,
  type ClockRound,
  type TestClockDeps,
} from '../src/test-clocks/advance';

/** The testClockAdvanceWorkflow's steps. */
export function createTestClockActivities(deps: TestClockDeps) {
  const heartbeating = async <T>(work: () => Promise<T>): Promise<T> => {
    const timer = setInterval(() => heartbeat(), 5_000);
    try {
      return await work();
    } finally {
      clearInterval(timer);
    }
  };
  return {
    /** One round at the instant `at`: every running workflow of the clock's customers, told the time and caught up. */
    async advanceTestClockStep(clockId: string, at: string): Promise<ClockRound> {
      return heartbeating(() => advanceClockTo(deps, clockId, at));
    },
    /** One round with the whole target at once (advances started before instants were delivered in order). */
    async advanceTestClockRound(clockId: string, target: string): Promise<string[]> {
      return heartbeating(async () => (await deliverClockTime(deps, await clockWorkflowIds(deps.db, clockId), target)).confirmed);
    },
    async markTestClockReady(clockId: string, target: string): Promise<void> {
      await markClockReady(deps.db, clockId, new Date(target));
    },
  };
}
