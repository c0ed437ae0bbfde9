// The state a subscriptionWorkflow owns, and what is due next. Pure and deterministic: imported by
// the workflow (no I/O, no Node built-ins), by the activities that compute each step, and by the
// API and the reconciler that build a workflow's first state from the subscription document.
import { periodContaining, type BillingInterval, type BillingTime } from '../domain/periods';

export type SubscriptionStatus = 'pending' | 'active' | 'paused' | 'canceled' | 'terminated';
export type OnTerminationAction = 'generate_invoice' | 'generate_credit_note' | 'skip';

/** What billing needs of a plan; the plan's charges are read at billing time. */
export interface PlanSnapshot {
  id: string;
  /** The plan's code, for operators (search attribute, details); absent in older states. */
  code?: string;
  /** Minor units, decimal string. */
  amount_cents: string;
  interval: BillingInterval;
  currency: string;
}

export interface PeriodState {
  /** ISO instants, half-open [from, to). */
  from: string;
  to: string;
}

/**
 * The active part of a period before a pause, billed at that period's end (api-contract.md,
 * Subscriptions: at the period end the base fee is prorated to the days it was active).
 */
export interface UnbilledSegment {
  plan: PlanSnapshot;
  period: PeriodState;
  /** ISO instants, half-open [from, to): `to` is the midnight of the pause day. */
  from: string;
  to: string;
}

/** The in-advance base fee that paid for the current period: what a credit note refunds from. */
export interface AdvanceFee {
  invoiceId: string;
  feeId: string;
  planId: string;
}

export interface SubscriptionState {
  subscriptionId: string;
  organizationId: string;
  customerId: string;
  status: SubscriptionStatus;
  plan: PlanSnapshot;
  billingTime: BillingTime;
  payInAdvance: boolean;
  /** The customer's zone, else the organization's, when the subscription was created. */
  timezone: string;
  startedAt: string;
  /** `started_at + trial_period_days` (an instant), or null without a trial. */
  trialEndsAt: string | null;
  /** True once the trial-end step ran (always true without a trial). */
  trialEnded: boolean;
  /** The period being served; null while pending. */
  currentPeriod: PeriodState | null;
  /**
   * Where the current plan's part of the current period starts: the period start, or the day an
   * upgrade took effect. Usage and arrear base fees are billed from here.
   */
  segmentFrom: string | null;
  advanceFee: AdvanceFee | null;
  /** Scheduled downgrade target (`previous_plan_id`), switched to at the next boundary. */
  pendingPlan: PlanSnapshot | null;
  downgradedAt: string | null;
  endingAt: string | null;
  canceledAt: string | null;
  terminatedAt: string | null;
  onTerminationAction: OnTerminationAction;
  /** Progressive billing: whether the plan has usage thresholds, and when usage is next checked. */
  /**
   * `checkedFrom`: the start of the segment in which a threshold check last ran (null: none in
   * this segment; absent: a state from before the mark, treated as checked).
   */
  progressive: { enabled: boolean; nextCheckAt: string | null; checkedFrom?: string | null };
  /** subscription.created was emitted (the first step emits it). */
  announced: boolean;
  /** Billing-day spread: every boundary step runs this long after the boundary (same amounts). */
  jitterMs: number;
  /** Progressive-billing check interval. */
  progressiveCheckMs: number;
  /** When the current pause started (status `paused`); absent in states from before pausing existed. */
  pausedAt?: string | null;
  /** The active segments of the current period before its pauses, not billed yet (billed at its end). */
  unbilledSegments?: UnbilledSegment[];
  /** Increases with every step; the projection is only ever overwritten by a newer state. */
  version: number;
}

export type DueStep =
  | { kind: 'activate'; for: string; at: number }
  | { kind: 'trial_end'; for: string; at: number }
  | { kind: 'boundary'; for: string; at: number }
  | { kind: 'progressive'; for: string; at: number };

export function isFinal(status: SubscriptionStatus): boolean {
  return status === 'canceled' || status === 'terminated';
}

export function scheduleOf(state: Pick<SubscriptionState, 'billingTime' | 'startedAt' | 'timezone'>, interval: BillingInterval) {
  return { interval, billingTime: state.billingTime, anchor: new Date(state.startedAt), timezone: state.timezone };
}

/**
 * The period that opens at `from` (`started_at` or a boundary) on the current plan's interval. An
 * upgrade to another interval keeps the current period's end; the next one ends at the new
 * interval's next boundary.
 */
export function periodFrom(state: SubscriptionState, from: Date): PeriodState {
  const to = periodContaining({ ...scheduleOf(state, state.plan.interval), at: from }).to;
  return { from: from.toISOString(), to: to.toISOString() };
}

export function trialEndFor(startedAt: Date, trialPeriodDays: number): Date | null {
  return trialPeriodDays > 0 ? new Date(startedAt.getTime() + trialPeriodDays * 86_400_000) : null;
}

/**
 * A deterministic offset in [0, windowMs) per subscription, so that subscriptions sharing a
 * calendar boundary do not all wake at the same instant (FNV-1a of the id).
 */
export function jitterFor(subscriptionId: string, windowMs: number): number {
  if (windowMs <= 0) return 0;
  let hash = 0x811c9dc5;
  for (let i = 0; i < subscriptionId.length; i++) {
    hash ^= subscriptionId.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash % windowMs;
}

/**
 * The next step and when it is due, in the order the rules need when several are due at once:
 * activation, then a period boundary before a trial end at the same instant (the boundary bills
 * the ended period, the trial end the new one), then progressive checks. Null when nothing is due
 * ever again (final, or waiting for commands only).
 */
export function nextDue(state: SubscriptionState): DueStep | null {
  if (isFinal(state.status)) return null;
  if (state.status === 'paused') {
    // Paused: only the end of the period the pause began in (its active part is billed then); then nothing until resumed.
    if (!state.currentPeriod) return null;
    return { kind: 'boundary', for: state.currentPeriod.to, at: Date.parse(state.currentPeriod.to) + state.jitterMs };
  }
  if (state.status === 'pending') {
    return { kind: 'activate', for: state.startedAt, at: Date.parse(state.startedAt) };
  }
  const candidates: DueStep[] = [];
  if (state.currentPeriod) {
    const to = Date.parse(state.currentPeriod.to);
    candidates.push({ kind: 'boundary', for: state.currentPeriod.to, at: to + state.jitterMs });
  }
  if (!state.trialEnded && state.trialEndsAt) {
    candidates.push({ kind: 'trial_end', for: state.trialEndsAt, at: Date.parse(state.trialEndsAt) });
  }
  if (state.progressive.enabled && state.progressive.nextCheckAt && state.trialEnded) {
    candidates.push({ kind: 'progressive', for: state.progressive.nextCheckAt, at: Date.parse(state.progressive.nextCheckAt) });
  }
  const rank = { activate: 0, boundary: 1, trial_end: 2, progressive: 3 } as const;
  candidates.sort((a, b) => Date.parse(a.for) - Date.parse(b.for) || rank[a.kind] - rank[b.kind]);
  return candidates[0] ?? null;
}

/** A step due at or before `now` (its acting instant), if any: what a command must process first. */
export function dueBy(state: SubscriptionState, now: number): DueStep | null {
  const due = nextDue(state);
  return due && Date.parse(due.for) <= now ? due : null;
}

/** One step of a subscription's life, past or scheduled (GET /v1/subscriptions/{id}/lifecycle). */
export interface LifecycleStep {
  step:
    | 'activation'
    | 'trial_end'
    | 'boundary'
    | 'upgrade'
    | 'downgrade_scheduled'
    | 'downgrade_removed'
    | 'downgrade'
    | 'cancellation'
    | 'pause'
    | 'resume'
    | 'end'
    | 'termination';
  /** ISO instant. */
  at: string;
  /** The plan the subscription is on after the step (the downgrade target for downgrade steps). */
  plan_id: string;
}

/** The past steps a workflow keeps (the oldest are dropped first). */
export const MAX_PAST_STEPS = 100;

/** What the subscription will do next, in order, as far as its state knows (no progressive checks). */
export function scheduledSteps(state: SubscriptionState): LifecycleStep[] {
  if (isFinal(state.status)) return [];
  const steps: LifecycleStep[] = [];
  const plan = state.plan.id;
  if (state.status === 'pending') steps.push({ step: 'activation', at: state.startedAt, plan_id: plan });
  if (!state.trialEnded && state.trialEndsAt && state.status !== 'paused') {
    steps.push({ step: 'trial_end', at: state.trialEndsAt, plan_id: plan });
  }
  const to = state.currentPeriod?.to ?? null;
  if (to) {
    steps.push({ step: 'boundary', at: to, plan_id: plan });
    if (state.pendingPlan) steps.push({ step: 'downgrade', at: to, plan_id: state.pendingPlan.id });
  }
  if (state.endingAt) steps.push({ step: 'end', at: state.endingAt, plan_id: plan });
  return steps.sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
}

/**
 * The instant of the next step that invoices: the current period's end (in arrear its base fee
 * and usage, in advance its usage and the next base fee), or, in advance, a trial end that bills
 * the rest of the period. Pending: the first such step; paused: the end of the period the pause
 * began in when its active part is still to bill, else none until resumed. Null once over.
 */
export function nextBillingAt(state: SubscriptionState): string | null {
  if (isFinal(state.status)) return null;
  if (state.status === 'paused') return state.currentPeriod && (state.unbilledSegments ?? []).length > 0 ? state.currentPeriod.to : null;
  const period = state.currentPeriod ?? periodFrom(state, new Date(state.startedAt));
  if (state.payInAdvance) {
    if (state.status === 'pending' && !state.trialEndsAt) return state.startedAt;
    if (!state.trialEnded && state.trialEndsAt && Date.parse(state.trialEndsAt) < Date.parse(period.to)) return state.trialEndsAt;
  }
  return period.to;
}

/** The past steps a state shows by itself (a workflow that recorded none: started before they were recorded). */
export function pastFromState(state: SubscriptionState): LifecycleStep[] {
  const steps: LifecycleStep[] = [];
  if (state.status !== 'pending') steps.push({ step: 'activation', at: state.startedAt, plan_id: state.plan.id });
  if (state.trialEnded && state.trialEndsAt && state.status !== 'pending') {
    steps.push({ step: 'trial_end', at: state.trialEndsAt, plan_id: state.plan.id });
  }
  return steps;
}
