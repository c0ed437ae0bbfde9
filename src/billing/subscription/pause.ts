// Pause and resume (api-contract.md, Subscriptions: status `paused`, no period billed while
// paused, the base fee prorated to the days it was active; issue 19, item 3).
//
// Days: the pause day is the first paused day and the resume day the first active one again (the
// same local midnights as a plan change, src/domain/proration.ts). Pausing closes the current
// segment at the pause day's midnight without invoicing it: that active part is billed at the end
// of its period (in arrear its prorated base fee, always its usage), next to the segment that opens
// on the resume day, so every period's base fee covers exactly its active days and the events of
// the paused days are stored but never billed. In advance the unused base fee from the pause day
// is credited at once, and resuming bills the rest of the period from the resume day.
import { planChangeDay } from '../../domain/proration';
import { closePeriod, closingAction } from './boundary';
import { iso } from '../../resources/format';
import {
  periodFrom,
  type OnTerminationAction,
  type PeriodState,
  type SubscriptionState,
  type UnbilledSegment,
} from '../../subscriptions/state';
import {
  billAdvance,
  billKey,
  creditUnused,
  emit,
  feeIdOf,
  issue,
  progressiveFor,
  save,
  segmentLines,
  type StepContext,
  type SubscriptionStepResult,
} from './shared';

const OFF: SubscriptionState['progressive'] = { enabled: false, nextCheckAt: null, checkedFrom: null };

/** POST .../pause: `paused` from now; the active part of the period is kept for its end. */
export async function pause(ctx: StepContext, state: SubscriptionState, at: Date): Promise<SubscriptionStepResult> {
  const period = state.currentPeriod!;
  const segmentFrom = new Date(state.segmentFrom ?? period.from);
  const day = planChangeDay(at, segmentFrom, state.timezone);
  const creditNoteIds: string[] = [];
  if (state.payInAdvance && state.advanceFee) {
    const key = `${billKey(state, state.plan, day, 'upgrade_credit')}/pause`;
    const credited = await creditUnused(ctx, state, day, at, 'order_change', key);
    if (credited) creditNoteIds.push(credited);
  }
  const unbilled = [...(state.unbilledSegments ?? [])];
  if (day.getTime() > segmentFrom.getTime()) unbilled.push({ plan: state.plan, period, from: iso(segmentFrom), to: iso(day) });
  const next: SubscriptionState = {
    ...state,
    status: 'paused',
    pausedAt: iso(at),
    segmentFrom: null,
    advanceFee: null,
    unbilledSegments: unbilled,
    progressive: OFF,
    version: state.version + 1,
  };
  const subscription = await save(ctx, next);
  await emit(ctx, next, subscription, 'subscription.paused', `paused/${iso(at)}/v${state.version}`, at);
  return { state: next, subscription, invoiceIds: [], creditNoteIds };
}

/** POST .../resume: active again from the resume day; in advance the rest of the period is billed now. */
export async function resume(ctx: StepContext, state: SubscriptionState, at: Date): Promise<SubscriptionStepResult> {
  const current = state.currentPeriod;
  // Never before the current period's start (nor, through the pause day's midnight, before the pause).
  const day = planChangeDay(at, new Date(current?.from ?? 0), state.timezone);
  const period: PeriodState = current && day.getTime() < Date.parse(current.to) ? current : periodFrom(state, day);
  const next: SubscriptionState = {
    ...state,
    status: 'active',
    pausedAt: null,
    currentPeriod: period,
    segmentFrom: iso(day),
    advanceFee: null,
    progressive: await progressiveFor(ctx, state.plan, at, state.progressiveCheckMs),
    version: state.version + 1,
  };
  const invoiceIds: string[] = [];
  if (state.payInAdvance) {
    const invoice = await billAdvance(ctx, next, period, day, at, `${billKey(state, state.plan, day, 'advance')}/resume`);
    if (invoice) {
      invoiceIds.push(invoice._id);
      next.advanceFee = { invoiceId: invoice._id, feeId: feeIdOf(invoice._id), planId: state.plan.id };
    }
  }
  const subscription = await save(ctx, next);
  await emit(ctx, next, subscription, 'subscription.resumed', `resumed/${iso(at)}/v${state.version}`, at);
  return { state: next, subscription, invoiceIds, creditNoteIds: [] };
}

/**
 * Bills the active segments kept by pauses (one invoice each: in arrear its prorated base fee,
 * always its usage up to the pause day), at `at` (the period end, or a termination). Returns the
 * invoices and the state without them.
 */
export async function billUnbilledSegments(
  ctx: StepContext,
  state: SubscriptionState,
  at: Date,
): Promise<{ state: SubscriptionState; invoiceIds: string[] }> {
  const segments: UnbilledSegment[] = state.unbilledSegments ?? [];
  const invoiceIds: string[] = [];
  for (const segment of segments) {
    const from = new Date(segment.from);
    const to = new Date(segment.to);
    // Its own segment and period: progressive invoices and proration are those of that part. The
    // progressive invoices of the part are always looked up: a pause turns the checks off and
    // forgets where they ran, so the state no longer tells whether the part had any.
    const view: SubscriptionState = {
      ...state,
      plan: segment.plan,
      currentPeriod: segment.period,
      segmentFrom: segment.from,
      progressive: { ...state.progressive, checkedFrom: segment.from },
    };
    const lines = await segmentLines(ctx, view, segment.plan, segment.period, from, to, to, { baseFee: !state.payInAdvance });
    if (!lines || lines.fees.length === 0) continue;
    const key = `${billKey(state, segment.plan, from, 'subscription')}/paused`;
    invoiceIds.push((await issue(ctx, view, lines, { from, to }, at, key))._id);
  }
  return { state: segments.length > 0 ? { ...state, unbilledSegments: [] } : state, invoiceIds };
}

/**
 * The end of the period a pause began in, reached while paused: its active part is billed, a
 * scheduled downgrade switches, and no period opens until the subscription is resumed.
 */
export async function closePausedPeriod(ctx: StepContext, state: SubscriptionState, boundary: Date): Promise<SubscriptionStepResult> {
  const billed = await billUnbilledSegments(ctx, state, boundary);
  const switched = state.pendingPlan;
  const next: SubscriptionState = {
    ...billed.state,
    plan: switched ?? state.plan,
    pendingPlan: null,
    downgradedAt: null,
    currentPeriod: null,
    segmentFrom: null,
    advanceFee: null,
    version: state.version + 1,
  };
  const subscription = await save(ctx, next);
  if (switched) {
    const step = `plan_changed/${iso(boundary)}/${switched.id}/v${state.version}`;
    await emit(ctx, next, subscription, 'subscription.plan_changed', step, boundary);
  }
  return { state: next, subscription, invoiceIds: billed.invoiceIds, creditNoteIds: [] };
}

/**
 * A step after which the period ends (a boundary, a termination): first the active parts kept by
 * pauses are billed, unless the step ends the subscription with `skip` (no final invoice: none for
 * the period's earlier parts either, as closePeriod and terminate bill none for its last).
 */
export async function withUnbilledSegments(
  ctx: StepContext,
  state: SubscriptionState,
  at: Date,
  action: OnTerminationAction,
  step: (state: SubscriptionState) => Promise<SubscriptionStepResult>,
): Promise<SubscriptionStepResult> {
  if ((state.unbilledSegments ?? []).length === 0) return step(state);
  if (action === 'skip') return step({ ...state, unbilledSegments: [] });
  const billed = await billUnbilledSegments(ctx, state, at);
  const result = await step(billed.state);
  return { ...result, invoiceIds: [...billed.invoiceIds, ...result.invoiceIds] };
}

/**
 * The current period's end (the boundary step, billSubscriptionPeriod): paused, the end of the
 * period the pause began in (closePausedPeriod); otherwise the active parts kept by pauses, then
 * the period's own close (closePeriod). Previews run it dry (src/billing/preview.ts).
 */
export async function billPeriodEnd(ctx: StepContext, state: SubscriptionState, boundary: Date): Promise<SubscriptionStepResult> {
  if (state.status === 'paused') return closePausedPeriod(ctx, state, boundary);
  return withUnbilledSegments(ctx, state, boundary, closingAction(state, boundary), (s) => closePeriod(ctx, s, boundary));
}
