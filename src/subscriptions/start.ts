// Building a subscriptionWorkflow's first state from the subscription document, and starting the
// workflow: used by the API (creation) and by the reconciler (a missing workflow restarted).
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { SubscriptionDoc } from '../db/models/subscription';
import type { TemporalClient } from '../temporal/client';
import type { ClockRef } from '../test-clocks/time';
import { jitterFor, trialEndFor, type PlanSnapshot, type SubscriptionState } from './state';
import { startSubscriptionWorkflow, type SubscriptionLabels } from '../../workflows/subscription.messages';

export interface BillingTiming {
  /** Boundary steps run up to this long after the boundary (deterministic per subscription). */
  jitterWindowMs: number;
  /** How often usage is checked against a plan's usage thresholds. */
  progressiveCheckMs: number;
}

export function planSnapshot(plan: {
  _id: string;
  code?: string;
  amount_cents: unknown;
  interval: PlanSnapshot['interval'];
  currency: string;
}): PlanSnapshot {
  return {
    id: plan._id,
    ...(plan.code ? { code: plan.code } : {}),
    amount_cents: String(plan.amount_cents),
    interval: plan.interval,
    currency: plan.currency,
  };
}

/** What names a subscription's workflow to an operator (its search attributes and summary). */
export function subscriptionLabels(doc: Pick<SubscriptionDoc, 'external_id' | 'external_customer_id'>): SubscriptionLabels {
  return { subscriptionExternalId: doc.external_id, customerExternalId: doc.external_customer_id };
}

/** The state of a subscription whose workflow has not run yet. */
export function initialState(doc: SubscriptionDoc, plan: PlanSnapshot, timezone: string, timing: BillingTiming): SubscriptionState {
  const trialEnd = trialEndFor(doc.started_at, doc.trial_period_days);
  return {
    subscriptionId: doc._id,
    organizationId: doc.organization_id,
    customerId: doc.customer_id,
    status: 'pending',
    plan,
    billingTime: doc.billing_time,
    payInAdvance: doc.pay_in_advance,
    timezone,
    startedAt: doc.started_at.toISOString(),
    trialEndsAt: trialEnd ? trialEnd.toISOString() : null,
    trialEnded: trialEnd === null,
    currentPeriod: null,
    segmentFrom: null,
    advanceFee: null,
    pendingPlan: null,
    downgradedAt: null,
    endingAt: null,
    canceledAt: null,
    terminatedAt: null,
    onTerminationAction: doc.on_termination_action,
    progressive: { enabled: false, nextCheckAt: null, checkedFrom: null },
    announced: false,
    jitterMs: jitterFor(doc._id, timing.jitterWindowMs),
    progressiveCheckMs: timing.progressiveCheckMs,
    version: 0,
  };
}

/** Starts the subscription's workflow; a running one is kept (idempotent). Returns whether it started one. */
/** `clock`: the customer's test clock, when it is on one (its workflows then follow that clock). */
export async function ensureSubscriptionWorkflow(
  temporal: TemporalClient,
  state: SubscriptionState,
  clock: ClockRef | null,
  labels: SubscriptionLabels,
): Promise<boolean> {
  try {
    await startSubscriptionWorkflow(temporal, { state, resumed: state.announced && state.status !== 'pending', clock, labels });
    return true;
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return false;
    throw err;
  }
}
