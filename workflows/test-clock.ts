/**
 * testClockAdvanceWorkflow: one advance of a test clock (`test-clock/<id>/advance/<target>`).
 *
 * The clock's frozen_time is already the target. The time is delivered instant by instant, in
 * order, as real time would pass: each round tells every running workflow of the clock's customers
 * an instant and waits until each has caught up; each answers what it waits for next. The next
 * instant is the earliest of those (or the target). Rounds at one instant repeat until one finds
 * nothing due and exactly the workflows the previous one did (a step may start new workflows, or
 * signal others), so everything that falls due at an instant is done before the next one: two
 * invoices whose grace periods end in one advance are finalized in the order of their instants.
 * Then the clock is ready. No timers, no signals; it ends when the clock is ready. Its start
 * options and the advanceTestClock update are in test-clock.messages.ts.
 */
import { patched, proxyActivities } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { localTime, showDetails } from './details';
import { testClockLabel, type TestClockAdvanceInput } from './test-clock.messages';

const acts = proxyActivities<Activities>({
  startToCloseTimeout: '30 minutes',
  heartbeatTimeout: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '30 seconds' },
});

export async function testClockAdvanceWorkflow(
  input: TestClockAdvanceInput,
): Promise<{ rounds: number; workflows: number; instants?: number }> {
  if (!patched('test-clock-instants-in-order')) return deliverTargetAtOnce(input);
  const target = Date.parse(input.target);
  let at = input.from ?? input.target;
  let previous: string | null = null;
  let rounds = 0;
  let instants = 1;
  let confirmed: string[] = [];
  const label = testClockLabel(input);
  for (;;) {
    showDetails(
      `${label} advancing to ${localTime(input.target)}: delivering ${localTime(at)} (instant ${instants}, round ${rounds + 1}).`,
      `no timer: waiting for the workflows of the clock's customers to catch up with ${localTime(at)}, then the next instant that falls due, up to the target`,
    );
    const round = await acts.advanceTestClockStep.executeWithOptions({ summary: `deliver ${localTime(at)} (round ${rounds + 1})` }, [
      input.clockId,
      at,
    ]);
    confirmed = round.confirmed;
    rounds++;
    const key = confirmed.join(',');
    const settled = !round.due && key === previous;
    previous = key;
    if (!settled) continue;
    if (Date.parse(at) >= target) break;
    at = round.nextWakeAt !== null && Date.parse(round.nextWakeAt) < target ? round.nextWakeAt : input.target;
    instants++;
  }
  await ready(input);
  showDetails(
    `${label} ready at ${localTime(input.target)}: ${instants} instant(s), ${rounds} round(s), ${confirmed.length} workflow(s) caught up.`,
    'nothing: the advance is done',
  );
  return { rounds, workflows: confirmed.length, instants };
}

/** Before instants were delivered in order: the target to everyone at once (executions started then). */
async function deliverTargetAtOnce(input: TestClockAdvanceInput): Promise<{ rounds: number; workflows: number }> {
  let previous = '';
  let rounds = 0;
  let confirmed: string[] = [];
  const label = testClockLabel(input);
  for (;;) {
    showDetails(
      `${label} advancing to ${localTime(input.target)} (round ${rounds + 1}).`,
      "no timer: waiting for the workflows of the clock's customers to catch up with the target",
    );
    confirmed = await acts.advanceTestClockRound.executeWithOptions({ summary: `deliver the target (round ${rounds + 1})` }, [
      input.clockId,
      input.target,
    ]);
    rounds++;
    const key = confirmed.join(',');
    if (key === previous) break;
    previous = key;
  }
  await ready(input);
  showDetails(
    `${label} ready at ${localTime(input.target)}: ${rounds} round(s), ${confirmed.length} workflow(s).`,
    'nothing: the advance is done',
  );
  return { rounds, workflows: confirmed.length };
}

function ready(input: TestClockAdvanceInput): Promise<void> {
  return acts.markTestClockReady.executeWithOptions({ summary: `mark the clock ready at ${localTime(input.target)}` }, [
    input.clockId,
    input.target,
  ]);
}
