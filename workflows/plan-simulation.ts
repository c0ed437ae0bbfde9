/**
 * planSimulationWorkflow: a plan simulation over several customers' past usage
 * (`plan-simulation/<id>`, POST /v1/plans/{id}/simulate with more than one customer;
 * docs/simulation.md). Each customer is one activity that re-prices its invoiced periods under the
 * plan (src/billing/plan-simulation.ts, simulatePastUsage); a few run at once. Nothing is written:
 * the result is the workflow's own (its return value, and the progress query once done).
 * Timers: none. Signals, updates: none. Query: `planSimulationProgress` (customers done of the total,
 * periods re-priced, the result once done). Ends when every customer is done. The API caps the
 * customers of one simulation, so its history stays short without continue-as-new.
 */
import { proxyActivities, setHandler, upsertSearchAttributes } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { CustomerPlanSimulation, PastPlanSimulation } from '../src/resources/plan-simulation';
import { BillingStatus } from '../src/temporal/search-attributes';
import { showDetails } from './details';
import { planSimulationProgressQuery, type PlanSimulationInput, type PlanSimulationProgress } from './plan-simulation.messages';

const { simulatePlanForCustomer } = proxyActivities<Activities>({
  startToCloseTimeout: '10 minutes',
  // Reads only: a failure is the database's, worth a few retries; then the simulation fails.
  retry: { initialInterval: '1 second', backoffCoefficient: 2, maximumInterval: '1 minute', maximumAttempts: 5 },
});

/** Customers re-priced at once. */
const CONCURRENT_CUSTOMERS = 4;

export async function planSimulationWorkflow(input: PlanSimulationInput): Promise<PastPlanSimulation> {
  const results: CustomerPlanSimulation[] = [];
  const progress: PlanSimulationProgress = { customersTotal: input.customerIds.length, customersDone: 0, periodsDone: 0, result: null };
  setHandler(planSimulationProgressQuery, () => progress);
  const label = `Plan simulation of ${input.plan.code}`;

  for (let start = 0; start < input.customerIds.length; start += CONCURRENT_CUSTOMERS) {
    const batch = input.customerIds.slice(start, start + CONCURRENT_CUSTOMERS);
    showDetails(
      `${label}: ${progress.customersDone} of ${progress.customersTotal} customers done, ${progress.periodsDone} periods re-priced.`,
      `no timer: re-pricing customers ${start + 1} to ${start + batch.length}`,
    );
    await Promise.all(
      batch.map(async (customerId, i) => {
        const simulation = await simulatePlanForCustomer.executeWithOptions({ summary: `re-price customer ${customerId}` }, [
          { organizationId: input.organizationId, planId: input.plan.id, customerId, from: input.from, to: input.to },
        ]);
        results[start + i] = simulation;
        progress.customersDone++;
        progress.periodsDone += simulation.periods.length;
      }),
    );
  }

  progress.result = {
    plan_id: input.plan.id,
    plan_code: input.plan.code,
    currency: input.plan.currency,
    from: input.from,
    to: input.to,
    customers: results,
  };
  upsertSearchAttributes([{ key: BillingStatus, value: 'completed' }]);
  showDetails(
    `${label} completed: ${progress.customersTotal} customers, ${progress.periodsDone} periods re-priced.`,
    'nothing: the result is this workflow’s',
  );
  return progress.result;
}
