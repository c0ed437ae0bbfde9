// Previews (issue 19; docs/previews.md), the cases test/api/previews.test.ts leaves out, on the real
// stack and test clocks: the current period with taxes (the customer's, the organization's) and a
// progressive invoice already issued in it; a period end that issues several invoices (the part
// before a pause and the resumed part; in advance, a scheduled downgrade's usage and the new plan's
// base fee), all of them in `invoices`; a paused subscription (the part before the pause, with its
// progressive credit; nothing once its period has ended); `at` with subscription_id still refused.
// Each preview equals, to the cent, what the period end then issues, and the hand-computed figures.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { CustomerResource } from '../../src/resources/customer';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { InvoicePreviewResource, InvoicesPreviewResource } from '../../src/resources/invoice-preview';
import type { PlanResource } from '../../src/resources/plan';
import type { SubscriptionResource } from '../../src/resources/subscription';
import type { TestClockResource } from '../../src/resources/test-clock';
import { eventually, expectError, expectValidationError } from '../support/http';
import { asPreview, billingCounts, sorted } from '../support/previews';
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
const at = (iso: string) => new Date(iso).toISOString();
type Response = Awaited<ReturnType<TestStack['app']['inject']>>;

function ok<T>(res: Response, status = 200): T {
  expect(res.statusCode, res.body).toBe(status);
  return res.json<T>();
}

/** The preview's top-level invoice and its `invoices`, each in the comparable shape. */
function split(preview: InvoicesPreviewResource): { top: InvoicePreviewResource; all: InvoicePreviewResource[] } {
  const { invoices, ...top } = preview;
  return { top: sorted(top), all: invoices.map(sorted) };
}

/** [period start, period end, base fee lines, charge lines, tax, progressive credit, total] of an invoice or a preview. */
const summary = (inv: InvoicePreviewResource | InvoiceResource) => [
  inv.period_started_at,
  inv.period_ended_at,
  inv.fees!.filter((f) => f.fee_type === 'subscription').map((f) => [f.units, f.amount_cents]),
  inv.fees!.filter((f) => f.fee_type === 'charge').map((f) => [f.units, f.amount_cents]),
  inv.tax_amount,
  inv.progressive_billing_credit_amount_cents,
  inv.total,
];

/** An organization of its own (its taxes apply to no other test), with a "calls" count metric, and the HTTP helpers. */
async function tenant(name: string) {
  const org: TestOrganization = await createOrganization(stack.app, {
    name,
    default_currency: 'USD',
    timezone: 'UTC',
    events_rate_limit_per_minute: 100_000,
  });
  const post = (url: string, payload?: unknown) =>
    stack.app.inject({ method: 'POST', url, headers: org.headers, ...(payload === undefined ? {} : { payload: payload as object }) });
  const put = (url: string, payload: unknown) => stack.app.inject({ method: 'PUT', url, headers: org.headers, payload: payload as object });
  const get = (url: string) => stack.app.inject({ method: 'GET', url, headers: org.headers });
  const calls = ok<BillableMetricResource>(
    await post('/v1/billable_metrics', { code: uid('calls'), name: 'Calls', aggregation_type: 'count' }),
    201,
  );

  return {
    post,
    put,
    get,
    async createClock(frozenTime: string): Promise<TestClockResource> {
      return ok<TestClockResource>(await post('/v1/test_clocks', { name: uid('clock'), frozen_time: frozenTime }), 201);
    },
    async createCustomer(clockId: string): Promise<CustomerResource> {
      return ok<CustomerResource>(await post('/v1/customers', { external_id: uid('cus'), currency: 'USD', test_clock_id: clockId }), 201);
    },
    /** A monthly plan of `amountCents`, `perCall` cents a call, with a usage threshold of `threshold` cents if given. */
    async createPlan(amountCents: number, perCall: string, threshold?: number): Promise<PlanResource> {
      const plan = ok<PlanResource>(
        await post('/v1/plans', {
          code: uid('plan'),
          name: 'Plan',
          interval: 'monthly',
          amount_cents: amountCents,
          currency: 'USD',
          charges: [{ billable_metric_id: calls.id, charge_model: 'standard', properties: { amount: perCall } }],
        }),
        201,
      );
      if (threshold !== undefined) ok(await post(`/v1/plans/${plan.id}/usage_thresholds`, { amount_cents: threshold }), 201);
      return plan;
    },
    async subscribe(body: Record<string, unknown>): Promise<SubscriptionResource> {
      worker.assertAlive();
      return ok<SubscriptionResource>(await post('/v1/subscriptions', { external_id: uid('sub'), ...body }), 201);
    },
    async advance(clockId: string, iso: string): Promise<void> {
      worker.assertAlive();
      expect((await post(`/v1/test_clocks/${clockId}/advance`, { frozen_time: iso })).statusCode).toBe(202);
      await eventually(
        async () => {
          worker.assertAlive();
          const clock = ok<TestClockResource>(await get(`/v1/test_clocks/${clockId}`));
          return clock.status === 'ready' ? clock : undefined;
        },
        60_000,
        `clock ready at ${iso}`,
      );
    },
    async sendCalls(customer: CustomerResource, timestamps: string[]): Promise<void> {
      const body = ok<{ ingested: number }>(
        await post('/v1/events/batch', {
          events: timestamps.map((timestamp) => ({
            transaction_id: uid('tx'),
            external_customer_id: customer.external_id,
            code: calls.code,
            timestamp,
          })),
        }),
        201,
      );
      expect(body.ingested).toBe(timestamps.length);
    },
    /** The subscription's invoices with their fees, in issue order. */
    async invoicesOf(subscriptionId: string): Promise<InvoiceResource[]> {
      const list = ok<InvoiceResource[]>(await get(`/v1/invoices?subscription_id=${subscriptionId}&limit=100`));
      const full = await Promise.all(list.map(async (i) => ok<InvoiceResource>(await get(`/v1/invoices/${i.id}`))));
      return full.sort((a, b) => a.number.localeCompare(b.number));
    },
    /** POST /v1/invoices/preview for a subscription, checking that it wrote nothing. */
    async preview(customer: CustomerResource, sub: SubscriptionResource): Promise<InvoicesPreviewResource> {
      const before = await billingCounts(stack.db.connection);
      const res = await post('/v1/invoices/preview', { customer_id: customer.external_id, subscription_id: sub.external_id });
      expect(await billingCounts(stack.db.connection)).toEqual(before);
      return ok<InvoicesPreviewResource>(res);
    },
    previewResponse(customer: CustomerResource, sub: SubscriptionResource): Promise<Response> {
      return post('/v1/invoices/preview', { customer_id: customer.id, subscription_id: sub.id });
    },
  };
}

/** 15 calls on `day`, one a minute from 10:00. */
const fifteenCalls = (day: string) => Array.from({ length: 15 }, (_, i) => `${day}T10:${String(i).padStart(2, '0')}:00Z`);

describe("preview of a subscription's current period with taxes and progressive billing credits", () => {
  const cases = [
    // The period's 3000 + its tax, less what the progressive invoice billed with its tax: the
    // customer pays the period's fees and taxes once (1800 + 1800 = 3600 with 20 %).
    { level: 'customer', rate: '0.2', tax: { progressive: '300.0000', period: '600.0000' }, credit: '1800.0000', total: '1800.0000' },
    { level: 'organization', rate: '0.1', tax: { progressive: '150.0000', period: '300.0000' }, credit: '1650.0000', total: '1650.0000' },
  ] as const;

  for (const c of cases) {
    it(`a ${c.level} tax of ${Number(c.rate) * 100}% and a progressive invoice earlier in the period: the preview equals the period's invoice to the cent`, async () => {
      const t = await tenant(`Previews with a ${c.level} tax`);
      // 1000 a month, 100 a call, a threshold at 1000 cents of usage.
      const plan = await t.createPlan(1000, '100', 1000);
      const clock = await t.createClock('2030-01-01T00:00:00Z');
      const customer = await t.createCustomer(clock.id);
      const code = uid('VAT');
      ok(
        await t.post('/v1/taxes', { code, name: `VAT ${c.rate}`, rate: c.rate, applied_to_organization: c.level === 'organization' }),
        201,
      );
      if (c.level === 'customer') {
        ok(await t.post('/v1/taxes/apply', { tax_code: code, taxable_type: 'customer', taxable_id: customer.id }), 201);
      }
      const sub = await t.subscribe({ customer_id: customer.id, plan_id: plan.code });

      // 15 calls on January 10th: 1500 of usage, past 1000; the check of the 11th bills it with its tax.
      await t.advance(clock.id, '2030-01-10T12:00:00Z');
      await t.sendCalls(customer, fifteenCalls('2030-01-10'));
      await t.advance(clock.id, '2030-01-11T12:00:00Z');
      const [progressive] = await t.invoicesOf(sub.id);
      expect(progressive).toMatchObject({
        invoice_type: 'progressive_billing',
        fees_amount_cents: '1500.0000',
        tax_amount: c.tax.progressive,
        progressive_billing_credit_amount_cents: '0.0000',
      });

      // 5 more calls: 2000 of usage, no other threshold crossed.
      await t.advance(clock.id, '2030-01-25T00:00:00Z');
      await t.sendCalls(customer, fifteenCalls('2030-01-20').slice(0, 5));
      const preview = await t.preview(customer, sub);
      // The period's invoice: 1000 + 20 calls = 3000, taxed in full; what the progressive invoice
      // billed, 1500 and its tax (billing-rules.md 6: the total of the progressive invoices), is credited.
      expect(summary(preview)).toEqual([
        at('2030-01-01T00:00:00Z'),
        at('2030-02-01T00:00:00Z'),
        [['31.0000', '1000.0000']],
        [['20.0000', '2000.0000']],
        c.tax.period,
        c.credit,
        c.total,
      ]);
      expect(preview).toMatchObject({ fees_amount_cents: '3000.0000', subtotal: '3000.0000', issued_at: at('2030-02-01T00:00:00Z') });
      expect(preview.applied_taxes.map((x) => [x.tax_code, x.tax_rate, x.amount_cents])).toEqual([[code, c.rate, c.tax.period]]);

      await t.advance(clock.id, '2030-02-01T00:00:00Z');
      const issued = (await t.invoicesOf(sub.id)).filter((i) => i.invoice_type === 'subscription');
      expect(issued).toHaveLength(1);
      const { top, all } = split(preview);
      expect(top).toEqual(asPreview(issued[0]!));
      expect(all).toEqual([asPreview(issued[0]!)]);
    });
  }
});

describe('a period end that issues more than one invoice: all of them in `invoices`', () => {
  it('paused and resumed in the period (in arrear): the part before the pause and the resumed part', async () => {
    const t = await tenant('Previews of a resumed period');
    // March 2030: 31 days, 3100 is 100 a day; 5 a call.
    const plan = await t.createPlan(3100, '5');
    const clock = await t.createClock('2030-03-01T00:00:00Z');
    const customer = await t.createCustomer(clock.id);
    const sub = await t.subscribe({ customer_id: customer.id, plan_id: plan.id });
    await t.advance(clock.id, '2030-03-11T00:00:00Z');
    ok(await t.post(`/v1/subscriptions/${sub.id}/pause`));
    await t.advance(clock.id, '2030-03-21T00:00:00Z');
    ok(await t.post(`/v1/subscriptions/${sub.id}/resume`));
    await t.advance(clock.id, '2030-03-26T00:00:00Z');
    await t.sendCalls(customer, ['2030-03-05T10:00:00Z', '2030-03-05T11:00:00Z', '2030-03-15T10:00:00Z', '2030-03-25T10:00:00Z']);

    const preview = await t.preview(customer, sub);
    // The top level stays the ended segment's invoice (March 21-31); `invoices` has both, in issue order.
    expect(summary(preview)).toEqual([
      at('2030-03-21T00:00:00Z'),
      at('2030-04-01T00:00:00Z'),
      [['11.0000', '1100.0000']],
      [['1.0000', '5.0000']],
      '0.0000',
      '0.0000',
      '1105.0000',
    ]);
    expect(preview.invoices.map(summary)).toEqual([
      [
        at('2030-03-01T00:00:00Z'),
        at('2030-03-11T00:00:00Z'),
        [['10.0000', '1000.0000']],
        [['2.0000', '10.0000']],
        '0.0000',
        '0.0000',
        '1010.0000',
      ],
      summary(preview),
    ]);

    await t.advance(clock.id, '2030-04-01T00:00:00Z');
    const issued = await t.invoicesOf(sub.id);
    expect(issued).toHaveLength(2);
    const { top, all } = split(preview);
    expect(all).toEqual(issued.map(asPreview));
    expect(top).toEqual(asPreview(issued[1]!));
  });

  it('in advance with a scheduled downgrade: the ended period’s usage, then the new plan’s base fee on its own invoice', async () => {
    const t = await tenant('Previews of a downgrade boundary');
    const [current, lower] = [await t.createPlan(3100, '5'), await t.createPlan(1550, '5')];
    const clock = await t.createClock('2030-03-01T00:00:00Z');
    const customer = await t.createCustomer(clock.id);
    const sub = await t.subscribe({ customer_id: customer.id, plan_id: current.id, pay_in_advance: true });
    await t.advance(clock.id, '2030-03-16T12:00:00Z');
    await t.sendCalls(customer, ['2030-03-05T10:00:00Z', '2030-03-10T10:00:00Z', '2030-03-16T10:00:00Z']);
    ok(await t.put(`/v1/subscriptions/${sub.id}`, { plan_id: lower.id }));
    const before = (await t.invoicesOf(sub.id)).map((i) => i.id);

    const preview = await t.preview(customer, sub);
    expect(preview.invoices.map(summary)).toEqual([
      [at('2030-03-01T00:00:00Z'), at('2030-04-01T00:00:00Z'), [], [['3.0000', '15.0000']], '0.0000', '0.0000', '15.0000'],
      [at('2030-04-01T00:00:00Z'), at('2030-05-01T00:00:00Z'), [['30.0000', '1550.0000']], [], '0.0000', '0.0000', '1550.0000'],
    ]);
    expect(summary(preview)).toEqual(preview.invoices.map(summary)[0]);

    await t.advance(clock.id, '2030-04-01T00:00:00Z');
    const issued = (await t.invoicesOf(sub.id)).filter((i) => !before.includes(i.id));
    const { top, all } = split(preview);
    expect(all).toEqual(issued.map(asPreview));
    expect(top).toEqual(asPreview(issued[0]!));
  });
});

describe('preview of a paused subscription', () => {
  it('still paused at the period end: the part before the pause, with the progressive invoice of that part credited; then nothing until resumed', async () => {
    const t = await tenant('Previews of a paused subscription');
    // January 2030: 31 days, 3100 is 100 a day; 100 a call; a threshold at 1000 cents of usage.
    const plan = await t.createPlan(3100, '100', 1000);
    const clock = await t.createClock('2030-01-01T00:00:00Z');
    const customer = await t.createCustomer(clock.id);
    const sub = await t.subscribe({ customer_id: customer.id, plan_id: plan.id });
    await t.advance(clock.id, '2030-01-05T12:00:00Z');
    await t.sendCalls(customer, fifteenCalls('2030-01-05'));
    // The check of January 6th bills the 15 calls: 1500.
    await t.advance(clock.id, '2030-01-11T00:00:00Z');
    const [progressive] = await t.invoicesOf(sub.id);
    expect(progressive).toMatchObject({ invoice_type: 'progressive_billing', issuing_date: '2030-01-06', total: '1500.0000' });
    await t.sendCalls(customer, ['2030-01-08T10:00:00Z', '2030-01-08T11:00:00Z']);
    ok(await t.post(`/v1/subscriptions/${sub.id}/pause`));
    await t.advance(clock.id, '2030-01-20T00:00:00Z');
    // Paused: stored, never billed.
    await t.sendCalls(customer, ['2030-01-15T10:00:00Z', '2030-01-15T11:00:00Z', '2030-01-15T12:00:00Z']);

    const preview = await t.preview(customer, sub);
    // January 1-10: 10 days of 100 and 17 calls = 2700, less the 1500 billed progressively.
    expect(summary(preview)).toEqual([
      at('2030-01-01T00:00:00Z'),
      at('2030-01-11T00:00:00Z'),
      [['10.0000', '1000.0000']],
      [['17.0000', '1700.0000']],
      '0.0000',
      '1500.0000',
      '1200.0000',
    ]);
    expect(preview).toMatchObject({ issued_at: at('2030-02-01T00:00:00Z'), issuing_date: '2030-02-01' });
    expect(preview.invoices).toHaveLength(1);

    await t.advance(clock.id, '2030-02-01T00:00:00Z');
    const issued = (await t.invoicesOf(sub.id)).filter((i) => i.invoice_type === 'subscription');
    expect(issued).toHaveLength(1);
    const { top, all } = split(preview);
    expect(top).toEqual(asPreview(issued[0]!));
    expect(all).toEqual([asPreview(issued[0]!)]);

    // The period has ended while paused: no period is open, nothing will be billed until the resume.
    const refused = expectError(await t.previewResponse(customer, sub), 400, 'invalid_state_transition');
    expect(refused.message).toBe('The subscription is paused and its period has ended: nothing is billed until it is resumed');
  });

  it('paused a second time in the period, still paused at its end: both active parts, each on its invoice', async () => {
    const t = await tenant('Previews of two pauses');
    const plan = await t.createPlan(3100, '5');
    const clock = await t.createClock('2030-03-01T00:00:00Z');
    const customer = await t.createCustomer(clock.id);
    const sub = await t.subscribe({ customer_id: customer.id, plan_id: plan.id });
    // Active March 1-5, paused 6-10, active 11-15, paused from the 16th.
    await t.advance(clock.id, '2030-03-06T00:00:00Z');
    ok(await t.post(`/v1/subscriptions/${sub.id}/pause`));
    await t.advance(clock.id, '2030-03-11T00:00:00Z');
    ok(await t.post(`/v1/subscriptions/${sub.id}/resume`));
    await t.advance(clock.id, '2030-03-16T00:00:00Z');
    ok(await t.post(`/v1/subscriptions/${sub.id}/pause`));
    await t.advance(clock.id, '2030-03-20T00:00:00Z');
    await t.sendCalls(customer, [
      '2030-03-02T10:00:00Z',
      '2030-03-07T10:00:00Z',
      '2030-03-12T10:00:00Z',
      '2030-03-13T10:00:00Z',
      '2030-03-18T10:00:00Z',
    ]);

    const preview = await t.preview(customer, sub);
    expect(preview.invoices.map(summary)).toEqual([
      [
        at('2030-03-01T00:00:00Z'),
        at('2030-03-06T00:00:00Z'),
        [['5.0000', '500.0000']],
        [['1.0000', '5.0000']],
        '0.0000',
        '0.0000',
        '505.0000',
      ],
      [
        at('2030-03-11T00:00:00Z'),
        at('2030-03-16T00:00:00Z'),
        [['5.0000', '500.0000']],
        [['2.0000', '10.0000']],
        '0.0000',
        '0.0000',
        '510.0000',
      ],
    ]);
    expect(summary(preview)).toEqual(preview.invoices.map(summary)[0]);

    await t.advance(clock.id, '2030-04-01T00:00:00Z');
    const issued = await t.invoicesOf(sub.id);
    const { top, all } = split(preview);
    expect(all).toEqual(issued.map(asPreview));
    expect(top).toEqual(asPreview(issued[0]!));
  });

  it('paused on the first day of its period: nothing to bill at its end (400), and change_plan_preview is refused while paused', async () => {
    const t = await tenant('Previews of a subscription paused from its start');
    const [plan, higher] = [await t.createPlan(3100, '5'), await t.createPlan(6200, '5')];
    const clock = await t.createClock('2030-03-01T00:00:00Z');
    const customer = await t.createCustomer(clock.id);
    const sub = await t.subscribe({ customer_id: customer.id, plan_id: plan.id });
    ok(await t.post(`/v1/subscriptions/${sub.id}/pause`));
    const refused = expectError(await t.previewResponse(customer, sub), 400, 'invalid_state_transition');
    expect(refused.message).toBe('The subscription bills nothing at its current period end');
    const change = expectError(
      await t.post(`/v1/subscriptions/${sub.id}/change_plan_preview`, { new_plan_id: higher.id }),
      400,
      'invalid_state_transition',
    );
    expect(change.message).toBe('The subscription is paused: resume it to change its plan');
    // `at` (like billing_time and pay_in_advance) is for a new subscription on a plan only.
    expectValidationError(
      await t.post('/v1/invoices/preview', { customer_id: customer.id, subscription_id: sub.id, at: '2030-03-20T00:00:00Z' }),
      'at',
    );
  });
});
