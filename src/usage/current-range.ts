// The current billing range of a subscription: one set of rules for GET /customers/{id}/current_usage
// and the usage alerts (src/usage/alerts.ts).
import type { SubscriptionDoc } from '../db/models/subscription';
import { FULL_PERIOD, type ProrationRatio } from '../domain/charges';
import { fullPeriodDays, periodContaining } from '../domain/periods';
import { prorateSegment } from '../domain/proration';
import { trialEndFor } from '../subscriptions/state';
import type { PlanView } from './catalog-view';

export interface CurrentRange {
  /** The period (the alert's unit of "once"). */
  period: { from: Date; to: Date };
  /** The billed part of it: from the trial end or the plan change, as current_usage reads it. */
  from: Date;
  proration: ProrationRatio;
}

/** The fields of a subscription that currentRange reads, as a projection. */
export const CURRENT_RANGE_FIELDS = {
  billing_time: 1,
  started_at: 1,
  trial_period_days: 1,
  current_period_started_at: 1,
  current_period_ending_at: 1,
  'workflow_state.segmentFrom': 1,
} as const;

/** A subscription read with CURRENT_RANGE_FIELDS (of its workflow state, only segmentFrom). */
export type RangeSubscription = Pick<
  SubscriptionDoc,
  Exclude<keyof typeof CURRENT_RANGE_FIELDS, 'workflow_state.segmentFrom'> | 'workflow_state'
>;

/**
 * The current period of a subscription and the part of it that current usage prices: the
 * workflow's period (computed from the schedule when the document has none yet); after an upgrade,
 * from the plan change (the workflow's segment start, when it lies inside the period: the part
 * before it was billed with the old plan); during a trial, from the trial end. The segment's days
 * weigh the charges as they will on the invoice (src/domain/proration.ts); a period the trial
 * covers entirely shows its (empty) usage over one day.
 */
export function currentRange(subscription: RangeSubscription, plan: Pick<PlanView, 'interval'>, timezone: string, now: Date): CurrentRange {
  const schedule = { interval: plan.interval, billingTime: subscription.billing_time, anchor: subscription.started_at, timezone };
  const period =
    subscription.current_period_started_at && subscription.current_period_ending_at
      ? { from: subscription.current_period_started_at, to: subscription.current_period_ending_at }
      : periodContaining({ ...schedule, at: now < subscription.started_at ? subscription.started_at : now });
  const raw = subscription.workflow_state?.segmentFrom;
  const at = typeof raw === 'string' ? new Date(raw) : null;
  const segmentFrom = at && !Number.isNaN(at.getTime()) && at > period.from && at < period.to ? at : period.from;
  const trialEndsAt = trialEndFor(subscription.started_at, subscription.trial_period_days);
  const segment = prorateSegment({ schedule, periodFrom: period.from, from: segmentFrom, to: period.to, trialEndsAt, amountCents: 0 });
  return {
    period,
    from: segment?.from ?? period.to,
    proration: segment ? (segment.ratio ?? FULL_PERIOD) : { usedDays: 1, periodDays: fullPeriodDays({ ...schedule, at: period.from }) },
  };
}
