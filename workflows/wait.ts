import { condition, sleep } from '@temporalio/workflow';

/**
 * Every wait of every workflow goes through here (workflows.md), so that a customer attached to a
 * test clock can later be driven by the clock instead of Temporal timers without rewriting the
 * workflows. Today: a Temporal timer until `instantMs` (workflow time).
 *
 * With `interrupt`, the wait also ends as soon as the predicate holds (a command arrived):
 * resolves 'elapsed' when the instant was reached, 'interrupted' otherwise.
 */
export async function waitUntil(instantMs: number, interrupt?: () => boolean): Promise<'elapsed' | 'interrupted'> {
  const delay = instantMs - Date.now();
  if (!interrupt) {
    if (delay > 0) await sleep(delay);
    return 'elapsed';
  }
  if (interrupt()) return 'interrupted';
  if (delay <= 0) return 'elapsed';
  return (await condition(interrupt, delay)) ? 'interrupted' : 'elapsed';
}

/** Waits for a command with no deadline (still through this module, for the same reason). */
export async function waitFor(predicate: () => boolean): Promise<void> {
  await condition(predicate);
}
