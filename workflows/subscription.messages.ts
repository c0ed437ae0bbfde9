/**
 * What the outside world says to a subscriptionWorkflow (`subscription/<id>`): how it is started,
 * its updates and its query. The workflow binds them; the API, the reconciler and the tests use
 * them, so nothing reaches it by a string name.
 *
 * The names inside define*() and the workflow type are recorded in every history: running
 * executions and test/workflows/histories depend on them, so they never change.
 *
 * Imported by workflow code: only @temporalio/workflow, the pure id and search-attribute helpers,
 * and types.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { SubscriptionResource } from '../src/resources/subscription';
import type { LifecycleStep, OnTerminationAction, PlanSnapshot, SubscriptionState } from '../src/subscriptions/state';
import type { TemporalClient } from '../src/temporal/client';
import { entitySearchAttributes } from '../src/temporal/search-attributes';
import { workflowIds } from '../src/temporal/workflow-ids';
import type { ClockRef } from '../src/test-clocks/time';
import type * as workflows from './index';

/** The workflow type (the function's name in workflows/index.ts, which the compiler checks). */
export const subscriptionWorkflowType = 'subscriptionWorkflow' satisfies keyof typeof workflows;
type SubscriptionWorkflow = (typeof workflows)[typeof subscriptionWorkflowType];

export interface SubscriptionWorkflowInput {
  state: SubscriptionState;
  /** Set by continue-as-new: the first step already ran in an earlier run. */
  resumed?: boolean;
  /** Continue as new after this many steps even if the server does not suggest it (tests). */
  maxStepsPerRun?: number;
  /** The customer's test clock, if it is on one (carried through continue-as-new at its current time). */
  clock?: ClockRef | null;
  /** Events of in-advance charges waiting to be billed (carried through continue-as-new). */
  inAdvanceEventIds?: string[];
  /** The past steps the lifecycle query answers (carried through continue-as-new). */
  pastSteps?: LifecycleStep[];
  /** The external ids an operator searches by (absent in executions started before them). */
  labels?: SubscriptionLabels;
  /**
   * Set by every start since the timed steps are local activities, and by continue-as-new: the run
   * never ran one as an activity, so its timed steps skip their patch check (whose marker comes with
   * an upsert of the TemporalChangeVersion search attribute, a visibility write at each run's first
   * timed step). A plan change still records the plan-code patch's marker.
   * Absent: an execution started before, where patched() decides as it did.
   */
  localTimedSteps?: true;
}

export interface SubscriptionLabels {
  subscriptionExternalId: string;
  customerExternalId: string;
}

export interface PlanChangeRequest {
  plan: PlanSnapshot;
}

export interface EndRequest {
  onTerminationAction?: OnTerminationAction;
}

export const changePlanUpdate = defineUpdate<SubscriptionResource, [PlanChangeRequest]>('changePlan');
export const cancelUpdate = defineUpdate<SubscriptionResource, [EndRequest]>('cancel');
export const terminateUpdate = defineUpdate<SubscriptionResource, [EndRequest]>('terminate');
/** Answers once the workflow's first step ran (the API's answer to a creation). */
export const readyUpdate = defineUpdate<SubscriptionResource>('ready');
export const subscriptionStateQuery = defineQuery<SubscriptionState>('state');
/** Pauses an active subscription (no period billed while paused); refused in any other status. */
export const pauseUpdate = defineUpdate<SubscriptionResource>('pause');
/** Resumes a paused subscription from the resume day; refused unless paused. */
export const resumeUpdate = defineUpdate<SubscriptionResource>('resume');

/** The subscription's past steps (as the workflow recorded them, the latest MAX_PAST_STEPS) and its scheduled ones. */
export interface SubscriptionLifecycle {
  state: SubscriptionState;
  past: LifecycleStep[];
  scheduled: LifecycleStep[];
  nextBillingAt: string | null;
}
export const subscriptionLifecycleQuery = defineQuery<SubscriptionLifecycle>('lifecycle');
/** Stored events that an in-advance charge of the plan prices (sent by the events API): billed at once. */
export const usageInAdvanceSignal = defineSignal<[{ eventIds: string[] }]>('usageInAdvance');

/**
 * Starts a subscription's workflow. FAIL: a running one is kept and the start throws
 * WorkflowExecutionAlreadyStartedError, so the caller can tell whether it started one.
 */
export function startSubscriptionWorkflow(temporal: TemporalClient, input: SubscriptionWorkflowInput) {
  const { state } = input;
  return temporal.client.workflow.start<SubscriptionWorkflow>(subscriptionWorkflowType, {
    workflowId: workflowIds.subscription(state.subscriptionId),
    taskQueue: temporal.taskQueue,
    args: [{ ...input, localTimedSteps: true }],
    workflowIdConflictPolicy: 'FAIL',
    typedSearchAttributes: entitySearchAttributes({
      organizationId: state.organizationId,
      customerId: state.customerId,
      entityType: 'subscription',
      status: state.status,
      planCode: state.plan.code,
      ...input.labels,
    }),
    staticSummary: `Subscription ${input.labels?.subscriptionExternalId ?? state.subscriptionId} of customer ${input.labels?.customerExternalId ?? state.customerId}`,
    staticDetails: [
      `Plan ${state.plan.code ?? state.plan.id} (${state.plan.interval}, ${state.plan.currency}), billed ${state.billingTime}${state.payInAdvance ? ', base fee in advance' : ''}.`,
      `Started ${state.startedAt}, time zone ${state.timezone}.`,
      `Ids: subscription ${state.subscriptionId}, customer ${state.customerId}, organization ${state.organizationId}.`,
    ].join('\n'),
  });
}
