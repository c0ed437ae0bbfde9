// Activation and trial (billing-rules.md, Subscription lifecycle: Activation, Trial): a future
// start is announced, `started_at` activates the subscription and opens its first period (in
// advance its base fee is billed, unless a trial covers it), and the trial's end bills the rest of
// that period in advance.
import { periodFrom, type SubscriptionState } from '../../subscriptions/state';
import { iso } from '../../resources/format';
import { billAdvance, billKey, emit, feeIdOf, progressiveFor, save, type StepContext, type SubscriptionStepResult } from './shared';

/** A future start: only `subscription.created` now; activation comes at `started_at`. */
export async function announce(ctx: StepContext, state: SubscriptionState, at: Date): Promise<SubscriptionStepResult> {
  const next = { ...state, announced: true, version: state.version + 1 };
  const subscription = await save(ctx, next);
  await emit(ctx, next, subscription, 'subscription.created', 'created', at);
  return { state: next, subscription, invoiceIds: [], creditNoteIds: [] };
}

/** `started_at` reached: active, the first period opens, in advance its base fee is billed. */
export async function activate(ctx: StepContext, state: SubscriptionState, at: Date): Promise<SubscriptionStepResult> {
  const startedAt = new Date(state.startedAt);
  const period = periodFrom(state, startedAt);
  const next: SubscriptionState = {
    ...state,
    status: 'active',
    announced: true,
    currentPeriod: period,
    segmentFrom: period.from,
    trialEnded: state.trialEndsAt === null,
    progressive: await progressiveFor(ctx, state.plan, startedAt, state.progressiveCheckMs),
    version: state.version + 1,
  };
  const invoiceIds: string[] = [];
  if (next.payInAdvance && next.trialEndsAt === null) {
    const invoice = await billAdvance(ctx, next, period, startedAt, at, billKey(state, next.plan, period.from, 'advance'));
    if (invoice) {
      invoiceIds.push(invoice._id);
      next.advanceFee = { invoiceId: invoice._id, feeId: feeIdOf(invoice._id), planId: next.plan.id };
    }
  }
  const subscription = await save(ctx, next);
  if (!state.announced) await emit(ctx, next, subscription, 'subscription.created', 'created', at);
  await emit(ctx, next, subscription, 'subscription.started', 'started', at);
  return { state: next, subscription, invoiceIds, creditNoteIds: [] };
}

/** The trial is over: in advance, the rest of the period is billed now (the trial end day counts). */
export async function endTrial(ctx: StepContext, state: SubscriptionState, at: Date): Promise<SubscriptionStepResult> {
  const next: SubscriptionState = {
    ...state,
    trialEnded: true,
    progressive: state.progressive.enabled
      ? { ...state.progressive, nextCheckAt: iso(new Date(at.getTime() + state.progressiveCheckMs)) }
      : state.progressive,
    version: state.version + 1,
  };
  const invoiceIds: string[] = [];
  if (next.payInAdvance && next.currentPeriod && at.getTime() < Date.parse(next.currentPeriod.to)) {
    const invoice = await billAdvance(ctx, next, next.currentPeriod, at, at, billKey(state, next.plan, at, 'advance'));
    if (invoice) {
      invoiceIds.push(invoice._id);
      next.advanceFee = { invoiceId: invoice._id, feeId: feeIdOf(invoice._id), planId: next.plan.id };
    }
  }
  const subscription = await save(ctx, next);
  await emit(ctx, next, subscription, 'subscription.trial_ended', 'trial_ended', at);
  return { state: next, subscription, invoiceIds, creditNoteIds: [] };
}
