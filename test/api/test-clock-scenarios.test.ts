// Billing scenarios driven by test clocks over HTTP (docs/test-clocks.md; billing-rules.md for every
// amount): a trial's end and its first invoice, a year of monthly usage, a scheduled downgrade, a
// cancellation, an invoice's grace period, due date and overdue notice, a wallet's expiry,
// progressive billing, the documentation's walk-through, the isolation of real customers, and an
// advance refused while another runs; also a customer in another time zone, and a clock customer's
// one-off invoices and wallet changes at the clock's time.
//
// Time only ever moves through `POST /v1/test_clocks/{id}/advance` (the `advance` helper below
// waits until the clock is `ready`): nothing waits for real time to pass, so every amount and every
// date is exact. Events are sent only once the clock has passed their timestamp, as a tenant must.
// A worker on the run's Temporal dev server serves the workflows. Amounts are cents; the API
// serializes them as decimal strings with 4 fractional digits, invoice-level amounts rounded half up
// to whole cents.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { CreditNoteResource } from '../../src/resources/credit-note';
import type { CustomerResource } from '../../src/resources/customer';
import type { FeeResource, InvoiceResource } from '../../src/resources/invoice';
import type { LifecycleEventPayload } from '../../src/resources/lifecycle-event';
import type { PlanResource } from '../../src/resources/plan';
import type { SubscriptionResource } from '../../src/resources/subscription';
import type { TestClockResource } from '../../src/resources/test-clock';
import type { WalletResource } from '../../src/resources/wallet';
import type { WebhookResource } from '../../src/resources/webhook';
import { eventually, expectError, expectValidationError } from '../support/http';
import { startReceiver, type Receiver } from '../support/receiver';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let receiver: Receiver;
/** Organization defaults: UTC, no grace period, 30 days to pay. */
let org: TestOrganization;
let calls: BillableMetricResource;

const uid = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;
/** An instant as the API writes it. */
const at = (iso: string) => new Date(iso).toISOString();

type Headers = Record<string, string>;
const post = (url: string, payload?: unknown, headers: Headers = org.headers) =>
  stack.app.inject({ method: 'POST', url, headers, ...(payload === undefined ? {} : { payload: payload as object }) });
const put = (url: string, payload: unknown, headers: Headers = org.headers) =>
  stack.app.inject({ method: 'PUT', url, headers, payload: payload as object });
const get = (url: string, headers: Headers = org.headers) => stack.app.inject({ method: 'GET', url, headers });
const del = (url: string, headers: Headers = org.headers) => stack.app.inject({ method: 'DELETE', url, headers });

beforeAll(async () => {
  [stack, receiver] = await Promise.all([createTestStack(), startReceiver()]);
  worker = await startStackWorker(stack);
  org = await createOrganization(stack.app, {
    name: 'Clock Scenarios',
    default_currency: 'USD',
    timezone: 'UTC',
    events_rate_limit_per_minute: 100_000,
  });
  calls = await createMetric(org.headers);
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await receiver?.close();
  await stack?.close();
});

// ---- helpers --------------------------------------------------------------------------------

async function ok<T>(res: Awaited<ReturnType<typeof get>>, status: number): Promise<T> {
  expect(res.statusCode, res.body).toBe(status);
  return res.json<T>();
}

async function createMetric(headers: Headers, code = uid('calls')): Promise<BillableMetricResource> {
  return ok<BillableMetricResource>(
    await post('/v1/billable_metrics', { code, name: 'API calls', aggregation_type: 'count' }, headers),
    201,
  );
}

async function createClock(frozenTime: string, headers: Headers = org.headers): Promise<TestClockResource> {
  return ok<TestClockResource>(await post('/v1/test_clocks', { name: uid('clock'), frozen_time: frozenTime }, headers), 201);
}

async function createCustomer(
  clockId: string | null,
  extra: Record<string, unknown> = {},
  headers: Headers = org.headers,
): Promise<CustomerResource> {
  return ok<CustomerResource>(
    await post('/v1/customers', { external_id: uid('cus'), currency: 'USD', test_clock_id: clockId, ...extra }, headers),
    201,
  );
}

/** A monthly plan; `charge`: the amount in cents of one call of `metric` (standard model). */
async function createPlan(
  body: { amount_cents: number; charge?: string; trial_period_days?: number; metric?: BillableMetricResource },
  headers: Headers = org.headers,
): Promise<PlanResource> {
  const metric = body.metric ?? calls;
  return ok<PlanResource>(
    await post(
      '/v1/plans',
      {
        code: uid('plan'),
        name: 'Plan',
        interval: 'monthly',
        amount_cents: body.amount_cents,
        currency: 'USD',
        trial_period_days: body.trial_period_days ?? 0,
        charges:
          body.charge === undefined
            ? []
            : [{ billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: body.charge } }],
      },
      headers,
    ),
    201,
  );
}

async function subscribe(body: Record<string, unknown>, headers: Headers = org.headers): Promise<SubscriptionResource> {
  worker.assertAlive();
  return ok<SubscriptionResource>(await post('/v1/subscriptions', { external_id: uid('sub'), ...body }, headers), 201);
}

async function subscription(id: string, headers: Headers = org.headers): Promise<SubscriptionResource> {
  return ok<SubscriptionResource>(await get(`/v1/subscriptions/${id}`, headers), 200);
}

/**
 * Advances the clock: 202 at once, then polls until the clock is `ready` at the new time (every
 * workflow of its customers caught up).
 */
async function advance(clockId: string, iso: string, headers: Headers = org.headers): Promise<TestClockResource> {
  worker.assertAlive();
  const res = await post(`/v1/test_clocks/${clockId}/advance`, { frozen_time: iso }, headers);
  expect(res.statusCode, res.body).toBe(202);
  expect(res.json<TestClockResource>()).toMatchObject({ status: 'advancing', frozen_time: at(iso) });
  const ready = await eventually(
    async () => {
      worker.assertAlive();
      const clock = await ok<TestClockResource>(await get(`/v1/test_clocks/${clockId}`, headers), 200);
      return clock.status === 'ready' ? clock : undefined;
    },
    60_000,
    `test clock ${clockId} ready at ${iso}`,
  );
  expect(ready.frozen_time).toBe(at(iso));
  return ready;
}

/** Sends `count` API calls of the customer, stamped with the given instants (one each). */
async function sendCalls(
  customer: CustomerResource,
  timestamps: string[],
  metric: BillableMetricResource = calls,
  headers: Headers = org.headers,
): Promise<void> {
  const res = await post(
    '/v1/events/batch',
    {
      events: timestamps.map((timestamp) => ({
        transaction_id: uid('tx'),
        external_customer_id: customer.external_id,
        code: metric.code,
        timestamp,
      })),
    },
    headers,
  );
  const body = await ok<{ ingested: number; errors: unknown[] }>(res, 201);
  expect(body.errors).toEqual([]);
  expect(body.ingested).toBe(timestamps.length);
}

/** `n` instants of one day, an hour apart from 10:00 (n <= 14). */
const sameDay = (day: string, n: number) => Array.from({ length: n }, (_, i) => `${day}T${String(10 + i).padStart(2, '0')}:00:00Z`);

/** The subscription's invoices (with their fees), oldest first. */
async function invoicesOf(subscriptionId: string, headers: Headers = org.headers): Promise<InvoiceResource[]> {
  const list = await ok<InvoiceResource[]>(await get(`/v1/invoices?subscription_id=${subscriptionId}`, headers), 200);
  const full = await Promise.all(list.map(async (i) => ok<InvoiceResource>(await get(`/v1/invoices/${i.id}`, headers), 200)));
  // Invoices of one clock instant share created_at: their numbers (taken at finalization) order them.
  return full.sort(
    (a, b) => a.created_at.localeCompare(b.created_at) || a.invoice_type.localeCompare(b.invoice_type) || a.number.localeCompare(b.number),
  );
}

async function invoice(id: string, headers: Headers = org.headers): Promise<InvoiceResource> {
  return ok<InvoiceResource>(await get(`/v1/invoices/${id}`, headers), 200);
}

const feeOf = (inv: InvoiceResource, type: FeeResource['fee_type']) =>
  inv.fees!.filter((f) => f.fee_type === type).map((f) => ({ units: f.units, amount_cents: f.amount_cents }));

/** When each lifecycle event of this type about this object happened (occurred_at, ISO). */
async function eventTimes(organizationId: string, type: string, objectId: string): Promise<string[]> {
  const events = await stack.db.models.LifecycleEvent.find({ organization_id: organizationId, type, 'object.id': objectId })
    .sort({ occurred_at: 1 })
    .lean();
  return events.map((e) => e.occurred_at.toISOString());
}

// ---- 1. trials ------------------------------------------------------------------------------

describe('a trial ending on a test clock', () => {
  it('bills the rest of the period from the trial end day: in advance at the trial end, in arrear at the period end', async () => {
    const clock = await createClock('2030-03-05T00:00:00Z');
    // 3100 cents a month, 3 cents a call, a 10-day trial: March 5 + 10 days = March 15, 00:00.
    const plan = await createPlan({ amount_cents: 3100, charge: '3', trial_period_days: 10 });
    const advanceCustomer = await createCustomer(clock.id);
    const arrearCustomer = await createCustomer(clock.id);
    const inAdvance = await subscribe({ customer_id: advanceCustomer.id, plan_id: plan.id, pay_in_advance: true });
    const inArrear = await subscribe({ customer_id: arrearCustomer.id, plan_id: plan.id });
    for (const sub of [inAdvance, inArrear]) {
      expect(sub).toMatchObject({ status: 'active', in_trial: true, trial_ended_at: null, started_at: '2030-03-05T00:00:00.000Z' });
    }

    // Two calls inside the trial (stored, never billed).
    await advance(clock.id, '2030-03-12T00:00:00Z');
    await sendCalls(advanceCustomer, sameDay('2030-03-10', 2));
    await sendCalls(arrearCustomer, sameDay('2030-03-10', 2));

    // The last instant of the trial: nothing billed yet.
    await advance(clock.id, '2030-03-14T23:59:59Z');
    expect((await subscription(inAdvance.id)).in_trial).toBe(true);
    expect(await invoicesOf(inAdvance.id)).toEqual([]);

    await advance(clock.id, '2030-03-15T00:00:00Z');
    for (const sub of [inAdvance, inArrear]) {
      expect(await subscription(sub.id)).toMatchObject({ status: 'active', in_trial: false, trial_ended_at: '2030-03-15T00:00:00.000Z' });
      expect(await eventTimes(org.id, 'subscription.trial_ended', sub.id)).toEqual(['2030-03-15T00:00:00.000Z']);
    }
    // In advance: March 15..31 billed now, the trial end day included: 3100 * 17 / 31 = 1700.
    const [trialEnd] = await invoicesOf(inAdvance.id);
    expect(trialEnd).toMatchObject({
      invoice_type: 'subscription',
      status: 'finalized',
      issuing_date: '2030-03-15',
      payment_due_date: '2030-04-14', // + 30 days
      period_started_at: '2030-03-15T00:00:00.000Z',
      period_ended_at: '2030-04-01T00:00:00.000Z',
      fees_amount_cents: '1700.0000',
      total: '1700.0000',
    });
    expect(feeOf(trialEnd!, 'subscription')).toEqual([{ units: '17.0000', amount_cents: '1700.0000' }]);
    expect(feeOf(trialEnd!, 'charge')).toEqual([]);
    // In arrear: nothing until the period ends.
    expect(await invoicesOf(inArrear.id)).toEqual([]);

    // Three calls after the trial: billed (3 * 3 = 9 cents).
    await advance(clock.id, '2030-03-25T00:00:00Z');
    await sendCalls(advanceCustomer, sameDay('2030-03-20', 3));
    await sendCalls(arrearCustomer, sameDay('2030-03-20', 3));

    await advance(clock.id, '2030-04-01T00:00:00Z');
    // In advance, April 1: April's whole base fee 3100 + March's usage after the trial 9 = 3109.
    const advanceInvoices = await invoicesOf(inAdvance.id);
    expect(advanceInvoices).toHaveLength(2);
    expect(advanceInvoices[1]).toMatchObject({ issuing_date: '2030-04-01', fees_amount_cents: '3109.0000', total: '3109.0000' });
    expect(feeOf(advanceInvoices[1]!, 'subscription')).toEqual([{ units: '30.0000', amount_cents: '3100.0000' }]);
    expect(feeOf(advanceInvoices[1]!, 'charge')).toEqual([{ units: '3.0000', amount_cents: '9.0000' }]);
    // In arrear, April 1: March from the trial end, 3100 * 17 / 31 = 1700, + the 3 calls 9 = 1709.
    const arrearInvoices = await invoicesOf(inArrear.id);
    expect(arrearInvoices).toHaveLength(1);
    expect(arrearInvoices[0]).toMatchObject({
      status: 'finalized',
      issuing_date: '2030-04-01',
      payment_due_date: '2030-05-01',
      fees_amount_cents: '1709.0000',
      total: '1709.0000',
    });
    expect(feeOf(arrearInvoices[0]!, 'subscription')).toEqual([{ units: '17.0000', amount_cents: '1700.0000' }]);
    expect(feeOf(arrearInvoices[0]!, 'charge')).toEqual([{ units: '3.0000', amount_cents: '9.0000' }]);
  });
});

// ---- 2. a year of usage ---------------------------------------------------------------------

describe('twelve monthly periods on a test clock', () => {
  it('bills every month of a year exactly, with the usage reported as the clock moves', async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    // 10000 cents a month, 2.5 cents a call.
    const plan = await createPlan({ amount_cents: 10_000, charge: '2.5' });
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id });
    expect(sub).toMatchObject({ started_at: '2030-01-01T00:00:00.000Z', current_period_ending_at: '2030-02-01T00:00:00.000Z' });

    const monthStart = (m: number) => new Date(Date.UTC(2030, m - 1, 1));
    const lastSecond = (m: number) => new Date(Date.UTC(2030, m, 1) - 1000).toISOString();
    for (let m = 1; m <= 12; m++) {
      // The clock at the month's last second: its invoice does not exist yet.
      await advance(clock.id, lastSecond(m));
      expect(await invoicesOf(sub.id)).toHaveLength(m - 1);
      // m calls in month m: the first at its first instant, the last at its last second (both belong to it).
      const stamps = Array.from({ length: m }, (_, i) => new Date(monthStart(m).getTime() + i * 86_400_000).toISOString());
      if (m > 1) stamps[m - 1] = lastSecond(m);
      await sendCalls(customer, stamps);
    }
    await advance(clock.id, '2031-01-01T00:00:00Z');

    const invoices = await invoicesOf(sub.id);
    expect(invoices).toHaveLength(12);
    invoices.forEach((inv, i) => {
      const m = i + 1;
      expect(inv.period_started_at).toBe(monthStart(m).toISOString());
      expect(inv.period_ended_at).toBe(new Date(Date.UTC(2030, m, 1)).toISOString());
      expect(inv.issuing_date).toBe(new Date(Date.UTC(2030, m, 1)).toISOString().slice(0, 10));
      expect(feeOf(inv, 'subscription')).toEqual([{ units: expect.any(String) as string, amount_cents: '10000.0000' }]);
      // m calls at 2.5 cents.
      expect(feeOf(inv, 'charge')).toEqual([{ units: `${m}.0000`, amount_cents: (2.5 * m).toFixed(4) }]);
    });
    // Fees: 10000 + 2.5 m; the total rounded half up to whole cents.
    expect(invoices.map((i) => i.fees_amount_cents)).toEqual([
      '10002.5000',
      '10005.0000',
      '10007.5000',
      '10010.0000',
      '10012.5000',
      '10015.0000',
      '10017.5000',
      '10020.0000',
      '10022.5000',
      '10025.0000',
      '10027.5000',
      '10030.0000',
    ]);
    expect(invoices.map((i) => i.total)).toEqual([
      '10003.0000',
      '10005.0000',
      '10008.0000',
      '10010.0000',
      '10013.0000',
      '10015.0000',
      '10018.0000',
      '10020.0000',
      '10023.0000',
      '10025.0000',
      '10028.0000',
      '10030.0000',
    ]);
    // The year: 12 * 10000 + (3 + 5 + 8 + 10 + 13 + 15 + 18 + 20 + 23 + 25 + 28 + 30) = 120198.
    expect(invoices.reduce((s, i) => s + Number(i.total), 0)).toBe(120_198);
    // Numbers follow the periods; due 30 days after issue, so every invoice but December's is
    // overdue on January 1st 2031 (November's was due December 31st, overdue at its end).
    expect(invoices.map((i) => i.number)).toEqual([...invoices.map((i) => i.number)].sort());
    expect(invoices.map((i) => i.payment_overdue)).toEqual([...Array<boolean>(11).fill(true), false]);
    expect(await subscription(sub.id)).toMatchObject({
      status: 'active',
      current_period_started_at: '2031-01-01T00:00:00.000Z',
      current_period_ending_at: '2031-02-01T00:00:00.000Z',
    });
  }, 240_000);
});

// ---- 3. scheduled downgrade -----------------------------------------------------------------

describe('a scheduled downgrade on a test clock', () => {
  it('keeps the old plan until the boundary, bills the ended period on it, then switches', async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    // Pro: 10000 a month, 5 cents a call; Basic: 3000 a month, 1 cent a call (yearly 36000 < 120000: a downgrade).
    const pro = await createPlan({ amount_cents: 10_000, charge: '5' });
    const basic = await createPlan({ amount_cents: 3000, charge: '1' });
    const sub = await subscribe({ customer_id: customer.id, plan_id: pro.id });

    await advance(clock.id, '2030-01-10T12:00:00Z');
    await sendCalls(customer, sameDay('2030-01-05', 4));
    const scheduled = await ok<SubscriptionResource>(await put(`/v1/subscriptions/${sub.id}`, { plan_id: basic.id }), 200);
    expect(scheduled).toMatchObject({
      plan_id: pro.id,
      previous_plan_id: basic.id,
      downgraded_at: '2030-01-10T12:00:00.000Z',
      status: 'active',
    });

    // Two more calls on Pro after the request, then the period's last second: still pending.
    await advance(clock.id, '2030-01-31T23:59:59Z');
    await sendCalls(customer, sameDay('2030-01-20', 2));
    expect(await subscription(sub.id)).toMatchObject({ plan_id: pro.id, previous_plan_id: basic.id });
    expect(await invoicesOf(sub.id)).toEqual([]);

    await advance(clock.id, '2030-02-01T00:00:00Z');
    const switched = await subscription(sub.id);
    expect(switched).toMatchObject({
      plan_id: basic.id,
      previous_plan_id: null,
      downgraded_at: null,
      status: 'active',
      current_period_started_at: '2030-02-01T00:00:00.000Z',
      current_period_ending_at: '2030-03-01T00:00:00.000Z',
    });
    expect(await eventTimes(org.id, 'subscription.plan_changed', sub.id)).toEqual(['2030-02-01T00:00:00.000Z']);
    // January on Pro: 10000 + 6 calls * 5 = 10030.
    const [january] = await invoicesOf(sub.id);
    expect(january).toMatchObject({
      issuing_date: '2030-02-01',
      period_started_at: '2030-01-01T00:00:00.000Z',
      period_ended_at: '2030-02-01T00:00:00.000Z',
      total: '10030.0000',
    });
    expect(feeOf(january!, 'subscription')).toEqual([{ units: '31.0000', amount_cents: '10000.0000' }]);
    expect(feeOf(january!, 'charge')).toEqual([{ units: '6.0000', amount_cents: '30.0000' }]);

    // February on Basic: 3000 + 7 calls * 1 = 3007.
    await advance(clock.id, '2030-02-20T00:00:00Z');
    await sendCalls(customer, sameDay('2030-02-15', 7));
    await advance(clock.id, '2030-03-01T00:00:00Z');
    const invoices = await invoicesOf(sub.id);
    expect(invoices).toHaveLength(2);
    expect(invoices[1]).toMatchObject({ issuing_date: '2030-03-01', period_started_at: '2030-02-01T00:00:00.000Z', total: '3007.0000' });
    expect(feeOf(invoices[1]!, 'subscription')).toEqual([{ units: '28.0000', amount_cents: '3000.0000' }]);
    expect(feeOf(invoices[1]!, 'charge')).toEqual([{ units: '7.0000', amount_cents: '7.0000' }]);
  });
  it("in advance: the boundary bills the old plan's usage and the new plan's base fee, each on its own invoice", async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const pro = await createPlan({ amount_cents: 10_000, charge: '5' });
    const basic = await createPlan({ amount_cents: 3000, charge: '1' });
    const sub = await subscribe({ customer_id: customer.id, plan_id: pro.id, pay_in_advance: true });
    // January's base fee on Pro, in advance at the start: 10000.
    expect((await invoicesOf(sub.id)).map((i) => [i.issuing_date, i.total])).toEqual([['2030-01-01', '10000.0000']]);

    await advance(clock.id, '2030-01-10T00:00:00Z');
    await sendCalls(customer, sameDay('2030-01-05', 4));
    expect(await ok<SubscriptionResource>(await put(`/v1/subscriptions/${sub.id}`, { plan_id: basic.id }), 200)).toMatchObject({
      plan_id: pro.id,
      previous_plan_id: basic.id,
    });

    await advance(clock.id, '2030-02-01T00:00:00Z');
    expect(await subscription(sub.id)).toMatchObject({ plan_id: basic.id, previous_plan_id: null });
    // February 1st: January's usage on Pro, 4 calls * 5 = 20 (its base fee was paid in advance),
    // and February's base fee on Basic in advance, 3000. The service keeps one plan per invoice.
    const february = (await invoicesOf(sub.id)).filter((i) => i.issuing_date === '2030-02-01');
    const lines = february.map((i) => ({ total: i.total, subscription: feeOf(i, 'subscription'), charge: feeOf(i, 'charge') }));
    expect(lines.sort((x, y) => Number(x.total) - Number(y.total))).toEqual([
      { total: '20.0000', subscription: [], charge: [{ units: '4.0000', amount_cents: '20.0000' }] },
      { total: '3000.0000', subscription: [{ units: '28.0000', amount_cents: '3000.0000' }], charge: [] },
    ]);
  });
});

describe('a test clock customer in another time zone', () => {
  it("bills at the customer's local midnights and dates its invoices in its zone", async () => {
    // New York is UTC-5 in winter: January 1st 00:00 local is 05:00 UTC.
    const clock = await createClock('2030-01-01T05:00:00Z');
    const customer = await createCustomer(clock.id, { timezone: 'America/New_York' });
    const plan = await createPlan({ amount_cents: 10_000, charge: '5' });
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id });
    expect(sub).toMatchObject({
      current_period_started_at: '2030-01-01T05:00:00.000Z',
      current_period_ending_at: '2030-02-01T05:00:00.000Z',
    });

    // January 31st, 23:30 local: still January.
    await advance(clock.id, '2030-02-01T04:59:59Z');
    await sendCalls(customer, ['2030-02-01T04:30:00Z']);
    expect(await invoicesOf(sub.id)).toEqual([]);
    await advance(clock.id, '2030-02-01T05:00:00Z');
    const [january] = await invoicesOf(sub.id);
    // 10000 + 1 call * 5; issued February 1st local, due 30 days later, March 3rd.
    expect(january).toMatchObject({
      issuing_date: '2030-02-01',
      payment_due_date: '2030-03-03',
      total: '10005.0000',
      period_ended_at: '2030-02-01T05:00:00.000Z',
    });
    // Overdue when March 3rd ends in New York: March 4th 05:00 UTC.
    await advance(clock.id, '2030-03-04T04:59:59Z');
    expect((await invoice(january!.id)).payment_overdue).toBe(false);
    await advance(clock.id, '2030-03-04T05:00:00Z');
    expect((await invoice(january!.id)).payment_overdue).toBe(true);
    expect(await eventTimes(org.id, 'invoice.payment_overdue', january!.id)).toEqual(['2030-03-04T05:00:00.000Z']);
  });
});

// ---- 4. cancel ------------------------------------------------------------------------------

describe('a cancellation on a test clock', () => {
  it('stays active until the period end, then is canceled with its last invoice and nothing after', async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const plan = await createPlan({ amount_cents: 10_000, charge: '5' });
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id });

    await advance(clock.id, '2030-02-10T00:00:00Z');
    expect((await invoicesOf(sub.id)).map((i) => i.total)).toEqual(['10000.0000']);
    const canceled = await ok<SubscriptionResource>(await post(`/v1/subscriptions/${sub.id}/cancel`), 200);
    expect(canceled).toMatchObject({ status: 'active', canceled_at: '2030-02-10T00:00:00.000Z', ending_at: '2030-03-01T00:00:00.000Z' });
    expect(await eventTimes(org.id, 'subscription.canceled', sub.id)).toEqual(['2030-02-10T00:00:00.000Z']);

    await advance(clock.id, '2030-02-28T23:59:59Z');
    await sendCalls(customer, sameDay('2030-02-12', 3));
    expect(await subscription(sub.id)).toMatchObject({ status: 'active', ending_at: '2030-03-01T00:00:00.000Z' });
    expect(await invoicesOf(sub.id)).toHaveLength(1);

    await advance(clock.id, '2030-03-05T00:00:00Z');
    expect(await subscription(sub.id)).toMatchObject({
      status: 'canceled',
      canceled_at: '2030-02-10T00:00:00.000Z',
      ending_at: '2030-03-01T00:00:00.000Z',
    });
    // The last invoice (generate_invoice, the default): February's 10000 + 3 calls * 5 = 10015.
    const invoices = await invoicesOf(sub.id);
    expect(invoices).toHaveLength(2);
    expect(invoices[1]).toMatchObject({
      issuing_date: '2030-03-01',
      period_started_at: '2030-02-01T00:00:00.000Z',
      period_ended_at: '2030-03-01T00:00:00.000Z',
      total: '10015.0000',
    });

    // No period after the end.
    await advance(clock.id, '2030-05-01T00:00:00Z');
    expect(await invoicesOf(sub.id)).toHaveLength(2);
    expect((await subscription(sub.id)).status).toBe('canceled');
  });
});

// ---- 5. grace period, due date, overdue -----------------------------------------------------

describe("an invoice's grace period and due date on a test clock", () => {
  it('keeps the invoice a draft for the grace period, then finalizes it, and marks it overdue after its due date', async () => {
    // The organization: 2 days of grace, 10 days to pay; one customer overrides both (5 and 0).
    const graceOrg = await createOrganization(stack.app, {
      name: 'Grace Org',
      timezone: 'UTC',
      invoice_grace_period: 2,
      net_payment_term: 10,
    });
    const clock = await createClock('2030-01-01T00:00:00Z', graceOrg.headers);
    const inherits = await createCustomer(clock.id, {}, graceOrg.headers);
    const overrides = await createCustomer(clock.id, { invoice_grace_period: 5, net_payment_term: 0 }, graceOrg.headers);
    const plan = await createPlan({ amount_cents: 10_000 }, graceOrg.headers);
    const subA = await subscribe({ customer_id: inherits.id, plan_id: plan.id }, graceOrg.headers);
    const subB = await subscribe({ customer_id: overrides.id, plan_id: plan.id }, graceOrg.headers);
    const only = async (subId: string) => {
      const list = await invoicesOf(subId, graceOrg.headers);
      expect(list).toHaveLength(1);
      return list[0]!;
    };

    // February 1st: January's invoices are created as drafts.
    await advance(clock.id, '2030-02-01T00:00:00Z', graceOrg.headers);
    const a = await only(subA.id);
    const b = await only(subB.id);
    for (const draft of [a, b]) {
      expect(draft).toMatchObject({
        status: 'draft',
        issuing_date: null,
        payment_due_date: null,
        finalized_at: null,
        total: '10000.0000',
        payment_overdue: false,
      });
      expect(draft.number).toMatch(/^GRA-DRAFT-[0-9a-f]{8}$/i);
    }
    expect(a.net_payment_term).toBe(10);
    expect(b.net_payment_term).toBe(0);

    // A: created February 1st 00:00 + 2 days = February 3rd 00:00.
    await advance(clock.id, '2030-02-02T23:59:59Z', graceOrg.headers);
    expect((await invoice(a.id, graceOrg.headers)).status).toBe('draft');
    await advance(clock.id, '2030-02-03T00:00:00Z', graceOrg.headers);
    const finalizedA = await invoice(a.id, graceOrg.headers);
    expect(finalizedA).toMatchObject({
      status: 'finalized',
      issuing_date: '2030-02-03',
      payment_due_date: '2030-02-13', // 2030-02-03 + 10 days
      finalized_at: '2030-02-03T00:00:00.000Z',
      payment_overdue: false,
      total: '10000.0000',
    });
    expect(finalizedA.number).toMatch(/^[A-Z]{3}-\d{6}$/);
    expect(await eventTimes(graceOrg.id, 'invoice.finalized', a.id)).toEqual(['2030-02-03T00:00:00.000Z']);
    expect((await invoice(b.id, graceOrg.headers)).status).toBe('draft');

    // B: February 1st + 5 days = February 6th; due the same day (net 0), overdue when it ends.
    await advance(clock.id, '2030-02-06T00:00:00Z', graceOrg.headers);
    expect(await invoice(b.id, graceOrg.headers)).toMatchObject({
      status: 'finalized',
      issuing_date: '2030-02-06',
      payment_due_date: '2030-02-06',
      payment_overdue: false,
    });
    await advance(clock.id, '2030-02-06T23:59:59Z', graceOrg.headers);
    expect((await invoice(b.id, graceOrg.headers)).payment_overdue).toBe(false);
    await advance(clock.id, '2030-02-07T00:00:00Z', graceOrg.headers);
    expect((await invoice(b.id, graceOrg.headers)).payment_overdue).toBe(true);
    expect(await eventTimes(graceOrg.id, 'invoice.payment_overdue', b.id)).toEqual(['2030-02-07T00:00:00.000Z']);

    // A: due February 13th, overdue once that day has ended (February 14th, 00:00).
    await advance(clock.id, '2030-02-13T23:59:59Z', graceOrg.headers);
    expect((await invoice(a.id, graceOrg.headers)).payment_overdue).toBe(false);
    expect(await eventTimes(graceOrg.id, 'invoice.payment_overdue', a.id)).toEqual([]);
    await advance(clock.id, '2030-02-14T00:00:00Z', graceOrg.headers);
    expect(await invoice(a.id, graceOrg.headers)).toMatchObject({ status: 'finalized', payment_overdue: true });
    expect(await eventTimes(graceOrg.id, 'invoice.payment_overdue', a.id)).toEqual(['2030-02-14T00:00:00.000Z']);
  });
  it("issues a one-off invoice of a clock customer at the clock's time and makes it overdue by the clock", async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const created = await ok<InvoiceResource>(
      await post('/v1/invoices/one_off', {
        customer_id: customer.id,
        currency: 'USD',
        line_items: [{ description: 'Setup', unit_price: 5000 }],
      }),
      201,
    );
    // No grace period: finalized at once, on the clock's day; due 30 days later.
    const issued = await eventually(
      async () => {
        const now = await invoice(created.id);
        return now.status === 'finalized' ? now : undefined;
      },
      10_000,
      'the one-off invoice finalized',
    );
    expect(issued).toMatchObject({
      issuing_date: '2030-01-01',
      payment_due_date: '2030-01-31',
      payment_overdue: false,
      total: '5000.0000',
    });
    await advance(clock.id, '2030-01-31T23:59:59Z');
    expect((await invoice(created.id)).payment_overdue).toBe(false);
    await advance(clock.id, '2030-02-01T00:00:00Z');
    expect((await invoice(created.id)).payment_overdue).toBe(true);
    expect(await eventTimes(org.id, 'invoice.payment_overdue', created.id)).toEqual(['2030-02-01T00:00:00.000Z']);
  });
});

// ---- 6. wallet expiry -----------------------------------------------------------------------

describe('a wallet of a test clock customer', () => {
  it('expires when the clock passes its expiration_at, terminated at that instant', async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const created = await ok<WalletResource>(
      await post('/v1/wallets', {
        customer_id: customer.id,
        name: 'Prepaid',
        initial_granted_credits: '10',
        expiration_at: '2030-03-15T12:00:00Z',
      }),
      201,
    );
    // 10 credits at the default rate 1 = 10 * 1 * 100 = 1000 cents.
    expect(created).toMatchObject({
      status: 'active',
      credits_balance: '10.0000',
      balance_cents: '1000.0000',
      expiration_at: '2030-03-15T12:00:00.000Z',
      terminated_at: null,
    });

    await advance(clock.id, '2030-03-15T11:59:59Z');
    expect((await ok<WalletResource>(await get(`/v1/wallets/${created.id}`), 200)).status).toBe('active');

    await advance(clock.id, '2030-04-01T00:00:00Z');
    const expired = await ok<WalletResource>(await get(`/v1/wallets/${created.id}`), 200);
    expect(expired).toMatchObject({ status: 'terminated', terminated_at: '2030-03-15T12:00:00.000Z' });
    expect(await eventTimes(org.id, 'wallet.terminated', created.id)).toEqual(['2030-03-15T12:00:00.000Z']);
    expectError(await post(`/v1/wallets/${created.id}/top_up`, { credits: '1' }), 400, 'wallet_terminated');
    const listed = await ok<WalletResource[]>(await get(`/v1/wallets?customer_id=${customer.id}&status=terminated`), 200);
    expect(listed.map((w) => w.id)).toEqual([created.id]);
  });

  it("announces its creation and records its transactions at the clock's time", async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const wallet = await ok<WalletResource>(await post('/v1/wallets', { customer_id: customer.id, initial_granted_credits: '10' }), 201);
    await advance(clock.id, '2030-02-01T00:00:00Z');
    await ok<WalletResource>(await post(`/v1/wallets/${wallet.id}/top_up`, { credits: '5' }), 200);
    const transactions = await ok<{ credit_amount: string; created_at: string }[]>(await get(`/v1/wallets/${wallet.id}/transactions`), 200);
    expect(transactions.map((t) => [t.credit_amount, t.created_at]).sort()).toEqual([
      ['10', '2030-01-01T00:00:00.000Z'],
      ['5', '2030-02-01T00:00:00.000Z'],
    ]);
    expect(await eventTimes(org.id, 'wallet.created', wallet.id)).toEqual(['2030-01-01T00:00:00.000Z']);
  });

  it("judges expiration_at against the clock's time, not real time", async () => {
    // A clock in the real past: an expiration after the clock's time is in the customer's future.
    const past = await createClock('2025-01-01T00:00:00Z');
    const early = await createCustomer(past.id);
    const accepted = await post('/v1/wallets', { customer_id: early.id, expiration_at: '2025-03-01T00:00:00Z' });
    expect(accepted.statusCode, accepted.body).toBe(201);
    // A clock in the real future: an expiration before the clock's time has already passed for it.
    const future = await createClock('2030-01-01T00:00:00Z');
    const late = await createCustomer(future.id);
    expectValidationError(await post('/v1/wallets', { customer_id: late.id, expiration_at: '2029-12-31T00:00:00Z' }), 'expiration_at');
  });
});

// ---- 7. progressive billing -----------------------------------------------------------------

describe('progressive billing on a test clock', () => {
  it('bills usage past a threshold at the next daily check and credits it on the period invoice', async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    // 1000 cents a month, 100 cents a call, a threshold at 1000 cents of usage.
    const plan = await createPlan({ amount_cents: 1000, charge: '100' });
    const threshold = await ok<{ amount_cents: string; recurring: boolean }>(
      await post(`/v1/plans/${plan.id}/usage_thresholds`, { amount_cents: 1000, threshold_display_name: 'Ten calls' }),
      201,
    );
    expect(threshold).toMatchObject({ amount_cents: '1000.0000', recurring: false });
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id });

    // 15 calls on January 10th: 1500 cents of usage, past 1000. The clock stops before the next check.
    await advance(clock.id, '2030-01-10T23:00:00Z');
    await sendCalls(customer, sameDay('2030-01-10', 12));
    await sendCalls(customer, ['2030-01-10T22:00:00Z', '2030-01-10T22:30:00Z', '2030-01-10T22:59:00Z']);
    await advance(clock.id, '2030-01-10T23:59:59Z');
    expect(await invoicesOf(sub.id)).toEqual([]);

    // The check of January 11th 00:00 bills the usage so far: 15 * 100 = 1500.
    await advance(clock.id, '2030-01-11T12:00:00Z');
    const [progressive] = await invoicesOf(sub.id);
    expect(progressive).toMatchObject({
      invoice_type: 'progressive_billing',
      status: 'finalized',
      issuing_date: '2030-01-11',
      payment_due_date: '2030-02-10',
      fees_amount_cents: '1500.0000',
      progressive_billing_credit_amount_cents: '0.0000',
      total: '1500.0000',
    });
    expect(feeOf(progressive!, 'charge')).toEqual([{ units: '15.0000', amount_cents: '1500.0000' }]);
    expect(feeOf(progressive!, 'subscription')).toEqual([]);
    expect(await eventTimes(org.id, 'subscription.usage_threshold_reached', sub.id)).toEqual(['2030-01-11T00:00:00.000Z']);

    // 5 more calls: 2000 in all, no further fixed threshold crossed, so no second progressive invoice.
    await advance(clock.id, '2030-01-25T00:00:00Z');
    await sendCalls(customer, sameDay('2030-01-20', 5));
    await advance(clock.id, '2030-02-01T00:00:00Z');
    const invoices = await invoicesOf(sub.id);
    expect(invoices.map((i) => i.invoice_type)).toEqual(['progressive_billing', 'subscription']);
    // The period's invoice: 1000 + 20 calls * 100 = 3000, less the 1500 already billed = 1500.
    expect(invoices[1]).toMatchObject({
      issuing_date: '2030-02-01',
      fees_amount_cents: '3000.0000',
      subtotal: '3000.0000',
      progressive_billing_credit_amount_cents: '1500.0000',
      total: '1500.0000',
    });
    expect(feeOf(invoices[1]!, 'charge')).toEqual([{ units: '20.0000', amount_cents: '2000.0000' }]);
  });
});

// ---- 8. the walk-through of docs/test-clocks.md ---------------------------------------------

describe('the walk-through of docs/test-clocks.md', () => {
  it('runs steps 1 to 6 with the numbers of the documentation (and cleans up as step 7 says)', async () => {
    // A fresh organization with the defaults (UTC, no grace period, 30 days to pay), so that the
    // documentation's codes are free, and a webhook endpoint, so that GET /v1/webhooks shows deliveries.
    const tenant = await createOrganization(stack.app, { name: 'Walkthrough Inc' });
    const h = tenant.headers;
    await ok(await post('/v1/webhook_endpoints', { url: receiver.url('/walkthrough') }, h), 201);

    // 1. A clock at January 1st.
    const clock = await ok<TestClockResource>(
      await post('/v1/test_clocks', { name: 'pricing check', frozen_time: '2030-01-01T00:00:00Z' }, h),
      201,
    );
    // 2. A customer on it.
    const customer = await ok<CustomerResource>(
      await post('/v1/customers', { external_id: 'acme-sim', currency: 'USD', test_clock_id: clock.id }, h),
      201,
    );
    expect(customer.test_clock_id).toBe(clock.id);
    // 3. A monthly plan with a usage charge, and a subscription with a 14-day trial.
    const metric = await ok<BillableMetricResource>(
      await post('/v1/billable_metrics', { name: 'API calls', code: 'api_calls', aggregation_type: 'count' }, h),
      201,
    );
    const plan = await ok<PlanResource>(
      await post(
        '/v1/plans',
        {
          name: 'Pro',
          code: 'pro',
          interval: 'monthly',
          amount_cents: 4900,
          currency: 'USD',
          trial_period_days: 14,
          charges: [{ billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '2' } }],
        },
        h,
      ),
      201,
    );
    const sub = await ok<SubscriptionResource>(
      await post('/v1/subscriptions', { external_id: 'acme-sim-pro', customer_id: customer.id, plan_id: plan.id }, h),
      201,
    );
    // Starts at the clock's time, active and in trial until January 15th.
    expect(sub).toMatchObject({ status: 'active', in_trial: true, started_at: '2030-01-01T00:00:00.000Z' });

    // 4. Usage: advance into the month, then report what happened in it.
    await advance(clock.id, '2030-01-25T00:00:00Z', h);
    expect(await subscription(sub.id, h)).toMatchObject({ in_trial: false, trial_ended_at: '2030-01-15T00:00:00.000Z' });
    const batch = await ok<{ ingested: number; errors: unknown[] }>(
      await post(
        '/v1/events/batch',
        {
          events: [
            { transaction_id: 'sim-1', external_customer_id: 'acme-sim', code: 'api_calls', timestamp: '2030-01-20T10:00:00Z' },
            { transaction_id: 'sim-2', external_customer_id: 'acme-sim', code: 'api_calls', timestamp: '2030-01-21T10:00:00Z' },
          ],
        },
        h,
      ),
      201,
    );
    expect(batch).toMatchObject({ ingested: 2, errors: [] });

    // 5. Advance three months and wait for ready.
    await advance(clock.id, '2030-04-01T00:00:00Z', h);

    // 6. Read the invoices.
    const list = await ok<InvoiceResource[]>(await get(`/v1/invoices?customer_id=${customer.id}`, h), 200);
    const byDate = [...list].sort((x, y) => (x.issuing_date ?? '').localeCompare(y.issuing_date ?? ''));
    expect(
      byDate.map((i) => ({ issuing_date: i.issuing_date, total: i.total, status: i.status, payment_overdue: i.payment_overdue })),
    ).toEqual([
      // January from the trial end day (the 15th) included: 4900 * 17 / 31 = 2687.0968, + 2 calls * 2 = 2691.0968 -> 2691.
      { issuing_date: '2030-02-01', total: '2691.0000', status: 'finalized', payment_overdue: true },
      // February and March whole, no usage: 4900 each.
      { issuing_date: '2030-03-01', total: '4900.0000', status: 'finalized', payment_overdue: true },
      { issuing_date: '2030-04-01', total: '4900.0000', status: 'finalized', payment_overdue: false },
    ]);
    const [feb, mar, apr] = byDate as [InvoiceResource, InvoiceResource, InvoiceResource];
    const february = await invoice(feb.id, h);
    expect(february.fees_amount_cents).toBe('2691.0968');
    expect(feeOf(february, 'subscription')).toEqual([{ units: '17.0000', amount_cents: '2687.0968' }]);
    expect(feeOf(february, 'charge')).toEqual([{ units: '2.0000', amount_cents: '4.0000' }]);
    // Due 30 days after issue: March 3rd (February has 28 days in 2030), March 31st, May 1st.
    expect([feb.payment_due_date, mar.payment_due_date, apr.payment_due_date]).toEqual(['2030-03-03', '2030-03-31', '2030-05-01']);
    // Overdue once the due date has ended: March 4th 00:00, and April 1st 00:00 (the clock's time).
    expect(await eventTimes(tenant.id, 'invoice.payment_overdue', feb.id)).toEqual(['2030-03-04T00:00:00.000Z']);
    expect(await eventTimes(tenant.id, 'invoice.payment_overdue', mar.id)).toEqual(['2030-04-01T00:00:00.000Z']);
    expect(await eventTimes(tenant.id, 'invoice.payment_overdue', apr.id)).toEqual([]);

    // GET /v1/webhooks: what the simulation sent, each with the clock's time as created_at.
    const webhooks = await ok<WebhookResource[]>(await get('/v1/webhooks?limit=1000', h), 200);
    // A webhook's payload is the lifecycle event it delivered.
    const payloadOf = (w: WebhookResource) => w.payload as LifecycleEventPayload;
    const sent = (type: string, objectId: string) =>
      webhooks
        .filter((w) => w.webhook_type === type && payloadOf(w).data.object.id === objectId)
        .map((w) => payloadOf(w).created_at)
        .sort();
    expect(sent('customer.created', customer.id)).toEqual(['2030-01-01T00:00:00.000Z']);
    expect(sent('subscription.started', sub.id)).toEqual(['2030-01-01T00:00:00.000Z']);
    expect(sent('subscription.trial_ended', sub.id)).toEqual(['2030-01-15T00:00:00.000Z']);
    for (const [inv, issued] of [
      [feb, '2030-02-01'],
      [mar, '2030-03-01'],
      [apr, '2030-04-01'],
    ] as const) {
      expect(sent('invoice.created', inv.id)).toEqual([`${issued}T00:00:00.000Z`]);
      expect(sent('invoice.finalized', inv.id)).toEqual([`${issued}T00:00:00.000Z`]);
    }
    expect(sent('invoice.payment_overdue', feb.id)).toEqual(['2030-03-04T00:00:00.000Z']);
    expect(sent('invoice.payment_overdue', mar.id)).toEqual(['2030-04-01T00:00:00.000Z']);
    expect(sent('invoice.payment_overdue', apr.id)).toEqual([]);

    // 7. Clean up: refused while the subscription is live, then the clock and its customer go.
    expectError(await del(`/v1/test_clocks/${clock.id}`, h), 400, 'test_clock_in_use');
    expect((await ok<SubscriptionResource>(await del(`/v1/subscriptions/${sub.id}?on_termination_action=skip`, h), 200)).status).toBe(
      'terminated',
    );
    // skip: nothing more billed.
    expect(await ok<InvoiceResource[]>(await get(`/v1/invoices?customer_id=${customer.id}`, h), 200)).toHaveLength(3);
    expect((await ok<{ deleted_at: string | null }>(await del(`/v1/test_clocks/${clock.id}`, h), 200)).deleted_at).not.toBeNull();
    expectError(await get(`/v1/customers/${customer.id}`, h), 404, 'customer_not_found');
  }, 120_000);
});

// ---- 9. real customers ----------------------------------------------------------------------

describe('a real customer while a test clock advances', () => {
  it('keeps its subscription, periods and invoices unchanged while a clock advances a year', async () => {
    const plan = await createPlan({ amount_cents: 10_000, charge: '5' });
    const real = await createCustomer(null);
    const realSub = await subscribe({ customer_id: real.id, plan_id: plan.id });
    expect(realSub.status).toBe('active');
    const before = await subscription(realSub.id);
    const invoicesBefore = await invoicesOf(realSub.id);

    const clock = await createClock('2030-01-01T00:00:00Z');
    const simulated = await createCustomer(clock.id);
    const clockSub = await subscribe({ customer_id: simulated.id, plan_id: plan.id });
    // The same metric for both: a call of the clock's customer goes to its own subscription only.
    await advance(clock.id, '2030-01-15T00:00:00Z');
    await sendCalls(simulated, sameDay('2030-01-10', 2));

    await advance(clock.id, '2031-01-01T00:00:00Z');
    // The clock's subscription lived its year: 12 invoices (January with 2 calls: 10000 + 10).
    const billed = await invoicesOf(clockSub.id);
    expect(billed.map((i) => i.total)).toEqual(['10010.0000', ...Array<string>(11).fill('10000.0000')]);
    // Advanced in one call, each step still acts for its own instant: issued on each 1st, and
    // January's invoice (issued February 1st, due March 3rd) became overdue when March 3rd ended.
    expect(billed.map((i) => i.issuing_date)).toEqual(
      Array.from({ length: 12 }, (_, m) => new Date(Date.UTC(2030, m + 1, 1)).toISOString().slice(0, 10)),
    );
    expect(billed[0]!.payment_due_date).toBe('2030-03-03');
    expect(await eventTimes(org.id, 'invoice.payment_overdue', billed[0]!.id)).toEqual(['2030-03-04T00:00:00.000Z']);
    expect(await eventTimes(org.id, 'invoice.finalized', billed[5]!.id)).toEqual(['2030-07-01T00:00:00.000Z']);

    // The real one did not move at all.
    expect(await subscription(realSub.id)).toEqual(before);
    expect(await invoicesOf(realSub.id)).toEqual(invoicesBefore);
    expect(before.current_period_started_at).toBe(before.started_at);
  }, 120_000);
});

// ---- 10. advance validation during a real advance --------------------------------------------

describe('advancing a clock whose customers are being driven', () => {
  // test-clocks.test.ts covers the 422s on a clock without customers and the 400 on a clock
  // marked advancing; here the advance is a real one, driving a subscription through a year.
  it('refuses a second advance while one runs (400), then an advance to the same or an earlier time (422)', async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    await subscribe({ customer_id: customer.id, plan_id: (await createPlan({ amount_cents: 10_000 })).id });

    const first = await post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2031-01-01T00:00:00Z' });
    expect(first.statusCode, first.body).toBe(202);
    expectError(
      await post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2031-02-01T00:00:00Z' }),
      400,
      'invalid_state_transition',
    );
    expect(await ok<TestClockResource>(await get(`/v1/test_clocks/${clock.id}`), 200)).toMatchObject({
      status: 'advancing',
      frozen_time: '2031-01-01T00:00:00.000Z',
    });

    await eventually(
      async () => ((await ok<TestClockResource>(await get(`/v1/test_clocks/${clock.id}`), 200)).status === 'ready' ? true : undefined),
      60_000,
      'the clock ready',
    );
    expectValidationError(await post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2031-01-01T00:00:00Z' }), 'frozen_time');
    expectValidationError(await post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2030-12-31T23:59:59Z' }), 'frozen_time');
    expect(await ok<TestClockResource>(await get(`/v1/test_clocks/${clock.id}`), 200)).toMatchObject({
      status: 'ready',
      frozen_time: '2031-01-01T00:00:00.000Z',
    });
  });
});

// ---- issue 12: bills that used to collide or carry fractions ---------------------------------

async function creditNotesOf(customerId: string): Promise<CreditNoteResource[]> {
  const notes = await ok<CreditNoteResource[]>(await get(`/v1/credit_notes?customer_id=${customerId}`), 200);
  return notes.sort((a, b) => a.created_at.localeCompare(b.created_at) || a.number.localeCompare(b.number));
}

/** The customer's credit notes, once there is one (a termination issues it in its step). */
const firstCreditNotes = (customerId: string) =>
  eventually(
    async () => {
      const found = await creditNotesOf(customerId);
      return found.length > 0 ? found : undefined;
    },
    30_000,
    'the termination credit note',
  );

const creditsOf = (notes: CreditNoteResource[]) =>
  notes.map((n) => ({ items: n.items.map((i) => i.amount_cents), credit: n.credit_amount_cents, reason: n.reason }));

describe('same-day plan changes in advance (issue 12)', () => {
  it('an upgrade on the start day credits the first fee and bills the new plan on a new invoice', async () => {
    // January has 31 days: 3100 a month is 100 a day, 6200 is 200 a day. Created January 24th:
    // 8 days left (24th to 31st).
    const clock = await createClock('2030-01-24T09:00:00Z');
    const customer = await createCustomer(clock.id);
    const daily100 = await createPlan({ amount_cents: 3100 });
    const daily200 = await createPlan({ amount_cents: 6200 });
    const sub = await subscribe({ customer_id: customer.id, plan_id: daily100.id, pay_in_advance: true, billing_time: 'calendar' });
    expect((await invoicesOf(sub.id)).map((i) => i.total)).toEqual(['800.0000']);

    await ok(await put(`/v1/subscriptions/${sub.id}`, { plan_id: daily200.id }), 200);
    await eventually(async () => ((await invoicesOf(sub.id)).length === 2 ? true : undefined), 30_000, 'the upgrade invoice');
    const invoices = await invoicesOf(sub.id);
    expect(invoices.map((i) => ({ total: i.total, fees: feeOf(i, 'subscription') }))).toEqual([
      { total: '800.0000', fees: [{ units: '8.0000', amount_cents: '800.0000' }] },
      // The new plan's 8 days at 200, less the 800 credited: 1600 billed, 800 of it paid by the note.
      { total: '800.0000', fees: [{ units: '8.0000', amount_cents: '1600.0000' }] },
    ]);
    expect(invoices[1]).toMatchObject({ fees_amount_cents: '1600.0000', credit_notes_amount_cents: '800.0000' });
    expect(creditsOf(await creditNotesOf(customer.id))).toEqual([{ items: ['800.0000'], credit: '800.0000', reason: 'order_change' }]);
  });

  it('two upgrades in one day each credit the fee before them and bill their own', async () => {
    const clock = await createClock('2030-01-10T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const daily100 = await createPlan({ amount_cents: 3100 });
    const daily200 = await createPlan({ amount_cents: 6200 });
    const daily300 = await createPlan({ amount_cents: 9300 });
    const sub = await subscribe({ customer_id: customer.id, plan_id: daily100.id, pay_in_advance: true });
    await advance(clock.id, '2030-01-20T08:00:00Z');
    await ok(await put(`/v1/subscriptions/${sub.id}`, { plan_id: daily200.id }), 200);
    await advance(clock.id, '2030-01-20T15:00:00Z');
    await ok(await put(`/v1/subscriptions/${sub.id}`, { plan_id: daily300.id }), 200);
    await eventually(async () => ((await invoicesOf(sub.id)).length === 3 ? true : undefined), 30_000, 'both upgrade invoices');

    // January 10th to 31st: 22 days at 100; from the 20th: 12 days at 200, then at 300.
    const invoices = await invoicesOf(sub.id);
    expect(invoices.map((i) => feeOf(i, 'subscription'))).toEqual([
      [{ units: '22.0000', amount_cents: '2200.0000' }],
      [{ units: '12.0000', amount_cents: '2400.0000' }],
      [{ units: '12.0000', amount_cents: '3600.0000' }],
    ]);
    expect(creditsOf(await creditNotesOf(customer.id))).toEqual([
      { items: ['1200.0000'], credit: '1200.0000', reason: 'order_change' },
      { items: ['2400.0000'], credit: '2400.0000', reason: 'order_change' },
    ]);
  });
});

describe('a termination credit note in advance (issue 12)', () => {
  it('credits whole cents: 10000 x 21/31 is 6774', async () => {
    const clock = await createClock('2031-03-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const plan = await createPlan({ amount_cents: 10_000 });
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id, pay_in_advance: true });
    await advance(clock.id, '2031-03-10T12:00:00Z');
    await ok(await del(`/v1/subscriptions/${sub.id}?on_termination_action=generate_credit_note`), 200);
    const notes = await firstCreditNotes(customer.id);
    expect(notes).toHaveLength(1);
    expect(notes[0]).toMatchObject({ reason: 'order_cancellation', credit_amount_cents: '6774.0000', balance_amount_cents: '6774.0000' });
    expect(notes[0]!.items.map((i) => i.amount_cents)).toEqual(['6774.0000']);
  });

  it('credits a fee that was itself prorated up to what its invoice charged', async () => {
    // Started March 15th: 17 of 31 days, 10000 x 17/31 = 5483.8710, invoiced as 5484. Terminated
    // the same day: every billed day is unused.
    const clock = await createClock('2031-03-15T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const plan = await createPlan({ amount_cents: 10_000 });
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id, pay_in_advance: true });
    expect((await invoicesOf(sub.id)).map((i) => i.total)).toEqual(['5484.0000']);
    await advance(clock.id, '2031-03-16T00:00:00Z');
    await ok(await del(`/v1/subscriptions/${sub.id}?on_termination_action=generate_credit_note`), 200);
    const notes = await firstCreditNotes(customer.id);
    // March 17th to 31st: 15 days, 10000 x 15/31 = 4838.7097 -> 4839.
    expect(notes.map((n) => n.credit_amount_cents)).toEqual(['4839.0000']);
  });
});

describe('a termination credit note of a taxed fee (issue 12)', () => {
  it('gives back the unused days of the fee with their tax: 12000 x 21/31 is 8129', async () => {
    const clock = await createClock('2031-03-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const taxCode = uid('VAT');
    await ok(await post('/v1/taxes', { code: taxCode, name: 'VAT 20%', rate: '0.2' }), 201);
    await ok(await post('/v1/taxes/apply', { tax_code: taxCode, taxable_type: 'customer', taxable_id: customer.id }), 201);
    const plan = await createPlan({ amount_cents: 10_000 });
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id, pay_in_advance: true });
    // March in advance: 10000 and 2000 of tax.
    expect((await invoicesOf(sub.id)).map((i) => i.total)).toEqual(['12000.0000']);
    await advance(clock.id, '2031-03-10T12:00:00Z');
    await ok(await del(`/v1/subscriptions/${sub.id}?on_termination_action=generate_credit_note`), 200);
    const notes = await firstCreditNotes(customer.id);
    // 21 unused days of 31: 6774.19 of fee and 1354.84 of its tax, 8129.03 -> 8129.
    expect(notes.map((n) => n.credit_amount_cents)).toEqual(['8129.0000']);
  });
});

describe('each fee names the period it bills (issue 12)', () => {
  it('in advance, the boundary invoice and its base fee are for the starting period, its usage for the ended one', async () => {
    const clock = await createClock('2030-01-15T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const plan = await createPlan({ amount_cents: 3100, charge: '2' });
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id, pay_in_advance: true });
    const [first] = await invoicesOf(sub.id);
    expect(first).toMatchObject({ period_started_at: '2030-01-15T00:00:00.000Z', period_ended_at: '2030-02-01T00:00:00.000Z' });
    expect(first!.fees!.map((f) => [f.fee_type, f.period_started_at, f.period_ended_at])).toEqual([
      ['subscription', '2030-01-15T00:00:00.000Z', '2030-02-01T00:00:00.000Z'],
    ]);

    await advance(clock.id, '2030-01-20T00:00:00Z');
    await sendCalls(customer, sameDay('2030-01-18', 3));
    await advance(clock.id, '2030-02-01T00:00:00Z');
    const february = (await invoicesOf(sub.id)).find((i) => i.issuing_date === '2030-02-01')!;
    expect(february).toMatchObject({ period_started_at: '2030-02-01T00:00:00.000Z', period_ended_at: '2030-03-01T00:00:00.000Z' });
    const periods = february.fees!.map((f) => ({
      type: f.fee_type,
      units: f.units,
      amount: f.amount_cents,
      from: f.period_started_at,
      to: f.period_ended_at,
    }));
    expect(periods.sort((a, b) => a.type.localeCompare(b.type))).toEqual([
      { type: 'charge', units: '3.0000', amount: '6.0000', from: '2030-01-15T00:00:00.000Z', to: '2030-02-01T00:00:00.000Z' },
      // February: 28 days, the whole 3100.
      { type: 'subscription', units: '28.0000', amount: '3100.0000', from: '2030-02-01T00:00:00.000Z', to: '2030-03-01T00:00:00.000Z' },
    ]);
  });

  it('in arrear, an upgrade bills the old plan up to the change day and names that span', async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const basic = await createPlan({ amount_cents: 3100, charge: '1' });
    const pro = await createPlan({ amount_cents: 6200, charge: '1' });
    const sub = await subscribe({ customer_id: customer.id, plan_id: basic.id });
    await advance(clock.id, '2030-01-15T10:00:00Z');
    await sendCalls(customer, sameDay('2030-01-05', 2));
    await ok(await put(`/v1/subscriptions/${sub.id}`, { plan_id: pro.id }), 200);
    const [old] = await eventually(
      async () => {
        const found = await invoicesOf(sub.id);
        return found.length === 1 ? found : undefined;
      },
      30_000,
      'the old plan invoice',
    );
    expect(old).toMatchObject({ period_started_at: '2030-01-01T00:00:00.000Z', period_ended_at: '2030-01-15T00:00:00.000Z' });
    expect(old!.fees!.map((f) => [f.fee_type, f.amount_cents, f.period_started_at, f.period_ended_at]).sort()).toEqual([
      ['charge', '2.0000', '2030-01-01T00:00:00.000Z', '2030-01-15T00:00:00.000Z'],
      ['subscription', '1400.0000', '2030-01-01T00:00:00.000Z', '2030-01-15T00:00:00.000Z'],
    ]);
  });
});

describe('wallets at the finalization instant (issue 12, found by the finalization model)', () => {
  it('a wallet expiring later in the same advance pays for an earlier boundary', async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const plan = await createPlan({ amount_cents: 500 });
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id });
    const wallet = await ok<WalletResource>(
      await post('/v1/wallets', { customer_id: customer.id, initial_granted_credits: '10', expiration_at: '2030-03-01T00:00:00Z' }),
      201,
    );
    // One advance over both the February 1st boundary and the wallet's expiry.
    await advance(clock.id, '2030-03-01T00:00:00Z');
    const [january] = await invoicesOf(sub.id);
    expect(january).toMatchObject({ issuing_date: '2030-02-01', prepaid_credit_amount: '500.0000', total: '0.0000', status: 'paid' });
    expect(await ok<WalletResource>(await get(`/v1/wallets/${wallet.id}`), 200)).toMatchObject({
      status: 'terminated',
      balance_cents: '500.0000',
    });
  });

  it('pays whole cents and keeps a fraction of one', async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    const customer = await createCustomer(clock.id);
    const plan = await createPlan({ amount_cents: 1000 });
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id });
    // 1.2345 credits at 0.01 a credit: 1.2345 cents.
    const wallet = await ok<WalletResource>(
      await post('/v1/wallets', { customer_id: customer.id, rate_amount: '0.01', initial_granted_credits: '1.2345' }),
      201,
    );
    expect(wallet.balance_cents).toBe('1.2345');
    await advance(clock.id, '2030-02-01T00:00:00Z');
    const [january] = await invoicesOf(sub.id);
    expect(january).toMatchObject({ prepaid_credit_amount: '1.0000', total: '999.0000' });
    expect((await ok<WalletResource>(await get(`/v1/wallets/${wallet.id}`), 200)).balance_cents).toBe('0.2345');
  });
});

describe('coupons are used at finalization (issue 12, found by the finalization model)', () => {
  it('a once coupon discounts one invoice, even when two drafts wait out a grace period together', async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    // 40 days of grace: January's invoice (drafted February 1st) is finalized March 13th, after
    // February's was drafted on March 1st.
    const customer = await createCustomer(clock.id, { invoice_grace_period: 40 });
    const plan = await createPlan({ amount_cents: 1000 });
    const code = uid('ONCE');
    await ok(
      await post('/v1/coupons', {
        code,
        name: 'Once 300',
        coupon_type: 'fixed_amount',
        amount_cents: '300',
        amount_currency: 'USD',
        frequency: 'once',
      }),
      201,
    );
    await ok(await post('/v1/coupons/apply', { customer_id: customer.id, coupon_code: code }), 201);
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id });

    await advance(clock.id, '2030-03-01T00:00:00Z');
    expect((await invoicesOf(sub.id)).map((i) => i.status)).toEqual(['draft', 'draft']);
    await advance(clock.id, '2030-04-15T00:00:00Z');
    const [january, february] = await invoicesOf(sub.id);
    expect(january).toMatchObject({ status: 'finalized', coupons_amount_cents: '300.0000', total: '700.0000' });
    expect(february).toMatchObject({ status: 'finalized', coupons_amount_cents: '0.0000', total: '1000.0000' });
  });
});

describe('one advance delivers its instants in order (issue 12, found by the finalization model)', () => {
  it('finalizes two drafts whose grace periods end in one advance in date order: numbers and the wallet follow', async () => {
    const clock = await createClock('2030-01-01T00:00:00Z');
    // 40 days of grace: January's invoice (drafted February 1st) ends its grace on March 13th,
    // February's (drafted March 1st) on April 10th; one advance crosses both.
    const customer = await createCustomer(clock.id, { invoice_grace_period: 40 });
    const plan = await createPlan({ amount_cents: 1000 });
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id });
    await advance(clock.id, '2030-03-01T00:00:00Z');
    // 15 credits: all of January's 1000 and half of February's.
    const wallet = await ok<WalletResource>(await post('/v1/wallets', { customer_id: customer.id, initial_granted_credits: '15' }), 201);
    await advance(clock.id, '2030-04-15T00:00:00Z');
    const [january, february] = await invoicesOf(sub.id);
    expect(january).toMatchObject({ issuing_date: '2030-03-13', prepaid_credit_amount: '1000.0000', total: '0.0000', status: 'paid' });
    expect(february).toMatchObject({
      issuing_date: '2030-04-10',
      prepaid_credit_amount: '500.0000',
      total: '500.0000',
      status: 'finalized',
    });
    expect(Number(january!.number.split('-').pop())).toBeLessThan(Number(february!.number.split('-').pop()));
    expect((await ok<WalletResource>(await get(`/v1/wallets/${wallet.id}`), 200)).balance_cents).toBe('0.0000');
  });
});
