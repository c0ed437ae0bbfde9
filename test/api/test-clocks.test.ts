// Test clocks over HTTP (the test-clocks issue): CRUD, validation and tenant isolation of
// /v1/test_clocks; customers on a clock (test_clock_id checked and immutable, announced at the
// clock's time); events of a clock's customer (timestamp defaulting to the clock's time, never after
// it; real customers unchanged); subscriptions started at the clock's time without billing-day
// jitter; current usage at the clock's time and from the current plan segment; deletion refused
// while a subscription of the clock is live; the advance (202, then ready).
//
// A worker on the run's Temporal dev server serves the workflows (which follow their customer's
// clock). The clocks of the creation and deletion tests are set a few minutes before real time, so
// that what they check does not depend on how a workflow catches up with a clock in the past.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { CustomerResource } from '../../src/resources/customer';
import type { EventResource } from '../../src/resources/event';
import type { PlanResource } from '../../src/resources/plan';
import type { SubscriptionResource } from '../../src/resources/subscription';
import type { TestClockResource } from '../../src/resources/test-clock';
import { insertPlan, insertSubscription } from '../support/catalog-fixtures';
import { eventually, expectError, expectUnknownFields, expectValidationError, ISO_MS_UTC, UUID } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

let stack: TestStack;
let worker: StackWorker;
let org: TestOrganization;
let other: TestOrganization;
let metric: BillableMetricResource;

const MINUTE = 60_000;
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
  org = await createOrganization(stack.app, {
    name: 'Clock Org',
    default_currency: 'USD',
    timezone: 'UTC',
    events_rate_limit_per_minute: 100_000,
  });
  other = await createOrganization(stack.app, { name: 'Other Clock Org', default_currency: 'USD', timezone: 'UTC' });
  const res = await post('/v1/billable_metrics', { code: uid('calls'), name: 'API calls', aggregation_type: 'count' });
  expect(res.statusCode, res.body).toBe(201);
  metric = res.json<BillableMetricResource>();
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

async function createClock(
  frozenTime: Date | string,
  extra: Record<string, unknown> = {},
  headers: Headers = org.headers,
): Promise<TestClockResource> {
  const res = await post(
    '/v1/test_clocks',
    { frozen_time: typeof frozenTime === 'string' ? frozenTime : frozenTime.toISOString(), ...extra },
    headers,
  );
  expect(res.statusCode, res.body).toBe(201);
  return res.json<TestClockResource>();
}

async function createCustomer(extra: Record<string, unknown> = {}, headers: Headers = org.headers): Promise<CustomerResource> {
  const res = await post('/v1/customers', { external_id: uid('cus'), ...extra }, headers);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<CustomerResource>();
}

async function createPlan(): Promise<PlanResource> {
  const res = await post('/v1/plans', {
    code: uid('plan'),
    name: 'Plan',
    interval: 'monthly',
    amount_cents: 10_000,
    currency: 'USD',
    charges: [{ billable_metric_id: metric.id, charge_model: 'standard', properties: { amount: '5' } }],
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<PlanResource>();
}

async function subscribe(body: Record<string, unknown>): Promise<SubscriptionResource> {
  worker.assertAlive();
  const res = await post('/v1/subscriptions', { external_id: uid('sub'), ...body });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<SubscriptionResource>();
}

/** A clock a few minutes before real time (see the header), at a whole second. */
function recentClockTime(): Date {
  return new Date(Math.floor((Date.now() - 5 * MINUTE) / 1000) * 1000);
}

describe('POST /v1/test_clocks', () => {
  it('creates a ready clock at the given time (normalized to UTC with milliseconds)', async () => {
    const res = await post('/v1/test_clocks', { name: 'Renewals', frozen_time: '2025-01-15T10:00:00+02:00' });
    expect(res.statusCode, res.body).toBe(201);
    const clock = res.json<TestClockResource>();
    expect(clock).toEqual({
      id: expect.stringMatching(UUID),
      organization_id: org.id,
      name: 'Renewals',
      frozen_time: '2025-01-15T08:00:00.000Z',
      status: 'ready',
      created_at: expect.stringMatching(ISO_MS_UTC),
      updated_at: expect.stringMatching(ISO_MS_UTC),
      deleted_at: null,
    });
    const read = await get(`/v1/test_clocks/${clock.id}`);
    expect(read.statusCode, read.body).toBe(200);
    expect(read.json()).toEqual(clock);
  });

  it('makes name optional (null)', async () => {
    const clock = await createClock('2025-03-01T00:00:00Z');
    expect(clock.name).toBeNull();
  });

  it('refuses a missing or malformed frozen_time, a long name and unknown fields (422)', async () => {
    expectValidationError(await post('/v1/test_clocks', { name: 'No time' }), 'frozen_time');
    expectValidationError(await post('/v1/test_clocks', { frozen_time: 'yesterday' }), 'frozen_time');
    expectValidationError(await post('/v1/test_clocks', { frozen_time: '2025-01-15T10:00:00' }), 'frozen_time');
    expectValidationError(await post('/v1/test_clocks', { frozen_time: 1736935200 }), 'frozen_time');
    expectValidationError(await post('/v1/test_clocks', { frozen_time: '2025-01-15T10:00:00Z', name: 'x'.repeat(256) }), 'name');
    expectUnknownFields(await post('/v1/test_clocks', { frozen_time: '2025-01-15T10:00:00Z', status: 'advancing' }), ['status']);
  });

  it('needs an API key (401)', async () => {
    expectError(
      await stack.app.inject({ method: 'POST', url: '/v1/test_clocks', payload: { frozen_time: '2025-01-15T10:00:00Z' } }),
      401,
      'unauthorized',
    );
  });
});

describe('GET /v1/test_clocks', () => {
  it('lists the live clocks of the organization, newest first, with X-Total-Count and pages', async () => {
    const o = await createOrganization(stack.app, { name: 'List Org' });
    const a = await createClock('2025-01-01T00:00:00Z', { name: 'a' }, o.headers);
    const b = await createClock('2025-02-01T00:00:00Z', { name: 'b' }, o.headers);
    const c = await createClock('2025-03-01T00:00:00Z', { name: 'c' }, o.headers);
    const gone = await createClock('2025-04-01T00:00:00Z', { name: 'gone' }, o.headers);
    await stack.db.models.TestClock.updateOne({ _id: gone.id }, { $set: { deleted_at: new Date() } });
    await createClock('2025-05-01T00:00:00Z', { name: 'elsewhere' }, other.headers);

    const all = await get('/v1/test_clocks', o.headers);
    expect(all.statusCode, all.body).toBe(200);
    expect(all.headers['x-total-count']).toBe('3');
    expect(all.json<TestClockResource[]>().map((x) => x.id)).toEqual([c.id, b.id, a.id]);

    const page = await get('/v1/test_clocks/?skip=1&limit=1', o.headers);
    expect(page.statusCode, page.body).toBe(200);
    expect(page.headers['x-total-count']).toBe('3');
    expect(page.json<TestClockResource[]>().map((x) => x.id)).toEqual([b.id]);
  });

  it('refuses skip and limit out of range (422)', async () => {
    expectValidationError(await get('/v1/test_clocks?limit=0'), 'limit');
    expectValidationError(await get('/v1/test_clocks?limit=1001'), 'limit');
    expectValidationError(await get('/v1/test_clocks?skip=-1'), 'skip');
  });
});

describe('GET /v1/test_clocks/{id}', () => {
  it("answers 404 test_clock_not_found for an unknown id, another organization's clock and a deleted clock", async () => {
    expectError(await get(`/v1/test_clocks/${randomUUID()}`), 404, 'test_clock_not_found');
    const theirs = await createClock('2025-01-01T00:00:00Z', {}, other.headers);
    expectError(await get(`/v1/test_clocks/${theirs.id}`), 404, 'test_clock_not_found');
    expectError(await del(`/v1/test_clocks/${theirs.id}`), 404, 'test_clock_not_found');
    expectError(await post(`/v1/test_clocks/${theirs.id}/advance`, { frozen_time: '2025-02-01T00:00:00Z' }), 404, 'test_clock_not_found');
    const gone = await createClock('2025-01-01T00:00:00Z');
    await stack.db.models.TestClock.updateOne({ _id: gone.id }, { $set: { deleted_at: new Date() } });
    expectError(await get(`/v1/test_clocks/${gone.id}`), 404, 'test_clock_not_found');
  });
});

describe('customers on a test clock', () => {
  it('creates a customer on a clock of the organization and shows test_clock_id', async () => {
    const clock = await createClock('2025-01-15T00:00:00Z');
    const customer = await createCustomer({ test_clock_id: clock.id });
    expect(customer.test_clock_id).toBe(clock.id);
    const read = await get(`/v1/customers/${customer.id}`);
    expect(read.json<CustomerResource>().test_clock_id).toBe(clock.id);
    expect((await createCustomer()).test_clock_id).toBeNull();
    expect((await createCustomer({ test_clock_id: null })).test_clock_id).toBeNull();
  });

  it("refuses an unknown, another organization's or a deleted clock (404 test_clock_not_found)", async () => {
    expectError(await post('/v1/customers', { external_id: uid('cus'), test_clock_id: randomUUID() }), 404, 'test_clock_not_found');
    const theirs = await createClock('2025-01-15T00:00:00Z', {}, other.headers);
    expectError(await post('/v1/customers', { external_id: uid('cus'), test_clock_id: theirs.id }), 404, 'test_clock_not_found');
    const gone = await createClock('2025-01-15T00:00:00Z');
    await stack.db.models.TestClock.updateOne({ _id: gone.id }, { $set: { deleted_at: new Date() } });
    expectError(await post('/v1/customers', { external_id: uid('cus'), test_clock_id: gone.id }), 404, 'test_clock_not_found');
    expectValidationError(await post('/v1/customers', { external_id: uid('cus'), test_clock_id: 42 }), 'test_clock_id');
  });

  it('keeps test_clock_id immutable: the same value is accepted, any other is 422', async () => {
    const clock = await createClock('2025-01-15T00:00:00Z');
    const another = await createClock('2025-01-15T00:00:00Z');
    const onClock = await createCustomer({ test_clock_id: clock.id });
    const real = await createCustomer();

    const same = await put(`/v1/customers/${onClock.id}`, { test_clock_id: clock.id, name: 'Renamed' });
    expect(same.statusCode, same.body).toBe(200);
    expect(same.json<CustomerResource>()).toMatchObject({ test_clock_id: clock.id, name: 'Renamed' });
    expectValidationError(await put(`/v1/customers/${onClock.id}`, { test_clock_id: another.id }), 'test_clock_id');
    expectValidationError(await put(`/v1/customers/${onClock.id}`, { test_clock_id: null }), 'test_clock_id');
    expectValidationError(await put(`/v1/customers/${real.id}`, { test_clock_id: clock.id }), 'test_clock_id');
    const stillReal = await put(`/v1/customers/${real.id}`, { test_clock_id: null });
    expect(stillReal.statusCode, stillReal.body).toBe(200);
    expect(stillReal.json<CustomerResource>().test_clock_id).toBeNull();
    expect((await get(`/v1/customers/${onClock.id}`)).json<CustomerResource>().test_clock_id).toBe(clock.id);
  });

  it("announces customer.created at the clock's time (a real customer: at its creation)", async () => {
    const clock = await createClock('2025-01-15T08:30:00Z');
    const onClock = await createCustomer({ test_clock_id: clock.id });
    const real = await createCustomer();
    const created = async (customerId: string) =>
      eventually(
        async () =>
          (await stack.db.models.LifecycleEvent.findOne({
            organization_id: org.id,
            type: 'customer.created',
            'object.id': customerId,
          }).lean()) ?? undefined,
      );
    expect((await created(onClock.id)).occurred_at.toISOString()).toBe('2025-01-15T08:30:00.000Z');
    const realEvent = await created(real.id);
    expect(Math.abs(realEvent.occurred_at.getTime() - Date.now())).toBeLessThan(MINUTE);
  });
});

describe("events of a test clock's customer", () => {
  const event = (customer: CustomerResource, extra: Record<string, unknown> = {}) => ({
    transaction_id: uid('tx'),
    external_customer_id: customer.external_id,
    code: metric.code,
    ...extra,
  });

  it("default to the clock's time and may be at or before it", async () => {
    const clock = await createClock('2025-01-15T12:00:00Z');
    const customer = await createCustomer({ test_clock_id: clock.id });

    const defaulted = await post('/v1/events', event(customer));
    expect(defaulted.statusCode, defaulted.body).toBe(201);
    expect(defaulted.json<EventResource>().timestamp).toBe('2025-01-15T12:00:00.000Z');

    const atClock = await post('/v1/events', event(customer, { timestamp: '2025-01-15T14:00:00+02:00' }));
    expect(atClock.statusCode, atClock.body).toBe(201);
    expect(atClock.json<EventResource>().timestamp).toBe('2025-01-15T12:00:00.000Z');

    const before = await post('/v1/events', event(customer, { timestamp: '2025-01-10T00:00:00Z' }));
    expect(before.statusCode, before.body).toBe(201);
    expect(before.json<EventResource>().timestamp).toBe('2025-01-10T00:00:00.000Z');
  });

  it("refuses a timestamp after the clock's time: 422 on timestamp for one event, a per-event error in a batch", async () => {
    const clock = await createClock('2025-01-15T12:00:00Z');
    const customer = await createCustomer({ test_clock_id: clock.id });

    const single = expectValidationError(await post('/v1/events', event(customer, { timestamp: '2025-01-15T12:00:00.001Z' })), 'timestamp');
    expect(single.message).toContain('2025-01-15T12:00:00.000Z');
    expectValidationError(await post('/v1/events', event(customer, { timestamp: Math.floor(Date.now() / 1000) })), 'timestamp');

    const batch = await post('/v1/events/batch', {
      events: [
        event(customer, { timestamp: '2025-01-14T00:00:00Z' }),
        event(customer, { timestamp: '2025-02-01T00:00:00Z' }),
        event(customer),
      ],
    });
    expect(batch.statusCode, batch.body).toBe(201);
    const result = batch.json<{
      ingested: number;
      duplicates: number;
      events: EventResource[];
      errors: { index: number; code: string; message: string }[];
    }>();
    expect(result.ingested).toBe(2);
    expect(result.events.map((e) => e.timestamp)).toEqual(['2025-01-14T00:00:00.000Z', '2025-01-15T12:00:00.000Z']);
    expect(result.errors).toEqual([{ index: 1, code: 'validation_error', message: expect.stringMatching(/^timestamp: /) }]);
  });

  it('follow the clock of each customer in one batch; a real customer keeps real time', async () => {
    const early = await createCustomer({ test_clock_id: (await createClock('2025-01-15T00:00:00Z')).id });
    const late = await createCustomer({ test_clock_id: (await createClock('2025-06-15T00:00:00Z')).id });
    const real = await createCustomer();
    const sentAt = Date.now();
    const res = await post('/v1/events/batch', {
      events: [event(early), event(late), event(real), event(real, { timestamp: '2199-01-01T00:00:00Z' })],
    });
    expect(res.statusCode, res.body).toBe(201);
    const result = res.json<{ events: EventResource[]; errors: unknown[] }>();
    expect(result.errors).toEqual([]);
    const [a, b, c, d] = result.events;
    expect(a!.timestamp).toBe('2025-01-15T00:00:00.000Z');
    expect(b!.timestamp).toBe('2025-06-15T00:00:00.000Z');
    expect(Math.abs(Date.parse(c!.timestamp) - sentAt)).toBeLessThan(MINUTE);
    expect(d!.timestamp).toBe('2199-01-01T00:00:00.000Z');
  });

  it('move with the clock: after the clock moves, its new time is the default and the limit', async () => {
    const clock = await createClock('2025-01-15T00:00:00Z');
    const customer = await createCustomer({ test_clock_id: clock.id });
    // The advance itself is the workflow side's: only the clock's time matters here.
    await stack.db.models.TestClock.updateOne({ _id: clock.id }, { $set: { frozen_time: new Date('2025-03-01T00:00:00Z') } });
    const res = await post('/v1/events', event(customer, { timestamp: '2025-02-20T00:00:00Z' }));
    expect(res.statusCode, res.body).toBe(201);
    const defaulted = await post('/v1/events', event(customer));
    expect(defaulted.json<EventResource>().timestamp).toBe('2025-03-01T00:00:00.000Z');
  });
});

describe("subscriptions of a test clock's customer", () => {
  it("start at the clock's time by default, without billing-day jitter", async () => {
    const frozen = recentClockTime();
    const clock = await createClock(frozen);
    const customer = await createCustomer({ test_clock_id: clock.id });
    const plan = await createPlan();
    const sub = await subscribe({ customer_id: customer.id, plan_id: plan.id });
    expect(sub.started_at).toBe(frozen.toISOString());
    expect(sub.status).toBe('active');
    const doc = await stack.db.models.Subscription.findById(sub.id).lean();
    expect((doc!.workflow_state as { jitterMs: number }).jitterMs).toBe(0);

    // An explicit started_at stands.
    const explicit = await subscribe({
      customer_id: customer.id,
      plan_id: plan.id,
      started_at: new Date(frozen.getTime() - MINUTE).toISOString(),
    });
    expect(explicit.started_at).toBe(new Date(frozen.getTime() - MINUTE).toISOString());
  });

  it('keep the test clock from being deleted while one is pending or active (400 test_clock_in_use)', async () => {
    const clock = await createClock(recentClockTime());
    const customer = await createCustomer({ test_clock_id: clock.id });
    const sub = await subscribe({ customer_id: customer.id, plan_id: (await createPlan()).id });
    expect(sub.status).toBe('active');
    expectError(await del(`/v1/test_clocks/${clock.id}`), 400, 'test_clock_in_use');
    expect((await get(`/v1/test_clocks/${clock.id}`)).json<TestClockResource>().deleted_at).toBeNull();

    const pendingClock = await createClock(recentClockTime());
    const pendingCustomer = await createCustomer({ test_clock_id: pendingClock.id });
    const { planId } = await insertPlan(stack.db, org.id, { interval: 'monthly', charges: [] });
    await insertSubscription(stack.db, {
      organizationId: org.id,
      customerId: pendingCustomer.id,
      externalCustomerId: pendingCustomer.external_id,
      planId,
      startedAt: new Date('2030-01-01T00:00:00Z'),
      status: 'pending',
    });
    expectError(await del(`/v1/test_clocks/${pendingClock.id}`), 400, 'test_clock_in_use');
  });
});

describe("current usage of a test clock's customer", () => {
  it("is the period containing the clock's time, from the current plan segment, counting events up to the clock", async () => {
    const clock = await createClock('2025-06-20T00:00:00Z');
    const customer = await createCustomer({ test_clock_id: clock.id });
    const plan = await createPlan();
    const subscriptionId = await insertSubscription(stack.db, {
      organizationId: org.id,
      customerId: customer.id,
      externalCustomerId: customer.external_id,
      planId: plan.id,
      startedAt: new Date('2025-01-01T00:00:00Z'),
    });
    for (const timestamp of ['2025-06-05T00:00:00Z', '2025-06-12T00:00:00Z', '2025-06-19T00:00:00Z']) {
      const res = await post('/v1/events', {
        transaction_id: uid('tx'),
        external_customer_id: customer.external_id,
        code: metric.code,
        timestamp,
      });
      expect(res.statusCode, res.body).toBe(201);
    }
    const usage = async () => {
      const res = await get(`/v1/customers/${customer.id}/current_usage`);
      expect(res.statusCode, res.body).toBe(200);
      return res.json<{ from_datetime: string; to_datetime: string; charges: { units: string; events_count: number }[] }>();
    };

    // No period recorded yet: the one containing the clock's time (not real time).
    const whole = await usage();
    expect([whole.from_datetime, whole.to_datetime]).toEqual(['2025-06-01T00:00:00.000Z', '2025-07-01T00:00:00.000Z']);
    expect(whole.charges[0]).toMatchObject({ units: '3.0000', events_count: 3 });

    // After an upgrade on June 10 the current plan's part starts there.
    await stack.db.models.Subscription.updateOne(
      { _id: subscriptionId },
      {
        $set: {
          current_period_started_at: new Date('2025-06-01T00:00:00Z'),
          current_period_ending_at: new Date('2025-07-01T00:00:00Z'),
          workflow_state: { segmentFrom: '2025-06-10T00:00:00.000Z' },
        },
      },
    );
    const segment = await usage();
    expect([segment.from_datetime, segment.to_datetime]).toEqual(['2025-06-10T00:00:00.000Z', '2025-07-01T00:00:00.000Z']);
    expect(segment.charges[0]).toMatchObject({ units: '2.0000', events_count: 2 });
  });
});

describe('DELETE /v1/test_clocks/{id}', () => {
  it('deletes a clock whose subscriptions are over, with its customers (200 with deleted_at)', async () => {
    const clock = await createClock(recentClockTime());
    const customer = await createCustomer({ test_clock_id: clock.id });
    const sub = await subscribe({ customer_id: customer.id, plan_id: (await createPlan()).id, on_termination_action: 'skip' });
    expectError(await del(`/v1/test_clocks/${clock.id}`), 400, 'test_clock_in_use');
    const terminated = await del(`/v1/subscriptions/${sub.id}`);
    expect(terminated.statusCode, terminated.body).toBe(200);

    const res = await del(`/v1/test_clocks/${clock.id}`);
    expect(res.statusCode, res.body).toBe(200);
    const deleted = res.json<TestClockResource>();
    expect(deleted).toMatchObject({ id: clock.id, organization_id: org.id });
    expect(deleted.deleted_at).toMatch(ISO_MS_UTC);
    expectError(await get(`/v1/test_clocks/${clock.id}`), 404, 'test_clock_not_found');
    expectError(await get(`/v1/customers/${customer.id}`), 404, 'customer_not_found');
    expect((await get('/v1/test_clocks')).json<TestClockResource[]>().map((c) => c.id)).not.toContain(clock.id);
  });

  it('deletes a clock without customers', async () => {
    const clock = await createClock('2025-01-01T00:00:00Z');
    const res = await del(`/v1/test_clocks/${clock.id}/`);
    expect(res.statusCode, res.body).toBe(200);
    expect(res.json<TestClockResource>().deleted_at).toMatch(ISO_MS_UTC);
  });
});

describe('POST /v1/test_clocks/{id}/advance', () => {
  it('refuses a frozen_time at or before the current one, or none (422 on frozen_time)', async () => {
    const clock = await createClock('2025-01-15T00:00:00Z');
    expectValidationError(await post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2025-01-14T23:59:59Z' }), 'frozen_time');
    expectValidationError(await post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2025-01-15T01:00:00+01:00' }), 'frozen_time');
    expectValidationError(await post(`/v1/test_clocks/${clock.id}/advance`, {}), 'frozen_time');
    expectValidationError(await post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: 'later' }), 'frozen_time');
    expectUnknownFields(await post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2025-02-01T00:00:00Z', status: 'ready' }), [
      'status',
    ]);
    const unchanged = (await get(`/v1/test_clocks/${clock.id}`)).json<TestClockResource>();
    expect(unchanged).toMatchObject({ frozen_time: '2025-01-15T00:00:00.000Z', status: 'ready' });
  });

  it('refuses an advance while another is under way (400 invalid_state_transition)', async () => {
    const clock = await createClock('2025-01-15T00:00:00Z');
    await stack.db.models.TestClock.updateOne(
      { _id: clock.id },
      { $set: { status: 'advancing', frozen_time: new Date('2025-02-01T00:00:00Z'), advance_started_at: new Date() } },
    );
    expectError(
      await post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2025-03-01T00:00:00Z' }),
      400,
      'invalid_state_transition',
    );
    expectError(
      await post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2025-01-20T00:00:00Z' }),
      400,
      'invalid_state_transition',
    );
    expect((await get(`/v1/test_clocks/${clock.id}`)).json<TestClockResource>().frozen_time).toBe('2025-02-01T00:00:00.000Z');
  });

  it('answers 202 at once with status advancing, then the clock is ready at the new time', async () => {
    const clock = await createClock('2025-01-15T00:00:00Z');
    const res = await post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2025-02-15T00:00:00Z' });
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json<TestClockResource>()).toMatchObject({ id: clock.id, status: 'advancing', frozen_time: '2025-02-15T00:00:00.000Z' });
    const ready = await eventually(
      async () => {
        const now = (await get(`/v1/test_clocks/${clock.id}`)).json<TestClockResource>();
        return now.status === 'ready' ? now : undefined;
      },
      30_000,
      'the clock to be ready',
    );
    expect(ready.frozen_time).toBe('2025-02-15T00:00:00.000Z');
  });

  it('lets one of two concurrent advances through (202) and refuses the other (400)', async () => {
    const clock = await createClock('2025-01-15T00:00:00Z');
    const [a, b] = await Promise.all([
      post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2025-02-01T00:00:00Z' }),
      post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2025-03-01T00:00:00Z' }),
    ]);
    expect([a.statusCode, b.statusCode].sort(), `${a.body} ${b.body}`).toEqual([202, 400]);
    expectError(a.statusCode === 400 ? a : b, 400, 'invalid_state_transition');
    const winner = (a.statusCode === 202 ? a : b).json<TestClockResource>();
    await eventually(
      async () => ((await get(`/v1/test_clocks/${clock.id}`)).json<TestClockResource>().status === 'ready' ? true : undefined),
      30_000,
      'the clock to be ready',
    );
    expect((await get(`/v1/test_clocks/${clock.id}`)).json<TestClockResource>().frozen_time).toBe(winner.frozen_time);
  });

  it("carries its customers' subscriptions into the clock's new period", async () => {
    const clock = await createClock('2025-01-15T00:00:00Z');
    const customer = await createCustomer({ test_clock_id: clock.id });
    const sub = await subscribe({ customer_id: customer.id, plan_id: (await createPlan()).id });
    expect(sub).toMatchObject({
      status: 'active',
      started_at: '2025-01-15T00:00:00.000Z',
      current_period_started_at: '2025-01-15T00:00:00.000Z',
    });

    const res = await post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: '2025-02-10T00:00:00Z' });
    expect(res.statusCode, res.body).toBe(202);
    await eventually(
      async () => ((await get(`/v1/test_clocks/${clock.id}`)).json<TestClockResource>().status === 'ready' ? true : undefined),
      30_000,
      'the clock to be ready',
    );
    const after = (await get(`/v1/subscriptions/${sub.id}`)).json<SubscriptionResource>();
    expect(after.current_period_started_at).toBe('2025-02-01T00:00:00.000Z');
    // Events follow the advanced clock.
    const event = await post('/v1/events', { transaction_id: uid('tx'), external_customer_id: customer.external_id, code: metric.code });
    expect(event.statusCode, event.body).toBe(201);
    expect(event.json<EventResource>()).toMatchObject({ timestamp: '2025-02-10T00:00:00.000Z', subscription_ids: [sub.id] });
  });
});
