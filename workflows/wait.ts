import { sleep } from '@temporalio/workflow';

/**
 * Every wait of every workflow goes through here (workflows.md), so that a customer attached to a
 * test clock can later be driven by the clock instead of Temporal timers without rewriting the
 * workflows. Today: a Temporal timer until `instantMs` (workflow time).
 */
export async function waitUntil(instantMs: number): Promise<void> {
  const delay = instantMs - Date.now();
  if (delay > 0) await sleep(delay);
}
