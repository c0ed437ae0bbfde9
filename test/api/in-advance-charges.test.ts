// Charges paid in advance (api-contract.md "Invoices, fees, credit notes": charges with
// pay_in_advance: true; lago-reference.md 2.10 and 2.1-2.8; billing-rules.md for the units): each
// event of a non-recurring metric is billed when it arrives, price(period's units with it) − what the
// period's earlier events were billed, never negative; on an invoice of its own (invoice_type
// subscription, finalized at once, one fee with pay_in_advance true) when that is above 0 and the
// charge is invoiceable, else as a fee without invoice (GET /v1/fees); never again at the period end.
//
// Every customer lives on a test clock: created at 2030-03-01 (UTC, calendar monthly, so the period
// is March 1 - April 1) and advanced to March 20 before any event, so events carry distinct March
// timestamps. The billing is asynchronous (the events API signals the subscription's workflow), so
// fees are awaited with eventually(). Money in properties is cents (billing-rules.md: the reference's
// major units × 100); fees keep 4 fractional digits, invoice totals are rounded to whole cents.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { CustomerResource } from '../../src/resources/customer';
import type { FeeResource, InvoiceResource } from '../../src/resources/invoice';
import type { PlanResource } from '../../src/resources/plan';
import type { SubscriptionResource } from '../../src/resources/subscription';
import type { TestClockResource } from '../../src/resources/test-clock';
import { eventually, expectError, expectValidationError, injectAs, ok, sleep, type Method } from '../support/http';
import { billEventsInAdvance } from '../../src/billing/subscription/in-advance';
import { subscriptionBillingContext } from '../../src/billing/subscription/shared';
import { subscriptionStateQuery } from '../../workflows/subscription.messages';
import { CatalogView } from '../../src/usage/catalog-view';
import { Ingestor } from '../../src/usage/ingest';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;

beforeAll(async () => {
  stack = await createTestStack();
  worker = await startStackWorker(stack);
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

const uid = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
const START = '2030-03-01T00:00:00.000Z';
const NOW = '2030-03-20T00:00:00.000Z';
const PERIOD_END = '2030-04-01T00:00:00.000Z';
/** March `day` at 10:00 UTC, before the clock's NOW. */
const march = (day: number) => `2030-03-${String(day).padStart(2, '0')}T10:00:00.000Z`;

/** One test's world; `charge(name)` is the plan's charge on metric `name`. */
interface Setup {
  org: TestOrganization;
  clock: TestClockResource;
  customer: CustomerResource;
  sub: SubscriptionResource;
  metrics: Record<string, BillableMetricResource>;
  charge: (name: string) => PlanResource['charges'][number];
}

type MetricSpec = { aggregation_type: string; field_name?: string; recurring?: boolean };
type ChargeSpec = Record<string, unknown> & { metric: string };

/** An organization, its metrics and a monthly plan, a clock customer subscribed on March 1, the clock at March 20. */
async function setup(metricSpecs: Record<string, MetricSpec>, charges: ChargeSpec[], amountCents = 0): Promise<Setup> {
  const org = await createOrganization(stack.app, { name: uid('In Advance'), default_currency: 'USD', timezone: 'UTC' });
  const call = (method: Method, url: string, payload?: unknown) => injectAs(stack.app, org, method, url, payload);
  const metrics: Record<string, BillableMetricResource> = {};
  for (const [name, spec] of Object.entries(metricSpecs)) {
    metrics[name] = ok<BillableMetricResource>(await call('POST', '/v1/billable_metrics', { code: uid(name), name, ...spec }), 201);
  }
  const plan = ok<PlanResource>(
    await call('POST', '/v1/plans', {
      code: uid('plan'),
      name: 'Plan',
      interval: 'monthly',
      amount_cents: amountCents,
      currency: 'USD',
      charges: charges.map(({ metric, ...c }) => ({ billable_metric_id: metrics[metric]!.id, ...c })),
    }),
    201,
  );
  const clock = ok<TestClockResource>(await call('POST', '/v1/test_clocks', { name: uid('clock'), frozen_time: START }), 201);
  const customer = ok<CustomerResource>(
    await call('POST', '/v1/customers', { external_id: uid('cus'), currency: 'USD', test_clock_id: clock.id }),
    201,
  );
  worker.assertAlive();
  const sub = ok<SubscriptionResource>(
    await call('POST', '/v1/subscriptions', { external_id: uid('sub'), customer_id: customer.id, plan_id: plan.id }),
    201,
  );
  expect(sub).toMatchObject({ started_at: START, current_period_ending_at: PERIOD_END });
  const charge = (name: string) => plan.charges.find((c) => c.billable_metric_id === metrics[name]!.id)!;
  const s: Setup = { org, clock, customer, sub, metrics, charge };
  await advance(s, NOW);
  return s;
}

const api = (s: Setup, method: Method, url: string, payload?: unknown) => injectAs(stack.app, s.org, method, url, payload);

/** Advances the clock and waits until it is ready (every workflow of its customers caught up). */
async function advance(s: Setup, iso: string): Promise<void> {
  worker.assertAlive();
  ok(await api(s, 'POST', `/v1/test_clocks/${s.clock.id}/advance`, { frozen_time: iso }), 202);
  const ready = async () => {
    worker.assertAlive();
    return ok<TestClockResource>(await api(s, 'GET', `/v1/test_clocks/${s.clock.id}`)).status === 'ready' ? true : undefined;
  };
  await eventually(ready, 60_000, `clock ready at ${iso}`);
}

/** One event of metric `name` through POST /v1/events (the raw response). */
const postEvent = (s: Setup, name: string, timestamp: string, properties: Record<string, unknown> = {}, transactionId = uid('tx')) =>
  api(s, 'POST', '/v1/events', {
    transaction_id: transactionId,
    external_customer_id: s.customer.external_id,
    code: s.metrics[name]!.code,
    timestamp,
    properties,
  });

/** The subscription's fees (GET /v1/fees?subscription_id=), of one charge when given. */
async function feesOf(s: Setup, chargeId?: string): Promise<FeeResource[]> {
  const fees = ok<FeeResource[]>(await api(s, 'GET', `/v1/fees?subscription_id=${s.sub.id}&limit=1000`));
  return chargeId === undefined ? fees : fees.filter((f) => f.charge_id === chargeId);
}

/** Waits until the charge has `n` fees, and each invoiced one's invoice is no longer a draft; then the fees. */
async function awaitFees(s: Setup, chargeId: string, n: number): Promise<FeeResource[]> {
  const fees = await eventually(
    async () => {
      worker.assertAlive();
      const fees = await feesOf(s, chargeId);
      expect(fees.length, `fees of charge ${chargeId}`).toBeLessThanOrEqual(n);
      return fees.length === n ? fees : undefined;
    },
    30_000,
    `${n} fees of charge ${chargeId}`,
  );
  for (const f of fees.filter((f) => f.invoice_id !== null)) {
    // The fee is written before its invoice, which is created as a draft and then finalized.
    const finalized = async () => (await api(s, 'GET', `/v1/invoices/${f.invoice_id}`)).json<InvoiceResource>().status === 'finalized';
    await eventually(async () => ((await finalized()) ? true : undefined), 10_000, `invoice ${f.invoice_id} finalized`);
  }
  return fees;
}

/** Sends one event of metric `name` (201) and answers the one fee its charge gains (naming that event). */
async function bill(s: Setup, name: string, timestamp: string, properties: Record<string, unknown> = {}): Promise<FeeResource> {
  const chargeId = s.charge(name).id;
  const before = await feesOf(s, chargeId);
  const tx = uid('tx');
  ok(await postEvent(s, name, timestamp, properties, tx), 201);
  const fee = (await awaitFees(s, chargeId, before.length + 1)).find((f) => !before.some((b) => b.id === f.id))!;
  expect(fee.event_transaction_id).toBe(tx);
  return fee;
}

/** The subscription's invoices with their fees, oldest first. */
async function invoicesOf(s: Setup): Promise<InvoiceResource[]> {
  const list = ok<InvoiceResource[]>(await api(s, 'GET', `/v1/invoices?subscription_id=${s.sub.id}`));
  const full = await Promise.all(list.map(async (i) => ok<InvoiceResource>(await api(s, 'GET', `/v1/invoices/${i.id}`))));
  return full.sort((a, b) => a.number.localeCompare(b.number));
}

/** The fee's own invoice: a finalized subscription invoice of March holding that fee alone. */
async function expectOwnInvoice(s: Setup, fee: FeeResource, total: string): Promise<void> {
  expect(fee.invoice_id).not.toBeNull();
  const inv = ok<InvoiceResource>(await api(s, 'GET', `/v1/invoices/${fee.invoice_id}`));
  expect(inv).toMatchObject({
    invoice_type: 'subscription',
    status: 'finalized',
    subscription_id: s.sub.id,
    issuing_date: '2030-03-20',
    period_started_at: START,
    period_ended_at: PERIOD_END,
    fees_amount_cents: fee.amount_cents,
    total,
  });
  expect(inv.fees!.map((f) => f.id)).toEqual([fee.id]);
  expect(inv.fees![0]).toMatchObject({ pay_in_advance: true, fee_type: 'charge', charge_id: fee.charge_id, events_count: 1 });
}

const amounts = (fees: FeeResource[]) => fees.map((f) => f.amount_cents).sort();
const total = (fees: FeeResource[]) => fees.reduce((t, f) => t + Number(f.amount_cents), 0);

/** Sends events of metric `name` one at a time, on consecutive March days from `firstDay`: their fees. */
async function billEach(s: Setup, name: string, firstDay: number, events: Record<string, unknown>[]): Promise<FeeResource[]> {
  const fees: FeeResource[] = [];
  for (const [i, properties] of events.entries()) fees.push(await bill(s, name, march(firstDay + i), properties));
  return fees;
}

/** Adjacent tiers: [0, 2] 100 per unit + 50 flat; (2, ∞) 40 per unit + 20 flat. */
const GRADUATED: ChargeSpec = {
  metric: 'calls',
  charge_model: 'graduated',
  pay_in_advance: true,
  properties: {
    graduated_ranges: [
      { from_value: 0, to_value: 2, per_unit_amount: '100', flat_amount: '50' },
      { from_value: 2, to_value: null, per_unit_amount: '40', flat_amount: '20' },
    ],
  },
};

// ---- 1. standard, sum: Lago's running maximum --------------------------------------------------

describe('a standard charge in advance on a sum metric', () => {
  it('bills +10, −5, +8 as 1000, 0 (a fee without invoice) and 300 (lago-reference 2.10)', async () => {
    // 100 cents (1.00) per unit.
    const s = await setup({ storage: { aggregation_type: 'sum', field_name: 'value' } }, [
      { metric: 'storage', charge_model: 'standard', properties: { amount: '100' }, pay_in_advance: true },
    ]);
    const chargeId = s.charge('storage').id;

    // +10: price(10) − 0 = 10 × 100 = 1000, its own invoice.
    const first = await bill(s, 'storage', march(2), { value: 10 });
    expect(first).toMatchObject({
      charge_id: chargeId,
      subscription_id: s.sub.id,
      pay_in_advance: true,
      units: '10.0000',
      events_count: 1,
      amount_cents: '1000.0000',
      unit_amount_cents: '100.0000', // 1000 / 10
      period_started_at: START,
      period_ended_at: PERIOD_END,
    });
    await expectOwnInvoice(s, first, '1000.0000');

    // −5: the sum is 5, price 500, already billed 1000: max(0, 500 − 1000) = 0. No invoice; the fee
    // exists so that the event counts as billed. No fee is ever negative, units included
    // (billing-rules.md "Billing periods"): units 0.
    const second = await bill(s, 'storage', march(3), { value: -5 });
    expect(second).toMatchObject({ invoice_id: null, pay_in_advance: true, events_count: 1, amount_cents: '0.0000' });
    expect(second).toMatchObject({ units: '0.0000', unit_amount_cents: '0.0000' });

    // +8: the sum is 13, price 1300, already billed 1000 + 0: 300 (the part above the max of 10).
    // Units: the event's 8 (the aggregation's delta; Lago would show the 3 units above its max).
    const third = await bill(s, 'storage', march(4), { value: 8 });
    expect(third).toMatchObject({ pay_in_advance: true, events_count: 1, amount_cents: '300.0000', units: '8.0000' });
    await expectOwnInvoice(s, third, '300.0000');

    // Two invoices, one per positive fee; 1300 = price of the period's 13 units.
    expect((await invoicesOf(s)).map((i) => i.id).sort()).toEqual([first.invoice_id, third.invoice_id].sort());
    expect(total(await feesOf(s))).toBe(1300);
  });
});

// ---- 2. graduated with a first-tier flat fee, count ---------------------------------------------

describe('a graduated charge in advance on a count metric', () => {
  it("bills the first tier's flat amount with the first event, then the exact increments across tiers", async () => {
    // GRADUATED: price(n) = 100 n + 50 for 1 <= n <= 2; 250 + 40 (n − 2) + 20 for n > 2.
    const s = await setup({ calls: { aggregation_type: 'count' } }, [GRADUATED]);
    const fees = await billEach(s, 'calls', 2, [{}, {}, {}, {}]);
    // 1: price(1) − 0 (the flat is not in "before") = 100 + 50 = 150.
    // 2: price(2) − 150 = 250 − 150 = 100.
    // 3: price(3) − 250 = 310 − 250 = 60 (crosses into tier 2: 40 + its flat 20).
    // 4: price(4) − 310 = 350 − 310 = 40.
    expect(fees.map((f) => [f.units, f.events_count, f.amount_cents])).toEqual([
      ['1.0000', 1, '150.0000'],
      ['1.0000', 1, '100.0000'],
      ['1.0000', 1, '60.0000'],
      ['1.0000', 1, '40.0000'],
    ]);
    for (const fee of fees) await expectOwnInvoice(s, fee, fee.amount_cents);
    // Σ = 350 = price(4).
    expect(total(fees)).toBe(350);
    expect(await invoicesOf(s)).toHaveLength(4);
  });
});

// ---- 3. package, percentage, dynamic ------------------------------------------------------------

describe('package, percentage and dynamic charges in advance', () => {
  it('bill each event the exact increment of its model', async () => {
    const s = await setup(
      {
        seats: { aggregation_type: 'sum', field_name: 'seats' },
        payments: { aggregation_type: 'sum', field_name: 'amount' },
        items: { aggregation_type: 'sum', field_name: 'quantity' },
      },
      [
        // 500 cents per started package of 10 units, after 5 free units.
        { metric: 'seats', charge_model: 'package', pay_in_advance: true, properties: { amount: '500', package_size: 10, free_units: 5 } },
        // 1 % of the amount + 50 cents (0.50) per transaction.
        { metric: 'payments', charge_model: 'percentage', pay_in_advance: true, properties: { rate: '1', fixed_amount: '50' } },
        // Σ unit_price (cents) × quantity of the events (billing-rules.md, dynamic).
        { metric: 'items', charge_model: 'dynamic', pay_in_advance: true, properties: {} },
      ],
    );

    // Package: units 3 → 0 paid → 0; 7 → 2 paid → 1 package = 500; 13 → 8 paid → still 1 package → 0;
    // 23 → 18 paid → 2 packages = 1000, − 500 = 500.
    const pkg = await billEach(s, 'seats', 2, [{ seats: 3 }, { seats: 4 }, { seats: 6 }, { seats: 10 }]);
    expect(pkg.map((f) => [f.units, f.amount_cents, f.invoice_id === null])).toEqual([
      ['3.0000', '0.0000', true],
      ['4.0000', '500.0000', false],
      ['6.0000', '0.0000', true],
      ['10.0000', '500.0000', false],
    ]);
    await expectOwnInvoice(s, pkg[1]!, '500.0000');
    await expectOwnInvoice(s, pkg[3]!, '500.0000');

    // Percentage: 10000 → 1 % = 100 + 50 = 150; total 12500 → 125 + 2 × 50 = 225, − 150 = 75;
    // total 12850 → 128.5 + 150 = 278.5, − 225 = 53.5 (a fee of half a cent; the invoice total is
    // rounded half up to 54).
    const pct = await billEach(s, 'payments', 6, [{ amount: 10000 }, { amount: 2500 }, { amount: 350 }]);
    expect(pct.map((f) => [f.units, f.amount_cents])).toEqual([
      ['10000.0000', '150.0000'],
      ['2500.0000', '75.0000'],
      ['350.0000', '53.5000'],
    ]);
    await expectOwnInvoice(s, pct[0]!, '150.0000');
    await expectOwnInvoice(s, pct[2]!, '54.0000');

    // Dynamic: 125 × 2 = 250; "19.99" × 3 = 59.97; 1000 × 1 = 1000. Units are the quantities.
    const dyn = await billEach(s, 'items', 9, [
      { unit_price: 125, quantity: 2 },
      { unit_price: '19.99', quantity: 3 },
      { unit_price: 1000, quantity: 1 },
    ]);
    expect(dyn.map((f) => [f.units, f.amount_cents])).toEqual([
      ['2.0000', '250.0000'],
      ['3.0000', '59.9700'],
      ['1.0000', '1000.0000'],
    ]);
    await expectOwnInvoice(s, dyn[1]!, '60.0000'); // 59.97 rounded half up to whole cents

    // One invoice per positive fee: 2 + 3 + 3.
    expect(await invoicesOf(s)).toHaveLength(8);
  });
});

// ---- 4. duplicates, batches, order --------------------------------------------------------------

describe('duplicates, batches and events out of order', () => {
  it('bills each stored event exactly once, the total being the price of all of them', async () => {
    // The graduated tiers of test 2: price(1..5) = 150, 250, 310, 350, 390.
    const s = await setup({ calls: { aggregation_type: 'count' } }, [GRADUATED]);
    const chargeId = s.charge('calls').id;

    // March 10: 150.
    const tx = uid('tx');
    ok(await postEvent(s, 'calls', march(10), {}, tx), 201);
    await awaitFees(s, chargeId, 1);
    // The same transaction again: 409, nothing stored, nothing billed.
    expectError(await postEvent(s, 'calls', march(10), {}, tx), 409, 'already_exists', ['existing_event_id']);

    // March 5, before the first: price(2) − 150 = 100.
    ok(await postEvent(s, 'calls', march(5)), 201);
    let fees = await awaitFees(s, chargeId, 2);
    expect(amounts(fees)).toEqual(['100.0000', '150.0000']);

    // A batch: three new events out of timestamp order, and the duplicate again (counted, not stored).
    const sent = [
      [uid('tx'), march(15)],
      [uid('tx'), march(11)],
      [tx, march(10)],
      [uid('tx'), march(12)],
    ] as const;
    const batch = ok<{ ingested: number; duplicates: number; errors: unknown[] }>(
      await api(s, 'POST', '/v1/events/batch', {
        events: sent.map(([id, at]) => ({
          transaction_id: id,
          external_customer_id: s.customer.external_id,
          code: s.metrics.calls!.code,
          timestamp: at,
        })),
      }),
      201,
    );
    expect(batch).toMatchObject({ ingested: 3, duplicates: 1, errors: [] });
    // Billed in timestamp order, counts 3, 4, 5: March 11 310 − 250 = 60, March 12 350 − 310 = 40,
    // March 15 390 − 350 = 40.
    fees = await awaitFees(s, chargeId, 5);
    const byTx = new Map(fees.map((f) => [f.event_transaction_id, f.amount_cents]));
    expect([tx, sent[1][0], sent[3][0], sent[0][0]].map((id) => byTx.get(id))).toEqual(['150.0000', '60.0000', '40.0000', '40.0000']);
    expect(amounts(fees)).toEqual(['100.0000', '150.0000', '40.0000', '40.0000', '60.0000']);
    expect(fees.every((f) => f.events_count === 1 && f.units === '1.0000' && f.pay_in_advance && f.invoice_id !== null)).toBe(true);
    // Σ = 390 = price(5), on 5 invoices.
    expect(total(fees)).toBe(390);
    expect(new Set(fees.map((f) => f.invoice_id)).size).toBe(5);
    // Still 5 a moment later (no event billed twice).
    await sleep(1500);
    expect(await feesOf(s, chargeId)).toHaveLength(5);
    expect(await invoicesOf(s)).toHaveLength(5);
  });
});

// ---- 5. the period end --------------------------------------------------------------------------

describe('the period end', () => {
  it('bills the base fee and the in-arrear charge, not the in-advance one again; an event whose signal was lost is billed in advance at the close', async () => {
    const s = await setup(
      { storage: { aggregation_type: 'sum', field_name: 'value' }, calls: { aggregation_type: 'count' } },
      [
        { metric: 'storage', charge_model: 'standard', properties: { amount: '100' }, pay_in_advance: true },
        { metric: 'calls', charge_model: 'standard', properties: { amount: '25' } },
      ],
      1000,
    );
    const advanceCharge = s.charge('storage').id;
    const arrearCharge = s.charge('calls').id;
    // In advance: 4 units × 100 = 400 now.
    const fee = await bill(s, 'storage', march(5), { value: 4 });
    await expectOwnInvoice(s, fee, '400.0000');
    // In arrear: 3 calls, nothing billed before the period ends.
    for (const day of [6, 7, 8]) ok(await postEvent(s, 'calls', march(day)), 201);
    // An event whose signal never reached the workflow (stored without it): 2 more units, not billed yet.
    const lost = uid('tx');
    const [stored] = await new Ingestor(stack.db, new CatalogView(stack.db)).ingest(
      { _id: s.org.id, timezone: 'UTC' },
      [
        {
          transaction_id: lost,
          external_customer_id: s.customer.external_id,
          code: s.metrics.storage!.code,
          timestamp: new Date(march(9)),
          properties: { value: 2 },
        },
      ],
      new Date(NOW),
    );
    expect(stored!.status).toBe('created');
    await sleep(1000);
    expect(await feesOf(s, arrearCharge)).toEqual([]);
    expect(await feesOf(s, advanceCharge)).toHaveLength(1);

    await advance(s, PERIOD_END);
    const invoices = await invoicesOf(s);
    expect(invoices).toHaveLength(3);
    // The period's close billed the missed event in advance first: 6 units × 100 − 400 billed = 200, on an invoice of its own.
    const missed = (await feesOf(s, advanceCharge)).find((f) => f.event_transaction_id === lost)!;
    expect([missed.amount_cents, missed.pay_in_advance]).toEqual(['200.0000', true]);
    expect(invoices.find((i) => i.id === missed.invoice_id)).toMatchObject({ status: 'finalized', total: '200.0000' });
    const closing = invoices.find((i) => i.id !== fee.invoice_id && i.id !== missed.invoice_id)!;
    // Base fee 1000 (March, 31 days) + 3 × 25 = 75: 1075; no fee of the in-advance charge.
    expect(closing).toMatchObject({
      invoice_type: 'subscription',
      status: 'finalized',
      issuing_date: '2030-04-01',
      period_started_at: START,
      period_ended_at: PERIOD_END,
      fees_amount_cents: '1075.0000',
      total: '1075.0000',
    });
    const lines = closing.fees!.map((f) => [f.fee_type, f.charge_id, f.units, f.amount_cents, f.pay_in_advance]).sort();
    expect(lines).toEqual(
      [
        ['charge', arrearCharge, '3.0000', '75.0000', false],
        ['subscription', null, '31.0000', '1000.0000', false],
      ].sort(),
    );
    // The in-advance charge has its two fees, none on the closing invoice.
    expect((await feesOf(s, advanceCharge)).map((f) => f.id).sort()).toEqual([fee.id, missed.id].sort());
  });
});

// ---- 6. invoiceable: false ----------------------------------------------------------------------

describe('a charge in advance that is not invoiceable', () => {
  it('creates a taxed fee per event without invoice, and invoiceable: false needs pay_in_advance', async () => {
    const s = await setup({ storage: { aggregation_type: 'sum', field_name: 'value' } }, [
      { metric: 'storage', charge_model: 'standard', properties: { amount: '100' }, pay_in_advance: true, invoiceable: false },
    ]);
    // The organization's 20 % tax applies to fees without an invoice too.
    ok(await api(s, 'POST', '/v1/taxes', { code: uid('VAT'), name: 'VAT', rate: '0.2', applied_to_organization: true }), 201);
    // 2 × 100 = 200; then 5 more: price(7) 700 − 200 = 500.
    const first = await bill(s, 'storage', march(2), { value: 2 });
    const second = await bill(s, 'storage', march(3), { value: 5 });
    expect(
      [first, second].map((f) => [
        f.invoice_id,
        f.pay_in_advance,
        f.fee_type,
        f.events_count,
        f.units,
        f.amount_cents,
        f.taxes_amount_cents,
        f.total_amount_cents,
        f.applied_taxes.map((t) => t.tax_rate),
      ]),
    ).toEqual([
      [null, true, 'charge', 1, '2.0000', '200.0000', '40.0000', '240.0000', ['0.2']],
      [null, true, 'charge', 1, '5.0000', '500.0000', '100.0000', '600.0000', ['0.2']],
    ]);
    for (const fee of [first, second]) expect(ok<FeeResource>(await api(s, 'GET', `/v1/fees/${fee.id}`))).toEqual(fee);
    expect(await invoicesOf(s)).toEqual([]);
    // Listed by customer too.
    const byCustomer = ok<FeeResource[]>(await api(s, 'GET', `/v1/fees?customer_id=${s.customer.id}&fee_type=charge`));
    expect(byCustomer.map((f) => f.id).sort()).toEqual([first.id, second.id].sort());

    // In arrear, a charge must be invoiceable.
    const res = await api(s, 'POST', '/v1/plans', {
      code: uid('plan'),
      name: 'Arrear',
      interval: 'monthly',
      currency: 'USD',
      charges: [{ billable_metric_id: s.metrics.storage!.id, charge_model: 'standard', properties: { amount: '1' }, invoiceable: false }],
    });
    expectValidationError(res, 'charges.0.invoiceable');
  });
});

describe('a step retried after a crash', () => {
  it('issues the invoice of a fee whose step died before its invoice, once, at the same amount', async () => {
    const s = await setup({ storage: { aggregation_type: 'sum', field_name: 'gb' } }, [
      { metric: 'storage', charge_model: 'standard', properties: { amount: '100' }, pay_in_advance: true },
    ]);
    // 3 GB at 100 cents: 300, on an invoice of its own.
    const fee = await bill(s, 'storage', march(19), { gb: 3 });
    expect(fee.amount_cents).toBe('300.0000');
    const invoiceId = fee.invoice_id!;
    // The step "died" after writing the fee and before its invoice: the invoice is not there.
    await stack.db.models.Invoice.deleteOne({ _id: invoiceId });
    const event = (await stack.db.models.Event.findOne({ transaction_id: fee.event_transaction_id }).lean())!;
    const state = await stack.temporal.client.workflow.getHandle(`subscription/${s.sub.id}`).query(subscriptionStateQuery);
    const ctx = subscriptionBillingContext(stack.db, { models: stack.db.models, temporal: stack.temporal });
    // The retried step (and one more, a duplicated signal) issues it once, at the same amount.
    for (let attempt = 0; attempt < 2; attempt++) {
      const result = await billEventsInAdvance(ctx, state, [event._id], new Date(NOW));
      expect(result.invoiceIds).toEqual([invoiceId]);
    }
    const reissued = ok<InvoiceResource>(await api(s, 'GET', `/v1/invoices/${invoiceId}`));
    expect([reissued.status, reissued.total, reissued.fees!.map((f) => f.id)]).toEqual(['finalized', '300.0000', [fee.id]]);
    expect(await feesOf(s, s.charge('storage').id)).toHaveLength(1);
  });
});

describe('in advance on a recurring metric (seats)', () => {
  it('bills each added seat when it arrives (prorated: for the days left), never a seat twice, and the carried seats at the next period start', async () => {
    // Two recurring sum metrics, 1000 cents a seat a month: one charge plain, one prorated.
    const s = await setup(
      {
        seats: { aggregation_type: 'sum', field_name: 'seats', recurring: true },
        pseats: { aggregation_type: 'sum', field_name: 'seats', recurring: true },
      },
      [
        { metric: 'seats', charge_model: 'standard', properties: { amount: '1000' }, pay_in_advance: true },
        { metric: 'pseats', charge_model: 'standard', properties: { amount: '1000' }, pay_in_advance: true, prorated: true },
      ],
    );
    const both = async (day: number, seats: number) => [
      (await bill(s, 'seats', march(day), { seats })).amount_cents,
      (await bill(s, 'pseats', march(day), { seats })).amount_cents,
    ];
    // March has 31 days. +2 on March 1: 2000 each (31/31).
    expect(await both(1, 2)).toEqual(['2000.0000', '2000.0000']);
    // +1 on March 11: 1000; prorated, March 11-31 = 21 days: 1000 x 21/31 = 677.419354... -> 677.4194.
    expect(await both(11, 1)).toEqual(['1000.0000', '677.4194']);
    // -1 on March 15, then +1 on March 18: back to 3 seats, already billed: 0 and 0.
    expect(await both(15, -1)).toEqual(['0.0000', '0.0000']);
    expect(await both(18, 1)).toEqual(['0.0000', '0.0000']);

    // April 1: the 3 carried seats are billed in full for April (3000 each), on the invoice issued
    // at the boundary, and March is not billed again.
    await advance(s, '2030-04-10T00:00:00.000Z');
    const boundary = (await invoicesOf(s)).find((i) => i.fees!.some((f) => f.pay_in_advance && f.events_count === 0))!;
    expect(boundary).toBeDefined();
    const usage = boundary.fees!.filter((f) => f.fee_type === 'charge');
    expect(
      usage.map((f) => [f.charge_id, f.amount_cents, f.units, f.pay_in_advance, f.period_started_at, f.period_ended_at]).sort(),
    ).toEqual(
      [
        [s.charge('seats').id, '3000.0000', '3.0000', true, '2030-04-01T00:00:00.000Z', '2030-05-01T00:00:00.000Z'],
        [s.charge('pseats').id, '3000.0000', '3.0000', true, '2030-04-01T00:00:00.000Z', '2030-05-01T00:00:00.000Z'],
      ].sort(),
    );
    // In April (30 days) one more seat on April 5: 1000; prorated, April 5-30 = 26 days: 866.6667.
    const april5 = '2030-04-05T10:00:00.000Z';
    expect([
      (await bill(s, 'seats', april5, { seats: 1 })).amount_cents,
      (await bill(s, 'pseats', april5, { seats: 1 })).amount_cents,
    ]).toEqual(['1000.0000', '866.6667']);
    // Every fee of each charge, in all: the exact sums.
    expect(total(await feesOf(s, s.charge('seats').id))).toBe(2000 + 1000 + 3000 + 1000);
    expect(total(await feesOf(s, s.charge('pseats').id))).toBeCloseTo(2000 + 677.4194 + 3000 + 866.6667, 4);
  }, 120_000);
});
