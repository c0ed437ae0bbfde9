import { Context, heartbeat } from '@temporalio/activity';
import type { Db } from '../src/db';
import { activate, announce, endTrial } from '../src/billing/subscription/activation';
import { cancel, terminate } from '../src/billing/subscription/ending';
import { changePlan } from '../src/billing/subscription/plan-change';
import { billEventsInAdvance, type InAdvanceResult } from '../src/billing/subscription/in-advance';
import { checkThresholds } from '../src/billing/subscription/progressive';
import { billPeriodEnd, pause, resume, withUnbilledSegments } from '../src/billing/subscription/pause';
import { subscriptionBillingContext, type SubscriptionBillingDeps, type SubscriptionStepResult } from '../src/billing/subscription/shared';
import { toSubscriptionResource, type SubscriptionResource } from '../src/resources/subscription';
import type { OnTerminationAction, PlanSnapshot, SubscriptionState } from '../src/subscriptions/state';

/**
 * Heartbeats while a step runs, so that a worker that died mid-step is noticed within the
 * workflow's heartbeat timeout (seconds) instead of the step's whole start-to-close timeout.
 */
async function alive<T>(step: () => Promise<T>): Promise<T> {
  // A local activity cannot heartbeat: the worker extends its workflow task while it runs.
  if (Context.current().info.isLocal) return step();
  const timer = setInterval(() => heartbeat(), 5_000);
  try {
    return await step();
  } finally {
    clearInterval(timer);
  }
}

/**
 * The subscriptionWorkflow's steps, one activity each so the Temporal UI names what happened.
 * Each receives the workflow's state and the instant it acts for (a boundary, the trial end, the
 * moment a command arrived), never the clock, so a retry computes the same amounts.
 */
export function createSubscriptionActivities(db: Db, deps: SubscriptionBillingDeps) {
  const billing = subscriptionBillingContext(db, deps);
  return {
    async announceSubscription(state: SubscriptionState, at: string): Promise<SubscriptionStepResult> {
      return alive(() => announce(billing, state, new Date(at)));
    },
    async activateSubscription(state: SubscriptionState, at: string): Promise<SubscriptionStepResult> {
      return alive(() => activate(billing, state, new Date(at)));
    },
    async endSubscriptionTrial(state: SubscriptionState, at: string): Promise<SubscriptionStepResult> {
      return alive(() => endTrial(billing, state, new Date(at)));
    },
    async billSubscriptionPeriod(state: SubscriptionState, boundary: string): Promise<SubscriptionStepResult> {
      return alive(() => billPeriodEnd(billing, state, new Date(boundary)));
    },
    async checkUsageThresholds(state: SubscriptionState, at: string): Promise<SubscriptionStepResult> {
      return alive(() => checkThresholds(billing, state, new Date(at)));
    },
    async changeSubscriptionPlan(state: SubscriptionState, plan: PlanSnapshot, at: string): Promise<SubscriptionStepResult> {
      return alive(() => changePlan(billing, state, plan, new Date(at)));
    },
    async cancelSubscription(state: SubscriptionState, at: string, action?: OnTerminationAction): Promise<SubscriptionStepResult> {
      return alive(() => cancel(billing, state, new Date(at), action));
    },
    async terminateSubscription(state: SubscriptionState, at: string, action?: OnTerminationAction): Promise<SubscriptionStepResult> {
      return alive(() =>
        withUnbilledSegments(billing, state, new Date(at), action ?? state.onTerminationAction, (s) =>
          terminate(billing, s, new Date(at), action),
        ),
      );
    },
    async pauseSubscription(state: SubscriptionState, at: string): Promise<SubscriptionStepResult> {
      return alive(() => pause(billing, state, new Date(at)));
    },
    async resumeSubscription(state: SubscriptionState, at: string): Promise<SubscriptionStepResult> {
      return alive(() => resume(billing, state, new Date(at)));
    },
    async billUsageInAdvance(state: SubscriptionState, eventIds: string[], at: string): Promise<InAdvanceResult> {
      return alive(() => billEventsInAdvance(billing, state, eventIds, new Date(at)));
    },
    async readSubscription(subscriptionId: string): Promise<SubscriptionResource> {
      const doc = await db.models.Subscription.findById(subscriptionId).lean();
      if (!doc) throw new Error(`subscription ${subscriptionId} not found`);
      return toSubscriptionResource(doc);
    },
  };
}
