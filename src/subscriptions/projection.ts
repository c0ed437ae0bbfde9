// The projection a workflow state writes into the subscription document (what the API reads).
import type { SubscriptionState } from './state';

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
    paused_at: state.status === 'paused' ? date(state.pausedAt ?? null) : null,
    trial_ended_at: state.trialEnded && state.trialEndsAt ? new Date(state.trialEndsAt) : null,
    current_period_started_at: date(state.currentPeriod?.from ?? null),
    current_period_ending_at: date(state.currentPeriod?.to ?? null),
    on_termination_action: state.onTerminationAction,
    workflow_state: state as unknown as Record<string, unknown>,
    state_version: state.version,
  };
}
