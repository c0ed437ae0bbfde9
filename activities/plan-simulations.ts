import type { Db } from '../src/db';
import { simulatePastUsage } from '../src/billing/plan-simulation';
import type { SubscriptionBillingDeps } from '../src/billing/subscription/shared';
import type { CustomerPlanSimulation } from '../src/resources/plan-simulation';

/** One customer of a simulation, as the workflow passes it (instants as ISO strings). */
export interface CustomerSimulationInput {
  organizationId: string;
  planId: string;
  customerId: string;
  from: string;
  to: string;
}

/** The planSimulationWorkflow's step: one customer's past periods re-priced (reads only). */
export function createPlanSimulationActivities(db: Db, deps: SubscriptionBillingDeps) {
  return {
    async simulatePlanForCustomer(input: CustomerSimulationInput): Promise<CustomerPlanSimulation> {
      return simulatePastUsage(db, deps, { ...input, from: new Date(input.from), to: new Date(input.to) });
    },
  };
}
