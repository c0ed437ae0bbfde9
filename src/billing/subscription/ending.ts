// How a subscription ends (billing-rules.md, Subscription lifecycle: Cancel, Terminate,
// on_termination_action): a cancellation keeps it active until its period ends (the boundary
// step ends it); a termination ends it now, bills what was not billed through the termination day
// and, with generate_credit_note, credits the unused part of an in-advance base fee.
import { terminationBilledUntil } from '../../domain/proration';
import type { OnTerminationAction, SubscriptionState } from '../../subscriptions/state';
import { iso } from '../../resources/format';
import { billKey, creditUnused, emit, issue, save, segmentLines, type StepContext, type SubscriptionStepResult } from './shared';

/** POST .../cancel: active until the current period ends, then `canceled` (closePeriod). */
export async function cancel(
  ctx: StepContext,
  state: SubscriptionState,
  at: Date,
  action: OnTerminationAction | undefined,
): Promise<SubscriptionStepResult> {
  const next: SubscriptionState = {
    ...state,
    endingAt: state.currentPeriod!.to,
    canceledAt: iso(at),
    onTerminationAction: action ?? state.onTerminationAction,
    pendingPlan: null,
    downgradedAt: null,
    version: state.version + 1,
  };
  const subscription = await save(ctx, next);
  await emit(ctx, next, subscription, 'subscription.canceled', 'canceled', at);
  return { state: next, subscription, invoiceIds: [], creditNoteIds: [] };
}

/**
 * DELETE: terminated now. Unless `skip`, what was not billed up to now is invoiced (in arrear
 * the base fee through the termination day); `generate_credit_note` also credits, in advance,
 * the days after the termination day.
 */
export async function terminate(
  ctx: StepContext,
  state: SubscriptionState,
  at: Date,
  action: OnTerminationAction | undefined,
): Promise<SubscriptionStepResult> {
  const chosen = action ?? state.onTerminationAction;
  const invoiceIds: string[] = [];
  const creditNoteIds: string[] = [];
  if (state.status === 'active' && state.currentPeriod) {
    const period = state.currentPeriod;
    const segmentFrom = new Date(state.segmentFrom ?? period.from);
    const billedUntil = terminationBilledUntil(at, new Date(period.to), state.timezone);
    // Ended inside its trial: nothing was ever billable, not even the day the trial would have ended.
    const inTrial = state.trialEndsAt !== null && Date.parse(state.trialEndsAt) > at.getTime();
    if (chosen !== 'skip' && !inTrial) {
      const lines = await segmentLines(ctx, state, state.plan, period, segmentFrom, billedUntil, at, { baseFee: !state.payInAdvance });
      if (lines && lines.fees.length > 0) {
        const invoice = await issue(
          ctx,
          state,
          lines,
          { from: segmentFrom, to: billedUntil },
          at,
          billKey(state, state.plan, segmentFrom, 'subscription'),
        );
        invoiceIds.push(invoice._id);
      }
    }
    if (chosen === 'generate_credit_note' && state.payInAdvance && state.advanceFee) {
      const credited = await creditUnused(
        ctx,
        state,
        billedUntil,
        at,
        'order_cancellation',
        billKey(state, state.plan, billedUntil, 'termination_credit'),
      );
      if (credited) creditNoteIds.push(credited);
    }
  }
  const next: SubscriptionState = {
    ...state,
    status: 'terminated',
    terminatedAt: iso(at),
    endingAt: iso(at),
    onTerminationAction: chosen,
    pendingPlan: null,
    downgradedAt: null,
    progressive: { enabled: false, nextCheckAt: null },
    version: state.version + 1,
  };
  const subscription = await save(ctx, next);
  await emit(ctx, next, subscription, 'subscription.terminated', 'terminated', at);
  return { state: next, subscription, invoiceIds, creditNoteIds };
}
