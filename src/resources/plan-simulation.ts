// What a plan simulation answers (POST /v1/plans/{id}/simulate, GET /v1/plans/{id}/simulations/{id};
// docs/simulation.md): the invoice a plan would make for hypothetical units, or, on past usage, per
// customer and per billed period, what the customer was invoiced, what the plan would have
// invoiced for the same events, and the difference. Amounts are cents, as strings with 4 fractional
// digits like every invoice amount. Nothing here is stored: these shapes are built by
// src/billing/plan-simulation.ts, cross the activity boundary as they are, and are answered as they are.
import { z } from 'zod';
import type { FeeDoc } from '../db/models/fee';
import { decimal4, nullableTimestamp, timestamp } from './format';
import { toFeeResource } from './invoice';

const appliedTax = z.object({ tax_id: z.string(), tax_code: z.string(), tax_rate: z.string(), amount_cents: z.string() });

export const simulatedFeeResource = z
  .object({
    fee_type: z.enum(['subscription', 'charge', 'add_on', 'credit', 'commitment']),
    charge_id: z.string().nullable(),
    charge_filter_id: z.string().nullable(),
    billable_metric_code: z.string().nullable().describe("the charge's billable metric, when the fee records it"),
    invoice_display_name: z.string().nullable(),
    units: decimal4,
    events_count: z.number().int(),
    unit_amount_cents: decimal4,
    amount_cents: decimal4,
    taxes_amount_cents: decimal4,
    total_amount_cents: decimal4,
    applied_taxes: z.array(appliedTax),
    pay_in_advance: z.boolean().describe('a charge billed event by event as its events arrive'),
    period_started_at: nullableTimestamp,
    period_ended_at: nullableTimestamp,
  })
  .meta({ id: 'SimulatedFee' });

export type SimulatedFee = z.output<typeof simulatedFeeResource>;

/** A fee (stored, or drafted by a simulation and never stored) in the simulation's shape. */
export function toSimulatedFee(fee: FeeDoc): SimulatedFee {
  const full = toFeeResource(fee);
  const basis = (fee.basis ?? null) as { metric?: { code?: unknown } } | null;
  return {
    fee_type: full.fee_type,
    charge_id: full.charge_id,
    charge_filter_id: full.charge_filter_id,
    billable_metric_code: typeof basis?.metric?.code === 'string' ? basis.metric.code : null,
    invoice_display_name: full.invoice_display_name,
    units: full.units,
    events_count: full.events_count,
    unit_amount_cents: full.unit_amount_cents,
    amount_cents: full.amount_cents,
    taxes_amount_cents: full.taxes_amount_cents,
    total_amount_cents: full.total_amount_cents,
    applied_taxes: full.applied_taxes,
    pay_in_advance: full.pay_in_advance,
    period_started_at: full.period_started_at,
    period_ended_at: full.period_ended_at,
  };
}

// ---- hypothetical units ----------------------------------------------------------------------

export const planUnitsSimulationResource = z
  .object({
    plan_id: z.string(),
    plan_code: z.string(),
    currency: z.string(),
    customer_id: z.string().nullable().describe("the customer whose taxes and coupons apply (null: the organization's taxes only)"),
    billing_time: z.enum(['calendar', 'anniversary']),
    pay_in_advance: z.boolean(),
    period_started_at: timestamp.describe('the full billing period simulated'),
    period_ended_at: timestamp,
    fees: z.array(simulatedFeeResource),
    fees_amount_cents: decimal4,
    subtotal: decimal4,
    tax_amount: decimal4,
    coupons_amount_cents: decimal4,
    total: decimal4.describe('subtotal + tax_amount - coupons_amount_cents (wallets and credit notes are not applied)'),
    applied_taxes: z.array(appliedTax.extend({ fees_amount_cents: z.string() })),
    applied_coupons: z.array(z.object({ coupon_id: z.string(), coupon_code: z.string(), amount_cents: decimal4 })),
  })
  .meta({ id: 'PlanUnitsSimulation' });

export type PlanUnitsSimulation = z.output<typeof planUnitsSimulationResource>;

// ---- past usage ------------------------------------------------------------------------------

const amountsShape = {
  fees_amount_cents: decimal4.describe('the sum of the fees, before taxes'),
  taxes_amount_cents: decimal4.describe("the invoices' tax amounts (whole cents)"),
  total_amount_cents: decimal4.describe(
    'subtotal + taxes, whole cents: before coupons, progressive billing credits, credit notes and wallets',
  ),
};

export const simulationAmountsResource = z.object(amountsShape).meta({ id: 'SimulationAmounts' });
export type SimulationAmounts = z.output<typeof simulationAmountsResource>;

export const SIMULATED_STEPS = ['activation', 'boundary', 'trial_end', 'termination'] as const;
export type SimulatedStep = (typeof SIMULATED_STEPS)[number];

export const simulatedPeriodResource = z
  .object({
    subscription_id: z.string(),
    external_subscription_id: z.string(),
    steps: z.array(z.enum(SIMULATED_STEPS)).describe('the billing steps that issued the invoices, re-run under the simulated plan'),
    billed_at: timestamp.describe('the instant the steps billed for (a period end, the start, the trial end, the termination)'),
    from: timestamp.describe(
      'the span billed: the period (or part) whose usage and arrear base fee it closes, or whose base fee it bills in advance',
    ),
    to: timestamp,
    billed_plan: z.object({ id: z.string(), code: z.string() }).describe('the plan the customer was invoiced on'),
    actual: z.object({
      ...amountsShape,
      invoices: z.array(
        z.object({ id: z.string(), number: z.string(), status: z.enum(['finalized', 'paid']), total: decimal4.describe('as issued') }),
      ),
      fees: z.array(simulatedFeeResource),
    }),
    simulated: z.object({ ...amountsShape, invoices_count: z.number().int(), fees: z.array(simulatedFeeResource) }),
    difference: simulationAmountsResource.describe('simulated - actual'),
  })
  .meta({ id: 'SimulatedPeriod' });

export type SimulatedPeriod = z.output<typeof simulatedPeriodResource>;

export const SKIP_REASONS = ['plan_change', 'pause', 'interval_mismatch', 'unknown_step'] as const;

export const skippedPeriodResource = z
  .object({
    subscription_id: z.string(),
    billed_at: timestamp,
    invoice_ids: z.array(z.string()),
    reason: z.enum(SKIP_REASONS),
    message: z.string(),
  })
  .meta({ id: 'SkippedSimulationPeriod' });

export type SkippedPeriod = z.output<typeof skippedPeriodResource>;

export const customerPlanSimulationResource = z
  .object({
    customer_id: z.string(),
    external_customer_id: z.string(),
    currency: z.string(),
    periods: z.array(simulatedPeriodResource),
    totals: z.object({ actual: simulationAmountsResource, simulated: simulationAmountsResource, difference: simulationAmountsResource }),
    skipped: z.array(skippedPeriodResource).describe('invoiced steps in the range that are not re-priced, and why'),
  })
  .meta({ id: 'CustomerPlanSimulation' });

export type CustomerPlanSimulation = z.output<typeof customerPlanSimulationResource>;

export const pastPlanSimulationResource = z
  .object({
    plan_id: z.string(),
    plan_code: z.string(),
    currency: z.string(),
    from: timestamp,
    to: timestamp,
    customers: z.array(customerPlanSimulationResource),
  })
  .meta({ id: 'PastPlanSimulation' });

export type PastPlanSimulation = z.output<typeof pastPlanSimulationResource>;

export const planSimulationStatusResource = z
  .object({
    simulation_id: z.string(),
    plan_id: z.string(),
    status: z.enum(['running', 'completed', 'failed']),
    customers_total: z.number().int(),
    customers_done: z.number().int(),
    periods_done: z.number().int().describe('billed periods re-priced so far'),
    result: pastPlanSimulationResource.nullable().describe('once completed'),
    error: z.string().nullable().describe('once failed'),
  })
  .meta({ id: 'PlanSimulationStatus' });

export type PlanSimulationStatus = z.output<typeof planSimulationStatusResource>;
