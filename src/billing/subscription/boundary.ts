// A period boundary (billing-rules.md, Subscription lifecycle: Pay in advance, Downgrade,
// Cancel): the ended segment is billed, a cancellation ends the subscription there, a scheduled
// downgrade switches, and the next period opens (in advance, with its base fee).
import { periodFrom, type OnTerminationAction, type SubscriptionState } from '../../subscriptions/state';
import { iso } from '../../resources/format';
import {
  baseFeeLine,
  billAdvance,
  billKey,
  feeIdOf,
  issue,
  progressiveFor,
  save,
  emit,
  segmentLines,
  type StepContext,
  type SubscriptionStepResult,
} from './shared';
import { billEventsInAdvance, carriedInAdvanceLines, unbilledInAdvanceEvents } from './in-advance';

/** Whether the subscription ends at this boundary (a cancellation that reached its date). */
function endsAt(state: SubscriptionState, boundary: Date): boolean {
  return state.endingAt !== null && Date.parse(state.endingAt) <= boundary.getTime();
}

/** What a boundary does with the period it closes: the termination action when it ends the subscription. */
export function closingAction(state: SubscriptionState, boundary: Date): OnTerminationAction {
  return endsAt(state, boundary) ? state.onTerminationAction : 'generate_invoice';
}

/**
 * A period boundary: the ended segment is billed (in arrear its base fee, always its usage); a
 * cancellation reaching its `ending_at` ends here; otherwise a scheduled downgrade switches, the
 * next period opens and, in advance, its base fee is billed.
 */
export async function closePeriod(ctx: StepContext, state: SubscriptionState, boundary: Date): Promise<SubscriptionStepResult> {
  const ended = state.currentPeriod!;
  const final = endsAt(state, boundary);
  const action = closingAction(state, boundary);
  const segmentFrom = new Date(state.segmentFrom ?? ended.from);
  const invoiceIds: string[] = [];
  // Events of in-advance charges whose signal never reached the workflow are billed now, before the
  // period closes: those of the plan's own segment (events before a plan change were the old plan's).
  const missed = await unbilledInAdvanceEvents(ctx, state, segmentFrom, boundary);
  invoiceIds.push(...(await billEventsInAdvance(ctx, state, missed, boundary)).invoiceIds);

  const segment =
    action === 'skip'
      ? null
      : await segmentLines(ctx, state, state.plan, ended, segmentFrom, boundary, boundary, { baseFee: !state.payInAdvance });

  if (final) {
    if (segment) {
      const invoice = await issue(
        ctx,
        state,
        segment,
        { from: segmentFrom, to: boundary },
        boundary,
        billKey(state, state.plan, segmentFrom, 'subscription'),
      );
      invoiceIds.push(invoice._id);
    }
    const next: SubscriptionState = {
      ...state,
      status: 'canceled',
      pendingPlan: null,
      downgradedAt: null,
      progressive: { enabled: false, nextCheckAt: null },
      version: state.version + 1,
    };
    return { state: next, subscription: await save(ctx, next), invoiceIds, creditNoteIds: [] };
  }

  const switched = state.pendingPlan;
  const plan = switched ?? state.plan;
  let next: SubscriptionState = {
    ...state,
    plan,
    pendingPlan: null,
    downgradedAt: null,
    segmentFrom: iso(boundary),
    advanceFee: null,
    progressive: await progressiveFor(ctx, plan, boundary, state.progressiveCheckMs),
    version: state.version + 1,
  };
  const period = periodFrom(next, boundary);
  next = { ...next, currentPeriod: period };

  // In advance the next period's base fee is billed now, unless a trial still covers its start
  // (the trial end bills it then).
  const trialOver = state.trialEndsAt === null || Date.parse(state.trialEndsAt) < boundary.getTime();
  const advance = state.payInAdvance && trialOver ? await baseFeeLine(next, period, boundary) : null;
  if (segment && advance && !switched) segment.fees.unshift(advance);
  // The units recurring in-advance charges carry into the new period are billed now, for it (on
  // the invoice issued at the boundary, else on one of their own).
  const span = { from: new Date(period.from), to: new Date(period.to) };
  const carried = await carriedInAdvanceLines(ctx, next, span, boundary);
  if (segment && !switched) segment.fees.push(...carried);
  else if (carried.length > 0) {
    const lines = { plan, fees: carried, proration: undefined, commitment: false, span };
    invoiceIds.push((await issue(ctx, next, lines, span, boundary, billKey(state, plan, period.from, 'carried')))._id);
  }
  if (segment) {
    // With the next period's base fee on it, the invoice is labelled with the period that fee
    // pays for; its usage lines keep the segment they measured.
    const span = advance && !switched ? { from: boundary, to: new Date(period.to) } : { from: segmentFrom, to: boundary };
    const invoice = await issue(ctx, state, segment, span, boundary, billKey(state, state.plan, segmentFrom, 'subscription'));
    invoiceIds.push(invoice._id);
    if (advance && !switched) next.advanceFee = { invoiceId: invoice._id, feeId: feeIdOf(invoice._id), planId: plan.id };
  }
  if (advance && (switched || !segment)) {
    const invoice = await billAdvance(ctx, next, period, boundary, boundary, billKey(state, plan, period.from, 'advance'));
    if (invoice) {
      invoiceIds.push(invoice._id);
      next.advanceFee = { invoiceId: invoice._id, feeId: feeIdOf(invoice._id), planId: plan.id };
    }
  }
  const subscription = await save(ctx, next);
  if (switched)
    await emit(
      ctx,
      next,
      subscription,
      'subscription.plan_changed',
      `plan_changed/${iso(boundary)}/${switched.id}/v${state.version}`,
      boundary,
    );
  return { state: next, subscription, invoiceIds, creditNoteIds: [] };
}
