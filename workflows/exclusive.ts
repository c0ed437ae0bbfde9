import { condition } from '@temporalio/workflow';

/**
 * One step at a time inside a workflow: a timer's step and a command's step (update handlers run
 * concurrently with the main loop) never interleave their activities and writes.
 */
export function stepLock() {
  let busy = false;
  return {
    async exclusive<T>(step: () => Promise<T>): Promise<T> {
      // A loop, not one wait: several waiters released in the same activation must not all enter.
      while (busy) await condition(() => !busy);
      busy = true;
      try {
        return await step();
      } finally {
        busy = false;
      }
    },
    isBusy: () => busy,
  };
}
