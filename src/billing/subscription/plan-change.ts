// A plan change (billing-rules.md, Subscription lifecycle: Upgrade or downgrade): a downgrade is
// scheduled for the next boundary; an upgrade takes effect on the change day, which belongs to the
// new plan (src/domain/proration.ts): the old segment is billed, in advance its unused base fee is
// credited and the new plan's prorated fee billed.
import { classifyPlanChange } from '../../domain/plan-change';
import { planChangeDay } from '../../domain/proration';
import type { PlanSnapshot, SubscriptionState } from '../../subscriptions/state';
import { iso } from '../../resources/format';
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

/**
 * PUT with a plan: on a pending subscription the plan is replaced; the current plan removes a
 * pending downgrade; a higher or equal yearly amount upgrades at once (the old segment is
 * billed, in advance its unused base fee is credited and the new plan's prorated fee billed); a
 * lower one is scheduled for the next boundary. The workflow's validator refused the rest.
 */
export async function changePlan(
  ctx: StepContext,
  state: SubscriptionState,
  target: PlanSnapshot,
  at: Date,
): Promise<SubscriptionStepResult> {
  const bump = (s: SubscriptionState): SubscriptionState => ({ ...s, version: state.version + 1 });
  if (state.status === 'pending') {
    const next = bump({ ...state, plan: target, pendingPlan: null, downgradedAt: null });
    return { state: next, subscription: await save(ctx, next), invoiceIds: [], creditNoteIds: [] };
  }
  if (target.id === state.plan.id) {
    const next = bump({ ...state, pendingPlan: null, downgradedAt: null });
    return { state: next, subscription: await save(ctx, next), invoiceIds: [], creditNoteIds: [] };
  }
  if (classifyPlanChange(state.plan, target) === 'downgrade') {
    const next = bump({ ...state, pendingPlan: target, downgradedAt: iso(at) });
    return { state: next, subscription: await save(ctx, next), invoiceIds: [], creditNoteIds: [] };
  }

  const period = state.currentPeriod!;
  const segmentFrom = new Date(state.segmentFrom ?? period.from);
  // The change day belongs to the new plan; the old plan's part closes at its midnight.
  const changeDay = planChangeDay(at, segmentFrom, state.timezone);
  const invoiceIds: string[] = [];
  const creditNoteIds: string[] = [];

  if (changeDay.getTime() > segmentFrom.getTime()) {
    const old = await segmentLines(ctx, state, state.plan, period, segmentFrom, changeDay, changeDay, { baseFee: !state.payInAdvance });
    // Outside period boundaries an invoice is only issued when it has something to bill.
    if (old && old.fees.length > 0) {
      const invoice = await issue(
        ctx,
        state,
        old,
        { from: segmentFrom, to: changeDay },
        at,
        billKey(state, state.plan, segmentFrom, 'subscription'),
      );
      invoiceIds.push(invoice._id);
    }
  }
  if (state.payInAdvance && state.advanceFee) {
    const credited = await creditUnused(ctx, state, changeDay, at, 'order_change', billKey(state, state.plan, changeDay, 'upgrade_credit'));
    if (credited) creditNoteIds.push(credited);
  }
  const next: SubscriptionState = bump({
    ...state,
    plan: target,
    pendingPlan: null,
    downgradedAt: null,
    segmentFrom: iso(changeDay),
    advanceFee: null,
    progressive: await progressiveFor(ctx, target, at, state.progressiveCheckMs),
  });
  const inTrial = state.trialEndsAt !== null && Date.parse(state.trialEndsAt) > at.getTime();
  if (state.payInAdvance && !inTrial) {
    const invoice = await billAdvance(ctx, next, period, changeDay, at, billKey(state, target, changeDay, 'advance'));
    if (invoice) {
      invoiceIds.push(invoice._id);
      next.advanceFee = { invoiceId: invoice._id, feeId: feeIdOf(invoice._id), planId: target.id };
    }
  }
  const subscription = await save(ctx, next);
  await emit(ctx, next, subscription, 'subscription.plan_changed', `plan_changed/${iso(at)}/${target.id}/v${state.version}`, at);
  return { state: next, subscription, invoiceIds, creditNoteIds };
}
