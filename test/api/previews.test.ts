// Previews (issue 19; docs/previews.md) against the real stack on test clocks: a subscription's
// current period previewed equals, to the cent, the invoice issued at its end; a new subscription's
// first invoice; change_plan_preview equals what the change then does (upgrades and downgrades, in
// advance and in arrear); a preview writes nothing; 404s and 422s in the uniform error body.
// Amounts are cents (billing-rules.md); a 31-day March of a 3100-cent plan is 100 cents a day.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { CreditNoteResource } from '../../src/resources/credit-note';
import type { CustomerResource } from '../../src/resources/customer';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { InvoicePreviewResource, InvoicesPreviewResource, PlanChangePreviewResource } from '../../src/resources/invoice-preview';
import type { PlanResource } from '../../src/resources/plan';
import type { SubscriptionResource } from '../../src/resources/subscription';
import type { TestClockResource } from '../../src/resources/test-clock';
import { eventually, expectError, expectUnknownFields, expectValidationError } from '../support/http';
import { asPreview, billingCounts, sorted } from '../support/previews';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let org: TestOrganization;
let calls: BillableMetricResource;

const uid = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
const at = (iso: string) => new Date(iso).toISOString();

const post = (url: string, payload?: unknown) =>
  stack.app.inject({ method: 'POST', url, headers: org.headers, ...(payload === undefined ? {} : { payload: payload as object }) });
const put = (url: string, payload: unknown) => stack.app.inject({ method: 'PUT', url, headers: org.headers, payload: payload as object });
const get = (url: string) => stack.app.inject({ method: 'GET', url, headers: org.headers });

beforeAll(async () => {
  stack = await createTestStack();
  worker = await startStackWorker(stack);
  org = await createOrganization(stack.app, {
    name: 'Previews',
    default_currency: 'USD',
    timezone: 'UTC',
    events_rate_limit_per_minute: 100_000,
  });
  calls = ok<BillableMetricResource>(
    await post('/v1/billable_metrics', { code: uid('calls'), name: 'Calls', aggregation_type: 'count' }),
    201,
  );
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

function ok<T>(res: Awaited<ReturnType<typeof get>>, status = 200): T {
  expect(res.statusCode, res.body).toBe(status);
  return res.json<T>();
}

async function createClock(frozenTime: string): Promise<TestClockResource> {
  return ok<TestClockResource>(await post('/v1/test_clocks', { name: uid('clock'), frozen_time: frozenTime }), 201);
}

async function createCustomer(clockId: string | null): Promise<CustomerResource> {
  return ok<CustomerResource>(await post('/v1/customers', { external_id: uid('cus'), currency: 'USD', test_clock_id: clockId }), 201);
}

/** A monthly plan of `amount_cents` with a standard charge of 5 cents a call. */
async function createPlan(amountCents: number): Promise<PlanResource> {
  return ok<PlanResource>(
    await post('/v1/plans', {
      code: uid('plan'),
      name: 'Plan',
      interval: 'monthly',
      amount_cents: amountCents,
      currency: 'USD',
      charges: [{ billable_metric_id: calls.id, charge_model: 'standard', properties: { amount: '5' } }],
    }),
    201,
  );
}

async function subscribe(body: Record<string, unknown>): Promise<SubscriptionResource> {
  worker.assertAlive();
  return ok<SubscriptionResource>(await post('/v1/subscriptions', { external_id: uid('sub'), ...body }), 201);
}

async function advance(clockId: string, iso: string): Promise<void> {
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
}

async function sendCalls(customer: CustomerResource, timestamps: string[]): Promise<void> {
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
}

/** The subscription's invoices with their fees, oldest first. */
async function invoicesOf(subscriptionId: string): Promise<InvoiceResource[]> {
  const list = ok<InvoiceResource[]>(await get(`/v1/invoices?subscription_id=${subscriptionId}`));
  const full = await Promise.all(list.map(async (i) => ok<InvoiceResource>(await get(`/v1/invoices/${i.id}`))));
  return full.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.number.localeCompare(b.number));
}

/** The document of every subscription, to check that nothing about them changed. */
async function subscriptionDocs(): Promise<unknown[]> {
  return stack.db.connection.collection('subscriptions').find({}).sort({ _id: 1 }).toArray();
}

/** A preview's POST, checking that it wrote nothing. */
async function previewing<T>(url: string, body: unknown): Promise<T> {
  const [before, docsBefore] = await Promise.all([billingCounts(stack.db.connection), subscriptionDocs()]);
  const res = await post(url, body);
  const [after, docsAfter] = await Promise.all([billingCounts(stack.db.connection), subscriptionDocs()]);
  expect(after).toEqual(before);
  expect(docsAfter).toEqual(docsBefore);
  return ok<T>(res);
}

describe('POST /v1/invoices/preview', () => {
  it("Preview of a subscription's current period equals, to the cent, the invoice issued at its end when nothing else happens (run on a test clock)", async () => {
    const clock = await createClock('2026-03-10T10:00:00Z');
    const customer = await createCustomer(clock.id);
    const plan = await createPlan(3100);
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.code });
    // A once coupon of 100 cents and a wallet of 500 cents: the preview settles as finalization does.
    const coupon = ok<{ code: string }>(
      await post('/v1/coupons', {
        code: uid('off'),
        name: 'Off',
        coupon_type: 'fixed_amount',
        amount_cents: '100',
        amount_currency: 'USD',
        frequency: 'once',
      }),
      201,
    );
    ok(await post('/v1/coupons/apply', { coupon_code: coupon.code, customer_id: customer.id }), 201);
    ok(
      await post('/v1/wallets', {
        customer_id: customer.id,
        name: 'Prepaid',
        currency: 'USD',
        rate_amount: '1',
        initial_granted_credits: '5',
      }),
      201,
    );

    await advance(clock.id, '2026-03-20T12:00:00Z');
    await sendCalls(customer, [
      '2026-03-12T10:00:00Z',
      '2026-03-12T11:00:00Z',
      '2026-03-15T10:00:00Z',
      '2026-03-15T11:00:00Z',
      '2026-03-19T08:00:00Z',
      '2026-03-19T09:00:00Z',
      '2026-03-20T10:00:00Z',
    ]);

    const preview = await previewing<InvoicePreviewResource>('/v1/invoices/preview', {
      customer_id: customer.external_id,
      subscription_id: sub.external_id,
    });
    // 22 days of March (10th to 31st) at 100 a day, 7 calls at 5; 100 off, 500 from the wallet.
    expect(preview).toMatchObject({
      status: 'finalized',
      issued_at: at('2026-04-01T00:00:00Z'),
      period_started_at: at('2026-03-10T10:00:00Z'),
      period_ended_at: at('2026-04-01T00:00:00Z'),
      subtotal: '2235.0000',
      coupons_amount_cents: '100.0000',
      prepaid_credit_amount: '500.0000',
      total: '1635.0000',
    });
    expect(preview.fees.map((f) => [f.fee_type, f.units, f.amount_cents]).sort()).toEqual([
      ['charge', '7.0000', '35.0000'],
      ['subscription', '22.0000', '2200.0000'],
    ]);

    await advance(clock.id, '2026-04-01T00:00:00Z');
    const issued = (await invoicesOf(sub.id)).filter((i) => i.period_started_at === at('2026-03-10T10:00:00Z'));
    expect(issued).toHaveLength(1);
    // The top level is the invoice; `invoices` all those the period end issues (here that one).
    const { invoices, ...top } = preview as InvoicesPreviewResource;
    expect(sorted(top)).toEqual(asPreview(issued[0]!));
    expect(invoices.map(sorted)).toEqual([asPreview(issued[0]!)]);
  });

  it("A new subscription on a plan: its first period's invoice, in advance at its start and in arrear at its end", async () => {
    const customer = await createCustomer(null);
    const plan = await createPlan(3100);
    const body = { customer_id: customer.id, plan_id: plan.code, at: '2026-05-15T09:00:00Z' };
    // May 15 to 31: 17 of 31 days of 3100 = 1700.
    const advanceFee = await previewing<InvoicePreviewResource>('/v1/invoices/preview', { ...body, pay_in_advance: true });
    expect(advanceFee).toMatchObject({
      issued_at: at('2026-05-15T09:00:00Z'),
      subtotal: '1700.0000',
      total: '1700.0000',
      subscription_id: expect.any(String),
    });
    expect(advanceFee.fees.map((f) => [f.fee_type, f.units, f.amount_cents])).toEqual([['subscription', '17.0000', '1700.0000']]);
    const arrear = await previewing<InvoicePreviewResource>('/v1/invoices/preview', body);
    expect(arrear).toMatchObject({
      issued_at: at('2026-06-01T00:00:00Z'),
      period_started_at: at('2026-05-15T09:00:00Z'),
      period_ended_at: at('2026-06-01T00:00:00Z'),
      subtotal: '1700.0000',
      total: '1700.0000',
      issuing_date: '2026-06-01',
      payment_due_date: '2026-07-01',
    });
    // A coupon of the request applies as if the customer had it.
    const coupon = ok<{ code: string }>(
      await post('/v1/coupons', { code: uid('pct'), name: 'Ten', coupon_type: 'percentage', percentage_rate: '10', frequency: 'forever' }),
      201,
    );
    const discounted = await previewing<InvoicePreviewResource>('/v1/invoices/preview', { ...body, coupons: [coupon.code] });
    expect(discounted).toMatchObject({ coupons_amount_cents: '170.0000', total: '1530.0000' });
  });

  it('404 and 422 in the uniform error body', async () => {
    const customer = await createCustomer(null);
    const plan = await createPlan(3100);
    expectError(await post('/v1/invoices/preview', { customer_id: 'nobody', plan_id: plan.id }), 404, 'customer_not_found');
    expectError(await post('/v1/invoices/preview', { customer_id: customer.id, plan_id: 'no-such-plan' }), 404, 'plan_not_found');
    expectError(
      await post('/v1/invoices/preview', { customer_id: customer.id, subscription_id: 'no-such-sub' }),
      404,
      'subscription_not_found',
    );
    expectError(
      await post('/v1/invoices/preview', { customer_id: customer.id, plan_id: plan.id, coupons: ['nope'] }),
      404,
      'coupon_not_found',
    );
    expectValidationError(await post('/v1/invoices/preview', { customer_id: customer.id }), 'plan_id');
    expectValidationError(
      await post('/v1/invoices/preview', { customer_id: customer.id, plan_id: plan.id, subscription_id: 'x' }),
      'plan_id',
    );
    expectValidationError(await post('/v1/invoices/preview', { customer_id: customer.id, plan_id: plan.id, at: 'yesterday' }), 'at');
    expectUnknownFields(await post('/v1/invoices/preview', { customer_id: customer.id, plan_id: plan.id, extra: 1 }), ['extra']);
    const eur = ok<PlanResource>(
      await post('/v1/plans', { code: uid('eur'), name: 'EUR', interval: 'monthly', amount_cents: 100, currency: 'EUR', charges: [] }),
      201,
    );
    expectValidationError(await post('/v1/invoices/preview', { customer_id: customer.id, plan_id: eur.id }), 'plan_id');
  });
});

describe('POST /v1/subscriptions/{id}/change_plan_preview', () => {
  const cases = [
    { change: 'upgrade', payInAdvance: false, amount: 6200 },
    { change: 'upgrade', payInAdvance: true, amount: 6200 },
    { change: 'downgrade', payInAdvance: false, amount: 1550 },
    { change: 'downgrade', payInAdvance: true, amount: 1550 },
  ] as const;

  for (const c of cases) {
    it(`change_plan_preview equals what the change then does: ${c.change}, ${c.payInAdvance ? 'in advance' : 'in arrear'}`, async () => {
      const clock = await createClock('2026-03-01T00:00:00Z');
      const customer = await createCustomer(clock.id);
      const [current, target] = await Promise.all([createPlan(3100), createPlan(c.amount)]);
      const sub = await subscribe({ customer_id: customer.id, plan_id: current.code, pay_in_advance: c.payInAdvance });
      await advance(clock.id, '2026-03-16T12:00:00Z');
      await sendCalls(customer, ['2026-03-05T10:00:00Z', '2026-03-10T10:00:00Z', '2026-03-10T11:00:00Z', '2026-03-16T10:00:00Z']);
      const before = (await invoicesOf(sub.id)).map((i) => i.id);

      const preview = await previewing<PlanChangePreviewResource>(`/v1/subscriptions/${sub.id}/change_plan_preview`, {
        new_plan_id: target.code,
      });
      expect(preview).toMatchObject({ subscription_id: sub.id, plan_id: current.id, new_plan_id: target.id, change: c.change });

      ok(await put(`/v1/subscriptions/${sub.id}`, { plan_id: target.code }));
      const made = (await invoicesOf(sub.id)).filter((i) => !before.includes(i.id));
      expect(preview.invoices.map(sorted)).toEqual(made.map(asPreview));
      const notes = ok<CreditNoteResource[]>(await get(`/v1/credit_notes?limit=100`)).filter((n) => before.includes(n.invoice_id));
      expect(preview.credit_notes.map((n) => [n.invoice_id, n.reason, n.amount_cents])).toEqual(
        notes.map((n) => [n.invoice_id, n.reason, n.credit_amount_cents]),
      );

      if (c.change === 'upgrade') {
        expect(preview.effective_date).toBe(at('2026-03-16T00:00:00Z'));
        expect(preview.invoices_at_effective_date).toEqual([]);
        if (c.payInAdvance) {
          // The old segment's usage (3 calls before the 16th); 16 unused days of 3100 credited; the
          // new plan's 16 days of 6200, paid first by that credit.
          expect(preview.invoices.map((i) => [i.subtotal, i.credit_notes_amount_cents, i.total])).toEqual([
            ['15.0000', '0.0000', '15.0000'],
            ['3200.0000', '1600.0000', '1600.0000'],
          ]);
          expect(preview.credit_notes.map((n) => n.amount_cents)).toEqual(['1600.0000']);
        } else {
          // 15 days of 3100 and 3 calls.
          expect(preview.invoices.map((i) => i.total)).toEqual(['1515.0000']);
          expect(preview.credit_notes).toEqual([]);
        }
      } else {
        expect(preview.effective_date).toBe(at('2026-04-01T00:00:00Z'));
        expect(preview.invoices).toEqual([]);
        expect(preview.credit_notes).toEqual([]);
        await advance(clock.id, '2026-04-01T00:00:00Z');
        const atBoundary = (await invoicesOf(sub.id)).filter((i) => !before.includes(i.id));
        expect(preview.invoices_at_effective_date.map(sorted)).toEqual(atBoundary.map(asPreview));
        // In arrear: March on the old plan and its 4 calls; in advance: the 4 calls, then April on the new plan.
        expect(preview.invoices_at_effective_date.map((i) => i.total)).toEqual(c.payInAdvance ? ['20.0000', '1550.0000'] : ['3120.0000']);
      }
    });
  }

  it('the current plan while a downgrade is pending: the downgrade removed, the period billed on the current plan', async () => {
    const clock = await createClock('2026-03-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const [current, lower] = await Promise.all([createPlan(3100), createPlan(1550)]);
    const sub = await subscribe({ customer_id: customer.id, plan_id: current.code });
    await advance(clock.id, '2026-03-16T12:00:00Z');
    await sendCalls(customer, ['2026-03-05T10:00:00Z', '2026-03-10T10:00:00Z']);
    ok(await put(`/v1/subscriptions/${sub.id}`, { plan_id: lower.code }));
    const before = (await invoicesOf(sub.id)).map((i) => i.id);

    const preview = await previewing<PlanChangePreviewResource>(`/v1/subscriptions/${sub.id}/change_plan_preview`, {
      new_plan_id: current.code,
    });
    expect(preview).toMatchObject({
      plan_id: current.id,
      new_plan_id: current.id,
      change: 'downgrade_removed',
      effective_date: at('2026-04-01T00:00:00Z'),
      invoices: [],
      credit_notes: [],
    });
    // March on the current plan and its 2 calls, and nothing on the lower plan.
    expect(preview.invoices_at_effective_date.map((i) => i.total)).toEqual(['3110.0000']);

    ok(await put(`/v1/subscriptions/${sub.id}`, { plan_id: current.code }));
    expect((await invoicesOf(sub.id)).filter((i) => !before.includes(i.id))).toEqual([]);
    await advance(clock.id, '2026-04-01T00:00:00Z');
    const atBoundary = (await invoicesOf(sub.id)).filter((i) => !before.includes(i.id));
    expect(preview.invoices_at_effective_date.map(sorted)).toEqual(atBoundary.map(asPreview));
  });

  it('404, 400 and 422 in the uniform error body', async () => {
    const customer = await createCustomer(null);
    const plan = await createPlan(3100);
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.code });
    expectError(await post('/v1/subscriptions/nope/change_plan_preview', { new_plan_id: plan.id }), 404, 'subscription_not_found');
    expectError(await post(`/v1/subscriptions/${sub.id}/change_plan_preview`, { new_plan_id: 'nope' }), 404, 'plan_not_found');
    expectValidationError(await post(`/v1/subscriptions/${sub.id}/change_plan_preview`, {}), 'new_plan_id');
    // The same plan with no downgrade pending: refused as the change itself refuses it.
    const samePlan = await post(`/v1/subscriptions/${sub.id}/change_plan_preview`, { new_plan_id: plan.id });
    const samePlanChange = await put(`/v1/subscriptions/${sub.id}`, { plan_id: plan.id });
    const withoutRequestId = ({ request_id: _, ...body }: Record<string, unknown>) => body;
    expect([samePlan.statusCode, withoutRequestId(samePlan.json())]).toEqual([
      samePlanChange.statusCode,
      withoutRequestId(samePlanChange.json()),
    ]);
    expect(samePlan.statusCode).toBe(400);
    const other = await createPlan(9300);
    expectValidationError(
      await post(`/v1/subscriptions/${sub.id}/change_plan_preview`, { plan_id: other.id, effective_date: '2000-01-01T00:00:00Z' }),
      'effective_date',
    );
  });
});
