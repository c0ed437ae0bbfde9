/**
 * What an entity workflow shows an operator in the Temporal UI and `temporal workflow metadata`:
 * its current details (what it is waiting for, until when, and why), kept up to date at every
 * wait, and the one-line summaries of its timers and activities. Pure text; nothing here is a
 * command, so wording can change without affecting replay.
 */
import { setCurrentDetails } from '@temporalio/workflow';
import { DateTime } from 'luxon';
import type { DueStep, SubscriptionState } from '../src/subscriptions/state';
import { currentClock } from './wait';

/** `2026-12-01 00:00 Europe/Paris` (the instant in the entity's time zone); UTC when none. */
export function localTime(instant: number | string, timezone = 'UTC'): string {
  const ms = typeof instant === 'number' ? instant : Date.parse(instant);
  const local = DateTime.fromMillis(ms, { zone: timezone });
  return `${local.isValid ? local.toFormat('yyyy-MM-dd HH:mm') : new Date(ms).toISOString()} ${timezone}`;
}

/** `2026-11-01 – 2026-11-30` for the half-open period [from, to) in the time zone. */
export function periodLabel(from: string, to: string, timezone = 'UTC'): string {
  const day = (ms: number) => DateTime.fromMillis(ms, { zone: timezone }).toFormat('yyyy-MM-dd');
  return `${day(Date.parse(from))} – ${day(Date.parse(to) - 1)}`;
}

/** Sets the workflow's current details: its state, then what comes next (with a test clock's note). */
export function showDetails(state: string, next: string): void {
  const clock = currentClock();
  const onClock = clock ? ` (on test clock ${clock.id}, now ${clock.now}: timers follow the clock's advances)` : '';
  setCurrentDetails(`${state}\nNext: ${next}${onClock}`);
}

/** What a subscription does at its next timer, as a sentence, and as an activity summary. */
export function subscriptionStep(state: SubscriptionState, due: DueStep): { next: string; summary: string } {
  const tz = state.timezone;
  switch (due.kind) {
    case 'activate':
      return {
        next: `waiting for the start ${localTime(due.for, tz)} to activate the subscription`,
        summary: `activate at ${localTime(due.for, tz)}`,
      };
    case 'trial_end':
      return {
        next: `waiting for the trial end ${localTime(due.for, tz)}`,
        summary: `end the trial at ${localTime(due.for, tz)}`,
      };
    case 'boundary': {
      const period = state.currentPeriod ? periodLabel(state.currentPeriod.from, state.currentPeriod.to, tz) : 'the current period';
      const offset = due.at !== Date.parse(due.for) ? ` (runs at ${new Date(due.at).toISOString()}, its billing-day offset)` : '';
      const ending = state.endingAt !== null && Date.parse(state.endingAt) <= Date.parse(due.for) ? ', then end the subscription' : '';
      const downgrade = state.pendingPlan ? `, then switch to plan ${state.pendingPlan.code ?? state.pendingPlan.id}` : '';
      return {
        next: `waiting for the period end ${localTime(due.for, tz)} to invoice ${period}${downgrade}${ending}${offset}`,
        summary: `invoice ${period}${downgrade}${ending}`,
      };
    }
    case 'progressive':
      return {
        next: `waiting until ${localTime(due.for, tz)} to check the usage against the plan's thresholds`,
        summary: `check usage thresholds at ${localTime(due.for, tz)}`,
      };
  }
}

/** The subscription's state line: `active on plan premium (monthly, EUR), period 2026-11-01 – 2026-11-30`. */
export function subscriptionState(state: SubscriptionState): string {
  const plan = `plan ${state.plan.code ?? state.plan.id} (${state.plan.interval}, ${state.plan.currency})`;
  const period = state.currentPeriod ? `, period ${periodLabel(state.currentPeriod.from, state.currentPeriod.to, state.timezone)}` : '';
  const trial = state.trialEndsAt && !state.trialEnded ? `, in trial until ${localTime(state.trialEndsAt, state.timezone)}` : '';
  const ending = state.endingAt ? `, canceled: ends ${localTime(state.endingAt, state.timezone)}` : '';
  return `Subscription ${state.status} on ${plan}${period}${trial}${ending}.`;
}
