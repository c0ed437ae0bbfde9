// Pure and dependency-free: the subscription workflow's bundle imports it.
/** Why a plan change cannot be requested now, or null: the workflow's validator and the preview answer alike. */
export interface PlanChangeRefusal {
  kind: 'InvalidTransition' | 'Validation';
  message: string;
}

export function planChangeRefusal(
  state: { status: string; endingAt: string | null; plan: { id: string; currency: string }; pendingPlan: { id: string } | null },
  target: { id: string; currency: string },
): PlanChangeRefusal | null {
  if (state.status === 'paused') return { kind: 'InvalidTransition', message: 'The subscription is paused: resume it to change its plan' };
  if (state.endingAt !== null) return { kind: 'InvalidTransition', message: 'The subscription is canceled: its plan can no longer change' };
  if (target.currency.toUpperCase() !== state.plan.currency.toUpperCase()) {
    return { kind: 'Validation', message: `the plan is in ${target.currency}, the subscription in ${state.plan.currency}` };
  }
  // The same plan with a downgrade pending removes that downgrade.
  if (target.id === state.plan.id && state.pendingPlan === null) {
    return { kind: 'InvalidTransition', message: 'The subscription is already on this plan and has no pending downgrade' };
  }
  return null;
}
