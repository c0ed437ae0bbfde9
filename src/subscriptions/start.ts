// Building a subscriptionWorkflow's first state from the subscription document, and starting the
// workflow: used by the API (creation) and by the reconciler (a missing workflow restarted).
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Models } from '../db';
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

/** The timing configured for subscriptions off test clocks (src/config.ts; its defaults where a value is absent). */
export function configuredTiming(config: {
  BILLING_JITTER_WINDOW_SECONDS?: number;
  PROGRESSIVE_BILLING_CHECK_MINUTES?: number;
}): BillingTiming {
  return {
    jitterWindowMs: (config.BILLING_JITTER_WINDOW_SECONDS ?? 120) * 1000,
    progressiveCheckMs: (config.PROGRESSIVE_BILLING_CHECK_MINUTES ?? 60) * 60_000,
  };
}

/**
 * A customer's subscriptions' timing. On a test clock they step exactly at their instants: no
 * billing-day jitter (a boundary's invoice exists once the clock passed it), and progressive checks
 * once a day of clock time at most (an hourly check would make a year's advance 8,760 steps).
 */
export function timingFor(timing: BillingTiming, customer: { test_clock_id?: string | null }): BillingTiming {
  return customer.test_clock_id ? { jitterWindowMs: 0, progressiveCheckMs: Math.max(timing.progressiveCheckMs, 86_400_000) } : timing;
}

/** The zone a customer's subscriptions bill in: the customer's, else the organization's (billing-rules.md, Billing periods). */
export async function billingTimezone(
  models: Pick<Models, 'Organization'>,
  organizationId: string,
  customerTimezone: string | null | undefined,
): Promise<string> {
  if (customerTimezone) return customerTimezone;
  const org = await models.Organization.findById(organizationId, { timezone: 1 }).lean();
  return org?.timezone ?? 'UTC';
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
