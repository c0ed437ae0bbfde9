// The subscription as the API and lifecycle events show it, and the projection a workflow state
// writes into the subscription document.
import type { SubscriptionDoc } from '../db/models/subscription';
import type { SubscriptionState } from './state';

export interface SubscriptionResource {
  id: string;
  organization_id: string;
  external_id: string;
  customer_id: string;
  external_customer_id: string;
  plan_id: string;
  name: string | null;
  status: SubscriptionDoc['status'];
  billing_time: SubscriptionDoc['billing_time'];
  pay_in_advance: boolean;
  trial_period_days: number;
  in_trial: boolean;
  trial_ended_at: string | null;
  previous_plan_id: string | null;
  downgraded_at: string | null;
  started_at: string;
  ending_at: string | null;
  canceled_at: string | null;
  terminated_at: string | null;
  current_period_started_at: string | null;
  current_period_ending_at: string | null;
  on_termination_action: SubscriptionDoc['on_termination_action'];
  created_at: string;
  updated_at: string;
}

const iso = (d: Date | null | undefined) => (d ? d.toISOString() : null);

export function toSubscriptionResource(doc: SubscriptionDoc): SubscriptionResource {
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
    started_at: doc.started_at.toISOString(),
    ending_at: iso(doc.ending_at),
    canceled_at: iso(doc.canceled_at),
    terminated_at: iso(doc.terminated_at),
    current_period_started_at: iso(doc.current_period_started_at),
    current_period_ending_at: iso(doc.current_period_ending_at),
    on_termination_action: doc.on_termination_action,
    created_at: doc.created_at.toISOString(),
    updated_at: doc.updated_at.toISOString(),
  };
}

const date = (value: string | null) => (value ? new Date(value) : null);

/** The document fields a workflow state decides. */
export function projectionOf(state: SubscriptionState) {
  return {
    status: state.status,
    plan_id: state.plan.id,
    previous_plan_id: state.pendingPlan?.id ?? null,
    downgraded_at: date(state.downgradedAt),
    ending_at: date(state.endingAt),
    canceled_at: date(state.canceledAt),
    terminated_at: date(state.terminatedAt),
    trial_ended_at: state.trialEnded && state.trialEndsAt ? new Date(state.trialEndsAt) : null,
    current_period_started_at: date(state.currentPeriod?.from ?? null),
    current_period_ending_at: date(state.currentPeriod?.to ?? null),
    on_termination_action: state.onTerminationAction,
    workflow_state: state as unknown as Record<string, unknown>,
    state_version: state.version,
  };
}
