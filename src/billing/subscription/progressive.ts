// Progressive billing (lago-reference.md 7.1): usage thresholds of the plan crossed during a
// segment are billed at once, less what earlier progressive invoices of the segment billed.
import type Decimal from 'decimal.js';
import { fromDecimal128 } from '../../db/decimal';
import { ZERO, sum } from '../../domain/money';
import type { SubscriptionState } from '../../subscriptions/state';
import { createInvoice } from '../invoices';
import { iso } from '../../resources/format';
import {
  emit,
  progressiveCredits,
  progressiveFor,
  progressiveInvoices,
  save,
  segmentLines,
  type StepContext,
  type SubscriptionStepResult,
} from './shared';

/**
 * Progressive billing: when the segment's usage so far crosses a usage threshold of the plan
 * beyond what earlier progressive invoices of the segment billed, a `progressive_billing`
 * invoice bills the usage so far, less those invoices, finalized at once (no grace period).
 * Fixed thresholds pass once per segment; a recurring one every `amount` above the largest
 * fixed one (lago-reference.md 7.1, applied to the period's usage as the issue says).
 */
export async function checkThresholds(ctx: StepContext, state: SubscriptionState, at: Date): Promise<SubscriptionStepResult> {
  const period = state.currentPeriod!;
  const segmentFrom = new Date(state.segmentFrom ?? period.from);
  const next: SubscriptionState = {
    ...state,
    // Read now (a threshold removed a moment ago is not checked again); marked: the segment has
    // had a check, so its invoices look for progressive invoices to credit.
    progressive: {
      ...(await progressiveFor(ctx, state.plan, at, state.progressiveCheckMs, { fresh: true })),
      checkedFrom: iso(segmentFrom),
    },
    version: state.version + 1,
  };
  const invoiceIds: string[] = [];
  const lines = await segmentLines(ctx, state, state.plan, period, segmentFrom, new Date(period.to), at, {
    baseFee: false,
    commitment: false,
    now: at,
  });
  if (lines) {
    const usage = sum(lines.fees.map((f) => f.amount_cents));
    const earlierInvoices = await progressiveInvoices(ctx, state, segmentFrom);
    const billed = earlierInvoices.length > 0 ? fromDecimal128(earlierInvoices[earlierInvoices.length - 1]!.fees_amount_cents)! : ZERO;
    const thresholds = await ctx.db.models.UsageThreshold.find({ plan_id: state.plan.id }).lean();
    if (
      thresholdCrossed(
        thresholds.map((t) => ({ amount: fromDecimal128(t.amount_cents)!, recurring: t.recurring })),
        billed,
        usage,
      )
    ) {
      const invoice = await createInvoice(ctx.db, ctx.deps, {
        organizationId: state.organizationId,
        customerId: state.customerId,
        subscriptionId: state.subscriptionId,
        invoiceType: 'progressive_billing',
        currency: state.plan.currency,
        idempotencyKey: `${state.subscriptionId}/${iso(segmentFrom)}/progressive_billing/${iso(at)}`,
        fees: lines.fees,
        planId: state.plan.id,
        periodStartedAt: segmentFrom,
        periodEndedAt: new Date(period.to),
        assembly: { progressive_billing_credits: progressiveCredits(earlierInvoices) },
        gracePeriodDays: 0,
        finalizeAtCreation: true,
        at,
      });
      invoiceIds.push(invoice._id);
    }
  }
  const subscription = await save(ctx, next);
  if (invoiceIds.length > 0) {
    await emit(ctx, next, subscription, 'subscription.usage_threshold_reached', `usage_threshold_reached/${iso(at)}`, at);
  }
  return { state: next, subscription, invoiceIds, creditNoteIds: [] };
}

/**
 * Whether usage moved past a threshold since `billed` (what progressive invoices of the segment
 * already billed): a fixed threshold in (billed, usage], or another multiple of the recurring
 * amount above the largest fixed threshold.
 */
export function thresholdCrossed(thresholds: { amount: Decimal; recurring: boolean }[], billed: Decimal, usage: Decimal): boolean {
  if (usage.lessThanOrEqualTo(billed)) return false;
  const fixed = thresholds.filter((t) => !t.recurring).map((t) => t.amount);
  if (fixed.some((a) => a.greaterThan(billed) && a.lessThanOrEqualTo(usage))) return true;
  const recurring = thresholds.find((t) => t.recurring)?.amount;
  if (!recurring || recurring.lessThanOrEqualTo(0)) return false;
  const base = fixed.reduce((max, a) => (a.greaterThan(max) ? a : max), ZERO);
  if (usage.lessThan(base.plus(recurring))) return false;
  const steps = (value: Decimal) => (value.lessThan(base) ? 0 : value.minus(base).dividedToIntegerBy(recurring).toNumber());
  return steps(usage) > steps(billed);
}
