// The subscription resource as the API returns it (and as subscription.* events and the
// subscription workflow's updates carry it).
import { z } from 'zod';
import type { OnTerminationAction, SubscriptionDoc, SubscriptionStatus } from '../db/models/subscription';
import type { LifecycleStep } from '../subscriptions/state';
import { iso, nullableTimestamp, timestamp } from './format';

export const SUBSCRIPTION_STATUSES = [
  'pending',
  'active',
  'paused',
  'canceled',
  'terminated',
] as const satisfies readonly SubscriptionStatus[];
export const BILLING_TIMES = ['calendar', 'anniversary'] as const satisfies readonly SubscriptionDoc['billing_time'][];
export const ON_TERMINATION_ACTIONS = [
  'generate_invoice',
  'generate_credit_note',
  'skip',
] as const satisfies readonly OnTerminationAction[];

export const subscriptionResource = z
  .object({
    id: z.string(),
    organization_id: z.string(),
    external_id: z.string(),
    customer_id: z.string(),
    external_customer_id: z.string(),
    plan_id: z.string(),
    name: z.string().nullable(),
    status: z.enum(SUBSCRIPTION_STATUSES),
    billing_time: z.enum(BILLING_TIMES),
    pay_in_advance: z.boolean(),
    trial_period_days: z.number().int(),
    in_trial: z.boolean(),
    trial_ended_at: nullableTimestamp,
    previous_plan_id: z.string().nullable().describe('the pending downgrade target'),
    downgraded_at: nullableTimestamp,
    started_at: timestamp,
    ending_at: nullableTimestamp,
    canceled_at: nullableTimestamp,
    terminated_at: nullableTimestamp,
    paused_at: nullableTimestamp.describe('when the current pause started (status paused)'),
    current_period_started_at: nullableTimestamp,
    current_period_ending_at: nullableTimestamp,
    on_termination_action: z.enum(ON_TERMINATION_ACTIONS),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'Subscription' });

export type SubscriptionResource = z.output<typeof subscriptionResource>;

/** Its workflow state is not shown (a read may leave it out). */
export function toSubscriptionResource(doc: Omit<SubscriptionDoc, 'workflow_state'>): SubscriptionResource {
  return {
    id: doc._id,
    organization_id: doc.organization_id,
    external_id: doc.external_id,
    customer_id: doc.customer_id,
    external_customer_id: doc.external_customer_id,
    plan_id: doc.plan_id,
    name: doc.name ?? null,
    status: doc.status,
    billing_time: doc.billing_time,
    pay_in_advance: doc.pay_in_advance,
    trial_period_days: doc.trial_period_days,
    in_trial: doc.status === 'active' && doc.trial_period_days > 0 && !doc.trial_ended_at,
    trial_ended_at: iso(doc.trial_ended_at),
    previous_plan_id: doc.previous_plan_id ?? null,
    downgraded_at: iso(doc.downgraded_at),
    started_at: iso(doc.started_at),
    ending_at: iso(doc.ending_at),
    canceled_at: iso(doc.canceled_at),
    terminated_at: iso(doc.terminated_at),
    paused_at: iso(doc.paused_at ?? null),
    current_period_started_at: iso(doc.current_period_started_at),
    current_period_ending_at: iso(doc.current_period_ending_at),
    on_termination_action: doc.on_termination_action,
    created_at: iso(doc.created_at),
    updated_at: iso(doc.updated_at),
  };
}

export const LIFECYCLE_STEPS = [
  'activation',
  'trial_end',
  'boundary',
  'upgrade',
  'downgrade_scheduled',
  'downgrade_removed',
  'downgrade',
  'cancellation',
  'pause',
  'resume',
  'end',
  'termination',
] as const satisfies readonly LifecycleStep['step'][];

export const lifecycleStepResource = z
  .object({
    step: z.enum(LIFECYCLE_STEPS),
    at: timestamp,
    plan_id: z.string().describe('the plan after the step (for downgrade steps: the target)'),
  })
  .meta({ id: 'SubscriptionLifecycleStep' });

export const subscriptionLifecycleResource = z
  .object({
    subscription_id: z.string(),
    status: z.enum(SUBSCRIPTION_STATUSES),
    past: z.array(lifecycleStepResource).describe('oldest first; the workflow keeps the latest 100'),
    scheduled: z.array(lifecycleStepResource).describe('in order, as the current state knows them'),
    next_billing_at: nullableTimestamp,
  })
  .meta({ id: 'SubscriptionLifecycle' });

export const nextBillingDateResource = z
  .object({
    subscription_id: z.string(),
    status: z.enum(SUBSCRIPTION_STATUSES),
    next_billing_at: nullableTimestamp.describe('the instant of the next step that invoices; null: none scheduled'),
    next_billing_date: z.string().nullable().describe("its date (YYYY-MM-DD) in the subscription's time zone"),
    timezone: z.string(),
  })
  .meta({ id: 'SubscriptionNextBillingDate' });

export const bulkSubscriptionResult = z
  .object({
    id: z.string(),
    outcome: z.enum(['paused', 'resumed', 'failed']),
    subscription: subscriptionResource.nullable(),
    error: z.object({ status: z.number().int(), code: z.string(), message: z.string() }).nullable(),
  })
  .meta({ id: 'BulkSubscriptionResult' });
