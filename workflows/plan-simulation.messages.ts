/**
 * A plan simulation's messages: how a planSimulationWorkflow (`plan-simulation/<id>`) is started, and
 * its progress query. The API (src/api/routes/plan-simulations.ts) and the workflow import them, so
 * nothing is reached by a string name.
 *
 * The names inside define*() and the workflow type are recorded in every history: running
 * executions and test/workflows/histories depend on them, so they never change.
 *
 * Imported by workflow code: only @temporalio/workflow, the pure id and search-attribute helpers,
 * and types.
 */
import { defineQuery } from '@temporalio/workflow';
import type { PastPlanSimulation } from '../src/resources/plan-simulation';
import type { TemporalClient } from '../src/temporal/client';
import { entitySearchAttributes } from '../src/temporal/search-attributes';
import { workflowIds } from '../src/temporal/workflow-ids';
import type * as workflows from './index';

/** The workflow type (the function's name in workflows/index.ts, which the compiler checks). */
export const planSimulationWorkflowType = 'planSimulationWorkflow' satisfies keyof typeof workflows;
type PlanSimulationWorkflow = (typeof workflows)[typeof planSimulationWorkflowType];

export interface PlanSimulationInput {
  simulationId: string;
  organizationId: string;
  plan: { id: string; code: string; currency: string };
  /** The customers' ids, in the order the answer lists them (validated by the API, no repeats). */
  customerIds: string[];
  /** ISO instants: the billed spans re-priced start at or after `from` and end at or before `to`. */
  from: string;
  to: string;
}

export interface PlanSimulationProgress {
  customersTotal: number;
  customersDone: number;
  /** Billed periods re-priced so far (of the customers done). */
  periodsDone: number;
  /** Set once every customer is done: the workflow's result. */
  result: PastPlanSimulation | null;
}

/** Where the simulation stands (and, once done, its result). */
export const planSimulationProgressQuery = defineQuery<PlanSimulationProgress>('planSimulationProgress');

/** What the API checks before answering a simulation: whose it is (kept in the workflow's memo). */
export interface PlanSimulationMemo {
  organizationId: string;
  planId: string;
  customersTotal: number;
}

/** Starts a simulation; its id is new for each request, so a start never meets another run. */
export function startPlanSimulationWorkflow(temporal: TemporalClient, input: PlanSimulationInput) {
  const memo: PlanSimulationMemo = {
    organizationId: input.organizationId,
    planId: input.plan.id,
    customersTotal: input.customerIds.length,
  };
  return temporal.client.workflow.start<PlanSimulationWorkflow>(planSimulationWorkflowType, {
    workflowId: workflowIds.planSimulation(input.simulationId),
    taskQueue: temporal.taskQueue,
    args: [input],
    memo: { ...memo },
    // Many customers: none of them names it (found by organization, entity type and plan code).
    typedSearchAttributes: entitySearchAttributes({
      organizationId: input.organizationId,
      entityType: 'plan_simulation',
      status: 'running',
      planCode: input.plan.code,
    }),
    staticSummary: `Plan simulation of ${input.plan.code} over ${input.customerIds.length} customers' past usage`,
    staticDetails: [
      `Re-prices the billed periods from ${input.from} to ${input.to} of ${input.customerIds.length} customers under plan ${input.plan.code}; writes nothing.`,
      `Ids: simulation ${input.simulationId}, plan ${input.plan.id}, organization ${input.organizationId}.`,
    ].join('\n'),
  });
}
