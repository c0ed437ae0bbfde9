/**
 * subscriptionWorkflow: one subscription's life (`subscription/<id>`), following the
 * specification's subscription state table and billing-rules.md (Subscription lifecycle).
 *
 * Timers (all through waitUntil; they replace the specification's background tasks):
 *   started_at          pending -> active (activation; in advance the first base fee)
 *   trial end           subscription.trial_ended; in advance the rest of the period is billed
 *                       (process_trial_expirations)
 *   period boundary     + a per-subscription jitter: the ended period's invoice, a scheduled
 *                       downgrade switched, a cancellation ended (generate_periodic_invoices,
 *                       process_pending_downgrades)
 *   threshold check     every progressiveCheckMs while the plan has usage thresholds
 * Updates (validators refuse before anything is written; the API answers 4xx from them):
 *   changePlan, cancel, terminate, pause, resume; ready (answers once the first step ran).
 * Paused (src/billing/subscription/pause.ts): no timer but the end of the period the pause began
 *   in (its active part billed); in-advance usage is dropped (stored, never billed); only resume
 *   and terminate are accepted.
 * Signal: usageInAdvance (events an in-advance charge prices, from the events API): billed
 *   between steps, each on an invoice of its own.
 * Queries: state, lifecycle (past steps, kept in the workflow, and scheduled ones). (All defined in subscription.messages.ts, with the start options.)
 * Ends when terminated, or canceled after its last invoice.
 *
 * Each step is one activity that receives the state and the instant it acts for and returns the
 * next state; the workflow keeps that state (and carries it through continue-as-new).
 */
import {
  allHandlersFinished,
  ApplicationFailure,
  condition,
  continueAsNew,
  patched,
  proxyActivities,
  proxyLocalActivities,
  setHandler,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { SubscriptionStepResult } from '../src/billing/subscription/shared';
import { planChangeRefusal } from '../src/domain/plan-change-refusal';
import type { SubscriptionResource } from '../src/resources/subscription';
import {
  dueBy,
  isFinal,
  MAX_PAST_STEPS,
  nextBillingAt,
  nextDue,
  pastFromState,
  scheduledSteps,
  type DueStep,
  type LifecycleStep,
  type SubscriptionState,
} from '../src/subscriptions/state';
import { BillingPlanCode, BillingStatus } from '../src/temporal/search-attributes';
import { showDetails, subscriptionState, subscriptionStep } from './details';
import {
  cancelUpdate,
  changePlanUpdate,
  pauseUpdate,
  readyUpdate,
  resumeUpdate,
  subscriptionLifecycleQuery,
  subscriptionStateQuery,
  terminateUpdate,
  usageInAdvanceSignal,
  type SubscriptionWorkflowInput,
} from './subscription.messages';
import { currentClock, markFinished, now, nowIso, useClock, waitFor, waitUntil } from './wait';
import { stepLock } from './exclusive';

const acts = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  // The steps heartbeat every 5 s: a dead worker's step is retried elsewhere after 30 s.
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});

/**
 * The timed steps (activation, trial end, boundary, threshold check) as local activities: they run
 * inside the workflow task that the timer woke, so a boundary costs Temporal one workflow task and
 * a marker instead of an activity task's schedule, dispatch, start and completion plus a second
 * workflow task. A worker that dies mid-step stops extending that task: after the workflow task
 * timeout another worker replays and runs the step again (idempotent, like a retried activity).
 */
const timedSteps = proxyLocalActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  // Retried in the worker up to a minute, then through a workflow timer.
  localRetryThreshold: '1 minute',
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute' },
});
/**
 * Executions started before the timed steps were local keep their activities when they replay;
 * those started since say so in their input (localTimedSteps) and record no marker for it. Rollout:
 * every worker runs this code before anything starts a run with the flag, and no worker goes back
 * to code without it (an old worker would record the marker in a flagged run, or run its steps as
 * activities where its history has local ones).
 */
const LOCAL_TIMED_STEPS = 'subscription-timed-steps-as-local-activities';
/** Executions started before the plan code was a search attribute do not upsert it when they replay. */
const PLAN_CODE_SEARCH_ATTRIBUTE = 'subscription-plan-code-search-attribute';

type TimedStep = 'activateSubscription' | 'endSubscriptionTrial' | 'billSubscriptionPeriod' | 'checkUsageThresholds';

function refuse(message: string, type: 'InvalidTransition' | 'Validation' = 'InvalidTransition'): never {
  throw ApplicationFailure.nonRetryable(message, type);
}

export async function subscriptionWorkflow(input: SubscriptionWorkflowInput): Promise<{ status: SubscriptionState['status'] }> {
  useClock(input.clock);
  let state = input.state;
  let resource: SubscriptionResource | null = null;
  let started = input.resumed ?? false;
  const { exclusive, isBusy } = stepLock();
  let changes = 0;
  let steps = 0;
  // The lifecycle query's past steps (no command: recording them changes nothing a replay compares).
  const past: LifecycleStep[] = [...(input.pastSteps ?? pastFromState(state))];
  function record(step: LifecycleStep['step'], at: string, planId = state.plan.id): void {
    past.push({ step, at, plan_id: planId });
    if (past.length > MAX_PAST_STEPS) past.splice(0, past.length - MAX_PAST_STEPS);
  }

  function apply(result: SubscriptionStepResult): SubscriptionResource {
    const statusChanged = result.state.status !== state.status;
    const planCode = result.state.plan.code;
    const planChanged = planCode !== undefined && planCode !== state.plan.code;
    state = result.state;
    resource = result.subscription;
    changes++;
    steps++;
    const attributes = [];
    if (statusChanged) attributes.push({ key: BillingStatus, value: state.status });
    if (planChanged && patched(PLAN_CODE_SEARCH_ATTRIBUTE)) attributes.push({ key: BillingPlanCode, value: planCode });
    if (attributes.length > 0) upsertSearchAttributes(attributes);
    return result.subscription;
  }

  /** A timed step, with its summary in the UI. */
  function timed(name: TimedStep, summary: string, at: string): Promise<SubscriptionStepResult> {
    if (input.localTimedSteps || patched(LOCAL_TIMED_STEPS)) return timedSteps[name].executeWithOptions({ summary }, [state, at]);
    return acts[name].executeWithOptions({ summary }, [state, at]);
  }

  async function run(due: DueStep): Promise<void> {
    const { summary } = subscriptionStep(state, due);
    switch (due.kind) {
      case 'activate':
        apply(await timed('activateSubscription', summary, due.for));
        record('activation', due.for);
        return;
      case 'trial_end':
        apply(await timed('endSubscriptionTrial', summary, due.for));
        record('trial_end', due.for);
        return;
      case 'boundary': {
        const before = state.plan.id;
        apply(await timed('billSubscriptionPeriod', summary, due.for));
        record('boundary', due.for, before);
        if (state.plan.id !== before) record('downgrade', due.for);
        if (state.status === 'canceled') record('end', due.for);
        return;
      }
      case 'progressive':
        apply(await timed('checkUsageThresholds', summary, due.for));
        return;
    }
  }

  /** Runs every step whose instant has passed, in order (a past started_at bills its periods now). */
  async function catchUp(): Promise<void> {
    for (let due = dueBy(state, now()); due; due = dueBy(state, now())) await run(due);
  }

  const refuseIfOver = () => {
    if (isFinal(state.status)) refuse(`The subscription is ${state.status}`);
  };

  setHandler(subscriptionStateQuery, () => state);
  setHandler(subscriptionLifecycleQuery, () => ({
    state,
    past: [...past],
    scheduled: scheduledSteps(state),
    nextBillingAt: nextBillingAt(state),
  }));

  // In-advance usage: billed between steps, in the order it arrived (the activity orders each batch by event time).
  const inAdvance: string[] = [...(input.inAdvanceEventIds ?? [])];
  setHandler(usageInAdvanceSignal, ({ eventIds }) => {
    for (const id of eventIds) if (!inAdvance.includes(id)) inAdvance.push(id);
  });
  async function billInAdvance(): Promise<void> {
    // Paused: the events are stored, never billed.
    if (state.status === 'paused') inAdvance.splice(0, inAdvance.length);
    while (inAdvance.length > 0 && !isFinal(state.status)) {
      const batch = inAdvance.slice(0, 500);
      await acts.billUsageInAdvance.executeWithOptions({ summary: `bill ${batch.length} in-advance event(s)` }, [state, batch, nowIso()]);
      inAdvance.splice(0, batch.length);
    }
  }

  setHandler(readyUpdate, async () => {
    await condition(() => started);
    return resource ?? (await acts.readSubscription(state.subscriptionId));
  });

  setHandler(
    changePlanUpdate,
    (request) =>
      exclusive(async () => {
        await catchUp();
        refuseIfOver();
        const before = { plan: state.plan.id, pending: state.pendingPlan?.id ?? null };
        const at = nowIso();
        const result = apply(
          await acts.changeSubscriptionPlan.executeWithOptions({ summary: `change to plan ${request.plan.code ?? request.plan.id}` }, [
            state,
            request.plan,
            at,
          ]),
        );
        if (state.pendingPlan && state.pendingPlan.id !== before.pending) record('downgrade_scheduled', at, state.pendingPlan.id);
        else if (!state.pendingPlan && before.pending) record('downgrade_removed', at);
        else if (state.plan.id !== before.plan) record('upgrade', at);
        return result;
      }),
    {
      validator: (request) => {
        refuseIfOver();
        const refusal = planChangeRefusal(state, request.plan);
        if (refusal) refuse(refusal.kind === 'Validation' ? `plan_id: ${refusal.message}` : refusal.message, refusal.kind);
      },
    },
  );

  setHandler(
    cancelUpdate,
    (request) =>
      exclusive(async () => {
        await catchUp();
        refuseIfOver();
        if (state.status !== 'active' || state.endingAt !== null)
          refuse(`Only an active subscription can be canceled (this one is ${state.status}${state.endingAt ? ', already canceled' : ''})`);
        const at = nowIso();
        const result = apply(
          await acts.cancelSubscription.executeWithOptions({ summary: 'cancel at the period end' }, [
            state,
            at,
            request.onTerminationAction,
          ]),
        );
        record('cancellation', at);
        return result;
      }),
    {
      // A pending subscription whose start has passed is activated by the handler first.
      validator: (_request) => {
        refuseIfOver();
        if (state.status === 'paused') refuse('Only an active subscription can be canceled (this one is paused)');
        if (state.status === 'pending' && Date.parse(state.startedAt) > now())
          refuse('Only an active subscription can be canceled (this one is pending)');
        if (state.endingAt !== null) refuse('The subscription is already canceled');
      },
    },
  );

  setHandler(
    terminateUpdate,
    (request) =>
      exclusive(async () => {
        await catchUp();
        refuseIfOver();
        const at = nowIso();
        const result = apply(
          await acts.terminateSubscription.executeWithOptions({ summary: 'terminate now' }, [state, at, request.onTerminationAction]),
        );
        record('termination', at);
        return result;
      }),
    { validator: (_request) => refuseIfOver() },
  );

  /** Pause: only an active subscription past its trial, not canceled (a pending one whose start passed is activated first). */
  const refuseUnlessPausable = () => {
    refuseIfOver();
    if (state.status === 'paused') refuse('The subscription is already paused');
    if (state.status === 'pending' && Date.parse(state.startedAt) > now())
      refuse('Only an active subscription can be paused (this one is pending)');
    if (state.endingAt !== null) refuse('The subscription is canceled: it can no longer be paused');
    if (state.trialEndsAt !== null && !state.trialEnded && Date.parse(state.trialEndsAt) > now())
      refuse('The subscription is in its trial: it can be paused once the trial is over');
  };
  setHandler(
    pauseUpdate,
    () =>
      exclusive(async () => {
        await catchUp();
        refuseUnlessPausable();
        if (state.status !== 'active') refuse(`Only an active subscription can be paused (this one is ${state.status})`);
        const at = nowIso();
        const result = apply(await acts.pauseSubscription.executeWithOptions({ summary: 'pause' }, [state, at]));
        record('pause', at);
        return result;
      }),
    { validator: refuseUnlessPausable },
  );

  setHandler(
    resumeUpdate,
    () =>
      exclusive(async () => {
        await catchUp();
        refuseIfOver();
        if (state.status !== 'paused') refuse(`Only a paused subscription can be resumed (this one is ${state.status})`);
        const at = nowIso();
        const result = apply(await acts.resumeSubscription.executeWithOptions({ summary: 'resume' }, [state, at]));
        record('resume', at);
        return result;
      }),
    {
      validator: () => {
        refuseIfOver();
        if (state.status !== 'paused') refuse(`Only a paused subscription can be resumed (this one is ${state.status})`);
      },
    },
  );

  // The first step: a subscription starting later is only announced now.
  if (!state.announced && Date.parse(state.startedAt) > now()) {
    await exclusive(async () => {
      apply(await acts.announceSubscription(state, nowIso()));
    });
  }

  while (!isFinal(state.status)) {
    await exclusive(catchUp);
    started = true;
    if (isFinal(state.status)) break;
    if (inAdvance.length > 0) await exclusive(billInAdvance);

    if (workflowInfo().continueAsNewSuggested || (input.maxStepsPerRun !== undefined && steps >= input.maxStepsPerRun)) {
      await condition(() => allHandlersFinished() && !isBusy());
      await continueAsNew<typeof subscriptionWorkflow>({
        ...input,
        state,
        resumed: true,
        localTimedSteps: true,
        clock: currentClock(),
        pastSteps: past,
        ...(inAdvance.length > 0 ? { inAdvanceEventIds: inAdvance } : {}),
      });
    }

    const seen = changes;
    const due = nextDue(state);
    if (due) {
      const { next, summary } = subscriptionStep(state, due);
      showDetails(subscriptionState(state), next);
      await waitUntil(due.at, () => changes !== seen || inAdvance.length > 0, summary);
    } else {
      const waiting =
        state.status === 'paused'
          ? 'paused: waiting for resume or termination'
          : 'waiting for a command (plan change, cancellation, termination)';
      showDetails(subscriptionState(state), `no timer: ${waiting}`);
      await waitFor(() => changes !== seen || inAdvance.length > 0);
    }
  }
  started = true;
  showDetails(subscriptionState(state), 'nothing: the subscription is over');
  markFinished();
  await condition(allHandlersFinished);
  return { status: state.status };
}
