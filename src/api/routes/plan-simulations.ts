// Plan simulation (issue 19, item 2; docs/simulation.md): POST /v1/plans/{id}/simulate prices a
// plan for hypothetical units, or re-prices customers' past invoiced periods under it; with more
// than one customer it runs as a planSimulationWorkflow and answers 202, and
// GET /v1/plans/{id}/simulations/{simulation_id} answers its progress and, once done, its result.
// Nothing is written: the pricing is src/billing/plan-simulation.ts, the billing code run dry.
import { randomUUID } from 'node:crypto';
import { WorkflowFailedError, WorkflowNotFoundError } from '@temporalio/client';
import type Decimal from 'decimal.js';
import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { simulatePastUsage, simulatePlanUnits } from '../../billing/plan-simulation';
import type { SubscriptionBillingDeps } from '../../billing/subscription/shared';
import { customerLookup, type CustomerDoc } from '../../db/models/customer';
import type { PlanDoc } from '../../db/models/plan';
import { NotFound, Validation } from '../../errors';
import {
  pastPlanSimulationResource,
  planSimulationStatusResource,
  planUnitsSimulationResource,
  type PastPlanSimulation,
  type PlanSimulationStatus,
} from '../../resources/plan-simulation';
import { BILLING_TIMES } from '../../resources/subscription';
import { workflowIds } from '../../temporal/workflow-ids';
import { customerNow } from '../../test-clocks/time';
import {
  planSimulationProgressQuery,
  startPlanSimulationWorkflow,
  type PlanSimulationMemo,
} from '../../../workflows/plan-simulation.messages';
import { decimalInput } from '../decimal';
import { idParams, isoDateTimeInput, responses } from '../http';
import { findPlan } from './plans';

/** The most customers one simulation covers (its workflow keeps every result in its history). */
export const MAX_SIMULATED_CUSTOMERS = 100;

const reference = z.string().trim().min(1).max(255);

const simulateBody = z
  .strictObject({
    units: z
      .record(z.string().min(1).max(255), decimalInput())
      .optional()
      .describe('hypothetical usage: billable metric code -> units for one full period (a metric of the plan left out has none)'),
    customer_id: reference
      .optional()
      .describe('id or external_id: with units, whose taxes and coupons apply; else the customer whose past usage is re-priced'),
    customer_ids: z
      .array(reference)
      .min(1)
      .max(MAX_SIMULATED_CUSTOMERS)
      .optional()
      .describe('ids or external_ids of customers whose past usage is re-priced (more than one: a workflow, answered 202)'),
    billing_time: z.enum(BILLING_TIMES).optional().describe('with units: how the period is anchored (default calendar)'),
    pay_in_advance: z.boolean().optional().describe('with units: whether the base fee is billed in advance (default false)'),
    at: isoDateTimeInput.optional().describe("with units: an instant of the period simulated (default now, on the customer's clock)"),
    from: isoDateTimeInput.optional().describe('past usage: billed periods starting at or after it'),
    to: isoDateTimeInput.optional().describe('past usage: billed periods ending at or before it'),
  })
  .superRefine((b, ctx) => {
    const refuse = (path: string, message: string) => ctx.addIssue({ code: 'custom', path: [path], message });
    if (b.units !== undefined) {
      if (Object.keys(b.units).length === 0) refuse('units', 'name at least one billable metric');
      if (Object.keys(b.units).length > 100) refuse('units', 'at most 100 billable metrics');
      for (const field of ['customer_ids', 'from', 'to'] as const) if (b[field] !== undefined) refuse(field, 'Not with units');
      return;
    }
    if (b.from === undefined && b.to === undefined && b.customer_id === undefined && b.customer_ids === undefined) {
      refuse('units', 'Give units (hypothetical usage), or from, to and customer_id or customer_ids (past usage)');
      return;
    }
    for (const field of ['billing_time', 'pay_in_advance', 'at'] as const) if (b[field] !== undefined) refuse(field, 'Only with units');
    if (b.from === undefined) refuse('from', 'Required');
    if (b.to === undefined) refuse('to', 'Required');
    // (A field that failed its own check is still here unparsed: compare only two instants.)
    if (b.from instanceof Date && b.to instanceof Date && b.from.getTime() >= b.to.getTime()) refuse('to', 'must be after from');
    if ((b.customer_id === undefined) === (b.customer_ids === undefined)) {
      refuse('customer_id', 'Give customer_id or customer_ids (one of them)');
    }
  });

const simulationParams = idParams.extend({ simulation_id: z.string().min(1).max(255) });

export const planSimulationRoutes: FastifyPluginAsyncZod = async (app) => {
  const { db, temporal } = app.deps;
  const { Customer, Organization } = db.models;
  const tags = ['plans', 'simulations'];
  const deps: SubscriptionBillingDeps = { models: db.models, temporal };

  /** A live customer of the organization in the plan's currency (404, 422 at `path` otherwise). */
  async function customerOf(organizationId: string, ref: string, plan: PlanDoc, path: string): Promise<CustomerDoc> {
    const customer = await Customer.findOne(customerLookup(organizationId, ref)).lean();
    if (!customer) throw new NotFound(`${path}: customer ${ref} not found`, 'customer_not_found');
    if (customer.currency !== plan.currency) {
      throw Validation.field(path, `the plan is in ${plan.currency}, the customer in ${customer.currency}`);
    }
    return customer;
  }

  /** The units by metric id: each code a live metric of the organization (404) that the plan charges (422). */
  async function unitsByMetric(organizationId: string, plan: PlanDoc, units: Record<string, Decimal>): Promise<Map<string, Decimal>> {
    const codes = Object.keys(units);
    const metrics = await db.connection
      .collection<{ _id: string; code: string }>('billable_metrics')
      .find({ organization_id: organizationId, code: { $in: codes }, deleted_at: null }, { projection: { code: 1 } })
      .toArray();
    const byCode = new Map(metrics.map((m) => [m.code, m._id]));
    const charged = new Set((plan.charges ?? []).map((c) => c.billable_metric_id));
    const result = new Map<string, Decimal>();
    for (const code of codes) {
      const id = byCode.get(code);
      if (!id) throw new NotFound(`units.${code}: no billable metric "${code}" in this organization`, 'billable_metric_not_found');
      if (!charged.has(id)) throw Validation.field(`units.${code}`, 'the plan has no charge on this billable metric');
      result.set(id, units[code]!);
    }
    return result;
  }

  const pastResult = (plan: PlanDoc, from: Date, to: Date, customers: PastPlanSimulation['customers']): PastPlanSimulation => ({
    plan_id: plan._id,
    plan_code: plan.code,
    currency: plan.currency,
    from: from.toISOString(),
    to: to.toISOString(),
    customers,
  });

  app.post(
    '/plans/:id/simulate',
    {
      schema: {
        tags,
        summary:
          "What the plan would bill: for hypothetical units (one full period), or for customers' past invoiced periods, with what they were invoiced; nothing is written",
        description:
          'With `units`: the invoice of one full period (200). With `customer_id` (or one of `customer_ids`), `from` and `to`: per billed period, the invoices issued, what this plan would have invoiced for the same events and the difference (200). With several customers: a workflow (202); read it with GET /v1/plans/{id}/simulations/{simulation_id}.',
        params: idParams,
        body: simulateBody,
        response: responses({
          200: z.union([planUnitsSimulationResource, pastPlanSimulationResource]),
          202: planSimulationStatusResource,
        }),
      },
    },
    async (request, reply) => {
      const organizationId = request.organizationId;
      const body = request.body;
      const plan = await findPlan(app, organizationId, request.params.id);

      if (body.units !== undefined) {
        const customer = body.customer_id !== undefined ? await customerOf(organizationId, body.customer_id, plan, 'customer_id') : null;
        const units = await unitsByMetric(organizationId, plan, body.units);
        const organization = await Organization.findById(organizationId, { timezone: 1 }).lean();
        const at = body.at ?? (await customerNow(db, customer ?? {}, app.deps.now()));
        return simulatePlanUnits(db, deps, {
          plan,
          customer,
          units,
          billingTime: body.billing_time ?? 'calendar',
          payInAdvance: body.pay_in_advance ?? false,
          at,
          timezone: customer?.timezone ?? organization?.timezone ?? 'UTC',
        });
      }

      const from = body.from!;
      const to = body.to!;
      const refs = body.customer_ids ?? [body.customer_id!];
      const path = (i: number) => (body.customer_ids ? `customer_ids.${i}` : 'customer_id');
      const customers: CustomerDoc[] = [];
      for (const [i, ref] of refs.entries()) {
        const customer = await customerOf(organizationId, ref, plan, path(i));
        if (!customers.some((c) => c._id === customer._id)) customers.push(customer);
      }
      if (customers.length === 1) {
        const simulation = await simulatePastUsage(db, deps, { organizationId, planId: plan._id, customerId: customers[0]!._id, from, to });
        return pastResult(plan, from, to, [simulation]);
      }
      const simulationId = randomUUID();
      await startPlanSimulationWorkflow(temporal, {
        simulationId,
        organizationId,
        plan: { id: plan._id, code: plan.code, currency: plan.currency },
        customerIds: customers.map((c) => c._id),
        from: from.toISOString(),
        to: to.toISOString(),
      });
      const accepted: PlanSimulationStatus = {
        simulation_id: simulationId,
        plan_id: plan._id,
        status: 'running',
        customers_total: customers.length,
        customers_done: 0,
        periods_done: 0,
        result: null,
        error: null,
      };
      void reply.header('location', `/v1/plans/${plan._id}/simulations/${simulationId}`);
      return reply.status(202).send(accepted);
    },
  );

  app.get(
    '/plans/:id/simulations/:simulation_id',
    {
      schema: {
        tags,
        summary: "A simulation over several customers' past usage: its progress, and its result once completed",
        params: simulationParams,
        response: responses({ 200: planSimulationStatusResource }),
      },
    },
    async (request): Promise<PlanSimulationStatus> => {
      const organizationId = request.organizationId;
      const plan = await findPlan(app, organizationId, request.params.id);
      const simulationId = request.params.simulation_id;
      const notFound = () => new NotFound('Simulation not found', 'simulation_not_found');
      const handle = temporal.client.workflow.getHandle(workflowIds.planSimulation(simulationId));
      let description: Awaited<ReturnType<typeof handle.describe>>;
      try {
        description = await handle.describe();
      } catch (err) {
        if (err instanceof WorkflowNotFoundError) throw notFound();
        throw err;
      }
      // Another organization's simulation, or another plan's, is not found here.
      const memo = (description.memo ?? {}) as Partial<PlanSimulationMemo>;
      if (memo.organizationId !== organizationId || memo.planId !== plan._id) throw notFound();
      const status = { simulation_id: simulationId, plan_id: plan._id };

      if (description.status.name === 'RUNNING') {
        const progress = await handle.query(planSimulationProgressQuery);
        return {
          ...status,
          status: 'running',
          customers_total: progress.customersTotal,
          customers_done: progress.customersDone,
          periods_done: progress.periodsDone,
          result: null,
          error: null,
        };
      }
      const total = memo.customersTotal ?? 0;
      if (description.status.name === 'COMPLETED') {
        const result = (await handle.result()) as PastPlanSimulation;
        return {
          ...status,
          status: 'completed',
          customers_total: total,
          customers_done: result.customers.length,
          periods_done: result.customers.reduce((n, c) => n + c.periods.length, 0),
          result,
          error: null,
        };
      }
      let error = `the simulation ended ${description.status.name.toLowerCase()}`;
      try {
        await handle.result();
      } catch (err) {
        if (err instanceof WorkflowFailedError) error = err.cause?.message ?? err.message;
      }
      return { ...status, status: 'failed', customers_total: total, customers_done: 0, periods_done: 0, result: null, error };
    },
  );
};
