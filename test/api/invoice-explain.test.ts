// GET /v1/invoices/{id}/explain (issue 18, item 4) on a real stack: a subscription in arrear on a
// test clock bills January with a graduated charge whose usage crosses a tier, a charge filter with
// its own tiers, a 20 % tax, two coupons (a fixed amount, then a percentage of what it left), a
// credit note from an earlier invoice and a wallet. The explanation names what each fee was priced
// from (plan, charge, filter, daily rows and events, tiers) and replays the arithmetic step by step
// to the invoice's total; every step's figure is asserted exactly. Amounts in cents (billing-rules.md).
//
// January 2030, calendar, UTC, 31 days. The charge (count of `calls`):
//   default bucket (region us, or none): [0-10] at 10, [10-∞) at 5 plus 200 once reached
//     14 calls: 10 x 10 = 100, then 4 x 5 + 200 = 220           -> 320
//   filter region=eu: [0-5] at 20 plus 50, [5-∞) at 8
//     7 calls: 5 x 20 + 50 = 150, then 2 x 8 = 16                -> 166
//   base fee 1000 for 31 of 31 days                               -> 1000   subtotal 1486
//   VAT 20 %: 64 + 33.2 + 200 = 297.2, rounded                   -> 297    1783
//   coupon FIXED100 (applied first): 100                          -> 1683
//   coupon TENPCT: 10 % of 1486 - 100 = 138.6, rounded            -> 139    1544
//   credit note of 120 on an earlier one-off invoice              -> 1424
//   wallet of 10 credits at 1 (1000 cents)                        -> 424    total
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { CreditNoteResource } from '../../src/resources/credit-note';
import type { CustomerResource } from '../../src/resources/customer';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { InvoiceExplanation } from '../../src/resources/invoice-explanation';
import type { PlanResource } from '../../src/resources/plan';
import type { SubscriptionResource } from '../../src/resources/subscription';
import type { TestClockResource } from '../../src/resources/test-clock';
import type { WalletResource } from '../../src/resources/wallet';
import { workflowIds } from '../../src/temporal/workflow-ids';
import { eventually, expectError, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let org: TestOrganization;
let other: TestOrganization;

const uid = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
type Headers = Record<string, string>;
const post = (url: string, payload?: unknown, headers: Headers = org.headers) =>
  stack.app.inject({ method: 'POST', url, headers, ...(payload === undefined ? {} : { payload: payload as object }) });
const get = (url: string, headers: Headers = org.headers) => stack.app.inject({ method: 'GET', url, headers });

function ok<T>(res: Awaited<ReturnType<typeof get>>, status = 200): T {
  expect(res.statusCode, res.body).toBe(status);
  return res.json<T>();
}

async function advance(clockId: string, iso: string): Promise<void> {
  worker.assertAlive();
  ok(await post(`/v1/test_clocks/${clockId}/advance`, { frozen_time: iso }), 202);
  await eventually(
    async () => {
      worker.assertAlive();
      const clock = ok<TestClockResource>(await get(`/v1/test_clocks/${clockId}`));
      return clock.status === 'ready' ? clock : undefined;
    },
    60_000,
    `test clock ready at ${iso}`,
  );
}

async function sendCalls(customer: CustomerResource, metric: BillableMetricResource, calls: [string, string | null][]): Promise<void> {
  const body = ok<{ ingested: number; errors: unknown[] }>(
    await post('/v1/events/batch', {
      events: calls.map(([timestamp, region]) => ({
        transaction_id: uid('tx'),
        external_customer_id: customer.external_id,
        code: metric.code,
        timestamp,
        properties: region ? { region } : {},
      })),
    }),
    201,
  );
  expect(body.errors).toEqual([]);
  expect(body.ingested).toBe(calls.length);
}

const hours = (day: string, from: number, n: number) =>
  Array.from({ length: n }, (_, i) => `${day}T${String(from + i).padStart(2, '0')}:00:00.000Z`);

beforeAll(async () => {
  stack = await createTestStack();
  worker = await startStackWorker(stack);
  org = await createOrganization(stack.app, { name: 'Explain Corp', timezone: 'UTC', events_rate_limit_per_minute: 100_000 });
  other = await createOrganization(stack.app, { name: 'Other Corp' });
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

describe('GET /v1/invoices/{id}/explain', () => {
  let customer: CustomerResource;
  let metric: BillableMetricResource;
  let plan: PlanResource;
  let subscription: SubscriptionResource;
  let oneOff: InvoiceResource;
  let note: CreditNoteResource;
  let wallet: WalletResource;
  let january: InvoiceResource;
  let explained: InvoiceExplanation;
  let taxCode: string;

  beforeAll(async () => {
    const clock = ok<TestClockResource>(await post('/v1/test_clocks', { name: uid('clock'), frozen_time: '2030-01-01T00:00:00Z' }), 201);
    customer = ok<CustomerResource>(
      await post('/v1/customers', { external_id: uid('cus'), currency: 'USD', test_clock_id: clock.id }),
      201,
    );
    taxCode = uid('VAT');
    ok(await post('/v1/taxes', { code: taxCode, name: 'VAT 20%', rate: '0.2' }), 201);
    ok(await post('/v1/taxes/apply', { tax_code: taxCode, taxable_type: 'customer', taxable_id: customer.id }), 201);

    // An earlier invoice (500 + 100 of tax) and a credit note of 120 on it, for January's invoice.
    oneOff = ok<InvoiceResource>(
      await post('/v1/invoices/one_off', { customer_id: customer.id, line_items: [{ description: 'Setup', unit_price: 500 }] }),
      201,
    );
    oneOff = await eventually(
      async () => {
        const now = ok<InvoiceResource>(await get(`/v1/invoices/${oneOff.id}`));
        return now.status === 'finalized' ? now : undefined;
      },
      20_000,
      'the one-off invoice finalized',
    );
    note = ok<CreditNoteResource>(
      await post('/v1/credit_notes', {
        invoice_id: oneOff.id,
        reason: 'other',
        items: [{ fee_id: oneOff.fees![0]!.id, amount_cents: 120 }],
      }),
      201,
    );
    note = ok<CreditNoteResource>(await post(`/v1/credit_notes/${note.id}/finalize`));

    // Two coupons, used in the order they were applied, and a wallet of 1000 cents.
    const fixed = uid('FIXED100');
    const percent = uid('TENPCT');
    ok(
      await post('/v1/coupons', {
        code: fixed,
        name: 'Fixed 100',
        coupon_type: 'fixed_amount',
        amount_cents: '100',
        amount_currency: 'USD',
        frequency: 'once',
      }),
      201,
    );
    ok(
      await post('/v1/coupons', { code: percent, name: '10 %', coupon_type: 'percentage', percentage_rate: '10', frequency: 'once' }),
      201,
    );
    ok(await post('/v1/coupons/apply', { customer_id: customer.id, coupon_code: fixed }), 201);
    await new Promise((r) => setTimeout(r, 10)); // distinct application instants: the order is theirs
    ok(await post('/v1/coupons/apply', { customer_id: customer.id, coupon_code: percent }), 201);
    wallet = ok<WalletResource>(
      await post('/v1/wallets', { customer_id: customer.id, name: 'Prepaid', initial_granted_credits: '10' }),
      201,
    );

    metric = ok<BillableMetricResource>(
      await post('/v1/billable_metrics', {
        code: uid('calls'),
        name: 'API calls',
        aggregation_type: 'count',
        filters: [{ key: 'region', values: ['eu', 'us'] }],
      }),
      201,
    );
    plan = ok<PlanResource>(
      await post('/v1/plans', {
        code: uid('plan'),
        name: 'Graduated calls',
        interval: 'monthly',
        amount_cents: 1000,
        currency: 'USD',
        charges: [
          {
            billable_metric_id: metric.id,
            charge_model: 'graduated',
            properties: {
              graduated_ranges: [
                { from_value: 0, to_value: 10, per_unit_amount: '10', flat_amount: '0' },
                { from_value: 10, to_value: null, per_unit_amount: '5', flat_amount: '200' },
              ],
            },
            filters: [
              {
                values: { region: ['eu'] },
                invoice_display_name: 'Calls in the EU',
                properties: {
                  graduated_ranges: [
                    { from_value: 0, to_value: 5, per_unit_amount: '20', flat_amount: '50' },
                    { from_value: 5, to_value: null, per_unit_amount: '8', flat_amount: '0' },
                  ],
                },
              },
            ],
          },
        ],
      }),
      201,
    );
    subscription = ok<SubscriptionResource>(
      await post('/v1/subscriptions', { external_id: uid('sub'), customer_id: customer.id, plan_id: plan.id }),
      201,
    );

    await advance(clock.id, '2030-01-25T00:00:00Z');
    // Default bucket: 8 calls from the US on the 3rd, 6 without a region on the 10th; the EU: 3 on
    // the 5th and 4 late on the 24th.
    await sendCalls(customer, metric, [
      ...hours('2030-01-03', 10, 8).map((t): [string, string] => [t, 'us']),
      ...hours('2030-01-10', 10, 6).map((t): [string, null] => [t, null]),
      ...hours('2030-01-05', 10, 3).map((t): [string, string] => [t, 'eu']),
      ...hours('2030-01-24', 20, 4).map((t): [string, string] => [t, 'eu']),
    ]);
    await advance(clock.id, '2030-02-01T00:00:00Z');

    const invoices = ok<InvoiceResource[]>(await get(`/v1/invoices?subscription_id=${subscription.id}`));
    expect(invoices).toHaveLength(1);
    january = ok<InvoiceResource>(await get(`/v1/invoices/${invoices[0]!.id}`));
    explained = ok<InvoiceExplanation>(await get(`/v1/invoices/${january.id}/explain`));
  }, 180_000);

  it('the invoice itself is what the header comment computes', () => {
    expect(january).toMatchObject({
      status: 'finalized',
      fees_amount_cents: '1486.0000',
      subtotal: '1486.0000',
      tax_amount: '297.0000',
      coupons_amount_cents: '239.0000',
      credit_notes_amount_cents: '120.0000',
      prepaid_credit_amount: '1000.0000',
      total: '424.0000',
    });
  });

  it('adds up to the total, line by line: every step is the previous running figure plus its amount', () => {
    const chargeId = plan.charges[0]!.id;
    const filterId = plan.charges[0]!.filters[0]!.id;
    const fees = Object.fromEntries(explained.fees.map((f) => [f.key, f.fee_id]));
    const [fixedCoupon, percentCoupon] = explained.coupons;
    expect(explained.steps).toEqual([
      {
        kind: 'fee',
        ref_id: fees[`charge/${chargeId}`],
        description: `${metric.code}: 14.0000 units`,
        amount_cents: '320.0000',
        running_total_cents: '320.0000',
      },
      {
        kind: 'fee',
        ref_id: fees[`charge/${chargeId}/filter/${filterId}`],
        description: 'Calls in the EU: 7.0000 units',
        amount_cents: '166.0000',
        running_total_cents: '486.0000',
      },
      {
        kind: 'fee',
        ref_id: fees.subscription,
        description: 'base fee: 31 of 31 days of 1000',
        amount_cents: '1000.0000',
        running_total_cents: '1486.0000',
      },
      {
        kind: 'tax',
        ref_id: explained.taxes[0]!.tax_id,
        description: `${taxCode} at 0.2 of 1486.0000`,
        amount_cents: '297.2000',
        running_total_cents: '1783.2000',
      },
      {
        kind: 'tax_rounding',
        ref_id: null,
        description: 'tax amount rounded to whole cents',
        amount_cents: '-0.2000',
        running_total_cents: '1783.0000',
      },
      {
        kind: 'coupon',
        ref_id: fixedCoupon!.applied_coupon_id,
        description: `coupon ${fixedCoupon!.coupon_code}`,
        amount_cents: '-100.0000',
        running_total_cents: '1683.0000',
      },
      {
        kind: 'coupon',
        ref_id: percentCoupon!.applied_coupon_id,
        description: `coupon ${percentCoupon!.coupon_code} (10 % of 1386.0000)`,
        amount_cents: '-139.0000',
        running_total_cents: '1544.0000',
      },
      {
        kind: 'credit_note',
        ref_id: note.id,
        description: `credit note ${note.number}`,
        amount_cents: '-120.0000',
        running_total_cents: '1424.0000',
      },
      {
        kind: 'wallet',
        ref_id: explained.wallets[0]!.wallet_transaction_id,
        description: 'wallet Prepaid',
        amount_cents: '-1000.0000',
        running_total_cents: '424.0000',
      },
    ]);

    // The arithmetic of every step, and the figures it must reach on the invoice.
    let running = 0;
    for (const step of explained.steps) {
      running = Math.round((running + Number(step.amount_cents)) * 10_000) / 10_000;
      expect(Number(step.running_total_cents)).toBe(running);
    }
    const after = (kind: string) => explained.steps.filter((s) => s.kind === kind).at(-1)!.running_total_cents;
    expect(after('fee')).toBe(january.fees_amount_cents);
    expect(after('tax_rounding')).toBe((Number(january.subtotal) + Number(january.tax_amount)).toFixed(4));
    expect(explained.steps.at(-1)!.running_total_cents).toBe(january.total);
    const total = (kind: string) =>
      explained.steps
        .filter((s) => s.kind === kind)
        .reduce((acc, s) => acc - Number(s.amount_cents), 0)
        .toFixed(4);
    expect(total('coupon')).toBe(january.coupons_amount_cents);
    expect(total('credit_note')).toBe(january.credit_notes_amount_cents);
    expect(total('wallet')).toBe(january.prepaid_credit_amount);
    expect(explained.amounts).toEqual({
      fees_amount_cents: '1486.0000',
      subtotal: '1486.0000',
      tax_amount: '297.0000',
      coupons_amount_cents: '239.0000',
      progressive_billing_credit_amount_cents: '0.0000',
      credit_notes_amount_cents: '120.0000',
      prepaid_credit_amount: '1000.0000',
      total: '424.0000',
    });
    expect(explained.adds_up).toBe(true);
  });

  it('lists the taxes, coupons, credit notes and wallets it applied, in order', () => {
    expect(explained.taxes).toEqual([
      { tax_id: expect.stringMatching(UUID), tax_code: taxCode, tax_rate: '0.2', fees_amount_cents: '1486.0000', amount_cents: '297.2000' },
    ]);
    expect(explained.coupons.map(({ applied_coupon_id: _a, coupon_id: _c, coupon_code: _code, ...rest }) => rest)).toEqual([
      {
        coupon_type: 'fixed_amount',
        frequency: 'once',
        percentage_rate: null,
        fixed_amount_cents: '100.0000',
        base_amount_cents: '1486.0000',
        amount_cents: '100.0000',
      },
      {
        coupon_type: 'percentage',
        frequency: 'once',
        percentage_rate: '10',
        fixed_amount_cents: null,
        base_amount_cents: '1386.0000',
        amount_cents: '139.0000',
      },
    ]);
    expect(explained.credit_notes).toEqual([
      {
        credit_note_id: note.id,
        number: note.number,
        reason: 'other',
        credit_amount_cents: note.credit_amount_cents,
        amount_cents: '120.0000',
      },
    ]);
    expect(explained.wallets).toEqual([
      {
        wallet_id: wallet.id,
        wallet_transaction_id: expect.stringMatching(UUID),
        name: 'Prepaid',
        code: wallet.code ?? null,
        priority: 1,
        rate_amount: '1',
        credit_amount: '10',
        amount_cents: '1000.0000',
      },
    ]);
    expect(explained.progressive_billing_credits).toEqual([]);
  });

  it('explains the graduated fee of the default bucket: charge, usage sources and tiers as billed', () => {
    const fee = explained.fees.find((f) => f.key === `charge/${plan.charges[0]!.id}`)!;
    expect(fee).toMatchObject({
      fee_type: 'charge',
      units: '14.0000',
      events_count: 14,
      unit_amount_cents: '22.8571',
      amount_cents: '320.0000',
      taxes_amount_cents: '64.0000',
      total_amount_cents: '384.0000',
      period_started_at: '2030-01-01T00:00:00.000Z',
      period_ended_at: '2030-02-01T00:00:00.000Z',
      recorded: true,
      base_fee: null,
      commitment: null,
      event: null,
    });
    expect(fee.charge).toEqual({
      id: plan.charges[0]!.id,
      charge_model: 'graduated',
      billable_metric: {
        id: metric.id,
        code: metric.code,
        name: 'API calls',
        aggregation_type: 'count',
        field_name: null,
        recurring: false,
      },
      filter: null,
      properties: {
        graduated_ranges: [
          { from_value: 0, to_value: 10, per_unit_amount: '10', flat_amount: '0' },
          { from_value: 10, to_value: null, per_unit_amount: '5', flat_amount: '200' },
        ],
      },
      pay_in_advance: false,
      prorated: false,
      min_amount_cents: null,
      max_amount_cents: null,
    });
    // Whole days come from the daily rows: the US calls of the 3rd and the region-less ones of the 10th.
    expect(fee.usage).toEqual({
      from: '2030-01-01T00:00:00.000Z',
      to: '2030-02-01T00:00:00.000Z',
      units: '14',
      events_count: 14,
      daily_rows: { count: 2, events_count: 14, first_usage_date: '2030-01-03', last_usage_date: '2030-01-10' },
      raw_events: { count: 0, first_event_at: null, last_event_at: null },
      events: { count: 14, first_event_at: '2030-01-03T10:00:00.000Z', last_event_at: '2030-01-10T15:00:00.000Z' },
    });
    expect(fee.pricing).toEqual({
      steps: [
        {
          description: 'units 0 to 10 at 10 each, plus 0 once reached',
          from_value: 0,
          to_value: 10,
          units: '10',
          per_unit_amount: '10',
          rate: null,
          flat_amount: '0',
          amount_cents: '100.0000',
          running_amount_cents: '100.0000',
        },
        {
          description: 'units 10 to ∞ at 5 each, plus 200 once reached',
          from_value: 10,
          to_value: null,
          units: '4',
          per_unit_amount: '5',
          rate: null,
          flat_amount: '200',
          amount_cents: '220.0000',
          running_amount_cents: '320.0000',
        },
      ],
      model_amount_cents: '320.0000',
      reproduced: true,
      proration: null,
      charge_amount_before_caps_cents: '486.0000',
      min_amount_cents: null,
      max_amount_cents: null,
      max_reduction_cents: '0.0000',
      min_true_up_cents: '0.0000',
    });
    expect(fee.taxes).toEqual([{ tax_id: explained.taxes[0]!.tax_id, tax_code: taxCode, tax_rate: '0.2', amount_cents: '64.0000' }]);
  });

  it("explains the filter's fee with the filter's own tiers", () => {
    const filter = plan.charges[0]!.filters[0]!;
    const fee = explained.fees.find((f) => f.key === `charge/${plan.charges[0]!.id}/filter/${filter.id}`)!;
    expect(fee).toMatchObject({ units: '7.0000', events_count: 7, amount_cents: '166.0000', taxes_amount_cents: '33.2000' });
    expect(fee.charge!.filter).toEqual({ id: filter.id, values: { region: ['eu'] } });
    expect(fee.charge!.properties).toEqual({
      graduated_ranges: [
        { from_value: 0, to_value: 5, per_unit_amount: '20', flat_amount: '50' },
        { from_value: 5, to_value: null, per_unit_amount: '8', flat_amount: '0' },
      ],
    });
    expect(fee.usage).toMatchObject({
      units: '7',
      events_count: 7,
      daily_rows: { count: 2, events_count: 7, first_usage_date: '2030-01-05', last_usage_date: '2030-01-24' },
      events: { count: 7, first_event_at: '2030-01-05T10:00:00.000Z', last_event_at: '2030-01-24T23:00:00.000Z' },
    });
    expect(fee.pricing!.steps.map((s) => [s.from_value, s.to_value, s.units, s.amount_cents, s.running_amount_cents])).toEqual([
      [0, 5, '5', '150.0000', '150.0000'],
      [5, null, '2', '16.0000', '166.0000'],
    ]);
  });

  it('explains the base fee with the plan as billed', () => {
    const fee = explained.fees.find((f) => f.key === 'subscription')!;
    expect(fee).toMatchObject({
      fee_type: 'subscription',
      units: '31.0000',
      amount_cents: '1000.0000',
      base_fee: { plan_amount_cents: '1000', interval: 'monthly', used_days: 31, period_days: 31 },
      charge: null,
      usage: null,
      pricing: null,
    });
    expect(explained.plan).toEqual({
      id: plan.id,
      code: plan.code,
      name: 'Graduated calls',
      interval: 'monthly',
      amount_cents: 1000,
      currency: 'USD',
    });
  });

  it('still shows the plan and charge as billed after the plan is edited', async () => {
    const charge = plan.charges[0]!;
    const edited = ok<PlanResource>(
      await stack.app.inject({
        method: 'PUT',
        url: `/v1/plans/${plan.id}`,
        headers: org.headers,
        payload: {
          name: 'Renamed',
          amount_cents: 5000,
          charges: [
            {
              id: charge.id,
              billable_metric_id: metric.id,
              charge_model: 'standard',
              properties: { amount: '99' },
            },
          ],
        },
      }),
    );
    expect(edited).toMatchObject({ name: 'Renamed', amount_cents: 5000 });
    const again = ok<InvoiceExplanation>(await get(`/v1/invoices/${january.id}/explain`));
    expect(again.plan).toMatchObject({ name: 'Graduated calls', amount_cents: 1000 });
    expect(again.fees).toEqual(explained.fees);
    expect(again.steps).toEqual(explained.steps);
  });

  it('names the workflow run and the activity that issued and finalized it', async () => {
    const workflowId = workflowIds.subscription(subscription.id);
    expect(explained.issued_by).toMatchObject({
      workflow_id: workflowId,
      run_id: expect.stringMatching(UUID),
      workflow_type: 'subscriptionWorkflow',
      activity_type: 'billSubscriptionPeriod',
      attempt: 1,
      task_queue: stack.taskQueue,
    });
    // Finalized at creation (no grace period): in the same activity.
    expect(explained.finalized_by).toMatchObject({
      workflow_id: workflowId,
      run_id: explained.issued_by!.run_id,
      activity_type: 'billSubscriptionPeriod',
    });
    // The run is one Temporal knows.
    const description = await stack.temporal.client.workflow.getHandle(workflowId, explained.issued_by!.run_id).describe();
    expect(description.type).toBe('subscriptionWorkflow');

    // The one-off invoice was created by the API (no activity) and finalized by its own workflow.
    const first = ok<InvoiceExplanation>(await get(`/v1/invoices/${oneOff.id}/explain`));
    expect(first.issued_by).toBeNull();
    expect(first.finalized_by).toMatchObject({ workflow_id: workflowIds.invoice(oneOff.id), workflow_type: 'invoiceWorkflow' });
    expect(first.plan).toBeNull();
    expect(first.fees.map((f) => [f.fee_type, f.amount_cents, f.recorded])).toEqual([['add_on', '500.0000', false]]);
    expect(first.steps.map((s) => [s.kind, s.amount_cents, s.running_total_cents])).toEqual([
      ['fee', '500.0000', '500.0000'],
      ['tax', '100.0000', '600.0000'],
    ]);
    expect(first.adds_up).toBe(true);
    expect(first.steps.at(-1)!.running_total_cents).toBe(oneOff.total);
  });

  it('an invoice issued before explanations were recorded answers null for what it lacks, and still adds up', async () => {
    // January's invoice as older versions wrote it: no plan, origins or progressive list, no fee basis.
    const { Fee, Invoice } = stack.db.models;
    await Invoice.collection.updateOne({ _id: january.id } as never, {
      $unset: { plan: '', issued_by: '', finalized_by: '', progressive_billing_credits: '' },
    });
    await Fee.collection.updateMany({ invoice_id: january.id }, { $unset: { basis: '' } });
    const old = ok<InvoiceExplanation>(await get(`/v1/invoices/${january.id}/explain`));
    expect(old).toMatchObject({ plan: null, issued_by: null, finalized_by: null, adds_up: true });
    expect(old.fees.every((f) => !f.recorded && f.charge === null && f.usage === null && f.pricing === null && f.base_fee === null)).toBe(
      true,
    );
    // The arithmetic needs only what every invoice stores (the labels are plainer).
    const figures = (steps: InvoiceExplanation['steps']) => steps.map(({ description: _d, ...figures }) => figures);
    expect(figures(old.steps)).toEqual(figures(explained.steps));
    expect(old.steps[2]!.description).toBe('subscription: 31.0000 units');
  });

  it("is 404 for another organization's invoice and for an unknown one; in the OpenAPI document", async () => {
    expectError(await get(`/v1/invoices/${january.id}/explain`, other.headers), 404, 'invoice_not_found');
    expectError(await get(`/v1/invoices/${randomUUID()}/explain`), 404, 'invoice_not_found');
    const doc = ok<{ paths: Record<string, Record<string, { responses: Record<string, unknown> }>> }>(
      await stack.app.inject({ method: 'GET', url: '/docs/openapi.json' }),
    );
    const route = doc.paths['/v1/invoices/{id}/explain']!.get!;
    expect(Object.keys(route.responses)).toEqual(expect.arrayContaining(['200', '404']));
  });
});

describe('GET /v1/invoices/{id}/explain: a charge minimum and a plan commitment', () => {
  it("names the minimum's true-up and the commitment's, and adds up", async () => {
    // March 2030: 10 calls at 2 = 20, lifted to the charge's minimum of 300 (a true-up of 280); the
    // charges (300) lifted to the plan's commitment of 1000 (a true-up of 700); base fee 500.
    const clock = ok<TestClockResource>(await post('/v1/test_clocks', { name: uid('clock'), frozen_time: '2030-03-01T00:00:00Z' }), 201);
    const customer = ok<CustomerResource>(
      await post('/v1/customers', { external_id: uid('cus'), currency: 'USD', test_clock_id: clock.id }),
      201,
    );
    const metric = ok<BillableMetricResource>(
      await post('/v1/billable_metrics', { code: uid('calls'), name: 'Calls', aggregation_type: 'count' }),
      201,
    );
    const plan = ok<PlanResource>(
      await post('/v1/plans', {
        code: uid('plan'),
        name: 'Committed',
        interval: 'monthly',
        amount_cents: 500,
        currency: 'USD',
        charges: [{ billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '2' }, min_amount_cents: 300 }],
      }),
      201,
    );
    ok(await post(`/v1/plans/${plan.id}/commitments`, { commitment_type: 'minimum_commitment', amount_cents: 1000 }), 201);
    const subscription = ok<SubscriptionResource>(
      await post('/v1/subscriptions', { external_id: uid('sub'), customer_id: customer.id, plan_id: plan.id }),
      201,
    );
    await advance(clock.id, '2030-03-20T00:00:00Z');
    await sendCalls(
      customer,
      metric,
      hours('2030-03-19', 8, 10).map((t): [string, null] => [t, null]),
    );
    await advance(clock.id, '2030-04-01T00:00:00Z');
    const [march] = ok<InvoiceResource[]>(await get(`/v1/invoices?subscription_id=${subscription.id}`));
    const explained = ok<InvoiceExplanation>(await get(`/v1/invoices/${march!.id}/explain`));

    const chargeId = plan.charges[0]!.id;
    expect(explained.fees.map((f) => [f.key, f.amount_cents])).toEqual([
      [`charge/${chargeId}`, '20.0000'],
      [`charge/${chargeId}/minimum`, '280.0000'],
      ['commitment', '700.0000'],
      ['subscription', '500.0000'],
    ]);
    const [usage, minimum, commitment] = explained.fees;
    expect(usage!.pricing).toMatchObject({
      steps: [{ description: '10 units at 2 each', units: '10', per_unit_amount: '2', amount_cents: '20.0000' }],
      model_amount_cents: '20.0000',
      reproduced: true,
      charge_amount_before_caps_cents: '20.0000',
      min_amount_cents: '300.0000',
      max_amount_cents: null,
      min_true_up_cents: '280.0000',
    });
    expect(minimum).toMatchObject({
      recorded: true,
      minimum_true_up: { min_amount_cents: '300.0000', charge_amount_before_caps_cents: '20.0000' },
      usage: null,
      pricing: null,
    });
    expect(commitment).toMatchObject({
      recorded: true,
      commitment: {
        commitment_amount_cents: '1000.0000',
        charges_amount_cents: '300.0000',
        true_up_amount_cents: '700.0000',
        used_days: null,
        period_days: null,
      },
    });
    expect(explained.steps.map((s) => [s.kind, s.amount_cents, s.running_total_cents])).toEqual([
      ['fee', '20.0000', '20.0000'],
      ['fee', '280.0000', '300.0000'],
      ['fee', '700.0000', '1000.0000'],
      ['fee', '500.0000', '1500.0000'],
    ]);
    expect(march!.total).toBe('1500.0000');
    expect(explained.adds_up).toBe(true);
  });
});
