import { heartbeat } from '@temporalio/activity';
import type { Db } from '../src/db';
import { SubscriptionBilling, type SubscriptionBillingDeps, type SubscriptionStepResult } from '../src/billing/subscription-billing';
import { toSubscriptionResource, type SubscriptionResource } from '../src/resources/subscription';
import type { OnTerminationAction, PlanSnapshot, SubscriptionState } from '../src/subscriptions/state';

/**
 * Heartbeats while a step runs, so that a worker that died mid-step is noticed within the
 * workflow's heartbeat timeout (seconds) instead of the step's whole start-to-close timeout.
 */
async function alive<T>(step: () => Promise<T>): Promise<T> {
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
  const billing = new SubscriptionBilling(db, deps);
  return {
    async announceSubscription(state: SubscriptionState, at: string): Promise<SubscriptionStepResult> {
      return alive(() => billing.announce(state, new Date(at)));
    },
    async activateSubscription(state: SubscriptionState, at: string): Promise<SubscriptionStepResult> {
      return alive(() => billing.activate(state, new Date(at)));
    },
    async endSubscriptionTrial(state: SubscriptionState, at: string): Promise<SubscriptionStepResult> {
      return alive(() => billing.endTrial(state, new Date(at)));
    },
    async billSubscriptionPeriod(state: SubscriptionState, boundary: string): Promise<SubscriptionStepResult> {
      return alive(() => billing.closePeriod(state, new Date(boundary)));
    },
    async checkUsageThresholds(state: SubscriptionState, at: string): Promise<SubscriptionStepResult> {
      return alive(() => billing.checkThresholds(state, new Date(at)));
    },
    async changeSubscriptionPlan(state: SubscriptionState, plan: PlanSnapshot, at: string): Promise<SubscriptionStepResult> {
      return alive(() => billing.changePlan(state, plan, new Date(at)));
    },
    async cancelSubscription(state: SubscriptionState, at: string, action?: OnTerminationAction): Promise<SubscriptionStepResult> {
      return alive(() => billing.cancel(state, new Date(at), action));
    },
    async terminateSubscription(state: SubscriptionState, at: string, action?: OnTerminationAction): Promise<SubscriptionStepResult> {
      return alive(() => billing.terminate(state, new Date(at), action));
    },
    async readSubscription(subscriptionId: string): Promise<SubscriptionResource> {
      const doc = await db.models.Subscription.findById(subscriptionId).lean();
      if (!doc) throw new Error(`subscription ${subscriptionId} not found`);
      return toSubscriptionResource(doc);
    },
  };
}
