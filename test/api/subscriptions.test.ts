// Subscriptions over HTTP (specification sections 2, 3 and 4; api-contract.md "Subscriptions";
// billing-rules.md "Subscription lifecycle"), with a worker on the run's Temporal dev server for
// the whole file: creation starts the subscription's workflow and answers once its first step ran;
// PUT, cancel and DELETE go through the workflow's updates, whose validators' refusals are 400/422.
//
// The dev server runs in real time, so amounts are made independent of today's date: weekly
// anniversary plans (every period has 7 days) started a whole number of days ago, and a monthly
// calendar plan whose price is 100 cents per day of its first month.
import { randomUUID } from 'node:crypto';
import { DateTime } from 'luxon';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { initialState, planSnapshot } from '../../src/subscriptions/start';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { CreditNoteResource } from '../../src/resources/credit-note';
import type { CustomerResource } from '../../src/resources/customer';
import type { InvoiceResource } from '../../src/resources/invoice';
import type { PlanResource } from '../../src/resources/plan';
import type { SubscriptionResource } from '../../src/resources/subscription';
import { eventually, expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let org: TestOrganization;
let other: TestOrganization;
let metric: BillableMetricResource;

const DAY = 86_400_000;
const uid = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

type Headers = Record<string, string>;
const post = (url: string, payload?: unknown, headers: Headers = org.headers) =>
  stack.app.inject({ method: 'POST', url, headers, ...(payload === undefined ? {} : { payload: payload as object }) });
const put = (url: string, payload: unknown, headers: Headers = org.headers) =>
  stack.app.inject({ method: 'PUT', url, headers, payload: payload as object });
const get = (url: string, headers: Headers = org.headers) => stack.app.inject({ method: 'GET', url, headers });
const del = (url: string, headers: Headers = org.headers) => stack.app.inject({ method: 'DELETE', url, headers });

beforeAll(async () => {
  stack = await createTestStack();
  worker = await startStackWorker(stack);
  // invoice_grace_period 0 (the default): invoices are finalized as soon as they are created.
  org = await createOrganization(stack.app, { name: 'Subscriptions Org', default_currency: 'USD', timezone: 'UTC' });
  other = await createOrganization(stack.app, { name: 'Other Org', default_currency: 'USD', timezone: 'UTC' });
  const res = await post('/v1/billable_metrics', { code: uid('calls'), name: 'API calls', aggregation_type: 'count' });
  expect(res.statusCode, res.body).toBe(201);
  metric = res.json<BillableMetricResource>();
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

async function customer(headers: Headers = org.headers, extra: Record<string, unknown> = {}): Promise<CustomerResource> {
  const res = await post('/v1/customers', { external_id: uid('cus'), name: 'Subscriber', ...extra }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<CustomerResource>();
}

/** A plan with a usage charge (no events are sent, so it adds no fee line). */
async function plan(body: Record<string, unknown> = {}, headers: Headers = org.headers, metricId = metric.id): Promise<PlanResource> {
  const res = await post(
    '/v1/plans',
    {
      code: uid('plan'),
      name: 'Plan',
      interval: 'monthly',
      amount_cents: 10_000,
      currency: 'USD',
      charges: [{ billable_metric_id: metricId, charge_model: 'standard', properties: { amount: '5' } }],
      ...body,
    },
    headers,
  );
  expect(res.statusCode, res.body).toBe(201);
  return res.json<PlanResource>();
}

async function subscribe(body: Record<string, unknown>, headers: Headers = org.headers): Promise<SubscriptionResource> {
  worker.assertAlive();
  const res = await post('/v1/subscriptions', { external_id: uid('sub'), ...body }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<SubscriptionResource>();
}

async function invoicesOf(subscriptionId: string): Promise<InvoiceResource[]> {
  const res = await get(`/v1/invoices?subscription_id=${subscriptionId}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json<InvoiceResource[]>();
}

async function invoice(id: string): Promise<InvoiceResource> {
  const res = await get(`/v1/invoices/${id}`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json<InvoiceResource>();
}

/** The types of the lifecycle events recorded for one subscription, sorted by name. */
async function eventsOf(subscriptionId: string): Promise<string[]> {
  const events = await stack.db.models.LifecycleEvent.find({ organization_id: org.id, 'object.id': subscriptionId }).lean();
  return events.map((e) => e.type).sort();
}

/** One usage event of the file's metric (a standard charge of 5 cents per event on every plan). */
async function usage(c: CustomerResource, sub: SubscriptionResource, at: Date): Promise<void> {
  const res = await post('/v1/events', {
    transaction_id: uid('tx'),
    external_customer_id: c.external_id,
    external_subscription_id: sub.external_id,
    code: metric.code,
    timestamp: at.toISOString(),
  });
  expect(res.statusCode, res.body).toBe(201);
}

interface CreditNoteRow {
  invoice_id: string;
  reason: string;
  credit_amount_cents: string;
}

async function creditNotesOf(invoiceId: string): Promise<CreditNoteRow[]> {
  const res = await get(`/v1/credit_notes?invoice_id=${invoiceId}`);
  expect(res.statusCode, res.body).toBe(200);
  return res
    .json<CreditNoteResource[]>()
    .map((n) => ({ invoice_id: n.invoice_id, reason: n.reason, credit_amount_cents: n.credit_amount_cents }));
}

/** Midnight UTC, `days` days before today (the organization's zone is UTC). */
function daysAgoAtMidnight(days: number): Date {
  const now = new Date();
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate()) - days * DAY);
}

/** A weekly anniversary subscription started 3 days ago (01:00 UTC): every period has 7 days. */
async function weeklyStartedThreeDaysAgo(amountCents: number, extra: Record<string, unknown> = {}) {
  const c = await customer();
  const p = await plan({ interval: 'weekly', amount_cents: amountCents });
  const startedAt = new Date(daysAgoAtMidnight(3).getTime() + 3_600_000);
  const sub = await subscribe({
    customer_id: c.id,
    plan_id: p.id,
    billing_time: 'anniversary',
    started_at: startedAt.toISOString(),
    ...extra,
  });
  return { customer: c, plan: p, sub, startedAt };
}

describe('POST /v1/subscriptions', () => {
  it('creates an active subscription with the defaults, addressed by external ids and codes', async () => {
    const c = await customer();
    const p = await plan();
    const before = Date.now();
    const sub = await subscribe({ customer_id: c.external_id, plan_id: p.code, name: 'Main' });
    const after = Date.now();

    expect(sub).toMatchObject({
      organization_id: org.id,
      customer_id: c.id,
      external_customer_id: c.external_id,
      plan_id: p.id,
      name: 'Main',
      status: 'active',
      billing_time: 'calendar',
      pay_in_advance: false,
      trial_period_days: 0,
      in_trial: false,
      trial_ended_at: null,
      previous_plan_id: null,
      downgraded_at: null,
      ending_at: null,
      canceled_at: null,
      terminated_at: null,
      on_termination_action: 'generate_invoice',
    });
    expect(sub.id).toMatch(UUID);
    for (const t of [sub.started_at, sub.created_at, sub.updated_at, sub.current_period_started_at, sub.current_period_ending_at])
      expect(t).toMatch(ISO_MS_UTC);
    // started_at defaults to now; the first calendar period runs from it to the 1st of next month.
    const startedAt = Date.parse(sub.started_at);
    expect(startedAt).toBeGreaterThanOrEqual(before - 1000);
    expect(startedAt).toBeLessThanOrEqual(after);
    expect(sub.current_period_started_at).toBe(sub.started_at);
    const start = new Date(startedAt);
    expect(sub.current_period_ending_at).toBe(new Date(Date.UTC(start.getUTCFullYear(), start.getUTCMonth() + 1, 1)).toISOString());

    const res = await get(`/v1/subscriptions/${sub.id}`);
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual(sub);
    expect(await eventsOf(sub.id)).toEqual(['subscription.created', 'subscription.started']);
    // Pay in arrear: nothing is invoiced at the start.
    expect(await invoicesOf(sub.id)).toEqual([]);
  });

  it("applies the plan's trial: active and in trial, no invoice; trial_period_days 0 overrides it", async () => {
    const c = await customer();
    const p = await plan({ trial_period_days: 14 });
    const trial = await subscribe({ customer_id: c.id, plan_id: p.id, pay_in_advance: true });
    expect(trial).toMatchObject({ status: 'active', trial_period_days: 14, in_trial: true, trial_ended_at: null, pay_in_advance: true });
    // Nothing is invoiced during the trial, not even in advance.
    expect(await invoicesOf(trial.id)).toEqual([]);

    const none = await subscribe({ customer_id: c.id, plan_id: p.id, trial_period_days: 0 });
    expect(none).toMatchObject({ status: 'active', trial_period_days: 0, in_trial: false });
  });

  it('keeps a future start pending (announced, not started)', async () => {
    const c = await customer();
    const p = await plan();
    const startedAt = new Date(Date.now() + 10 * DAY).toISOString();
    const sub = await subscribe({ customer_id: c.id, plan_id: p.id, started_at: startedAt });
    expect(sub).toMatchObject({
      status: 'pending',
      started_at: startedAt,
      current_period_started_at: null,
      current_period_ending_at: null,
      in_trial: false,
    });
    expect(await eventsOf(sub.id)).toEqual(['subscription.created']);

    // A pending subscription can be terminated; nothing was used, nothing is billed.
    const res = await del(`/v1/subscriptions/${sub.id}`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<SubscriptionResource>()).toMatchObject({ status: 'terminated' });
    expect(await invoicesOf(sub.id)).toEqual([]);
  });

  it('activates a pending subscription when started_at is reached (a workflow timer)', async () => {
    const c = await customer();
    const p = await plan();
    const startedAt = new Date(Date.now() + 3000).toISOString();
    const sub = await subscribe({ customer_id: c.id, plan_id: p.id, started_at: startedAt });
    expect(sub.status).toBe('pending');
    const active = await eventually(
      async () => {
        worker.assertAlive();
        const now = (await get(`/v1/subscriptions/${sub.id}`)).json<SubscriptionResource>();
        return now.status === 'active' ? now : undefined;
      },
      15_000,
      'activation',
    );
    expect(active).toMatchObject({ started_at: startedAt, current_period_started_at: startedAt });
    // The activity saves the subscription, then records its events: the status can be read first.
    const events = await eventually(
      async () => {
        const types = await eventsOf(sub.id);
        return types.length === 2 ? types : undefined;
      },
      5_000,
      'subscription.started',
    );
    expect(events).toEqual(['subscription.created', 'subscription.started']);
  });

  it('bills the ended periods of a past start at once, in period order, the first prorated by days', async () => {
    // Started on the 15th, two months ago, at 10:00 UTC. The plan costs 100 cents per day of that
    // month, so the first (partial) period [15th, 1st) is 100 * (days - 14) cents:
    // prorated fee = amount * used_days / period_days = (100 * days) * (days - 14) / days.
    // (billing-rules.md's example: a 31-day month, 3100 * 17 / 31 = 1700.) The next month is a
    // whole period at the plan's full amount; the current month is not billed yet (in arrear).
    const now = new Date();
    const y = now.getUTCFullYear();
    const m = now.getUTCMonth();
    const startedAt = new Date(Date.UTC(y, m - 2, 15, 10));
    const firstMonthDays = new Date(Date.UTC(y, m - 1, 0)).getUTCDate();
    const amount = 100 * firstMonthDays;
    const c = await customer();
    const p = await plan({ amount_cents: amount });

    const sub = await subscribe({ customer_id: c.id, plan_id: p.id, started_at: startedAt.toISOString() });
    const currentMonth = new Date(Date.UTC(y, m, 1)).toISOString();
    expect(sub).toMatchObject({
      status: 'active',
      current_period_started_at: currentMonth,
      current_period_ending_at: new Date(Date.UTC(y, m + 1, 1)).toISOString(),
    });

    const invoices = (await invoicesOf(sub.id)).reverse(); // oldest first
    expect(invoices.map((i) => [i.period_started_at, i.period_ended_at])).toEqual([
      [startedAt.toISOString(), new Date(Date.UTC(y, m - 1, 1)).toISOString()],
      [new Date(Date.UTC(y, m - 1, 1)).toISOString(), currentMonth],
    ]);
    const first = await invoice(invoices[0]!.id);
    const second = await invoice(invoices[1]!.id);
    const prorated = 100 * (firstMonthDays - 14);
    expect(first).toMatchObject({
      invoice_type: 'subscription',
      currency: 'USD',
      fees_amount_cents: `${prorated}.0000`,
      subtotal: `${prorated}.0000`,
      total: `${prorated}.0000`,
    });
    expect(first.fees!.map((f) => [f.fee_type, f.amount_cents, f.units])).toEqual([
      ['subscription', `${prorated}.0000`, `${firstMonthDays - 14}.0000`],
    ]);
    expect(second).toMatchObject({ fees_amount_cents: `${amount}.0000`, total: `${amount}.0000` });
    expect(second.fees!.map((f) => [f.fee_type, f.amount_cents])).toEqual([['subscription', `${amount}.0000`]]);
    // Finalized at once (no grace period), numbered in period order.
    for (const i of [first, second]) expect(i.status).not.toBe('draft');
    expect(first.number < second.number).toBe(true);
  });

  it('rejects unknown fields and invalid values (422)', async () => {
    const c = await customer();
    const p = await plan();
    const base = { external_id: uid('sub'), customer_id: c.id, plan_id: p.id };
    expectUnknownFields(await post('/v1/subscriptions', { ...base, plan_code: 'x', colour: 'red' }), ['plan_code', 'colour']);
    expectValidationError(await post('/v1/subscriptions', { ...base, billing_time: 'weekly' }), 'billing_time');
    expectValidationError(await post('/v1/subscriptions', { ...base, on_termination_action: 'refund' }), 'on_termination_action');
    expectValidationError(await post('/v1/subscriptions', { ...base, pay_in_advance: 'yes' }), 'pay_in_advance');
    expectValidationError(await post('/v1/subscriptions', { ...base, trial_period_days: -1 }), 'trial_period_days');
    expectValidationError(await post('/v1/subscriptions', { ...base, trial_period_days: 1.5 }), 'trial_period_days');
    expectValidationError(await post('/v1/subscriptions', { ...base, started_at: 'tomorrow' }), 'started_at');
    expectValidationError(await post('/v1/subscriptions', { ...base, external_id: 'x'.repeat(256) }), 'external_id');
    expectValidationError(await post('/v1/subscriptions', { customer_id: c.id, plan_id: p.id }), 'external_id');
    expectValidationError(await post('/v1/subscriptions', { external_id: uid('sub'), plan_id: p.id }), 'customer_id');
    expectValidationError(await post('/v1/subscriptions', { external_id: uid('sub'), customer_id: c.id }), 'plan_id');
    expectError(await post('/v1/subscriptions', [base]), 400, 'invalid_json');
    // Nothing was created by any of them.
    expect(await stack.db.models.Subscription.countDocuments({ customer_id: c.id })).toBe(0);
  });

  it('answers 404 for an unknown customer or plan, also when they belong to another organization', async () => {
    const c = await customer();
    const p = await plan();
    expectError(
      await post('/v1/subscriptions', { external_id: uid('sub'), customer_id: 'nobody', plan_id: p.id }),
      404,
      'customer_not_found',
    );
    expectError(
      await post('/v1/subscriptions', { external_id: uid('sub'), customer_id: c.id, plan_id: 'no-such-plan' }),
      404,
      'plan_not_found',
    );

    const otherMetric = await post('/v1/billable_metrics', { code: uid('calls'), name: 'Calls', aggregation_type: 'count' }, other.headers);
    const otherPlan = await plan({}, other.headers, otherMetric.json<BillableMetricResource>().id);
    const otherCustomer = await customer(other.headers);
    expectError(
      await post('/v1/subscriptions', { external_id: uid('sub'), customer_id: c.id, plan_id: otherPlan.id }),
      404,
      'plan_not_found',
    );
    expectError(
      await post('/v1/subscriptions', { external_id: uid('sub'), customer_id: c.id, plan_id: otherPlan.code }),
      404,
      'plan_not_found',
    );
    expectError(
      await post('/v1/subscriptions', { external_id: uid('sub'), customer_id: otherCustomer.id, plan_id: p.id }),
      404,
      'customer_not_found',
    );
  });

  it("refuses a plan in another currency than the customer's (422 on plan_id)", async () => {
    const c = await customer(org.headers, { currency: 'USD' });
    const eur = await plan({ currency: 'EUR' });
    expectValidationError(await post('/v1/subscriptions', { external_id: uid('sub'), customer_id: c.id, plan_id: eur.id }), 'plan_id');
  });

  it('refuses a duplicate external_id in the organization (409), not in another one', async () => {
    const c = await customer();
    const p = await plan();
    const externalId = uid('dup');
    await subscribe({ external_id: externalId, customer_id: c.id, plan_id: p.id });
    expectError(await post('/v1/subscriptions', { external_id: externalId, customer_id: c.id, plan_id: p.id }), 409, 'already_exists');
    expect(await stack.db.models.Subscription.countDocuments({ organization_id: org.id, external_id: externalId })).toBe(1);

    const otherMetric = await post('/v1/billable_metrics', { code: uid('calls'), name: 'Calls', aggregation_type: 'count' }, other.headers);
    const otherPlan = await plan({}, other.headers, otherMetric.json<BillableMetricResource>().id);
    const otherCustomer = await customer(other.headers);
    const elsewhere = await subscribe({ external_id: externalId, customer_id: otherCustomer.id, plan_id: otherPlan.id }, other.headers);
    expect(elsewhere.organization_id).toBe(other.id);
  });

  it("bills in the customer's time zone, else the organization's", async () => {
    const c = await customer(org.headers, { timezone: 'America/New_York' });
    const p = await plan();
    const sub = await subscribe({ customer_id: c.id, plan_id: p.id });
    // The first calendar period ends at the next local midnight of the 1st in New York.
    const end = new Date(sub.current_period_ending_at!);
    expect(DateTime.fromJSDate(end, { zone: 'America/New_York' }).toFormat('d HH:mm:ss.SSS')).toBe('1 00:00:00.000');
  });
});

describe('GET /v1/subscriptions', () => {
  let lister: TestOrganization;
  let alice: CustomerResource;
  let bob: CustomerResource;
  let basic: PlanResource;
  let premium: PlanResource;
  const subs: SubscriptionResource[] = [];

  beforeAll(async () => {
    lister = await createOrganization(stack.app, { name: 'Lister Org' });
    const m = (
      await post('/v1/billable_metrics', { code: uid('calls'), name: 'Calls', aggregation_type: 'count' }, lister.headers)
    ).json<BillableMetricResource>();
    [alice, bob] = [await customer(lister.headers), await customer(lister.headers)];
    basic = await plan({ amount_cents: 1000 }, lister.headers, m.id);
    premium = await plan({ amount_cents: 5000 }, lister.headers, m.id);
    subs.push(await subscribe({ external_id: 'l-1', customer_id: alice.id, plan_id: basic.id }, lister.headers));
    subs.push(await subscribe({ external_id: 'l-2', customer_id: alice.id, plan_id: premium.id }, lister.headers));
    subs.push(
      await subscribe(
        { external_id: 'l-3', customer_id: bob.id, plan_id: basic.id, started_at: new Date(Date.now() + 5 * DAY).toISOString() },
        lister.headers,
      ),
    );
    subs.push(await subscribe({ external_id: 'l-4', customer_id: bob.id, plan_id: premium.id }, lister.headers));
  });

  async function list(query: string): Promise<{ ids: string[]; total: number }> {
    const res = await get(`/v1/subscriptions${query}`, lister.headers);
    expect(res.statusCode, res.body).toBe(200);
    return { ids: res.json<SubscriptionResource[]>().map((s) => s.external_id), total: Number(res.headers['x-total-count']) };
  }

  it('lists newest first with X-Total-Count, and pages', async () => {
    expect(await list('')).toEqual({ ids: ['l-4', 'l-3', 'l-2', 'l-1'], total: 4 });
    expect(await list('?skip=1&limit=2')).toEqual({ ids: ['l-3', 'l-2'], total: 4 });
    expect(await list('/')).toEqual({ ids: ['l-4', 'l-3', 'l-2', 'l-1'], total: 4 });
  });

  it('filters by customer (id or external_id), status, external_id and plan (id or code)', async () => {
    expect(await list(`?customer_id=${alice.id}`)).toEqual({ ids: ['l-2', 'l-1'], total: 2 });
    expect(await list(`?customer_id=${bob.external_id}`)).toEqual({ ids: ['l-4', 'l-3'], total: 2 });
    expect(await list('?status=pending')).toEqual({ ids: ['l-3'], total: 1 });
    expect(await list('?status=active')).toEqual({ ids: ['l-4', 'l-2', 'l-1'], total: 3 });
    expect(await list('?external_id=l-2')).toEqual({ ids: ['l-2'], total: 1 });
    expect(await list(`?plan_id=${basic.id}`)).toEqual({ ids: ['l-3', 'l-1'], total: 2 });
    expect(await list(`?plan_id=${premium.code}&customer_id=${bob.id}`)).toEqual({ ids: ['l-4'], total: 1 });
    expect(await list('?customer_id=nobody')).toEqual({ ids: [], total: 0 });
  });

  it('validates the query (422)', async () => {
    expectValidationError(await get('/v1/subscriptions?status=suspended', lister.headers), 'status');
    expectValidationError(await get('/v1/subscriptions?limit=0', lister.headers), 'limit');
    expectValidationError(await get('/v1/subscriptions?skip=-1', lister.headers), 'skip');
  });

  it('gets one by id or external_id; an unknown one is 404', async () => {
    const byId = await get(`/v1/subscriptions/${subs[1]!.id}`, lister.headers);
    const byExternalId = await get('/v1/subscriptions/l-2', lister.headers);
    expect(byId.statusCode).toBe(200);
    expect(byExternalId.statusCode).toBe(200);
    expect(byExternalId.json()).toEqual(byId.json());
    expect(byId.json<SubscriptionResource>().plan_id).toBe(premium.id);
    expectError(await get(`/v1/subscriptions/${randomUUID()}`, lister.headers), 404, 'subscription_not_found');
  });
});

describe('PUT /v1/subscriptions/{id}', () => {
  it('upgrades at once: the old plan is billed through the day before, plan_changed is emitted', async () => {
    // Weekly anniversary plan of 7000 started 3 days ago: the old plan's segment is those 3 days,
    // 7000 * 3 / 7 = 3000 (billing-rules.md: the change day belongs to the new plan).
    const { sub, startedAt } = await weeklyStartedThreeDaysAgo(7000);
    const higher = await plan({ interval: 'weekly', amount_cents: 14_000 });
    const res = await put(`/v1/subscriptions/${sub.id}`, { plan_id: higher.code });
    expect(res.statusCode, res.body).toBe(200);
    const changed = res.json<SubscriptionResource>();
    expect(changed).toMatchObject({ status: 'active', plan_id: higher.id, previous_plan_id: null, downgraded_at: null });
    // The period boundaries do not move.
    expect(changed.current_period_started_at).toBe(startedAt.toISOString());
    expect(changed.current_period_ending_at).toBe(new Date(daysAgoAtMidnight(3).getTime() + 7 * DAY).toISOString());

    const invoices = await invoicesOf(sub.id);
    expect(invoices).toHaveLength(1);
    const billed = await invoice(invoices[0]!.id);
    expect(billed).toMatchObject({
      period_started_at: startedAt.toISOString(),
      period_ended_at: daysAgoAtMidnight(0).toISOString(),
      total: '3000.0000',
    });
    expect(billed.fees!.map((f) => [f.fee_type, f.amount_cents, f.units])).toEqual([['subscription', '3000.0000', '3.0000']]);
    expect(await eventsOf(sub.id)).toEqual(['subscription.created', 'subscription.plan_changed', 'subscription.started']);
    expect((await get(`/v1/subscriptions/${sub.id}`)).json<SubscriptionResource>().plan_id).toBe(higher.id);
  });

  it('upgrades in advance: the unused old fee is credited and the new fee charged for the same days', async () => {
    // Weekly anniversary plan of 7000 in advance, started 3 days ago: 7000 was invoiced at the
    // start. Upgrade today to 14000: the change day through the period end is 4 days, so
    // credit 7000 * 4 / 7 = 4000 and charge 14000 * 4 / 7 = 8000 (billing-rules.md, Upgrade).
    // The old plan's usage so far (2 events x 5 cents = 10) is invoiced at once.
    const { customer: c, sub, startedAt } = await weeklyStartedThreeDaysAgo(7000, { pay_in_advance: true });
    await usage(c, sub, new Date(startedAt.getTime() + DAY));
    await usage(c, sub, new Date(startedAt.getTime() + DAY));
    const [advance] = await invoicesOf(sub.id);
    expect((await invoice(advance!.id)).fees!.map((f) => [f.fee_type, f.amount_cents, f.units])).toEqual([
      ['subscription', '7000.0000', '7.0000'],
    ]);

    const higher = await plan({ interval: 'weekly', amount_cents: 14_000 });
    const res = await put(`/v1/subscriptions/${sub.id}`, { plan_id: higher.id });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<SubscriptionResource>()).toMatchObject({ plan_id: higher.id, pay_in_advance: true });

    const invoices = (await invoicesOf(sub.id)).filter((i) => i.id !== advance!.id);
    const fees = await Promise.all(
      invoices.map(async (i) => (await invoice(i.id)).fees!.map((f) => [f.fee_type, f.amount_cents, f.units])),
    );
    expect(fees).toEqual(expect.arrayContaining([[['charge', '10.0000', '2.0000']], [['subscription', '8000.0000', '4.0000']]]));
    expect(fees).toHaveLength(2);
    expect(await creditNotesOf(advance!.id)).toEqual([
      { invoice_id: advance!.id, reason: 'order_change', credit_amount_cents: '4000.0000' },
    ]);
  });

  it('an equal yearly amount on another interval is an upgrade', async () => {
    const c = await customer();
    const monthly = await plan({ amount_cents: 1000 });
    // Quarterly 3000 = 12000 a year = monthly 1000 x 12: equal counts as an upgrade.
    const quarterly = await plan({ interval: 'quarterly', amount_cents: 3000 });
    const sub = await subscribe({ customer_id: c.id, plan_id: monthly.id });
    const res = await put(`/v1/subscriptions/${sub.id}`, { plan_id: quarterly.id });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<SubscriptionResource>()).toMatchObject({ plan_id: quarterly.id, previous_plan_id: null });
  });

  it('schedules a downgrade; the current plan removes it (200); with nothing pending it is 400', async () => {
    const c = await customer();
    const current = await plan({ amount_cents: 10_000 });
    const lower = await plan({ amount_cents: 5000 });
    const lowest = await plan({ amount_cents: 2000 });
    const sub = await subscribe({ customer_id: c.id, plan_id: current.id });

    const before = Date.now();
    const res = await put(`/v1/subscriptions/${sub.id}`, { plan_id: lower.id });
    expect(res.statusCode, res.body).toBe(200);
    const scheduled = res.json<SubscriptionResource>();
    expect(scheduled).toMatchObject({ status: 'active', plan_id: current.id, previous_plan_id: lower.id });
    expect(scheduled.downgraded_at).toMatch(ISO_MS_UTC);
    expect(Date.parse(scheduled.downgraded_at!)).toBeGreaterThanOrEqual(before - 1000);
    // Nothing is billed and nothing announced until the boundary.
    expect(await invoicesOf(sub.id)).toEqual([]);
    expect(await eventsOf(sub.id)).not.toContain('subscription.plan_changed');

    // A new PUT replaces the pending target.
    const replaced = await put(`/v1/subscriptions/${sub.id}`, { plan_id: lowest.code });
    expect(replaced.statusCode, replaced.body).toBe(200);
    expect(replaced.json<SubscriptionResource>()).toMatchObject({ plan_id: current.id, previous_plan_id: lowest.id });

    const removed = await put(`/v1/subscriptions/${sub.id}`, { plan_id: current.id });
    expect(removed.statusCode, removed.body).toBe(200);
    expect(removed.json<SubscriptionResource>()).toMatchObject({ plan_id: current.id, previous_plan_id: null, downgraded_at: null });

    expectError(await put(`/v1/subscriptions/${sub.id}`, { plan_id: current.id }), 400, 'invalid_state_transition');
  });

  it('refuses an unknown plan (404), a plan in another currency (422) and bad bodies (422)', async () => {
    const c = await customer();
    const p = await plan();
    const sub = await subscribe({ customer_id: c.id, plan_id: p.id });
    expectError(await put(`/v1/subscriptions/${sub.id}`, { plan_id: 'no-such-plan' }), 404, 'plan_not_found');
    const eur = await plan({ currency: 'EUR', amount_cents: 50_000 });
    expectValidationError(await put(`/v1/subscriptions/${sub.id}`, { plan_id: eur.id }), 'plan_id');
    expectUnknownFields(await put(`/v1/subscriptions/${sub.id}`, { plan_id: p.id, billing_time: 'anniversary' }), ['billing_time']);
    expectValidationError(await put(`/v1/subscriptions/${sub.id}`, {}), 'plan_id');
    expectError(await put(`/v1/subscriptions/${randomUUID()}`, { plan_id: p.id }), 404, 'subscription_not_found');
    // Nothing changed.
    expect((await get(`/v1/subscriptions/${sub.id}`)).json<SubscriptionResource>()).toMatchObject({
      plan_id: p.id,
      previous_plan_id: null,
    });
  });

  it('renames without touching the plan', async () => {
    const c = await customer();
    const p = await plan();
    const sub = await subscribe({ customer_id: c.id, plan_id: p.id, name: 'Old name' });
    const res = await put(`/v1/subscriptions/${sub.external_id}`, { name: 'New name' });
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<SubscriptionResource>()).toMatchObject({ id: sub.id, name: 'New name', plan_id: p.id, status: 'active' });
  });
});

describe('POST /v1/subscriptions/{id}/cancel', () => {
  it('cancels at the end of the current period: still active, ending_at and canceled_at set; twice is 400', async () => {
    const c = await customer();
    const p = await plan();
    const sub = await subscribe({ customer_id: c.id, plan_id: p.id });
    const before = Date.now();
    const res = await post(`/v1/subscriptions/${sub.id}/cancel?on_termination_action=skip`);
    expect(res.statusCode, res.body).toBe(200);
    const canceled = res.json<SubscriptionResource>();
    expect(canceled).toMatchObject({
      status: 'active',
      ending_at: sub.current_period_ending_at,
      on_termination_action: 'skip',
      terminated_at: null,
    });
    expect(canceled.canceled_at).toMatch(ISO_MS_UTC);
    expect(Date.parse(canceled.canceled_at!)).toBeGreaterThanOrEqual(before - 1000);
    expect(await eventsOf(sub.id)).toEqual(['subscription.canceled', 'subscription.created', 'subscription.started']);

    expectError(await post(`/v1/subscriptions/${sub.id}/cancel`), 400, 'invalid_state_transition');
    // A canceled subscription's plan can no longer change.
    const higher = await plan({ amount_cents: 20_000 });
    expectError(await put(`/v1/subscriptions/${sub.id}`, { plan_id: higher.id }), 400, 'invalid_state_transition');
  });

  it('keeps the stored on_termination_action when the query omits it, validates it, and refuses a pending one', async () => {
    const c = await customer();
    const p = await plan();
    const sub = await subscribe({ customer_id: c.id, plan_id: p.id, on_termination_action: 'generate_credit_note' });
    expectValidationError(await post(`/v1/subscriptions/${sub.id}/cancel?on_termination_action=refund`), 'on_termination_action');
    const res = await post(`/v1/subscriptions/${sub.external_id}/cancel`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<SubscriptionResource>()).toMatchObject({
      on_termination_action: 'generate_credit_note',
      ending_at: sub.current_period_ending_at,
    });

    const pending = await subscribe({ customer_id: c.id, plan_id: p.id, started_at: new Date(Date.now() + 3 * DAY).toISOString() });
    expectError(await post(`/v1/subscriptions/${pending.id}/cancel`), 400, 'invalid_state_transition');
  });
});

describe('DELETE /v1/subscriptions/{id}', () => {
  it('terminates at once and invoices the used days in arrear (generate_invoice); then everything is 400', async () => {
    // Weekly anniversary plan of 7000 started 3 days ago, terminated today: the termination day
    // is a used day, so 4 days of 7 are billed, 7000 * 4 / 7 = 4000.
    const { customer: c, plan: p, sub, startedAt } = await weeklyStartedThreeDaysAgo(7000, { on_termination_action: 'skip' });
    const before = Date.now();
    const res = await del(`/v1/subscriptions/${sub.id}?on_termination_action=generate_invoice`);
    expect(res.statusCode, res.body).toBe(200);
    const terminated = res.json<SubscriptionResource>();
    expect(terminated).toMatchObject({ status: 'terminated', on_termination_action: 'generate_invoice', in_trial: false });
    expect(terminated.terminated_at).toMatch(ISO_MS_UTC);
    expect(Date.parse(terminated.terminated_at!)).toBeGreaterThanOrEqual(before - 1000);
    expect(terminated.ending_at).toBe(terminated.terminated_at);

    const invoices = await invoicesOf(sub.id);
    expect(invoices).toHaveLength(1);
    const billed = await invoice(invoices[0]!.id);
    expect(billed).toMatchObject({
      invoice_type: 'subscription',
      period_started_at: startedAt.toISOString(),
      period_ended_at: daysAgoAtMidnight(-1).toISOString(),
      total: '4000.0000',
    });
    expect(billed.fees!.map((f) => [f.fee_type, f.amount_cents, f.units])).toEqual([['subscription', '4000.0000', '4.0000']]);
    expect(await eventsOf(sub.id)).toEqual(['subscription.created', 'subscription.started', 'subscription.terminated']);

    expect((await get(`/v1/subscriptions/${sub.id}`)).json<SubscriptionResource>().status).toBe('terminated');
    const higher = await plan({ interval: 'weekly', amount_cents: 14_000 });
    expectError(await put(`/v1/subscriptions/${sub.id}`, { plan_id: higher.id }), 400, 'invalid_state_transition');
    expectError(await put(`/v1/subscriptions/${sub.id}`, { name: 'renamed' }), 400, 'invalid_state_transition');
    expectError(await post(`/v1/subscriptions/${sub.id}/cancel`), 400, 'invalid_state_transition');
    expectError(await del(`/v1/subscriptions/${sub.id}`), 400, 'invalid_state_transition');
    // No second invoice from the refused commands.
    expect(await invoicesOf(sub.id)).toHaveLength(1);
    // With no live subscription left, the customer and the plan can be deleted.
    expect((await del(`/v1/customers/${c.id}`)).statusCode).toBe(200);
    expect((await del(`/v1/plans/${p.id}`)).statusCode).toBe(200);
  });

  it('generate_credit_note in advance: the usage is invoiced and the days after today credited', async () => {
    // Weekly anniversary plan of 7000 in advance, started 3 days ago, terminated today: today is a
    // used day, the 3 days after it are credited: 7000 * 3 / 7 = 3000. One event today: 5 cents.
    const { customer: c, sub } = await weeklyStartedThreeDaysAgo(7000, { pay_in_advance: true });
    await usage(c, sub, new Date());
    const [advance] = await invoicesOf(sub.id);
    const res = await del(`/v1/subscriptions/${sub.id}?on_termination_action=generate_credit_note`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<SubscriptionResource>()).toMatchObject({ status: 'terminated', on_termination_action: 'generate_credit_note' });
    const invoices = (await invoicesOf(sub.id)).filter((i) => i.id !== advance!.id);
    expect(invoices).toHaveLength(1);
    expect((await invoice(invoices[0]!.id)).fees!.map((f) => [f.fee_type, f.amount_cents, f.units])).toEqual([
      ['charge', '5.0000', '1.0000'],
    ]);
    expect(await creditNotesOf(advance!.id)).toEqual([
      { invoice_id: advance!.id, reason: 'order_cancellation', credit_amount_cents: '3000.0000' },
    ]);
  });

  // Pay in advance with no usage: nothing is left to bill, so no invoice (a regression test: an
  // invoice without lines once made the terminate step fail forever and this DELETE never answer).
  it('generate_invoice in advance without usage terminates', async () => {
    const { sub } = await weeklyStartedThreeDaysAgo(7000, { pay_in_advance: true });
    const res = await del(`/v1/subscriptions/${sub.id}?on_termination_action=generate_invoice`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<SubscriptionResource>().status).toBe('terminated');
    expect(await invoicesOf(sub.id)).toHaveLength(1); // the week's fee, billed at the start
  });

  it('skip bills nothing', async () => {
    const { sub } = await weeklyStartedThreeDaysAgo(7000);
    const res = await del(`/v1/subscriptions/${sub.id}?on_termination_action=skip`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<SubscriptionResource>()).toMatchObject({ status: 'terminated', on_termination_action: 'skip' });
    expect(await invoicesOf(sub.id)).toEqual([]);
  });

  it('validates the query (422)', async () => {
    const c = await customer();
    const p = await plan();
    const sub = await subscribe({ customer_id: c.id, plan_id: p.id });
    expectValidationError(await del(`/v1/subscriptions/${sub.id}?on_termination_action=later`), 'on_termination_action');
    expect((await get(`/v1/subscriptions/${sub.id}`)).json<SubscriptionResource>().status).toBe('active');
  });
});

describe('a subscription whose workflow never started', () => {
  it('is started from its document by the next command', async () => {
    // As a creation that crashed between the insert and the workflow start leaves it.
    const c = await customer();
    const p = await plan();
    const planDoc = await stack.db.models.Plan.findById(p.id).lean();
    const draft = new stack.db.models.Subscription({
      organization_id: org.id,
      customer_id: c.id,
      external_customer_id: c.external_id,
      external_id: uid('orphan'),
      plan_id: p.id,
      status: 'pending',
      started_at: new Date(),
    });
    draft.workflow_state = initialState(draft.toObject(), planSnapshot(planDoc!), 'UTC', {
      jitterWindowMs: 0,
      progressiveCheckMs: 3_600_000,
    }) as unknown as Record<string, unknown>;
    await draft.save();

    const res = await post(`/v1/subscriptions/${draft._id}/cancel`);
    expect(res.statusCode, res.body).toBe(200);
    const canceled = res.json<SubscriptionResource>();
    expect(canceled).toMatchObject({ status: 'active', external_id: draft.external_id });
    expect(canceled.canceled_at).toMatch(ISO_MS_UTC);
    expect(canceled.ending_at).toBe(canceled.current_period_ending_at);
  });
});

describe('customers with subscriptions', () => {
  it('DELETE /v1/customers/{id} stays 400 customer_has_active_subscriptions while one is active', async () => {
    const c = await customer();
    const p = await plan();
    const sub = await subscribe({ customer_id: c.id, plan_id: p.id });
    expectError(await del(`/v1/customers/${c.id}`), 400, 'customer_has_active_subscriptions');
    expectError(await del(`/v1/customers/${c.external_id}`), 400, 'customer_has_active_subscriptions');
    expect((await del(`/v1/subscriptions/${sub.id}?on_termination_action=skip`)).statusCode).toBe(200);
    expect((await del(`/v1/customers/${c.id}`)).statusCode).toBe(200);
  });
});

describe('tenant isolation', () => {
  it("another organization's subscription is 404 everywhere and absent from its list", async () => {
    const c = await customer();
    const p = await plan();
    const sub = await subscribe({ customer_id: c.id, plan_id: p.id });
    const h = other.headers;
    expectError(await get(`/v1/subscriptions/${sub.id}`, h), 404, 'subscription_not_found');
    expectError(await get(`/v1/subscriptions/${sub.external_id}`, h), 404, 'subscription_not_found');
    expectError(await put(`/v1/subscriptions/${sub.id}`, { name: 'stolen' }, h), 404, 'subscription_not_found');
    expectError(await post(`/v1/subscriptions/${sub.id}/cancel`, undefined, h), 404, 'subscription_not_found');
    expectError(await del(`/v1/subscriptions/${sub.id}`, h), 404, 'subscription_not_found');
    const list = await get(`/v1/subscriptions?external_id=${sub.external_id}`, h);
    expect(list.statusCode).toBe(200);
    expect(list.json()).toEqual([]);
    expect(list.headers['x-total-count']).toBe('0');
    // Untouched.
    expect((await get(`/v1/subscriptions/${sub.id}`)).json<SubscriptionResource>()).toMatchObject({ status: 'active', name: null });
  });

  it('requires an API key', async () => {
    expectError(await stack.app.inject({ method: 'GET', url: '/v1/subscriptions' }), 401, 'unauthorized');
  });
});

describe('OpenAPI', () => {
  it('documents every subscription route', async () => {
    const res = await stack.app.inject({ method: 'GET', url: '/docs/openapi.json' });
    expect(res.statusCode).toBe(200);
    const paths = res.json<{ paths: Record<string, Record<string, unknown>> }>().paths;
    expect(Object.keys(paths['/v1/subscriptions'] ?? {}).sort()).toEqual(['get', 'post']);
    expect(Object.keys(paths['/v1/subscriptions/{id}'] ?? {}).sort()).toEqual(['delete', 'get', 'put']);
    expect(Object.keys(paths['/v1/subscriptions/{id}/cancel'] ?? {})).toEqual(['post']);
  });
});
