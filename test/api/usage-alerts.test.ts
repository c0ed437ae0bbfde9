// Usage alerts (docs/usage-alerts.md; issue 19 item 5): checked as events are ingested, one
// `usage_alert.triggered` event per crossing per period, also under concurrent events.
//
// Most subscriptions here are fixtures (no workflow) with the API clock fixed in March 2030, so
// the current period is the calendar month; the last test drives a real subscription on a test
// clock across a period boundary.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/api/app';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { CustomerResource } from '../../src/resources/customer';
import type { PlanResource } from '../../src/resources/plan';
import type { SubscriptionResource } from '../../src/resources/subscription';
import type { TestClockResource } from '../../src/resources/test-clock';
import type { UsageAlertResource, UsageAlertStatusResource, UsageAlertTriggerResource } from '../../src/resources/usage-alert';
import { insertSubscription } from '../support/catalog-fixtures';
import { eventually, expectError, expectValidationError } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';
import { startStackWorker, type StackWorker } from '../support/worker';

const NOW = new Date('2030-03-18T12:00:00.000Z');
const MARCH = new Date('2030-03-01T00:00:00.000Z');

let stack: TestStack;
let worker: StackWorker;
let org: TestOrganization;
let calls: BillableMetricResource;
const uid = (prefix: string) => `${prefix}-${randomUUID().slice(0, 8)}`;

type Headers = Record<string, string>;
const post = (url: string, payload: unknown, headers: Headers = org.headers) =>
  stack.app.inject({ method: 'POST', url, headers, payload: payload as object });
const put = (url: string, payload: unknown, headers: Headers = org.headers) =>
  stack.app.inject({ method: 'PUT', url, headers, payload: payload as object });
const get = (url: string, headers: Headers = org.headers) => stack.app.inject({ method: 'GET', url, headers });
const del = (url: string, headers: Headers = org.headers) => stack.app.inject({ method: 'DELETE', url, headers });

async function ok<T>(res: Awaited<ReturnType<typeof get>>, status: number): Promise<T> {
  expect(res.statusCode, res.body).toBe(status);
  return res.json<T>();
}

beforeAll(async () => {
  stack = await createTestStack({ now: () => NOW });
  worker = await startStackWorker(stack);
  org = await newOrg();
  calls = await createMetric(org.headers);
}, 120_000);

afterAll(async () => {
  await worker?.stop();
  await stack?.close();
});

async function newOrg(): Promise<TestOrganization> {
  return createOrganization(stack.app, { name: `Alerts ${uid('o')}`, timezone: 'UTC', events_rate_limit_per_minute: 100_000 });
}

async function createMetric(headers: Headers): Promise<BillableMetricResource> {
  return ok(await post('/v1/billable_metrics', { code: uid('calls'), name: 'API calls', aggregation_type: 'count' }, headers), 201);
}

async function createCustomer(headers: Headers = org.headers, extra: Record<string, unknown> = {}): Promise<CustomerResource> {
  return ok(await post('/v1/customers', { external_id: uid('cus'), currency: 'USD', ...extra }, headers), 201);
}

async function createPlan(charge: Record<string, unknown>, headers: Headers = org.headers, metric = calls): Promise<PlanResource> {
  return ok(
    await post(
      '/v1/plans',
      {
        code: uid('plan'),
        name: 'Plan',
        interval: 'monthly',
        amount_cents: 0,
        currency: 'USD',
        charges: [{ billable_metric_id: metric.id, ...charge }],
      },
      headers,
    ),
    201,
  );
}

const standard = { charge_model: 'standard', properties: { amount: '100' } };

/** A customer on a fixture subscription (active since March 1st) of a plan with `charge`. */
async function subscribed(charge: Record<string, unknown> = standard, o: TestOrganization = org, metric = calls) {
  const customer = await createCustomer(o.headers);
  const plan = await createPlan(charge, o.headers, metric);
  const externalId = uid('sub');
  const id = await insertSubscription(stack.db, {
    organizationId: o.id,
    customerId: customer.id,
    externalCustomerId: customer.external_id,
    planId: plan.id,
    startedAt: MARCH,
    externalId,
  });
  return { customer, plan, subscriptionId: id, externalId };
}

async function createAlert(body: Record<string, unknown>, headers: Headers = org.headers): Promise<UsageAlertResource> {
  return ok(await post('/v1/usage_alerts', body, headers), 201);
}

async function sendEvents(customer: CustomerResource, n: number, headers: Headers = org.headers, code = calls.code): Promise<void> {
  const events = Array.from({ length: n }, () => ({
    transaction_id: uid('tx'),
    external_customer_id: customer.external_id,
    code,
    timestamp: '2030-03-10T10:00:00Z',
  }));
  const body = await ok<{ ingested: number; errors: unknown[] }>(await post('/v1/events/batch', { events }, headers), 201);
  expect(body.errors).toEqual([]);
  expect(body.ingested).toBe(n);
}

async function triggersOf(alertId: string, headers: Headers = org.headers): Promise<UsageAlertTriggerResource[]> {
  return ok(await get(`/v1/usage_alerts/${alertId}/triggers`, headers), 200);
}

async function lifecycleEvents(organizationId: string, alertId: string) {
  return stack.db.models.LifecycleEvent.find({
    organization_id: organizationId,
    type: 'usage_alert.triggered',
    'object.usage_alert_id': alertId,
  }).lean();
}

describe('units alerts', () => {
  it('a one-shot alert fires once when usage reaches the threshold, and never again in the period', async () => {
    const { customer, externalId, subscriptionId } = await subscribed();
    const alert = await createAlert({
      subscription_id: externalId,
      alert_type: 'billable_metric_current_usage_units',
      billable_metric_code: calls.code,
      threshold: 10,
      name: 'Ten calls',
    });
    expect(alert).toMatchObject({
      subscription_id: subscriptionId,
      external_subscription_id: externalId,
      billable_metric_id: calls.id,
      threshold: '10.0000',
      recurring: false,
      last_triggered_at: null,
    });

    await sendEvents(customer, 9);
    expect(await triggersOf(alert.id)).toEqual([]);
    await sendEvents(customer, 1);
    const [trigger, ...rest] = await triggersOf(alert.id);
    expect(rest).toEqual([]);
    expect(trigger).toMatchObject({
      usage_alert_id: alert.id,
      crossing: 1,
      threshold_value: '10.0000',
      current_value: '10.0000',
      period_from: '2030-03-01T00:00:00.000Z',
      period_to: '2030-04-01T00:00:00.000Z',
      triggered_at: NOW.toISOString(),
    });
    await sendEvents(customer, 15);
    expect(await triggersOf(alert.id)).toHaveLength(1);

    const events = await lifecycleEvents(org.id, alert.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.object).toMatchObject({ id: trigger!.id, crossing: 1, billable_metric_code: calls.code });

    const status = await ok<UsageAlertStatusResource>(await get(`/v1/usage_alerts/${alert.id}/status`), 200);
    expect(status).toEqual({
      usage_alert_id: alert.id,
      subscription_id: subscriptionId,
      alert_type: 'billable_metric_current_usage_units',
      billable_metric_code: calls.code,
      period_from: '2030-03-01T00:00:00.000Z',
      period_to: '2030-04-01T00:00:00.000Z',
      current_value: '25.0000',
      threshold: '10.0000',
      recurring: false,
      crossings: 1,
      next_threshold_value: null,
      last_triggered_at: NOW.toISOString(),
    });
  });

  it('a recurring alert fires at each multiple of the threshold: three crossings, three triggers', async () => {
    const { customer, subscriptionId } = await subscribed();
    const alert = await createAlert({
      subscription_id: subscriptionId,
      alert_type: 'billable_metric_current_usage_units',
      billable_metric_code: calls.code,
      threshold: '5',
      recurring: true,
    });
    await sendEvents(customer, 4); // 4: none
    await sendEvents(customer, 2); // 6: the 1st
    await sendEvents(customer, 4); // 10: the 2nd
    await sendEvents(customer, 3); // 13: none
    await sendEvents(customer, 2); // 15: the 3rd
    const triggers = await triggersOf(alert.id);
    expect(triggers.map((t) => [t.crossing, t.threshold_value, t.current_value])).toEqual([
      [3, '15.0000', '15.0000'],
      [2, '10.0000', '10.0000'],
      [1, '5.0000', '6.0000'],
    ]);
    expect(await lifecycleEvents(org.id, alert.id)).toHaveLength(3);
    const status = await ok<UsageAlertStatusResource>(await get(`/v1/usage_alerts/${alert.id}/status`), 200);
    expect(status).toMatchObject({ current_value: '15.0000', crossings: 3, next_threshold_value: '20.0000' });

    // Paginated, newest first.
    const page = await get(`/v1/usage_alerts/${alert.id}/triggers?skip=1&limit=1`);
    expect(page.headers['x-total-count']).toBe('3');
    expect(page.json<UsageAlertTriggerResource[]>().map((t) => t.crossing)).toEqual([2]);
  });

  it('25 concurrent single events crossing the threshold: exactly one trigger and one lifecycle event', async () => {
    const { customer, externalId } = await subscribed();
    const alert = await createAlert({
      subscription_id: externalId,
      alert_type: 'billable_metric_current_usage_units',
      billable_metric_code: calls.code,
      threshold: 20,
    });
    // A second API instance on the same database: the crossing is decided by the unique index, not in memory.
    const other = await createTestStackOnSameDb();
    try {
      const responses = await Promise.all(
        Array.from({ length: 25 }, (_, i) =>
          (i % 2 === 0 ? stack.app : other).inject({
            method: 'POST',
            url: '/v1/events',
            headers: org.headers,
            payload: { transaction_id: uid('tx'), external_customer_id: customer.external_id, code: calls.code },
          }),
        ),
      );
      expect(responses.map((r) => r.statusCode)).toEqual(Array.from({ length: 25 }, () => 201));
    } finally {
      await other.close();
    }
    const triggers = await triggersOf(alert.id);
    expect(triggers).toHaveLength(1);
    expect(triggers[0]).toMatchObject({ crossing: 1, threshold_value: '20.0000' });
    expect(await lifecycleEvents(org.id, alert.id)).toHaveLength(1);
    expect(await stack.db.models.UsageAlertTrigger.countDocuments({ usage_alert_id: alert.id, emitted_at: null })).toBe(0);
  });
});

describe('a check that stopped between recording a crossing and emitting its event', () => {
  it('is completed by the next check of the subscription: the event goes out once, the trigger is marked', async () => {
    const { customer, externalId } = await subscribed();
    const alert = await createAlert({
      subscription_id: externalId,
      alert_type: 'billable_metric_current_usage_units',
      billable_metric_code: calls.code,
      threshold: 5,
    });
    await sendEvents(customer, 5);
    const [trigger] = await triggersOf(alert.id);
    expect(trigger).toMatchObject({ crossing: 1 });
    const { LifecycleEvent, UsageAlertTrigger } = stack.db.models;
    const unemitted = () => UsageAlertTrigger.countDocuments({ usage_alert_id: alert.id, emitted_at: null });

    // Stopped before the event was written: the trigger is recorded, nothing went out.
    await LifecycleEvent.deleteMany({ type: 'usage_alert.triggered', 'object.usage_alert_id': alert.id });
    await UsageAlertTrigger.updateOne({ usage_alert_id: alert.id }, { $set: { emitted_at: null } });
    // The next event of the subscription (no new crossing) emits it.
    await sendEvents(customer, 1);
    const events = await lifecycleEvents(org.id, alert.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.object).toMatchObject({ id: trigger!.id, crossing: 1 });
    expect(await unemitted()).toBe(0);

    // Stopped after the event was written, before the trigger was marked: emitted again, the event's
    // idempotency key keeps it one.
    await UsageAlertTrigger.updateOne({ usage_alert_id: alert.id }, { $set: { emitted_at: null } });
    await sendEvents(customer, 1);
    expect(await lifecycleEvents(org.id, alert.id)).toHaveLength(1);
    expect(await unemitted()).toBe(0);
    expect(await triggersOf(alert.id)).toHaveLength(1);
  });
});

/** A second API on the stack's database and Temporal (what another API process would be). */
async function createTestStackOnSameDb() {
  const app = await buildApp({
    config: { LOG_LEVEL: 'silent', BILLING_SIGNUP_TOKEN: undefined, BODY_LIMIT_BYTES: 1024 * 1024 },
    db: stack.db,
    temporal: stack.temporal,
    logger: false,
    now: () => NOW,
  });
  await app.ready();
  return app;
}

describe('amount alerts', () => {
  it('prices a graduated charge with the same code as current_usage, to the cent', async () => {
    // 0..10 at 100 cents, 11.. at 50 cents: 24 calls = 10*100 + 14*50 = 1700 cents.
    const graduated = {
      charge_model: 'graduated',
      properties: {
        graduated_ranges: [
          { from_value: 0, to_value: 10, per_unit_amount: '100', flat_amount: '0' },
          { from_value: 11, to_value: null, per_unit_amount: '50', flat_amount: '0' },
        ],
      },
    };
    const { customer, subscriptionId } = await subscribed(graduated);
    const byMetric = await createAlert({
      subscription_id: subscriptionId,
      alert_type: 'billable_metric_current_usage_amount',
      billable_metric_code: calls.code,
      threshold: 1700,
    });
    const total = await createAlert({ subscription_id: subscriptionId, alert_type: 'current_usage_amount', threshold: '1650.5' });
    await sendEvents(customer, 23); // 1000 + 13*50 = 1650: neither
    expect(await triggersOf(byMetric.id)).toEqual([]);
    expect(await triggersOf(total.id)).toEqual([]);
    await sendEvents(customer, 1); // 1700: both
    expect((await triggersOf(byMetric.id)).map((t) => [t.threshold_value, t.current_value])).toEqual([['1700.0000', '1700.0000']]);
    expect((await triggersOf(total.id)).map((t) => [t.threshold_value, t.current_value])).toEqual([['1650.5000', '1700.0000']]);

    const usage = await ok<{ amount_cents: string }>(
      await get(`/v1/customers/${customer.id}/current_usage?subscription_id=${subscriptionId}`),
      200,
    );
    const status = await ok<UsageAlertStatusResource>(await get(`/v1/usage_alerts/${total.id}/status`), 200);
    expect(status.current_value).toBe(usage.amount_cents);
    expect(status.current_value).toBe('1700.0000');
  });
});

describe('CRUD', () => {
  it('validates bodies with 422 and answers unknown references with 404', async () => {
    const { externalId } = await subscribed();
    const base = { subscription_id: externalId, alert_type: 'billable_metric_current_usage_units', billable_metric_code: calls.code };
    expectValidationError(await post('/v1/usage_alerts', { ...base, threshold: 0 }), 'threshold');
    expectValidationError(await post('/v1/usage_alerts', { ...base, threshold: -5 }), 'threshold');
    expectValidationError(await post('/v1/usage_alerts', { ...base, threshold: '1.23456' }), 'threshold');
    expectValidationError(await post('/v1/usage_alerts', { ...base, threshold: 5, alert_type: 'lifetime' }), 'alert_type');
    expectValidationError(
      await post('/v1/usage_alerts', { ...base, threshold: 5, billable_metric_code: undefined }),
      'billable_metric_code',
    );
    expectValidationError(
      await post('/v1/usage_alerts', {
        subscription_id: externalId,
        alert_type: 'current_usage_amount',
        billable_metric_code: calls.code,
        threshold: 5,
      }),
      'billable_metric_code',
    );
    expectError(await post('/v1/usage_alerts', { ...base, threshold: 5, colour: 'red' }), 422, 'validation_error');
    expectError(await post('/v1/usage_alerts', { ...base, threshold: 5, subscription_id: 'nope' }), 404, 'subscription_not_found');
    expectError(await post('/v1/usage_alerts', { ...base, threshold: 5, billable_metric_code: 'nope' }), 404, 'billable_metric_not_found');
    expectValidationError(await get('/v1/usage_alerts?limit=0'), 'limit');

    const alert = await createAlert({ ...base, threshold: 5 });
    expect(await ok<UsageAlertResource>(await get(`/v1/usage_alerts/${alert.id}/`), 200)).toEqual(alert);
    const list = await get(`/v1/usage_alerts?subscription_id=${externalId}`);
    expect(list.json<UsageAlertResource[]>().map((a) => a.id)).toEqual([alert.id]);
    expect(list.headers['x-total-count']).toBe('1');
    expectValidationError(await put(`/v1/usage_alerts/${alert.id}`, { threshold: 0 }), 'threshold');
    expectError(await put(`/v1/usage_alerts/${alert.id}`, { alert_type: 'current_usage_amount' }), 422, 'validation_error');
    const updated = await ok<UsageAlertResource>(
      await put(`/v1/usage_alerts/${alert.id}`, { threshold: 7, recurring: true, name: 'x' }),
      200,
    );
    expect(updated).toMatchObject({ threshold: '7.0000', recurring: true, name: 'x' });

    const deleted = await ok<UsageAlertResource>(await del(`/v1/usage_alerts/${alert.id}`), 200);
    expect(deleted.id).toBe(alert.id);
    expectError(await get(`/v1/usage_alerts/${alert.id}`), 404, 'usage_alert_not_found');
    expectError(await del(`/v1/usage_alerts/${alert.id}`), 404, 'usage_alert_not_found');
    // The last alert gone: ingestion no longer looks for this subscription's alerts.
    const sub = await stack.db.models.Subscription.collection.findOne({ external_id: externalId });
    expect(sub?.usage_alerts_count).toBe(0);
  });

  it("another organization's alert is 404 everywhere, and its subscriptions cannot be named", async () => {
    const { externalId, subscriptionId } = await subscribed();
    const alert = await createAlert({ subscription_id: subscriptionId, alert_type: 'current_usage_amount', threshold: 5 });
    const intruder = await newOrg();
    for (const url of [`/v1/usage_alerts/${alert.id}`, `/v1/usage_alerts/${alert.id}/status`, `/v1/usage_alerts/${alert.id}/triggers`]) {
      expectError(await get(url, intruder.headers), 404, 'usage_alert_not_found');
    }
    expectError(await put(`/v1/usage_alerts/${alert.id}`, { threshold: 9 }, intruder.headers), 404, 'usage_alert_not_found');
    expectError(await del(`/v1/usage_alerts/${alert.id}`, intruder.headers), 404, 'usage_alert_not_found');
    expectError(
      await post('/v1/usage_alerts', { subscription_id: externalId, alert_type: 'current_usage_amount', threshold: 5 }, intruder.headers),
      404,
      'subscription_not_found',
    );
    expect(await ok<UsageAlertResource[]>(await get('/v1/usage_alerts', intruder.headers), 200)).toEqual([]);
  });
});

describe('periods', () => {
  it('a new period re-arms a one-shot alert (test clock)', async () => {
    const clock = await ok<TestClockResource>(
      await post('/v1/test_clocks', { name: uid('clock'), frozen_time: '2030-01-01T00:00:00Z' }),
      201,
    );
    const customer = await createCustomer(org.headers, { test_clock_id: clock.id });
    const plan = await createPlan(standard);
    worker.assertAlive();
    const sub = await ok<SubscriptionResource>(
      await post('/v1/subscriptions', { external_id: uid('sub'), customer_id: customer.id, plan_id: plan.id }),
      201,
    );
    const alert = await createAlert({
      subscription_id: sub.id,
      alert_type: 'billable_metric_current_usage_units',
      billable_metric_code: calls.code,
      threshold: 3,
    });
    const advance = async (iso: string) => {
      expect((await post(`/v1/test_clocks/${clock.id}/advance`, { frozen_time: iso })).statusCode).toBe(202);
      await eventually(
        async () => {
          worker.assertAlive();
          const c = await ok<TestClockResource>(await get(`/v1/test_clocks/${clock.id}`), 200);
          return c.status === 'ready' ? c : undefined;
        },
        60_000,
        `clock at ${iso}`,
      );
    };
    const sendAt = async (iso: string, n: number) => {
      const events = Array.from({ length: n }, () => ({
        transaction_id: uid('tx'),
        external_customer_id: customer.external_id,
        code: calls.code,
        timestamp: iso,
      }));
      expect((await post('/v1/events/batch', { events })).statusCode).toBe(201);
    };

    await advance('2030-01-10T00:00:00Z');
    await sendAt('2030-01-09T10:00:00Z', 3);
    await sendAt('2030-01-09T11:00:00Z', 2);
    await advance('2030-02-05T00:00:00Z');
    await sendAt('2030-02-04T10:00:00Z', 2);
    expect(await triggersOf(alert.id)).toHaveLength(1);
    await sendAt('2030-02-04T11:00:00Z', 1);
    const triggers = await triggersOf(alert.id);
    expect(triggers.map((t) => [t.period_from, t.crossing, t.current_value, t.triggered_at])).toEqual([
      ['2030-02-01T00:00:00.000Z', 1, '3.0000', '2030-02-05T00:00:00.000Z'],
      ['2030-01-01T00:00:00.000Z', 1, '3.0000', '2030-01-10T00:00:00.000Z'],
    ]);
    expect(await lifecycleEvents(org.id, alert.id)).toHaveLength(2);
  });
});
