// Event ingestion through the API (api-contract.md "Events"): listing and reading events,
// timestamp formats, routing an event to subscriptions, batch rules, strict bodies, the rate limit
// headers, and the daily pre-aggregate (src/usage/ingest.ts).
//
// Metrics and plans are created through the API; subscriptions are inserted as fixtures (the
// subscriptions API does not exist yet). The application clock is a variable the tests set, so
// "now" (the default timestamp, created_at, the rate limit window) is known.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BillableMetricResource } from '../../src/resources/billable-metric';
import type { CustomerResource } from '../../src/resources/customer';
import type { EventResource } from '../../src/resources/event';
import type { PlanResource } from '../../src/resources/plan';
import { insertSubscription } from '../support/catalog-fixtures';
import { expectError, expectUnknownFields, expectValidationError } from '../support/http';
import { createOrganization, createTestStack, type TestOrganization, type TestStack } from '../support/stack';

/** POST /v1/events/batch's answer (its schema is private to the route). */
interface BatchJson {
  ingested: number;
  duplicates: number;
  events: EventResource[];
  errors: { index: number; code: string; message: string }[];
}

const START = new Date('2026-05-10T12:00:00.000Z');
/** START in Unix seconds. */
const START_UNIX = 1778414400;

let clock = START;
const tick = (ms = 1000) => {
  clock = new Date(clock.getTime() + ms);
};

let stack: TestStack;
let org: TestOrganization;
let seq = 0;
const uid = (label: string) => `${label}_${(seq += 1)}_${randomUUID().slice(0, 6)}`;

beforeAll(async () => {
  stack = await createTestStack({ now: () => clock });
  org = await newOrg();
});
afterAll(async () => stack?.close());

async function newOrg(extra: Record<string, unknown> = {}): Promise<TestOrganization> {
  return createOrganization(stack.app, { name: `Events Org ${uid('o')}`, events_rate_limit_per_minute: 100_000, ...extra });
}

async function createCustomer(o: TestOrganization = org): Promise<CustomerResource> {
  const res = await stack.app.inject({ method: 'POST', url: '/v1/customers', headers: o.headers, payload: { external_id: uid('cus') } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<CustomerResource>();
}

async function createMetric(body: Record<string, unknown>, o: TestOrganization = org): Promise<BillableMetricResource> {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/v1/billable_metrics',
    headers: o.headers,
    payload: { code: uid('m'), name: 'Metric', ...body },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<BillableMetricResource>();
}

/** A monthly plan with one standard charge per metric. */
async function createPlan(metrics: BillableMetricResource[], o: TestOrganization = org): Promise<PlanResource> {
  const res = await stack.app.inject({
    method: 'POST',
    url: '/v1/plans',
    headers: o.headers,
    payload: {
      code: uid('plan'),
      name: 'Plan',
      interval: 'monthly',
      charges: metrics.map((m) => ({ billable_metric_id: m.id, charge_model: 'standard', properties: { amount: '1' } })),
    },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<PlanResource>();
}

async function subscribe(
  customer: CustomerResource,
  plan: PlanResource,
  extra: { startedAt?: Date; externalId?: string; status?: 'active' | 'terminated'; endingAt?: Date } = {},
  o: TestOrganization = org,
): Promise<string> {
  const id = await insertSubscription(stack.db, {
    organizationId: o.id,
    customerId: customer.id,
    externalCustomerId: customer.external_id,
    planId: plan.id,
    startedAt: extra.startedAt ?? new Date('2026-05-01T00:00:00.000Z'),
    ...(extra.externalId ? { externalId: extra.externalId } : {}),
    ...(extra.status ? { status: extra.status } : {}),
  });
  if (extra.endingAt) {
    await stack.db.models.Subscription.updateOne({ _id: id }, { $set: { ending_at: extra.endingAt, terminated_at: extra.endingAt } });
  }
  return id;
}

const post = (payload: unknown, o: TestOrganization = org) =>
  stack.app.inject({ method: 'POST', url: '/v1/events', headers: o.headers, payload: payload as object });
const postBatch = (payload: unknown, o: TestOrganization = org) =>
  stack.app.inject({ method: 'POST', url: '/v1/events/batch', headers: o.headers, payload: payload as object });
const get = (url: string, o: TestOrganization = org) => stack.app.inject({ method: 'GET', url, headers: o.headers });

async function postOk(payload: Record<string, unknown>, o: TestOrganization = org): Promise<EventResource> {
  const res = await post(payload, o);
  expect(res.statusCode, res.body).toBe(201);
  return res.json<EventResource>();
}

describe('GET /v1/events', () => {
  it('lists newest first with X-Total-Count, filtered by external_customer_id, code, from and to', async () => {
    const o = await newOrg();
    const alice = await createCustomer(o);
    const bob = await createCustomer(o);
    const calls = await createMetric({ aggregation_type: 'count' }, o);
    const storage = await createMetric({ aggregation_type: 'sum', field_name: 'gb' }, o);
    const sent: [CustomerResource, BillableMetricResource, string][] = [
      [alice, calls, '2026-05-01T00:00:00Z'],
      [alice, storage, '2026-05-02T00:00:00Z'],
      [bob, calls, '2026-05-03T00:00:00Z'],
      [alice, calls, '2026-05-04T00:00:00Z'],
      [alice, calls, '2026-04-30T00:00:00Z'], // received last, stamped first
    ];
    const tx: string[] = [];
    for (const [customer, metric, timestamp] of sent) {
      tick();
      const event = await postOk(
        { transaction_id: uid('tx'), external_customer_id: customer.external_id, code: metric.code, timestamp, properties: { gb: 1 } },
        o,
      );
      tx.push(event.transaction_id);
    }
    const [e1, e2, e3, e4, e5] = tx;

    const list = async (query: string) => {
      const res = await get(`/v1/events${query}`, o);
      expect(res.statusCode, res.body).toBe(200);
      return { tx: res.json<EventResource[]>().map((e) => e.transaction_id), total: res.headers['x-total-count'] };
    };
    // Newest first: by reception (created_at), not by timestamp.
    expect(await list('')).toEqual({ tx: [e5, e4, e3, e2, e1], total: '5' });
    expect(await list(`?external_customer_id=${alice.external_id}`)).toEqual({ tx: [e5, e4, e2, e1], total: '4' });
    expect(await list(`?code=${calls.code}`)).toEqual({ tx: [e5, e4, e3, e1], total: '4' });
    expect(await list(`?external_customer_id=${alice.external_id}&code=${calls.code}`)).toEqual({ tx: [e5, e4, e1], total: '3' });
    // from is inclusive, to exclusive, on the event timestamp; offsets are accepted.
    expect(await list('?from=2026-05-02T00:00:00Z')).toEqual({ tx: [e4, e3, e2], total: '3' });
    expect(await list('?to=2026-05-02T00:00:00Z')).toEqual({ tx: [e5, e1], total: '2' });
    expect(await list(`?from=${encodeURIComponent('2026-05-02T02:00:00+02:00')}&to=2026-05-04T00:00:00Z`)).toEqual({
      tx: [e3, e2],
      total: '2',
    });
    // Pages keep the total.
    expect(await list('?limit=2')).toEqual({ tx: [e5, e4], total: '5' });
    expect(await list('?skip=4&limit=2')).toEqual({ tx: [e1], total: '5' });
    expect(await list('?external_customer_id=nobody')).toEqual({ tx: [], total: '0' });

    expectValidationError(await get('/v1/events?from=yesterday', o), 'from');
    expectValidationError(await get('/v1/events?limit=0', o), 'limit');
  });
});

describe('GET /v1/events/{transaction_id}', () => {
  it('returns the event, and 404 for an unknown transaction_id or one of another organization', async () => {
    const customer = await createCustomer();
    const metric = await createMetric({ aggregation_type: 'count' });
    const event = await postOk({
      transaction_id: uid('tx'),
      external_customer_id: customer.external_id,
      code: metric.code,
      timestamp: '2026-05-03T08:00:00Z',
    });
    const found = await get(`/v1/events/${encodeURIComponent(event.transaction_id)}`);
    expect(found.statusCode, found.body).toBe(200);
    expect(found.json()).toEqual(event);

    expectError(await get('/v1/events/no-such-transaction'), 404, 'event_not_found');
    const other = await newOrg();
    expectError(await get(`/v1/events/${encodeURIComponent(event.transaction_id)}`, other), 404, 'event_not_found');
    // The same transaction_id is free in the other organization, and its event is its own.
    const otherCustomer = await createCustomer(other);
    const otherMetric = await createMetric({ aggregation_type: 'count' }, other);
    const mine = await postOk(
      { transaction_id: event.transaction_id, external_customer_id: otherCustomer.external_id, code: otherMetric.code },
      other,
    );
    expect(mine.id).not.toBe(event.id);
    expect((await get(`/v1/events/${encodeURIComponent(event.transaction_id)}`)).json<EventResource>().id).toBe(event.id);
  });
});

describe('timestamps', () => {
  let customer: CustomerResource;
  let metric: BillableMetricResource;
  beforeAll(async () => {
    customer = await createCustomer();
    metric = await createMetric({ aggregation_type: 'count' });
  });
  const body = (extra: Record<string, unknown>) => ({
    transaction_id: uid('tx'),
    external_customer_id: customer.external_id,
    code: metric.code,
    ...extra,
  });

  it('accepts ISO 8601 with an offset and Unix seconds as a number or a string', async () => {
    expect((await postOk(body({ timestamp: '2026-05-10T14:00:00+02:00' }))).timestamp).toBe('2026-05-10T12:00:00.000Z');
    expect((await postOk(body({ timestamp: '2026-05-10T12:00:00.123Z' }))).timestamp).toBe('2026-05-10T12:00:00.123Z');
    expect((await postOk(body({ timestamp: START_UNIX }))).timestamp).toBe('2026-05-10T12:00:00.000Z');
    expect((await postOk(body({ timestamp: String(START_UNIX - 3600) }))).timestamp).toBe('2026-05-10T11:00:00.000Z');
    expect((await postOk(body({ timestamp: START_UNIX + 0.25 }))).timestamp).toBe('2026-05-10T12:00:00.250Z');
  });

  it('defaults to now', async () => {
    clock = new Date('2026-05-11T09:08:07.654Z');
    const event = await postOk(body({}));
    expect(event.timestamp).toBe('2026-05-11T09:08:07.654Z');
    expect(event.created_at).toBe('2026-05-11T09:08:07.654Z');
  });

  it('refuses a timestamp out of range or in another format with 422', async () => {
    for (const timestamp of ['1969-12-31T23:59:59Z', '2201-01-01T00:00:00Z', 99_999_999_999, -5, 'yesterday', '', true]) {
      const res = await post(body({ timestamp }));
      expectValidationError(res, 'timestamp');
    }
  });
});

describe('routing an event to subscriptions', () => {
  it('goes to the named subscription only; an unknown external_subscription_id is 422', async () => {
    const customer = await createCustomer();
    const calls = await createMetric({ aggregation_type: 'count' });
    const plan = await createPlan([calls]);
    const first = await subscribe(customer, plan, { externalId: uid('first') });
    const secondExternalId = uid('second');
    const second = await subscribe(customer, plan, { externalId: secondExternalId });
    const someoneElse = await createCustomer();
    const foreignExternalId = uid('foreign');
    await subscribe(someoneElse, plan, { externalId: foreignExternalId });

    const base = { external_customer_id: customer.external_id, code: calls.code, timestamp: '2026-05-05T10:00:00Z' };
    const named = await postOk({ ...base, transaction_id: uid('tx'), external_subscription_id: secondExternalId });
    expect(named).toMatchObject({ external_subscription_id: secondExternalId, subscription_ids: [second] });
    const unnamed = await postOk({ ...base, transaction_id: uid('tx') });
    expect([...unnamed.subscription_ids].sort()).toEqual([first, second].sort());

    expectValidationError(
      await post({ ...base, transaction_id: uid('tx'), external_subscription_id: 'no-such-subscription' }),
      'external_subscription_id',
    );
    // Another customer's subscription is not this customer's.
    expectValidationError(
      await post({ ...base, transaction_id: uid('tx'), external_subscription_id: foreignExternalId }),
      'external_subscription_id',
    );
    const batch = await postBatch({ events: [{ ...base, transaction_id: uid('tx'), external_subscription_id: 'no-such-subscription' }] });
    expect(batch.json<BatchJson>()).toMatchObject({ ingested: 0, errors: [{ index: 0, code: 'subscription_not_found' }] });
  });

  it('without one, goes to every active subscription whose plan charges the metric, and to none whose plan does not', async () => {
    const customer = await createCustomer();
    const calls = await createMetric({ aggregation_type: 'count' });
    const storage = await createMetric({ aggregation_type: 'sum', field_name: 'gb' });
    const uncharged = await createMetric({ aggregation_type: 'count' });
    const callsOnly = await subscribe(customer, await createPlan([calls]));
    const both = await subscribe(customer, await createPlan([calls, storage]));
    const storageOnly = await subscribe(customer, await createPlan([storage]));

    const send = (code: string) =>
      postOk({
        transaction_id: uid('tx'),
        external_customer_id: customer.external_id,
        code,
        timestamp: '2026-05-06T10:00:00Z',
        properties: { gb: 1 },
      });
    expect([...(await send(calls.code)).subscription_ids].sort()).toEqual([callsOnly, both].sort());
    expect([...(await send(storage.code)).subscription_ids].sort()).toEqual([both, storageOnly].sort());
    // A metric no plan of the customer charges: stored, attributed to nobody.
    const stray = await send(uncharged.code);
    expect(stray.subscription_ids).toEqual([]);
    expect((await get(`/v1/events/${stray.transaction_id}`)).statusCode).toBe(200);
  });

  it('gives a terminated subscription the events stamped before its ending_at, and not those after', async () => {
    const customer = await createCustomer();
    const calls = await createMetric({ aggregation_type: 'count' });
    const plan = await createPlan([calls]);
    const endedAt = new Date('2026-05-05T00:00:00.000Z');
    const ended = await subscribe(customer, plan, { status: 'terminated', startedAt: new Date('2026-04-01T00:00:00Z'), endingAt: endedAt });
    const current = await subscribe(customer, plan, { startedAt: endedAt });

    const at = (timestamp: string) =>
      postOk({ transaction_id: uid('tx'), external_customer_id: customer.external_id, code: calls.code, timestamp });
    expect((await at('2026-04-20T10:00:00Z')).subscription_ids).toEqual([ended]);
    expect((await at('2026-05-04T23:59:59.999Z')).subscription_ids).toEqual([ended]);
    expect((await at('2026-05-05T00:00:00.000Z')).subscription_ids).toEqual([current]);
    expect((await at('2026-05-09T10:00:00Z')).subscription_ids).toEqual([current]);
    // Before either started: nobody's.
    expect((await at('2026-03-15T10:00:00Z')).subscription_ids).toEqual([]);
  });

  it('does not attribute an event to a named subscription outside its life (after its ending_at, before its start)', async () => {
    const customer = await createCustomer();
    const calls = await createMetric({ aggregation_type: 'count' });
    const plan = await createPlan([calls]);
    const endedExternalId = uid('ended');
    const ended = await subscribe(customer, plan, {
      externalId: endedExternalId,
      status: 'terminated',
      startedAt: new Date('2026-04-01T00:00:00Z'),
      endingAt: new Date('2026-05-05T00:00:00Z'),
    });
    const laterExternalId = uid('later');
    const later = await subscribe(customer, plan, { externalId: laterExternalId, startedAt: new Date('2026-05-05T00:00:00Z') });

    const cases: [string, string, string][] = [
      [endedExternalId, ended, '2026-05-08T10:00:00Z'],
      [laterExternalId, later, '2026-04-20T10:00:00Z'],
    ];
    const outcomes: { status: number; attributedToNamed: boolean }[] = [];
    for (const [externalId, subscriptionId, timestamp] of cases) {
      const res = await post({
        transaction_id: uid('tx'),
        external_customer_id: customer.external_id,
        code: calls.code,
        external_subscription_id: externalId,
        timestamp,
      });
      const attributed = res.statusCode === 201 ? res.json<EventResource>().subscription_ids : [];
      outcomes.push({ status: res.statusCode, attributedToNamed: attributed.includes(subscriptionId) });
    }
    // Refused (422) or stored for nobody; either way not attributed to a subscription that did not run then.
    for (const outcome of outcomes) expect([201, 422]).toContain(outcome.status);
    expect(outcomes.map((o) => o.attributedToNamed)).toEqual([false, false]);
  });
});

describe('POST /v1/events/batch', () => {
  const event = (customer: CustomerResource, metric: BillableMetricResource, extra: Record<string, unknown> = {}) => ({
    transaction_id: uid('tx'),
    external_customer_id: customer.external_id,
    code: metric.code,
    timestamp: '2026-05-07T10:00:00Z',
    properties: { gb: 2 },
    ...extra,
  });

  it('takes 1 to 100 events: 101 or none is 422', async () => {
    const customer = await createCustomer();
    const metric = await createMetric({ aggregation_type: 'sum', field_name: 'gb' });
    const hundredOne = Array.from({ length: 101 }, () => event(customer, metric));
    expectValidationError(await postBatch({ events: hundredOne }), 'events');
    expect(await stack.db.models.Event.countDocuments({ transaction_id: { $in: hundredOne.map((e) => e.transaction_id) } })).toBe(0);
    expectValidationError(await postBatch({ events: [] }), 'events');
    expectValidationError(await postBatch({}), 'events');

    const hundred = hundredOne.slice(0, 100);
    const ok = await postBatch({ events: hundred });
    expect(ok.statusCode, ok.body).toBe(201);
    expect(ok.json<BatchJson>()).toMatchObject({ ingested: 100, duplicates: 0, errors: [] });
  });

  it('counts a duplicate inside one batch once as stored and once as duplicate', async () => {
    const customer = await createCustomer();
    const metric = await createMetric({ aggregation_type: 'sum', field_name: 'gb' });
    const subscriptionId = await subscribe(customer, await createPlan([metric]));
    const twice = event(customer, metric);
    const res = await postBatch({ events: [twice, { ...twice }, event(customer, metric, { properties: { gb: 5 } })] });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json<BatchJson>();
    expect(body).toMatchObject({ ingested: 2, duplicates: 1, errors: [] });
    expect(body.events.map((e) => e.transaction_id)).toEqual([twice.transaction_id, expect.any(String)]);
    expect(await stack.db.models.Event.countDocuments({ transaction_id: twice.transaction_id })).toBe(1);
    // The daily pre-aggregate saw the duplicate once: 2 + 5 over 2 events.
    const rows = await stack.db.models.DailyUsage.find({ subscription_id: subscriptionId }).lean();
    expect(rows.map((r) => [r.usage_date, String(r.usage_value), r.events_count])).toEqual([['2026-05-07', '7', 2]]);
  });

  it('reports an event that is not an object by its index and stores the others', async () => {
    const customer = await createCustomer();
    const metric = await createMetric({ aggregation_type: 'sum', field_name: 'gb' });
    const first = event(customer, metric);
    const last = event(customer, metric);
    const res = await postBatch({ events: [first, 'oops', 42, null, [first], last] });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json<BatchJson>();
    expect(body.ingested).toBe(2);
    expect(body.events.map((e) => e.transaction_id)).toEqual([first.transaction_id, last.transaction_id]);
    expect(body.errors.map((e) => [e.index, e.code])).toEqual([
      [1, 'validation_error'],
      [2, 'validation_error'],
      [3, 'validation_error'],
      [4, 'validation_error'],
    ]);
    for (const e of body.errors) expect(e.message.length).toBeGreaterThan(0);
  });

  it('refuses unknown fields: that event is an error in a batch, and a single POST is 422', async () => {
    const customer = await createCustomer();
    const metric = await createMetric({ aggregation_type: 'sum', field_name: 'gb' });
    const good = event(customer, metric);
    const typo = event(customer, metric, { external_customer: 'x' });
    const res = await postBatch({ events: [good, typo] });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json<BatchJson>();
    expect(body.ingested).toBe(1);
    expect(body.events.map((e) => e.transaction_id)).toEqual([good.transaction_id]);
    expect(body.errors).toHaveLength(1);
    expect(body.errors[0]).toMatchObject({ index: 1, code: 'validation_error' });
    expect(body.errors[0]!.message).toContain('external_customer');
    expectError(await get(`/v1/events/${typo.transaction_id}`), 404, 'event_not_found');

    const single = event(customer, metric, { propertys: { gb: 1 } });
    expectUnknownFields(await post(single), ['propertys']);
    expectError(await get(`/v1/events/${single.transaction_id}`), 404, 'event_not_found');
    // An unknown field of the batch body itself.
    expectUnknownFields(await postBatch({ events: [event(customer, metric)], dry_run: true }), ['dry_run']);
  });
});

describe('rate limit headers', () => {
  it('are on every answer of /v1/events*, 4xx included; no key is 401', async () => {
    clock = new Date('2026-05-12T08:00:10.000Z');
    // The current fixed window ends at 08:01:00.
    const reset = String(Date.UTC(2026, 4, 12, 8, 1, 0) / 1000);
    const o = await newOrg({ events_rate_limit_per_minute: 50 });
    const customer = await createCustomer(o);
    const metric = await createMetric({ aggregation_type: 'count' }, o);
    const txId = uid('tx');
    const answers = [
      await post({ transaction_id: txId, external_customer_id: customer.external_id, code: metric.code }, o), // 201
      await post({ transaction_id: uid('tx'), external_customer_id: customer.external_id, code: metric.code, bogus: 1 }, o), // 422
      await post({ transaction_id: txId, external_customer_id: customer.external_id, code: metric.code }, o), // 409
      await get('/v1/events/no-such-transaction', o), // 404
      await stack.app.inject({
        method: 'POST',
        url: '/v1/events',
        headers: { ...o.headers, 'content-type': 'application/json' },
        payload: '{"transaction_id": ',
      }), // 400
      await postBatch({ events: [] }, o), // 422
      await get('/v1/events?limit=5000', o), // 422
    ];
    expect(answers.map((a) => a.statusCode)).toEqual([201, 422, 409, 404, 400, 422, 422]);
    expect(
      answers.map((a) => [a.headers['x-ratelimit-limit'], a.headers['x-ratelimit-remaining'], a.headers['x-ratelimit-reset']]),
    ).toEqual([
      ['50', '49', reset],
      ['50', '48', reset],
      ['50', '47', reset],
      ['50', '46', reset],
      ['50', '45', reset],
      ['50', '44', reset],
      ['50', '43', reset],
    ]);

    expectError(await stack.app.inject({ method: 'GET', url: '/v1/events' }), 401, 'unauthorized');
    expectError(await stack.app.inject({ method: 'POST', url: '/v1/events', payload: { transaction_id: 'x' } }), 401, 'unauthorized');
    expectError(
      await stack.app.inject({
        method: 'POST',
        url: '/v1/events/batch',
        headers: { authorization: 'Bearer bsk_live_nope' },
        payload: { events: [] },
      }),
      401,
      'unauthorized',
    );
  });
});

describe('daily pre-aggregate', () => {
  it('keeps a daily_usage row only for daily-exact aggregations (count, sum, max, custom without division)', async () => {
    const customer = await createCustomer();
    const metrics = {
      count: await createMetric({ aggregation_type: 'count' }),
      sum: await createMetric({ aggregation_type: 'sum', field_name: 'v' }),
      max: await createMetric({ aggregation_type: 'max', field_name: 'v' }),
      custom: await createMetric({ aggregation_type: 'custom', field_name: 'v', expression: 'v * 2' }),
      customDivided: await createMetric({ aggregation_type: 'custom', field_name: 'v', expression: 'v / 3' }),
      unique_count: await createMetric({ aggregation_type: 'unique_count', field_name: 'v' }),
      weighted_sum: await createMetric({ aggregation_type: 'weighted_sum', field_name: 'v' }),
      latest: await createMetric({ aggregation_type: 'latest', field_name: 'v' }),
    };
    const subscriptionId = await subscribe(customer, await createPlan(Object.values(metrics)));
    const events = [
      ...Object.values(metrics).map((m) => ({ code: m.code, properties: { v: 5 } })),
      // A second, smaller value of the max metric on the same day: the row keeps the maximum.
      { code: metrics.max.code, properties: { v: 3 } },
    ].map((e, i) => ({
      ...e,
      transaction_id: uid('tx'),
      external_customer_id: customer.external_id,
      timestamp: `2026-05-08T1${i}:00:00Z`,
    }));
    const res = await postBatch({ events });
    expect(res.statusCode, res.body).toBe(201);
    const body = res.json<BatchJson>();
    expect(body).toMatchObject({ ingested: 9, errors: [] });
    for (const e of body.events) expect(e.subscription_ids).toEqual([subscriptionId]);

    const rows = await stack.db.models.DailyUsage.find({ subscription_id: subscriptionId }).lean();
    const byMetric = Object.fromEntries(
      rows.map((r) => [r.billable_metric_id, [r.usage_date, r.dimensions_key, String(r.usage_value), r.events_count]]),
    );
    expect(byMetric).toEqual({
      [metrics.count.id]: ['2026-05-08', '{}', '1', 1],
      [metrics.sum.id]: ['2026-05-08', '{}', '5', 1],
      [metrics.max.id]: ['2026-05-08', '{}', '5', 2],
      [metrics.custom.id]: ['2026-05-08', '{}', '10', 1],
    });
  });

  it('puts events with different region values, and one with an unknown region, in distinct rows by dimensions key', async () => {
    const customer = await createCustomer();
    const metric = await createMetric({
      aggregation_type: 'sum',
      field_name: 'gb',
      filters: [
        { key: 'tier', values: ['gold'] },
        { key: 'region', values: ['eu', 'us'] },
      ],
    });
    const subscriptionId = await subscribe(customer, await createPlan([metric]));
    const sent: Record<string, unknown>[] = [
      { region: 'eu', gb: 1 },
      { region: 'us', gb: 2 },
      { region: 'mars', gb: 4 }, // not a declared value: no dimension
      { gb: 8 }, // no region at all: the same row as the unknown one
      { region: 'eu', gb: 16 },
      { region: 'us', tier: 'gold', gb: 32 }, // keys sorted in the key
      { region: 'eu', tier: 'bronze', gb: 64 }, // undeclared tier dropped
    ];
    const res = await postBatch({
      events: sent.map((properties, i) => ({
        transaction_id: uid('tx'),
        external_customer_id: customer.external_id,
        code: metric.code,
        timestamp: `2026-05-09T0${i}:30:00Z`,
        properties,
      })),
    });
    expect(res.json<BatchJson>()).toMatchObject({ ingested: 7, errors: [] });

    const rows = await stack.db.models.DailyUsage.find({ subscription_id: subscriptionId }).lean();
    const byKey = Object.fromEntries(rows.map((r) => [r.dimensions_key, [r.usage_date, String(r.usage_value), r.events_count]]));
    expect(byKey).toEqual({
      '{"region":"eu"}': ['2026-05-09', '81', 3],
      '{"region":"us"}': ['2026-05-09', '2', 1],
      '{}': ['2026-05-09', '12', 2],
      '{"region":"us","tier":"gold"}': ['2026-05-09', '32', 1],
    });
  });
});
