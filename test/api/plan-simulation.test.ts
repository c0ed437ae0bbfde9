// Plan simulation (issue 19, item 2; docs/simulation.md) against the real stack: a plan priced for
// hypothetical units (hand-computed, with the organization's or the customer's taxes and the
// customer's coupons); three months of past usage on test clocks re-priced under the plan billed
// (the issued invoices exactly, difference zero, in arrear and in advance) and under another plan
// (hand-computed per period); several customers as a workflow whose progress is readable and whose
// result equals the per-customer answers; nothing written; 4xx in the uniform error body.
//
// Amounts are cents (billing-rules.md). The organization taxes every fee 20 % (rounded once per
// invoice, half up). Plan A: 1000 a month, calls 5 each, storage (sum of gb) graduated 0-10 at 10 a
// GB plus a flat 100, above 10 at 4 a GB. Plan B: 3000 a month, calls 2 each, storage 0-20 at 3 a
// GB, above 20 at 1 a GB plus a flat 50.
import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { CustomerResource } from '../../src/resources/customer';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { PlanResource } from '../../src/resources/plan';
import type {
  CustomerPlanSimulation,
  PastPlanSimulation,
  PlanSimulationStatus,
  PlanUnitsSimulation,
  SimulatedPeriod,
} from '../../src/resources/plan-simulation';
import { BillingEntityType, BillingOrganizationId, BillingPlanCode, BillingStatus } from '../../src/temporal/search-attributes';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { planSimulationProgressQuery } from '../../workflows/plan-simulation.messages';
import { clockScenario } from '../support/clock-scenario';
import { eventually, expectError, expectUnknownFields, expectValidationError, ok, UUID } from '../support/http';

const s = clockScenario('Plan simulation');
const { uid, at, post, get } = s;

let storage: BillableMetricResource;
let planA: PlanResource;
let planB: PlanResource;

/** Plan A or B (see the header) under a fresh code. */
async function createPlan(kind: 'A' | 'B'): Promise<PlanResource> {
  const charges =
    kind === 'A'
      ? [
          { billable_metric_id: s.calls().id, charge_model: 'standard', properties: { amount: '5' } },
          {
            billable_metric_id: storage.id,
            charge_model: 'graduated',
            properties: {
              graduated_ranges: [
                { from_value: 0, to_value: 10, per_unit_amount: '10', flat_amount: '100' },
                { from_value: 10, to_value: null, per_unit_amount: '4', flat_amount: '0' },
              ],
            },
          },
        ]
      : [
          { billable_metric_id: s.calls().id, charge_model: 'standard', properties: { amount: '2' } },
          {
            billable_metric_id: storage.id,
            charge_model: 'graduated',
            properties: {
              graduated_ranges: [
                { from_value: 0, to_value: 20, per_unit_amount: '3', flat_amount: '0' },
                { from_value: 20, to_value: null, per_unit_amount: '1', flat_amount: '50' },
              ],
            },
          },
        ];
  return ok<PlanResource>(
    await post('/v1/plans', {
      code: uid(`plan-${kind.toLowerCase()}`),
      name: `Plan ${kind}`,
      interval: 'monthly',
      amount_cents: kind === 'A' ? 1000 : 3000,
      currency: 'USD',
      charges,
    }),
    201,
  );
}

beforeAll(async () => {
  storage = ok<BillableMetricResource>(
    await post('/v1/billable_metrics', { code: uid('storage'), name: 'Storage', aggregation_type: 'sum', field_name: 'gb' }),
    201,
  );
  ok(await post('/v1/taxes', { code: uid('vat'), name: 'VAT', rate: '0.2', applied_to_organization: true }), 201);
  planA = await createPlan('A');
  planB = await createPlan('B');
}, 60_000);

const simulate = (plan: string, body: unknown) => post(`/v1/plans/${plan}/simulate`, body);

/** The amounts of a side of a period, as numbers of cents (strings in the API). */
const figures = (a: { fees_amount_cents: string; taxes_amount_cents: string; total_amount_cents: string }) => [
  a.fees_amount_cents,
  a.taxes_amount_cents,
  a.total_amount_cents,
];
const ZERO_DIFFERENCE = { fees_amount_cents: '0.0000', taxes_amount_cents: '0.0000', total_amount_cents: '0.0000' };

describe('hypothetical units', () => {
  // 120 calls: 600. 25.5 GB: 10 x 10 + 100 = 200 in the first tier, 15.5 x 4 = 62 above: 262.
  // With the base fee: 1862.
  const units = () => ({ [s.calls().code]: 120, [storage.code]: '25.5' });

  it("prices one full period with the organization's taxes when no customer is given", async () => {
    const res = ok<PlanUnitsSimulation>(await simulate(planA.code, { units: units(), at: '2030-03-10T12:00:00Z' }));
    expect(res).toMatchObject({
      plan_id: planA.id,
      plan_code: planA.code,
      currency: 'USD',
      customer_id: null,
      billing_time: 'calendar',
      pay_in_advance: false,
      period_started_at: at('2030-03-01T00:00:00Z'),
      period_ended_at: at('2030-04-01T00:00:00Z'),
      fees_amount_cents: '1862.0000',
      subtotal: '1862.0000',
      // 20 % of each fee: 200 + 120 + 52.4 = 372.4, rounded once: 372.
      tax_amount: '372.0000',
      coupons_amount_cents: '0.0000',
      total: '2234.0000',
      applied_coupons: [],
    });
    const [callsCharge, storageCharge] = planA.charges;
    const byType = Object.fromEntries(res.fees.map((f) => [f.charge_id ?? f.fee_type, f]));
    expect(res.fees).toHaveLength(3);
    expect(byType.subscription).toMatchObject({ units: '31.0000', amount_cents: '1000.0000', taxes_amount_cents: '200.0000' });
    expect(byType[callsCharge!.id]).toMatchObject({
      billable_metric_code: s.calls().code,
      units: '120.0000',
      unit_amount_cents: '5.0000',
      amount_cents: '600.0000',
      taxes_amount_cents: '120.0000',
      pay_in_advance: false,
      period_started_at: at('2030-03-01T00:00:00Z'),
      period_ended_at: at('2030-04-01T00:00:00Z'),
    });
    expect(byType[storageCharge!.id]).toMatchObject({
      billable_metric_code: storage.code,
      units: '25.5000',
      amount_cents: '262.0000',
      taxes_amount_cents: '52.4000',
      total_amount_cents: '314.4000',
    });
    expect(res.applied_taxes).toEqual([
      expect.objectContaining({ tax_rate: '0.2', fees_amount_cents: '1862.0000', amount_cents: '372.0000' }),
    ]);
  });

  it("applies a given customer's own taxes (the more specific level) and its coupons", async () => {
    const customer = ok<CustomerResource>(await post('/v1/customers', { external_id: uid('cus'), currency: 'USD' }), 201);
    const tax = ok<{ code: string }>(await post('/v1/taxes', { code: uid('reduced'), name: 'Reduced', rate: '0.1' }), 201);
    ok(await post('/v1/taxes/apply', { tax_code: tax.code, taxable_type: 'customer', taxable_id: customer.id }), 201);
    const coupon = ok<{ code: string }>(
      await post('/v1/coupons', {
        code: uid('off'),
        name: 'Off',
        coupon_type: 'fixed_amount',
        amount_cents: '100',
        amount_currency: 'USD',
        frequency: 'forever',
      }),
      201,
    );
    ok(await post('/v1/coupons/apply', { coupon_code: coupon.code, customer_id: customer.id }), 201);

    const res = ok<PlanUnitsSimulation>(
      await simulate(planA.id, { units: units(), customer_id: customer.external_id, at: '2030-03-10T12:00:00Z' }),
    );
    // 10 % of 1862 = 186.2 -> 186; the coupon takes 100 off the pre-tax subtotal: 1862 + 186 - 100.
    expect(res).toMatchObject({
      customer_id: customer.id,
      fees_amount_cents: '1862.0000',
      tax_amount: '186.0000',
      coupons_amount_cents: '100.0000',
      total: '1948.0000',
      applied_coupons: [{ coupon_code: coupon.code, amount_cents: '100.0000' }],
    });
  });

  it('prices a metric left out at zero units (a graduated first tier still bills its flat amount)', async () => {
    const res = ok<PlanUnitsSimulation>(await simulate(planA.code, { units: { [s.calls().code]: '2' }, at: '2030-02-10T00:00:00Z' }));
    // February: 1000 + 2 x 5 + the storage tier's flat 100 at zero units.
    expect(res).toMatchObject({ period_started_at: at('2030-02-01T00:00:00Z'), fees_amount_cents: '1110.0000', total: '1332.0000' });
    expect(res.fees.find((f) => f.charge_id === planA.charges[1]!.id)).toMatchObject({ units: '0.0000', amount_cents: '100.0000' });
  });
});

describe('past usage, on test clocks', () => {
  let c1: CustomerResource;
  let c2: CustomerResource;
  /** c3: plan A, terminated on March 20; c4: plan B in advance with a 10-day trial. */
  let c3: CustomerResource;
  let c4: CustomerResource;
  /** c1 under plan A (the plan it was billed on), answered synchronously. */
  let c1OnA: CustomerPlanSimulation;

  const FROM = '2030-01-01T00:00:00.000Z';
  const TO = '2030-04-01T00:00:00.000Z';

  async function send(customer: CustomerResource, events: { code: string; timestamp: string; properties?: Record<string, unknown> }[]) {
    const body = ok<{ ingested: number; errors: unknown[] }>(
      await post('/v1/events/batch', {
        events: events.map((e) => ({ transaction_id: uid('tx'), external_customer_id: customer.external_id, ...e })),
      }),
      201,
    );
    expect(body.errors).toEqual([]);
    expect(body.ingested).toBe(events.length);
  }
  const calls = (...timestamps: string[]) => timestamps.map((timestamp) => ({ code: s.calls().code, timestamp }));
  const gb = (value: number, timestamp: string) => ({ code: storage.code, timestamp, properties: { gb: value } });

  async function invoicesOf(customer: CustomerResource): Promise<InvoiceResource[]> {
    const list = ok<InvoiceResource[]>(await get(`/v1/invoices?customer_id=${customer.id}`));
    return list.sort((a, b) => a.created_at.localeCompare(b.created_at));
  }

  async function pastOn(plan: PlanResource, customer: CustomerResource): Promise<CustomerPlanSimulation> {
    const res = ok<PastPlanSimulation>(await simulate(plan.code, { customer_id: customer.id, from: FROM, to: TO }));
    expect(res).toMatchObject({ plan_id: plan.id, plan_code: plan.code, currency: 'USD', from: FROM, to: TO });
    expect(res.customers).toHaveLength(1);
    return res.customers[0]!;
  }

  beforeAll(async () => {
    const clock = await s.createClock('2030-01-01T00:00:00Z');
    c1 = await s.createCustomer(clock.id);
    c2 = await s.createCustomer(clock.id);
    // c1 on plan A in arrear; c2 on plan B in advance (its base fee at each period start).
    await s.subscribe({ customer_id: c1.id, plan_id: planA.code });
    await s.subscribe({ customer_id: c2.id, plan_id: planB.code, pay_in_advance: true });
    c3 = await s.createCustomer(clock.id);
    c4 = await s.createCustomer(clock.id);
    const c3Subscription = await s.subscribe({ customer_id: c3.id, plan_id: planA.code });
    await s.subscribe({ customer_id: c4.id, plan_id: planB.code, pay_in_advance: true, trial_period_days: 10 });

    await s.advance(clock.id, '2030-01-31T12:00:00Z');
    await send(c1, [
      ...calls('2030-01-05T10:00:00Z', '2030-01-10T10:00:00Z', '2030-01-20T10:00:00Z'),
      gb(4, '2030-01-07T00:00:00Z'),
      gb(8, '2030-01-25T00:00:00Z'),
    ]);
    await send(c2, [
      ...calls(...Array.from({ length: 10 }, (_, i) => `2030-01-${String(3 + i).padStart(2, '0')}T08:00:00Z`)),
      gb(5, '2030-01-09T00:00:00Z'),
    ]);
    await send(c3, [...calls('2030-01-15T00:00:00Z'), gb(11, '2030-01-16T00:00:00Z')]);
    // In the trial (stored, not billed), then after it.
    await send(c4, [...calls('2030-01-05T00:00:00Z', '2030-01-20T00:00:00Z'), gb(21, '2030-01-21T00:00:00Z')]);
    await s.advance(clock.id, '2030-02-28T12:00:00Z');
    await send(c1, [...calls(...[2, 3, 4, 5, 6].map((d) => `2030-02-0${d}T09:00:00Z`)), gb(30, '2030-02-10T00:00:00Z')]);
    await send(c2, [...calls('2030-02-11T00:00:00Z', '2030-02-12T00:00:00Z'), gb(15, '2030-02-13T00:00:00Z')]);
    await s.advance(clock.id, '2030-03-20T12:00:00Z');
    await send(c1, [gb(2.5, '2030-03-15T00:00:00Z')]);
    await send(c2, calls('2030-03-16T00:00:00Z'));
    await send(c3, calls('2030-03-02T00:00:00Z', '2030-03-03T00:00:00Z'));
    await send(c4, calls('2030-03-04T00:00:00Z'));
    // Terminated on the clock's March 20: billed through that day (20 of 31 days).
    expect(
      (await s.stack().app.inject({ method: 'DELETE', url: `/v1/subscriptions/${c3Subscription.id}`, headers: s.org().headers }))
        .statusCode,
    ).toBe(200);
    await s.advance(clock.id, '2030-04-01T00:00:00Z');
    expect(await invoicesOf(c1)).toHaveLength(3);
    expect(await invoicesOf(c2)).toHaveLength(4);
    expect(await invoicesOf(c3)).toHaveLength(3);
    expect(await invoicesOf(c4)).toHaveLength(4);
  }, 300_000);

  it('with the plan billed, reproduces the three issued invoices exactly (difference zero)', async () => {
    c1OnA = await pastOn(planA, c1);
    const issued = await invoicesOf(c1);
    expect(c1OnA).toMatchObject({ customer_id: c1.id, external_customer_id: c1.external_id, currency: 'USD', skipped: [] });
    expect(c1OnA.periods).toHaveLength(3);
    // Jan: 1000 + 3 x 5 + (12 GB: 200 + 2 x 4) = 1223, taxes 244.6 -> 245. Feb: 1000 + 25 + (30 GB:
    // 200 + 80) = 1305, taxes 261. Mar: 1000 + (2.5 GB: 25 + 100) = 1125, taxes 225.
    const expected = [
      ['2030-01-01', '2030-02-01', '1223.0000', '245.0000', '1468.0000'],
      ['2030-02-01', '2030-03-01', '1305.0000', '261.0000', '1566.0000'],
      ['2030-03-01', '2030-04-01', '1125.0000', '225.0000', '1350.0000'],
    ];
    c1OnA.periods.forEach((period, i) => {
      const [from, to, fees, taxes, total] = expected[i]!;
      const invoice = issued[i]!;
      expect(period).toMatchObject({
        steps: ['boundary'],
        billed_at: at(`${to}T00:00:00Z`),
        from: at(`${from}T00:00:00Z`),
        to: at(`${to}T00:00:00Z`),
        billed_plan: { id: planA.id, code: planA.code },
        difference: ZERO_DIFFERENCE,
      });
      expect(period.actual.invoices).toEqual([{ id: invoice.id, number: invoice.number, status: invoice.status, total: invoice.total }]);
      expect(invoice.total).toBe(total);
      expect(figures(period.actual)).toEqual([fees, taxes, total]);
      expect(figures(period.simulated)).toEqual([fees, taxes, total]);
      // Line by line: the same fees, units, taxes and periods as the invoice's.
      expect(period.simulated.fees).toEqual(period.actual.fees);
      expect(period.simulated.invoices_count).toBe(1);
    });
    expect(c1OnA.totals).toEqual({
      actual: { fees_amount_cents: '3653.0000', taxes_amount_cents: '731.0000', total_amount_cents: '4384.0000' },
      simulated: { fees_amount_cents: '3653.0000', taxes_amount_cents: '731.0000', total_amount_cents: '4384.0000' },
      difference: ZERO_DIFFERENCE,
    });
  });

  it('with the plan billed in advance, reproduces the activation and the period-end invoices exactly', async () => {
    const c2OnB = await pastOn(planB, c2);
    const issued = await invoicesOf(c2);
    expect(c2OnB.periods.map((p) => [p.steps, p.billed_at, p.from, p.to])).toEqual([
      [['activation'], at('2030-01-01T00:00:00Z'), at('2030-01-01T00:00:00Z'), at('2030-02-01T00:00:00Z')],
      [['boundary'], at('2030-02-01T00:00:00Z'), at('2030-01-01T00:00:00Z'), at('2030-02-01T00:00:00Z')],
      [['boundary'], at('2030-03-01T00:00:00Z'), at('2030-02-01T00:00:00Z'), at('2030-03-01T00:00:00Z')],
      [['boundary'], at('2030-04-01T00:00:00Z'), at('2030-03-01T00:00:00Z'), at('2030-04-01T00:00:00Z')],
    ]);
    c2OnB.periods.forEach((period, i) => {
      expect(period.actual.invoices.map((inv) => inv.id)).toEqual([issued[i]!.id]);
      expect(period.difference).toEqual(ZERO_DIFFERENCE);
      expect(period.simulated.fees).toEqual(period.actual.fees);
    });
    // The boundary in advance bills the next period's base fee with the ended period's usage.
    expect(c2OnB.periods[1]!.simulated.fees.find((f) => f.fee_type === 'subscription')).toMatchObject({
      amount_cents: '3000.0000',
      period_started_at: at('2030-02-01T00:00:00Z'),
      period_ended_at: at('2030-03-01T00:00:00Z'),
    });
  });

  it("with the plan billed, reproduces a termination's and a trial end's invoices exactly", async () => {
    const terminated = await pastOn(planA, c3);
    expect(terminated.periods.map((p) => [p.steps, p.from, p.to])).toEqual([
      [['boundary'], at('2030-01-01T00:00:00Z'), at('2030-02-01T00:00:00Z')],
      [['boundary'], at('2030-02-01T00:00:00Z'), at('2030-03-01T00:00:00Z')],
      [['termination'], at('2030-03-01T00:00:00Z'), at('2030-03-20T12:00:00Z')],
    ]);
    // March: 1000 x 20 / 31 = 645.1613 for the base fee, 2 calls: 10, the storage tier's flat 100.
    expect(figures(terminated.periods[2]!.actual)).toEqual(['755.1613', '151.0000', '906.0000']);
    const trial = await pastOn(planB, c4);
    expect(trial.periods.map((p) => [p.steps, p.from, p.to])).toEqual([
      [['trial_end'], at('2030-01-11T00:00:00Z'), at('2030-02-01T00:00:00Z')],
      // The period it closes (its trial days are not billed; its usage counts from the trial end).
      [['boundary'], at('2030-01-01T00:00:00Z'), at('2030-02-01T00:00:00Z')],
      [['boundary'], at('2030-02-01T00:00:00Z'), at('2030-03-01T00:00:00Z')],
      [['boundary'], at('2030-03-01T00:00:00Z'), at('2030-04-01T00:00:00Z')],
    ]);
    // The trial end bills the rest of January in advance: 3000 x 21 / 31 = 2032.2581.
    expect(trial.periods[0]!.actual.fees_amount_cents).toBe('2032.2581');
    for (const period of [...terminated.periods, ...trial.periods]) {
      expect(period.difference).toEqual(ZERO_DIFFERENCE);
      expect(period.simulated.fees).toEqual(period.actual.fees);
    }
    expect([...terminated.skipped, ...trial.skipped]).toEqual([]);
  });

  it('with another plan, answers the hand-computed figures per period', async () => {
    const c1OnB = await pastOn(planB, c1);
    expect(c1OnB.skipped).toEqual([]);
    // Plan B on c1's usage. Jan: 3000 + 3 x 2 + 12 x 3 = 3042, taxes 608.4 -> 608.
    // Feb: 3000 + 5 x 2 + (30 GB: 20 x 3 + 10 x 1 + 50) = 3130, taxes 626.
    // Mar: 3000 + 2.5 x 3 = 3007.5 (subtotal 3008), taxes 600 + 1.5 = 601.5 -> 602.
    const rows = c1OnB.periods.map((p: SimulatedPeriod) => [p.from, figures(p.actual), figures(p.simulated), figures(p.difference)]);
    expect(rows).toEqual([
      [
        at('2030-01-01T00:00:00Z'),
        ['1223.0000', '245.0000', '1468.0000'],
        ['3042.0000', '608.0000', '3650.0000'],
        ['1819.0000', '363.0000', '2182.0000'],
      ],
      [
        at('2030-02-01T00:00:00Z'),
        ['1305.0000', '261.0000', '1566.0000'],
        ['3130.0000', '626.0000', '3756.0000'],
        ['1825.0000', '365.0000', '2190.0000'],
      ],
      [
        at('2030-03-01T00:00:00Z'),
        ['1125.0000', '225.0000', '1350.0000'],
        ['3007.5000', '602.0000', '3610.0000'],
        ['1882.5000', '377.0000', '2260.0000'],
      ],
    ]);
    const [callsB, storageB] = planB.charges;
    expect(c1OnB.periods[1]!.simulated.fees.map((f) => [f.fee_type, f.charge_id, f.units, f.amount_cents])).toEqual(
      expect.arrayContaining([
        ['subscription', null, '28.0000', '3000.0000'],
        ['charge', callsB!.id, '5.0000', '10.0000'],
        ['charge', storageB!.id, '30.0000', '120.0000'],
      ]),
    );
    expect(c1OnB.totals.difference).toEqual({
      fees_amount_cents: '5526.5000',
      taxes_amount_cents: '1105.0000',
      total_amount_cents: '6632.0000',
    });
  });

  it('keeps to the periods within [from, to]', async () => {
    const res = ok<PastPlanSimulation>(
      await simulate(planA.code, { customer_id: c1.external_id, from: '2030-02-01T00:00:00Z', to: '2030-03-15T00:00:00Z' }),
    );
    expect(res.customers[0]!.periods.map((p) => p.from)).toEqual([at('2030-02-01T00:00:00Z')]);
  });

  it('runs as a workflow for several customers: 202, progress readable, the result equal to the per-customer answers', async () => {
    const c2OnA = await pastOn(planA, c2);
    c1OnA ??= await pastOn(planA, c1);
    const res = await simulate(planA.id, { customer_ids: [c1.external_id, c2.id], from: FROM, to: TO });
    const accepted = ok<PlanSimulationStatus>(res, 202);
    expect(accepted).toMatchObject({
      plan_id: planA.id,
      status: 'running',
      customers_total: 2,
      customers_done: 0,
      periods_done: 0,
      result: null,
      error: null,
    });
    expect(accepted.simulation_id).toMatch(UUID);
    const url = `/v1/plans/${planA.code}/simulations/${accepted.simulation_id}`;
    expect(res.headers.location).toBe(`/v1/plans/${planA.id}/simulations/${accepted.simulation_id}`);

    const seen: PlanSimulationStatus[] = [];
    const done = await eventually(
      async () => {
        const status = ok<PlanSimulationStatus>(await get(url));
        seen.push(status);
        return status.status === 'completed' ? status : undefined;
      },
      60_000,
      'the simulation to complete',
    );
    for (const status of seen) {
      expect(status.customers_total).toBe(2);
      expect(status.customers_done).toBeLessThanOrEqual(2);
      expect(['running', 'completed']).toContain(status.status);
    }
    expect(done).toMatchObject({ status: 'completed', customers_total: 2, customers_done: 2, periods_done: 7, error: null });
    expect(done.result).toEqual({
      plan_id: planA.id,
      plan_code: planA.code,
      currency: 'USD',
      from: FROM,
      to: TO,
      customers: [c1OnA, c2OnA],
    });

    // The progress query itself (what GET answers while it runs).
    const handle = s.stack().temporal.client.workflow.getHandle(workflowIds.planSimulation(accepted.simulation_id));
    const progress = await handle.query(planSimulationProgressQuery);
    expect(progress).toMatchObject({ customersTotal: 2, customersDone: 2, periodsDone: 7 });
    expect(progress.result).toEqual(done.result);
    // Found by operators as the other workflows are (docs/operations.md): organization, entity type, status, plan code.
    const attributes = (await handle.describe()).typedSearchAttributes;
    expect(attributes.get(BillingEntityType)).toBe('plan_simulation');
    expect(attributes.get(BillingOrganizationId)).toBe(s.org().id);
    expect(attributes.get(BillingStatus)).toBe('completed');
    expect(attributes.get(BillingPlanCode)).toBe(planA.code);

    // Another plan's path, or an unknown simulation: not found.
    expectError(await get(`/v1/plans/${planB.id}/simulations/${accepted.simulation_id}`), 404, 'simulation_not_found');
    expectError(await get(`/v1/plans/${planA.id}/simulations/${randomUUID()}`), 404, 'simulation_not_found');

    if (process.env.RECORD_HISTORIES === '1') {
      const history = await handle.fetchHistory();
      writeFileSync(join(__dirname, '../workflows/histories/plan-simulation.json'), JSON.stringify(history, null, 1));
    }
  }, 120_000);

  it('writes nothing: every collection holds the same documents before and after', async () => {
    const db = s.stack().db.connection.db!;
    const snapshot = async () => {
      const names = (await db.listCollections().toArray()).map((c) => c.name).sort();
      const counts: Record<string, number> = {};
      for (const name of names) counts[name] = await db.collection(name).countDocuments();
      const subscriptions = await db
        .collection('subscriptions')
        .find({}, { projection: { state_version: 1, updated_at: 1 } })
        .toArray();
      const coupons = await db.collection('applied_coupons').find({}).toArray();
      return { counts, subscriptions, coupons };
    };
    const before = await snapshot();
    ok(await simulate(planB.code, { customer_id: c1.id, from: FROM, to: TO }));
    ok(await simulate(planB.code, { units: { [storage.code]: 3 }, customer_id: c2.id }));
    const started = ok<PlanSimulationStatus>(await simulate(planB.code, { customer_ids: [c1.id, c2.id], from: FROM, to: TO }), 202);
    await eventually(
      async () => {
        const status = ok<PlanSimulationStatus>(await get(`/v1/plans/${planB.id}/simulations/${started.simulation_id}`));
        return status.status === 'completed' ? status : undefined;
      },
      60_000,
      'the simulation to complete',
    );
    expect(await snapshot()).toEqual(before);
    expect(before.counts.invoices).toBeGreaterThanOrEqual(7);
    expect(before.counts.fees).toBeGreaterThan(0);
  }, 120_000);
});

describe('bad input', () => {
  let customer: CustomerResource;
  beforeAll(async () => {
    customer = ok<CustomerResource>(await post('/v1/customers', { external_id: uid('cus'), currency: 'USD' }), 201);
  });
  const past = () => ({ customer_id: customer.id, from: '2030-01-01T00:00:00Z', to: '2030-04-01T00:00:00Z' });

  it('404 for an unknown plan, customer or billable metric', async () => {
    expectError(await simulate('no-such-plan', past()), 404, 'plan_not_found');
    expectError(await simulate(planA.id, { ...past(), customer_id: 'nobody' }), 404, 'customer_not_found');
    expectError(
      await simulate(planA.id, { ...past(), customer_id: undefined, customer_ids: [customer.id, 'nobody'] }),
      404,
      'customer_not_found',
    );
    expectError(await simulate(planA.id, { units: { 'no-such-metric': 1 } }), 404, 'billable_metric_not_found');
    expectError(await get(`/v1/plans/no-such-plan/simulations/${randomUUID()}`), 404, 'plan_not_found');
  });

  it('422 for from after to, missing or conflicting fields, and units the plan does not charge', async () => {
    expectValidationError(await simulate(planA.id, { ...past(), from: '2030-05-01T00:00:00Z' }), 'to');
    expectValidationError(await simulate(planA.id, { ...past(), to: past().from }), 'to');
    expectValidationError(await simulate(planA.id, { customer_id: customer.id, to: past().to }), 'from');
    expectValidationError(await simulate(planA.id, { ...past(), customer_ids: [customer.id] }), 'customer_id');
    expectValidationError(await simulate(planA.id, { from: past().from, to: past().to }), 'customer_id');
    expectValidationError(await simulate(planA.id, {}), 'units');
    expectValidationError(await simulate(planA.id, { units: {} }), 'units');
    expectValidationError(await simulate(planA.id, { units: { [storage.code]: 1 }, from: past().from }), 'from');
    expectValidationError(await simulate(planA.id, { ...past(), billing_time: 'calendar' }), 'billing_time');
    expectValidationError(await simulate(planA.id, { units: { [storage.code]: 'lots' } }), `units.${storage.code}`);
    expectValidationError(await simulate(planA.id, { units: { [storage.code]: '1.23456' } }), `units.${storage.code}`);
    expectValidationError(await simulate(planA.id, { ...past(), from: 'yesterday' }), 'from');
    expectValidationError(await simulate(planA.id, { ...past(), customer_id: undefined, customer_ids: [] }), 'customer_ids');
    const many = Array.from({ length: 101 }, (_, i) => `c-${i}`);
    expectValidationError(await simulate(planA.id, { ...past(), customer_id: undefined, customer_ids: many }), 'customer_ids');
    expectUnknownFields(await simulate(planA.id, { ...past(), plan_code: 'x' }), ['plan_code']);

    const metric = ok<BillableMetricResource>(
      await post('/v1/billable_metrics', { code: uid('unused'), name: 'Unused', aggregation_type: 'count' }),
      201,
    );
    expectValidationError(await simulate(planA.id, { units: { [metric.code]: 1 } }), `units.${metric.code}`);
  });

  it('422 for a customer in another currency than the plan', async () => {
    const euro = ok<CustomerResource>(await post('/v1/customers', { external_id: uid('eur'), currency: 'EUR' }), 201);
    expectValidationError(await simulate(planA.id, { ...past(), customer_id: euro.id }), 'customer_id');
    expectValidationError(await simulate(planA.id, { units: { [storage.code]: 1 }, customer_id: euro.id }), 'customer_id');
    expectValidationError(
      await simulate(planA.id, { ...past(), customer_id: undefined, customer_ids: [customer.id, euro.id] }),
      'customer_ids.1',
    );
  });

  it('400 for a body that is not a JSON object', async () => {
    const res = await s.stack().app.inject({
      method: 'POST',
      url: `/v1/plans/${planA.id}/simulate`,
      headers: { ...s.org().headers, 'content-type': 'application/json' },
      payload: '[1]',
    });
    expectError(res, 400, 'invalid_json');
  });
});

describe('OpenAPI', () => {
  it('lists the simulation routes', async () => {
    const doc = (await s.stack().app.inject({ method: 'GET', url: '/docs/openapi.json' })).json<{ paths: Record<string, object> }>();
    expect(Object.keys(doc.paths['/v1/plans/{id}/simulate']!)).toEqual(['post']);
    expect(Object.keys(doc.paths['/v1/plans/{id}/simulations/{simulation_id}']!)).toEqual(['get']);
  });
});
