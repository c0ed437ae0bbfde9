import { condition, setHandler, sleep } from '@temporalio/workflow';
import type { ClockRef } from '../src/test-clocks/time';
import { advanceTestClockUpdate } from './test-clock.messages';

/**
 * Every wait and every "now" of every workflow goes through here (workflows.md), so that a
 * customer's workflows follow its test clock instead of real time without the workflows knowing.
 *
 * Real customers: Temporal timers and workflow time.
 * Test-clock customers (`useClock`): time is the clock's, delivered by the `advanceTestClock`
 * update; a wait is a condition on that time. The update answers once this workflow has caught
 * up: it is parked in a wait whose instant lies after the new time (or waits for a command, or
 * has finished), so the clock's advance can tell when every workflow has processed what fell due.
 */

interface Clock {
  id: string;
  now: number;
}

let clock: Clock | null = null;
/** Where the workflow sits: in a wait until `until` (null: for a command only). Null while working. */
let parked: { until: number | null } | null = null;
let finished = false;

function caughtUp(): boolean {
  if (finished) return true;
  if (!clock || !parked) return false;
  return parked.until === null || parked.until > clock.now;
}

/** Makes this workflow follow a test clock (call before the first await). No clock: real time. */
export function useClock(ref: ClockRef | null | undefined): void {
  if (!ref) return;
  clock = { id: ref.id, now: Date.parse(ref.now) };
  setHandler(
    advanceTestClockUpdate,
    async (frozenTime) => {
      const c = clock!;
      c.now = Math.max(c.now, Date.parse(frozenTime));
      const due = !caughtUp();
      await condition(caughtUp);
      const until = finished ? null : (parked?.until ?? null);
      return {
        clockId: c.id,
        caughtUpAt: new Date(c.now).toISOString(),
        due,
        nextWakeAt: until === null ? null : new Date(until).toISOString(),
      };
    },
    {
      validator: (frozenTime) => {
        if (Number.isNaN(Date.parse(frozenTime))) throw new Error(`not an instant: ${frozenTime}`);
      },
    },
  );
}

/** The clock this workflow follows, at its current time (carried through continue-as-new). */
export function currentClock(): ClockRef | null {
  return clock ? { id: clock.id, now: new Date(clock.now).toISOString() } : null;
}

/** Now, in ms: the test clock's time, else workflow time. */
export function now(): number {
  return clock ? clock.now : Date.now();
}

export function nowIso(): string {
  return new Date(now()).toISOString();
}

/** Called once the workflow is about to end: a clock advance no longer waits for it. */
export function markFinished(): void {
  finished = true;
}

async function parkedUntil(until: number | null, predicate: () => boolean): Promise<void> {
  parked = { until };
  try {
    await condition(predicate);
  } finally {
    parked = null;
  }
}

/**
 * Waits until `instantMs` (a Temporal timer, or the test clock reaching it). With `interrupt`,
 * the wait also ends as soon as the predicate holds (a command arrived): resolves 'elapsed' when
 * the instant was reached, 'interrupted' otherwise. `summary`: the timer's one-line summary.
 */
export async function waitUntil(instantMs: number, interrupt?: () => boolean, summary?: string): Promise<'elapsed' | 'interrupted'> {
  if (interrupt?.()) return 'interrupted';
  if (clock) {
    const c = clock;
    if (c.now >= instantMs) return 'elapsed';
    await parkedUntil(instantMs, () => c.now >= instantMs || (interrupt?.() ?? false));
    return interrupt?.() ? 'interrupted' : 'elapsed';
  }
  const delay = instantMs - Date.now();
  if (delay <= 0) return 'elapsed';
  // The timer's summary names it in the UI's event history (not part of what replay compares).
  const options = summary ? { summary } : undefined;
  if (!interrupt) {
    await sleep(delay, options);
    return 'elapsed';
  }
  return (await (options ? condition(interrupt, delay, options) : condition(interrupt, delay))) ? 'interrupted' : 'elapsed';
}

/** Waits for a command with no deadline (still through this module, for the same reason). */
export async function waitFor(predicate: () => boolean): Promise<void> {
  if (clock) return parkedUntil(null, predicate);
  await condition(predicate);
}

/**
 * Waits for another workflow to answer as part of the work under way (a payment request waiting
 * for its attempt's checkout): unlike waitFor, the workflow is not caught up meanwhile, so a
 * clock's advance waits for the answer as it would for an activity.
 */
export async function waitForAnswer(predicate: () => boolean): Promise<void> {
  await condition(predicate);
}
